"""rmqtool dump commitlog|consumequeue|cqext|dledger|index|checkpoint|config PATH (a RocketMQ store),
rmqtool dump compactionlog|compactioncq|positioncheckpoint PATH (its 5.x compaction store),
rmqtool dump epochfile PATH (controller mode's epochFileCheckpoint),
rmqtool dump messagelog|consumerlog|actionlog|pulllog|checkpoint PATH (a QMQ store)

PATH is a store directory or a single file of that kind. Rows go to stdout in the chosen
format; damage is shown as rows too (record "corrupt") and sets exit code 3.
"""
from __future__ import annotations

import contextlib
import itertools
import pathlib
from typing import List, Optional

import typer

from rmqtool.cli.commitlog_paths import commit_log_paths_option
from rmqtool.cli.common import BodyMode, OutputFormat, boundary, until_interrupted
from rmqtool.cli.params import (OFFSET_METAVAR, TABLE_BODY_PREVIEW, TIME_METAVAR, ColumnsOpt, WideOpt, check_range,
                                complete_queue, complete_topic, examples, parse_time)
from rmqtool.errors import UsageError
from rmqtool.inspect.commitlog_dumps import chained, commitlog_dumps, in_parallel, parallel_jsonl, settled_findings
from rmqtool.inspect.selection import SYS_FLAG_NAMES, MessageSelection
from rmqtool.report.progress import Progress, progress_enabled
from rmqtool.report.records import with_human_times
from rmqtool.report.sink import Sink, render_document, report_findings, warn
from rmqtool.store.cpus import default_workers

# A process dumps one kind: each kind's rows are imported by its command (issue 27, start-up).

dump_app = typer.Typer(no_args_is_help=True, help="Dump store files as rows (table, JSON Lines or JSON).")

FormatOpt = typer.Option(OutputFormat.table, "--format", "-f", help="table for people; jsonl or json for scripts.")
LimitOpt = typer.Option(None, "--limit", "-n", min=0, help="Stop after this many rows.")
TopicOpt = typer.Option(None, "--topic", "-t", autocompletion=complete_topic, help="Only this topic.")
QueueOpt = typer.Option(None, "--queue", "-q", autocompletion=complete_queue, min=0, help="Only this queue id.")
# a queue's units from one queue offset to another (dump consumequeue, dump rocksdbcq)
FromQueueOffsetOpt = typer.Option(None, "--from-offset", min=0, metavar=OFFSET_METAVAR, help="First queue offset.")
ToQueueOffsetOpt = typer.Option(None, "--to-offset", min=0, metavar=OFFSET_METAVAR,
                                help="Stop before this queue offset.")


def register(app: typer.Typer) -> None:
    app.add_typer(dump_app, name="dump")


@dump_app.command("commitlog", epilog=examples(
    "rmqtool dump commitlog /data/store -n 20",
    "rmqtool dump commitlog /data/store -t OrderTopic -q 0 -f jsonl",
    "rmqtool dump commitlog /data/store --stats",
    "rmqtool dump commitlog /data/store --follow -f jsonl | jq -c .topic"))
