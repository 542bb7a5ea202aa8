"""The timer log as ``TimerLog``'s MappedFileQueue holds it after load: its files, each
file's write position, the units read and appended.

``MappedFileQueue.load`` maps every file at full size with its write position at the
file's end; ``truncateDirtyFiles`` moves the position of the file holding the cut to the
cut and destroys the files after it; ``selectMappedBuffer(0)`` then reads a file up to its
write position. Appends (``TimerLog.append``) go after the write position, with a blank at
a file's end when a unit and a blank header no longer fit.
"""
from __future__ import annotations

import dataclasses
import struct

import numpy as np

from rmqtool.formats.timerlog import BLANK_MAGIC_CODE, MIN_BLANK_LEN, UNIT_SIZE, UNIT_STRUCT
from rmqtool.store.timer.timerlog import (COLUMNS_DTYPE, TimerLogUnit, leading_units, row_at, rows_at, unit_links,
                                          unit_slot_indexes)


@dataclasses.dataclass
class TimerLogFile:
    """One file of timerlog/: where it starts, its mapped size, its bytes as read (a shorter
    read is zeros to the end), and its write position."""
    name: str
    from_offset: int
    file_size: int
    data: bytearray
    wrote: int = -1  # -1: the whole file (as load leaves it)
    destroyed: bool = False
    as_read: bool = True  # its bytes are those read from disk (nothing appended)

    def __post_init__(self):
        if self.wrote < 0:
            self.wrote = self.file_size

    def bytes_at(self, position: int, length: int) -> bytes:
        """The bytes of the mapped file (zeros past what is on disk)."""
        chunk = bytes(self.data[position:position + length])
        return chunk + bytes(max(0, min(length, self.file_size - position) - len(chunk)))


