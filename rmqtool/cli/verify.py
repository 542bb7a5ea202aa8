"""rmqtool verify STORE: every check, findings as rows; exit 0 clean, 3 errors found, else the
code of what stopped the check (8 a missing path or I/O error, 4 not a store)."""
from __future__ import annotations

import pathlib
from typing import List, Optional

import typer

from rmqtool.cli.commitlog_paths import commit_log_paths_option
from rmqtool.cli.common import OutputFormat, boundary, closed_on_error
from rmqtool.cli.params import TIME_METAVAR, examples, parse_time
from rmqtool.findings import REGISTRY
from rmqtool.report.progress import Progress, progress_enabled
from rmqtool.report.sink import Sink, summary_table, warn
from rmqtool.store.cpus import default_workers
from rmqtool.verify import AREAS


def register(app: typer.Typer) -> None:
    app.command("verify", epilog=examples(
        "rmqtool verify /data/store",
        "rmqtool verify /data/store -f jsonl | jq 'select(.severity==\"error\")'",
        "rmqtool verify /data/store --only consumequeue --only index --summary"))(verify)


@boundary
@commit_log_paths_option("store")
def verify(
    store: pathlib.Path = typer.Argument(..., help="The store root directory."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
    max_errors: Optional[int] = typer.Option(None, "--max-errors", min=1,
                                             help="Stop after this many error-severity findings."),
    skip: List[str] = typer.Option([], "--skip", metavar="ID", help="Leave out a finding ID (repeatable)."),
    severity: List[str] = typer.Option([], "--severity", metavar="ID=LEVEL",
                                       help="Override a finding's severity: error, warning, info or ignore."),
    only: List[str] = typer.Option([], "--only", metavar="AREA",
                                   help=f"Check only these areas ({', '.join(AREAS)}; repeatable)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1,
                                       help="Processes scanning the commit log (default: every core)."),
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress",
                                            help="A progress bar on stderr (default: when stderr is a terminal)."),
    summary: bool = typer.Option(False, "--summary", help="A closing table of counts by finding ID, on stderr."),
    wide: bool = typer.Option(False, "--wide", help="Table: every column, not only those that fit the width."),
    columns: Optional[str] = typer.Option(None, "--columns", metavar="A,B,C", help="Table: exactly these columns."),
    now: Optional[str] = typer.Option(None, "--now", metavar=TIME_METAVAR,
                                      help="When the broker starts next (the timer store's checks depend on it); default: now."),
):
    """Check every file of a store; one finding a row. Exit 0: no error; 3: errors found; 4: not a store;
    8: not checked (missing path, I/O error)."""
    from rmqtool.families import tools_at
    from rmqtool.verify.base import VerifyOptions, parse_overrides

    options = VerifyOptions(only=tuple(only) or AREAS, overrides=parse_overrides(skip, severity),
                            max_errors=max_errors, jobs=jobs or default_workers(), now_ms=parse_time(now, "--now"))
    tools = tools_at(store)  # the store's family brings its checks, and the fields its rows have
    sink = Sink(fmt.value, kind=tools.finding_kind, wide=wide, select=columns)
    # not a store that can be checked: nothing on stdout
    run = tools.verify(tools.open_view(store, purpose="verify"), options)
    if run.live is not None:
        warn(run.live.note())
    bar = Progress("verify", run.total_bytes) if progress_enabled(progress) else None
    if bar is not None:
        run.progress = bar.advance
    with closed_on_error(bar, sink):  # the store could not be checked: what was found so far is printed
        for f in run.findings():
            sink.row(f.to_json())
    if run.stopped:
        warn(f"rmqtool: stopped after {run.errors} error finding(s) (--max-errors {max_errors}); "
             f"the store was not checked to the end")
    if summary:
        summary_table((finding_id, options.overrides.get(finding_id, REGISTRY[finding_id][0].value), count)
                      for finding_id, count in sorted(run.counts.items()))
    elif run.errors:
        warn(f"rmqtool: {sum(run.counts.values())} finding(s), {run.errors} of them errors")
    if run.next_start is not None and run.next_start.error:
        warn(f"rmqtool: the broker's next start could not be simulated ({run.next_start.error}): "
             f"run rmqtool recover to see what it does")
    if run.next_start_drops:
        warn(f"rmqtool: the next broker start drops {run.next_start_drops} messages: run rmqtool salvage or "
             f"recover first")
    raise typer.Exit(run.exit_code)