@boundary
@commit_log_paths_option("paths")
def dump_commitlog(
    paths: List[pathlib.Path] = typer.Argument(..., metavar="PATH", help="Store dirs, commitlog/ dirs, or commit "
                                               "log segment files (one or more; rows in the order given)."),
    fmt: OutputFormat = FormatOpt,
    topic: Optional[str] = TopicOpt,
    queue: Optional[int] = QueueOpt,
    from_offset: Optional[int] = typer.Option(None, "--from-offset", min=0, metavar=OFFSET_METAVAR,
                                              help="First commit log offset (a record start)."),
    to_offset: Optional[int] = typer.Option(None, "--to-offset", min=0, metavar=OFFSET_METAVAR,
                                            help="Stop before this commit log offset."),
    begin_time: Optional[str] = typer.Option(None, "--begin-time", metavar=TIME_METAVAR,
                                             help="Store time from (epoch ms or ISO 8601, UTC)."),
    end_time: Optional[str] = typer.Option(None, "--end-time", metavar=TIME_METAVAR,
                                           help="Store time up to (epoch ms or ISO 8601, UTC)."),
    limit: Optional[int] = LimitOpt,
    body: Optional[BodyMode] = typer.Option(None, "--body", help="Body as text, hex, base64 or none "
                                            "(default: base64 in JSON, a text preview in a table)."),
    decompress: bool = typer.Option(False, "--decompress", help="Decompress compressed bodies (zlib, lz4, zstd)."),
    no_crc: bool = typer.Option(False, "--no-crc", help="Skip the body CRC check (faster)."),
    show_blank: bool = typer.Option(False, "--show-blank", help="Also emit end-of-file blank records as rows."),
    decode_system: bool = typer.Option(False, "--decode-system", help="Add `system`: what a record of a system "
                                       "topic means (transaction half/op and its state, delayed, timer, POP revive), "
                                       "with the real topic and queue."),
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="Progress on stderr, by "
                                            "bytes (default: when stderr is a terminal; --progress forces it)."),
    wide: bool = WideOpt,
    columns: Optional[str] = ColumnsOpt,
    stats: bool = typer.Option(False, "--stats", help="A summary instead of the records: per topic and queue "
                               "messages, bytes, time range; damage by finding ID."),
    tag: Optional[str] = typer.Option(None, "--tag", help="Only messages with this TAGS value."),
    key: Optional[str] = typer.Option(None, "--key", help="Only messages with this key (one of KEYS, or UNIQ_KEY)."),
    sys_flag: List[str] = typer.Option([], "--sys-flag", metavar="|".join(SYS_FLAG_NAMES),
                                       help="Only records showing this sysFlag (repeatable: any of them)."),
    msg_id: Optional[str] = typer.Option(None, "--msg-id", help="Only the message with this offset msgId."),
    served_only: bool = typer.Option(False, "--served-only", help="Only what the broker serves after its next "
                                     "start's recovery (leave out stale bytes past where recovery cuts the log)."),
    follow: bool = typer.Option(False, "--follow", help="After the last record, keep printing records as they are "
                                "appended (Ctrl-C stops)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="Processes building JSON Lines rows "
                                       "(default: every core, for a large jsonl dump)."),
):
    """Every record of the commit log: messages, end-of-file blanks, and damaged regions.

    A store a running broker holds is read up to its written end when the read begins (said
    on stderr); what is being written past it is not reported as damage."""
    table = fmt == OutputFormat.table
    check_range("--from-offset", from_offset, "--to-offset", to_offset)
    check_range("--begin-time", parse_time(begin_time, "--begin-time"), "--end-time", parse_time(end_time, "--end-time"))
    if len(paths) > 1 and (served_only or follow):
        raise UsageError(f"{'--follow' if follow else '--served-only'} takes one path")
    if follow and (to_offset is not None or stats):
        raise UsageError(f"--follow does not go with {'--to-offset' if to_offset is not None else '--stats'} "
                         f"(it has no end)")
    selection = MessageSelection(topic, queue, parse_time(begin_time, "--begin-time"),
                                 parse_time(end_time, "--end-time"), tag, key, tuple(sys_flag), msg_id)
    dumps, lives = commitlog_dumps(paths, selection, from_offset, to_offset, limit, served_only=served_only,
                                   body=body.value if body else ("text" if table else "base64"),
                                   preview=TABLE_BODY_PREVIEW if table and body is None else None,
                                   decompress=decompress, check_crc=not no_crc, show_blank=show_blank,
                                   decode_system=decode_system)
    for live in lives:
        warn(live.note())
    sink = Sink(fmt.value, kind="stats_queue" if stats else "message_system" if decode_system else "message",
                wide=wide, select=columns)
    bar = Progress("scanning", sum(d.total_bytes for d in dumps)) if progress_enabled(progress) and not follow \
        else None
    with bar or contextlib.nullcontext():
        if follow:
            with until_interrupted():  # how --follow ends: what was read is out, exit as usual
                for row in dumps[0].follow(on_idle=sink.flush):  # a row at a time: flushed when idle
                    sink.row(row)
        elif stats:
            from rmqtool.inspect.stats import commitlog_stats
            sink.rows(commitlog_stats(dumps, bar))
        elif fmt == OutputFormat.jsonl and in_parallel(jobs, dumps, limit):
            parallel_jsonl(sink, dumps, limit, jobs or default_workers(), bar)
        else:
            sink.rows(chained(dumps, limit, bar, encoded=fmt.value))
    _finish(sink, settled_findings(dumps, lives), sum(d.damaged for d in dumps))


