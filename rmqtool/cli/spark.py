"""rmqtool spark export|verify|query|stats: the fleet pipeline on Spark (the spark extra).

Local mode by default; ``--master URL`` (or spark-submit) takes it to a cluster, and
``--conf KEY=VALUE`` passes Spark settings. pyspark is imported only when a command runs.
"""
from __future__ import annotations

import pathlib
from typing import List, Optional

import typer

from rmqtool.cli.common import BodyMode, OutputFormat, Stores, boundary
from rmqtool.cli.params import TIME_METAVAR, check_range, examples, parse_time
from rmqtool.errors import ExitCode, UsageError
from rmqtool.report.sink import Sink, render_document, warn
from rmqtool.spark.session import spark_errors
from rmqtool.spark.sources import check_table, export_tables, opened, session, specs, task_progress

spark_app = typer.Typer(no_args_is_help=True, help="The fleet pipeline on Spark: export, verify, query and stats "
                        "across many stores (needs the spark extra of rmqtool).")

StoresArg = typer.Argument(None, metavar="STORE", help="Store directories, or NAME=PATH (the name its rows carry; "
                           "default: the directory's name, or its parent's for a dir called store).")
StoresFromOpt = typer.Option(None, "--stores-from", metavar="FILE", help="A file of stores, one a line (# comments).")
MasterOpt = typer.Option(None, "--master", metavar="URL", help="Spark master (default local[*]; spark-submit's own "
                         "when run under it).")
ConfOpt = typer.Option([], "--conf", metavar="KEY=VALUE", help="A Spark setting (repeatable).")
FormatOpt = typer.Option(OutputFormat.table, "--format", "-f", help="table for people; jsonl or json for scripts.")
ProgressOpt = typer.Option(None, "--progress/--no-progress", help="Tasks done on stderr (default: on a terminal).")
TableOpt = typer.Option(None, "--table", metavar="DIR|URI", help="An export's directory to read instead of stores.")


def register(app: typer.Typer) -> None:
    app.add_typer(spark_app, name="spark")


def _readable(stores, stores_from, table=None) -> tuple[list, dict, Stores]:
    """(the stores to read that can be read, their views, what was said of the others): of
    several, one that cannot be read is named on stderr and left out, its code kept as the
    worst (as query and spark verify answer for the rest); a single one's error ends the
    command. With ``table`` (an export's directory, checked) none."""
    if table is not None:
        if stores or stores_from:
            raise UsageError("give stores or --table, not both")
        check_table(table)
        return [], {}, Stores(several=False)
    found, views, bad = opened(stores, stores_from)
    each = Stores(several=len(found) + len(bad) > 1)
    for exc in bad:
        each.failed(exc)
    return found, views, each


def _print(fmt: OutputFormat, sections) -> None:
    """Rows of several kinds (``sections``: (kind, rows) pairs): a table each for people; for
    scripts one output (json: one array, as dump commitlog --stats gives its two kinds)."""
    if fmt != OutputFormat.table:
        with Sink(fmt.value) as sink:
            for _kind, rows in sections:
                sink.rows(rows)
        return
    for kind, rows in sections:
        with Sink(fmt.value, kind=kind) as sink:
            sink.rows(rows)


@spark_app.command("export", epilog=examples(
    "rmqtool spark export /data/broker-a/store /data/broker-b/store --out /data/fleet",
    "rmqtool spark export --stores-from stores.txt --out hdfs-mounted/fleet --master spark://head:7077",
    "rmqtool spark export a=/data/a/store b=/data/b/store --out /tmp/fleet --split-size 67108864"))
