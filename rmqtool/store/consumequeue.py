"""Reading consume queues: ``consumequeue/TOPIC/QUEUEID/`` and 5.x ``batchconsumequeue/``.

A queue is a MappedFileQueue of fixed-size units (formats/consumequeue.py). The end of
the written data and the queue's min and max offsets follow the broker:

* max (``ConsumeQueue.recover``): scan from the third-last file on, stop at the first
  unit with commitLogOffset < 0 or size <= 0 (an all-zero unit is unwritten space);
  max offset = one past the last written unit. The batch queue's max is the last
  unit's msgBaseOffset + batchSize (``BatchConsumeQueue.reviseMaxOffsetInQueue``).
* given the commit log's max offset, max is then cut where the broker's load cuts it
  (``truncateDirtyLogicFiles``): at the first unit pointing at or past that offset.
  After a recovery that shortened the commit log, such units stay on disk.
* min (``ConsumeQueue.correctMinOffset``): the first unit of the first file whose
  commitLogOffset >= the commit log's min offset. Fill units (commitLogOffset 0) count,
  as in the broker: a rebuilt queue's min is where its fill starts. Where the first file
  has none, the first unit of a later file that qualifies (the broker's load keeps 0,
  and its first consume queue cleanup corrects the min to that unit). The batch queue's
  min is the first unit's msgBaseOffset. Where no unit qualifies, min = max: the queue
  holds nothing readable.

Readers never write and never raise for damage: what is not as the broker writes it
becomes a Finding. Only a missing or unreadable queue directory raises.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import os
import pathlib
import re
import struct
from typing import TYPE_CHECKING, Iterator, Union

from rmqtool.errors import NotAStore, StoreAccessError, StoreNotFound
from rmqtool.findings import (BATCH_CONSUME_QUEUE_OFFSET_GAP, CONSUME_QUEUE_BEYOND_COMMIT_LOG,
                              CONSUME_QUEUE_FILE_MISALIGNED, CONSUME_QUEUE_HOLE, CONSUME_QUEUE_UNIT_INVALID,
                              QUEUE_DIR_INVALID, RECORD_TRUNCATED, SEGMENT_UNREADABLE, TRAILING_GARBAGE,
                              Finding)
from rmqtool.formats.consumequeue import (BATCH_CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE, BatchCqUnit,
                                          CqUnit, is_fill_unit, is_written_batch_unit, is_written_unit)
from rmqtool.formats.derive import struct_of
from rmqtool.store.segments import Segment, discover, list_dir
from rmqtool.store.paths import BATCH_CONSUMEQUEUE_DIR, CONSUMEQUEUE_DIR, is_segment_name
from rmqtool.store.rocksdb_cq import is_rocksdb_dir, is_rocksdb_file

if TYPE_CHECKING:  # numpy is loaded by the commands that walk the log, not at import
    import numpy as np

CQ_UNIT = struct_of(CqUnit)
BATCH_CQ_UNIT = struct_of(BatchCqUnit)


@dataclasses.dataclass(slots=True, frozen=True)
class UnitLayout:
    """What finding a queue's end needs of its unit: size, struct, the broker's "written"
    test (fields in struct order, or numpy columns of a window of units) and, for plain
    queues, the fill unit."""
    unit_size: int
    unit_struct: struct.Struct
    schema: object  # the formats/ schema the struct and the numpy dtype derive from
    is_written: object  # (fields) -> bool; also (columns) -> bool array
    is_fill: object = None  # (fields) -> bool; also (columns) -> bool array; None: the layout has no fill units

    @property
    def dtype(self):
        return _dtype(self.schema)


@functools.cache
def _dtype(schema):
    from rmqtool.store.arrays import dtype_of  # numpy: loaded by the commands that read units in bulk
    return dtype_of(schema)


CQ_LAYOUT = UnitLayout(CQ_STORE_UNIT_SIZE, CQ_UNIT, CqUnit, lambda f: is_written_unit(f[0], f[1]),
                       lambda f: is_fill_unit(f[0], f[1], f[2]))
BATCH_CQ_LAYOUT = UnitLayout(BATCH_CQ_STORE_UNIT_SIZE, BATCH_CQ_UNIT, BatchCqUnit,
                             lambda f: is_written_batch_unit(f[0], f[1], f[4], f[5]))


def columns(units) -> tuple:
    """A numpy record array as its fields in struct order, for the layout's tests."""
    return tuple(units[name] for name in units.dtype.names)


@dataclasses.dataclass(slots=True, frozen=True)
class ConsumeQueueUnit:
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    size: int
    tags_code: int
    is_fill: bool  # a fillPreBlank unit, not a message
    path: str
    position: int  # byte position of the unit within path

    @property
    def batch_num(self) -> int:
        return 1