def _finish(sink: Sink | None, findings: list, damaged: int = 0, *, side: tuple | None = None) -> None:
    """Close the sink, say the findings; ``side`` (path, kind): a side store the root lacks is said."""
    if sink is not None:
        sink.close()
    if side is not None:
        from rmqtool.inspect.side_stores import absent_note
        note = absent_note(*side)
        if note is not None:
            warn(f"rmqtool: {note}")
    code = report_findings(findings, damaged)
    if code:
        raise typer.Exit(code)


@dump_app.command("consumequeue", epilog=examples(
    "rmqtool dump consumequeue /data/store -t OrderTopic -q 0",
    "rmqtool dump consumequeue /data/store/consumequeue/OrderTopic/0/00000000000000000000 -f jsonl"))
@boundary
def dump_consumequeue(
    path: pathlib.Path = typer.Argument(..., help="Store dir, consumequeue/ (or batchconsumequeue/) dir, "
                                        "a topic or queue dir, or one consume queue file."),
    fmt: OutputFormat = FormatOpt,
    topic: Optional[str] = TopicOpt,
    queue: Optional[int] = QueueOpt,
    from_offset: Optional[int] = FromQueueOffsetOpt,
    to_offset: Optional[int] = ToQueueOffsetOpt,
    limit: Optional[int] = LimitOpt,
    wide: bool = WideOpt,
    columns: Optional[str] = ColumnsOpt,
):
    """Consume queue units (20 B; 46 B batch units in batchconsumequeue/), fill units included."""
    from rmqtool.inspect import dump_sources
    check_range("--from-offset", from_offset, "--to-offset", to_offset)
    findings: list = []
    sink = Sink(fmt.value, kind="cq_unit", wide=wide, select=columns)
    rows = dump_sources.consume_queue_rows(path, topic, queue, from_offset, to_offset, findings)
    sink.rows(itertools.islice(rows, limit))
    _finish(sink, findings)


@dump_app.command("cqext", epilog=examples(
    "rmqtool dump cqext /data/store -t OrderTopic -q 0",
    "rmqtool dump cqext /data/store/consumequeue_ext/OrderTopic/0/00000000000000000000 -f jsonl"))
@boundary
def dump_cqext(
    path: pathlib.Path = typer.Argument(..., help="Store dir, consumequeue_ext/ dir, a topic or queue dir, "
                                        "or one ext file."),
    fmt: OutputFormat = FormatOpt,
    topic: Optional[str] = TopicOpt,
    queue: Optional[int] = QueueOpt,
    limit: Optional[int] = LimitOpt,
    wide: bool = WideOpt,
    columns: Optional[str] = ColumnsOpt,
):
    """ConsumeQueueExt units (enableConsumeQueueExt): real tagsCode, store time, filter bit map."""
    from rmqtool.inspect.cqext_rows import cqext_rows
    findings: list = []
    sink = Sink(fmt.value, kind="cq_ext_unit", wide=wide, select=columns)
    sink.rows(itertools.islice(cqext_rows(path, topic, queue, findings), limit))
    _finish(sink, findings, side=(path, "cqext"))


@dump_app.command("dledger", epilog=examples(
    "rmqtool dump dledger /data/store -n 20",
    "rmqtool dump dledger /data/store/dledger-n0 --index -f jsonl"))
