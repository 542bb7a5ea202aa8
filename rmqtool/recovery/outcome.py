"""What the broker's next start does to a store: DefaultMessageStore.load, recover and
start (4.9.8 or 5.3.3), simulated step by step over the files, nothing written.

1. ``_load`` (DefaultMessageStore.load): every commit log and consume queue file must have
   the mapped file size (else load() fails and the broker does not start); after an
   abnormal exit (the ``abort`` file, or a forced abnormal recovery) every index file whose
   endTimestamp is newer than the checkpoint's indexMsgTimestamp is destroyed, and dispatch
   builds the index again (``index_model``). 5.3.3 loads ``batchconsumequeue/`` too, and
   refuses a queue directory whose topic's queue type (topics.json ``queue.type``) is the
   other one.
2. ``_recover_consume_queues`` (recoverConsumeQueue): each queue recovered
   (``queue_model``; 5.3.3's batch queues: ``batch_queue_model``); the largest max physic
   offset among them is what the commit log recovery gets.
3. ``_recover_commit_log`` (CommitLog.recoverNormally / recoverAbnormally): the commit log
   walk (``commitlog_walk``); abnormal recovery dispatches every record it accepts (5.3.3
   normal recovery too, those past the queues' max physic offset).
4. ``_truncate_dirty_files``: truncateDirtyLogicFiles when the queues reach the recovered
   end; truncateDirtyFiles.
5. ``_recover_topic_queue_table_and_reput``: recoverTopicQueueTable (correctMinOffset);
   4.9.8 start() then dispatches from the queues' max physic offset to the end (and never
   finishes starting when that offset lies in no file); 5.3.3 starts dispatch at the end.

``_Start`` carries the store's state from phase to phase; ``_finish`` writes up what the
start left (queue ranges, the index, the messages no longer served).
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import stat
from typing import NamedTuple

import numpy as np

from rmqtool.dispatch.rules import DelayLevels
from rmqtool.formats.consumequeue import (CQ_STORE_UNIT_SIZE, DEFAULT_BATCH_CQ_FILE_SIZE, DEFAULT_CQ_FILE_SIZE,
                                          is_written_batch_unit, names_a_message)
from rmqtool.formats.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_NOT_TYPE
from rmqtool.recovery.commitlog_walk import (V4, V5, WalkEnd, WalkOptions, abnormal_start, first_store_timestamp,
                                             normal_start, walk)
from rmqtool.recovery.batch_queue_model import BatchQueueModel
from rmqtool.recovery.ext_model import StoreExts, max_ext_address
from rmqtool.recovery.index_model import IndexModel
from rmqtool.recovery.lost import FILE_MISSING, LOG_CUT, UNIT_LOST  # why a lost message is lost
from rmqtool.recovery.queue_model import QueueModel
from rmqtool.recovery.semantics import detect_semantics
from rmqtool.store.dledger import refuse_dledger
from rmqtool.store.checkpoint import loaded_checkpoint
from rmqtool.store.commitlog import ColumnMode, Corrupt, column_scan
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.commitlog_end import CommitLog, first_bytes, last_nonzero_from, last_written, segment_ranges, written_end
from rmqtool.store.arrays import read_records
from rmqtool.store.config import configured_batch_topics
from rmqtool.store.consumer_offsets import committed_queues
from rmqtool.store.consumequeue import BATCH_CQ_LAYOUT, CQ_LAYOUT, queue_directories, queue_file_size_shown
from rmqtool.store.message import Message
from rmqtool.store.record_columns import RecordColumns
from rmqtool.store.record_kernel import candidate_starts
from rmqtool.store.paths import LONG_MAX, StorePaths, is_segment_name, names_a_directory
from rmqtool.store.segments import Segment, discover, one_listing
from rmqtool.store.view import StoreView, view_of_root
from rmqtool.errors import CorruptData, FormatError, RmqError, StoreAccessError, StoreNotFound


@dataclasses.dataclass(frozen=True)
class Settings:
    """The broker's settings that change recovery (MessageStoreConfig)."""
    semantics: str | None = None  # None: detect from the store
    from_checkpoint: bool = False  # abnormal recovery even without the abort file
    check_crc: bool = True  # checkCRCOnRecover
    verify_prop_crc: bool = False  # 5.3.3 forceVerifyPropCRC
    # queue directories the start is simulated without, as if moved out of the store (redispatch --cq
    # rebuilds them: a file of theirs the load refuses is replaced, not a reason to stop)
    without_queue_dirs: frozenset = frozenset()


class QueueRange(NamedTuple):
    """A queue's [minOffsetInQueue, maxOffsetInQueue)."""
    min_offset: int
    max_offset: int


@dataclasses.dataclass
class Outcome:
    semantics: str
    semantics_reason: str
    abnormal: bool
    mode_reason: str
    loadable: bool = True
    reason: str | None = None
    advice: str | None = None
    refused_path: str | None = None  # the file or directory the load fails on, when one does
    start_index: int = 0
    start_file: str | None = None
    start_reason: str = ""
    walk: WalkEnd | None = None
    end_file: str | None = None  # the commit log file the walk ended in
    min_offset: int = 0
    written_end: int = 0  # one past the last record written (store/commitlog_end.written_end)
    recovered_end: int = 0  # where this start's recovery ends the log (the walk's processOffset)
    queues_before: dict = dataclasses.field(default_factory=dict)  # "TOPIC/Q" -> QueueRange
    queues: dict = dataclasses.field(default_factory=dict)
    queue_files_deleted: list = dataclasses.field(default_factory=list)
    commit_log_files_deleted: list = dataclasses.field(default_factory=list)
    index_files_destroyed: list = dataclasses.field(default_factory=list)  # (path, endTimestamp)
    index_msg_timestamp: int = 0
    index_rebuilt_as_is: bool = False  # the destroyed index files come back as they are (names aside)
    index_entries_put: int = 0  # keys dispatch puts into the index at the start
    index_entries_repeated: int = 0  # of those, keys a kept index file holds already (buildIndex's '<')
    index_entries_lost: int = 0  # entries of destroyed index files that nothing puts back
    index_kept_appended: str | None = None  # a kept index file the start appends to
    lost_messages: list = dataclasses.field(default_factory=list)
    reput_from: int = 0
    batch_topics: list = dataclasses.field(default_factory=list)  # 5.3.3: topics of batch consume queues
    batch_topics_reason: str = ""
    notes: list = dataclasses.field(default_factory=list)  # where rmqtool's apply keeps more than the broker
    semantics_known: bool = True  # False: the store does not say which version wrote it ("could not tell")
    semantics_undecided: str | None = None  # could not tell, and the two versions' rules differ here: why apply waits
    queue_models: dict = dataclasses.field(default_factory=dict)  # (topic, queue id) -> the queue after the start
    # (topic, queue id) -> the base offset of the file ConsumeQueue.recover walked from (the
    # third-last as loaded): a load of the files recovery left walks from there again, not from
    # the third-last of those left, which may hold zeroed units the broker's walk never read
    queues_walked_from: dict = dataclasses.field(default_factory=dict)
    # (commit log offset, topic) of the first record dispatch meets whose topic names no
    # directory (a damaged topic: the CRC covers only the body)
    topic_unnamed: tuple[int, str] | None = None
    # consumequeue_ext (enableConsumeQueueExt): "TOPIC/Q" -> [(file name, write position)] after the start
    ext_files: dict = dataclasses.field(default_factory=dict)
    ext_files_deleted: list = dataclasses.field(default_factory=list)

    def served(self, topic: str, queue_id: int, offsets: np.ndarray) -> np.ndarray | None:
        """Whether the queue serves each message (at these commit log offsets) after the start:
        a unit of it points there. None: not known here (a 5.x batch queue)."""
        q = self.queue_models.get((topic, queue_id))
        if q is None:
            return np.zeros(len(offsets), bool)
        if q.batch:
            return None
        return _members(offsets, q.units().commit_log_offsets)


    @property
    def max_offset_before(self) -> int:
        """The written end, by its name before 0.3."""
        return self.written_end

    @property
    def max_offset_after(self) -> int:
        """The recovered end, by its name before 0.3."""
        return self.recovered_end