@dataclasses.dataclass(slots=True, frozen=True)
class BatchConsumeQueueUnit:
    topic: str
    queue_id: int
    queue_offset: int  # = msg_base_offset: the unit covers [queue_offset, queue_offset + batch_size)
    commit_log_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    msg_base_offset: int
    batch_size: int
    compacted_offset: int
    path: str
    position: int

    @property
    def batch_num(self) -> int:
        return self.batch_size

    @property
    def is_fill(self) -> bool:
        return False  # the batch queue has no fill units


# Queue files are read a window of units at a time, so memory stays bounded whatever size
# a damaged or sparse file claims; zero checks read in bytes, skipping the file's holes.
WINDOW_UNITS = 4096


def _windows(seg: Segment, start: int, end: int, unit_size: int,
             findings: list[Finding] | None) -> Iterator[tuple[int, bytes]]:
    """(position, bytes) of whole units of a file, window by window, over [start, end)
    (start on a unit boundary); stops early at the file's end. When the OS refuses, a
    reader gets a finding and the windows stop; without ``findings`` (a writer finding
    its place) StoreAccessError is raised."""
    window = WINDOW_UNITS * unit_size
    try:
        fd = os.open(seg.path, os.O_RDONLY)
    except OSError as exc:
        if findings is None:
            raise StoreAccessError(f"cannot open ({exc.strerror})", seg.path) from None
        findings.append(Finding(SEGMENT_UNREADABLE, str(seg.path), None, f"cannot read ({exc.strerror})"))
        return
    try:
        position = start
        while position + unit_size <= end:
            want = min(window, end - position)
            try:
                data = os.pread(fd, want - want % unit_size, position)
            except OSError as exc:
                if findings is None:
                    raise StoreAccessError(f"cannot read ({exc.strerror})", seg.path, position) from None
                findings.append(Finding(SEGMENT_UNREADABLE, str(seg.path), position,
                                        f"cannot read ({exc.strerror})"))
                return
            whole = len(data) - len(data) % unit_size
            if whole:
                yield position, data if whole == len(data) else data[:whole]
            if whole < want - want % unit_size:
                return  # the file ended
            position += whole
    finally:
        os.close(fd)


def _first_nonzero(seg: Segment, start: int, end: int, findings: list[Finding]) -> int | None:
    """Position of the first non-zero byte of a file in [start, end), None when all are zero:
    the commit log's check (holes skipped unread, data compared with zeros a window at a
    time), a file the OS refuses becoming a finding."""
    from rmqtool.store.commitlog_end import all_zero_from  # it reads commit logs: imported when used
    try:
        first = all_zero_from(seg.path, start)
    except StoreAccessError as exc:
        findings.append(Finding(SEGMENT_UNREADABLE, str(seg.path), exc.offset, exc.message))
        return None
    return first if first is not None and first < end else None


