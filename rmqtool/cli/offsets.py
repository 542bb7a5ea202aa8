"""rmqtool offsets STORE: committed consumer offsets against the consume queues; rmqtool
offsets reset STORE: set a group's offsets (a plan; --apply writes config/consumerOffset.json).

``offsets`` is a group whose default command (``show``, hidden) keeps ``rmqtool offsets
STORE`` as it was: any first word that is not a subcommand goes to it.

Rows (stdout): group, topic, queue_id, committed_offset, min_queue_offset, max_queue_offset,
lag_messages, lag_ms, next_store_timestamp, newest_store_timestamp, status, plus
pull_status, next_pull_offset and the old names min_offset, max_offset (one release).
Findings go to stderr. Exit 3 when one is an error, 1 when --group or --topic match nothing.
"""
from __future__ import annotations

import pathlib
from typing import Optional

import typer

from rmqtool.cli.params import TIME_METAVAR, complete_queue, complete_topic, examples, parse_time

from rmqtool.cli.commitlog_paths import commit_log_paths_option
from rmqtool.cli.common import OutputFormat, Written, boundary, change_made, writer_output
from rmqtool.errors import ExitCode
from rmqtool.findings import Severity
from rmqtool.report.records import with_human_times
from rmqtool.report.sink import Sink, warn
from typer.core import TyperCommand, TyperGroup

DEFAULT = "show"


class _OffsetsGroup(TyperGroup):
    """``rmqtool offsets STORE ...`` runs the default command; ``rmqtool offsets reset ...`` the subcommand."""

    def parse_args(self, ctx, args):
        if not args or args[0] not in self.commands:  # none: the default's own 'Missing argument'
            args = [DEFAULT, *args]
        return super().parse_args(ctx, args)


class _DefaultCommand(TyperCommand):
    """The default command answers to ``rmqtool offsets`` (usage, errors), not ``rmqtool offsets show``."""

    def make_context(self, info_name, args, parent=None, **extra):
        return super().make_context(parent.info_name, args, parent=parent.parent, **extra)


offsets_app = typer.Typer(cls=_OffsetsGroup,
                          help="Committed consumer offsets (rmqtool offsets STORE), and resetting them (reset).")


def register(app: typer.Typer) -> None:
    app.add_typer(offsets_app, name="offsets")


