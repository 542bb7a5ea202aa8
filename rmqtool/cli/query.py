"""rmqtool query STORE: find messages by key, UNIQ_KEY, msgId, commit log offset or queue
offset, or the queue offset for a time, from the store's files alone.

Message rows are the ones ``dump commitlog`` prints; a time lookup prints one row
{topic, queue_id, time, queue_offset, store_timestamp}. Notes (an index fallback, damage)
and the ``--explain`` trace go to stderr. Exit 0: found; 1 (NOT_FOUND): nothing found;
3 (CORRUPT): a message found has a bad body or ``__CRC32#`` CRC (printed, and named on stderr).
"""
from __future__ import annotations

import pathlib
from typing import List, Optional

import typer

from rmqtool.cli.commitlog_paths import commit_log_paths_option
from rmqtool.cli.common import BodyMode, OutputFormat, Stores, boundary
from rmqtool.cli.params import (OFFSET_METAVAR, TABLE_BODY_PREVIEW, TIME_METAVAR, ColumnsOpt, WideOpt, check_range,
                                complete_queue, complete_topic, examples, parse_time)
from rmqtool.errors import ExitCode, NothingFound, UsageError
from rmqtool.inspect.lookup import Lookup, crc_mismatch_notes, look_up
from rmqtool.query.by_key import DEFAULT_MAX_NUM
from rmqtool.query.by_time import offset_by_time
from rmqtool.query.explain import Trace
from rmqtool.report.records import message_record, with_human_times
from rmqtool.report.sink import Sink, warn


def register(app: typer.Typer) -> None:
    app.command("query", epilog=examples(
        "rmqtool query /data/store --key order-1 -t OrderTopic",
        "rmqtool query /data/store --msg-id C0A8000100002A9F0000000000000000",
        "rmqtool query /data/store -t OrderTopic -q 0 --time 2024-06-01T00:00:00Z"))(query)


def _mode(key, uniq_key, msg_id, offset, queue_offset, time) -> str:
    given = [name for name, value in (("--key", key), ("--uniq-key", uniq_key), ("--msg-id", msg_id),
                                      ("--offset", offset), ("--queue-offset", queue_offset), ("--time", time))
             if value is not None]
    if len(given) != 1:
        raise UsageError("give exactly one of --key, --uniq-key, --msg-id, --offset, --queue-offset, --time"
                         + (f" (got {', '.join(given)})" if given else ""))
    return given[0]


def _check_options(mode: str, topic, queue, exact, begin_time, end_time, max_num, no_index, index_only,
                   timer: bool = False) -> None:
    key_mode = mode in ("--key", "--uniq-key")
    queue_mode = mode in ("--queue-offset", "--time")
    if queue_mode and (topic is None or queue is None):
        raise UsageError(f"{mode} needs --topic and --queue")
    if queue is not None and not queue_mode:
        raise UsageError("--queue goes with --queue-offset or --time")
    if topic is not None and mode in ("--msg-id", "--offset"):
        raise UsageError(f"{mode} names one message: --topic does not apply")
    if exact and mode != "--time":
        raise UsageError("--exact goes with --time")
    if not key_mode:
        for name, value in (("--begin-time", begin_time), ("--end-time", end_time), ("--max", max_num)):
            if value is not None:
                raise UsageError(f"{name} goes with --key or --uniq-key")
        if no_index or index_only or timer:
            raise UsageError(f"{'--timer goes' if timer else '--no-index and --index-only go'} with --key or --uniq-key")
    if no_index and index_only:
        raise UsageError("--no-index and --index-only contradict each other")


def _message_rows(sink: Sink, messages, fmt: OutputFormat, body: Optional[BodyMode], decompress: bool,
                  store: str | None = None, timer_of: pathlib.Path | None = None) -> list:
    """The rows of the messages found (``timer_of``: the timer state of each timer message
    among them, read from that store); the messages that gave rows."""
    if timer_of is not None:
        from rmqtool.inspect.timer.query import timer_states  # numpy: loaded when asked for
        rows = timer_states(timer_of, messages)
        for row in rows:
            sink.row(with_human_times(row if store is None else {"store_path": store, **row}))
        if messages and not rows:
            warn(f"rmqtool: none of the {len(messages)} message(s) found in {timer_of} is a timer message")
        return messages if rows else []
    body_mode = body.value if body else ("text" if fmt == OutputFormat.table else "base64")
    preview = TABLE_BODY_PREVIEW if fmt == OutputFormat.table and body is None else None
    for m in messages:
        row = message_record(m, body_mode, decompress=decompress, preview=preview)
        sink.row(row if store is None else {"store_path": store, **row})
    return messages