class _UnitQueue:
    """What plain and batch queues share: segments, the broker's end-of-data rule, findings."""

    unit_size: int
    unit_struct: struct.Struct
    is_batch: bool

    def __init__(self, directory: str | os.PathLike, topic: str, queue_id: int,
                 mapped_file_size: int | None = None, commit_log_max_offset: int | None = None):
        self.directory = pathlib.Path(directory)
        self.topic = topic
        self.queue_id = queue_id
        queue = discover(self.directory, mapped_file_size=mapped_file_size)
        if mapped_file_size is None and queue.segments:
            # Queue files are created at full size, so the commonest file size is the mapped
            # file size; name steps mislead when a file is missing.
            common = collections.Counter(seg.size for seg in queue.segments).most_common(1)[0][0]
            if common != queue.mapped_file_size and common and common % self.unit_size == 0:
                queue = discover(self.directory, mapped_file_size=common)
        self.segments: list[Segment] = queue.segments
        self.mapped_file_size: int | None = queue.mapped_file_size
        self.findings: list[Finding] = list(queue.findings)
        self._reported: set[tuple[str, str]] = set()
        for seg in self.segments:
            if seg.base_offset % self.unit_size:
                self._report(CONSUME_QUEUE_FILE_MISALIGNED, str(seg.path), None,
                             f"name {seg.base_offset} is not a multiple of the unit size {self.unit_size}")
            if seg.size % self.unit_size:
                self._report(RECORD_TRUNCATED, str(seg.path), seg.size - seg.size % self.unit_size,
                             f"file ends {seg.size % self.unit_size} bytes into a unit")
        mapped = self.mapped_file_size or max((s.size for s in self.segments), default=0)
        qe = find_queue_end(self.segments, mapped, commit_log_max_offset, layout=self.layout,
                            findings=self.findings)
        self.recovered_end = qe.written_end  # queue byte offset one past the written data
        self.end = qe.end
        if qe.stopped_at is not None:
            seg = qe.stopped_at
            self._check_after_end(seg, qe.written_end - seg.base_offset, self._whole_units(seg.size),
                                  stopped_here=True)
            for later in self.segments[self.segments.index(seg) + 1:]:
                self._check_after_end(later, 0, later.size - later.size % self.unit_size, stopped_here=False)
        if qe.units_cut:
            seg = next((s for s in reversed(self.segments) if s.base_offset <= qe.end), self.segments[0])
            self._report(CONSUME_QUEUE_BEYOND_COMMIT_LOG, str(seg.path), qe.end - seg.base_offset,
                         f"{qe.units_cut} units at or past commit log offset {commit_log_max_offset}; "
                         f"the broker drops them on load")

    def _report(self, finding_id: str, path: str, offset: int | None, message: str):
        if (finding_id, path) not in self._reported:  # once per file and kind
            self._reported.add((finding_id, path))
            self.findings.append(Finding(finding_id, path, offset, message))

    def _whole_units(self, size: int) -> int:
        """Bytes of whole units the broker would scan in a file of this size."""
        limit = size - size % self.unit_size
        return min(limit, self.mapped_file_size) if self.mapped_file_size else limit

    def _windows(self, seg: Segment, start: int, end: int) -> Iterator[tuple[int, bytes]]:
        return _windows(seg, start, min(end, seg.size), self.unit_size, self.findings)

    def _check_after_end(self, seg: Segment, pos: int, limit: int, stopped_here: bool):
        """Whole units in [pos, limit) of a file, past the end of the written data, should all
        be zero. stopped_here: the unit at pos is the one recovery stopped at (else the whole
        file is past the end)."""
        first = _first_nonzero(seg, pos, limit, self.findings)
        if first is None:
            return
        first -= (first - pos) % self.unit_size
        if first == pos and stopped_here:
            self._report(CONSUME_QUEUE_UNIT_INVALID, str(seg.path), pos,
                         "the unit where the broker's recovery stops is not all zeros")
        else:
            self._report(TRAILING_GARBAGE, str(seg.path), first,
                         "written units after the end of the queue (the broker drops them on load)")

    def _chunks(self, start_byte: int, end_byte: int) -> Iterator[tuple[Segment, int, bytes]]:
        """(segment, position, bytes) for the whole units of each file that overlap queue
        bytes [start_byte, end_byte), a window at a time; position is where the bytes start
        within the file."""
        for seg in self.segments:
            if seg.base_offset + seg.size <= start_byte or seg.base_offset >= end_byte:
                continue
            lo = max(start_byte - seg.base_offset, 0)
            lo -= lo % self.unit_size
            hi = min(end_byte - seg.base_offset, seg.size)
            for position, data in self._windows(seg, lo, hi):
                yield seg, position, data

    def _first_file_limit(self) -> int:
        """Queue byte offset where the first file's readable units end (its read position)."""
        first = self.segments[0]
        return min(first.base_offset + first.size, self.end)


