"""The timer wheel as ``TimerWheel`` holds it in memory: the used slots only.

``TimerWheel`` copies the whole ``timerwheel`` file (2 x 604,800 slots of 32 bytes) into a
direct buffer at construction and reads and writes that copy; the file is written back by
the flush service once a second, never at shutdown. A slot counts for a time only when its
stored ``timeMs / precisionMs`` equals that time's (``getSlot``), so a slot full of zeros
never counts for any real time: the model keeps the slots that are not all zeros.
"""
from __future__ import annotations

import dataclasses
import operator

import numpy as np

from rmqtool.formats.timerwheel import SLOTS_TOTAL, slot_index, time_value
from rmqtool.store.timer.timerlog import java_div, slot_indexes_of

_INDEX, _TIME_VALUE = operator.attrgetter("index"), operator.attrgetter("time_value")
TIMER_BLANK_SLOTS = 60  # TimerMessageStore.TIMER_BLANK_SLOTS: the read-time floor's margin
IGNORE = -2  # TimerWheel.IGNORE: reviseSlot leaves that field alone


@dataclasses.dataclass
class WheelSlot:
    """One slot: stored time (timeMs / precisionMs), firstPos, lastPos, num, magic."""
    index: int
    time_value: int
    first_pos: int
    last_pos: int
    num: int
    magic: int

    def time_ms(self, precision_ms: int) -> int:
        return self.time_value * precision_ms

    def row(self, precision_ms: int) -> dict:
        return {"index": self.index, "timeMs": self.time_ms(precision_ms), "storedTimeValue": self.time_value,
                "firstPos": self.first_pos, "lastPos": self.last_pos, "num": self.num, "magic": self.magic,
                "indexMatchesTime": self.index == slot_index(self.time_ms(precision_ms), precision_ms)}