class TimerLogModel:
    def __init__(self, files: list[TimerLogFile], seed=None):
        """``seed``: the timer log read from disk (store/timer's TimerLog) of the same bytes,
        whose units a file as read reuses rather than decoding them again."""
        self.files = sorted(files, key=lambda f: f.from_offset)
        self.file_size = self.files[0].file_size if self.files else 0
        self._cache: dict = {}  # the readable units' columns and what chains follow: cleared by every change
        self._seed = seed if seed is None or isinstance(seed, tuple) else (
            seed.columns, {f.base_offset: (f.first_unit, f.unit_count) for f in seed.files})

    def _seeded(self, f: TimerLogFile, count: int) -> np.ndarray | None:
        """The seed's units of a file as read, up to ``count`` units (the units leading_units
        finds in its bytes up to that count: those of the whole file, cut there, when no
        partial unit read as zeros comes before it); None when the seed cannot say."""
        if self._seed is None or not f.as_read or f.from_offset not in self._seed[1]:
            return None
        if len(f.data) % UNIT_SIZE and count > len(f.data) // UNIT_SIZE:
            return None
        first, n = self._seed[1][f.from_offset]
        rows = self._seed[0][first:first + min(n, count)]
        return rows

    # -- the rows store/timer/chain walks (as a TimerLog read from disk has them) ---------------
    @property
    def columns(self) -> np.ndarray:
        """Every unit a rescan would accept, file by file up to each file's write position
        (COLUMNS_DTYPE rows, as store/timer's TimerLog has them)."""
        if "columns" not in self._cache:
            parts, index, first, seeded = [], [], 0, 0
            for f in self.live:
                count = f.wrote // UNIT_SIZE
                cols = self._seeded(f, count)
                if cols is not None:
                    seeded += 1
                else:
                    on_disk = min(count, -(-len(f.data) // UNIT_SIZE))  # past the bytes read: zeros, no unit
                    need = on_disk * UNIT_SIZE
                    data = (memoryview(f.data)[:need] if len(f.data) >= need  # read in place: leading_units copies
                            else bytes(f.data[:need]) + bytes(need - len(f.data)))
                    cols = leading_units(data, f.from_offset, on_disk)
                    del data
                parts.append(cols)
                index.append((f.from_offset, first, len(cols)))
                first += len(cols)
            if parts and seeded == len(parts) and first == len(self._seed[0]):  # the seed's own units, all of them
                self._cache["columns"] = self._seed[0]
            else:
                self._cache["columns"] = np.concatenate(parts) if parts else np.empty(0, COLUMNS_DTYPE)
            self._cache["bases"] = index
            self._cache["file_rows"] = tuple(np.array([i[k] for i in index], dtype=np.int64) for k in range(3))
        return self._cache["columns"]

    def rows_of(self, positions) -> np.ndarray:
        self.columns
        return rows_at(*self._cache["file_rows"], positions)

    def row_of(self, position: int) -> int:
        self.columns
        return row_at(self._cache["bases"], position)

    def links(self) -> tuple[list[int], list[int], list[int]]:
        return unit_links(self)

    def slot_indexes(self, precision_ms: int, slots: int) -> list[int]:
        return unit_slot_indexes(self, precision_ms, slots)

    @property
    def live(self) -> list[TimerLogFile]:
        return [f for f in self.files if not f.destroyed]

    @property
    def log_end(self) -> int:
        """One past the last byte the last file can hold (store/timer/chain.walk_chain asks)."""
        live = self.live
        return live[-1].from_offset + self.file_size if live else 0

    def file_of(self, offset: int) -> TimerLogFile | None:
        return self.find(offset)

    def find(self, offset: int) -> TimerLogFile | None:
        """findMappedFileByOffset (no first-file fallback)."""
        live = self.live
        if not live or offset < live[0].from_offset or offset >= live[-1].from_offset + self.file_size:
            return None
        for f in live:
            if f.from_offset <= offset < f.from_offset + self.file_size:
                return f
        return None

    @property
    def min_offset(self) -> int:
        live = self.live
        return live[0].from_offset if live else 0

    @property
    def max_offset(self) -> int:
        """getMaxOffset: the last file's start + its write position."""
        live = self.live
        return live[-1].from_offset + live[-1].wrote if live else 0

    def truncate_dirty_files(self, offset: int) -> list[TimerLogFile]:
        """truncateDirtyFiles: the files wholly after the offset are destroyed (returned)."""
        gone = []
        for f in self.live:
            if f.from_offset + self.file_size > offset:
                if offset >= f.from_offset:
                    f.wrote = offset % self.file_size
                else:
                    f.destroyed = True
                    gone.append(f)
        self._cache = {}
        return gone

    def unit_at(self, pos: int) -> TimerLogUnit | None:
        """The 52 bytes at a position as dequeue reads them (getWholeBuffer: the file up to
        its write position); None where the read fails (no file, or past the write position)."""
        f = self.find(pos)
        if f is None:
            return None
        position = pos % self.file_size
        if position + UNIT_SIZE > f.wrote:
            return None
        return TimerLogUnit(pos, *UNIT_STRUCT.unpack(f.bytes_at(position, UNIT_SIZE)))

    def fork(self) -> "TimerLogModel":
        """A copy to append to: the files share their bytes but the last one's."""
        live = self.live
        files = [dataclasses.replace(f, data=f.data if f is not live[-1] else bytearray(f.data)) for f in self.files]
        out = TimerLogModel(files, self._seed)
        if "columns" in self._cache:  # the same units: what was computed of them holds
            out._cache = dict(self._cache)
        return out

    def append(self, unit: bytes) -> int:
        """TimerLog.append: where the unit lands (a blank first when it no longer fits)."""
        live = self.live
        f = live[-1] if live else None
        if f is None or f.wrote >= self.file_size:
            f = self._new_file()
        if len(unit) + MIN_BLANK_LEN > self.file_size - f.wrote:
            blank = struct.pack(">iqi", self.file_size - f.wrote, 0, BLANK_MAGIC_CODE)
            f.data[f.wrote:f.wrote + MIN_BLANK_LEN] = blank
            f.as_read = False
            f.wrote = self.file_size
            f = self._new_file()
        pos = f.from_offset + f.wrote
        f.as_read = False
        if len(f.data) < f.wrote + len(unit):
            f.data.extend(bytes(f.wrote + len(unit) - len(f.data)))
        f.data[f.wrote:f.wrote + len(unit)] = unit
        f.wrote += len(unit)
        self._cache = {}
        return pos

    def _new_file(self) -> TimerLogFile:
        live = self.live
        start = live[-1].from_offset + self.file_size if live else 0
        f = TimerLogFile(f"{start:020d}", start, self.file_size, bytearray(), wrote=0, as_read=False)
        self.files.append(f)
        self._cache = {}
        return f


def pack_unit(prev_pos: int, magic: int, write_time: int, delayed: int, offset_py: int, size_py: int,
              topic_hash: int) -> bytes:
    """doEnqueue's unit bytes."""
    return UNIT_STRUCT.pack(UNIT_SIZE, prev_pos, magic, write_time, delayed, offset_py, size_py, topic_hash, 0)
