"""The timer log read: every file's units and its blank, and where each file's units end.

Each file is read as ``TimerMessageStore.recoverAndRevise`` (checkTimerLog) walks it: a
unit every 52 bytes from the file's start; a blank (magic BLANK_MAGIC_CODE) ends the file
and the log goes on in the next one; a unit whose size is not 52 or whose magic is not
``isMagicOK`` (a zeroed tail reads as size 0) ends the readable log there. Files are
decoded whole with numpy, so a million units read in well under a second.
"""
from __future__ import annotations

import bisect
import dataclasses
import os
import pathlib

import numpy as np

from rmqtool import native
from rmqtool.errors import StoreAccessError
from rmqtool.formats.timerlog import (BLANK_MAGIC_CODE, MIN_BLANK_LEN, UNIT_SIZE, UNIT_STRUCT, TimerLogBlank,
                                      is_magic_ok, magic_flags)
from rmqtool.formats.timerwheel import DEFAULT_TIMER_PRECISION_MS, SLOTS_TOTAL, slot_index
from rmqtool.store.segments import SegmentQueue, discover

UNIT_DTYPE = np.dtype([("size", ">i4"), ("prev_pos", ">i8"), ("magic", ">i4"), ("curr_write_time", ">i8"),
                       ("delayed_time", ">i4"), ("offset_py", ">i8"), ("size_py", ">i4"),
                       ("hash_code_of_real_topic", ">i4"), ("reserved", ">i8")])
assert UNIT_DTYPE.itemsize == UNIT_SIZE
# the columns of every readable unit: its position in the log, then the unit's fields
COLUMNS_DTYPE = np.dtype([("position", "<i8")] + [(n, UNIT_DTYPE[n].newbyteorder("<")) for n in UNIT_DTYPE.names])

# why a file's units end (TimerLogFile.end_reason)
END_BLANK = "blank"  # a blank: the log goes on in the next file
END_ZERO_UNIT = "zeroUnit"  # 52 zero bytes: nothing written from here (or zeroed)
END_BAD_UNIT = "badUnit"  # size != 52 or a bad magic: recover cuts the log here
END_PARTIAL_UNIT = "partialUnit"  # fewer than 52 bytes left and no blank
END_FILE_END = "fileEnd"  # units to the file's last byte
DAMAGED_ENDS = (END_BAD_UNIT, END_PARTIAL_UNIT)  # the units end on bytes that are no unit


@dataclasses.dataclass(frozen=True, slots=True)
class TimerLogUnit:
    position: int  # in the whole log (the file's start offset + the offset in the file)
    size: int
    prev_pos: int
    magic: int
    curr_write_time: int
    delayed_time: int  # relative to curr_write_time
    offset_py: int
    size_py: int
    hash_code_of_real_topic: int
    reserved: int

    @property
    def deliver_time_ms(self) -> int:
        """currWriteTime + delayedTime: the slot time the unit was put in."""
        return self.curr_write_time + self.delayed_time

    @property
    def magic_flags(self) -> list[str]:
        return magic_flags(self.magic)

    @property
    def is_magic_ok(self) -> bool:
        return is_magic_ok(self.magic)

    @property
    def readable(self) -> bool:
        """What recover accepts as a unit: size 52 and isMagicOK."""
        return self.size == UNIT_SIZE and is_magic_ok(self.magic)

    def slot_index(self, precision_ms: int = DEFAULT_TIMER_PRECISION_MS, slots: int = 2 * SLOTS_TOTAL) -> int:
        return slot_index(self.deliver_time_ms, precision_ms, slots)


@dataclasses.dataclass(frozen=True, slots=True)
class TimerLogBlankUnit:
    position: int
    size: int  # the bytes it fills: to the file's end
    prev_pos: int
    magic: int


@dataclasses.dataclass(frozen=True, slots=True)
class TimerLogFile:
    path: pathlib.Path
    base_offset: int  # from its name
    file_size: int  # on disk
    first_unit: int  # index of its first unit in TimerLog.columns
    unit_count: int
    end: int  # log position where its units end (a blank's, a bad unit's position, or the file's end)
    end_reason: str  # END_*
    non_zero_after_end: bool  # bytes after the end (after the blank, for a blank) that are not zero

    @property
    def name(self) -> str:
        return self.path.name