class WheelModel:
    """TimerWheel over its used slots (index -> WheelSlot)."""

    def __init__(self, slots, precision_ms: int = 1000):
        self.precision_ms = precision_ms
        self.slots: dict[int, WheelSlot] = {s.index: WheelSlot(s.index, s.time_value, s.first_pos, s.last_pos, s.num, s.magic)
                                            for s in slots}

    def slot_index(self, time_ms: int) -> int:
        return slot_index(time_ms, self.precision_ms)

    def get_slot(self, time_ms: int) -> WheelSlot | None:
        """getSlot: the slot of that time, None where getSlot answers Slot(-1, -1, -1)."""
        s = self.slots.get(self.slot_index(time_ms))
        if s is None or s.time_value != time_value(time_ms, self.precision_ms):
            return None
        return s

    def _raw(self, time_ms: int) -> WheelSlot:
        index = self.slot_index(time_ms)
        s = self.slots.get(index)
        if s is None:
            s = self.slots[index] = WheelSlot(index, 0, 0, 0, 0, 0)
        return s

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int | None = None,
                 magic: int | None = None) -> None:
        """putSlot: the 3-argument form keeps the slot's old num and magic bytes."""
        s = self._raw(time_ms)
        s.time_value, s.first_pos, s.last_pos = time_value(time_ms, self.precision_ms), first_pos, last_pos
        if num is not None:
            s.num, s.magic = num, magic

    def revise_slot(self, time_ms: int, first_pos: int, last_pos: int, force: bool) -> None:
        """reviseSlot: a slot of another time is taken over (forced) with num and magic kept."""
        s = self._raw(time_ms)
        if time_value(time_ms, self.precision_ms) != s.time_value:
            if force:
                self.put_slot(time_ms, first_pos if first_pos != IGNORE else last_pos, last_pos)
        else:
            if first_pos != IGNORE:
                s.first_pos = first_pos
            if last_pos != IGNORE:
                s.last_pos = last_pos

    def revise_many(self, times_ms: np.ndarray, positions: np.ndarray) -> None:
        """``revise_slot(t, IGNORE, p, True)`` for each (time, position), in order, all at once:
        of a slot's revisions only the last run of one time counts (its first position becomes
        firstPos unless the slot held that time before the run), and the last gives lastPos."""
        if not len(times_ms):
            return
        index = slot_indexes_of(times_ms, self.precision_ms)
        value = java_div(np.asarray(times_ms, dtype=np.int64), self.precision_ms)
        order = np.argsort(index, kind="stable")  # each slot's revisions, in scan order
        index, value, positions = index[order], value[order], positions[order]
        n = len(index)
        new_slot = np.ones(n, bool)
        new_slot[1:] = index[1:] != index[:-1]
        new_run = new_slot.copy()
        new_run[1:] |= value[1:] != value[:-1]
        at = np.arange(n)
        slot_start = np.maximum.accumulate(np.where(new_slot, at, 0))
        run_start = np.maximum.accumulate(np.where(new_run, at, 0))
        last = np.flatnonzero(np.append(new_slot[1:], True))
        slots = self.slots
        for i, v, whole, first, last_pos in zip(index[last].tolist(), value[last].tolist(),
                                                (run_start[last] == slot_start[last]).tolist(),
                                                positions[run_start[last]].tolist(), positions[last].tolist()):
            s = slots.get(i)  # _raw, at the index and time value computed above
            if s is None:
                s = slots[i] = WheelSlot(i, 0, 0, 0, 0, 0)
            if whole and s.time_value == v:
                s.last_pos = last_pos
            else:  # put_slot's 3-argument form
                s.time_value, s.first_pos, s.last_pos = v, first, last_pos

    def time_columns(self, slots: list) -> tuple[np.ndarray, np.ndarray] | None:
        """(index, stored time value) of each slot as int64 arrays; None where a time value, or
        a time in ms made of one, would not fit a long (damage: the caller goes slot by slot)."""
        try:
            value = np.fromiter(map(_TIME_VALUE, slots), np.int64, count=len(slots))
        except OverflowError:
            return None
        if len(value) and np.abs(value).max() >= (1 << 62) // max(abs(self.precision_ms), 1):
            return None
        return np.fromiter(map(_INDEX, slots), np.int64, count=len(slots)), value

    def _matching(self, time_start_ms: int):
        """The slots getSlot answers for the 2 x slotsTotal times from time_start_ms on."""
        start = time_value(time_start_ms, self.precision_ms)
        first = start % (SLOTS_TOTAL * 2)
        slots = list(self.slots.values())
        columns = self.time_columns(slots) if abs(start) < 1 << 61 else None
        if columns is None:  # a time past a long (damage): Python's ints
            return [s for s in slots if s.time_value == start + (s.index - first) % (SLOTS_TOTAL * 2)]
        index, value = columns
        return [slots[k] for k in np.flatnonzero(value == start + (index - first) % (SLOTS_TOTAL * 2)).tolist()]

    def check_phy_pos(self, time_start_ms: int, max_offset: int) -> int:
        """checkPhyPos: the least firstPos of the slots whose lastPos is past max_offset."""
        firsts = [s.first_pos for s in self._matching(time_start_ms) if s.last_pos > max_offset]
        return min(firsts, default=(1 << 63) - 1)

    def all_num(self, time_start_ms: int) -> int:
        """getAllNum: the pending count the broker reports (dequeueBehindMessages)."""
        total = sum(s.num for s in self._matching(time_start_ms))
        return (total + (1 << 31)) % (1 << 32) - (1 << 31)  # an int sum

    def num(self, time_ms: int) -> int:
        s = self.get_slot(time_ms)
        return 0 if s is None else s.num  # Slot(-1, -1, -1) has num 0

    def fork(self) -> "WheelModel":
        return WheelModel(self.slots.values(), self.precision_ms)

    def used(self) -> list[WheelSlot]:
        """The slots that are not all zeros, by index."""
        return [s for _i, s in sorted(self.slots.items())
                if (s.time_value, s.first_pos, s.last_pos, s.num, s.magic) != (0, 0, 0, 0, 0)]
