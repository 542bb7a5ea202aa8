"""The timer store's next start on a store: its files read (store/timer), the message store
as its own recovery leaves it (recovery/outcome), then load/recover and the run simulated.

``timer_start(root, outcome, now_ms)`` is what verify, info and recover's plan call; None
when the store has no timer files.
"""
from __future__ import annotations

import dataclasses
import itertools
import pathlib
from typing import Callable

import numpy as np

from rmqtool.errors import FormatError, RmqError, StoreAccessError, StoreNotFound
from rmqtool.formats.timerwheel import SLOTS_TOTAL, wheel_length
from rmqtool.recovery.outcome import Outcome
from rmqtool.recovery.timer.load import (TIMER_TOPIC, MessageStoreAtLoad, TimerCheckpointData, TimerLoad,
                                         TimerRecord, TimerSettings, simulate_timer_load)
from rmqtool.recovery.timer.log_model import TimerLogFile, TimerLogModel
from rmqtool.recovery.timer.next_run import TimerRun, predict_run
from rmqtool.recovery.timer.wheel_model import WheelSlot
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.message import RecordError, decode_message
from rmqtool.store.parallel import iter_parallel
from rmqtool.store.timer.records import UNBOUNDED, plain_units, within
from rmqtool.store.timer.files import TIMERLOG_DIR, TimerStore, find_timer_store
from rmqtool.store.timer.timercheck import read_timercheck
from rmqtool.store.timer.timerlog import TimerLog, read_file, scan_timer_log
from rmqtool.store.timer.timermetrics import read_timermetrics
from rmqtool.store.timer.wheel import USED_DTYPE, read_wheel

CQ_UNIT = 20


@dataclasses.dataclass
class TimerStart:
    """The timer store's files as read, its load, and its run."""
    files: TimerStore
    disk_log: TimerLog  # the timer log on disk (store/timer)
    load: TimerLoad
    run: TimerRun | None  # None: the load fails
    store: MessageStoreAtLoad
    refused: pathlib.Path | None = None  # the file the load fails on
    disk_wheel: np.ndarray | None = None  # store/timer/wheel's USED_DTYPE rows: the used slots on disk
    plain: "PlainUnits | None" = None  # which units point at their own record (verify asks it of the disk log)

    def written_past_cut(self) -> int | None:
        """How far the timer log was written (timercheck's lastTimerLogFlushPos, or the files'
        end past it) when the start's recovery cuts it before that, or leaves non-zero bytes
        after the cut (verify's timerLogCut); None when the cut loses nothing written, or meets
        only zeros and enqueues nothing again."""
        load = self.load
        written = max(load.checkpoint.last_timer_log_flush_pos, max((f.end for f in self.disk_log.files), default=0))
        after = any(f.non_zero_after_end for f in self.disk_log.files if f.end >= load.cut_at)
        lo, hi = load.enqueue_again
        if not after and hi <= lo:  # zeros after the cut (recover --apply zeroed its units), nothing enqueued again:
            return None             # the start's cut changes nothing, though timercheck's flush position is past it
        return written if load.cut_at < written or after else None

    def log_place(self, position: int) -> tuple[pathlib.Path, int]:
        """(the timer log file, the position in it) of a timer log offset."""
        size = self.load.log.file_size or 1
        base = position - position % size
        return self.files.root / TIMERLOG_DIR / f"{base:020d}", position - base

    @property
    def disk_wheel_slots(self) -> list[WheelSlot]:
        """The used slots on disk, by index."""
        if self.disk_wheel is None:
            return []
        return list(itertools.starmap(WheelSlot, self.disk_wheel[list(USED_DTYPE.names)].tolist()))


