"""The embedded store engine: a store written the way a RocketMQ 4.9.x broker writes it.

``Store.open(path, writable=True)`` takes the lock (a running broker holding it is refused),
asks the recovery plan (``rmqtool.recovery``) whether the store is as a clean close left it
(a store that is not is refused, changed in nothing, unless opened with ``recover``, which
applies the plan with a backup, dispatches, closes cleanly and records in the backup the
state it left, then opens again), writes the ``abort`` marker, dispatches whatever the
consume queues and index are behind (from the plan's start); :meth:`Store.close` flushes
everything, waits for dispatch, writes the checkpoint and only then removes the marker and
releases the lock. A path with no store gets a new one, with broker default sizes unless
told; an existing store keeps its own sizes (inferred from its files).

``append`` and ``put_messages`` follow CommitLog.asyncPutMessage(s): encode outside the put
lock; inside it take the store timestamp, the queue offset of the (topic, queue), write the
record, or an end-of-file blank record and the record in the next segment when it does not
fit; then dispatch and flush as configured.

Read-only opens take no lock and never write a byte: they only answer where things end.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import threading
import time
from itertools import repeat
from typing import Callable, NamedTuple

from rmqtool import native
from rmqtool.errors import CorruptData, NotAStore, RecoveryNeeded, RepairUnfinished, StoreAccessError, UsageError
from rmqtool.findings import COMMIT_LOG_FILE_DUPLICATED
from rmqtool.formats.commitlog import BLANK_MAGIC_CODE, END_FILE_MIN_BLANK_LENGTH, BlankRecord
from rmqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE, DEFAULT_CQ_FILE_SIZE
from rmqtool.formats.crc import ends_with_crc32_entry, fill_crc32_entry
from rmqtool.formats.derive import struct_of
from rmqtool.store.crc import fast_crc32
from rmqtool.formats.indexfile import DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, INDEX_SIZE, build_key
from rmqtool.store import paths
from rmqtool.engine.checkpoint_writer import CheckpointWriter
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.commitlog_paths import commit_log_paths_of, list_commit_log
from rmqtool.store.config import batch_topics
from rmqtool.store.consumequeue import find_queue_end, queue_directories
from rmqtool.store.cqext import ext_writing
from rmqtool.engine.cq_writer import BatchConsumeQueueTable, ConsumeQueueTable
from rmqtool.dispatch.dispatcher import CommitLogDispatcher, DispatchRequest, ReputMessageService
from rmqtool.dispatch.rules import DEFAULT_MESSAGE_DELAY_LEVEL, DelayLevels
from rmqtool.engine.encoder import DEFAULT_MAX_MESSAGE_SIZE, Encoder
from rmqtool.engine.message_inner import MessageBatch, MessageInner, as_host
from rmqtool.engine.prepared_columns import records_of
from rmqtool.engine.open_files import raise_open_files_limit
from rmqtool.engine.prepared_record import TOTAL_SIZE, PreparedRecord, write_record
from rmqtool.engine.record_structs import RECORD_PLACE, RECORD_TIME
from rmqtool.formats.commitlog import QUEUE_OFFSET_AT
from rmqtool.formats.sysflag import TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE
from rmqtool.store.message import RECORD_START
from rmqtool.engine.flush import FlushConsumeQueueService, FlushRealTimeService, GroupCommitService
from rmqtool.engine.index_writer import IndexServiceWriter, index_keys_of
from rmqtool.engine.append_kernel import kernel_for_append
from rmqtool.dispatch.rules import TAGS_CODES
from rmqtool.formats.commitlog import MAX_PROPERTIES_LENGTH
from rmqtool.recovery.store_lock import StoreLock
from rmqtool.recovery.apply import Applied, apply_plan, finish_apply
from rmqtool.recovery.commitlog_walk import V5
from rmqtool.recovery.intent import step
from rmqtool.recovery.outcome import Settings as RecoverySettings
from rmqtool.recovery.plan import RecoveryPlan, plan_recovery
from rmqtool.store.lock import is_locked
from rmqtool.store.unfinished import read_unfinished
from rmqtool.store.segments import discover
from rmqtool.store.msgid import create_message_id
from rmqtool.store.view import StoreView
from rmqtool.engine.store_sizes import DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG, GivenSizes, StoreSizes, store_sizes
from rmqtool.engine.mapped_file import OS_PAGE_SIZE, AllocateMappedFileService, WarmAheadService, WritableFileQueue

DEFAULT_STORE_HOST = "127.0.0.1:10911"
BLANK = struct_of(BlankRecord)
PUT_OK = "PUT_OK"
FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"


@dataclasses.dataclass
class StoreConfig:
    """The MessageStoreConfig settings the engine uses (names as the broker's, snake_case)."""
    mapped_file_size_commit_log: int = DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG
    mapped_file_size_consume_queue: int = DEFAULT_CQ_FILE_SIZE
    max_hash_slot_num: int = DEFAULT_MAX_HASH_SLOT_NUM
    max_index_num: int = DEFAULT_MAX_INDEX_NUM
    flush_disk_type: str = "async"  # or "sync"
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    sync_flush_timeout: int = 5000
    message_delay_level: str = DEFAULT_MESSAGE_DELAY_LEVEL
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    message_index_enable: bool = True
    enabled_append_prop_crc: bool | None = None  # 5.x: None, as the store's last record (a __CRC32# entry or not)
    # ConsumeQueueExt: None, as a --broker-config says, else as the store shows (store/cqext.ext_writing)
    enable_consume_queue_ext: bool | None = None
    mapped_file_size_consume_queue_ext: int | None = None  # None: as a --broker-config says or the ext files show
    dispatch: str = "inline"  # or "background" (a ReputMessageService thread)

_tuple_new = tuple.__new__


COLUMN_PUT = True  # False: append_many never prepares messages as columns (prepare_columns)


def _write_part(mf, buf: bytearray, start: int, end: int, wrote_position: int, store_ts: int) -> None:
    """``buf[start:end]``, records placed in it, into segment ``mf`` up to ``wrote_position``:
    all but the first record's totalSize and magic, then those, so a process killed half way
    leaves zeros where the part starts (the log ends there), as write_record leaves them where
    its record starts. pwrite, not the map: the
    kernel copies into the page cache the map shares, with no page fault a page."""
    if end > start:
        view = memoryview(buf)[start:end]
        at = wrote_position - (end - start)
        head = RECORD_START.size
        try:
            _pwrite_all(mf.fd, view[head:], at + head)
            _pwrite_all(mf.fd, view[:head], at)
        except OSError as exc:
            raise StoreAccessError(f"write failed ({exc.strerror})", mf.path, at) from None
        finally:
            view.release()
    mf.wrote_position = wrote_position
    mf.store_timestamp = store_ts


def _pwrite_all(fd: int, data: memoryview, at: int) -> None:
    while len(data):
        n = os.pwrite(fd, data, at)
        data, at = data[n:], at + n


def _wall_clock_ms() -> int:
    """System.currentTimeMillis."""
    return time.time_ns() // 1_000_000


class PutResult(NamedTuple):
    """PutMessageResult + AppendMessageResult: where the message(s) went. A tuple made with
    tuple.__new__, because append_many makes one per message in the put lock (a 12-field
    dataclass costs twice as much); :meth:`with_status` makes a copy with another status."""

    status: str
    wrote_offset: int  # commit log offset of the (first) record
    wrote_bytes: int
    queue_offset: int  # logicsOffset: the (first) queue offset; 0 for prepared/rollback
    store_timestamp: int
    msg_num: int
    topic: str  # as stored: SCHEDULE_TOPIC_XXXX for a delayed message
    queue_id: int
    offsets: tuple  # commit log offset of each record (phyPos)
    uniq_keys: tuple
    store_ip: bytes
    store_port: int

    def with_status(self, status: str) -> "PutResult":
        return self._replace(status=status)

    @property
    def ok(self) -> bool:
        return self.status == PUT_OK

    @property
    def msg_ids(self) -> list[str]:
        return [create_message_id(self.store_ip, self.store_port, o) for o in self.offsets]

    @property
    def msg_id(self) -> str:
        """The offset msgId; comma-joined for a batch, as the broker returns it."""
        return ",".join(self.msg_ids)

    @property
    def uniq_key(self) -> str | None:
        return self.uniq_keys[0] if len(self.uniq_keys) == 1 else ",".join(k or "" for k in self.uniq_keys)

    def to_json(self) -> dict:
        return {"commit_log_offset": self.wrote_offset, "queue_offset": self.queue_offset, "msg_id": self.msg_id,
                "uniq_key": self.uniq_key, "topic": self.topic, "queue_id": self.queue_id,
                "store_timestamp": self.store_timestamp, "wrote_bytes": self.wrote_bytes,
                "msg_num": self.msg_num, "status": self.status}


# the fields of a dispatch request _dispatch_inline reads (_put_run makes them plain tuples, a prefix of
# DispatchRequest's fields: cheaper in the put lock)
_REQUEST_OFFSET = DispatchRequest._fields.index("commit_log_offset")
_REQUEST_SIZE = DispatchRequest._fields.index("msg_size")


def plan_batch_topics(root: pathlib.Path, plan: RecoveryPlan) -> frozenset:
    """The batch topics dispatch writes batch consume queues for: those the plan's 5.3 rules
    found (topics.json, batchconsumequeue/, INNER_BASE); a store the plan reads as 4.9 has
    none, as a 4.9 broker knows none."""
    o = plan.outcome
    return frozenset(batch_topics(root)) if o is None else frozenset(o.batch_topics)


def unknown_sizes(root: pathlib.Path | StoreView, sizes: StoreSizes, plan: RecoveryPlan,
                  index: bool = True, made_here: bool = True) -> list[str]:
    """The sizes a writable open of an existing store (one with commit log files) would
    write files with that nothing shows (StoreSizes.unknown): consume queues, the index
    (``index``: messageIndexEnable) and, for batch topics, batch consume queues. A store
    with no commit log file takes what is given or the defaults when it is made now
    (``made_here``); one found so (a broker started once and never written to) shows none of
    its sizes, the commit log's too. ``root``: a store root, or the view a command opened
    (its commit log listing is taken)."""
    if isinstance(root, StoreView):
        listing, root = root.commit_log_listing(), root.root
    else:
        listing = discover(paths.StorePaths(root).commitlog, required=False)
    if not listing.segments and made_here:
        return []
    return sizes.unknown(commit_log=not listing.segments, consume_queue=True, index=index,
                         batch_consume_queue=bool(plan_batch_topics(root, plan)))


def _prop_crc(asked: bool | None, last) -> tuple[bool, str]:
    """Whether appended records get a ``__CRC32#`` entry (5.x enabledAppendPropCRC), and why:
    as asked, else as the store's last record (a broker with forceVerifyPropCRC cuts the
    log at the first record without one)."""
    if asked is not None:
        return asked, "as asked (--prop-crc)"
    if last is not None and ends_with_crc32_entry(last.properties_raw or b""):
        return True, (f"the store's last record (commit log offset {last.commit_log_offset}) carries one, as a 5.x "
                      f"broker with enabledAppendPropCRC writes them")
    return False, ("the store's last record carries none" if last is not None else "the store holds no record")


def multi_path_refusal(given, appending: bool = False) -> str:
    """Why a writer leaves a commit log kept outside ROOT/commitlog (store/commitlog_paths.py) alone:
    an append when the broker could make no file there, a recovery into a copy (--to copies
    the root, not the disks) always."""
    where = ", ".join(given.directories)
    if appending:
        return (f"every commit log path ({where}, {given.source}) is read-only: the broker makes no file in "
                f"them, and rmqtool appends none; nothing written")
    return (f"recover --to copies STORE only, and this commit log is in {where} ({given.source}): nothing "
            f"written; recover in place (every byte it changes is backed up first), or copy the disks too and "
            f"give the copies with --commitlog-path")


def _appends_nowhere(given) -> bool:
    """Every path of a multi-path commit log read-only: the broker makes no file there."""
    return given is not None and given.multi and not given.creating


# --- the store ----------------------------------------------------------------------------------

class Store:
    """A RocketMQ store directory, opened read-only or for appending."""

    recovery: Applied | None = None  # what a writable open with recover did (its backup, bytes zeroed)
    commit_log_paths = None  # CommitLogPaths: the commit log kept outside ROOT/commitlog (several disks)
    sizes: StoreSizes  # the sizes written with, and where each came from

    def __init__(self, root: pathlib.Path, writable: bool, config: StoreConfig):
        self.root = root
        self.paths = paths.StorePaths(root)
        self.writable = writable
        self.config = config
        self._closed = False
        self._usable = False  # set once open for writing; cleared by close or a failing service
        self._put_one, self._put_one_kernel = None, False  # the kernel's appender, the kernel it is of

    # ---- opening ------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike, writable: bool = False, flush: str = "async", *,
             recover: bool = False, **options) -> "Store":
        """Open a store (see :meth:`_open` for every option). A recovering open that changes
        anything is a repair of its own: applied, dispatched and closed cleanly, the state it
        left recorded in its backup (undo refuses a store written since), and only then opened
        again for writing; :attr:`recovery` says what it did."""
        if not (writable and recover):
            return cls._open(path, writable, flush, recover=recover, **options)
        elsewhere = commit_log_paths_of(path)
        if _appends_nowhere(elsewhere):  # refused before the recovery changes anything
            raise UsageError(multi_path_refusal(elsewhere, appending=True), pathlib.Path(path))
        store = cls._open(path, writable, flush, recover=True, **options)
        applied = store.recovery
        if applied is None:
            return store
        store.close(before_unlock=lambda: finish_apply(applied.backup_dir, store.root))
        options.pop("backup_dir", None)
        options.pop("command", None)
        store = cls._open(path, writable, flush, **options)
        store.recovery = applied
        return store

    @classmethod
    def recover(cls, path: str | os.PathLike, **options) -> Applied | None:
        """``rmqtool recover --apply``: the plan carried out with a backup, dispatched again and
        closed cleanly, the state left recorded; None when there was nothing to do.
        ``on_written(n)``: told the bytes written (backup copies, rewrites, zeros, then the
        consume queue units and index entries the re-dispatch writes): the command's bar."""
        store = cls._open(path, True, recover=True, copy_taken_over=True, **options)
        applied = store.recovery
        # the repair's end (its marker cleared) before the lock goes: a writer waiting for it never
        # finds a marker of a repair still running and "finishes" it
        store.close(before_unlock=None if applied is None else lambda: finish_apply(applied.backup_dir, store.root))
        return applied

    @classmethod
    def _open(cls, path: str | os.PathLike, writable: bool = False, flush: str = "async", *,
              commitlog_size: int | None = None, cq_size: int | None = None, index_slots: int | None = None,
              index_entries: int | None = None, store_host: str | tuple | None = None, dispatch: str = "inline",
              recover: bool = False, backup_dir: str | os.PathLike | None = None, clock=None,
              recovery: RecoverySettings | None = None, keep_index: bool = False, missing_file_ok: bool = False,
              sizes: GivenSizes | None = None, command: str | None = None, rewrites: tuple = (),
              on_written=None, copy_taken_over: bool = False, **settings) -> "Store":
        """Open a store. ``writable=False`` never writes and takes no lock.

        Sizes (commit log file size, consume queue file size, index slots and entries) are
        the store's own when it has files; otherwise these arguments (or ``sizes``: the
        same, a batch consume queue file size, a broker config file, and whether defaults
        may be assumed) or the broker defaults (:func:`store_sizes`). A writable open of a
        store with commit log files refuses (UsageError, nothing written) to write files
        whose size nothing shows and nobody gave, unless ``sizes.assume_defaults``.
        A writable open refuses (RecoveryNeeded, changing nothing) a store whose recovery plan
        is not empty: the abort marker, bytes after the last good record of the commit log (a
        torn record among them), segments after its end holding data, consume queue units past
        it. ``recover``: apply the plan first, every byte it changes backed up in
        ``backup_dir`` (default: beside the store, named by the time; :attr:`recovery` says
        what was done), then dispatch consume queues and index again from the plan's start.
        ``recovery`` (the broker version's rules, forced abnormal recovery, CRC settings) and
        ``keep_index`` change the plan as ``rmqtool recover`` does; ``missing_file_ok`` recovers a
        store with a missing middle commit log file (as the broker loads it) instead of refusing
        it. ``rewrites`` (recover --keep-past-damage: damaged records replaced by records of
        their size, ``recovery/apply.Rewrite``) are written first, in the same backup, and the
        plan of the store they leave is carried out. ``copy_taken_over`` (recover's repair): a
        recover --to copy's marker, which names no backup, is no interrupted repair to refuse.
        Other ``settings`` are StoreConfig fields.
        """
        if flush not in ("async", "sync"):
            raise UsageError(f"flush must be async or sync, not {flush!r}")
        if dispatch not in ("inline", "background"):
            raise UsageError(f"dispatch must be inline or background, not {dispatch!r}")
        unknown = set(settings) - {f.name for f in dataclasses.fields(StoreConfig)}
        if unknown:
            raise UsageError(f"unknown store settings: {', '.join(sorted(unknown))}")
        config = StoreConfig(flush_disk_type=flush, dispatch=dispatch, **settings)
        root = pathlib.Path(path)
        if writable:
            raise_open_files_limit()  # a queue's file open at a time, as the broker's JVM allows
        said = {"commit_log": commitlog_size, "consume_queue": cq_size, "index_slots": index_slots,
                "index_entries": index_entries}
        given = dataclasses.replace(sizes or GivenSizes(), **{k: v for k, v in said.items() if v is not None})
        elsewhere = commit_log_paths_of(root)
        if not writable:
            store = cls(root, False, config)
            store.commit_log_paths = elsewhere
            store._open_read_only(given)
            return store
        if not recover and _appends_nowhere(elsewhere):
            # appends go where the broker puts them; a recovery truncates files on whichever disk they are
            raise UsageError(multi_path_refusal(elsewhere, appending=True), root)
        store = cls(root, True, config)
        store.commit_log_paths = elsewhere
        store._recovery_settings = recovery or RecoverySettings()
        store._keep_index = keep_index
        store._missing_file_ok = missing_file_ok
        store._command = command
        store._rewrites = tuple(rewrites)
        store._on_written = on_written
        store._copy_taken_over = copy_taken_over
        store._clock = clock or _wall_clock_ms
        store._wall_clock = clock is None  # _put_run then reads the clock inline
        store._open_writable(given, store_host, recover, backup_dir)
        return store

    def _open_read_only(self, given: GivenSizes) -> None:
        root = self.root
        if not root.exists():
            raise NotAStore("no store here", root)
        if not root.is_dir():
            raise NotAStore("not a directory", root)
        self._infer_sizes(given)

    def _infer_sizes(self, given: GivenSizes) -> None:
        c = self.config
        self.sizes = s = store_sizes(self._sized(), given)
        c.mapped_file_size_commit_log = s.commit_log.value
        c.mapped_file_size_consume_queue = s.consume_queue.value
        c.max_hash_slot_num, c.max_index_num = s.index_slots.value, s.index_entries.value
        if c.mapped_file_size_commit_log <= END_FILE_MIN_BLANK_LENGTH + 128:
            if s.commit_log.taken_from == "files":  # the files say so: a truncated store, not a setting
                raise CorruptData(f"commit log files of {s.commit_log.value} bytes: too small to be the broker's",
                                  s.commit_log.shown_by)
            raise UsageError(f"commit log file size {c.mapped_file_size_commit_log} is too small")

    def _open_writable(self, given: GivenSizes, store_host, recover, backup_dir) -> None:
        root = self.root
        if root.exists() and not root.is_dir():
            raise NotAStore("not a directory", root)
        if root.is_dir() and any(root.iterdir()) and not any(
                (root / n).exists() for n in (paths.COMMITLOG_DIR, paths.CONSUMEQUEUE_DIR, paths.INDEX_DIR,
                                              paths.CHECKPOINT_FILE, paths.LOCK_FILE)):
            raise NotAStore("not a RocketMQ store, and not empty: refusing to write here", root)
        new = not root.exists() or not any(root.iterdir())
        self._made_here = new  # a store made now takes the sizes given or the defaults; one found empty does not
        try:
            root.mkdir(parents=True, exist_ok=True)
            if new and self.commit_log_paths is None:  # a store, though nothing be appended (every
                self.paths.commitlog.mkdir(exist_ok=True)  # reader knows a store by its commitlog/)
        except OSError as exc:
            raise StoreAccessError(f"cannot create the store directory ({exc.strerror})", root) from None
        unfinished = read_unfinished(root)
        # a recover --to copy not yet repaired: recover's repair takes its marker over (intent.begin)
        if unfinished is not None and not (self._copy_taken_over and unfinished.unchanged_copy):
            raise RepairUnfinished(f"not written: {unfinished.says()}: {unfinished.ways_out()}", root)
        self._lock = StoreLock(self.paths.lock)
        self._made_lock = not self.paths.lock.exists()  # undo of a recovery removes a lock file made here
        if not self.paths.lock.exists():
            # nobody holds a lock file that is not there: refuse before making one
            self._infer_sizes(given)
            self._plan(recover)
        self._lock.acquire()
        try:
            self._load(given, store_host, recover, backup_dir)
        except BaseException:
            self._abandon()
            raise

    def _plan(self, recover: bool) -> RecoveryPlan:
        """The recovery plan; a store that needs recovery is refused unless ``recover``."""
        plan = plan_recovery(self._sized(), commit_log_file_size=self.config.mapped_file_size_commit_log,
                             consume_queue_file_size=self.config.mapped_file_size_consume_queue,
                             settings=self._recovery_settings, keep_index=self._keep_index,
                             missing_file_ok=self._missing_file_ok)
        if plan.semantics_undecided:  # which broker's recovery to follow is the operator's to say (even
            # whether it loads the store at all)
            raise UsageError(f"give the broker version's rules (--semantics): {plan.semantics_undecided}", self.root)
        if plan.refusal or plan.dispatch_refusal:
            raise CorruptData(plan.refusal or plan.dispatch_refusal, self.root)
        if recover and not plan.is_empty:
            self._refuse_duplicated_files()
        if not plan.is_empty and not recover:
            first = plan.findings[0]
            more = f" (and {len(plan.findings) - 1} more)" if len(plan.findings) > 1 else ""
            raise RecoveryNeeded(f"{first.id}: {first.message}{more}; the store needs recovery before it is "
                                 f"written: open it with recover (append --recover), which backs up every byte "
                                 f"it changes first", first.path, first.offset, plan=plan)
        self.sizes.require(unknown_sizes(self._sized(), self.sizes, plan, self.config.message_index_enable,
                                         made_here=self._made_here), self.root)
        return plan

    def _refuse_duplicated_files(self) -> None:
        """A file name in two commit log paths: the broker loads both copies and truncateDirtyFiles
        cuts both, in an order its HashSet decides; rmqtool reads one, so it changes neither."""
        if self.commit_log_paths is None:
            return
        listing = self._commit_log_listing(self.config.mapped_file_size_commit_log)
        twice = next((f for f in listing.findings if f.id == COMMIT_LOG_FILE_DUPLICATED), None)
        if twice is not None:
            raise CorruptData(f"not recovered: {twice.message}; keep one copy (the broker's recovery cuts "
                              f"both), then recover; nothing written", twice.path)

    def _batch_topics(self, plan: RecoveryPlan) -> frozenset:
        return plan_batch_topics(self.root, plan)

    def _load(self, given: GivenSizes, store_host, recover, backup_dir) -> None:
        """DefaultMessageStore.load then start, a named step each: the plan (nothing changed
        yet), the marker (and the plan applied), the commit log, the consume queues and the
        index, the reput from the plan's start, the services."""
        self._infer_sizes(given)
        self._broker_config = given.broker_config
        plan = self._plan(recover)  # nothing has changed yet: a refusal leaves every byte and mtime
        self._put_lock = threading.Lock()
        self.delay_levels = DelayLevels(self.config.message_delay_level)
        plan = self._recover_and_create_temp_file(plan, backup_dir, recover)
        self._load_commit_log(plan, store_host)
        self._load_consume_queues_and_index(plan)
        self._reput(plan)
        self._start_services()

    def _recover_and_create_temp_file(self, plan: RecoveryPlan, backup_dir, recover: bool) -> RecoveryPlan:
        """The plan applied (backed up first) and the abort marker made (createTempFile); the
        plan carried out is returned (with rewrites: the plan of the store they left). A
        recovery whose plan is empty but whose dispatch writes (a queue or the index behind the
        log) is backed up too: what dispatch changes, undo gives back."""
        # from here on files change: the marker goes first, so that a failure or a kill
        # before a clean close leaves the store marked as not cleanly shut down
        if not plan.is_empty or self._rewrites or (recover and not plan.changes_nothing):
            # backed up, the listing taken and the intent recorded first
            self.recovery = apply_plan(plan, backup_dir, finish=False, before_change=self._mark_and_write_abort,
                                       command=self._command, lock_marked=True,
                                       made_here=(paths.LOCK_FILE,) if self._made_lock else (),
                                       rewrites=self._rewrites, replan=lambda: self._plan(True),
                                       commit_log_directories=self._commit_log_directories(),
                                       on_written=self._on_written)
            return self.recovery.plan
        self._mark_and_write_abort()
        return plan

    def _mark_and_write_abort(self) -> None:
        """The lock file marked and the abort marker made: the first bytes a start changes (after
        the backup of a recovery, which holds the lock file's bytes when the mark changes them)."""
        self._lock.mark()
        self._write_abort_marker()

    def _load_commit_log(self, plan: RecoveryPlan, store_host) -> None:
        """CommitLog.load at the plan's end: the files made ahead dropped, the encoder for the
        store's host and CRC entries, the checkpoint writer."""
        c = self.config
        end = plan.commit_log
        for seg in end.extra_segments:
            try:
                os.unlink(seg.path)  # made ahead and never used, as truncateDirtyFiles drops them
            except FileNotFoundError:
                pass  # held data: the plan deleted it (backed up)
        queue = self._commit_log_listing(c.mapped_file_size_commit_log)
        host = store_host if store_host is not None else (end.store_host or DEFAULT_STORE_HOST)
        self.store_host = as_host(host)
        self.encoder = Encoder(self.store_host, self.delay_levels, c.max_message_size)
        o = plan.outcome
        if o is None or o.semantics != V5:
            self.encoder.v2_refused = ("this store is a 4.9 one" if o is not None and o.semantics_known else
                                       "this store shows no 5.x mark")
        self.prop_crc, self.prop_crc_reason = _prop_crc(c.enabled_append_prop_crc, end.last_message)
        # not asked and the store shows none: a message that carried an entry (a moved
        # record: salvage --to-store, append --from-jsonl) gets one over its new place
        self.encoder.append_prop_crc = (True if self.prop_crc else
                                        None if c.enabled_append_prop_crc is None else False)

        self.checkpoint = CheckpointWriter(self.paths.checkpoint)
        self.allocator = AllocateMappedFileService()
        self.commit_log = WritableFileQueue(self.paths.commitlog, c.mapped_file_size_commit_log, self.allocator,
                                            place=self._new_file_place())
        if queue.segments:
            full = end.segment_base is None  # the last segment ends with a blank: the next one is new
            self.commit_log.load(last_wrote_position=c.mapped_file_size_commit_log if full else end.wrote_position,
                                 listing=queue)
            if self.commit_log.max_offset != end.end:
                raise CorruptData(f"the commit log ends at {end.end}, its segments say {self.commit_log.max_offset}",
                                  self.paths.commitlog)

    def _load_consume_queues_and_index(self, plan: RecoveryPlan) -> None:
        """loadConsumeQueue (5.x: the batch consume queues too) and IndexService.load, and the
        dispatcher that feeds them."""
        c = self.config
        # a 5.x store's batch topics dispatch into batchconsumequeue/ (ConsumeQueueStore holds both kinds)
        batch = self._batch_topics(plan)
        self.batch_queues = None
        if batch:
            self.batch_queues = BatchConsumeQueueTable(self.paths.batch_consumequeue,
                                                       self.sizes.batch_consume_queue.value, batch)
            self.batch_queues.load()
        ext = ext_writing(self.root, self._broker_config)
        if c.enable_consume_queue_ext is not None:
            ext = dataclasses.replace(ext, enabled=c.enable_consume_queue_ext)
        ext_size = c.mapped_file_size_consume_queue_ext or ext.file_size
        self.consume_queues = ConsumeQueueTable(self.paths.consumequeue, c.mapped_file_size_consume_queue,
                                                self.batch_queues, ext_size if ext.enabled else None)
        applied = self.recovery is not None and plan.outcome is not None
        self.consume_queues.load(plan.outcome.queues_walked_from if applied else None)
        self.index_service = None
        if c.message_index_enable:
            self.index_service = IndexServiceWriter(self.paths.index, c.max_hash_slot_num, c.max_index_num,
                                                    self.checkpoint, self._clock)
            self.index_service.load()
        self.dispatcher = CommitLogDispatcher(self.consume_queues, self.index_service, self.checkpoint,
                                              batch_queues=self.batch_queues)

    def _reput(self, plan: RecoveryPlan) -> None:
        """ReputMessageService from the plan's start: what the queues and index are behind."""
        # from the plan's start (abnormal recovery: a segment back; a queue's max physical
        # offset and the index's end offset make a second dispatch a no-op)
        # the recovery's dispatch multi-dispatches as the store shows the broker did; appends after it
        # dispatch as a 4.9.x broker with its default settings does (no multi-dispatch)
        self.dispatcher.multi_dispatch = plan.multi_dispatch
        self.reput = ReputMessageService(self.commit_log, self.dispatcher, self.delay_levels,
                                         max(plan.redispatch_from, self.commit_log.min_offset))
        before = self._dispatched_bytes() if self._on_written is not None else 0
        try:
            self.reput.do_reput()
        finally:
            self.dispatcher.multi_dispatch = None
        if self._on_written is not None:
            self._on_written(self._dispatched_bytes() - before)
        if self.recovery is not None:
            step()  # the kill tests: dispatched, not closed
        self.topic_queue_table = self.consume_queues.queue_offsets()

    def _dispatched_bytes(self) -> int:
        """The consume queue units (and blank fill) and index entries written so far, in bytes (recover
        --apply's bar: what the re-dispatch writes)."""
        units = sum(cq.bytes_written for cq in self.consume_queues.queues.values())
        entries = self.index_service.entries_written if self.index_service is not None else 0
        return units + entries * INDEX_SIZE

    def _start_services(self) -> None:
        """DefaultMessageStore.start: the flush services, the warmer, background dispatch."""
        c = self.config
        if c.flush_disk_type == "sync":
            self.flusher = GroupCommitService(self.commit_log, self.checkpoint, timeout_ms=c.sync_flush_timeout)
        else:
            self.flusher = FlushRealTimeService(self.commit_log, self.checkpoint,
                                                interval_ms=c.flush_interval_commit_log,
                                                least_pages=c.flush_commit_log_least_pages,
                                                thorough_interval_ms=c.flush_commit_log_thorough_interval)
        self.cq_flusher = FlushConsumeQueueService(self.consume_queues, self.checkpoint, self.index_service,
                                                   interval_ms=c.flush_interval_consume_queue,
                                                   least_pages=c.flush_consume_queue_least_pages,
                                                   thorough_interval_ms=c.flush_consume_queue_thorough_interval)
        for service in (self.flusher, self.cq_flusher, self.reput):
            service.on_error = self._refresh_usable
        self.warmer = WarmAheadService(self.commit_log, dirty_ahead=c.flush_disk_type != "sync")
        if self.recovery is None:  # a repair's open is closed before any append: it warms no page
            self.warmer.start()  # (populating the last file's zeros would change a file it did not back up)
        self.flusher.start()
        self.cq_flusher.start()
        if c.dispatch == "background":
            self.reput.start()
        self._inline = c.dispatch == "inline"
        self._sync = c.flush_disk_type == "sync"
        self._max_fit = c.mapped_file_size_commit_log - END_FILE_MIN_BLANK_LENGTH
        self._wake_flusher_at = 0  # async: look at the flusher again once a page more is written
        self._plain_async = self._inline and not self._sync
        self._prepare = self.encoder.prepare_fields  # a plain tuple: the put paths only unpack it
        # append_many as columns: dispatch is consume queue runs and index keys only
        self._columns_ok = (COLUMN_PUT and self._inline and self.batch_queues is None
                            and not self.consume_queues.ext_enabled)
        # append() of a message in the kernel: the same dispatch (consume queue units and index only)
        self._native_put = self._columns_ok and not self.dispatcher.skip_topics
        self._queues = self.consume_queues.queues
        self._usable = True

    def _write_abort_marker(self) -> None:
        """4.9.8's createTempFile: an empty ``abort`` file while the store is open (the broker
        makes it at the end of start(); here it comes before the first change to a file)."""
        try:
            fd = os.open(self.paths.abort, os.O_WRONLY | os.O_CREAT, 0o644)
            os.close(fd)
        except OSError as exc:
            raise StoreAccessError(f"cannot create the abort marker ({exc.strerror})", self.paths.abort) from None

    # ---- appending -------------------------------------------------------------------------
    def append(self, msg: MessageInner, selector=None) -> PutResult:
        """putMessage: one message; returns once it is written, dispatched (inline mode) and,
        with sync flush, flushed. ``selector(msg)``, when given, picks the queue id (as a
        producer's MessageQueueSelector would) instead of ``msg.queue_id``."""
        if selector is None:
            kernel = native.kernel
            put_one = self._put_one if kernel is self._put_one_kernel else self._appender(kernel)
            if put_one is not None:
                # _put_locked's common case in C, in the put lock (native/append.c); async, it wakes the
                # flusher after as _after_put does (_wake_flusher)
                result = put_one(msg)
                if result is not None:
                    return result if self._plain_async else self._after_put(result)
        if not self._usable:
            self._check_open()
        p = self._prepare(msg, None if selector is None else selector(msg))
        if p[TOTAL_SIZE] > self._max_fit:
            self._check_fits(p[TOTAL_SIZE])
        with self._put_lock:
            result = self._put_locked(p)
        if self._plain_async:  # _after_put's async, inline-dispatch case, without the call
            if result.wrote_offset >= self._wake_flusher_at:
                self._wake_flusher(result.wrote_offset)
            return result
        return self._after_put(result)

    def _appender(self, kernel):
        """The appender of ``kernel`` (native.kernel as append() found it) for this store, or None: a
        store not open for appending, or one whose dispatch is more than consume queue units and index
        entries (native/append.c: it keeps the files, queues and index file it last wrote, and reads them
        again when another put changed them)."""
        self._put_one, self._put_one_kernel = None, kernel
        if kernel is not None and self._usable and self._native_put and kernel_for_append(PUT_OK) is kernel:
            e = self.encoder
            self._put_one = kernel.appender(
                self.commit_log, self._queues, self.topic_queue_table, self.reput, self.checkpoint,
                self.index_service, e._shapes, TAGS_CODES, e, None if self._wall_clock else self._clock,
                e.max_body_size, e.max_record_size, MAX_PROPERTIES_LENGTH, PutResult, END_FILE_MIN_BLANK_LENGTH,
                self._put_lock, self._wake_flusher if self._plain_async else None)
        return self._put_one

    def _wake_flusher(self, offset: int) -> int:
        """Async flush, after a put at ``offset``: the flusher is looked at (maybe_wakeup: woken when
        flushCommitLogLeastPages are dirty) once a page more is written since it last was. Returns the
        offset from which to call again (the appender skips the calls before it, which do nothing)."""
        if offset >= self._wake_flusher_at:
            self.flusher.maybe_wakeup()
            self._wake_flusher_at = offset + OS_PAGE_SIZE
        return self._wake_flusher_at

    def append_many(self, messages, selector=None) -> list[PutResult]:
        """Many single puts: each exactly as :meth:`append` would put it, with one lock, one
        dispatch pass and one flush wait for all of them (a bulk loader's path)."""
        if not self._usable:
            self._check_open()
        queue_ids = None  # a selector's choices, asked once a message
        if self._columns_ok:
            messages = messages if isinstance(messages, list) else list(messages)
            if selector is not None:
                queue_ids = list(map(selector, messages))
            kernel = native.kernel
            appender = self._put_one if kernel is self._put_one_kernel else self._appender(kernel)
            if appender is not None:
                with self._put_lock:
                    results = self._put_many_native(appender, messages, queue_ids)
                    if results is not None:
                        status = self._after_put(results[-1]).status
                        return results if status == PUT_OK else [r.with_status(status) for r in results]
            cols = self.encoder.prepare_columns(messages, queue_ids)
            if cols is not None:
                if int(cols.sizes.max()) > self._max_fit:
                    self._check_fits(next(s for s in cols.sizes.tolist() if s > self._max_fit))
                with self._put_lock:
                    results = self._put_columns(cols) if self.reput.behind() == 0 else None
                if results is not None:
                    status = self._after_put(results[-1]).status
                    return results if status == PUT_OK else [r.with_status(status) for r in results]
        prepare = self._prepare
        if selector is None:
            prepared = [prepare(m) for m in messages]
        elif queue_ids is not None:
            prepared = [prepare(m, q) for m, q in zip(messages, queue_ids)]
        else:
            prepared = [prepare(m, selector(m)) for m in messages]
        max_fit, total_size = self._max_fit, TOTAL_SIZE
        for p in prepared:
            if p[total_size] > max_fit:
                self._check_fits(p[total_size])
        if not prepared:
            return []
        with self._put_lock:
            if self._inline and self.reput.behind() == 0:
                results = self._put_run(prepared)
            else:
                put = self._put_locked
                results = [put(p) for p in prepared]
        status = self._after_put(results[-1]).status
        if status != PUT_OK:
            results = [r.with_status(status) for r in results]
        return results

    def _put_many_native(self, appender, messages: list, queue_ids: list | None) -> list[PutResult] | None:
        """append()'s kernel put (the appender) for messages in a row (native/append.c put_many): the
        kernel puts them while they are the common case (records placed in one buffer and written
        with pwrite, as :meth:`_put_run` writes them, then their units and index entries, and the
        file's, reput's and the checkpoint's bookkeeping as for one message); a message that needs a
        new segment, queue file or index file, or a queue not there yet, is put the Python way
        (:meth:`_put_locked`), and the kernel goes on after it. None when the kernel declines the
        messages (nothing written, no clock read): the Python paths put them all. Store timestamps
        come from the clock as the Python put of many messages reads it: once each, in order,
        before any is placed."""
        n = len(messages)
        if not n:
            return None
        stamps = None if self._wall_clock else []
        results = []
        put_many = appender.put_many
        i = 0
        while i < n:
            got = put_many(messages, i, queue_ids, stamps, results)
            if got is None:
                if i == 0:
                    return None
                results += [self._put_locked(self._prepared_at(m, j, queue_ids, stamps))
                            for j, m in enumerate(messages[i:], i)]
                break
            done, pos, error = got
            mf = self.commit_log.last
            if error:  # as _write_part says it; nothing of these was accounted or dispatched
                raise StoreAccessError(f"write failed ({os.strerror(error)})", mf.path, pos)
            if done > i:
                self.warmer.written_to(mf.file_from_offset + pos)  # written with pwrite, as _put_run writes
                i = done
            if i < n:  # the next one the Python way: a new segment, queue file or index file
                results.append(self._put_locked(self._prepared_at(messages[i], i, queue_ids, stamps)))
                i += 1
        return results

    def _prepared_at(self, msg: MessageInner, i: int, queue_ids: list | None, stamps: list | None) -> tuple:
        """prepare_fields of message ``i`` of a put of many, with the store timestamp read for it."""
        p = self._prepare(msg, None if queue_ids is None else queue_ids[i])
        if stamps and p[6] is None:  # PreparedRecord.store_timestamp
            p = (*p[:6], stamps[i], *p[7:])
        return p

    def _put_locked(self, p: PreparedRecord) -> PutResult:
        """doAppend for one record, in the put lock, then its inline dispatch."""
        (topic, queue_id, record, size, sys_flag, store_ts_at, store_ts, code, keys, uniq, delay_level,
         store_ip, store_port, gets_queue_offset, magic, prop_crc) = p
        if store_ts is None:
            store_ts = self._clock()
        if gets_queue_offset:
            key = (topic, queue_id)
            table = self.topic_queue_table
            queue_offset = table.get(key, 0)
            table[key] = queue_offset + 1
        else:
            queue_offset = 0
        mf = self.commit_log.last
        if mf is None or mf.wrote_position + size + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
            mf = self._room_for(size, store_ts)
        pos = mf.wrote_position
        offset = mf.file_from_offset + pos
        if pos + size > mf.backed:
            mf.back(pos + size)
        write_record(mf.mm, pos, record, magic, store_ts_at, queue_offset, offset, store_ts, prop_crc)
        mf.wrote_position = pos + size
        mf.store_timestamp = store_ts
        if self._inline:
            reput = self.reput
            if reput.reput_from_offset == offset:
                if delay_level:
                    code = self.delay_levels.deliver_timestamp(delay_level, store_ts)
                self.dispatcher.dispatch_one(topic, queue_id, offset, size, code, store_ts, queue_offset,
                                             keys, uniq, sys_flag)
                reput.reput_from_offset = offset + size
            else:
                reput.do_reput()  # a blank record before it, or something left behind
        return _tuple_new(PutResult, (PUT_OK, offset, size, queue_offset, store_ts, 1, topic, queue_id, (offset,),
                                      (uniq,), store_ip, store_port))

    def _put_columns(self, cols) -> list[PutResult]:
        """:meth:`_put_run` for messages prepared as columns (Encoder.prepare_columns): queue
        offsets handed out a queue at a time, the records of each segment they go to laid out
        at once (prepared_columns.records_of) and written with one pwrite, consume queue runs
        and index keys gathered as arrays. The same bytes as one message at a time."""
        import numpy as np

        n = len(cols)
        topic = cols.topic
        table = self.topic_queue_table
        if cols.store_timestamps is not None:
            stamps = cols.store_timestamps
        elif self._wall_clock:
            time_ns = time.time_ns
            stamps = [time_ns() // 1_000_000 for _ in range(n)]
        else:
            clock = self._clock
            stamps = [clock() for _ in range(n)]
        stamps_a = np.array(stamps, np.int64)
        queue_ids = np.array(cols.queue_ids, np.int64)
        queue_offsets = np.zeros(n, np.int64)
        rows_of = {}  # queue id -> its records' rows, for its consume queue run
        if cols.gets_queue_offset:
            for q in dict.fromkeys(cols.queue_ids):  # in the order first seen
                rows = np.flatnonzero(queue_ids == q)
                key = (topic, q)
                first = table.get(key, 0)
                queue_offsets[rows] = np.arange(first, first + len(rows))
                table[key] = first + len(rows)
                rows_of[q] = (first, rows)
        sizes = cols.sizes
        offsets = np.empty(n, np.int64)
        i = 0
        first_offset = None
        try:
            while i < n:
                size = int(sizes[i])
                mf = self.commit_log.last
                if mf is None or mf.wrote_position + size + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
                    mf = self._room_for(size, stamps[i])  # an end-of-file blank record, then the next segment
                pos = mf.wrote_position
                ends = pos + np.cumsum(sizes[i:])
                j = i + int(np.searchsorted(ends, mf.file_size - END_FILE_MIN_BLANK_LENGTH, side="right"))
                offsets[i:j] = mf.file_from_offset + ends[:j - i] - sizes[i:j]
                if first_offset is None:
                    first_offset = int(offsets[i])
                data = records_of(cols, i, j, queue_offsets[i:j], offsets[i:j], stamps_a[i:j])
                _write_part(mf, data, 0, len(data), pos + len(data), stamps[j - 1])
                self.warmer.written_to(mf.file_from_offset + mf.wrote_position)
                i = j
        except BaseException:  # a roll failed: the queue offsets of records not written are not taken
            for q, (first, rows) in rows_of.items():
                table[(topic, q)] = first + int(np.count_nonzero(rows < i))
            raise
        offset_list, size_list = offsets.tolist(), sizes.tolist()
        results = list(map(_tuple_new, repeat(PutResult, n), zip(
            repeat(PUT_OK, n), offset_list, size_list, queue_offsets.tolist(), stamps, repeat(1, n), repeat(topic, n),
            cols.queue_ids, zip(offset_list), zip(cols.uniq_keys), repeat(cols.store_ip, n),
            repeat(cols.store_port, n))))
        runs = []
        if rows_of:
            codes = np.array(cols.tags_codes, np.int64)
            for q, (first, rows) in rows_of.items():
                units = np.column_stack((offsets[rows], sizes[rows], codes[rows])).ravel().tolist()
                runs.append([topic, q, first, first + len(rows), units])
        index_keys = None
        if self.index_service is not None:
            index_keys = self._index_keys(cols, offset_list, stamps)
        reput = self.reput
        with reput.lock:
            if reput.reput_from_offset != first_offset:
                reput.do_reput()  # a blank record before the first, or something left behind
            else:
                self.dispatcher.dispatch_runs(None, runs, stamps[-1] if runs else 0, index_keys)
                reput.reput_from_offset = offset_list[-1] + size_list[-1]
        return results

    @staticmethod
    def _index_keys(cols, offsets: list, stamps: list) -> tuple:
        """build_index_keys' arguments for records put as columns: topic#UNIQ_KEY, then
        topic#key for each of KEYS, a record at a time (none for rollback records)."""
        last = offsets[-1]
        if cols.sys_flag & TRANSACTION_MASK == TRANSACTION_ROLLBACK_TYPE:
            return [], [], [], last
        topic = cols.topic
        if None not in cols.uniq_keys and not any(cols.keys):  # one key a record: topic#UNIQ_KEY
            return [build_key(topic, u) for u in cols.uniq_keys], offsets, stamps, last
        names, at, times = [], [], []
        for uniq, keys, offset, ts in zip(cols.uniq_keys, cols.keys, offsets, stamps):
            found = index_keys_of(topic, uniq, keys)
            names += found
            at += [offset] * len(found)
            times += [ts] * len(found)
        return names, at, times, last

    # Over 80 lines on purpose: append_many's loop a record, its names bound to locals once;
    # split into calls, each record would pay a call and its state (buffer, position, runs) would travel
    def _put_run(self, prepared: list[PreparedRecord]) -> list[PutResult]:
        """doAppend for many records in a row, in the put lock, then their inline dispatch in one
        pass: the records placed in one buffer and written to their segment with one pwrite (no
        page fault a record), queue offsets handed out here, each queue's consume queue units
        gathered into a run. A store whose dispatch is consume queue runs and index entries
        only has its index keys gathered and hashed at once; one with ext units or batch
        consume queues gets the dispatch requests (_dispatch_inline)."""
        plain = self.batch_queues is None and not self.consume_queues.ext_enabled
        requests = None if plain else []
        add_request = None if plain else requests.append
        clock = None if self._wall_clock else self._clock
        time_ns = time.time_ns
        table = self.topic_queue_table
        deliver = self.delay_levels.deliver_timestamp
        pack_qq, pack_q, pack_start = RECORD_PLACE.pack_into, RECORD_TIME.pack_into, RECORD_START.pack_into
        start_of = RECORD_START.pack
        buf = bytearray(sum([p[TOTAL_SIZE] for p in prepared]))
        results = []
        add_result = results.append
        new = _tuple_new
        runs = []  # dispatch_runs' [topic, queue id, first queue offset, next, flat units], a queue each
        run_units = {}  # (topic, queue id) -> its run's flat units
        last_unit_ts = 0
        keys_of = [] if plain and self.index_service is not None else None  # topic#key of each index entry
        key_offsets, key_stamps = [], []
        rollback = TRANSACTION_ROLLBACK_TYPE
        bpos = 0  # where the next record goes in buf
        written = 0  # buf up to here is in the commit log
        mf = self.commit_log.last
        if mf is None:  # no segment yet: the first record makes one
            base, pos, limit, last_ts = 0, 0, -1, 0
        else:
            base, pos = mf.file_from_offset, mf.wrote_position
            limit = mf.file_size - END_FILE_MIN_BLANK_LENGTH
            last_ts = mf.store_timestamp
        first_offset = base + pos
        try:
            for (topic, queue_id, record, size, sys_flag, store_ts_at, store_ts, code, keys, uniq, delay_level,
                 store_ip, store_port, gets_queue_offset, magic, prop_crc) in prepared:
                if store_ts is None:
                    store_ts = time_ns() // 1_000_000 if clock is None else clock()
                if gets_queue_offset:
                    key = (topic, queue_id)
                    queue_offset = table.get(key, 0)
                    table[key] = queue_offset + 1
                else:
                    queue_offset = 0
                if pos + size > limit:  # an end-of-file blank record, then the next segment
                    if mf is not None:
                        _write_part(mf, buf, written, bpos, pos, last_ts)
                        written = bpos
                    mf = self._room_for(size, store_ts)
                    base, pos = mf.file_from_offset, mf.wrote_position
                    limit = mf.file_size - END_FILE_MIN_BLANK_LENGTH
                    if not bpos:
                        first_offset = base + pos
                offset = base + pos
                # write_record, into the buffer
                buf[bpos:bpos + size] = record
                pack_qq(buf, bpos + QUEUE_OFFSET_AT, queue_offset, offset)
                pack_q(buf, bpos + store_ts_at, store_ts)
                if prop_crc:
                    fill_crc32_entry(buf, bpos, size, start_of(size, magic), fast_crc32)
                pack_start(buf, bpos, size, magic)
                bpos += size
                pos += size
                last_ts = store_ts
                if delay_level:
                    code = deliver(delay_level, store_ts)
                if add_request is not None:
                    add_request((topic, queue_id, offset, size, code, store_ts, queue_offset, keys, uniq, sys_flag))
                if gets_queue_offset:
                    units = run_units.get(key)
                    if units is None:
                        units = run_units[key] = []
                        runs.append([topic, queue_id, queue_offset, 0, units])
                    units += (offset, size, code)
                    last_unit_ts = store_ts
                if keys_of is not None and (uniq is not None or keys) and sys_flag & TRANSACTION_MASK != rollback:
                    names = index_keys_of(topic, uniq, keys)
                    keys_of += names
                    key_offsets += [offset] * len(names)
                    key_stamps += [store_ts] * len(names)
                add_result(new(PutResult, (PUT_OK, offset, size, queue_offset, store_ts, 1, topic, queue_id,
                                           (offset,), (uniq,), store_ip, store_port)))
        finally:  # what was placed is written and stays accounted for, even if a roll failed half way
            if mf is not None:
                _write_part(mf, buf, written, bpos, pos, last_ts)
                self.warmer.written_to(base + pos)
        if requests is not None:
            self._dispatch_inline(requests, runs, last_unit_ts)
            return results
        reput = self.reput
        with reput.lock:
            if reput.reput_from_offset != first_offset:
                reput.do_reput()  # a blank record before the first, or something left behind
            else:
                last = results[-1]
                index_keys = None if keys_of is None else (keys_of, key_offsets, key_stamps, last.wrote_offset)
                self.dispatcher.dispatch_runs(None, runs, last_unit_ts, index_keys)
                reput.reput_from_offset = last.wrote_offset + last.wrote_bytes
        return results

    def _room_for(self, size: int, store_ts: int):
        """The segment the next record goes to: the current one, or (after an end-of-file
        blank record when the record does not fit) the next one."""
        cl = self.commit_log
        mf = cl.last_mapped_file(0)
        if mf.wrote_position + size + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
            self._write_blank(mf, mf.wrote_position, store_ts)
            mf = cl.last_mapped_file(0)
        return mf

    def put_messages(self, batch: MessageBatch) -> PutResult:
        """putMessages(MessageExtBatch): each inner message becomes its own record, in one
        place (the whole batch moves to the next segment when it does not fit)."""
        if not self._usable:
            self._check_open()
        prepared = self.encoder.prepare_batch(batch)
        total = sum(p.total_size for p in prepared)
        self._check_fits(total)
        with self._put_lock:
            result, requests = self._append_batch_locked(prepared, total)
            if self._inline:
                self._dispatch_inline(requests)
        return self._after_put(result)

    @property
    def _unusable(self) -> bool:
        """Closed, read-only, or a service failed: append must say why."""
        return (self._closed or not self.writable or self.flusher.error is not None
                or self.cq_flusher.error is not None or self.reput.error is not None)

    def _refresh_usable(self) -> None:
        self._usable = not self._unusable
        if not self._usable:
            self._put_one = None  # append() says why

    def _check_open(self) -> None:
        if not self.writable:
            raise UsageError("the store is open read-only", self.root)
        if self._closed:
            raise UsageError("the store is closed", self.root)
        for service in (self.flusher, self.cq_flusher, self.reput):
            if service.error is not None:
                err = service.error
                raise err if isinstance(err, (CorruptData, StoreAccessError)) else StoreAccessError(
                    f"{type(service).__name__} failed: {err}", self.root)

    def _check_fits(self, size: int) -> None:
        if size + END_FILE_MIN_BLANK_LENGTH > self.config.mapped_file_size_commit_log:
            raise UsageError(f"{size} bytes of records cannot fit in a commit log file of "
                             f"{self.config.mapped_file_size_commit_log} bytes")

    def _write_blank(self, mf, pos: int, store_ts: int) -> None:
        """END_OF_FILE: totalSize = the bytes left, the blank magic; nothing else is written."""
        if mf.file_size - pos >= END_FILE_MIN_BLANK_LENGTH:  # the broker always leaves room for it
            mf.back(pos + BLANK.size)
            BLANK.pack_into(mf.mm, pos, mf.file_size - pos, BLANK_MAGIC_CODE)
        mf.wrote_position = mf.file_size
        mf.store_timestamp = store_ts

    def _append_batch_locked(self, prepared: list[PreparedRecord], total: int):
        first = prepared[0]
        store_ts = first.store_timestamp if first.store_timestamp is not None else self._clock()
        key = (first.topic, first.queue_id)
        begin = self.topic_queue_table.get(key, 0)
        mf = self._room_for(total, store_ts)
        pos = mf.wrote_position
        base = mf.file_from_offset
        mf.back(pos + total)
        offsets = []
        requests = []
        for i, p in enumerate(prepared):
            offset = base + pos
            p.write_into(mf.mm, pos, begin + i, offset, store_ts)
            pos += p.total_size
            offsets.append(offset)
            requests.append(DispatchRequest(p.topic, p.queue_id, offset, p.total_size, p.tags_code, store_ts,
                                            begin + i, p.keys, p.uniq_key, p.sys_flag))
        mf.wrote_position = pos
        mf.store_timestamp = store_ts
        self.topic_queue_table[key] = begin + len(prepared)
        result = PutResult(PUT_OK, offsets[0], total, begin, store_ts, len(prepared), first.topic, first.queue_id,
                           tuple(offsets), tuple(p.uniq_key for p in prepared), first.store_ip, first.store_port)
        return result, requests

    def _dispatch_inline(self, requests, runs=None, last_unit_ts: int = 0) -> None:
        """Dispatch records just written, in order; anything before them not yet dispatched
        (the blank record of a roll, say) is read back from the commit log instead. ``runs``:
        their consume queue units already gathered (CommitLogDispatcher.dispatch_runs)."""
        if not requests:
            return
        reput = self.reput
        with reput.lock:
            first_offset = requests[0][_REQUEST_OFFSET]
            if reput.reput_from_offset != first_offset:
                reput.do_reput()
                return
            if runs is None or self.batch_queues is not None or self.consume_queues.ext_enabled:
                # runs are consume queue units only, without the store times ext units take
                self.dispatcher.dispatch(requests)
            else:
                self.dispatcher.dispatch_runs(requests, runs, last_unit_ts)
            last = requests[-1]
            reput.reput_from_offset = last[_REQUEST_OFFSET] + last[_REQUEST_SIZE]

    def _after_put(self, result: PutResult) -> PutResult:
        """Flush (sync: wait for it; async: wake the flusher when enough is dirty) and, in
        background mode, wake the dispatcher."""
        if self._sync:
            if not self.flusher.wait_flushed(result.wrote_offset + result.wrote_bytes):
                result = result.with_status(FLUSH_DISK_TIMEOUT)
        elif result.wrote_offset >= self._wake_flusher_at:
            self._wake_flusher(result.wrote_offset)
        if not self._inline:
            self.reput.wakeup()
        return result

    # ---- observing ---------------------------------------------------------------------------
    @property
    def dispatch_behind_bytes(self) -> int:
        """Commit log bytes written and not yet in the consume queues and index."""
        if not self.writable:
            return 0
        return self.reput.behind()

    def wait_dispatched(self, timeout: float = 10.0) -> bool:
        """Until dispatch has caught up (background mode); True when it has."""
        deadline = time.monotonic() + timeout
        while self.dispatch_behind_bytes > 0:
            if self.reput.error is not None:
                raise self.reput.error
            if time.monotonic() > deadline:
                return False
            self.reput.wakeup()
            time.sleep(0.001)
        return True

    @property
    def max_offset(self) -> int:
        """The commit log offset the next record goes to (getMaxPhyOffset)."""
        if self.writable:
            return self.commit_log.max_offset
        listing = self._commit_log_listing(self.config.mapped_file_size_commit_log)
        return (CommitLog.of_queue(listing).max_offset() or 0) if listing.segments else 0

    @property
    def min_offset(self) -> int:
        if self.writable:
            return self.commit_log.min_offset
        return self._commit_log_listing().min_offset or 0

    def queue_offsets(self) -> dict[tuple[str, int], int]:
        """The next queue offset of every consume queue (topic, queue id)."""
        if self.writable:
            with self._put_lock:
                return dict(self.topic_queue_table)
        out = {}
        for topic, queue_id, directory in queue_directories(self.paths.consumequeue):
            found = discover(directory, required=False, mapped_file_size=self.config.mapped_file_size_consume_queue)
            if found.segments:
                end = find_queue_end(found.segments, self.config.mapped_file_size_consume_queue)
                out[(topic, queue_id)] = end.end // CQ_STORE_UNIT_SIZE
        return out

    def locked_by(self) -> int | None:
        """The PID holding the store lock (this one when open writable), None when free."""
        return is_locked(self.paths.lock)

    def reader(self) -> CommitLog:
        """A read-only commit log reader over this store."""
        if self.commit_log_paths is not None:
            return CommitLog.of_queue(self._commit_log_listing(self.config.mapped_file_size_commit_log))
        return CommitLog(self.paths.commitlog, self.config.mapped_file_size_commit_log)

    def _sized(self) -> pathlib.Path | StoreView:
        """What the sizes are read from: the root, or its view when the commit log is kept elsewhere."""
        return self.root if self.commit_log_paths is None else StoreView(self.root, commit_log_paths=self.commit_log_paths)

    def _commit_log_listing(self, mapped_file_size: int | None = None):
        """The commit log's files: ROOT/commitlog's, or every path's of a log kept elsewhere."""
        if self.commit_log_paths is not None:
            return list_commit_log(self.commit_log_paths, self.root, mapped_file_size)
        return discover(self.paths.commitlog, required=False, mapped_file_size=mapped_file_size)

    def _commit_log_directories(self) -> list[str]:
        """The directories the commit log is loaded from when kept elsewhere (none: ROOT/commitlog)."""
        return self.commit_log_paths.directories if self.commit_log_paths is not None else []

    def _new_file_place(self):
        """Where a new commit log file goes when the log is kept elsewhere (None: ROOT/commitlog):
        MultiPathMappedFileQueue's rule with no disk full (file i in sorted writable path i mod n),
        or the one directory of a storePathCommitLog without the splitter."""
        given, size = self.commit_log_paths, self.config.mapped_file_size_commit_log
        if given is None:
            return None
        if not given.multi:
            return lambda offset: given.writable[0]
        return lambda offset: given.rule_directory(offset, size)

    # ---- closing -------------------------------------------------------------------------------
    def close(self, before_unlock: Callable[[], None] | None = None) -> None:
        """Flush everything, finish dispatch, write the checkpoint; then remove the abort marker
        (only if all of that worked) and release the lock. ``before_unlock``: what must be done
        while the lock is still held once all that worked (a repair's end: its marker cleared
        before another writer can take the store and find it)."""
        if self._closed or not self.writable:
            self._closed = True
            return
        self._closed = True
        self._usable = False
        clean = True
        errors: list[BaseException] = []
        with self._put_lock:
            self._put_one = None  # the appender holds the files' maps it last wrote
            for stop in (self.warmer.shutdown, self.reput.shutdown, self.reput.do_reput, self.flusher.shutdown,
                         self.cq_flusher.shutdown):
                try:
                    stop()
                except BaseException as exc:
                    errors.append(exc)
                    clean = False
            for service in (self.flusher, self.cq_flusher, self.reput):
                if service.error is not None:
                    errors.append(service.error)
                    clean = False
            try:
                if self.index_service is not None:
                    self.index_service.flush()
                    self.index_service.close()
                self.allocator.shutdown()
                stamp = self.commit_log.store_timestamp
                if stamp > 0:
                    self.checkpoint.physic_msg_timestamp = stamp
                self.checkpoint.close()
                self.consume_queues.close()
                behind = self.reput.behind()
                self.commit_log.close()
            except BaseException as exc:
                errors.append(exc)
                clean = False
                behind = 1
            if clean and behind == 0:
                try:
                    os.unlink(self.paths.abort)
                except FileNotFoundError:
                    pass
            try:
                if before_unlock is not None and not errors:
                    before_unlock()
            except BaseException as exc:
                errors.append(exc)
            finally:
                self._lock.release()
        if errors:
            err = errors[0]
            raise err if isinstance(err, (CorruptData, StoreAccessError)) else StoreAccessError(
                f"close failed: {err}", self.root)

    def _abandon(self) -> None:
        """A failed open: stop what was started, leave the files as they are, unlock."""
        for name in ("warmer", "reput", "flusher", "cq_flusher"):
            service = getattr(self, name, None)
            if service is not None:
                try:
                    service.shutdown()
                except BaseException:
                    pass
        for name in ("allocator",):
            service = getattr(self, name, None)
            if service is not None:
                service.shutdown()
        for name in ("index_service", "consume_queues", "commit_log", "checkpoint"):
            obj = getattr(self, name, None)
            if obj is not None:
                try:
                    obj.close()
                except BaseException:
                    pass
        self._closed = True
        self._lock.release()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.close()
        except Exception:
            if exc[1] is None:
                raise
            # the error that stopped the block is the one to tell (a full disk): the close's,
            # which follows from it, would hide it; the store stays marked unclean (abort)