@boundary
def dump_dledger(
    path: pathlib.Path = typer.Argument(..., help="Store dir, its dledger-<selfId> dir (enableDLegerCommitLog), "
                                        "or one of its data or index files."),
    fmt: OutputFormat = FormatOpt,
    index: bool = typer.Option(False, "--index", help="The entry index's 32-byte units instead of the entries."),
    from_index: Optional[int] = typer.Option(None, "--from-index", min=0, help="First entry index."),
    to_index: Optional[int] = typer.Option(None, "--to-index", min=0, help="Stop before this entry index."),
    no_crc: bool = typer.Option(False, "--no-crc", help="Skip the records' body CRC check (faster)."),
    limit: Optional[int] = LimitOpt,
    wide: bool = WideOpt,
    columns: Optional[str] = ColumnsOpt,
):
    """DLedger entries (header: index, term, pos, size, magic, CRC fields) with the commit log
    record inside each, blank fills and damage; --index: the index units. Damage: exit 3."""
    from rmqtool.inspect.dledger import dledger_rows
    check_range("--from-index", from_index, "--to-index", to_index)
    findings: list = []
    sink = Sink(fmt.value, kind="dledger_index_unit" if index else "dledger_entry", wide=wide, select=columns)
    rows = dledger_rows(path, findings, index=index, check_crc=not no_crc, from_index=from_index, to_index=to_index)
    sink.rows(itertools.islice(rows, limit))
    _finish(sink, findings)


@dump_app.command("index", epilog=examples(
    "rmqtool dump index /data/store --headers-only",
    "rmqtool dump index /data/store/index/20240601000000000 -n 50"))
@boundary
def dump_index(
    path: pathlib.Path = typer.Argument(..., help="Store dir, index/ dir, or one index file."),
    fmt: OutputFormat = FormatOpt,
    headers_only: bool = typer.Option(False, "--headers-only", help="Only each file's 40-byte header."),
    slots: bool = typer.Option(False, "--slots", help="Also the hash slots in use."),
    limit: Optional[int] = LimitOpt,
    wide: bool = WideOpt,
    columns: Optional[str] = ColumnsOpt,
):
    """Index file headers and entries (keyHash, phyOffset, timeDiff, prevIndex)."""
    if headers_only and slots:  # slots would be silently left out: say so instead
        raise UsageError("--headers-only and --slots do not go together (slots are not part of the header)")
    from rmqtool.inspect import dump_sources
    findings: list = []
    sink = Sink(fmt.value, kind="index_header" if headers_only else "index_entry", wide=wide, select=columns)
    rows = dump_sources.index_rows(path, entries=not headers_only, slots=slots, findings=findings)
    sink.rows(itertools.islice(map(with_human_times, rows), limit))
    _finish(sink, findings)


@dump_app.command("checkpoint", epilog=examples(
    "rmqtool dump checkpoint /data/store",
    "rmqtool dump checkpoint /data/store/checkpoint -f json",
    "rmqtool dump checkpoint /data/qmq-store -f jsonl   # QMQ: every snapshot, the loaded one marked"))
@boundary
def dump_checkpoint(
    path: pathlib.Path = typer.Argument(..., help="Store dir or the checkpoint file (QMQ: the store dir, "
                                        "checkpoint/ or one snapshot)."),
    fmt: OutputFormat = FormatOpt,
):
    """The checkpoint: physic, logics and index timestamps (and 5.x masterFlushedOffset, confirmPhyOffset);
    on a QMQ store every message and action checkpoint snapshot, and which one a start loads."""
    from rmqtool.store.qmq.view import qmq_root_of
    if qmq_root_of(path) is not None:
        _qmq_rows(path, "checkpoint", fmt, None, False, None)
        return
    from rmqtool.inspect import dump_sources
    findings: list = []
    row = with_human_times(dump_sources.checkpoint_row(path, findings))
    render_document(row, fmt.value, title="checkpoint")
    _finish(None, findings)