def _members(values: np.ndarray, units: np.ndarray) -> np.ndarray:
    """``np.isin(values, units)``: a queue's units name rising commit log offsets, so a binary
    search answers without sorting both arrays (isin's cost on a 1M-message store); units out
    of order (a damaged queue) fall back to isin."""
    values = np.asarray(values)
    if units.size == 0 or values.size == 0 or not bool(np.all(units[1:] >= units[:-1])):
        return np.isin(values, units)
    at = np.minimum(np.searchsorted(units, values), units.size - 1)
    return units[at] == values


def _checkpoint(paths: StorePaths) -> tuple[int, int, str]:
    """(min timestamp, indexMsgTimestamp, where they come from): the fields as StoreCheckpoint
    loads them, a file of the wrong size too (store/checkpoint.loaded_checkpoint)."""
    try:
        cp = loaded_checkpoint(paths.checkpoint)
    except StoreNotFound:
        return 0, 0, "no checkpoint file (the broker makes a zeroed one)"
    except (FormatError, RmqError):
        return 0, 0, "the checkpoint cannot be read (read as zeros)"
    return cp.min_timestamp, cp.index_msg_timestamp, "the checkpoint"


class _Start:
    """One simulated start: the store's files as the phases change them, and the outcome they
    fill in (what DefaultMessageStore holds while it loads, recovers and starts)."""

    def __init__(self, view: StoreView, settings: Settings, commit_log_file_size: int | None,
                 consume_queue_file_size: int | None, delay_levels: DelayLevels | None, batch_learned: frozenset):
        self.view = view
        self.paths = view.paths
        self.delay_levels = delay_levels or DelayLevels()
        self.log = log = view.commit_log_listing(commit_log_file_size)  # the view's, unless a size is given
        self.segments: list[Segment] = log.segments
        self.semantics = settings.semantics
        abort = self.paths.abort.exists()
        abnormal = abort or settings.from_checkpoint
        mode_reason = ("the abort file is the running broker's: a start after it stops uncleanly" if abort and view.live
                       else "the abort file is there: the last broker did not shut down cleanly" if abort else
                       "forced (--from-checkpoint)" if abnormal else "no abort file: the last shutdown was clean")
        self.out = Outcome(self.semantics, "as asked (--semantics)", abnormal, mode_reason)
        self.size = commit_log_file_size or log.mapped_file_size or 0  # the commit log's mapped file size
        self.consume_queue_file_size = consume_queue_file_size
        self.options = WalkOptions(self.semantics, settings.check_crc, settings.verify_prop_crc)
        self.without_queue_dirs = settings.without_queue_dirs
        self.batch_learned = batch_learned
        self.queues: list[QueueModel | BatchQueueModel] = []
        self.by_key: dict[tuple[str, int], QueueModel | BatchQueueModel] = {}
        self.batch: set[str] = set()  # 5.3.3: the topics whose queues are BatchCQ
        self.bcq_size = DEFAULT_BATCH_CQ_FILE_SIZE
        self.reader: CommitLog | None = None
        self.index_model: IndexModel | None = None
        self.min_ts, self.checkpoint_source = 0, ""
        # a queue's (write position, max physic offset) once recovered and truncated, before dispatch
        self.recovered_at: dict = {}
        self.max_phy_cq = -1  # the largest max physic offset among the recovered queues
        self.inner_topics: set[str] = set()  # topics whose records carry INNER_BASE (only a BatchCQ writes it)
        self.kept: list[Segment] = []  # the commit log files truncateDirtyFiles leaves
        self.min_phy = 0  # the first kept file's offset: getMinPhyOffset
        self.exts = StoreExts(self.paths.root)  # the plain queues' ConsumeQueueExt, when the store has them

    def refuse(self, reason: str, advice: str, path: "pathlib.Path | str | None" = None) -> None:
        """The first reason the load fails is the one the broker logs; ``path``: what it fails on."""
        if self.out.loadable:
            self.out.loadable, self.out.reason, self.out.advice = False, reason, advice
            self.out.refused_path = None if path is None else str(path)

    def queue(self, topic: str, queue_id: int) -> QueueModel | BatchQueueModel:
        """findOrCreateConsumeQueue: the topic's queue type decides what a new queue is."""
        q = self.by_key.get((topic, queue_id))
        if q is None:
            if topic in self.batch:
                q = BatchQueueModel(topic, queue_id, [], self.bcq_size)
            else:
                q = QueueModel(topic, queue_id, [], self.consume_queue_file_size or _cq_file_size(self.queues))
            self.by_key[(topic, queue_id)] = q
            self.queues.append(q)
        return q

    def dispatch(self, request) -> None:
        """CommitLogDispatcherBuildConsumeQueue (not for prepared and rollback records) and
        CommitLogDispatcherBuildIndex."""
        if self.index_model is not None:
            self.index_model.put(request)
        if request.inner_batch:
            self.inner_topics.add(request.topic)
        tran = request.sys_flag & TRANSACTION_MASK
        if tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE:
            if not names_a_directory(request.topic) and self.out.topic_unnamed is None:
                self.out.topic_unnamed = (request.commit_log_offset, request.topic)  # a damaged topic: apply refuses
            q = self.queue(request.topic, request.queue_id)
            if q.batch:
                base = request.consume_queue_offset if request.msg_base_offset is None else request.msg_base_offset
                q.put(request.commit_log_offset, request.msg_size, request.tags_code, request.store_timestamp,
                      base, request.batch_size)
            else:  # with the ext, its unit first and its address in the unit's tagsCode field
                address = self.exts.of(q.topic, q.queue_id).put() if self.exts.enabled else 1
                q.put(request.commit_log_offset, request.msg_size, request.tags_code if address == 1 else address,
                      request.consume_queue_offset)

    def note_at_reach(self, r) -> None:
        """5.3.3 normal recovery leaves out the record at exactly the queues' max physic
        offset; where its queue does not hold it yet (at this point of the walk), say so."""
        q = self.by_key.get((r.topic, r.queue_id))
        reach = -1 if q is None else q.max_physic_offset
        if reach < r.commit_log_offset + (0 if q is not None and q.batch else r.msg_size):
            self.out.notes.append(
                f"the record at commit log offset {r.commit_log_offset} ({r.topic}/{r.queue_id} queue offset "
                f"{r.consume_queue_offset}) stays out of its queue: 5.3.3's normal recovery dispatches only records "
                f"past the queues' max physic offset {self.max_phy_cq}, not the one at it; recover --apply "
                f"dispatches again from that offset and keeps it")

    def close(self) -> None:
        if self.index_model is not None:
            self.index_model.close()


