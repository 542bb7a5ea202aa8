"""rmqtool append STORE: write messages into a store the way a 4.9.x broker writes them.

One message from the options (a producer's defaults for what is not given), or many from
JSON Lines (``--from-jsonl FILE`` or ``-``) using the field names ``dump`` emits: each line
is written again as it was stored. Prints one JSON object a message: commit_log_offset,
queue_offset, msg_id, uniq_key, topic, queue_id. Writes: takes the store lock (exit 5 when a broker holds it).
"""
from __future__ import annotations

import pathlib
import shlex
import sys
from typing import Iterator, List, Optional

import typer

from rmqtool.cli.params import Semantics, check_semantics, complete_queue, complete_topic, examples

from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.cli.sizes import AssumeDefaults, BatchCqSize, BrokerConfigFile, CqSize, IndexEntries, IndexSlots
from rmqtool.errors import NotAStore, RecoveryNeeded, StoreNotFound, UsageError
from rmqtool.store.paths import COMMITLOG_DIR
from rmqtool.formats import properties as props
from rmqtool.report.progress import Progress, progress_enabled
from rmqtool.report.sink import Sink, warn

CHUNK = 1000  # messages handed to the engine at once


def register(app: typer.Typer) -> None:
    app.command("append", epilog=examples(
        "rmqtool append /data/store -t OrderTopic --body hello --tags TagA --keys order-1 -q 2",
        "rmqtool append /tmp/new --create -t T --body-file payload.bin",
        "rmqtool dump commitlog /old/store -f jsonl | rmqtool append /tmp/copy --create --from-jsonl -"))(append)