@dump_app.command("config", epilog=examples(
    "rmqtool dump config /data/store",
    "rmqtool dump config /data/store/config/consumerOffset.json -f json"))
@boundary
def dump_config(
    path: pathlib.Path = typer.Argument(..., help="Store dir, config/ dir, or one config/*.json file."),
    fmt: OutputFormat = FormatOpt,
    wide: bool = WideOpt,
):
    """config/*.json as parsed (fastjson's unquoted integer keys become strings); .bak used as the broker would."""
    from rmqtool.inspect import dump_sources
    findings: list = []
    sink = Sink(fmt.value, kind="config", wide=wide)
    for row in dump_sources.config_rows(path, findings):
        sink.row(row)
    _finish(sink, findings, side=(path, "config"))


# --- the 5.x compaction store (compaction/) ------------------------------------------------------

@dump_app.command("compactionlog", epilog=examples(
    "rmqtool dump compactionlog /data/store -t UserProfileTopic -q 0",
    "rmqtool dump compactionlog /data/store/compaction/compactionLog/UserProfileTopic/0/00000000000000000000 -f jsonl"))
@boundary
def dump_compactionlog(
    path: pathlib.Path = typer.Argument(..., help="Store dir, its compaction/ dir, or one compaction log file."),
    fmt: OutputFormat = FormatOpt,
    topic: Optional[str] = TopicOpt,
    queue: Optional[int] = QueueOpt,
    limit: Optional[int] = LimitOpt,
    wide: bool = WideOpt,
    columns: Optional[str] = ColumnsOpt,
):
    """Compaction log records (5.x COMPACTION topics): queue offset, compaction log offset, key, tombstones."""
    from rmqtool.inspect import compaction_dumps
    findings: list = []
    damaged: list = []
    sink = Sink(fmt.value, kind="compaction_record", wide=wide, select=columns)
    rows = compaction_dumps.compaction_log_rows(path, topic, queue, findings, damaged)
    sink.rows(itertools.islice(rows, limit))
    _finish(sink, findings, len(damaged), side=(path, "compactionlog"))


@dump_app.command("compactioncq", epilog=examples(
    "rmqtool dump compactioncq /data/store -t UserProfileTopic -q 0"))
@boundary
def dump_compactioncq(
    path: pathlib.Path = typer.Argument(..., help="Store dir, its compaction/ dir, or one compaction queue file."),
    fmt: OutputFormat = FormatOpt,
    topic: Optional[str] = TopicOpt,
    queue: Optional[int] = QueueOpt,
    limit: Optional[int] = LimitOpt,
    wide: bool = WideOpt,
    columns: Optional[str] = ColumnsOpt,
):
    """Compaction queue units (46 B, as batch consume queue units), END_POSITION units included."""
    from rmqtool.inspect import compaction_dumps
    findings: list = []
    sink = Sink(fmt.value, kind="compaction_unit", wide=wide, select=columns)
    sink.rows(itertools.islice(compaction_dumps.compaction_cq_rows(path, topic, queue, findings), limit))
    _finish(sink, findings, side=(path, "compactioncq"))


@dump_app.command("positioncheckpoint", epilog=examples(
    "rmqtool dump positioncheckpoint /data/store",
    "rmqtool dump positioncheckpoint /data/store/compaction/position-checkpoint.bak -f jsonl"))
@boundary
def dump_positioncheckpoint(
    path: pathlib.Path = typer.Argument(..., help="Store dir, its compaction/ dir, or position-checkpoint (.bak)."),
    fmt: OutputFormat = FormatOpt,
):
    """compaction/position-checkpoint: each compacted queue's last compacted queue offset."""
    from rmqtool.inspect import compaction_dumps
    findings: list = []
    sink = Sink(fmt.value, kind="position_checkpoint")
    sink.rows(compaction_dumps.position_checkpoint_rows(path, findings))
    _finish(sink, findings, side=(path, "positioncheckpoint"))


@dump_app.command("epochfile", epilog=examples(
    "rmqtool dump epochfile /data/store",
    "rmqtool dump epochfile /data/store/epochFileCheckpoint.bak -f jsonl"))