@boundary
@spark_errors
def export(
    stores: Optional[List[str]] = StoresArg,
    out: str = typer.Option(..., "--out", metavar="DIR|URI", help="A new or empty directory for the tables, outside "
                            "the stores (or a URI pyarrow opens: hdfs://, s3://)."),
    stores_from: Optional[pathlib.Path] = StoresFromOpt,
    split_size: int = typer.Option(256 << 20, "--split-size", min=1 << 16, metavar="BYTES",
                                   help="Bytes of a segment one task reads (default 256 MiB)."),
    master: Optional[str] = MasterOpt,
    conf: List[str] = ConfOpt,
    fmt: OutputFormat = FormatOpt,
    progress: Optional[bool] = ProgressOpt,
):
    """Every message and consume queue unit of many stores into Parquet tables.

    Tables messages, consume_queue and findings, partitioned by store_name and topic. Exit 3
    when the export meets damage (exported all the same; the findings table lists what dump
    commitlog reports and what the consume queues' reading met)."""
    from rmqtool.spark.export import check_out_dir, export as run_export, store_directories

    found, views, each = _readable(stores, stores_from)  # each opened once: the tasks are planned from these views
    if not found:  # none of several could be read: each was named
        raise typer.Exit(each.worst)
    check_out_dir(out, store_directories(found, views))  # refused before Spark starts
    result = run_export(session(master, conf), found, out, views=views, split_size=split_size,
                        progress=task_progress(progress))
    render_document(result.to_json(), fmt.value, title="export")
    if result.finding_count:  # damage is exported, and said, as dump says it
        warn(f"rmqtool: {result.finding_count} finding(s) in the stores: the findings table of {out} lists them")
    worst = max(each.worst, int(ExitCode.CORRUPT) if result.error_count else 0)  # warnings alone: 0, as dump
    if worst:
        raise typer.Exit(worst)


@spark_app.command("verify", epilog=examples(
    "rmqtool spark verify /data/broker-a/store /data/broker-b/store",
    "rmqtool spark verify --stores-from stores.txt -f jsonl | jq -c 'select(.severity == \"error\")'"))
@boundary
@spark_errors
def verify(
    stores: Optional[List[str]] = StoresArg,
    stores_from: Optional[pathlib.Path] = StoresFromOpt,
    master: Optional[str] = MasterOpt,
    conf: List[str] = ConfOpt,
    fmt: OutputFormat = FormatOpt,
    progress: Optional[bool] = ProgressOpt,
    now: Optional[str] = typer.Option(None, "--now", metavar=TIME_METAVAR,
                                      help="When the brokers start next (a timer store's checks depend on it), "
                                           "as verify's --now; default: now."),
):
    """verify of many stores, as one table with a summary per store.

    A store a task; each finding row names its store_name, then a verify_summary row per
    store. Exit: the worst store's code."""
    from rmqtool.spark.verify import summary_row, verify_fleet

    found = specs(stores, stores_from)  # a store that is not there is a row of its own
    now_ms = parse_time(now, "--now")
    results = verify_fleet(session(master, conf), found, progress=task_progress(progress), now_ms=now_ms)
    _print(fmt, [("fleet_finding", [row for result in results for row in result["rows"]]),
                 ("verify_summary", [summary_row(result) for result in results])])
    for result in results:
        if result["error"]:
            warn(f"rmqtool: error: {result['store_name']}: {result['error']}")
    worst = max((r["exit_code"] for r in results), default=0)
    if worst:
        raise typer.Exit(worst)


@spark_app.command("query", epilog=examples(
    "rmqtool spark query /data/broker-a/store /data/broker-b/store --key order-42",
    "rmqtool spark query --table /data/fleet --uniq-key 7F0000010A0C18B4AAC2... -f jsonl",
    "rmqtool spark query --table /data/fleet -t OrderTopic --begin-time 2026-11-22T02:00:00Z -n 100"))
