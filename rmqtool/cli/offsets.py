"""rmqtool offsets STORE: committed consumer offsets against the consume queues.

Rows (stdout): group, topic, queue_id, committed_offset, min_queue_offset, max_queue_offset,
lag_messages, lag_ms, next_store_timestamp, newest_store_timestamp, status, plus
pull_status, next_pull_offset and the old names min_offset, max_offset (one release).
Findings go to stderr. Exit 3 when one is an error, 1 when --group or --topic match nothing.
"""
from __future__ import annotations

import pathlib
from typing import Optional

import typer

from rmqtool.cli.params import complete_topic, examples

from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.errors import ExitCode
from rmqtool.findings import Severity
from rmqtool.store.consumer_offsets import consumer_offsets
from rmqtool.report.records import with_human_times
from rmqtool.report.sink import Sink, warn


def register(app: typer.Typer) -> None:
    app.command("offsets", epilog=examples(
        "rmqtool offsets /data/store", "rmqtool offsets /data/store --group OrderConsumers -t OrderTopic",
        "rmqtool offsets /data/store -f jsonl | jq 'select(.lag_messages > 1000)'"))(offsets)


@boundary
def offsets(
    store: pathlib.Path = typer.Argument(..., help="The store root directory (holding config/)."),
    group: Optional[str] = typer.Option(None, "--group", "-g", help="Only this consumer group."),
    topic: Optional[str] = typer.Option(None, "--topic", "-t", autocompletion=complete_topic, help="Only this topic."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
    wide: bool = typer.Option(False, "--wide", help="Table: every column, not only those that fit the width."),
    columns: Optional[str] = typer.Option(None, "--columns", metavar="A,B,C", help="Table: exactly these columns."),
):
    """Committed offsets of config/consumerOffset.json: lag per queue, and what the broker does at the next pull."""
    result = consumer_offsets(store, group=group, topic=topic)
    table = fmt == OutputFormat.table
    with Sink(fmt.value, kind="offset", wide=wide, select=columns) as sink:
        for row in result.rows:
            sink.row(with_human_times(row.record()) if table else row.record())
    if result.config is not None and result.config.source is None:
        warn("note: no consumerOffset.json (nor .bak) in config/: no committed offsets")
    for finding in result.findings:
        warn(finding.one_line())
    if any(f.severity == Severity.ERROR for f in result.findings):
        raise typer.Exit(int(ExitCode.CORRUPT))
    if not result.rows and (group is not None or topic is not None):  # a lookup that found nothing
        asked = " and ".join(f"{name} {value!r}" for name, value in (("group", group), ("topic", topic))
                             if value is not None)
        warn(f"rmqtool: not found: no committed offset for {asked}")
        raise typer.Exit(int(ExitCode.NOT_FOUND))
