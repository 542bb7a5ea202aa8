"""One consume queue as the broker's load, recovery and dispatch change it, in memory.

A literal model of 4.9.8/5.3.3 ConsumeQueue: ``recover`` (from the third-last file, up to
the first unit not written), ``truncate_dirty_logic_files`` (units at or past the commit
log's end go; a last file whose first unit does goes whole; note that an all-zero last file
keeps one zero unit, as the broker's loop does), ``put`` (putMessagePositionInfo: a record
at or below maxPhysicOffset is skipped as built already, a queue offset below the write
position too; a queue created by the put is filled with blank units up to the first one,
and a gap is written at the write position all the same, as the broker logs '[BUG]' and
does) and ``correct_min_offset`` (4.9.8: the first unit of the first file pointing at or
past the commit log's min offset; 5.3.3 first keeps a min offset that still holds).

Files are read on first use only (the last three, the first), and never written: the
model is what a plan predicts, the engine writes.
"""
from __future__ import annotations

import struct
from collections import namedtuple
from typing import NamedTuple

import numpy as np

from rmqtool.errors import StoreAccessError
from rmqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE, CqUnit, is_written_unit, names_a_message
from rmqtool.formats.derive import field_names
from rmqtool.recovery.commitlog_walk import V5
from rmqtool.store.commitlog_end import last_nonzero_from
from rmqtool.store.consumequeue import CQ_LAYOUT
from rmqtool.store.paths import first_file_unnameable
from rmqtool.store.segments import Segment

UNIT = struct.Struct(">qiq")  # commitLogOffset, size, tagsCode
BLANK_UNIT = UNIT.pack(0, 0x7FFFFFFF, 0)  # fillPreBlank
assert UNIT.size == CQ_STORE_UNIT_SIZE




def truncate_dirty_files(files: list, file_size: int, offset: int) -> list:
    """MappedFileQueue.truncateDirtyFiles over files that know their ``base`` and ``wrote``
    (a consume queue's, its ext's): the file holding ``offset`` ends there, later ones go."""
    kept = []
    for f in files:
        if f.base + file_size > offset:
            if offset >= f.base:
                f.wrote = offset % file_size
                kept.append(f)
            # else: destroyed
        else:
            kept.append(f)
    return kept

class ServedUnits(NamedTuple):
    """The units a consumer reaches through a queue (QueueModel.units), as columns."""
    queue_offsets: np.ndarray
    commit_log_offsets: np.ndarray