@boundary
@spark_errors
def query(
    stores: Optional[List[str]] = StoresArg,
    table: Optional[str] = TableOpt,
    stores_from: Optional[pathlib.Path] = StoresFromOpt,
    key: Optional[str] = typer.Option(None, "--key", help="A message key (KEYS), or a UNIQ_KEY."),
    uniq_key: Optional[str] = typer.Option(None, "--uniq-key", help="A client message id (UNIQ_KEY) only."),
    msg_id: Optional[str] = typer.Option(None, "--msg-id", help="An offset msgId."),
    topic: Optional[str] = typer.Option(None, "--topic", "-t", help="Only this topic (alone: every message of it)."),
    begin_time: Optional[str] = typer.Option(None, "--begin-time", metavar=TIME_METAVAR,
                                             help="Stored from (epoch ms or ISO 8601, UTC)."),
    end_time: Optional[str] = typer.Option(None, "--end-time", metavar=TIME_METAVAR,
                                           help="Stored up to (epoch ms or ISO 8601, UTC)."),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=1, help="At most this many messages a store, "
                                        "its newest (as query -n keeps them; more said on stderr)."),
    body: Optional[BodyMode] = typer.Option(None, "--body", help="Body as text, hex, base64 or none."),
    master: Optional[str] = MasterOpt,
    conf: List[str] = ConfOpt,
    fmt: OutputFormat = FormatOpt,
    progress: Optional[bool] = ProgressOpt,
):
    """Messages across a fleet, as query's rows with store_name and store_path.

    Exit 1 when none matches; 3 when a message found is damaged (bad CRC), as query."""
    from rmqtool.inspect.lookup import more_exist_note
    from rmqtool.spark.query import condition, damage_notes, find_messages, message_sections

    begin, end = parse_time(begin_time, "--begin-time"), parse_time(end_time, "--end-time")
    check_range("--begin-time", begin, "--end-time", end)
    condition(key, uniq_key, msg_id, topic, begin, end, check_only=True)  # a usage error before Spark starts
    found, views, each = _readable(stores, stores_from, table)
    rows, more = [], {}
    if found or table is not None:
        with export_tables(found, views, table, master, conf, progress) as (spark, directory):
            cond = condition(key, uniq_key, msg_id, topic, begin, end)
            mode = body.value if body else ("text" if fmt == OutputFormat.table else "base64")
            rows, more = find_messages(spark, directory, cond, body=mode, limit=limit)
    _print(fmt, message_sections(rows) if fmt == OutputFormat.table else [("message", rows)])
    for store in more:  # query's line, a store's: its newest kept
        warn(more_exist_note(limit, f"--limit {limit}", f"{store}: "))
    notes, damaged = damage_notes(rows)
    for line in notes:  # a damaged message is printed, as query prints it, and never passed off as sound
        warn(line)
    if each.worst:
        raise typer.Exit(each.worst)
    if not rows:
        warn("rmqtool: not found: no message matches")
        raise typer.Exit(int(ExitCode.NOT_FOUND))
    if damaged:
        raise typer.Exit(int(ExitCode.CORRUPT))


@spark_app.command("stats", epilog=examples(
    "rmqtool spark stats /data/broker-a/store /data/broker-b/store",
    "rmqtool spark stats --table /data/fleet -f jsonl | jq -c 'select(.record == \"duplicate_uniq_key\")'"))
@boundary
@spark_errors
def stats(
    stores: Optional[List[str]] = StoresArg,
    table: Optional[str] = TableOpt,
    stores_from: Optional[pathlib.Path] = StoresFromOpt,
    master: Optional[str] = MasterOpt,
    conf: List[str] = ConfOpt,
    fmt: OutputFormat = FormatOpt,
    progress: Optional[bool] = ProgressOpt,
):
    """Per store, topic and queue counts, and UNIQ_KEYs stored more than once.

    Per store, topic and queue: messages, bytes, time range, messages per hour; then every
    UNIQ_KEY stored more than once, with where each copy is."""
    from rmqtool.report.sink import report_findings
    from rmqtool.spark.stats import duplicate_uniq_keys, export_findings, queue_stats

    found, views, each = _readable(stores, stores_from, table)
    queues, duplicates, findings = [], [], []
    if found or table is not None:
        with export_tables(found, views, table, master, conf, progress) as (spark, directory):
            queues = queue_stats(spark, directory)
            duplicates = duplicate_uniq_keys(spark, directory)
            findings = export_findings(spark, directory)
    _print(fmt, [("stats_queue", queues), ("duplicate_uniq_key", duplicates)])
    worst = max(each.worst, report_findings(findings))  # the damage read, as dump commitlog --stats says it
    if worst:
        raise typer.Exit(worst)