@dataclasses.dataclass(slots=True)
class TimerLog:
    directory: pathlib.Path
    queue: SegmentQueue  # the files, their mapped file size and findings about names and sizes
    files: list[TimerLogFile]
    columns: np.ndarray  # COLUMNS_DTYPE: every readable unit of every file, by position
    blanks: list[TimerLogBlankUnit]
    _cache: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @property
    def file_size(self) -> int | None:
        """mappedFileSizeTimerLog, from the files."""
        return self.queue.mapped_file_size

    @property
    def units(self) -> tuple[TimerLogUnit, ...]:
        """Every readable unit, in order (built once: verify walks them several times)."""
        if "units" not in self._cache:
            self._cache["units"] = tuple(TimerLogUnit(*row) for row in self.columns.tolist())
        return self._cache["units"]

    def damaged_files(self) -> list:
        """The files whose units end on bytes that are no unit, or stop before a later file
        without a blank: a file before the last always ends with one (TimerLog.append writes it
        when a unit and a blank's header no longer fit), anything else there is where the log
        was cut short."""
        last = self.files[-1] if self.files else None
        return [f for f in self.files if f.end_reason in DAMAGED_ENDS or (f is not last and f.end_reason != END_BLANK)]

    @property
    def readable_end(self) -> int:
        """Where the readable log ends, walked from the first file as recover walks from its
        start file: the end of the first file not ending on a blank (0 with no file)."""
        for f in self.files:
            if f.end_reason != END_BLANK:
                return f.end
        return self.files[-1].base_offset + (self.file_size or self.files[-1].file_size) if self.files else 0

    @property
    def end_reason(self) -> str | None:
        """Why the readable log ends there (END_*), None with no file."""
        for f in self.files:
            if f.end_reason != END_BLANK:
                return f.end_reason
        return self.files[-1].end_reason if self.files else None

    @property
    def log_end(self) -> int:
        """One past the last byte any timer log file can hold (its start + the file size)."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.base_offset + max(last.file_size, self.file_size or 0)

    def _file_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if "file_rows" not in self._cache:
            self._cache["file_rows"] = tuple(np.array(v, dtype=np.int64) for v in (
                [f.base_offset for f in self.files], [f.first_unit for f in self.files],
                [f.unit_count for f in self.files]))
        return self._cache["file_rows"]

    def rows_of(self, positions: np.ndarray) -> np.ndarray:
        """The row in ``columns`` of the readable unit at each log position; -1 where there is
        none (-1 itself, a position between units, past a file's readable units, no file)."""
        return rows_at(*self._file_rows(), positions)

    def row_of(self, position: int) -> int:
        """rows_of for one position, without numpy's per-call cost (a chain walk asks it once a chain)."""
        if "bases" not in self._cache:
            self._cache["bases"] = [(f.base_offset, f.first_unit, f.unit_count) for f in self.files]
        return row_at(self._cache["bases"], position)

    def links(self) -> tuple[list[int], list[int], list[int]]:
        """(position, prev_pos, row of prev_pos or -1) of every readable unit, as lists: what a
        chain walk follows without decoding a unit a step (computed once)."""
        return unit_links(self)

    def slot_indexes(self, precision_ms: int = DEFAULT_TIMER_PRECISION_MS, slots: int = 2 * SLOTS_TOTAL) -> list[int]:
        """Every readable unit's slot index (TimerWheel.getSlotIndex of its deliver time), as a list."""
        return unit_slot_indexes(self, precision_ms, slots)

    def units_in(self, f: TimerLogFile) -> list[TimerLogUnit]:
        """One file's readable units, in order."""
        return [TimerLogUnit(*row) for row in self.columns[f.first_unit:f.first_unit + f.unit_count].tolist()]

    def file_of(self, position: int) -> TimerLogFile | None:
        """The file holding a log position (MappedFileQueue.findMappedFileByOffset)."""
        seg = self.queue.find(position) if position >= 0 else None
        if seg is None:
            return None
        return next(f for f in self.files if f.base_offset == seg.base_offset)

    def unit_at(self, position: int) -> TimerLogUnit | None:
        """The 52 bytes at a log position as a unit, wherever it is (dequeue reads a chain's
        positions without checking them); None when no file holds 52 bytes there."""
        f = self.file_of(position)
        if f is None:
            return None
        rel = position - f.base_offset
        if rel % UNIT_SIZE == 0 and rel // UNIT_SIZE < f.unit_count:
            return TimerLogUnit(*self.columns[f.first_unit + rel // UNIT_SIZE].tolist())
        if rel + UNIT_SIZE > f.file_size:
            return None
        data = _pread(f.path, UNIT_SIZE, rel)
        if len(data) < UNIT_SIZE:
            return None
        return TimerLogUnit(position, *UNIT_STRUCT.unpack(data))



# -- the row interface store/timer/chain walks, shared by a TimerLog read from disk and
# recovery/timer's model of the log after load: ``columns`` (COLUMNS_DTYPE, by position) and
# a ``_cache`` dict the owner clears when its units change

def leading_units(data, base_offset: int, count: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """The readable units (size 52 and isMagicOK) from the start of ``data`` up to the first
    one that is not, as COLUMNS_DTYPE rows at log positions from ``base_offset`` on; written
    into the first rows of ``out`` when it has room for them (its view is returned)."""
    n = len(data) // UNIT_SIZE if count is None else count
    raw = np.frombuffer(data, dtype=UNIT_DTYPE, count=n)
    bad = (raw["size"] != UNIT_SIZE) | ((raw["magic"] | 0xF) != 0xF)
    good = int(np.argmax(bad)) if bad.any() else n
    cols = out[:good] if out is not None and len(out) >= good else np.empty(good, COLUMNS_DTYPE)
    kernel = native.kernel
    if kernel is not None and _UNPACK_FIELDS is not None:  # one pass over the units, not one a field
        kernel.unpack_be(data, good, UNIT_SIZE, cols, COLUMNS_DTYPE.itemsize, _UNPACK_FIELDS,
                         COLUMNS_DTYPE.fields["position"][1], base_offset)
        return cols
    cols["position"] = base_offset + np.arange(good, dtype=np.int64) * UNIT_SIZE
    for name in UNIT_DTYPE.names:
        cols[name] = raw[name][:good]
    return cols


def _unpack_fields() -> np.ndarray | None:
    """(offset in a unit, offset in a COLUMNS_DTYPE row, width) of each field, for the native
    kernel's unpack_be; None where the rows are not this machine's byte order (big-endian
    hosts: numpy converts)."""
    if not all(COLUMNS_DTYPE[n].isnative for n in COLUMNS_DTYPE.names):
        return None
    return np.array([(UNIT_DTYPE.fields[n][1], COLUMNS_DTYPE.fields[n][1], UNIT_DTYPE[n].itemsize)
                     for n in UNIT_DTYPE.names], dtype=np.int64)


_UNPACK_FIELDS = _unpack_fields()


def rows_at(bases: np.ndarray, firsts: np.ndarray, counts: np.ndarray, positions) -> np.ndarray:
    """The row of the readable unit at each log position, files given by their start offset,
    first row and unit count; -1 where there is none."""
    positions = np.asarray(positions, dtype=np.int64)
    rows = np.full(positions.shape, -1, dtype=np.int64)
    if not len(bases):
        return rows
    kernel = native.kernel
    if kernel is not None and positions.ndim == 1 and (len(bases) < 2 or bool((np.diff(bases) > 0).all())):
        kernel.rows_at(np.ascontiguousarray(bases, np.int64), np.ascontiguousarray(firsts, np.int64),
                       np.ascontiguousarray(counts, np.int64), np.ascontiguousarray(positions), UNIT_SIZE, rows)
        return rows
    which = np.searchsorted(bases, positions, side="right") - 1
    inside = (positions >= 0) & (which >= 0)
    which = np.where(inside, which, 0)
    rel = positions - bases[which]
    unit = rel // UNIT_SIZE
    ok = inside & (rel % UNIT_SIZE == 0) & (unit < counts[which])
    rows[ok] = firsts[which[ok]] + unit[ok]
    return rows


def row_at(files: list[tuple[int, int, int]], position: int) -> int:
    """rows_at for one position, without numpy's per-call cost (``files``: (start offset, first
    row, unit count) by start offset)."""
    i = bisect.bisect_right(files, (position, 1 << 62)) - 1
    if position < 0 or i < 0:
        return -1
    base, first, count = files[i]
    rel = position - base
    return first + rel // UNIT_SIZE if rel % UNIT_SIZE == 0 and rel // UNIT_SIZE < count else -1


def unit_links(log) -> tuple[list[int], list[int], list[int]]:
    """(position, prev_pos, row of prev_pos or -1) of every readable unit, as lists (computed once)."""
    if "links" not in log._cache:
        cols = log.columns
        log._cache["links"] = (cols["position"].tolist(), cols["prev_pos"].tolist(),
                               log.rows_of(cols["prev_pos"]).tolist())
    return log._cache["links"]


def java_div(a: np.ndarray, b: int) -> np.ndarray:
    """Java's long division (rounds toward zero) over an int64 array."""
    if b > 0 and (not len(a) or a.min() >= 0):  # the common case: floor and Java's division agree
        return a // b
    return np.sign(a) * (np.abs(a) // b)


def slot_indexes_of(deliver_ms: np.ndarray, precision_ms: int, slots: int = 2 * SLOTS_TOTAL) -> np.ndarray:
    """TimerWheel.getSlotIndex of each time (formats/timerwheel.slot_index over an array)."""
    if deliver_ms.dtype == object:  # times past a long (damage): Python's ints, as slot_index has them
        return np.array([slot_index(t, precision_ms, slots) for t in deliver_ms.tolist()], dtype=np.int64)
    steps = java_div(deliver_ms, precision_ms)
    if slots > 0 and (not len(steps) or steps.min() >= 0):  # the common case: Java's remainder is numpy's
        return steps % slots
    return steps - java_div(steps, slots) * slots


def deliver_times(columns: np.ndarray) -> np.ndarray:
    """currWriteTime + delayedTime of every unit: int64, or Python's ints (an object array)
    where a sum would not fit in a long (damage), as TimerLogUnit.deliver_time_ms has them."""
    write = columns["curr_write_time"]
    if len(write) and (write.max() >= 1 << 62 or write.min() <= -(1 << 62)):  # |write| >= 2**62
        return np.array([w + d for w, d in zip(write.tolist(), columns["delayed_time"].tolist())], dtype=object)
    return np.add(write, columns["delayed_time"], dtype=np.int64)


def unit_slot_index_array(log, precision_ms: int, slots: int) -> np.ndarray:
    """Every readable unit's slot index (computed once per precision and size)."""
    key = ("slot_array", precision_ms, slots)
    if key not in log._cache:
        log._cache[key] = slot_indexes_of(deliver_times(log.columns), precision_ms, slots)
    return log._cache[key]


def unit_slot_indexes(log, precision_ms: int, slots: int) -> list[int]:
    """:func:`unit_slot_index_array` as a list (walk_chain's reads, one unit at a time)."""
    key = ("slots", precision_ms, slots)
    if key not in log._cache:
        log._cache[key] = unit_slot_index_array(log, precision_ms, slots).tolist()
    return log._cache[key]


def units_of(columns: np.ndarray, rows) -> list[TimerLogUnit]:
    """The units of the given rows as TimerLogUnit objects (for the few a finding names)."""
    return [TimerLogUnit(*row) for row in columns[np.asarray(rows, dtype=np.int64)].tolist()]


def _pread(path: pathlib.Path, n: int, at: int) -> bytes:
    try:
        with open(path, "rb", buffering=0) as f:
            return os.pread(f.fileno(), n, at)
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", path, at) from None


def read_file(path: pathlib.Path) -> bytearray:
    """A file's bytes, read into a bytearray (what recovery/timer's log model appends to: one
    copy, not two)."""
    try:
        with open(path, "rb", buffering=0) as f:
            data = bytearray(os.fstat(f.fileno()).st_size)
            got = 0
            while got < len(data) and (n := f.readinto(memoryview(data)[got:])):
                got += n
            rest = f.read()  # a file that grew meanwhile: what is there now
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", path) from None
    del data[got:]  # a file that shrank meanwhile: what was read
    return data + rest if rest else data


def _scan_file(seg, data: bytes, first_unit: int, out: np.ndarray | None = None):
    """(columns, blank or None, TimerLogFile) of one file's bytes (columns in ``out`` where it has room)."""
    cols = leading_units(data, seg.base_offset, out=out)
    count = len(cols)
    at = count * UNIT_SIZE
    blank = None
    if at + MIN_BLANK_LEN <= len(data):
        fields = TimerLogBlank.parse(data[at:at + MIN_BLANK_LEN])
        if fields.magic == BLANK_MAGIC_CODE:
            blank = TimerLogBlankUnit(seg.base_offset + at, fields.size, fields.prev_pos, fields.magic)
    if blank is not None:
        reason, after = END_BLANK, at + max(blank.size, MIN_BLANK_LEN)
    elif at + UNIT_SIZE <= len(data):
        reason, after = (END_ZERO_UNIT if not any(data[at:at + UNIT_SIZE]) else END_BAD_UNIT), at
    else:
        reason, after = (END_FILE_END if at == len(data) else END_PARTIAL_UNIT), at
    non_zero_after = bool(np.frombuffer(data, np.uint8)[after:].any()) if after < len(data) else False
    return cols, blank, TimerLogFile(seg.path, seg.base_offset, len(data), first_unit, count,
                                     seg.base_offset + at, reason, non_zero_after)


def scan_timer_log(directory, read=None) -> TimerLog:
    """Every file of ``<store>/timerlog``: its readable units, its blank, where and why its
    units end. A missing directory is an empty log. ``read``: how a file's bytes are read
    (a caller that keeps them)."""
    queue = discover(directory, required=False)
    # the files' units go into one array with room for all the files hold (rows never written
    # are never touched); a file that grew since it was listed makes its own, joined after
    room = np.empty(sum(max(seg.size, 0) // UNIT_SIZE for seg in queue.segments), COLUMNS_DTYPE)
    parts, blanks, files, first = [], [], [], 0
    for seg in queue.segments:
        cols, blank, f = _scan_file(seg, (read or read_file)(seg.path), first, room[first:])
        parts.append(cols)
        files.append(f)
        first += f.unit_count
        if blank is not None:
            blanks.append(blank)
    in_room = all(p.base is room for p in parts)
    columns = room[:first] if in_room else np.concatenate(parts) if parts else np.empty(0, COLUMNS_DTYPE)
    return TimerLog(pathlib.Path(directory), queue, files, columns, blanks)
