"""``TimerMessageStore.load`` and ``recover`` at 5.3.3, simulated on plain data.

The broker loads the message store first (its recovery sets the commit log's end and the
``rmq_sys_wheel_timer`` queue's range), then the timer store:

1. ``TimerLog.load`` (a MappedFileQueue: every file mapped whole), ``TimerMetrics.load``.
2. ``recoverAndRevise(lastTimerLogFlushPos - fileSize, check)``: from the timer log file
   holding that offset, every 52-byte step is read; a blank ends a file, and the first unit
   whose size is not 52 or whose magic has a bit above the low four ends the log there
   (``truncateDirtyFiles``: later files destroyed). Each good unit forces its slot's lastPos
   (``reviseSlot(deliverTime, IGNORE, pos, true)``; a slot of another time is taken over,
   keeping its num). Slots before the file the rescan starts from are never looked at.
3. ``reviseQueueOffset``: the record of the last unit before the cut, its queue offset
   checked against the queue; -1 when it cannot be read. ``currQueueOffset`` is that + 1 (or
   the checkpoint's lastTimerQueueOffset), capped by masterTimerQueueOffset and put inside
   the queue's [min, max].
4. ``currReadTimeMs`` = max(lastReadTimeMs, now - 7 days + 60 s): the clock is a parameter.
5. ``checkPhyPos``: slots (from the read time on) whose lastPos is past the cut make a
   second pass from the least firstPos among them, unchecked (``recoverAndRevise(min, false)``).
6. ``prepareTimerCheckPoint``; ``calcTimerDistribution``.

Everything the timer recovery asks of the message store comes in a :class:`MessageStoreAtLoad`.
"""
from __future__ import annotations

import dataclasses
import struct
from typing import Callable

import numpy as np

from rmqtool.formats.broker_conf import TIMER_PRECISION_MS, TIMER_ROLL_WINDOW_SLOT
from rmqtool.formats.timerlog import BLANK_MAGIC_CODE, UNIT_SIZE, UNIT_PRE_SIZE_FOR_MSG, is_magic_ok
from rmqtool.recovery.timer.log_model import TimerLogFile, TimerLogModel
from rmqtool.formats.timerwheel import DEFAULT_TIMER_PRECISION_MS, DEFAULT_TIMER_ROLL_WINDOW_SLOT, SLOTS_TOTAL
from rmqtool.store.broker_conf import config_given
from rmqtool.store.timer.timerlog import UNIT_DTYPE, slot_indexes_of
from rmqtool.recovery.timer.wheel_model import IGNORE, TIMER_BLANK_SLOTS, WheelModel, WheelSlot

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_DIST = (5, 60, 300, 900, 3600, 14400, 28800, 86400)  # TimerMetrics.timerDist (seconds)
MAX_MESSAGE_SIZE = 1024 * 1024 * 4  # MessageStoreConfig.maxMessageSize: bufferLocal's capacity - 100
LONG_MAX = (1 << 63) - 1
_SCAN = struct.Struct(">iqiqi")  # size, prevPos, magic, currWriteTime, delayedTime
_PY = struct.Struct(">qi")


def timer_settings_said(conf) -> dict[str, tuple[int, str]]:
    """The timer settings the broker config ``conf`` names (None: no config given), each as
    (the value the broker runs with, what says so): the one reading of them, for the read
    side (:meth:`TimerSettings.of`) and for ``redispatch --timer``'s rebuild."""
    if conf is None:
        return {}
    said = {}
    for name, default in ((TIMER_PRECISION_MS, DEFAULT_TIMER_PRECISION_MS),
                          (TIMER_ROLL_WINDOW_SLOT, DEFAULT_TIMER_ROLL_WINDOW_SLOT)):
        value = conf.int_setting(name, default)
        if value is not None:
            said[name] = value
    return said


def roll_window_bounded(window: int) -> int:
    """TimerMessageStore's constructor: a timerRollWindowSlot outside [2, slotsTotal - 60] is that bound."""
    return SLOTS_TOTAL - TIMER_BLANK_SLOTS if window > SLOTS_TOTAL - TIMER_BLANK_SLOTS or window < 2 else window


