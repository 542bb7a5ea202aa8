"""append as the command does it: the store opened for appending (recovered first when asked),
messages handed to the engine a chunk at a time, one message from a producer's options."""
from __future__ import annotations

import contextlib
import os
import pathlib
import shlex
import shutil
import signal
import threading
from typing import Iterator

from rmqtool.store.commitlog_end import last_written
from rmqtool.store.commitlog_paths import commit_log_paths_of
from rmqtool.store.compaction import compaction_served
from rmqtool.store.paths import COMMITLOG_DIR
from rmqtool.store.segments import Segment
from rmqtool.store.dledger import refuse_dledger
from rmqtool.engine.encoder import topic_bytes
from rmqtool.engine.message_inner import MessageInner
from rmqtool.engine.producer import producer_message
from rmqtool.engine.store import Store
from rmqtool.errors import RecoveryNeeded, StoreAccessError, UsageError
from rmqtool.formats import properties as props

CHUNK = 1000  # messages handed to the engine at once


def open_for_append(store: pathlib.Path, recover: bool, note, **options) -> Store:
    """The store, open for appending; a store that needs recovery is refused with the command
    that recovers it (and, with ``recover``, recovered: where the backup went is said through
    ``note``, a line for people on stderr)."""
    refuse_dledger(store, "append")  # a commitlog/ beside DLedger's log would be a second log
    if recover:
        options = _recovery_cut_short_rolled_back(store, options)
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
        note(f"rmqtool: recovered: zeroed {r.bytes_zeroed} bytes, deleted {r.files_deleted} files; the backup "
             f"is in {r.backup_dir} (rmqtool undo {shlex.quote(str(r.backup_dir))} puts it back)")
    if s.prop_crc:
        note(f"rmqtool: each record ends with a __CRC32# entry: {s.prop_crc_reason} (--prop-crc off leaves it out)")
    return s


def _recovery_cut_short_rolled_back(store: pathlib.Path, options: dict) -> dict:
    """append --recover, run again after its recovery (or a recover --apply) was cut short: the
    store given back as it was first (the backup holds every byte), as recover --apply does, to
    be recovered afresh into the same backup directory; ``options`` with that backup."""
    from rmqtool.recovery.store_lock import held_for
    from rmqtool.recovery.undo import roll_back_unfinished
    from rmqtool.store.unfinished import read_unfinished
    marker = read_unfinished(store) if store.is_dir() else None
    if marker is None or marker.operation != "recover" or marker.unchanged_copy or marker.running is not None:
        return options  # nothing cut short, or another's: the open refuses it, saying which
    with held_for(store):
        again = roll_back_unfinished(store, "recover")
    return {**options, "backup_dir": options.get("backup_dir") or again}


@contextlib.contextmanager
def unmade_on_failure(store: pathlib.Path):
    """A store --create makes (STORE missing or an empty directory) that a failure stops before
    its first message is taken away again: left there, a later run without --create would take
    it for a store (and info call it clean). Only what was not there before goes."""
    made = not store.exists()
    emptied = not made and store.is_dir() and not any(store.iterdir())
    try:
        yield
    except BaseException:
        if (made or emptied) and store.is_dir() and not any(map(_holds_a_record, _commit_log_dirs(store))):
            if made:
                shutil.rmtree(store, ignore_errors=True)
            else:
                for entry in list(store.iterdir()):
                    shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
        raise


def _commit_log_dirs(store: pathlib.Path) -> list:
    """Where the store's commit log files lie: ROOT/commitlog, and the paths it was given
    (--commitlog-path, a broker config's storePathCommitLog)."""
    given = commit_log_paths_of(store)
    return [store / COMMITLOG_DIR, *(given.directories if given is not None else ())]


def _holds_a_record(commitlog) -> bool:
    """Whether any file of a commit log directory holds a record, as last_written tells a
    written segment (an unreadable one counts as written: kept). Listed afresh: a cached
    listing predates this run's files."""
    try:
        files = [Segment(pathlib.Path(e.path), 0, e.stat().st_size) for e in os.scandir(commitlog) if e.is_file()]
    except OSError:
        return False
    return last_written(files) >= 0


