"""The queue offset for a timestamp: ``ConsumeQueue.getOffsetInQueueByTime`` (4.9.8).

The broker does it in two steps:

1. pick one consume queue file: the first whose file **mtime** is >= the timestamp, else
   the last file (``MappedFileQueue.getMappedFileByTime``);
2. binary search that file's units, reading each unit's message store timestamp from
   the commit log (``pickupStoreTimestamp``). An exact hit returns at once, so when
   several messages share the millisecond it returns whichever one the search lands
   on; otherwise it returns the nearer of the two neighbours (the left one on a tie).
   Units before the commit log's min offset are skipped to the right; a store time it
   cannot read makes it answer 0.

mtimes do not survive copying or restoring a store, so rmqtool picks the file by the
store timestamps of the messages its units point to instead (the first file whose last
message is stored at or after the timestamp, else the last file), says in the trace
where the broker's mtime rule would pick another file, and then searches exactly as the
broker does. ``exact=True`` answers the first queue offset whose message is stored at or
after the timestamp instead (a lower bound), whatever the ties.

A 5.x batch consume queue keeps each batch's store timestamp in its unit; rmqtool
answers its lower bound in both modes (the first batch stored at or after the time, else
the last batch), which is not the 5.x broker's own search.
"""
from __future__ import annotations

import dataclasses
import datetime
import os

from rmqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE
from rmqtool.query.by_offset import open_queue
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.query.explain import Notes, Trace, trace_or_none
from rmqtool.store.consumequeue import BatchConsumeQueue, ConsumeQueue, ConsumeQueues
from rmqtool.store.segments import Segment
from rmqtool.store.view import StoreView, as_view


@dataclasses.dataclass
class TimeLookup:
    topic: str
    queue_id: int
    time: int  # the timestamp asked about, epoch ms
    queue_offset: int
    store_timestamp: int | None  # of the message at queue_offset, when there is one
    found: bool  # False: no consume queue, no message at the answer, or (exact) none stored at or after time
    exact: bool
    notes: Notes

    def record(self) -> dict:
        """The row a time lookup prints."""
        return {"topic": self.topic, "queue_id": self.queue_id, "time": self.time,
                "queue_offset": self.queue_offset, "store_timestamp": self.store_timestamp}