@one_listing()
def simulate(store, settings: Settings, commit_log_file_size: int | None = None,
             consume_queue_file_size: int | None = None, delay_levels: DelayLevels | None = None,
             *, list_lost: bool = True, batch_learned: frozenset = frozenset()) -> Outcome:
    """The broker's next start on the store, phase by phase (the module's numbered list).
    With no topics.json to give the topics' queue types, a topic whose records carry
    INNER_BASE/INNER_NUM is one of a 5.3.3 broker's batch topics (only a BatchCQ queue
    writes INNER_BASE): where the walk meets one that was not taken as such, the simulation
    runs again with it (``batch_learned``). ``store``: a view (its commit log listing and
    index files are taken, not listed again), or a store root."""
    view = view_of_root(store)
    refuse_dledger(view.root, "a command that models the plain commit log's recovery "
                              "(salvage, redispatch, append, query --served-only)")
    if not settings.semantics:
        return _detected(view, settings, commit_log_file_size, consume_queue_file_size, delay_levels,
                         list_lost=list_lost)
    start = _Start(view, settings, commit_log_file_size, consume_queue_file_size, delay_levels, batch_learned)
    _load(start)
    _recover_consume_queues(start)
    if not start.segments:
        return _no_commit_log(start)
    learned = _recover_commit_log(start)
    if learned:
        start.close()
        return simulate(view, settings, commit_log_file_size, consume_queue_file_size, delay_levels,
                        list_lost=list_lost, batch_learned=batch_learned | learned)
    _truncate_dirty_files(start)
    _recover_topic_queue_table_and_reput(start)
    return _finish(start, list_lost)


def load_only(view: StoreView, semantics: str) -> Outcome:
    """What of phase 1 may refuse the store (:func:`_load_files`), under ``semantics``' rules:
    the outcome says whether the load refuses it, why and on which file. Nothing is read but
    names, sizes and topics.json, so a probe (rmqtool check) may ask it every run."""
    start = _Start(view, Settings(semantics=semantics), None, None, None, frozenset())
    _load_files(start)
    return start.out


def _load(start: _Start) -> None:
    """1. DefaultMessageStore.load: its files loaded (:func:`_load_files`), then the commit log
    reader the phases share, the checkpoint read, and IndexService.load(lastExitOK), which
    after an abnormal exit destroys every index file whose endTimestamp is past the
    checkpoint's indexMsgTimestamp (``index_model``)."""
    _load_files(start)
    paths, out = start.paths, start.out
    start.reader = _reader(start) if start.segments else None
    out.min_offset = start.segments[0].base_offset if start.segments else 0
    start.min_ts, out.index_msg_timestamp, start.checkpoint_source = _checkpoint(paths)
    try:
        index_files = start.view.index_files.paths if paths.index.is_dir() else []  # the view's listing
        start.index_model = IndexModel(index_files, out.index_msg_timestamp, out.abnormal)
    except (RmqError, OSError):
        start.index_model = None
    if start.index_model is not None:
        out.index_files_destroyed = list(start.index_model.destroyed)


def _load_files(start: _Start) -> None:
    """What of DefaultMessageStore.load may refuse the store (nothing here reads a record):
    the lock file's open, CommitLog.load and loadConsumeQueue (5.3.3: the batch queues too,
    with queueTypeShouldBe), each a MappedFileQueue.load that refuses a file of the wrong
    size or name, and the checkpoint's open."""
    out, paths = start.out, start.paths
    if paths.lock.is_dir():  # the constructor's, before load(): new RandomAccessFile(lock, "rw") throws
        start.refuse(f"{paths.lock}: a directory where the broker's lock file goes: the store's constructor cannot "
                     f"open it (RandomAccessFile) and the broker does not start",
                     "move the directory out of the store (the broker makes its lock file)", paths.lock)
    refusal, refused, dropped = load_refusal(start.view.commit_log_directories, start.size, start.semantics)
    if dropped:
        out.commit_log_files_deleted += [str(d) for d in dropped]
        start.segments = [s for s in start.segments if s.path not in dropped]
    if refusal:
        start.refuse(refusal, "restore the file from a backup or replica, or salvage its messages (rmqtool salvage) "
                              "and move it out of the store; a file that is not the broker's: move it out of "
                              "commitlog/", refused)
    # mappedFileSizeConsumeQueue: one setting for every queue, as the files show it (a queue's only
    # file cut short is refused by it); where they disagree, each queue as its own files show, and
    # the load refused: a file of another size than the setting, whatever it is, fails it
    shown = queue_file_size_shown(paths.consumequeue, CQ_STORE_UNIT_SIZE)
    cq_size = start.consume_queue_file_size or shown.size
    if cq_size is None:
        _refuse_sizes(start, shown, "mappedFileSizeConsumeQueue", "--cq-size", paths.consumequeue)
    for topic, queue_id, directory in queue_directories(paths.consumequeue):
        if str(directory) not in start.without_queue_dirs:
            _load_queue(start, QueueModel, topic, queue_id, directory, cq_size, 0)
    if start.semantics == V5:  # 4.9.8 never looks at batchconsumequeue/
        bcq_dirs = queue_directories(paths.batch_consumequeue)
        start.batch, refusal, refused, out.batch_topics_reason = _queue_type_refusal(
            paths, {q.topic for q in start.queues}, {t for t, _q, _d in bcq_dirs} | start.batch_learned)
        out.batch_topics = sorted(start.batch)
        if refusal:
            start.refuse(refusal, "give the topic its queue type in topics.json (attribute queue.type), or move the "
                                  "queue directory out of the store and rebuild it (rmqtool redispatch)", refused)
        # mapperFileSizeBatchConsumeQueue: as the files show it
        shown = queue_file_size_shown(paths.batch_consumequeue)
        bcq_size = shown.size
        if bcq_size is None:
            _refuse_sizes(start, shown, "mapperFileSizeBatchConsumeQueue", None, paths.batch_consumequeue)
        for topic, queue_id, directory in bcq_dirs:
            if str(directory) not in start.without_queue_dirs:
                start.bcq_size = _load_queue(start, BatchQueueModel, topic, queue_id, directory, bcq_size,
                                             DEFAULT_BATCH_CQ_FILE_SIZE)
    if paths.checkpoint.is_dir():  # load() makes its StoreCheckpoint once the queues are loaded
        start.refuse(f"{paths.checkpoint}: a directory where the checkpoint file goes: StoreCheckpoint cannot open "
                     f"it (RandomAccessFile), load() fails and the broker does not start",
                     "move the directory out of the store (the broker makes a zeroed checkpoint)", paths.checkpoint)


def _refuse_sizes(start: _Start, shown, setting: str, option: str | None, directory: pathlib.Path) -> None:
    """Queue files whose sizes disagree (``shown``: queue_file_size_shown's): the broker loads
    every queue with one ``setting``, so whatever it is, MappedFileQueue.load refuses a file of
    another size and the broker does not start; which file, only the setting says."""
    if shown.disagreement is None:
        return
    given = f"{option} or --broker-config" if option else "--broker-config"
    start.refuse(f"queue files of different sizes: {shown.disagreement}: the broker loads every queue with one "
                 f"{setting}, so MappedFileQueue.load refuses the files of the other size, whatever it is, and the "
                 f"broker does not start",
                 f"give the broker's size ({given}) to see which files; rebuild those queues from the commit log "
                 f"(rmqtool redispatch --cq --apply) or restore their files", directory)