class ConsumeQueue(_UnitQueue):
    """One queue of ``consumequeue/``: 20-byte units, queue offset = byte offset / 20."""

    unit_size = CQ_STORE_UNIT_SIZE
    unit_struct = CQ_UNIT
    layout = CQ_LAYOUT
    is_batch = False

    def __init__(self, directory: str | os.PathLike, topic: str, queue_id: int,
                 mapped_file_size: int | None = None, commit_log_max_offset: int | None = None):
        self._min_offset: int | None = None
        super().__init__(directory, topic, queue_id, mapped_file_size, commit_log_max_offset)

    @property
    def max_offset(self) -> int:
        """getMaxOffsetInQueue after load: one past the last written unit."""
        return self.end // self.unit_size

    def min_offset(self, commit_log_min_offset: int = 0) -> int:
        """correctMinOffset: the first unit of the first file whose commitLogOffset is at or
        past the commit log's min offset. When the first file has none (its messages are all
        gone: commit log files removed before the queue's cleanup ran), the first such unit
        of a later file: the broker's load keeps 0 then, and its first CleanConsumeQueueService
        run deletes the files before it and corrects the min to it (deleteExpiredFile), and
        a pull of an offset below skips to it. None anywhere: max_offset, nothing readable."""
        if commit_log_min_offset == 0 and self._min_offset is not None:
            return self._min_offset
        result = self.max_offset
        if self.segments:
            first = self.segments[0]
            for seg, lo, data in self._chunks(first.base_offset, self.end):
                found = next((i for i, fields in enumerate(CQ_UNIT.iter_unpack(data))
                              if fields[0] >= commit_log_min_offset), None)
                if found is not None:
                    result = (seg.base_offset + lo) // self.unit_size + found
                    break
        if commit_log_min_offset == 0:
            self._min_offset = result
        return result

    def _unit(self, seg: Segment, position: int, fields: tuple) -> ConsumeQueueUnit | None:
        commit_log_offset, size, tags_code = fields
        if not is_written_unit(commit_log_offset, size):
            if commit_log_offset == 0 and size == 0 and tags_code == 0:
                self._report(CONSUME_QUEUE_HOLE, str(seg.path), position,
                             "unwritten units before the end of the queue")
            else:
                self._report(CONSUME_QUEUE_UNIT_INVALID, str(seg.path), position,
                             f"unit with commitLogOffset {commit_log_offset}, size {size}")
            return None
        return ConsumeQueueUnit(self.topic, self.queue_id, (seg.base_offset + position) // self.unit_size,
                                commit_log_offset, size, tags_code,
                                is_fill_unit(commit_log_offset, size, tags_code), str(seg.path), position)

    def iter_units(self, start: int | None = None, end: int | None = None, *,
                   invalid: bool = False) -> Iterator[ConsumeQueueUnit]:
        """Units for queue offsets [start, end), by default [min_offset(), max_offset).
        Unwritten or invalid units inside the range are skipped and reported (``invalid``:
        yielded too, as stored, for a dump to show)."""
        start = self.min_offset() if start is None else max(start, 0)
        end = self.max_offset if end is None else min(end, self.max_offset)
        for seg, position, data in self._chunks(start * self.unit_size, end * self.unit_size):
            for fields in CQ_UNIT.iter_unpack(data):
                unit = self._unit(seg, position, fields)
                if unit is not None:
                    yield unit
                elif invalid:
                    yield ConsumeQueueUnit(self.topic, self.queue_id, (seg.base_offset + position) // self.unit_size,
                                           *fields, False, str(seg.path), position)
                position += self.unit_size

    def get(self, queue_offset: int) -> ConsumeQueueUnit | None:
        """The unit at a queue offset within [min_offset(), max_offset), else None."""
        if not self.min_offset() <= queue_offset < self.max_offset:
            return None
        return next(self.iter_units(queue_offset, queue_offset + 1), None)


class BatchConsumeQueue(_UnitQueue):
    """One queue of ``batchconsumequeue/`` (5.x): 46-byte units, each covering a batch of offsets."""

    unit_size = BATCH_CQ_STORE_UNIT_SIZE
    unit_struct = BATCH_CQ_UNIT
    layout = BATCH_CQ_LAYOUT
    is_batch = True

    def _unit(self, seg: Segment, position: int, fields: tuple) -> BatchConsumeQueueUnit:
        commit_log_offset, size, tags_code, store_timestamp, base, batch_size, compacted, _ = fields
        return BatchConsumeQueueUnit(self.topic, self.queue_id, base, commit_log_offset, size, tags_code,
                                     store_timestamp, base, batch_size, compacted, str(seg.path), position)

    def _units_between(self, start_byte: int, end_byte: int) -> Iterator[BatchConsumeQueueUnit]:
        for seg, position, data in self._chunks(start_byte, end_byte):
            for fields in BATCH_CQ_UNIT.iter_unpack(data):
                if self.layout.is_written(fields):
                    yield self._unit(seg, position, fields)
                else:
                    kind = CONSUME_QUEUE_HOLE if not any(fields[:6]) else CONSUME_QUEUE_UNIT_INVALID
                    self._report(kind, str(seg.path), position, "a batch unit the broker would not read")
                position += self.unit_size

    @functools.cached_property
    def max_offset(self) -> int:
        """reviseMaxOffsetInQueue: the last unit's msgBaseOffset + batchSize (0 when empty)."""
        if self.end <= (self.segments[0].base_offset if self.segments else 0):
            return 0
        last = next(self._units_between(self.end - self.unit_size, self.end), None)
        return last.msg_base_offset + last.batch_size if last else 0

    def min_offset(self, commit_log_min_offset: int = 0) -> int:
        """reviseMinOffsetInQueue / correctMinOffset: the first file's first msgBaseOffset,
        moved past each batch that lies before the commit log's min offset (max_offset
        when the queue is empty; the broker says -1)."""
        minimum = None
        if self.segments:
            first = self.segments[0].base_offset
            for unit in self._units_between(first, self._first_file_limit()):
                if minimum is None:
                    minimum = unit.msg_base_offset
                if unit.commit_log_offset >= commit_log_min_offset:
                    break
                minimum = unit.msg_base_offset + unit.batch_size
        return self.max_offset if minimum is None else minimum

    def iter_units(self, start: int | None = None, end: int | None = None) -> Iterator[BatchConsumeQueueUnit]:
        """Units whose batch overlaps queue offsets [start, end) (default: all), checking
        that each msgBaseOffset follows the one before."""
        if not self.segments:
            return
        previous = None
        for unit in self._units_between(self.segments[0].base_offset, self.end):
            if previous is not None and unit.msg_base_offset != previous.msg_base_offset + previous.batch_size:
                self._report(BATCH_CONSUME_QUEUE_OFFSET_GAP, unit.path, unit.position,
                             f"msgBaseOffset {unit.msg_base_offset} after a batch ending at "
                             f"{previous.msg_base_offset + previous.batch_size}")
            previous = unit
            if start is not None and unit.msg_base_offset + unit.batch_size <= start:
                continue
            if end is not None and unit.msg_base_offset >= end:
                return
            yield unit

    def get(self, queue_offset: int) -> BatchConsumeQueueUnit | None:
        """The unit whose batch holds a queue offset (BatchConsumeQueue.get): a binary
        search over msgBaseOffset, as the broker does."""
        if not self.segments or not 0 <= queue_offset < self.max_offset:
            return None
        lo, hi = self.segments[0].base_offset // self.unit_size, self.end // self.unit_size - 1
        found = batch_holding(queue_offset, lo, hi,
                              lambda i: next(self._units_between(i * self.unit_size, (i + 1) * self.unit_size), None))
        return found[1] if found is not None else None