# Over 80 lines: typer reads the options from the signature (48 lines of it); the body is short
@boundary
@commit_log_paths_option("stores")
def query(
    stores: List[pathlib.Path] = typer.Argument(..., metavar="STORE", help="Store directories (the ones holding "
                                                "commitlog/; several: each row names its store)."),
    key: Optional[str] = typer.Option(None, "--key", help="A message key (KEYS), or a UNIQ_KEY."),
    uniq_key: Optional[str] = typer.Option(None, "--uniq-key", help="A client message id (UNIQ_KEY) only."),
    msg_id: Optional[str] = typer.Option(None, "--msg-id", help="An offset msgId (store host + commit log offset)."),
    offset: Optional[int] = typer.Option(None, "--offset", min=0, metavar=OFFSET_METAVAR,
                                         help="The message at this commit log offset."),
    queue_offset: Optional[int] = typer.Option(None, "--queue-offset", min=0,
                                               metavar=OFFSET_METAVAR,
                                               help="The message at this queue offset (with --topic, --queue)."),
    time: Optional[str] = typer.Option(None, "--time", metavar=TIME_METAVAR,
                                       help="The queue offset for this store time (epoch ms or "
                                       "ISO 8601, UTC), as getOffsetInQueueByTime answers (with --topic, --queue)."),
    topic: Optional[str] = typer.Option(None, "--topic", "-t", autocompletion=complete_topic,
                                        help="Topic (key lookups: every topic when left out)."),
    queue: Optional[int] = typer.Option(None, "--queue", "-q", autocompletion=complete_queue, min=0, help="Queue id."),
    exact: bool = typer.Option(False, "--exact", help="--time: the first queue offset stored at or after the "
                               "time, even when several messages share the millisecond."),
    begin_time: Optional[str] = typer.Option(None, "--begin-time", metavar=TIME_METAVAR,
                                             help="Key lookups: stored from (epoch ms or ISO 8601)."),
    end_time: Optional[str] = typer.Option(None, "--end-time", metavar=TIME_METAVAR,
                                           help="Key lookups: stored up to (epoch ms or ISO 8601)."),
    max_num: Optional[int] = typer.Option(None, "--max", "-n", min=1, help=f"Key lookups: at most this many messages, "
                                          f"the newest (default {DEFAULT_MAX_NUM}, as the broker)."),
    no_index: bool = typer.Option(False, "--no-index", help="Key lookups: scan the commit log, ignore the index."),
    index_only: bool = typer.Option(False, "--index-only", help="Key lookups: answer from the index alone, as the "
                                    "broker does (no scan of what the index does not cover)."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f",
                                     help="table for people; jsonl or json for scripts."),
    body: Optional[BodyMode] = typer.Option(None, "--body", help="Body as text, hex, base64 or none "
                                            "(default: base64 in JSON, a text preview in a table)."),
    decompress: bool = typer.Option(False, "--decompress", help="Decompress compressed bodies (zlib, lz4, zstd)."),
    explain: bool = typer.Option(False, "--explain", help="Print on stderr what was read (index files, slots, "
                                 "chain entries, consume queue units) and why each hit was kept or dropped."),
    wide: bool = WideOpt,
    columns: Optional[str] = ColumnsOpt,
    served_only: bool = typer.Option(False, "--served-only", help="Only messages the broker serves after its next "
                                     "start's recovery (not stale bytes past where recovery cuts the log)."),
    timer: bool = typer.Option(False, "--timer", help="Key lookups on a 5.x store: what became of each timer message "
                               "found (its rmq_sys_wheel_timer records, units, delivery or recall; fired or pending "
                               "and when) instead of the messages."),
    subject: Optional[str] = typer.Option(None, "--subject", "-s", help="QMQ: a subject (with --sequence or --time)."),
    sequence: Optional[int] = typer.Option(None, "--sequence", min=0, help="QMQ: the message of this sequence."),
):
    """Find messages the way the broker's queryMessage, lookMessageByOffset and
    getOffsetInQueueByTime do, from the files alone, without the broker's hash-collision
    false positives. Exit 0: found; 1: nothing found; 3: a message found is damaged (bad CRC).
    On a QMQ store: --subject with --sequence or --time, or --msg-id (QMQ's message id)."""
    if subject is not None or sequence is not None or _qmq_stores(stores):
        return _qmq_query(stores, subject, sequence, msg_id, time, fmt, body, wide, columns, served_only)
    mode = _mode(key, uniq_key, msg_id, offset, queue_offset, time)
    _check_options(mode, topic, queue, exact, begin_time, end_time, max_num, no_index, index_only, timer)
    begin, end = parse_time(begin_time, "--begin-time"), parse_time(end_time, "--end-time")
    check_range("--begin-time", begin, "--end-time", end)
    trace = Trace(warn, keep=False) if explain else None
    each = Stores(several=len(stores) > 1)  # of several, one that cannot be read is named and skipped
    if mode == "--time":
        with Sink(fmt.value, single=not each.several, kind="queue_time", wide=wide, select=columns) as sink:
            found = _time_rows(sink, stores, each, topic, queue, parse_time(time, "--time"), exact, trace)
        if each.worst:
            raise typer.Exit(each.worst)
        if not found:
            raise typer.Exit(int(ExitCode.NOT_FOUND))
        return
    ask = Lookup(mode, key, uniq_key, msg_id, offset, queue_offset, topic, queue, begin, end, max_num, no_index,
                 index_only, served_only)
    sink = Sink(fmt.value, kind="timer_message" if timer else "message", wide=wide, select=columns)
    found = []
    for store in stores:
        with each.each(not_found=NothingFound):
            messages = look_up(store, ask, trace, warn)
            found += _message_rows(sink, messages, fmt, body, decompress, str(store) if each.several else None,
                                   store if timer else None)
    sink.close()
    damaged = crc_mismatch_notes(found)
    for line in damaged:
        warn(line)
    if each.worst:
        raise typer.Exit(each.worst)
    if not found:
        if not each.said_not_found:
            # an index whose slot or entries were zeroed answers nothing, as the broker's does
            hint = "; from the index: --no-index scans the whole commit log" if mode in ("--key", "--uniq-key") \
                and not no_index else ""
            warn(f"rmqtool: not found: no {'timer ' if timer else ''}message matches{hint}")
        raise typer.Exit(int(ExitCode.NOT_FOUND))
    if damaged:
        raise typer.Exit(int(ExitCode.CORRUPT))