def _reader(start: _Start) -> CommitLog:
    """The commit log as the phases read it, every file listed (those the load drops too): the
    listing taken already where it was made with the size the start uses."""
    if (start.size or None) == start.log.mapped_file_size:
        return CommitLog.of_queue(start.log)
    return CommitLog.of_queue(start.view.commit_log_listing(start.size or None))


def _load_queue(start: _Start, model, topic: str, queue_id: int, directory: pathlib.Path, given_size: int | None,
                default_size: int) -> int:
    """ConsumeQueue/BatchConsumeQueue.load: its files as MappedFileQueue.load takes them.
    Returns the queue's mapped file size."""
    q = discover(directory, required=False, mapped_file_size=given_size)
    file_size = given_size or q.mapped_file_size or default_size
    refusal, refused, dropped = load_refusal(directory, file_size, start.semantics)
    if dropped:
        start.out.queue_files_deleted += [str(d) for d in dropped]
        q.segments = [s for s in q.segments if s.path not in dropped]
    if refusal:
        start.refuse(refusal, "rebuild the queue from the commit log (rmqtool redispatch --cq --apply: the file "
                              "goes into its backup), or move the file out of the store", refused)
    queue = model(topic, queue_id, q.segments, file_size or 1)
    if start.exts.enabled and not queue.batch:  # ConsumeQueue.load: the ext's load too (the same refusals)
        ext = start.exts.load(topic, queue_id)
        refusal, refused, dropped = load_refusal(ext.reader.directory, ext.file_size, start.semantics)
        start.out.ext_files_deleted += [str(d) for d in dropped]
        if refusal:
            start.refuse(refusal, "rebuild the queue and its ext from the commit log (rmqtool redispatch --cq "
                                  "--apply: the file goes into its backup), or move the file out of the store", refused)
    start.queues.append(queue)
    start.by_key[(topic, queue_id)] = queue
    return file_size


def _recover_consume_queues(start: _Start) -> None:
    """2. DefaultMessageStore.recoverConsumeQueue: each ConsumeQueue.recover (5.3.3's
    BatchConsumeQueue.recover too); the largest max physic offset among them is what the
    commit log recovery is given."""
    for q in start.queues:
        q.recover()
        if not q.batch and q.loaded_bases:
            start.out.queues_walked_from[(q.topic, q.queue_id)] = q.loaded_bases[max(len(q.loaded_bases) - 3, 0)]
        if (q.topic, q.queue_id) in start.exts.models:  # ConsumeQueue.recover's tail: the ext's recover and cut
            model = start.exts.models[(q.topic, q.queue_id)]
            overrun = model.reader.skip_walk_overrun()
            if overrun is not None:
                start.refuse(f"{model.reader.directory}: ConsumeQueueExt.recover's walk meets a unit size at offset "
                             f"{overrun} that skips past the file's end: ByteBuffer.position throws and the broker "
                             f"does not start", "rebuild the queue and its ext (rmqtool redispatch)",
                             model.reader.directory)
            model.recover(max_ext_address(q))
    for q in start.queues:
        start.out.queues_before[f"{q.topic}/{q.queue_id}"] = QueueRange(q.min_offset, q.max_offset)
        if not q.batch:
            start.recovered_at[(q.topic, q.queue_id)] = (q.max_offset_bytes, q.max_physic_offset)
    start.max_phy_cq = max((q.max_physic_offset for q in start.queues), default=-1)


def _no_commit_log(start: _Start) -> Outcome:
    """No commit log file: recovery ends the log at 0 and destroys every consume queue."""
    out = start.out
    out.start_reason = "no commit log file: the broker destroys every consume queue"
    out.walk = WalkEnd(0, 0, 0, 0, "no commit log file", None, 0)
    out.queues = {f"{q.topic}/{q.queue_id}": QueueRange(0, 0) for q in start.queues}
    start.close()
    return out


def _record_hints(queues: list, from_offset: int) -> np.ndarray:
    """The commit log offsets the queues' units name from ``from_offset`` on, sorted and
    unique: where the walk may prove records at once (a wrong one costs only speed)."""
    found = []
    for q in queues:
        for f in reversed(q.files):  # the last files: a queue's units follow the commit log
            if f.segment is None:
                continue
            try:
                offsets = f.batch_columns()["commit_log_offset"] if q.batch else f.columns()[0]
            except StoreAccessError:
                continue  # the load says what is wrong with the file
            found.append(offsets[offsets >= from_offset].astype(np.int64))
            if len(offsets) and offsets[0] < from_offset:
                break  # the earlier files name records before the walk's start
        q.release()
    return candidate_starts(found)


def _recover_commit_log(start: _Start) -> frozenset:
    """3. CommitLog.recoverNormally / recoverAbnormally: the start file, then the walk
    (``commitlog_walk``). Abnormal recovery dispatches every record it accepts; 5.3.3's
    normal recovery those past the queues' max physic offset. Returns the topics found to be
    batch topics that were not taken as such (empty: the walk stands)."""
    out, segments, semantics = start.out, start.segments, start.semantics
    if out.abnormal:
        index = abnormal_start(segments, semantics, start.min_ts)
        if index >= 0:
            stamp = first_store_timestamp(segments[index], start.options.magic_codes)
            out.start_reason = (f"abnormal recovery: the last file whose first message (stored at {stamp}) is at "
                                f"or before the checkpoint's min timestamp {start.min_ts} (min(physicMsgTimestamp, "
                                f"logicsMsgTimestamp) - 3 s, from {start.checkpoint_source})")
        else:
            index = 0
            out.start_reason = (f"abnormal recovery: no file's first message is at or before the checkpoint's min "
                                f"timestamp {start.min_ts} ({start.checkpoint_source}): from the first file")
        on_record, dispatch_from = start.dispatch, 0
    else:
        index = normal_start(segments, semantics, start.max_phy_cq)
        if semantics == V4:
            out.start_reason = "normal recovery (4.9.8): from the third-last commit log file"
            on_record, dispatch_from = None, 0
        else:
            out.start_reason = (f"normal recovery (5.3.3): from the last file starting at or before the consume "
                                f"queues' max physic offset {start.max_phy_cq}")
            max_phy_cq, dispatch, note_at_reach = start.max_phy_cq, start.dispatch, start.note_at_reach

            def on_record(request):  # only what lies past the queues (an equal offset is not: 5.3.3's '>')
                if request.commit_log_offset > max_phy_cq:
                    dispatch(request)
                elif request.commit_log_offset == max_phy_cq:
                    note_at_reach(request)
            dispatch_from = max(max_phy_cq, 0)  # the records before it are only checked
    out.start_index = index
    out.start_file = str(segments[index].path)
    w = walk(segments, index, start.options, start.delay_levels, on_record, dispatch_from=dispatch_from,
             hints=_record_hints(start.queues, segments[index].base_offset))
    out.walk = w
    out.end_file = str(segments[w.file_index].path)
    unknown = start.inner_topics - start.batch
    if semantics == V5 and unknown and configured_batch_topics(start.paths.config) is None:
        return frozenset(unknown)
    out.written_end = _written_end(segments, start.size, w)
    out.recovered_end = w.end
    return frozenset()


