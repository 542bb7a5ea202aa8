"""rmqtool append STORE: write messages into a store the way a 4.9.x broker writes them.

One message from the options (a producer's defaults for what is not given), or many from
JSON Lines (``--from-jsonl FILE`` or ``-``) using the field names ``dump`` emits: each line
is written again as it was stored. Prints one JSON object a message: commit_log_offset,
queue_offset, msg_id, uniq_key, topic, queue_id. Writes: takes the store lock (exit 5 when a broker holds it).
"""
from __future__ import annotations

import contextlib
import pathlib
from typing import List, Optional

import typer

from rmqtool.cli.params import Semantics, check_semantics, complete_queue, complete_topic, examples

from rmqtool.cli.commitlog_paths import commit_log_paths_option
from rmqtool.cli.common import OutputFormat, Written, boundary, closed_on_error, interrupts_deferred, writer_output
from rmqtool.cli.sizes import SizeOptions, size_options
from rmqtool.errors import NotAStore, StoreNotFound, UsageError
from rmqtool.store.family import detect_family, require_rocketmq
from rmqtool.store.dledger import refuse_dledger
from rmqtool.store.commitlog_paths import commit_log_paths_of
from rmqtool.store.paths import COMMITLOG_DIR
from rmqtool.report.progress import progress_bar
from rmqtool.report.sink import Sink, warn

def register(app: typer.Typer) -> None:
    app.command("append", epilog=examples(
        "rmqtool append /data/store -t OrderTopic --body hello --tags TagA --keys order-1 -q 2",
        "rmqtool append /tmp/new --create -t T --body-file payload.bin",
        "rmqtool dump commitlog /old/store -f jsonl | rmqtool append /tmp/copy --create --from-jsonl -"))(append)


@boundary
@commit_log_paths_option("store")
@size_options
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
    sizes: SizeOptions = SizeOptions(),  # --cq-size ... --assume-defaults (cli/sizes.py)
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
    require_rocketmq(detect_family(store), store)  # never --create a RocketMQ store inside another family's
    refuse_dledger(store, "append")  # a DLedger store has no commitlog/: said as one, not as no store
    if not create and not (store / COMMITLOG_DIR).is_dir() and commit_log_paths_of(store) is None:  # (given: refused below)
        # a missing path is exit 8, a path that holds no store exit 4, as in every command
        error = StoreNotFound if not store.exists() else NotAStore
        raise error(f"no store here (no {COMMITLOG_DIR}/ directory): give --create to make a new one", store)
    if flush not in ("sync", "async"):
        raise UsageError(f"--flush must be sync or async, not {flush!r}")
    if prop_crc not in (None, "on", "off"):
        raise UsageError(f"--prop-crc takes on or off, not {prop_crc!r}")
    from rmqtool.recovery.outcome import Settings

    check_semantics(semantics)
    source = _source(from_jsonl, keep_store_timestamp, keep_store_host, topic, body, body_file, tags, keys, prop,
                     queue, delay_level)
    from rmqtool.engine.append_flow import append_in_chunks, open_for_append, unmade_on_failure

    given = sizes.given(commitlog_size)
    bar = progress_bar("appending", None, progress) if from_jsonl is not None else None  # bytes written
    written, appended = Written("nothing was appended"), 0  # the rows are the record of what was written
    with unmade_on_failure(store) if create else contextlib.nullcontext(), writer_output(written), \
            open_for_append(store, recover, warn, flush=flush, sizes=given, store_host=store_host,
                            recovery=Settings(semantics=semantics),
                            enabled_append_prop_crc=None if prop_crc is None else prop_crc == "on") as s, \
            Sink(fmt.value, kind="appended", single=from_jsonl is None) as sink, bar or contextlib.nullcontext():
        with closed_on_error(sink):  # the rows of what was appended are out, whatever stops the run
            for results in append_in_chunks(s, source, bar.advance if bar else None, many=from_jsonl is not None):
                # a chunk's rows whole: Ctrl-C (held while the chunk was appended, too) waits for them
                with interrupts_deferred(results.interrupted):
                    appended += len(results)
                    written.words = f"stopped after {appended} messages, each of them appended to {store}"
                    for r in results:
                        sink.row(_row(r))
                    sink.flush()
    if from_jsonl is not None:
        skipped = source.skipped_text()
        if skipped:
            warn(f"rmqtool: {skipped}")


def _row(r) -> dict:
    return {"topic": r.topic, "queue_id": r.queue_id, "commit_log_offset": r.wrote_offset,
            "queue_offset": r.queue_offset, "msg_id": r.msg_id, "uniq_key": r.uniq_key}


def _source(from_jsonl, keep_store_timestamp, keep_store_host, topic, body, body_file, tags, keys, prop, queue,
            delay_level):
    """The messages the options name: a JSON Lines file's, or one from a producer's options."""
    if from_jsonl is not None:
        if topic or body is not None or body_file or tags or keys or prop or delay_level:
            raise UsageError("--from-jsonl takes the messages from the file: leave out --topic, --body, "
                             "--tags, --keys, --property and --delay-level")
        from rmqtool.engine.rows import JsonlSource  # the engine loads only for a command that writes

        return JsonlSource(from_jsonl, keep_store_timestamp, keep_store_host)
    if keep_store_timestamp or keep_store_host:
        raise UsageError("--keep-store-timestamp and --keep-store-host go with --from-jsonl")
    if not topic:
        raise UsageError("--topic is required (or --from-jsonl)")
    if body is not None and body_file is not None:
        raise UsageError("give --body or --body-file, not both")
    if body is None and body_file is None:  # an empty body is said on purpose, never by omission
        raise UsageError("give --body TEXT or --body-file FILE (--body '' for an empty body)")
    from rmqtool.engine.append_flow import one_message

    return iter([one_message(topic, body, body_file, tags, keys, prop, queue, delay_level)])
