"""rmqtool append STORE: write messages into a store the way a 4.9.x broker writes them.

One message from the options (a producer's defaults for what is not given), or many from
JSON Lines (``--from-jsonl FILE`` or ``-``) using the field names ``dump`` emits: each line
is written again as it was stored. Prints one JSON object a message: commit_log_offset,
queue_offset, msg_id, uniq_key. Writes: takes the store lock (exit 5 when a broker holds it).
"""
from __future__ import annotations

import base64
import collections
import json
import pathlib
import shlex
import sys
from typing import Iterator, List, Optional

import typer

from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.errors import RecoveryNeeded, UsageError
from rmqtool.formats import properties as props
from rmqtool.formats import sysflag
from rmqtool.report.progress import Progress, progress_enabled
from rmqtool.report.sink import Sink, warn
from rmqtool.formats.properties import bytes_to_properties
from rmqtool.engine import encoder as enc
from rmqtool.engine.store import Store

CHUNK = 1000  # messages handed to the engine at once


def register(app: typer.Typer) -> None:
    app.command("append")(append)


@boundary
def append(
    store: pathlib.Path = typer.Argument(..., help="Store root directory (created when it does not exist)."),
    topic: Optional[str] = typer.Option(None, "--topic", help="Topic of the message."),
    body: Optional[str] = typer.Option(None, "--body", help="Message body as text (UTF-8)."),
    body_file: Optional[pathlib.Path] = typer.Option(None, "--body-file", help="Message body from a file (bytes)."),
    tags: Optional[str] = typer.Option(None, "--tags", help="TAGS."),
    keys: Optional[str] = typer.Option(None, "--keys", help="KEYS, several separated by spaces."),
    prop: List[str] = typer.Option([], "--property", help="A user property name=value (repeatable)."),
    queue: int = typer.Option(0, "--queue", min=0, help="Queue id."),
    delay_level: int = typer.Option(0, "--delay-level", min=0, help="Delay level (goes to SCHEDULE_TOPIC_XXXX)."),
    flush: str = typer.Option("async", "--flush", help="sync: return once on disk; async: flushed in the background."),
    from_jsonl: Optional[str] = typer.Option(None, "--from-jsonl", help="Append every message of a JSON Lines "
                                             "file (- for stdin), fields as dump emits them."),
    keep_store_timestamp: bool = typer.Option(False, "--keep-store-timestamp", help="--from-jsonl: keep each "
                                              "line's store_timestamp instead of the clock's."),
    keep_store_host: bool = typer.Option(False, "--keep-store-host", help="--from-jsonl: keep each line's "
                                         "store_host instead of the store's."),
    store_host: Optional[str] = typer.Option(None, "--store-host", help="ip:port of the store host (default: the "
                                             "store's last message's, else 127.0.0.1:10911)."),
    commitlog_size: Optional[int] = typer.Option(None, "--commitlog-size", min=1, help="New store: commit log file size."),
    cq_size: Optional[int] = typer.Option(None, "--cq-size", min=20, help="New store: consume queue file size in bytes."),
    index_slots: Optional[int] = typer.Option(None, "--index-slots", min=1, help="New store: hash slots per index file."),
    index_entries: Optional[int] = typer.Option(None, "--index-entries", min=2, help="New store: entries per index file."),
    fmt: OutputFormat = typer.Option(OutputFormat.jsonl, "--format", "-f", help="jsonl (default), json or table."),
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="Progress bar on stderr "
                                            "(default: when stderr is a terminal)."),
    recover: bool = typer.Option(False, "--recover", help="Recover a store that needs it before appending "
                                 "(every byte changed is backed up beside the store first)."),
):
    """Append messages to a store (creating it when absent), as the 4.9.x broker writes them."""
    if flush not in ("sync", "async"):
        raise UsageError(f"--flush must be sync or async, not {flush!r}")
    if from_jsonl is not None:
        if topic or body is not None or body_file or tags or keys or prop or delay_level:
            raise UsageError("--from-jsonl takes the messages from the file: leave out --topic, --body, "
                             "--tags, --keys, --property and --delay-level")
        source = _JsonlSource(from_jsonl, keep_store_timestamp, keep_store_host)
    else:
        if keep_store_timestamp or keep_store_host:
            raise UsageError("--keep-store-timestamp and --keep-store-host go with --from-jsonl")
        if not topic:
            raise UsageError("--topic is required (or --from-jsonl)")
        if body is not None and body_file is not None:
            raise UsageError("give --body or --body-file, not both")
        source = iter([_one_message(topic, body, body_file, tags, keys, prop, queue, delay_level)])
    columns = ("commit_log_offset", "queue_offset", "msg_id", "uniq_key")
    with _open(store, recover, flush=flush, commitlog_size=commitlog_size, cq_size=cq_size,
               index_slots=index_slots, index_entries=index_entries, store_host=store_host) as s, \
            Sink(fmt.value, columns=columns, single=from_jsonl is None, title="appended") as sink:
        for results in _in_chunks(s, source, progress_enabled(progress) and from_jsonl is not None):
            for r in results:
                sink.row({"commit_log_offset": r.wrote_offset, "queue_offset": r.queue_offset,
                          "msg_id": r.msg_id, "uniq_key": r.uniq_key})
    if from_jsonl is not None:
        source.report_skipped()