@boundary
def append(
    store: pathlib.Path = typer.Argument(..., help="Store root directory (a new one only with --create)."),
    topic: Optional[str] = typer.Option(None, "--topic", "-t", autocompletion=complete_topic,
                                        help="Topic of the message."),
    body: Optional[str] = typer.Option(None, "--body", help="Message body as text (UTF-8)."),
    body_file: Optional[pathlib.Path] = typer.Option(None, "--body-file", metavar="FILE",
                                                     help="Message body from a file (bytes)."),
    tags: Optional[str] = typer.Option(None, "--tags", help="TAGS."),
    keys: Optional[str] = typer.Option(None, "--keys", help="KEYS, several separated by spaces."),
    prop: List[str] = typer.Option([], "--property", help="A user property name=value (repeatable)."),
    queue: int = typer.Option(0, "--queue", "-q", autocompletion=complete_queue, min=0, help="Queue id."),
    delay_level: int = typer.Option(0, "--delay-level", min=0, help="Delay level (goes to SCHEDULE_TOPIC_XXXX)."),
    flush: str = typer.Option("async", "--flush", help="sync: return once on disk; async: flushed in the background."),
    from_jsonl: Optional[str] = typer.Option(None, "--from-jsonl", metavar="FILE|-",
                                             help="Append every message of a JSON Lines "
                                             "file (- for stdin), fields as dump emits them."),
    keep_store_timestamp: bool = typer.Option(False, "--keep-store-timestamp", help="--from-jsonl: keep each "
                                              "line's store_timestamp instead of the clock's."),
    keep_store_host: bool = typer.Option(False, "--keep-store-host", help="--from-jsonl: keep each line's "
                                         "store_host instead of the store's."),
    store_host: Optional[str] = typer.Option(None, "--store-host", help="ip:port of the store host (default: the "
                                             "store's last message's, else 127.0.0.1:10911)."),
    commitlog_size: Optional[int] = typer.Option(None, "--commitlog-size", min=1,
                                                 help="New store: commit log file size (mappedFileSizeCommitLog; "
                                                      "default: --broker-config's, else 1073741824)."),
    cq_size: CqSize = None,
    batch_cq_size: BatchCqSize = None,
    index_slots: IndexSlots = None,
    index_entries: IndexEntries = None,
    broker_config: BrokerConfigFile = None,
    assume_defaults: AssumeDefaults = False,
    fmt: OutputFormat = typer.Option(OutputFormat.jsonl, "--format", "-f", help="jsonl (default), json or table."),
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="Progress bar on stderr "
                                            "(default: when stderr is a terminal)."),
    recover: bool = typer.Option(False, "--recover", help="Recover a store that needs it before appending "
                                 "(every byte changed is backed up beside the store first)."),
    create: bool = typer.Option(False, "--create", help="Make a new store when STORE holds none (without it, a "
                                "mistyped path is refused rather than made into a store with 1 GiB segments)."),
    semantics: Semantics = None,
    prop_crc: Optional[str] = typer.Option(None, "--prop-crc", metavar="on|off",
                                           help="End each record with a __CRC32# entry, as a 5.x broker with "
                                                "enabledAppendPropCRC (default: as the store's last record)."),
):
    """Append messages to a store (a new one with --create), as the 4.9.x broker writes them."""
    if not create and not (store / COMMITLOG_DIR).is_dir():
        # a missing path is exit 8, a path that holds no store exit 4, as in every command
        error = StoreNotFound if not store.exists() else NotAStore
        raise error(f"no store here (no {COMMITLOG_DIR}/ directory): give --create to make a new one", store)
    if flush not in ("sync", "async"):
        raise UsageError(f"--flush must be sync or async, not {flush!r}")
    if prop_crc not in (None, "on", "off"):
        raise UsageError(f"--prop-crc takes on or off, not {prop_crc!r}")
    from rmqtool.recovery.outcome import Settings

    check_semantics(semantics)
    if from_jsonl is not None:
        if topic or body is not None or body_file or tags or keys or prop or delay_level:
            raise UsageError("--from-jsonl takes the messages from the file: leave out --topic, --body, "
                             "--tags, --keys, --property and --delay-level")
        from rmqtool.engine.rows import JsonlSource  # the engine loads only for a command that writes

        source = JsonlSource(from_jsonl, keep_store_timestamp, keep_store_host)
    else:
        if keep_store_timestamp or keep_store_host:
            raise UsageError("--keep-store-timestamp and --keep-store-host go with --from-jsonl")
        if not topic:
            raise UsageError("--topic is required (or --from-jsonl)")
        if body is not None and body_file is not None:
            raise UsageError("give --body or --body-file, not both")
        if body is None and body_file is None:  # an empty body is said on purpose, never by omission
            raise UsageError("give --body TEXT or --body-file FILE (--body '' for an empty body)")
        source = iter([_one_message(topic, body, body_file, tags, keys, prop, queue, delay_level)])
    from rmqtool.cli.sizes import given_sizes

    sizes = given_sizes(commitlog_size=commitlog_size, cq_size=cq_size, batch_cq_size=batch_cq_size,
                        index_slots=index_slots, index_entries=index_entries, broker_config=broker_config,
                        assume_defaults=assume_defaults)
    with _open(store, recover, flush=flush, sizes=sizes, store_host=store_host,
               recovery=Settings(semantics=semantics),
               enabled_append_prop_crc=None if prop_crc is None else prop_crc == "on") as s, \
            Sink(fmt.value, kind="appended", single=from_jsonl is None) as sink:
        for results in _in_chunks(s, source, progress_enabled(progress) and from_jsonl is not None):
            for r in results:
                sink.row({"topic": r.topic, "queue_id": r.queue_id, "commit_log_offset": r.wrote_offset,
                          "queue_offset": r.queue_offset, "msg_id": r.msg_id, "uniq_key": r.uniq_key})
    if from_jsonl is not None:
        skipped = source.skipped_text()
        if skipped:
            warn(f"rmqtool: {skipped}")


def _open(store: pathlib.Path, recover: bool, **options) -> Store:
    """The store, open for appending; a store that needs recovery is refused with the command
    that recovers it (and, with --recover, recovered: where the backup went goes to stderr)."""
    from rmqtool.engine.store import Store

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
    if s.prop_crc:
        print(f"rmqtool: each record ends with a __CRC32# entry: {s.prop_crc_reason} (--prop-crc off leaves it out)",
              file=sys.stderr)
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
    from rmqtool.engine.producer import producer_message

    return producer_message(topic, payload, tags=tags, keys=keys, user_properties=user, queue_id=queue,
                            delay_level=delay_level)


_SYSTEM_NAMES = {props.PROPERTY_KEYS, props.PROPERTY_TAGS, props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
                 props.PROPERTY_DELAY_TIME_LEVEL, props.PROPERTY_REAL_TOPIC, props.PROPERTY_REAL_QUEUE_ID,
                 props.PROPERTY_TRANSACTION_PREPARED, props.PROPERTY_PRODUCER_GROUP,
                 props.PROPERTY_WAIT_STORE_MSG_OK, props.PROPERTY_CLUSTER}