@dataclasses.dataclass(frozen=True)
class TimerSettings:
    """The MessageStoreConfig values the timer store's load and run depend on."""
    precision_ms: int = DEFAULT_TIMER_PRECISION_MS  # timerPrecisionMs
    roll_window_slots: int = DEFAULT_TIMER_ROLL_WINDOW_SLOT  # timerRollWindowSlot
    max_message_size: int = MAX_MESSAGE_SIZE

    @classmethod
    def of(cls, root) -> "TimerSettings":
        """The settings of the broker config given for the store at ``root`` (``--broker-config``:
        the wheel holds times divided by timerPrecisionMs, which no file shows), else the defaults."""
        said = timer_settings_said(config_given(root))
        return cls(said.get(TIMER_PRECISION_MS, (cls.precision_ms,))[0],
                   said.get(TIMER_ROLL_WINDOW_SLOT, (cls.roll_window_slots,))[0])

    @property
    def roll_window(self) -> int:
        """timerRollWindowSlots as the constructor bounds it."""
        return roll_window_bounded(self.roll_window_slots)


@dataclasses.dataclass(frozen=True)
class TimerCheckpointData:
    """config/timercheck as TimerCheckpoint reads it (all zero when the file is missing)."""
    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0
    present: bool = True


@dataclasses.dataclass(frozen=True)
class TimerRecord:
    """A record getMessageByCommitOffset decoded: what recovery and enqueue use of it."""
    offset_py: int
    size_py: int
    queue_id: int
    queue_offset: int
    properties: dict
    topic: str = TIMER_TOPIC


@dataclasses.dataclass
class MessageStoreAtLoad:
    """The message store after its load and recovery, as the timer store sees it."""
    commit_log_min: int
    commit_log_max: int
    queue_range: tuple[int, int] | None  # rmq_sys_wheel_timer queue 0 [min, max); None: no queue
    queue_unit: Callable[[int, int], tuple[int, int] | None]  # (queue id, queue offset) -> (offsetPy, sizePy)
    record: Callable[[int, int], TimerRecord | None]  # getMessageByCommitOffset(offsetPy, sizePy)
    queue_ids: frozenset = frozenset({0})  # the timer topic's queues the store has
    # a mask over units (COLUMNS_DTYPE rows; plain(cols, rows): over cols[rows]) whose own record
    # lies there, all at once (store/timer/records.plain_units): ``record`` reads each of them; None: ask ``record``
    plain: Callable | None = None


@dataclasses.dataclass
class SlotRevision:
    index: int
    before: tuple  # (timeValue, firstPos, lastPos, num) before recovery
    after: tuple


@dataclasses.dataclass
class TimerLoad:
    """What load/recover left: the state getters, the wheel and the log in memory, and why."""
    settings: TimerSettings
    now_ms: int
    loadable: bool
    reason: str | None
    wheel: WheelModel
    log: TimerLogModel
    checkpoint: TimerCheckpointData
    checkpoint_in_memory: dict
    rescan_from: int = 0  # the timer log file the rescan starts from
    cut_at: int = 0  # processOffset: the log ends here
    cut_reason: str = ""
    files_destroyed: list = dataclasses.field(default_factory=list)
    recheck_from: int | None = None  # checkPhyPos's second pass
    revised: list = dataclasses.field(default_factory=list)  # SlotRevision
    queue_offset_from_log: int = -1  # reviseQueueOffset
    queue_offset_reason: str = ""
    curr_queue_offset: int = 0
    curr_read_time_ms: int = 0
    read_time_reason: str = ""
    queue_range: tuple[int, int] | None = None
    commit_log_range: tuple[int, int] = (0, 0)
    timer_dist: dict = dataclasses.field(default_factory=dict)
    timing_count: dict | None = None

    @property
    def enqueue_again(self) -> tuple[int, int]:
        """The rmq_sys_wheel_timer queue offsets the start enqueues (again): [currQueueOffset, max)."""
        top = self.queue_range[1] if self.queue_range else self.curr_queue_offset
        return self.curr_queue_offset, max(top, self.curr_queue_offset)

    def state(self) -> dict:
        """The TimerMessageStore getters right after load (before start)."""
        qmin, qmax = self.queue_range if self.queue_range else (0, 0)
        return {
            "currReadTimeMs": self.curr_read_time_ms, "currWriteTimeMs": 0, "preReadTimeMs": 0,
            "commitReadTimeMs": self.curr_read_time_ms, "currQueueOffset": self.curr_queue_offset,
            "commitQueueOffset": self.curr_queue_offset, "lastCommitReadTimeMs": 0, "lastCommitQueueOffset": 0,
            "state": 0, "shouldRunningDequeue": False,
            "dequeueBehindMessages_allCongestNum": self.wheel.all_num(self.curr_read_time_ms),
            "enqueueBehindMessages": (qmax if self.queue_range else 0) - self.curr_queue_offset,
            "timerLogFlushedWhere": self.cut_at, "timerLogMaxOffset": self.log.max_offset,
            "timerLogMinOffset": self.log.min_offset, "timerTopicCqMinOffset": qmin, "timerTopicCqMaxOffset": qmax,
            "checkpointInMemory": dict(self.checkpoint_in_memory),
            "timerDistInMemory": {str(k): v for k, v in self.timer_dist.items()},
            "commitLogMaxOffset": self.commit_log_range[1], "commitLogMinOffset": self.commit_log_range[0],
            "enqueuePutQueueSize": 0, "dequeueGetQueueSize": 0, "dequeuePutQueueSize": 0,
            # TimerMetrics.load: the timermetrics file as it reads it (left out when none is read)
            **({"timingCountInMemory": self.timing_count} if self.timing_count is not None else {}),
        }