class QueueFile:
    """One mapped file of the queue: its bytes (read when first needed) and write position.

    Only the bytes up to one unit past the last non-zero one are held (the rest of the file
    is zeros, and a queue file made ahead holds a few units in its 6 MB); a file the model
    has not written to is let go after each step and read again when needed, so a store of
    thousands of queues costs the units it holds, not its files' sizes."""

    unit_size = CQ_STORE_UNIT_SIZE
    unit_struct = UNIT
    unit_fields = namedtuple("CqUnitFields", field_names(CqUnit))  # what unit() gives, by name

    def __init__(self, base: int, size: int, segment: Segment | None):
        self.base = base
        self.size = size
        self.segment = segment  # None: made by a put in the model
        self._data: bytearray | None = None if segment is not None else bytearray()
        self._held = None  # how many bytes of the file are read when it is (found once: it is only read)
        self.dirty = segment is None  # written by the model: its bytes are the model's only copy
        self.wrote = size if segment is not None else 0  # load sets every position to the file size
        self.first_create = False

    @property
    def data(self) -> bytearray:
        if self._data is None:
            end = self._held
            if end is None:
                us = self.unit_size
                end = last_nonzero_from(self.segment.path) or 0
                end = self._held = min(self.size, -(-end // us) * us + us)  # and one zero unit: where the loops stop
            try:
                with open(self.segment.path, "rb") as f:
                    raw = f.read(end)
            except OSError as exc:
                raise StoreAccessError(f"cannot read ({exc.strerror})", self.segment.path) from None
            self._data = bytearray(raw.ljust(end, b"\0"))
        return self._data

    def writable(self, end: int) -> bytearray:
        """The bytes, at least ``end`` of them, to be written by the model."""
        data = self.data
        if len(data) < end:
            data.extend(bytes(end - len(data)))
        self.dirty = True
        return data

    def release(self) -> None:
        if not self.dirty:
            self._data = None

    def unit(self, i: int) -> tuple:
        """The unit at byte ``i``, its fields by name (past the bytes held: zeros)."""
        data = self.data
        if i + self.unit_size > len(data):
            return self.unit_fields._make(self.unit_struct.unpack(bytes(self.unit_size)))
        return self.unit_fields._make(self.unit_struct.unpack_from(data, i))

    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """(commitLogOffset, size) of every unit held, views of the bytes (the loops below run
        on them a file at a time: a queue file holds 300,000 units)."""
        data = self.data
        units = np.frombuffer(data, CQ_LAYOUT.dtype, count=len(data) // CQ_STORE_UNIT_SIZE)
        return units["commit_log_offset"], units["size"]


class QueueFiles:
    """What ConsumeQueue and 5.x BatchConsumeQueue share: the queue's files as its
    MappedFileQueue holds them, recover's walk from the third-last file (a subclass says
    which units are written and what the last one reaches), truncateDirtyFiles, and the
    files' bytes let go after each step."""

    file_type = QueueFile
    unit_size = CQ_STORE_UNIT_SIZE

    def __init__(self, topic: str, queue_id: int, segments: list[Segment], file_size: int):
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.files = [self.file_type(s.base_offset, file_size, s) for s in segments]
        self.on_disk = list(segments)  # the files as loaded (recovery may drop some)
        self.loaded_bases = [s.base_offset for s in segments]
        self.max_physic_offset = -1
        self.units_added = 0

    def release(self) -> None:
        """Let go of the bytes of files the model has not written (read again when needed)."""
        for f in self.files:
            f.release()

    def _written(self, f: QueueFile) -> np.ndarray:
        raise NotImplementedError

    def _reach(self, f: QueueFile, n: int) -> int:
        """maxPhysicOffset after the file's first ``n`` units."""
        raise NotImplementedError

    # ---- recover ------------------------------------------------------------------------------
    def recover(self) -> None:
        try:
            self._recover()
        finally:
            self.release()

    def _recover(self) -> None:
        if not self.files:
            return
        index = max(len(self.files) - 3, 0)
        f = self.files[index]
        process = f.base
        position = 0
        while True:
            written = self._written(f)
            stop = np.flatnonzero(~written)  # the loop's break
            n = int(stop[0]) if stop.size else len(written)
            if n:
                position = n * self.unit_size
                self.max_physic_offset = self._reach(f, n)
            if position == self.file_size:
                index += 1
                if index >= len(self.files):
                    break
                f = self.files[index]
                process = f.base
                position = 0
            else:
                break
        self._truncate_dirty_files(process + position)
        self._recovered()

    def _recovered(self) -> None:
        """What the queue works out once its files are recovered."""

    def _truncate_dirty_files(self, offset: int) -> None:
        self.files = truncate_dirty_files(self.files, self.file_size, offset)

    # ---- truncateDirtyLogicFiles, correctMinOffset ----------------------------------------------
    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        try:
            self._truncate_dirty_logic_files(phy_offset)
        finally:
            self.release()

    def _truncate_dirty_logic_files(self, phy_offset: int) -> None:
        raise NotImplementedError

    def correct_min_offset(self, min_phy_offset: int, semantics: str) -> None:
        try:
            self._correct_min_offset(min_phy_offset, semantics)
        finally:
            self.release()

    def _correct_min_offset(self, min_phy_offset: int, semantics: str) -> None:
        raise NotImplementedError

    def deleted_files(self) -> list[int]:
        """Bases of the files on disk that the model no longer has."""
        now = {f.base for f in self.files}
        return [b for b in self.loaded_bases if b not in now]


class QueueModel(QueueFiles):
    batch = False  # a ConsumeQueue (batch_queue_model: a BatchConsumeQueue)

    def __init__(self, topic: str, queue_id: int, segments: list[Segment], file_size: int):
        super().__init__(topic, queue_id, segments, file_size)
        self.min_logic_offset = 0
        # queue offsets a put jumped over ('[BUG]logic queue order maybe wrong'): (first, end) queue
        # offsets and the commit log offsets [after, before) their records lie between
        self.skipped: list[tuple[int, int, int, int]] = []
        # (commit log offset, queue offset) of a record whose queue offset makes the queue's first
        # file at no offset rmqtool names as the broker does (first_file_unnameable)
        self.unnameable: tuple[int, int] | None = None

    def _written(self, f: QueueFile) -> np.ndarray:
        offsets, sizes = f.columns()
        return is_written_unit(offsets, sizes)

    def _reach(self, f: QueueFile, n: int) -> int:
        offsets, sizes = f.columns()
        return int(offsets[n - 1]) + int(sizes[n - 1])

    # ---- ConsumeQueue.truncateDirtyLogicFiles -----------------------------------------------
    def _truncate_dirty_logic_files(self, phy_offset: int) -> None:
        self.max_physic_offset = phy_offset
        while self.files:
            f = self.files[-1]
            f.wrote = 0
            offsets, sizes = f.columns()
            if not len(offsets):
                return
            if offsets[0] >= phy_offset:  # the first unit is not tested for being written
                self.files.pop()
                continue
            # from the second unit on: an unwritten one, or one at or past the end, stops it
            stop = np.flatnonzero(~is_written_unit(offsets[1:], sizes[1:]) | (offsets[1:] >= phy_offset))
            n = int(stop[0]) + 1 if stop.size else len(offsets)
            f.wrote = n * CQ_STORE_UNIT_SIZE
            self.max_physic_offset = int(offsets[n - 1]) + int(sizes[n - 1])
            return

    # ---- ConsumeQueue.putMessagePositionInfo ------------------------------------------------
    def put(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """False when the unit is skipped as built already."""
        if offset + size <= self.max_physic_offset:
            return False
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        if not self.files and first_file_unnameable(expect):
            if self.unnameable is None:
                self.unnameable = (offset, cq_offset)
            return False
        f = self._last_file(expect)
        if f.first_create and cq_offset != 0 and f.wrote == 0:
            self.min_logic_offset = expect
            until = expect % self.file_size
            f.writable(until)[0:until] = BLANK_UNIT * (until // CQ_STORE_UNIT_SIZE)
            f.wrote = until
        if cq_offset != 0 and expect < f.base + f.wrote:
            return False
        if cq_offset != 0 and expect > f.base + f.wrote:  # written at the write position all the same
            self.skipped.append(((f.base + f.wrote) // CQ_STORE_UNIT_SIZE, cq_offset, max(self.max_physic_offset, 0),
                                 offset))
        self.max_physic_offset = offset + size
        if f.wrote + CQ_STORE_UNIT_SIZE <= self.file_size:
            UNIT.pack_into(f.writable(f.wrote + CQ_STORE_UNIT_SIZE), f.wrote, offset, size, tags_code)
            f.wrote += CQ_STORE_UNIT_SIZE
            self.units_added += 1
        return True

    def _last_file(self, start: int) -> QueueFile:
        """getLastMappedFile(startOffset): the last file, or a new one after a full last file,
        or the file holding ``start`` when there is none (marked first created)."""
        if self.files and self.files[-1].wrote < self.file_size:
            return self.files[-1]
        if self.files:
            f = QueueFile(self.files[-1].base + self.file_size, self.file_size, None)
        else:
            f = QueueFile(start - start % self.file_size, self.file_size, None)
            f.first_create = True
        self.files.append(f)
        return f

    # ---- recoverTopicQueueTable's correctMinOffset -------------------------------------------
    def _correct_min_offset(self, min_phy_offset: int, semantics: str) -> None:
        if not self.files:
            return
        if semantics == V5:
            self._correct_min_offset_5(min_phy_offset)
            return
        first = self.files[0]
        offsets, _sizes = first.columns()
        hits = np.flatnonzero(offsets[:first.wrote // CQ_STORE_UNIT_SIZE] >= min_phy_offset)
        if hits.size:
            self.min_logic_offset = first.base + int(hits[0]) * CQ_STORE_UNIT_SIZE

    def _correct_min_offset_5(self, min_phy_offset: int) -> None:
        """5.3.3: keep a min offset that still holds, else a binary search of the first file
        (which, over fill units that all point at offset 0, lands on one in the middle)."""
        unit = CQ_STORE_UNIT_SIZE
        if self.min_logic_offset >= self.max_offset_bytes:
            return  # 'contains no valid entries'
        last = self.files[-1]
        if last.wrote >= unit and last.unit(last.wrote - unit).commit_log_offset < min_phy_offset:
            self.min_logic_offset = last.base + last.wrote
            return
        first = self.files[0]
        start = self.min_logic_offset - first.base
        intact = start >= 0
        start = max(start, 0)
        if start >= first.wrote:
            return  # selectMappedBuffer gives nothing: '[Bug]' logged, nothing changed
        size = first.wrote - start
        if intact and first.unit(start).commit_log_offset >= min_phy_offset:
            return
        low, high = 0, size - unit
        while high - low > unit:
            mid = (low + high) // 2 // unit * unit
            offset = first.unit(start + mid).commit_log_offset
            if offset > min_phy_offset:
                high = mid
            elif offset == min_phy_offset:
                low = high = mid
                break
            else:
                low = mid
        for i in range(low, high + 1, unit):
            if first.unit(start + i).commit_log_offset >= min_phy_offset:
                self.min_logic_offset = first.base + start + i
                return

    # ---- what the broker serves ---------------------------------------------------------------
    def units(self) -> ServedUnits:
        """(queue offset, commit log offset) of each unit from the queue's min offset to its max,
        fill units left out: the messages a consumer reaches through the queue."""
        qos, parts = [], []
        for f in self.files:
            offsets, sizes = f.columns()
            n = min(f.wrote // CQ_STORE_UNIT_SIZE, len(offsets))
            first = max(self.min_logic_offset - f.base, 0) // CQ_STORE_UNIT_SIZE
            if first < n:
                real = np.flatnonzero(names_a_message(offsets[first:n], sizes[first:n])) + first
                qos.append(f.base // CQ_STORE_UNIT_SIZE + real)
                parts.append(offsets[real].astype(np.int64))
            f.release()
        if not parts:
            return ServedUnits(np.zeros(0, np.int64), np.zeros(0, np.int64))
        return ServedUnits(np.concatenate(qos).astype(np.int64), np.concatenate(parts))

    # ---- what the broker reports ------------------------------------------------------------
    @property
    def max_offset_bytes(self) -> int:
        if not self.files:
            return 0
        return self.files[-1].base + self.files[-1].wrote

    @property
    def max_offset(self) -> int:
        """getMaxOffsetInQueue."""
        return self.max_offset_bytes // CQ_STORE_UNIT_SIZE

    @property
    def min_offset(self) -> int:
        """getMinOffsetInQueue."""
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE
