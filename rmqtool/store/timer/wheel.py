"""The timer wheel file read: its used slots, found without reading 38 MB of zeros slowly.

A slot is used when any of its 32 bytes is non-zero (the broker never clears a slot after
delivery, so a used slot may be long past). The file is read a data region at a time
(SEEK_DATA / SEEK_HOLE skip a sparse file's holes) and numpy picks the non-zero slots.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

import numpy as np

from rmqtool.errors import StoreAccessError, StoreNotFound
from rmqtool.store.extents import data_extents
from rmqtool.formats.timerwheel import (DEFAULT_TIMER_PRECISION_MS, SLOT_DTYPE, SLOT_SIZE, SLOTS_TOTAL, slot_count,
                                        slot_index, slot_time_ms, time_value, wheel_length)

_CHUNK = 4 << 20  # bytes read at once inside a data region (a multiple of SLOT_SIZE)
USED_DTYPE = np.dtype([("index", "<i8")] + SLOT_DTYPE)
assert USED_DTYPE.names[1:] == ("time_value", "first_pos", "last_pos", "num", "magic")


@dataclasses.dataclass(frozen=True, slots=True)
class WheelSlot:
    index: int
    time_value: int  # as stored: timeMs / precisionMs
    time_ms: int  # time_value * precisionMs (getRawSlot)
    first_pos: int
    last_pos: int
    num: int
    magic: int
    index_matches_time: bool  # getSlotIndex(time_ms) == index: the slot holds its own time


@dataclasses.dataclass(frozen=True, slots=True)
class TimerWheel:
    path: pathlib.Path
    file_size: int
    precision_ms: int
    used: np.ndarray  # USED_DTYPE rows of every non-zero slot, by index

    @property
    def slot_count(self) -> int:
        """Slots the file holds (its size / 32); the broker expects 2 * slotsTotal."""
        return slot_count(self.file_size)

    @property
    def expected_size(self) -> int:
        """TimerWheel.wheelLength: the only non-empty size the broker opens."""
        return wheel_length(SLOTS_TOTAL)

    @property
    def slots(self) -> list[WheelSlot]:
        return [self._slot(row) for row in self.used.tolist()]

    def _slot(self, row) -> WheelSlot:
        index, value, first, last, num, magic = row
        return WheelSlot(index, value, slot_time_ms(value, self.precision_ms), first, last, num, magic,
                         slot_index(slot_time_ms(value, self.precision_ms), self.precision_ms,
                                    self.slot_count or 1) == index)

    def slot_at(self, index: int) -> WheelSlot | None:
        """The slot at an index when it is used, else None (an all-zero slot)."""
        at = int(np.searchsorted(self.used["index"], index))
        if at < len(self.used) and int(self.used["index"][at]) == index:
            return self._slot(self.used[at].tolist())
        return None

    def counted_from(self, time_start_ms: int) -> np.ndarray:
        """The used slots TimerWheel.getAllNum counts from a time: those holding one of the
        next slot_count precision steps at their own index (the ones dequeue will reach)."""
        start, slots = time_value(time_start_ms, self.precision_ms), self.slot_count or 1
        values = self.used["time_value"]
        keep = (values >= start) & (values < start + slots) & (values % slots == self.used["index"])
        return self.used[keep]

    def all_num(self, time_start_ms: int) -> int:
        """TimerWheel.getAllNum: the num of every slot from a time on (dequeueBehindMessages)."""
        return int(self.counted_from(time_start_ms)["num"].sum())

    def get_slot(self, time_ms: int) -> WheelSlot | None:
        """TimerWheel.getSlot: the slot of a time when it holds that time, else None (BLANK)."""
        slot = self.slot_at(slot_index(time_ms, self.precision_ms, self.slot_count or 1))
        if slot is None or slot.time_value != time_value(time_ms, self.precision_ms):
            return None
        return slot


def read_wheel(path, precision_ms: int = DEFAULT_TIMER_PRECISION_MS) -> TimerWheel:
    """The wheel file's used slots. A trailing partial slot (a damaged size) is ignored."""
    path = pathlib.Path(path)
    parts = []
    try:
        with open(path, "rb", buffering=0) as f:
            fd = f.fileno()
            size = os.fstat(fd).st_size
            whole = size - size % SLOT_SIZE
            for start, end in data_extents(fd, 0, whole, path):
                start -= start % SLOT_SIZE
                end = min(whole, end + (-end) % SLOT_SIZE)
                for at in range(start, end, _CHUNK):
                    data = os.pread(fd, min(_CHUNK, end - at), at)
                    data = data[:len(data) - len(data) % SLOT_SIZE]
                    if not data:
                        continue
                    words = np.frombuffer(data, dtype="<u8").reshape(-1, SLOT_SIZE // 8)
                    hits = np.flatnonzero(words.any(axis=1))
                    if len(hits):
                        rows = np.frombuffer(data, dtype=np.dtype(SLOT_DTYPE))[hits]
                        used = np.empty(len(hits), USED_DTYPE)
                        used["index"] = hits + at // SLOT_SIZE
                        for name, _ in SLOT_DTYPE:
                            used[name] = rows[name]
                        parts.append(used)
    except FileNotFoundError:
        raise StoreNotFound("no such file", path) from None
    except IsADirectoryError:
        raise StoreAccessError("a directory where the timer wheel file should be", path) from None
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", path) from None
    used = np.concatenate(parts) if parts else np.empty(0, USED_DTYPE)
    used = used[np.unique(used["index"], return_index=True)[1]]  # regions re-aligned may overlap
    return TimerWheel(path, size, precision_ms, used)