def _truncate_dirty_files(start: _Start) -> None:
    """4. truncateDirtyLogicFiles (when the queues reach past the recovered end) and
    MappedFileQueue.truncateDirtyFiles: the commit log files wholly past the end go."""
    out, end = start.out, start.out.recovered_end
    if start.max_phy_cq >= end:
        for q in start.queues:
            q.truncate_dirty_logic_files(end)
            if not q.batch:  # cut at a unit naming an offset past the end: a damaged middle unit cuts the
                # units after it too, and the messages they named are lost unless dispatch reaches them
                start.recovered_at[(q.topic, q.queue_id)] = (q.max_offset_bytes, q.max_physic_offset)
    for seg in start.segments:
        if seg.base_offset + start.size > end and end < seg.base_offset:
            out.commit_log_files_deleted.append(str(seg.path))
    start.kept = [s for s in start.segments if str(s.path) not in out.commit_log_files_deleted]
    start.min_phy = start.kept[0].base_offset if start.kept else 0


def _recover_topic_queue_table_and_reput(start: _Start) -> None:
    """5. DefaultMessageStore.recoverTopicQueueTable (correctMinOffset), then start():
    4.9.8's ReputMessageService dispatches from the queues' max physic offset to the end
    (and the broker never finishes starting when that offset, or a file reput needs next,
    lies in no file); 5.3.3 starts dispatch at the end. A store whose load fails never
    gets to start()."""
    out, end, min_phy, semantics = start.out, start.out.recovered_end, start.min_phy, start.semantics
    for q in start.queues:
        q.correct_min_offset(min_phy, semantics)
    if not (semantics == V4 and out.loadable):
        out.reput_from = end
        return
    reput = max(max((q.max_physic_offset for q in start.queues), default=-1), min_phy, 0)
    out.reput_from = reput
    if reput < end:
        holder = next((s for s in start.kept if s.base_offset <= reput < s.base_offset + start.size), None)
        if holder is None:
            start.refuse(f"start() dispatches from commit log offset {reput} (the consume queues' max physic "
                         f"offset), which lies in no file: the broker never finishes starting",
                         "restore the missing commit log file, or rebuild the consume queues (rmqtool redispatch)")
        else:
            gap = _redispatch(start.kept, reput, end, start.size, start.options, start.delay_levels, start.dispatch)
            if gap is not None:
                start.refuse(f"start() dispatches from commit log offset {reput} and reaches the end of a file "
                             f"whose next file ({gap}) is missing: reput waits there and the broker never "
                             f"finishes starting",
                             "restore the missing commit log file, or let the broker recover abnormally "
                             "(rmqtool recover --from-checkpoint --apply --to NEWDIR)")
    for q in start.queues:
        q.correct_min_offset(min_phy, semantics)


def _finish(start: _Start, list_lost: bool) -> Outcome:
    """The outcome's account of what the start left: every queue's range and deleted files,
    what became of the index, and the messages the broker no longer serves."""
    out, paths, queues = start.out, start.paths, start.queues
    for q in queues:
        out.queues[f"{q.topic}/{q.queue_id}"] = QueueRange(q.min_offset, q.max_offset)
        out.queue_files_deleted += [str(s) for s in _queue_paths(paths, q)]
    index_model = start.index_model
    if index_model is not None:
        out.index_rebuilt_as_is = index_model.rebuilt_as_is()
        out.index_entries_put, out.index_entries_repeated = index_model.put_entries, index_model.repeated
        out.index_entries_lost, out.index_kept_appended = index_model.lost_entries(), index_model.kept_appended
        index_model.close()
    out.queue_models = {(q.topic, q.queue_id): q for q in queues}
    out.ext_files = start.exts.positions()
    out.ext_files_deleted += [str(p) for m in start.exts.models.values() for p in m.deleted_files()]
    reader, end = start.reader, out.recovered_end
    if list_lost and reader is not None:
        lost = _lost(reader, paths, end, start.semantics, out.queues_before)
        lost += _unreachable(reader, start.kept, queues, start.recovered_at, end, start.min_phy,
                             {m["commit_log_offset"] for m in lost})
        lost += _not_reput(out, paths, reader, start.kept, queues, start.recovered_at, start.min_phy,
                           {m["commit_log_offset"] for m in lost})
        out.lost_messages = sorted(_without_damaged_units(lost, out.queues), key=lambda m: m["commit_log_offset"])
    return out


def _detected(view: StoreView, settings: Settings, *args, list_lost: bool) -> Outcome:
    """simulate with the rules the store shows (``semantics.detect_semantics``). When it does
    not say, both versions' starts are simulated: alike, either is the outcome; different,
    the 4.9 one is shown and ``semantics_undecided`` says why an apply must wait for the
    operator's --semantics."""
    found = detect_semantics(view.paths, view.commit_log_listing(args[0]).segments)

    def run(semantics: str) -> Outcome:
        return simulate(view, dataclasses.replace(settings, semantics=semantics), *args, list_lost=list_lost)

    if settings.verify_prop_crc:  # forceVerifyPropCRC is a 5.3 setting: asking for it is asking for 5.3
        out = run(V5)
        out.semantics_reason = f"--verify-prop-crc is 5.3's forceVerifyPropCRC; the store: {found.reason}"
        return out
    if found.semantics:
        out = run(found.semantics)
        out.semantics_reason = found.reason
        return out
    four, five = run(V4), run(V5)
    four.semantics_known = False
    if _recovers_alike(four, five):
        four.semantics_reason = f"{found.reason}; 4.9 and 5.3 rules change the same files and keep the same messages here"
        return four
    other = (f"5.3 rules end the commit log at {five.recovered_end} and lose {len(five.lost_messages)} messages"
             if five.loadable else f"under 5.3 rules the broker would not load it ({five.reason})")
    four.semantics_reason = f"{found.reason}; 4.9 and 5.3 rules recover it differently ({other}): shown with 4.9's"
    four.semantics_undecided = (f"{found.reason}, and the 4.9 and 5.3 rules recover this store differently ({other}): "
                                f"give --semantics 4.9 or --semantics 5.3 (the broker version that wrote it)")
    return four


def _recovers_alike(a: Outcome, b: Outcome) -> bool:
    """Whether two simulated starts change the same files and keep the same messages (the
    queues' min offsets, which each version computes its own way at load, are not files)."""
    def key(o: Outcome) -> tuple:
        return (o.loadable, o.recovered_end, o.min_offset, {k: v.max_offset for k, v in o.queues.items()},
                o.commit_log_files_deleted, o.queue_files_deleted, o.index_files_destroyed, o.batch_topics,
                o.start_index if o.abnormal else None, [m["commit_log_offset"] for m in o.lost_messages])
    return key(a) == key(b)


def _written_end(segments: list[Segment], size: int, w: WalkEnd) -> int:
    """The written end (what the store holds before recovery); where the walk read the last
    written file, the read goes on from the walk's end rather than read it again."""
    resume = w.position if w.file_index == last_written(segments) else None
    return written_end(segments, size or None, resume_at=resume)