def append_in_chunks(store: Store, source: Iterator[MessageInner], advance=None, many: bool = False):
    """Append ``source`` CHUNK messages at a time; yields each chunk's results (``advance``:
    told how many bytes the chunk wrote into the commit log, for a progress bar). ``many``: a
    write that fails (a full disk) says how far the run got, each chunk yielded being listed
    by the caller before it asks for the next."""
    listed = [0, None]  # messages yielded, and the commit log offset after the last of them
    compacted = {topic for topic, _queue in compaction_served(store.root)}
    chunk = []
    try:
        for msg in _rows_before_a_bad_one(source):
            if compacted and msg.topic in compacted:  # those before it go in first, as a stop anywhere leaves them
                if chunk:
                    yield from _appended(store, chunk, advance, listed)
                _refuse_compacted(store.root, msg.topic, listed)
            chunk.append(msg)
            if len(chunk) >= CHUNK:
                yield from _appended(store, chunk, advance, listed)
                chunk = []
        if chunk:
            yield from _appended(store, chunk, advance, listed)
    except _BadRow as bad:  # the rows before it go in first, as a stop anywhere leaves them
        if chunk:
            yield from _appended(store, chunk, advance, listed)
        if listed[0]:
            bad.error.message += f" ({listed[0]} message(s) before it were appended)"
        raise bad.error from None
    except StoreAccessError as exc:
        if many:
            exc.message += _stopped_after(listed, store.root)
        raise


class _BadRow(Exception):
    """A row the source refused, carried past the chunk written before it."""

    def __init__(self, error: UsageError):
        self.error = error


def _rows_before_a_bad_one(source: Iterator[MessageInner]) -> Iterator[MessageInner]:
    """``source``'s messages; a row it refuses (UsageError) ends them as a _BadRow, told apart
    from a refusal raised while appending."""
    rows = iter(source)
    while True:
        try:
            msg = next(rows)
        except StopIteration:
            return
        except UsageError as exc:
            raise _BadRow(exc) from None
        yield msg


def _refuse_compacted(root: pathlib.Path, topic: str, listed: list):
    """A COMPACTION topic's consumers read the compaction log, fed only by the broker's own
    dispatch: a message appended here would be stored and never served (exit 4)."""
    from rmqtool.store.family import UnsupportedFamily
    done = f" ({listed[0]} messages before it were appended)" if listed[0] else ""
    raise UnsupportedFamily(f"{topic} is a COMPACTION topic (compaction/compactionLog/{topic}): its consumers read "
                            f"the compaction log, which append does not write, so the message would never be "
                            f"served; nothing of it written{done}", root)


def _appended(store: Store, chunk: list, advance, listed: list):
    with _interrupts_held() as caught:  # a chunk is appended whole, and handed on, before Ctrl-C ends the run
        results = Chunk(store.append_many(chunk))
    results.interrupted = bool(caught)  # the caller lists it, then ends the run (cli/append)
    yield results  # not held: the caller's writing (a blocked stdout) stays Ctrl-C's to stop
    if caught:
        raise KeyboardInterrupt
    if results:
        listed[0] += len(results)
        listed[1] = results[-1].wrote_offset + results[-1].wrote_bytes
    if advance:
        advance(sum(r.wrote_bytes for r in results))


class Chunk(list):
    """A chunk's PutResults, and whether Ctrl-C came while it was appended (held till then)."""
    interrupted = False


@contextlib.contextmanager
def _interrupts_held():
    """Ctrl-C held in the block: the list it yields says whether one came (the caller raises it
    once what it holds is handed on). A handler, not a signal mask: a mask holds the signal off
    this thread only, and another (a progress bar's) would take it. Off the main thread (a
    library caller's) there is no handler to set: nothing held."""
    caught: list = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield caught
    finally:
        signal.signal(signal.SIGINT, previous)


def _stopped_after(listed: list, root) -> str:
    """What a run of many that a failed write stopped can say: the messages listed are in the
    store; of the chunk being written, none is listed, though the log may hold some of them
    (which ones the broker keeps, its next start decides: recover's plan says)."""
    rows, end = listed
    quoted = shlex.quote(str(root))
    after = f" --from-offset {end}" if end is not None else ""
    return (f"; {rows} message(s) were appended and listed before it; of the next (up to {CHUNK}) none is "
            f"listed, though the log may hold some of them: `rmqtool recover {quoted}` says where the broker's "
            f"next start ends the commit log, `rmqtool dump commitlog {quoted}{after}` lists what lies after "
            f"the last one listed")


def one_message(topic, body, body_file, tags, keys, prop, queue, delay_level) -> MessageInner:
    """A message with a producer's defaults: UNIQ_KEY, WAIT, CLUSTER, compression over 4 KB.
    Its topic is checked here, before a store is opened (or made with --create)."""
    topic_bytes(topic)
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
    return producer_message(topic, payload, tags=tags, keys=keys, user_properties=user, queue_id=queue,
                            delay_level=delay_level)


_SYSTEM_NAMES = {props.PROPERTY_KEYS, props.PROPERTY_TAGS, props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
                 props.PROPERTY_DELAY_TIME_LEVEL, props.PROPERTY_REAL_TOPIC, props.PROPERTY_REAL_QUEUE_ID,
                 props.PROPERTY_TRANSACTION_PREPARED, props.PROPERTY_PRODUCER_GROUP,
                 props.PROPERTY_WAIT_STORE_MSG_OK, props.PROPERTY_CLUSTER}