@boundary
def offsets(
    store: pathlib.Path = typer.Argument(..., help="The store root directory (holding config/)."),
    group: Optional[str] = typer.Option(None, "--group", "-g", help="Only this consumer group."),
    topic: Optional[str] = typer.Option(None, "--topic", "-t", autocompletion=complete_topic, help="Only this topic."),
    subject: Optional[str] = typer.Option(None, "--subject", "-s", help="A QMQ store: only this subject."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
    wide: bool = typer.Option(False, "--wide", help="Table: every column, not only those that fit the width."),
    columns: Optional[str] = typer.Option(None, "--columns", metavar="A,B,C", help="Table: exactly these columns."),
):
    """Committed offsets of config/consumerOffset.json: lag per queue, and what the broker does at the next pull.

    On a QMQ store: each group's progress in each subject (the action checkpoint and the
    actions after it) and its lag. To set a group's offsets on a stopped broker: rmqtool
    offsets reset --help.
    """
    from rmqtool.families import tools_at
    result = tools_at(store).offsets(store, group=group, topic=topic, subject=subject)
    table = fmt == OutputFormat.table
    with Sink(fmt.value, kind=result.kind, wide=wide, select=columns) as sink:
        for row in result.rows:
            sink.row(with_human_times(row.record()) if table else row.record())
    for line in result.notes():
        warn(line)
    for finding in result.findings:
        warn(finding.one_line())
    if any(f.severity == Severity.ERROR for f in result.findings):
        raise typer.Exit(int(ExitCode.CORRUPT))
    asked = " and ".join(f"{name} {value!r}" for name, value in (("group", group), ("topic", topic),
                                                                 ("subject", subject)) if value is not None)
    if not result.rows and asked:  # a lookup that found nothing
        warn(f"rmqtool: not found: no {result.nothing} for {asked}")
        raise typer.Exit(int(ExitCode.NOT_FOUND))


@boundary
@commit_log_paths_option("store")
def reset(
    store: pathlib.Path = typer.Argument(..., help="The store root directory (holding config/)."),
    group: str = typer.Option(..., "--group", "-g", help="The consumer group."),
    topic: str = typer.Option(..., "--topic", "-t", autocompletion=complete_topic, help="The topic."),
    to_time: Optional[str] = typer.Option(None, "--to-time", metavar=TIME_METAVAR,
                                          help="The queue offset the broker finds for this store time."),
    to_offset: Optional[int] = typer.Option(None, "--to-offset", metavar="N",
                                            help="This queue offset (clamped to each queue's min..max)."),
    to_earliest: bool = typer.Option(False, "--to-earliest", help="Each queue's min offset."),
    to_latest: bool = typer.Option(False, "--to-latest", help="Each queue's max offset (skip everything)."),
    queue: Optional[int] = typer.Option(None, "--queue", "-q", autocompletion=complete_queue, min=0,
                                        help="Only this queue id."),
    apply: bool = typer.Option(False, "--apply", help="Write config/consumerOffset.json (default: only the plan)."),
    backup_dir: Optional[pathlib.Path] = typer.Option(None, "--backup-dir", metavar="DIR",
                                                      help="--apply: where the old files go (default: beside the "
                                                           "store, named by the time)."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
    wide: bool = typer.Option(False, "--wide", help="Table: every column, not only those that fit the width."),
    columns: Optional[str] = typer.Option(None, "--columns", metavar="A,B,C", help="Table: exactly these columns."),
):
    """Reset a group's committed offsets offline (resetOffsetByTime for a stopped broker).

    Shows each queue's committed and new offset; --apply writes config/consumerOffset.json as
    the broker persists it (the old file kept as .bak), with a backup that rmqtool undo puts
    back. Refused (exit 5) while a broker holds the store.
    """
    from rmqtool.query.by_time import offset_by_time
    from rmqtool.recovery.offset_reset import ResetTarget, reset_offsets
    from rmqtool.report.columns import select_columns
    from rmqtool.report.plans import show_reset_plan

    select_columns("offset_reset", columns)  # a typo in --columns fails before --apply writes
    target = ResetTarget.of(to_time=parse_time(to_time, "--to-time"), to_offset=to_offset, to_earliest=to_earliest,
                            to_latest=to_latest)
    run = reset_offsets(store, group, topic, target, queue=queue, apply=apply, backup_dir=backup_dir,
                        offset_by_time=offset_by_time)
    applied = {"store_path": str(run.written), "backup_dir": str(run.backup_dir)} if run.written else None
    with writer_output(Written(change_made("the offsets were reset", applied)) if apply else None):
        for line in show_reset_plan(run, fmt.value, wide=wide, columns=columns):
            warn(line)


# the default command, then reset (registered once, at import, as dump's kinds are)
offsets_app.command(DEFAULT, cls=_DefaultCommand, hidden=True, epilog=examples(
    "rmqtool offsets /data/store", "rmqtool offsets /data/store --group OrderConsumers -t OrderTopic",
    "rmqtool offsets /data/store -f jsonl | jq 'select(.lag_messages > 1000)'"))(offsets)
offsets_app.command("reset", epilog=examples(
    "rmqtool offsets reset /data/store --group order_group --topic OrderTopic --to-time 2026-11-22T02:40:00Z",
    "rmqtool offsets reset /data/store -g order_group -t OrderTopic --to-earliest --apply",
    "rmqtool offsets reset /data/store -g order_group -t OrderTopic --to-offset 1200 --queue 3 -f jsonl"))(reset)