@boundary
def dump_epochfile(
    path: pathlib.Path = typer.Argument(..., help="Store dir, or epochFileCheckpoint (or its .bak)."),
    fmt: OutputFormat = FormatOpt,
):
    """Controller mode's epochs: a store's as the broker loads them (from the file or its .bak),
    each with the commit log range its master wrote; a file named: its lines."""
    from rmqtool.inspect.controller_rows import EpochDump, epoch_rows
    dump = EpochDump()
    sink = Sink(fmt.value, kind="epoch_entry")
    sink.rows(epoch_rows(path, dump))
    if dump.note:
        warn(f"rmqtool: {dump.note}")
    _finish(sink, dump.findings)


# --- QMQ's store (the family's dump kinds: families/qmq.py) -----------------------------------

QMQ_KINDS = {"messagelog": "qmq_message", "consumerlog": "qmq_unit", "actionlog": "qmq_action",
             "pulllog": "qmq_pull", "checkpoint": "qmq_checkpoint"}


def _qmq_rows(path: pathlib.Path, kind: str, fmt: OutputFormat, limit: Optional[int], wide: bool,
              columns: Optional[str], *, body: str = "base64", subject: Optional[str] = None) -> None:
    from rmqtool.inspect.qmq.dumps import dump_rows
    from rmqtool.store.qmq.view import require_qmq_root
    root = require_qmq_root(path, f"dump {kind}")
    sink = Sink(fmt.value, kind=QMQ_KINDS[kind], wide=wide, select=columns)
    damaged = 0

    def tallied(rows):
        nonlocal damaged
        for row in rows:
            damaged += row.get("record") == "corrupt" or row.get("payload_crc_ok") is False
            yield with_human_times(row)

    notes: list = []
    findings: list = []  # each damaged record's, naming its file and position
    rows = dump_rows(root, kind, body=body, subject=subject, only=None if path == root else path, notes=notes,
                     findings=findings)
    for note in notes:
        warn(f"rmqtool: {note}")
    sink.rows(itertools.islice(tallied(rows), limit))
    _finish(sink, findings, damaged)


def _qmq_command(kind: str, what: str, *examples_: str):
    @dump_app.command(kind, epilog=examples(*examples_))
    @boundary
    def command(
        path: pathlib.Path = typer.Argument(..., help=f"A QMQ store dir, its {kind}/ dir, or one {kind} file."),
        fmt: OutputFormat = FormatOpt,
        limit: Optional[int] = LimitOpt,
        wide: bool = WideOpt,
        columns: Optional[str] = ColumnsOpt,
        body: BodyMode = typer.Option(BodyMode.base64, "--body", help="messagelog: how to show each body."),
        subject: Optional[str] = typer.Option(None, "--subject", "-s", help="consumerlog: only this subject."),
    ):
        _qmq_rows(path, kind, fmt, limit, wide, columns, body=body.value, subject=subject)
    command.__doc__ = what
    command.__name__ = f"dump_{kind}"
    return command


_qmq_command("messagelog", "QMQ's message log records (payload decoded: message id, tags, attributes); damage "
             "as corrupt rows.", "rmqtool dump messagelog /data/qmq-store -n 20",
             "rmqtool dump messagelog /data/qmq-store --body text -f jsonl | jq -c .attrs")
_qmq_command("consumerlog", "QMQ's consumer-log units (V1 22 B, V2 32 B), fill units included.",
             "rmqtool dump consumerlog /data/qmq-store -s order.created -f jsonl")
_qmq_command("actionlog", "QMQ's action log: every PULL, RANGE_ACK and FOREVER_OFFLINE.",
             "rmqtool dump actionlog /data/qmq-store -f jsonl | jq -c 'select(.action==\"PULL\")'")
_qmq_command("pulllog", "QMQ's legacy pull logs (pulllog/): the message sequence of each pull.",
             "rmqtool dump pulllog /data/qmq-store")