def load_refusal(directory: "pathlib.Path | list[pathlib.Path]", size: int,
                 semantics: str) -> tuple[str | None, pathlib.Path | None, list[pathlib.Path]]:
    """MappedFileQueue.load (doLoad) over a directory: why it refuses the store (None: it
    loads), the file it refuses, and the files it deletes. Every entry counts, in name order:
    a file whose length is not the mapped file size stops the load, and so does a name that
    is not an offset (4.9.8 counts a directory too, by its length; 5.3.3 skips directories
    and deletes an empty file that sorts last). A commit log over several paths (a list):
    the entries of every path, sorted by name alone, as MultiPathMappedFileQueue.load hands
    them to doLoad."""
    entries = []
    for d in directory if isinstance(directory, list) else [directory]:
        try:
            entries += [(name, d / name) for name in os.listdir(d)]
        except OSError:
            continue
    entries.sort(key=lambda e: e[0])  # File::getName; a stable sort keeps the paths' order for one name
    dropped = []
    for i, (name, path) in enumerate(entries):
        why = "an empty file"
        try:
            st = os.stat(path)
            length, is_dir = st.st_size, stat.S_ISDIR(st.st_mode)
        except OSError as exc:  # File.length() is 0 for what it cannot stat: a link to a disk not mounted, a loop
            length, is_dir, why = 0, False, f"not readable ({exc.strerror}), which File.length() takes as 0 bytes"
        if is_dir and semantics == V5:
            continue
        if semantics == V5 and length == 0 and i == len(entries) - 1:
            dropped.append(path)  # 'size is 0, auto delete'
            continue
        if length == 0 and not is_dir:
            return (f"{path}: {why} (0 bytes is never the mapped file size): MappedFileQueue.load refuses "
                    f"it and the broker does not start"), path, dropped
        if size and length != size:
            return (f"{path}: {length} bytes, not the mapped file size {size}: MappedFileQueue.load refuses it "
                    f"and the broker does not start"), path, dropped
        if not is_segment_name(name):  # Long.parseLong fails: also 20 digits past a Java long
            return (f"{path}: its name is not an offset: MappedFileQueue.load fails on it and the broker does not "
                    f"start"), path, dropped
        if int(name) + length > LONG_MAX:
            return (f"{path}: its offsets pass the largest a Java long holds ({LONG_MAX}): the broker's offsets "
                    f"in it overflow (move the file out of the store)"), path, dropped
    return None, None, dropped


def _cq_file_size(queues: list[QueueModel]) -> int:
    return next((q.file_size for q in queues if q.file_size > 1 and not q.batch), DEFAULT_CQ_FILE_SIZE)


def _queue_type_refusal(paths: StorePaths, cq_topics: set[str],
                        bcq_topics: set[str]) -> tuple[set[str], str | None, pathlib.Path | None, str]:
    """5.3.3 loadConsumeQueues' queueTypeShouldBe: the batch topics, why the load fails
    (None: it does not) and on which queue directory, and where the queue types come from.
    topics.json gives them; without one to read, the batch topics are those of
    batchconsumequeue/ and those whose records carry INNER_BASE (``bcq_topics``), as the
    broker must have been told."""
    configured = configured_batch_topics(paths.config)
    if configured is None:
        batch = set(bcq_topics)
        why = ("no topics.json: the topics of batchconsumequeue/ and those whose records carry INNER_BASE are taken "
               "as BatchCQ")
    else:
        batch = configured
        why = "topics.json (attribute queue.type)"
    for topic in sorted(cq_topics & batch):
        return batch, (f"{paths.consumequeue / topic}: topic {topic} is a BatchCQ topic ({why}): the 5.3.3 broker's "
                       f"load fails ('The queue type of topic: {topic} should be SimpleCQ, but is BatchCQ') and it "
                       f"does not start"), paths.consumequeue / topic, why
    for topic in sorted(bcq_topics - batch):
        return batch, (f"{paths.batch_consumequeue / topic}: topic {topic} is not a BatchCQ topic in topics.json: "
                       f"the 5.3.3 broker's load fails ('The queue type of topic: {topic} should be BatchCQ, but is "
                       f"SimpleCQ') and it does not start"), paths.batch_consumequeue / topic, why
    return batch, None, None, why


def _queue_paths(paths: StorePaths, q: QueueModel | BatchQueueModel) -> list[pathlib.Path]:
    directory = (paths.batch_consumequeue if q.batch else paths.consumequeue) / q.topic / str(q.queue_id)
    return [directory / f"{b:020d}" for b in q.deleted_files()]


def _redispatch(segments, start: int, end: int, file_size: int, options: WalkOptions, delay_levels,
                dispatch) -> int | None:
    """ReputMessageService from ``start`` to ``end`` (checkCRC off: reput reads without it).
    Returns the offset of a missing next file where reput would wait forever, else None."""
    reput = WalkOptions(options.semantics, check_crc=False)
    index = next((i for i, s in enumerate(segments) if s.base_offset <= start < s.base_offset + s.size), None)
    if index is None:  # a file shorter than the rest ends before it: reput waits there for good
        return start
    seg = segments[index]
    from rmqtool.recovery.commitlog_walk import MappedSegment, check_at
    pos = start - seg.base_offset
    while True:
        with MappedSegment(seg) as mapped:
            while seg.base_offset + pos < end:
                n, request, _why, _total = check_at(mapped.buf, pos, len(mapped.buf), seg.base_offset + pos,
                                                    reput, delay_levels)
                if n > 0:
                    dispatch(request)
                    pos += n
                elif n == 0:
                    break
                else:
                    return None
            else:
                return None
        nxt = seg.base_offset + file_size  # rollNextFile
        index += 1
        if nxt >= end:
            return None
        if index >= len(segments) or segments[index].base_offset != nxt:
            return nxt
        seg = segments[index]
        pos = 0


def _lost(reader: CommitLog, paths: StorePaths, end: int, semantics: str, walked: dict) -> list[dict]:
    """Every message past the recovered end: records the read side still finds there, and
    consume queue units (5.3.3: batch consume queue units too) pointing there whose record
    no longer reads, of those each queue's recover walked (``walked``: the queues' ranges
    then; a unit after a queue's end is bytes its load drops, no message)."""
    lost: dict[int, dict] = {}
    for r in reader.scan(from_offset=end, check_crc=False):
        if isinstance(r, Message):
            lost[r.commit_log_offset] = {"commit_log_offset": r.commit_log_offset, "topic": r.topic, "queue_id": r.queue_id,
                              "queue_offset": r.queue_offset, "keys": list(r.keys), "store_timestamp": r.store_timestamp,
                              "readable": True, "reason": LOG_CUT}
        elif isinstance(r, Corrupt):
            continue
    kinds = [(paths.consumequeue, False)] + ([(paths.batch_consumequeue, True)] if semantics == V5 else [])
    for root, batch in kinds:
        for topic, queue_id, directory in queue_directories(root):
            _lost_units(topic, queue_id, directory, batch, end, lost, walked.get(f"{topic}/{queue_id}"))
    return [lost[k] for k in sorted(lost)]