def simulate_timer_load(files: list[TimerLogFile], slots: list[WheelSlot], checkpoint: TimerCheckpointData,
                        store: MessageStoreAtLoad, now_ms: int, settings: TimerSettings = TimerSettings(),
                        timing_count: dict | None = None) -> TimerLoad:
    """load() + recover() + calcTimerDistribution() at the clock ``now_ms``."""
    log = TimerLogModel(files) if not isinstance(files, TimerLogModel) else files
    wheel = (WheelModel.from_used(slots, settings.precision_ms) if isinstance(slots, np.ndarray)
             else WheelModel(slots, settings.precision_ms))
    before = wheel.columns()
    before = {k: v.copy() for k, v in before.items()} if before is not None else None
    before_slots = {} if before is not None else {
        s.index: (s.time_value, s.first_pos, s.last_pos, s.num) for s in wheel.slots.values()}
    out = TimerLoad(settings, now_ms, True, None, wheel, log, checkpoint, {}, timing_count=timing_count,
                    queue_range=store.queue_range, commit_log_range=(store.commit_log_min, store.commit_log_max))
    sizes = {f.file_size for f in log.files}
    if len(sizes) > 1:  # MappedFileQueue.load: "length not matched message store config value"
        out.loadable, out.reason = False, "timer log files of different sizes: TimerLog.load fails"
    try:
        _recover(out, store)
    except _LoadThrows as exc:
        out.loadable, out.reason = False, str(exc)
    out.revised = _revisions(before, wheel, before_slots)
    out.timer_dist = _timer_distribution(wheel, now_ms, settings.precision_ms)
    return out


_REVISED = ("time_value", "first_pos", "last_pos", "num")


def _revisions(before: dict | None, wheel: WheelModel, before_slots: dict) -> list[SlotRevision]:
    """The slots load changed (time value, firstPos, lastPos, num), by index. ``before``: the
    wheel's columns before load (None when it was the dict alone: ``before_slots`` then)."""
    after = wheel.columns()
    if after is None or before is None:
        if before is not None:
            before_slots = {i: tuple(t) for i, *t in zip(*(before[k].tolist() for k in ("index",) + _REVISED))}
        return [SlotRevision(i, before_slots.get(i, (0, 0, 0, 0)), (s.time_value, s.first_pos, s.last_pos, s.num))
                for i, s in sorted(wheel.slots.items())
                if before_slots.get(i, (0, 0, 0, 0)) != (s.time_value, s.first_pos, s.last_pos, s.num)]
    index, known = after["index"], before["index"]
    where = np.searchsorted(known, index)
    found = where < len(known)
    found[found] = known[where[found]] == index[found]
    changed = np.zeros(len(index), bool)
    was = {}
    for k in _REVISED:
        was[k] = np.zeros(len(index), np.int64)
        was[k][found] = before[k][where[found]]
        changed |= was[k] != after[k]
    return [SlotRevision(int(index[r]), tuple(int(was[k][r]) for k in _REVISED),
                         tuple(int(after[k][r]) for k in _REVISED)) for r in np.flatnonzero(changed).tolist()]


class _LoadThrows(Exception):
    """Something recover() does not catch: TimerMessageStore.load throws, the broker does not start."""