@dataclasses.dataclass
class PlainUnits:
    """store/timer/records.plain_units of the timer log on disk, computed once, and of any
    units (COLUMNS_DTYPE rows: the run's, appended ones too) through it: a unit with the
    position and fields of one on disk has its answer."""
    root: pathlib.Path
    disk_log: TimerLog
    low: int
    end: int
    _disk: object = None

    def disk(self):
        """The mask over the disk log's units."""
        if self._disk is None:
            self._disk = self._of(self.disk_log.columns)
        return self._disk

    def take(self, read: "ReadBeside | None") -> None:
        """The disk mask a worker read (:func:`plain_units_beside`), bounded here, if it read
        these units (the same log as scanned here: else it is read again when asked)."""
        cols = self.disk_log.columns
        if read is not None and read.matches(cols):
            self._disk = read.mask & within(cols["offset_py"], cols["size_py"], self.low, self.end)

    def _of(self, cols):
        return plain_units(self.root, cols["offset_py"], cols["size_py"], cols["hash_code_of_real_topic"],
                           self.low, self.end)

    def __call__(self, cols, rows=None):
        """The mask over ``cols`` (over ``cols[rows]`` when rows are given)."""
        if cols is self.disk_log.columns and len(cols):  # the disk log's own units: their answer
            return self.disk() if rows is None else self.disk()[rows]
        if rows is not None:
            cols = cols[rows]
        if not len(self.disk_log.columns):
            return self._of(cols)
        rows = self.disk_log.rows_of(cols["position"])
        at, disk = np.maximum(rows, 0), self.disk_log.columns  # the three fields gathered, not whole rows
        known = (rows >= 0) & (disk["offset_py"][at] == cols["offset_py"]) & (disk["size_py"][at] == cols["size_py"]) & (
            disk["hash_code_of_real_topic"][at] == cols["hash_code_of_real_topic"])
        out = np.zeros(len(cols), bool)
        out[known] = self.disk()[rows[known]]
        if not known.all():
            out[~known] = self._of(cols[~known])
        return out


@dataclasses.dataclass
class ReadBeside:
    """What :func:`plain_units_beside`'s worker read: the unbounded plain mask over the disk
    log's units, and what says they are the units scanned here too."""
    mask: np.ndarray
    count: int
    offsets: int  # the units' offsetPy xor-ed together (halves combine exactly, nothing overflows)
    positions: int  # their positions, the same way

    @classmethod
    def of(cls, cols, mask: np.ndarray) -> "ReadBeside":
        return cls(mask, len(cols), *_digest(cols))

    def matches(self, cols) -> bool:
        return len(cols) == self.count == len(self.mask) and _digest(cols) == (self.offsets, self.positions)


def _digest(cols) -> tuple[int, int]:
    return tuple(int(np.bitwise_xor.reduce(cols[name].astype(np.int64, copy=False))) if len(cols) else 0
                 for name in ("offset_py", "position"))