def batch_holding(queue_offset: int, lo: int, hi: int, unit_at) -> tuple[int, object] | None:
    """(index, unit) of the batch unit among indices [lo, hi] whose batch holds ``queue_offset``:
    the last whose msgBaseOffset is at or before it (a binary search, as BatchConsumeQueue.get
    does), if its batchSize reaches the offset. ``unit_at(index)``: the unit, or None for a hole
    (the offsets are not sorted there: not found)."""
    found = None
    while lo <= hi:
        mid = (lo + hi) // 2
        unit = unit_at(mid)
        if unit is None:
            return None
        if unit.msg_base_offset <= queue_offset:
            found, lo = (mid, unit), mid + 1
        else:
            hi = mid - 1
    if found is not None and queue_offset < found[1].msg_base_offset + found[1].batch_size:
        return found
    return None


AnyConsumeQueue = Union[ConsumeQueue, BatchConsumeQueue]

_QUEUE_ID_NAME = re.compile(r"[+-]?[0-9]+")


def queue_id_of(name: str) -> int | None:
    """The queue id a queue directory's name gives, as the broker's load reads it
    (Integer.parseInt, ASCII digits here); None for a name the broker skips."""
    if not _QUEUE_ID_NAME.fullmatch(name):
        return None
    queue_id = int(name)
    return queue_id if -(1 << 31) <= queue_id < (1 << 31) else None


@dataclasses.dataclass(slots=True)
class ConsumeQueues:
    """Every queue of a store: plain ones first, then batch ones, each sorted by topic and id."""
    queues: list[AnyConsumeQueue]
    findings: list[Finding]

    def find(self, topic: str, queue_id: int, batch: bool | None = None) -> AnyConsumeQueue | None:
        for queue in self.queues:
            if queue.topic == topic and queue.queue_id == queue_id and batch in (None, queue.is_batch):
                return queue
        return None

    def all_findings(self) -> list[Finding]:
        return self.findings + [f for q in self.queues for f in q.findings]


def queue_directories(base: pathlib.Path, findings: list[Finding] | None = None) -> list[tuple[str, int, pathlib.Path]]:
    """(topic, queue id, directory) of every ``base/TOPIC/QUEUEID/``, sorted by name, as the
    broker's loadConsumeQueue walks them; entries it skips go to ``findings`` (when given),
    except a RocksDB consume queue's files (``store/rocksdb_cq.py`` reads them)."""
    out = []
    if not base.is_dir():
        return out
    rocksdb = is_rocksdb_dir(base)  # a RocksDB consume queue keeps its files flat in consumequeue/ (5.x)
    for topic_entry in list_dir(base):
        if not topic_entry.is_dir():
            if findings is not None and not (rocksdb and is_rocksdb_file(topic_entry.name)):
                findings.append(Finding(QUEUE_DIR_INVALID, topic_entry.path, None, "not a topic directory; ignored"))
            continue
        for queue_entry in list_dir(pathlib.Path(topic_entry.path)):
            queue_id = queue_id_of(queue_entry.name)
            if queue_id is None or not queue_entry.is_dir():
                if findings is not None:
                    findings.append(Finding(QUEUE_DIR_INVALID, queue_entry.path, None,
                                            "not a queue id directory; ignored"))
                continue
            out.append((topic_entry.name, queue_id, pathlib.Path(queue_entry.path)))
    return out