def _open(store: pathlib.Path, recover: bool, **options) -> Store:
    """The store, open for appending; a store that needs recovery is refused with the command
    that recovers it (and, with --recover, recovered: where the backup went goes to stderr)."""
    try:
        s = Store.open(store, writable=True, recover=recover, **options)
    except RecoveryNeeded as exc:
        plan = exc.plan
        first = plan.findings[0]
        more = f" (and {len(plan.findings) - 1} more)" if len(plan.findings) > 1 else ""
        raise RecoveryNeeded(f"{first.id}: {first.message}{more}. The store needs recovery before anything is "
                             f"appended (zeroing {plan.bytes_zeroed} bytes and deleting {plan.files_deleted} "
                             f"files, each backed up beside the store first): run the same command with "
                             f"--recover, e.g. rmqtool append {shlex.quote(str(store))} --recover --topic ...",
                             exc.path, exc.offset, plan=plan) from None
    if s.recovery is not None:
        r = s.recovery
        print(f"rmqtool: recovered: zeroed {r.bytes_zeroed} bytes, deleted {r.files_deleted} files; the backup "
              f"is in {r.backup_dir} (rmqtool undo {shlex.quote(str(r.backup_dir))} puts it back)", file=sys.stderr)
    return s


def _in_chunks(store: Store, source: Iterator[enc.MessageInner], show_progress: bool):
    """Append ``source`` CHUNK messages at a time; yields each chunk's results."""
    bar = Progress("appending") if show_progress else None
    try:
        chunk = []
        for msg in source:
            chunk.append(msg)
            if len(chunk) >= CHUNK:
                yield store.append_many(chunk)
                if bar:
                    bar.advance(len(chunk))
                chunk = []
        if chunk:
            yield store.append_many(chunk)
            if bar:
                bar.advance(len(chunk))
    finally:
        if bar:
            bar.close()


def _one_message(topic, body, body_file, tags, keys, prop, queue, delay_level) -> enc.MessageInner:
    """A message with a producer's defaults: UNIQ_KEY, WAIT, CLUSTER, compression over 4 KB."""
    if body_file is not None:
        try:
            payload = body_file.read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read the body file ({exc.strerror})", body_file) from None
    else:
        payload = (body or "").encode("utf-8")
    user = {}
    for item in prop:
        name, sep, value = item.partition("=")
        if not sep or not name or not value.strip():
            raise UsageError(f"--property takes name=value, not {item!r}")
        if name in _SYSTEM_NAMES:
            raise UsageError(f"--property {name} is a system property (use --tags, --keys, --delay-level)")
        user[name] = value
    return enc.producer_message(topic, payload, tags=tags, keys=keys, user_properties=user, queue_id=queue,
                                delay_level=delay_level)


_SYSTEM_NAMES = {props.PROPERTY_KEYS, props.PROPERTY_TAGS, props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
                 props.PROPERTY_DELAY_TIME_LEVEL, props.PROPERTY_REAL_TOPIC, props.PROPERTY_REAL_QUEUE_ID,
                 props.PROPERTY_TRANSACTION_PREPARED, props.PROPERTY_PRODUCER_GROUP,
                 props.PROPERTY_WAIT_STORE_MSG_OK, props.PROPERTY_CLUSTER}