def _recover(out: TimerLoad, store: MessageStoreAtLoad) -> None:
    log, wheel, cp, precision = out.log, out.wheel, out.checkpoint, out.settings.precision_ms
    last_flush = cp.last_timer_log_flush_pos
    if log.live:
        last_flush -= log.file_size
    last_flush = max(last_flush, 0)
    out.cut_at, out.cut_reason, out.rescan_from = _recover_and_revise(log, wheel, last_flush, True)
    out.files_destroyed = [f.name for f in log.truncate_dirty_files(out.cut_at)] if log.live else []
    process = out.cut_at
    q, out.queue_offset_reason = _revise_queue_offset(log, store, process, out.settings)
    out.queue_offset_from_log = q
    curr_q = cp.last_timer_queue_offset if q == -1 else q + 1
    curr_q = min(curr_q, cp.master_timer_queue_offset)
    if store.queue_range is not None:
        qmin, qmax = store.queue_range
        curr_q = qmin if curr_q < qmin else qmax if curr_q > qmax else curr_q
    out.curr_queue_offset = curr_q
    read = cp.last_read_time_ms
    floor = out.now_ms // precision * precision - SLOTS_TOTAL * precision + TIMER_BLANK_SLOTS * precision
    out.read_time_reason = "checkpoint"
    if read < floor:
        read, out.read_time_reason = floor, "sevenDayFloor"
    out.curr_read_time_ms = read
    min_first = wheel.check_phy_pos(read, process)
    if min_first < process:
        out.recheck_from = min_first
        _recover_and_revise(log, wheel, min_first, False)
    lowered = min(curr_q, cp.master_timer_queue_offset)
    out.checkpoint_in_memory = {
        "lastReadTimeMs": read, "lastTimerLogFlushPos": process, "lastTimerQueueOffset": lowered,
        "masterTimerQueueOffset": cp.master_timer_queue_offset, "dataVersionStateVersion": cp.state_version,
        # a missing file: the DataVersion made at construction (the clock then, counter 0)
        "dataVersionTimestamp": cp.timestamp if cp.present else out.now_ms, "dataVersionCounter": cp.counter,
    }


def _recover_and_revise(log: TimerLogModel, wheel: WheelModel, begin: int, check: bool) -> tuple[int, str, int]:
    """recoverAndRevise: (processOffset, why the scan stopped, the file it started from)."""
    live = log.live
    if not live:
        return 0, "noFiles", 0
    index = len(live) - 1
    while index >= 0 and begin < live[index].from_offset:
        index -= 1
    index = max(index, 0)
    start = live[index].from_offset
    check_offset, reason = start, "end"
    for f in live[index:]:
        size = f.file_size if check else f.wrote
        position, stop, reason = _revise_whole_units(f, size, wheel, check), False, "end"
        while position < size:
            if position + _SCAN.size - 12 > size:  # a getInt/getLong past the buffer's limit
                stop, reason = True, "bufferUnderflow"
                break
            unit_size, _prev, magic = struct.unpack(">iqi", f.bytes_at(position, 16))
            if magic == BLANK_MAGIC_CODE:
                reason = "blank"
                break
            if check and (not is_magic_ok(magic) or unit_size != UNIT_SIZE):
                stop = True
                reason = ("zeroUnit" if (unit_size, _prev, magic) == (0, 0, 0)
                          else "badMagic" if not is_magic_ok(magic) else "sizeNot52")
                break
            if position + _SCAN.size > size:
                stop, reason = True, "bufferUnderflow"
                break
            _s, _p, _m, write_time, delayed = _SCAN.unpack(f.bytes_at(position, _SCAN.size))
            if unit_size == UNIT_SIZE and is_magic_ok(magic):
                wheel.revise_slot(write_time + delayed, IGNORE, f.from_offset + position, True)
            position += UNIT_SIZE
        check_offset = f.from_offset + position
        if stop:
            break
    return check_offset, reason, start