def first_queue_files(base: pathlib.Path) -> Iterator[tuple[int, str, int | None]]:
    """(size, path, the distance from its name to the next file's, None when no file follows
    it) of each queue's first file under ``base`` that has a size: an empty file shows none
    (4.9.8's load refuses it, 5.3.3's deletes it when it sorts last)."""
    for _topic, _queue_id, directory in queue_directories(base):
        files = [e for e in list_dir(directory) if is_segment_name(e.name) and e.is_file()]
        for i, e in enumerate(files):
            if e.stat().st_size:
                step = int(files[i + 1].name) - int(e.name) if i + 1 < len(files) else None
                yield e.stat().st_size, e.path, step
                break


@dataclasses.dataclass(frozen=True)
class QueueFileSize:
    """The mapped file size a store's queues of one kind show (:func:`queue_file_size_shown`)."""
    size: int | None  # None: no file shows one, or those that speak disagree
    path: str | None = None  # a file that shows it
    disagreement: str | None = None  # the sizes of the files that disagree, and a file of each


def queue_file_size_shown(base: pathlib.Path, unit_size: int = 1) -> QueueFileSize:
    """The one mapped file size every queue under ``base`` (consumequeue/ or batchconsumequeue/)
    is loaded with, as the queues' first files show it. A file is named by the queue offset
    in bytes it starts at (fileFromOffset), so a first file with a later one after it shows
    the size twice: by its own size, and by the distance to the next name (the size, or a
    multiple of it with files missing between). Where the two agree they decide; where the
    file is shorter and the distance no multiple of its size, it was cut, and the names
    speak; only a distance that is a multiple of the file's size is ambiguous (files missing,
    or the file cut to a divisor), and its size speaks only when nothing above does. A
    queue's only file may have been cut short too, and speaks last. A size that is not a
    multiple of ``unit_size`` (the broker rounds the consume queue's) is a cut file's, never
    the setting. Where the files that speak disagree, the setting is not shown: a file of
    another size is one the load refuses."""
    agreed: dict = {}  # size == distance
    named: dict = {}  # the distance, where the file was cut
    ambiguous: dict = {}  # the file's size, where the distance is a multiple of it
    only: dict = {}  # a queue's only file's size
    for size, path, step in first_queue_files(base):
        if size % unit_size:
            if step is not None:
                named.setdefault(step, path)
        elif step is None:
            only.setdefault(size, path)
        elif step == size:
            agreed.setdefault(size, path)
        elif step % size:
            named.setdefault(step, path)
        else:
            ambiguous.setdefault(size, path)
    if agreed:
        return _one_size(agreed)
    if named:  # distances spanning missing files are multiples of the one that spans none
        least = min(named)
        return _one_size({least: named[least]} if all(n % least == 0 for n in named) else named)
    return _one_size(ambiguous or only)


def queue_sizes_disagree(paths) -> bool:
    """Whether the queue files of a kind show different sizes (``paths``: a StorePaths): the
    broker loads every queue of a kind with one setting, so its load refuses some of them."""
    return any(queue_file_size_shown(base, unit).disagreement is not None
               for base, unit in ((paths.consumequeue, CQ_STORE_UNIT_SIZE), (paths.batch_consumequeue, 1)))


def _one_size(sizes: dict) -> QueueFileSize:
    if len(sizes) > 1:
        return QueueFileSize(None, disagreement=", ".join(f"{n} bytes ({p})" for n, p in sorted(sizes.items())))
    if sizes:
        return QueueFileSize(*next(iter(sizes.items())))
    return QueueFileSize(None)


def open_consume_queues(store_root: str | os.PathLike, commit_log_max_offset: int | None = None) -> ConsumeQueues:
    """Discover consumequeue/TOPIC/QUEUEID and batchconsumequeue/TOPIC/QUEUEID under a store root.
    With the commit log's max offset, each queue ends where the broker's load would cut it."""
    root = pathlib.Path(store_root)
    if not root.exists():
        raise StoreNotFound("no such directory", root)
    if not root.is_dir():
        raise NotAStore("not a directory", root)
    queues: list[AnyConsumeQueue] = []
    findings: list[Finding] = []
    for dir_name, cls, unit in ((CONSUMEQUEUE_DIR, ConsumeQueue, CQ_STORE_UNIT_SIZE),
                                (BATCH_CONSUMEQUEUE_DIR, BatchConsumeQueue, 1)):
        # one setting for every queue of a kind (a file of another size is one the load refuses);
        # where the files do not show it, each queue as its own files show
        size = queue_file_size_shown(root / dir_name, unit).size
        for topic, queue_id, directory in queue_directories(root / dir_name, findings):
            queues.append(cls(directory, topic, queue_id, size, commit_log_max_offset=commit_log_max_offset))
    return ConsumeQueues(queues, findings)