class _JsonlSource:
    """The messages of a JSON Lines file (opened now, before the store is), counting the rows
    that are not messages (dump's blank and corrupt rows), which are skipped."""

    def __init__(self, source: str, keep_store_timestamp: bool, keep_store_host: bool):
        self.keep_store_timestamp = keep_store_timestamp
        self.keep_store_host = keep_store_host
        self.skipped: collections.Counter = collections.Counter()  # record kind -> rows skipped
        if source == "-":
            self._file, self.name = sys.stdin, "<stdin>"
        else:
            path = pathlib.Path(source)
            try:
                self._file = open(path, encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"cannot open ({exc.strerror})", path) from None
            self.name = str(path)

    def __iter__(self) -> Iterator[enc.MessageInner]:
        try:
            for number, line in enumerate(self._file, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    if not isinstance(row, dict):
                        raise ValueError("not a JSON object")
                    record = row.get("record", "message")
                    if record != "message":
                        self.skipped[str(record)] += 1
                        continue
                    yield message_from_row(row, self.keep_store_timestamp, self.keep_store_host)
                except UsageError as exc:
                    raise UsageError(f"line {number}: {exc.message}", self.name) from None
                except (ValueError, TypeError, KeyError) as exc:
                    raise UsageError(f"line {number}: {exc}", self.name) from None
        finally:
            if self._file is not sys.stdin:
                self._file.close()

    def report_skipped(self) -> None:
        if self.skipped:
            kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(self.skipped.items()))
            warn(f"rmqtool: skipped {sum(self.skipped.values())} row(s) that are not messages ({kinds})")


def message_from_row(row: dict, keep_store_timestamp: bool = False, keep_store_host: bool = False) -> enc.MessageInner:
    """A dump row (or a hand-written one) as a message to write.

    With ``properties_raw`` (base64), the line is a stored record and its properties bytes
    are written as they are; with only ``properties``, they are written in the order given.
    Either way nothing is added and nothing is re-delayed: a SCHEDULE_TOPIC_XXXX record stays
    there, a delivered one stays in its topic. Without either, it is a new message with a
    producer's defaults (TAGS/KEYS from ``tags``/``keys``, a new UNIQ_KEY, CLUSTER). A body
    dumped with --decompress is compressed again.
    """
    topic = row.get("topic")
    if not isinstance(topic, str) or not topic:
        raise UsageError("topic is missing")
    raw = row.get("body")
    body = base64.b64decode(raw, validate=True) if raw else b""
    sys_flag = int(row.get("sys_flag", 0) or 0)
    if row.get("body_decompressed") and row.get("body_compression"):
        body = enc.compress_body(body, row["body_compression"])
    elif row.get("body_length") is not None and len(body) != row["body_length"]:
        raise UsageError(f"body is {len(body)} bytes, body_length says {row['body_length']} "
                         "(dump with --body base64 to copy bodies)")
    born_host = row.get("born_host") or "127.0.0.1:0"
    common = dict(queue_id=int(row.get("queue_id", 0) or 0), flag=int(row.get("flag", 0) or 0),
                  born_timestamp=int(row["born_timestamp"]) if row.get("born_timestamp") is not None else None,
                  born_host=born_host, reconsume_times=int(row.get("reconsume_times", 0) or 0))
    properties = row.get("properties")
    stored = row.get("properties_raw")
    if properties is None and stored is None:
        keys = row.get("keys")
        msg = enc.producer_message(topic, body, tags=row.get("tags"),
                                   keys=" ".join(keys) if isinstance(keys, list) else keys, compress=None, **common)
        msg.sys_flag |= sys_flag & ~(sysflag.BORNHOST_V6_FLAG | sysflag.STOREHOSTADDRESS_V6_FLAG)
    else:
        if stored is not None:
            text = base64.b64decode(stored, validate=True)  # bytes: stored verbatim
            pm, _utf8_ok = bytes_to_properties(text)  # what the broker's dispatch reads from them
        elif not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
            raise UsageError("properties must be an object of strings")
        else:
            text = props.PROPERTY_SEPARATOR.join(f"{k}{props.NAME_VALUE_SEPARATOR}{v}" for k, v in properties.items())
            pm = dict(properties)
        if topic != enc.RMQ_SYS_SCHEDULE_TOPIC:
            pm.pop(props.PROPERTY_DELAY_TIME_LEVEL, None)  # delivered already: no second redirect
        if common["born_timestamp"] is None:
            import time
            common["born_timestamp"] = int(time.time() * 1000)
        msg = enc.MessageInner(topic, body, properties=pm, properties_string=text, sys_flag=sys_flag,
                               prepared_transaction_offset=int(row.get("prepared_transaction_offset", 0) or 0),
                               **{**common, "born_host": enc.as_host(born_host)})
    if keep_store_timestamp and row.get("store_timestamp") is not None:
        msg.store_timestamp = int(row["store_timestamp"])
    if keep_store_host and row.get("store_host"):
        msg.store_host = enc.as_host(row["store_host"])
    return msg