def _revise_whole_units(f: TimerLogFile, size: int, wheel: WheelModel, check: bool) -> int:
    """recoverAndRevise's loop over a file's whole units (all at once) up to the first that
    ends it (a blank; with ``check`` a unit recover does not accept): the position the loop
    below goes on from, to say why it stops there (or to read the file's last bytes)."""
    count = size // UNIT_SIZE
    on_disk = min(count, -(-len(f.data) // UNIT_SIZE))
    need = on_disk * UNIT_SIZE
    data = (memoryview(f.data)[:need] if len(f.data) >= need  # read in place: what follows copies what it keeps
            else bytes(f.data[:need]) + bytes(need - len(f.data)))
    raw = np.frombuffer(data, dtype=UNIT_DTYPE, count=on_disk)
    if on_disk < count:  # past the bytes read: zero units (no unit, and with check the end)
        raw = np.concatenate((raw, np.zeros(count - on_disk, UNIT_DTYPE)))
    write = raw["curr_write_time"]
    if len(write) and (np.abs(write).max() >= 1 << 62 or (write == np.iinfo(np.int64).min).any()):
        return 0  # deliver times past a long (damage): the loop below, with Python's ints
    ok = (raw["size"] == UNIT_SIZE) & ((raw["magic"] | 0xF) == 0xF)
    ends = (raw["magic"] == BLANK_MAGIC_CODE) | (~ok if check else False)
    stop = int(np.argmax(ends)) if ends.any() else count
    rows = np.flatnonzero(ok[:stop])
    wheel.revise_many(write[rows].astype(np.int64) + raw["delayed_time"][rows].astype(np.int64),
                      f.from_offset + rows.astype(np.int64) * UNIT_SIZE)
    return stop * UNIT_SIZE


def _revise_queue_offset(log: TimerLogModel, store: MessageStoreAtLoad, process: int,
                         settings: TimerSettings) -> tuple[int, str]:
    """reviseQueueOffset: the queue offset of the record the last unit points at, or -1."""
    at = process - (UNIT_SIZE - UNIT_PRE_SIZE_FOR_MSG)
    f = log.find(at)
    if f is None or not 0 <= at % log.file_size < f.wrote:
        return -1, f"no timer log unit before {process}"
    raw = f.bytes_at(at % log.file_size, _PY.size)
    if at % log.file_size + _PY.size > f.wrote:
        raise _LoadThrows(f"reviseQueueOffset reads past timer log position {f.wrote} of {f.name}")
    offset_py, size_py = _PY.unpack(raw)
    if not 0 <= size_py <= settings.max_message_size + 100:
        raise _LoadThrows(f"the last timer log unit's sizePy {size_py} is no record size: "
                          f"getMessageByCommitOffset throws and the timer store's load fails")
    record = store.record(offset_py, size_py)
    if record is None:
        return -1, (f"the last unit's record [{offset_py}, +{size_py}) cannot be read "
                    f"(commit log ends at {store.commit_log_max}): queue offset from the checkpoint")
    if record.queue_id not in store.queue_ids:
        return record.queue_offset, "the record's queue has no consume queue: its queue offset as stored"
    tmp, count = record.queue_offset, 20000
    while count > 0:
        count -= 1
        if tmp < 0:
            break
        unit = store.queue_unit(record.queue_id, tmp)
        if unit is not None and unit == (offset_py, size_py):
            return tmp, "the last unit's record, found in the queue"
        tmp -= 1
    return record.queue_offset, "the last unit's record's queue offset (not found in the queue)"


def _timer_distribution(wheel: WheelModel, now_ms: int, precision: int) -> dict:
    """calcTimerDistribution: messages per period ahead of the clock (getSlot's num for each
    second of the period; only a slot at its own time's index is ever found)."""
    curr = now_ms // precision
    limit = TIMER_DIST[-1] * 1000 // precision
    cols = wheel.time_safe_columns() if abs(curr) < 1 << 61 else None
    if cols is None:  # a time past a long (damage): Python's ints, slot by slot
        ahead = {}
        for s in wheel.slots.values():
            j = s.time_value - curr
            if 0 <= j < limit and wheel.slot_index(s.time_value * precision) == s.index:
                ahead[j] = s.num
        at = np.fromiter(ahead.keys(), np.int64, count=len(ahead))
        nums = np.fromiter(ahead.values(), np.int64, count=len(ahead))
    else:  # a slot at its own time's index: one a time, so one a j
        index, value = cols["index"], cols["time_value"]
        keep = np.flatnonzero((value - curr >= 0) & (value - curr < limit)
                              & (slot_indexes_of(value * precision, precision) == index))
        at = value[keep] - curr
        nums = cols["num"][keep]
    out, before = {}, 0
    for period in TIMER_DIST:
        lo, hi = before * 1000 // precision, period * 1000 // precision
        out[period] = int(nums[(at >= lo) & (at < hi)].sum())
        before = period
    return out