def plain_units_beside(root, compute: Callable[[], object], workers: int) -> ReadBeside | None:
    """``compute()`` here (verify's next start: the message store's recovery walk) while a
    worker process scans the timer log on disk and reads every unit's record (plain_units,
    unbounded: the recovered end is what ``compute`` finds); the two take about as long.
    None with one worker or no timer log units: PlainUnits reads them itself when asked."""
    directory = find_timer_store(root).timer_log_dir
    if workers <= 1 or directory is None:
        compute()
        return None
    scanned: list = []  # the worker's scan, once for both halves (each process its own)

    def half(k: int) -> ReadBeside | None:
        try:
            if not scanned:
                scanned.append(scan_timer_log(directory).columns)
            cols = scanned[0]
            part = cols[k * (len(cols) // 2):len(cols) if k else len(cols) // 2]
            return ReadBeside.of(part, plain_units(root, part["offset_py"], part["size_py"],
                                                   part["hash_code_of_real_topic"], *UNBOUNDED))
        except (RmqError, OSError):  # read again, where it is asked for, and said there
            return None

    computed = []

    def here() -> int:
        compute()
        computed.append(True)
        return 2
    # two jobs so that a worker is forked (iter_parallel runs one job here); it takes both while
    # compute() runs, and hands them back as one mask
    try:
        halves = list(iter_parallel([0, 1], half, workers=2, before=here))
    except StoreAccessError:
        if not computed:  # compute()'s own error
            raise
        return None  # the worker died (killed): the mask is read here when asked for
    if None in halves:
        return None
    first, second = halves
    return ReadBeside(np.concatenate([first.mask, second.mask]), first.count + second.count,
                      first.offsets ^ second.offsets, first.positions ^ second.positions)


def timer_start(root, outcome: Outcome | None, now_ms: int, settings: TimerSettings | None = None,
                reader: CommitLogReader | None = None, plain: ReadBeside | None = None,
                run: bool = True) -> TimerStart | None:
    """Load, recover and (``run``) run of the timer store at the clock ``now_ms`` (the write
    time at start is taken as the same clock). ``plain``: the units' records as a worker read
    them (:func:`plain_units_beside`). ``settings``: the broker config's given for the store,
    else the defaults (:meth:`TimerSettings.of`)."""
    settings = settings or TimerSettings.of(root)
    files = find_timer_store(root)
    if not files.exists:
        return None
    contents = {}  # each timer log file read once: for the scan and for the model load appends to

    def read(path):
        contents[path] = data = read_file(path)
        return data

    disk_log = scan_timer_log(files.timer_log_dir or pathlib.Path(root) / "timerlog", read=read)
    log_files = TimerLogModel([TimerLogFile(f.name, f.base_offset, disk_log.file_size or f.file_size, contents[f.path])
                               for f in disk_log.files], seed=disk_log)
    slots, refusal, refused = np.empty(0, USED_DTYPE), None, None
    if files.wheel is not None:
        wheel = read_wheel(files.wheel, settings.precision_ms)
        if wheel.file_size not in (0, wheel_length(SLOTS_TOTAL)):
            refusal = (f"timerwheel is {wheel.file_size} bytes, not {wheel_length(SLOTS_TOTAL)}: "
                       f"the TimerWheel constructor throws and the broker does not start")
            refused = files.wheel
        slots = wheel.used  # rows of USED_DTYPE: (index, time value, firstPos, lastPos, num, magic)
    checkpoint = _checkpoint(files)
    metrics = None
    try:
        loaded = read_timermetrics(files.config_dir).metrics
        if loaded is not None:
            metrics = {"timingCount": {t.topic: {"count": t.count, "timeStamp": t.time_stamp}
                                       for t in loaded.timing_count},
                       "dataVersionStateVersion": loaded.data_version_state_version,
                       "dataVersionTimestamp": loaded.data_version_timestamp,
                       "dataVersionCounter": loaded.data_version_counter}
    except (FormatError, RmqError):
        metrics = None
    own = reader is None
    reader = reader or CommitLogReader.of_store(root)
    try:
        store = message_store_at_load(outcome, reader)
        store.plain = plain_units_of = PlainUnits(pathlib.Path(root), disk_log, store.commit_log_min,
                                                  store.commit_log_max)
        plain_units_of.take(plain)
        load = simulate_timer_load(log_files, slots, checkpoint, store, now_ms, settings, metrics)
        if refusal:
            load.loadable, load.reason = False, refusal
        ran = predict_run(load, store, now_ms) if load.loadable and run else None
    finally:
        if own:
            reader.close()
    if not load.loadable and refused is None:
        refused = files.timer_log_dir or pathlib.Path(root) / "timerlog"
    return TimerStart(files, disk_log, load, ran, store, refused, slots, plain_units_of)


def _checkpoint(files: TimerStore) -> TimerCheckpointData:
    if files.timercheck is None:
        return TimerCheckpointData(present=False)
    try:
        c = read_timercheck(files.timercheck)
    except StoreNotFound:
        return TimerCheckpointData(present=False)
    return TimerCheckpointData(c.last_read_time_ms, c.last_timer_log_flush_pos, c.last_timer_queue_offset,
                               c.master_timer_queue_offset, c.data_version_state_version,
                               c.data_version_timestamp, c.data_version_counter)


def message_store_at_load(outcome: Outcome | None, reader: CommitLogReader) -> MessageStoreAtLoad:
    """What TimerMessageStore asks of the message store once its recovery is done: the commit
    log's range, the timer topic's queues, and records by (offset, size) as getData reads them."""
    end = outcome.recovered_end if outcome is not None else 0
    low = outcome.min_offset if outcome is not None else 0
    models = {qid: q for (topic, qid), q in (outcome.queue_models.items() if outcome else ())
              if topic == TIMER_TOPIC}
    q0 = models.get(0)

    def queue_unit(queue_id: int, offset: int):
        q = models.get(queue_id)
        if q is None or not q.min_offset <= offset < q.max_offset:
            return None
        at = offset * CQ_UNIT
        for f in q.files:
            if f.base <= at < f.base + f.wrote:
                u = f.unit(at - f.base)
                return int(u[0]), int(u[1])
        return None

    def record(offset_py: int, size_py: int) -> TimerRecord | None:
        """getMessageByCommitOffset: getData (the bytes inside one file, before the end) and decode."""
        if size_py <= 0 or offset_py < low:
            return None
        data = reader.get_data(offset_py, size_py, end)
        if len(data) < size_py:
            return None
        try:
            m = decode_message(data, 0, offset_py, size_py, check_crc=False)
        except (RecordError, ValueError, IndexError, Exception):  # noqa: BLE001 - MessageDecoder.decode's null
            return None
        return TimerRecord(offset_py, size_py, m.queue_id, m.queue_offset, dict(m.properties), m.topic)

    return MessageStoreAtLoad(low, end, (q0.min_offset, q0.max_offset) if q0 is not None else None,
                              queue_unit, record, frozenset(models))