_UNIT_HEAD = struct.Struct(">qi")  # commitLogOffset and size: the first fields of a unit, plain or batch
_NO_OFFSET = (1 << 63) - 1  # what an unwritten unit (size 0) sorts as: with the last offset there is


@dataclasses.dataclass(frozen=True)
class UnitFiles:
    """Every consume queue file of a store (5.x batch consume queues too), for the commit log
    offsets their units name: where records are said to start, the clean-record kernel's hints
    (store/record_kernel.hinted_chain). :meth:`between` reads only the units naming a range (a
    binary search in each file, whose units are in commit log order), so a band's hints cost
    that band's units, whatever the store's size. A file that cannot be read, or whose units
    are out of order, gives fewer: a missing hint costs only speed."""
    files: tuple  # (path, unit size, units the file holds)

    @classmethod
    def of(cls, paths) -> "UnitFiles":
        """The queue files under a StorePaths' consumequeue/ and batchconsumequeue/."""
        files = []
        for base, layout in ((paths.consumequeue, CQ_LAYOUT), (paths.batch_consumequeue, BATCH_CQ_LAYOUT)):
            for _topic, _queue_id, directory in queue_directories(pathlib.Path(base)):
                for seg in discover(directory, required=False).segments:
                    if seg.size >= layout.unit_size:
                        files.append((str(seg.path), layout.unit_size, seg.size // layout.unit_size))
        return cls(tuple(files))

    @property
    def units(self) -> int:
        """The units the files hold (what the whole log's hints would cost: 8 bytes each)."""
        return sum(count for _, _, count in self.files)

    def between(self, lo: int, hi: int) -> "np.ndarray":
        """The offsets in [lo, hi) the units name, sorted and unique (store/record_kernel.candidate_starts)."""
        import numpy as np  # loaded by the commands that walk the log

        from rmqtool.store.record_kernel import candidate_starts
        found = []
        for path, unit_size, count in self.files:
            try:
                with open(path, "rb", buffering=0) as f:
                    fd = f.fileno()
                    first = _first_unit_naming(fd, unit_size, count, lo)
                    n = _first_unit_naming(fd, unit_size, count, hi, first) - first
                    data = os.pread(fd, n * unit_size, first * unit_size) if n > 0 else b""
            except OSError:
                continue
            n = len(data) // unit_size
            if n:  # the offsets alone, 8 bytes a unit kept
                found.append(np.ndarray((n,), ">i8", data, 0, (unit_size,)).astype(np.int64))
        out = candidate_starts(found)
        if len(out) and (out[0] < lo or out[-1] >= hi):  # units out of order: only the range's
            out = out[(out >= lo) & (out < hi)]
        return out


def _first_unit_naming(fd: int, unit_size: int, count: int, offset: int, lo: int = 0) -> int:
    """The first unit from ``lo`` naming ``offset`` or past it (units in commit log order; an
    unwritten one names nothing, so it sorts last)."""
    hi = count
    while lo < hi:
        mid = (lo + hi) // 2
        head = os.pread(fd, _UNIT_HEAD.size, mid * unit_size)
        if len(head) < _UNIT_HEAD.size:
            hi = mid
            continue
        named, size = _UNIT_HEAD.unpack(head)
        if (named if size else _NO_OFFSET) < offset:
            lo = mid + 1
        else:
            hi = mid
    return lo


def unit_offsets(paths) -> "np.ndarray":
    """Every offset the units of every queue (``paths``: a StorePaths) name, sorted and unique
    (:class:`UnitFiles`, the whole log's range)."""
    return UnitFiles.of(paths).between(0, _NO_OFFSET)


# --- where a queue's valid units end: readers, the writer's load and the recovery plan ---------

@dataclasses.dataclass(slots=True, frozen=True)
class QueueEnd:
    """Where a consume queue's units end, as the broker's load finds it."""
    written_end: int  # queue byte offset one past the last written unit (ConsumeQueue.recover)
    end: int  # written_end cut at the first unit pointing at or past the commit log offset
    max_physic_offset: int  # commitLogOffset + size of the last unit before end that is not a fill; -1: none
    end_segment: Segment | None  # the file end lies in (at position 0 for a file starting there); None:
    # end is where the last file kept ends, or there is none
    segments_after: tuple[Segment, ...]  # files after end and files cut whole: the broker deletes them
    stopped_at: Segment | None = None  # the file whose unwritten unit (or short length) ended the data
    unit_size: int = CQ_STORE_UNIT_SIZE

    @property
    def units_cut(self) -> int:
        """Units dropped because they point at or past the commit log offset."""
        return (self.written_end - self.end) // self.unit_size


def _first_unit(seg: Segment, stop: int, test, layout: UnitLayout, findings) -> int | None:
    """Position of the first unit in [0, stop) for which ``test(columns)`` holds, a window
    of units at a time."""
    import numpy as np
    size = layout.unit_size
    for pos, data in _windows(seg, 0, stop, size, findings):
        hits = np.flatnonzero(test(columns(np.frombuffer(data, layout.dtype))))
        if hits.size:
            return pos + int(hits[0]) * size
    return None


def _last_physic_offset(segments: list[Segment], end: int, layout: UnitLayout, findings) -> int:
    """commitLogOffset + size of the last unit before queue byte ``end`` that is not a fill."""
    import numpy as np
    size = layout.unit_size
    step = WINDOW_UNITS * size
    for seg in reversed([s for s in segments if s.base_offset < end]):
        hi = min(end - seg.base_offset, seg.size - seg.size % size)
        while hi > 0:
            lo = max(hi - step, 0)
            for _pos, data in _windows(seg, lo, hi, size, findings):
                units = np.frombuffer(data, layout.dtype)
                kept = np.flatnonzero(~layout.is_fill(columns(units))) if layout.is_fill else np.arange(len(units))
                if kept.size:
                    fields = units[int(kept[-1])]
                    return int(fields[0]) + int(fields[1])
            hi = lo
    return -1


def batch_unit_before(segments: list[Segment], end: int) -> tuple | None:
    """The fields (BatchCqUnit order) of the batch consume queue unit that ends at queue
    byte ``end`` (the last one a find_queue_end keeps: its msgBaseOffset + batchSize is the
    queue's max offset, its commitLogOffset the queue's maxMsgPhyOffsetInCommitLog); None
    when there is none."""
    at = end - BATCH_CQ_STORE_UNIT_SIZE
    holder = next((s for s in reversed(segments) if s.base_offset <= at), None)
    if holder is None:
        return None
    try:
        with open(holder.path, "rb") as f:
            f.seek(at - holder.base_offset)
            raw = f.read(BATCH_CQ_STORE_UNIT_SIZE)
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", holder.path) from None
    if len(raw) < BATCH_CQ_STORE_UNIT_SIZE:
        return None
    return BATCH_CQ_UNIT.unpack(raw)


def find_queue_end(segments: list[Segment], mapped_file_size: int, commit_log_max_offset: int | None = None,
                   *, layout: UnitLayout = CQ_LAYOUT, findings: list | None = None,
                   walk_from: int | None = None) -> QueueEnd:
    """Where a consume queue's valid units end, and where the broker's load cuts them.

    ConsumeQueue.recover: from the third-last file on, up to the first unit that is not
    written (commitLogOffset < 0 or size <= 0); a file shorter than ``mapped_file_size``
    ends the data too. Then, given the commit log's max offset, truncateDirtyLogicFiles:
    the first unit pointing at or past it and everything after go (a file whose first unit
    does is dropped whole). Reads a window of units at a time. With ``findings`` (a
    reader) a file the OS refuses becomes a finding; without, StoreAccessError. ``walk_from``:
    the base offset of the file to walk from instead of the third-last (the one a recovery
    already applied walked from; the last file at or before it, once recovery deleted it).
    """
    size = layout.unit_size
    if not segments:
        return QueueEnd(0, 0, -1, None, (), None, size)
    first = max(len(segments) - 3, 0)
    if walk_from is not None:
        first = max((i for i, s in enumerate(segments) if s.base_offset <= walk_from), default=0)
    written_end = segments[first].base_offset
    stopped_at = None
    not_written = lambda fields: ~layout.is_written(fields)  # noqa: E731
    for seg in segments[first:]:
        limit = min(seg.size - seg.size % size, mapped_file_size)
        stop = _first_unit(seg, limit, not_written, layout, findings)
        written_end = seg.base_offset + (limit if stop is None else stop)
        if stop is not None or limit < mapped_file_size:
            stopped_at = seg
            break
    end = written_end
    dropped_from = None  # the first of the files cut whole: the broker deletes them (deleteLastMappedFile)
    if commit_log_max_offset is not None:
        past = lambda fields: fields[0] >= commit_log_max_offset  # noqa: E731
        for seg in reversed([s for s in segments if s.base_offset < written_end]):
            cut = _first_unit(seg, min(written_end - seg.base_offset, mapped_file_size), past, layout, findings)
            if cut is None:
                break
            end = seg.base_offset + cut
            if cut:
                break
            dropped_from = seg.base_offset
    after = tuple(s for s in segments
                  if s.base_offset > end or (dropped_from is not None and s.base_offset >= dropped_from))
    end_segment = next((s for s in reversed(segments) if s not in after
                        and s.base_offset <= end < s.base_offset + mapped_file_size), None)
    return QueueEnd(written_end, end, _last_physic_offset(segments, end, layout, findings), end_segment, after,
                    stopped_at, size)