def _time_rows(sink: Sink, stores, each: Stores, topic, queue, time: int, exact: bool, trace) -> bool:
    """--time: a row a store, the queue offset getOffsetInQueueByTime answers; whether one was found."""
    found = False
    for store in stores:
        with each.each():
            result = offset_by_time(store, topic, queue, time, exact=exact, trace=trace)
            for note in result.notes:
                warn(f"rmqtool: {note}")
            sink.row(result.record() if not each.several else {"store_path": str(store), **result.record()})
            found = found or result.found
    return found


def _qmq_stores(stores) -> bool:
    from rmqtool.store.family import QMQ, detect_family
    return any(detect_family(s) is QMQ for s in stores)


def _qmq_query(stores, subject, sequence, msg_id, time, fmt: OutputFormat, body, wide, columns,
               served_only: bool = False) -> None:
    """query on QMQ stores (inspect/qmq/dumps.query_rows): a row a message, the store named
    when there are several; exit 1 when none matches, 3 when one found fails its CRC."""
    from rmqtool.inspect.qmq.dumps import query_rows
    from rmqtool.store.qmq.view import open_qmq_store
    each = Stores(several=len(stores) > 1)
    body_mode = body.value if body else ("text" if fmt == OutputFormat.table else "base64")
    rows, damaged = [], []
    with Sink(fmt.value, kind="qmq_message", wide=wide, select=columns) as sink:
        for store in stores:
            with each.each(not_found=NothingFound):
                found = query_rows(open_qmq_store(store).root, subject=subject, sequence=sequence,
                                   message_id=msg_id, time_ms=parse_time(time, "--time"), body=body_mode,
                                   served_only=served_only, notes=damaged)
                for row in found:
                    sink.row(with_human_times(row if not each.several else {"store_path": str(store), **row}))
                rows += found
    for line in damaged:  # after the rows, as on a RocketMQ store
        warn(line)
    if each.worst:
        raise typer.Exit(each.worst)
    if not rows:
        raise typer.Exit(int(ExitCode.NOT_FOUND))
    if damaged:
        raise typer.Exit(int(ExitCode.CORRUPT))
