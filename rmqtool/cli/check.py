"""rmqtool check STORE...: a monitoring probe for Nagios and Prometheus (rmqtool/inspect/check.py).

Prints one status line (``RMQTOOL CHECK OK - ... | perfdata``), or with ``-f jsonl``/``json``
the measures as ``check_measure`` rows; exits with the Nagios state: 0 OK, 1 WARNING,
2 CRITICAL, 3 UNKNOWN (a store that is missing or cannot be read, or the ``--prometheus``
file not written: the status line is still printed, and the reason on stderr).
"""
from __future__ import annotations

import pathlib
from typing import List, Optional

import typer

from rmqtool.cli.commitlog_paths import commit_log_paths_option
from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.cli.params import NAGIOS_CODES, examples, parse_time
from rmqtool.inspect.check_defaults import RECOVERY_RATE, TAIL_BYTES
from rmqtool.report.sink import Sink, warn as say, write_line  # warn: the --warn option here


def register(app: typer.Typer) -> None:
    app.command("check", epilog=examples(
        "rmqtool check /data/store", "rmqtool check /data/store --warn lag_ms=5000 --crit lag_ms=60000",
        "rmqtool check /data/store --prometheus /var/lib/node_exporter/rmqtool.prom -f jsonl",
        exit_codes=NAGIOS_CODES))(check)


@boundary
@commit_log_paths_option("stores")
def check(
    stores: List[pathlib.Path] = typer.Argument(..., help="Store root directories (read only, live or stopped)."),
    warn: Optional[List[str]] = typer.Option(None, "--warn", metavar="MEASURE=VALUE",
                                             help="WARNING at or above this value (repeatable; overrides the default)."),
    crit: Optional[List[str]] = typer.Option(None, "--crit", metavar="MEASURE=VALUE",
                                             help="CRITICAL at or above this value (repeatable; overrides the default)."),
    prometheus: Optional[pathlib.Path] = typer.Option(None, "--prometheus", metavar="FILE",
                                                      help="Also write a node_exporter textfile-collector file (atomically)."),
    now: Optional[str] = typer.Option(None, "--now", help="The clock (epoch ms or ISO 8601; default: now)."),
    tail_bytes: int = typer.Option(TAIL_BYTES, "--tail-bytes", min=1, help="Commit log tail checked for damage."),
    recovery_rate: float = typer.Option(RECOVERY_RATE, "--recovery-rate", help="Bytes/s of the recovery estimate."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table (the status line), jsonl or json."),
):
    """A monitoring probe: dispatch lag, unflushed window, recovery time, disk, consumer lag, tail damage."""
    from rmqtool.families import tools_at
    from rmqtool.inspect.check import run_check
    result = run_check(stores, warn=warn, crit=crit, now=parse_time(now, "--now"), tail_bytes=tail_bytes,
                       recovery_rate=recovery_rate, prometheus=prometheus,
                       check_one=lambda path, **kw: tools_at(path).check(path, **kw))  # each store its family's
    if fmt == OutputFormat.table:
        write_line(result.status_line())
    else:
        with Sink(fmt.value, kind="check_measure") as sink:
            sink.rows(result.rows())
        for line in result.unknown_lines():  # the table's status line names them; here stderr does
            say(f"rmqtool: error: {line}")
    if result.not_written is not None:  # the status is still said (and exits 0-3); the failure too
        say(f"rmqtool: error: {result.not_written}")
    raise typer.Exit(result.exit_code)