def java_long_div(a: int, b: int) -> int:
    """Java's long division: truncates toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _ms(ms: int | None) -> str:
    if ms is None or ms < 0:
        return str(ms)
    try:
        when = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return f"{ms} ({when.isoformat(timespec='milliseconds').replace('+00:00', 'Z')})"


class _QueueTimes:
    """Units of one plain consume queue and the store timestamps of their messages."""

    def __init__(self, queue: ConsumeQueue, reader: CommitLogReader, trace: Trace):
        self.queue = queue
        self.reader = reader
        self.trace = trace
        self.min_physic_offset = reader.min_offset
        self.min_logic_offset = queue.min_offset(self.min_physic_offset)
        self.end = queue.end  # queue byte offset one past the written units

    def files(self) -> list[Segment]:
        """The files the broker maps: those that start before the end of the written data,
        or the first one (an empty queue still has its first file)."""
        segs = [s for s in self.queue.segments if s.base_offset < self.end]
        return segs or self.queue.segments[:1]

    def limit(self, seg: Segment) -> int:
        """selectMappedBuffer(0).limit(): bytes of written units in this file."""
        size = min(seg.size, self.end - seg.base_offset)
        return max(size - size % CQ_STORE_UNIT_SIZE, 0)

    def unit(self, queue_offset: int):
        return self.queue.get(queue_offset)

    def time_of(self, queue_offset: int) -> tuple[int, str | None, object]:
        """(store timestamp or -1, why -1, unit) of the message a unit points to."""
        unit = self.unit(queue_offset)
        if unit is None:
            return -1, f"no readable unit at queue offset {queue_offset}", None
        if unit.commit_log_offset < self.min_physic_offset:
            return -1, f"unit points before the commit log's min offset {self.min_physic_offset}", unit
        ts, why = self.reader.store_timestamp(unit.commit_log_offset, unit.size)
        return ts, why, unit


def offset_by_time(store: str | os.PathLike | StoreView, topic: str, queue_id: int, timestamp: int, *,
                   exact: bool = False, trace: Trace | None = None,
                   queues: ConsumeQueues | None = None) -> TimeLookup:
    """The queue offset of topic/queue_id for a store timestamp (see the module doc); over the
    queue of ``queues`` when given (offsets reset: the queues the broker's next start leaves,
    recovery/loaded_end.loaded_queues), else as its files hold it."""
    trace = trace_or_none(trace)
    view = as_view(store)
    root = view.root
    notes = Notes()
    queue = open_queue(root, topic, queue_id) if queues is None else \
        queues.find(topic, queue_id, batch=False) or queues.find(topic, queue_id, batch=True)
    if queue is None:
        notes.add(f"no consume queue for topic {topic!r} queue {queue_id}; the broker answers 0", trace)
        return TimeLookup(topic, queue_id, timestamp, 0, None, False, exact, notes)
    with CommitLogReader(view.commit_log) as reader:
        if queue.is_batch:
            return _batch_lookup(queue, timestamp, exact, notes, trace)
        times = _QueueTimes(queue, reader, trace)
        if trace.enabled:
            trace(f"consume queue {topic}/{queue_id}: {len(queue.segments)} file(s), queue offsets "
                  f"[{times.min_logic_offset}, {queue.max_offset}); commit log min offset {times.min_physic_offset}")
        files = times.files()
        if not files:
            notes.add(f"consume queue {topic}/{queue_id} has no files; the broker answers 0", trace)
            return TimeLookup(topic, queue_id, timestamp, 0, None, False, exact, notes)
        seg = _pick_file(times, files, timestamp, notes, trace)
        if exact:
            offset = _lower_bound(times, seg, timestamp, trace)
            if offset is None:
                last = queue.max_offset
                notes.add(f"no message of {topic}/{queue_id} is stored at or after {timestamp}", trace)
                return TimeLookup(topic, queue_id, timestamp, last, None, False, exact, notes)
        else:
            offset = _broker_search(times, seg, timestamp, trace)
        stored = None
        if queue.min_offset(times.min_physic_offset) <= offset < queue.max_offset:
            ts, why, _ = times.time_of(offset)
            stored = ts if why is None else None  # a readable record's, negative ones too
        if stored is None:
            notes.add(f"queue offset {offset} of {topic}/{queue_id} holds no readable message", trace)
        elif trace.enabled:
            trace(f"answer: queue offset {offset}, stored at {_ms(stored)}")
        return TimeLookup(topic, queue_id, timestamp, offset, stored, stored is not None, exact, notes)


def _pick_file(times: _QueueTimes, files: list[Segment], timestamp: int, notes: Notes, trace: Trace) -> Segment:
    """rmqtool's choice by store timestamps, compared with the broker's by file mtime."""
    chosen = None
    for seg in files:
        limit = times.limit(seg)
        if limit <= 0:
            continue
        first_q = max(seg.base_offset, times.min_logic_offset * CQ_STORE_UNIT_SIZE) // CQ_STORE_UNIT_SIZE
        last_q = (seg.base_offset + limit) // CQ_STORE_UNIT_SIZE - 1
        first_ts = times.time_of(first_q)[0] if first_q <= last_q else -1
        last_ts, why, _ = times.time_of(last_q)
        if trace.enabled:
            trace(f"file {seg.name}: queue offsets [{first_q}, {last_q}], first message stored at "
                  f"{_ms(first_ts)}, last at {_ms(last_ts)}" + (f" ({why})" if why else ""))
        if last_ts >= timestamp:
            chosen = seg
            break
    if chosen is None:
        chosen = files[-1]
        why_chosen = "no file's last message is stored at or after the time: the last file"
    else:
        why_chosen = "the first file whose last message is stored at or after the time"
    broker = _pick_file_by_mtime(files, timestamp)
    if trace.enabled:
        trace(f"rmqtool picks file {chosen.name}: {why_chosen}")
        if broker is None:
            trace("the broker's pick by file mtime is unknown (cannot stat the files)")
        elif broker.path == chosen.path:
            trace("the broker's pick by file mtime is the same file")
        else:
            trace(f"the broker would pick file {broker.name} by its file mtime "
                  f"({_ms(_mtime_ms(broker))}): its answer may differ; mtimes do not survive a copy")
    return chosen


def _mtime_ms(seg: Segment) -> int | None:
    try:
        return int(os.stat(seg.path).st_mtime * 1000)
    except OSError:
        return None


def _pick_file_by_mtime(files: list[Segment], timestamp: int) -> Segment | None:
    """MappedFileQueue.getMappedFileByTime: the first file whose mtime >= timestamp, else the last."""
    for seg in files:
        mtime = _mtime_ms(seg)
        if mtime is None:
            return None
        if mtime >= timestamp:
            return seg
    return files[-1]


def _bounds(times: _QueueTimes, seg: Segment) -> tuple[int, int]:
    """(low, high) byte positions in the file, as getOffsetInQueueByTime sets them."""
    min_logic_bytes = times.min_logic_offset * CQ_STORE_UNIT_SIZE
    low = min_logic_bytes - seg.base_offset if min_logic_bytes > seg.base_offset else 0
    high = times.limit(seg) - CQ_STORE_UNIT_SIZE
    return low, high


def _broker_search(times: _QueueTimes, seg: Segment, timestamp: int, trace: Trace) -> int:
    """The 4.9.8 binary search within one file, step for step."""
    unit = CQ_STORE_UNIT_SIZE
    low, high = _bounds(times, seg)
    target = left = right = -1
    left_value = right_value = -1
    while high >= low:
        mid = (low + high) // (2 * unit) * unit
        q = (seg.base_offset + mid) // unit
        cq_unit = times.unit(q)
        phy = cq_unit.commit_log_offset if cq_unit is not None else None
        if phy is not None and phy < times.min_physic_offset:
            if trace.enabled:
                trace(f"queue offset {q}: commit log offset {phy} is before the min offset: go right")
            low, left = mid + unit, mid
            continue
        store_time, why, _ = times.time_of(q)
        if store_time < 0:
            if trace.enabled:
                trace(f"queue offset {q}: store time unreadable ({why}): the broker answers 0")
            return 0
        if trace.enabled:
            side = "hit" if store_time == timestamp else ("go left" if store_time > timestamp else "go right")
            trace(f"queue offset {q}: stored at {_ms(store_time)}: {side}")
        if store_time == timestamp:
            target = mid
            break
        if store_time > timestamp:
            high, right, right_value = mid - unit, mid, store_time
        else:
            low, left, left_value = mid + unit, mid, store_time
    if target != -1:
        offset = target
    elif left_value == -1:
        offset = right
    elif right_value == -1:
        offset = left
    else:
        # the nearer neighbour; on a tie the left one
        offset = right if abs(timestamp - left_value) > abs(timestamp - right_value) else left
    if trace.enabled and target == -1:
        trace(f"no exact hit: nearest neighbour at file position {offset} "
              f"(left stored at {left_value}, right at {right_value})")
    return java_long_div(seg.base_offset + offset, unit)


def _lower_bound(times: _QueueTimes, seg: Segment, timestamp: int, trace: Trace) -> int | None:
    """The first queue offset in the file whose message is stored at or after timestamp.
    Units that point before the commit log's min offset, or whose time cannot be read,
    count as earlier (fill units of a rebuilt queue come first)."""
    unit = CQ_STORE_UNIT_SIZE
    low, high = _bounds(times, seg)
    lo, hi = (seg.base_offset + low) // unit, (seg.base_offset + high) // unit + 1
    if trace.enabled:
        trace(f"exact: lower bound over queue offsets [{lo}, {hi})")
    while lo < hi:
        mid = (lo + hi) // 2
        store_time, why, _ = times.time_of(mid)
        if trace.enabled:
            trace(f"queue offset {mid}: stored at {_ms(store_time)}" + (f" ({why})" if why else ""))
        if store_time >= timestamp:
            hi = mid
        else:
            lo = mid + 1
    end = (seg.base_offset + high) // unit + 1
    return lo if lo < end else None


def _batch_lookup(queue: BatchConsumeQueue, timestamp: int, exact: bool, notes: Notes, trace: Trace) -> TimeLookup:
    units = list(queue.iter_units())
    if trace.enabled:
        trace(f"batch consume queue {queue.topic}/{queue.queue_id}: {len(units)} unit(s); "
              f"each unit keeps its batch's store time")
    if not units:
        notes.add(f"batch consume queue {queue.topic}/{queue.queue_id} is empty", trace)
        return TimeLookup(queue.topic, queue.queue_id, timestamp, 0, None, False, exact, notes)
    lo, hi = 0, len(units)
    while lo < hi:
        mid = (lo + hi) // 2
        if units[mid].store_timestamp >= timestamp:
            hi = mid
        else:
            lo = mid + 1
    if lo == len(units):
        if exact:
            notes.add(f"no batch of {queue.topic}/{queue.queue_id} is stored at or after {timestamp}", trace)
            return TimeLookup(queue.topic, queue.queue_id, timestamp, queue.max_offset, None, False, exact, notes)
        lo = len(units) - 1
    found = units[lo]
    if trace.enabled:
        trace(f"answer: batch [{found.msg_base_offset}, {found.msg_base_offset + found.batch_size}) "
              f"stored at {_ms(found.store_timestamp)}")
    return TimeLookup(queue.topic, queue.queue_id, timestamp, found.msg_base_offset, found.store_timestamp,
                      True, exact, notes)