def _without_damaged_units(lost: list[dict], queues: dict) -> list[dict]:
    """The lost messages less the units that only look like more of them: a unit whose record
    does not read, past the end, whose queue offset names a message the list holds as read
    (its record is elsewhere: its unit's offset was damaged), or one its queue serves after
    the start (dispatched again), is that message's unit. A unit the commit log never
    received (flushed ahead of it before a crash) names a queue offset nothing else holds."""
    held = {(m["topic"], m["queue_id"], m["queue_offset"]) for m in lost if m["readable"]}

    def served(m: dict) -> bool:
        r = queues.get(f"{m['topic']}/{m['queue_id']}")
        return r is not None and r.min_offset <= m["queue_offset"] < r.max_offset

    return [m for m in lost if m["readable"] or m["reason"] != LOG_CUT or not (
        (m["topic"], m["queue_id"], m["queue_offset"]) in held or served(m))]


def _unreachable(reader: CommitLog, segments: list[Segment], queues: list, recovered_at: dict, end: int,
                 min_phy: int, cut: set) -> list[dict]:
    """Messages before the recovered end the broker no longer serves after its start, from
    what the files show:

    * FILE_MISSING: a unit the queue keeps points into a commit log file that is gone (the
      broker skips the gap);
    * UNIT_LOST: a message of a queue whose recovery stopped before units still on disk (a
      zeroed unit, files after it deleted), or whose next put jumped over queue offsets, that
      no unit of its queue points at afterwards. Their records are found between the commit
      log offsets those units bound (a scan of that span only)."""
    gaps = [(a.base_offset + a.size, b.base_offset) for a, b in zip(segments, segments[1:])
            if a.base_offset + a.size < b.base_offset]
    found: dict[int, dict] = {}
    spans = []  # (lo, hi, key, first queue offset, end queue offset) to scan for messages of a queue
    for q in queues:
        if q.batch:
            continue
        key = (q.topic, q.queue_id)
        spans += [(lo, hi, key, first, stop) for first, stop, lo, hi in q.skipped]
        position, reach = recovered_at.get(key, (0, -1))
        beyond = _units_beyond(q, position)
        if beyond is not None:
            spans.append((max(reach, 0), beyond + 1, key, position // CQ_STORE_UNIT_SIZE, 1 << 62))
        if gaps:
            qos, offsets = q.units()
            for lo, hi in gaps:
                for i in np.flatnonzero((offsets >= lo) & (offsets < hi) & (offsets < end)).tolist():
                    found.setdefault(int(offsets[i]), {
                        "commit_log_offset": int(offsets[i]), "topic": q.topic, "queue_id": q.queue_id,
                        "queue_offset": int(qos[i]), "keys": [], "store_timestamp": None, "readable": False,
                        "reason": FILE_MISSING})
    candidates: dict[tuple, list] = {}
    for lo, hi, key, first, stop in sorted(spans):
        hi = min(hi, end)
        if lo >= hi:
            continue
        for r in reader.scan(from_offset=max(lo, min_phy), to_offset=hi, check_crc=False):
            if isinstance(r, Message) and (r.topic, r.queue_id) == key and first <= r.queue_offset < stop \
                    and r.commit_log_offset < hi:
                candidates.setdefault(key, []).append(r)
    by_key = {(q.topic, q.queue_id): q for q in queues}
    for key, records in candidates.items():
        served = by_key[key].units().commit_log_offsets
        for r in records:
            offset = r.commit_log_offset
            if offset in cut or offset in found or bool(np.isin(offset, served)):
                continue
            found[offset] = {"commit_log_offset": offset, "topic": r.topic, "queue_id": r.queue_id,
                             "queue_offset": r.queue_offset, "keys": list(r.keys),
                             "store_timestamp": r.store_timestamp, "readable": True, "reason": UNIT_LOST}
    return [found[k] for k in sorted(found) if k not in cut]


def _not_reput(out: Outcome, paths: StorePaths, reader: CommitLog, segments: list[Segment], queues: list,
               recovered_at: dict, min_phy: int, known: set) -> list[dict]:
    """UNIT_LOST for a queue whose units vanished without trace: messages before where the
    start's dispatch begins (``reput_from``) that no unit of their queue serves after the
    start (``Outcome.served``, what verify asks too) are never dispatched again. Only the
    commit log spans where such messages can lie are read (:func:`_reput_spans`), with the
    column scan, so a healthy store's plan reads next to nothing more."""
    stop = min(out.reput_from, out.recovered_end)
    found = []
    skip = np.fromiter(known, np.int64)
    with CommitLogReader(reader) as read:
        spans = _merged([s for q in queues if not q.batch for s in _reput_spans(q, recovered_at, min_phy, stop, read)])
        if any(key not in out.queue_models for key in committed_queues(paths.config)):
            spans = [(min_phy, stop)]  # a queue consumers read from is gone (its directory deleted)
        cols = _dispatched_columns(segments, spans)
        if spans != [(min_phy, stop)] and any(key not in out.queue_models for key in cols):
            # a topic-queue with no queue after the start: every message of it before stop is lost
            cols = _dispatched_columns(segments, [(min_phy, stop)])
        for (topic, queue_id), parts in sorted(cols.items()):
            found += _unserved(out, read, topic, queue_id, parts, min_phy, stop, skip)
    return found


def _unserved(out: Outcome, read: CommitLogReader, topic: str, queue_id: int, parts: list, min_phy: int,
              stop: int, skip: np.ndarray) -> list[dict]:
    """The lost messages of one topic-queue among its dispatched records ``parts``."""
    offsets = np.concatenate([o for o, _ in parts])
    qos = np.concatenate([q for _, q in parts])
    inside = (offsets >= min_phy) & (offsets < stop) & ~np.isin(offsets, skip)
    offsets, qos = offsets[inside], qos[inside]
    served = out.served(topic, queue_id, offsets)
    if served is None:  # a 5.x batch queue: left out
        return []
    found = []
    for offset, qo in zip(offsets[~served].tolist(), qos[~served].tolist()):
        m = _read(read, offset)
        found.append({"commit_log_offset": offset, "topic": topic, "queue_id": queue_id, "queue_offset": qo,
                      "keys": list(m.keys) if m else [], "store_timestamp": m.store_timestamp if m else None,
                      "readable": True, "reason": UNIT_LOST})
    return found


def _dispatched_columns(segments: list[Segment], spans: list[tuple[int, int]]) -> dict[tuple, list]:
    """(topic, queue id) -> [(commit log offsets, queue offsets)] of the records in ``spans``
    that dispatch puts into a queue (no prepared or rolled back transaction), by the column scan."""
    cols: dict[tuple, list] = {}
    dispatched = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)
    for lo, hi in spans:
        for rng in segment_ranges(segments, lo, hi):
            base = rng.segment.base_offset
            for r in column_scan(rng.segment, ColumnMode(), is_last=rng.is_last, start=rng.start, end=rng.end):
                if isinstance(r, RecordColumns):
                    keep = np.isin(r.sys_flag & TRANSACTION_MASK, dispatched)
                    offsets = r.position[keep].astype(np.int64) + base
                    topic, queue_id, qos = r.topic[keep], r.queue_id[keep], r.queue_offset[keep]
                    for t, qid in set(zip(topic.tolist(), queue_id.tolist())):
                        mine = (topic == t) & (queue_id == qid)
                        cols.setdefault((r.topics[t], int(qid)), []).append((offsets[mine], qos[mine]))
                elif isinstance(r, Message) and r.sys_flag & TRANSACTION_MASK in dispatched:
                    cols.setdefault((r.topic, r.queue_id), []).append(
                        (np.array([r.commit_log_offset], np.int64), np.array([r.queue_offset], np.int64)))
    return cols


def _reput_spans(q: QueueModel, recovered_at: dict, min_phy: int, stop: int,
                 read: CommitLogReader) -> list[tuple[int, int]]:
    """Where messages of one queue the start no longer serves can lie before ``stop``:

    * its head, when its first served unit is not queue offset 0 (first files deleted, or
      the directory gone and the queue made again by dispatch): from the commit log's min
      offset to that unit's message (retention leaves this span short), or to ``stop`` when
      that message is not the one of that queue offset;
    * its middle, where files are missing between two it holds (the load takes the files
      it finds): from the last unit's message before the gap to the first one's after it;
    * its tail: from where its units reached before the start to ``stop`` (its last files
      deleted, or its last units zeroed to the file's end, leave no trace in the queue:
      only the commit log shows them; the column scan reads that span)."""
    spans = []
    first = _first_served(q)
    if first is None:
        return [(min_phy, stop)]
    queue_offset, commit_log_offset = first
    if queue_offset > 0:
        m = _read(read, commit_log_offset)
        # the messages before it lie before its message, when the unit names its own: a damaged
        # unit, or one a put at the write position wrote for another queue offset (a cqOffset of 0
        # re-dispatched into a queue that starts later), bounds nothing
        named = m is not None and (m.topic, m.queue_id, m.queue_offset) == (q.topic, q.queue_id, queue_offset)
        spans.append((min_phy, commit_log_offset if named else stop))
    for a, b in zip(q.files, q.files[1:]):
        if b.base > a.base + q.file_size:
            before, after = _written_offsets(a), _written_offsets(b)
            spans.append((int(before[-1]) if before.size else min_phy, int(after[0]) if after.size else stop))
    _position, reach = recovered_at.get((q.topic, q.queue_id), (None, -1))
    spans.append((max(reach, min_phy), stop))
    return spans


def _written_offsets(f) -> np.ndarray:
    """The commit log offsets a queue file's written units name (fill units left out)."""
    offsets, sizes = f.columns()
    n = min(f.wrote // CQ_STORE_UNIT_SIZE, len(offsets))
    named = offsets[:n][names_a_message(offsets[:n], sizes[:n])].astype(np.int64)
    f.release()
    return named


def _first_served(q: QueueModel) -> tuple[int, int] | None:
    """(queue offset, commit log offset) of the queue's first served unit after the start."""
    head = q.files[0] if q.files else None
    if head is not None and head.base == 0 and q.min_logic_offset == 0 and not head.dirty \
            and head.wrote >= CQ_STORE_UNIT_SIZE:
        unit = np.frombuffer(first_bytes(head.segment.path, CQ_STORE_UNIT_SIZE).ljust(CQ_STORE_UNIT_SIZE, b"\0"),
                             CQ_LAYOUT.dtype)  # the usual case, one unit read: a queue served from offset 0
        offsets, sizes = unit["commit_log_offset"], unit["size"]
        if bool(names_a_message(offsets, sizes)[0]):
            return 0, int(offsets[0])
    for f in q.files:
        offsets, sizes = f.columns()
        n = min(f.wrote // CQ_STORE_UNIT_SIZE, len(offsets))
        first = max(q.min_logic_offset - f.base, 0) // CQ_STORE_UNIT_SIZE
        real = np.flatnonzero(names_a_message(offsets[first:n], sizes[first:n]))
        f.release()
        if real.size:
            i = first + int(real[0])
            return f.base // CQ_STORE_UNIT_SIZE + i, int(offsets[i])
    return None


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for lo, hi in sorted(s for s in spans if s[0] < s[1]):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(lo, hi) for lo, hi in out]


def _read(read: CommitLogReader, offset: int) -> Message | None:
    """The message at ``offset`` (its keys and store time for the plan)."""
    try:
        return read.read(offset, check_crc=False)
    except RmqError:
        return None


def _units_beyond(q: QueueModel, position: int) -> int | None:
    """The largest commit log offset a written unit on disk points at past the queue's
    recovered write position (units the broker's recovery dropped); None: none there."""
    best = None
    for seg in q.on_disk:
        if seg.base_offset + seg.size <= position:
            continue
        held = last_nonzero_from(seg.path) or 0
        start = max(position - seg.base_offset, 0) // CQ_STORE_UNIT_SIZE
        count = -(-held // CQ_STORE_UNIT_SIZE) - start
        if count <= 0:
            continue
        units = read_records(seg.path, CQ_LAYOUT.dtype, start * CQ_STORE_UNIT_SIZE, count)
        offsets, sizes = units["commit_log_offset"], units["size"]
        real = names_a_message(offsets, sizes)
        if real.any():
            top = int(offsets[real].max())
            best = top if best is None else max(best, top)
    return best


def _lost_units(topic: str, queue_id: int, directory, batch: bool, end: int, lost: dict,
                walked: QueueRange | None) -> None:
    """Units of one queue pointing at or past ``end`` whose record is not in ``lost`` yet,
    before the end of the queue its recover walked to (``walked``; None: every unit)."""
    # units only grow along a queue: read its files from the last back to one that starts before the end
    layout = BATCH_CQ_LAYOUT if batch else CQ_LAYOUT
    for seg in reversed(discover(directory, required=False).segments):
        held = last_nonzero_from(seg.path) or 0  # a file made ahead: only its units are read
        units = read_records(seg.path, layout.dtype, 0, -(-held // layout.unit_size))
        offsets, sizes = units["commit_log_offset"], units["size"]
        if batch:
            real = is_written_batch_unit(offsets, sizes, units["msg_base_offset"], units["batch_size"])
        else:
            real = names_a_message(offsets, sizes)
        for i in np.flatnonzero(real & (offsets >= end)).tolist():
            offset = int(offsets[i])
            queue_offset = (int(units["msg_base_offset"][i]) if batch else
                            seg.base_offset // CQ_STORE_UNIT_SIZE + i)
            if offset not in lost and (walked is None or queue_offset < walked.max_offset):
                lost[offset] = {"commit_log_offset": offset, "topic": topic, "queue_id": queue_id,
                                "queue_offset": queue_offset, "keys": [], "store_timestamp": None,
                                "readable": False, "reason": LOG_CUT}
        first = np.flatnonzero(real)
        if first.size and offsets[first[0]] < end:
            break


def served_range(store) -> tuple[int, int]:
    """[min, max) of the commit log offsets the broker serves after its next start's
    recovery (the abort file and the detected version's rules decide). ``store``: a view, or a
    store root."""
    out = served_start(store)
    return out.min_offset, out.recovered_end


def served_start(store) -> Outcome:
    """The next start the broker serves from (:func:`served_range`'s), its messages not listed;
    CorruptData when the broker would not load the store."""
    view = view_of_root(store)
    out = simulate(view, Settings(), list_lost=False)
    if not out.loadable:
        raise CorruptData(f"the broker would not load this store, so it serves nothing: {out.reason}", view.root)
    return out
