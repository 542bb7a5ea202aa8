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
    """TimerWheel over its used slots.

    The slots are held as columns (int64 arrays by index, what bulk reads and revise_many
    use) with the slots touched one at a time (put_slot, revise_slot, get_slot) in a dict
    over them. A value past a long (damage) turns the model into the dict alone, and every
    read goes slot by slot with Python's ints, as it did before the columns."""

    def __init__(self, slots=(), precision_ms: int = 1000, *, columns: dict | None = None):
        self.precision_ms = precision_ms
        self._over: dict[int, WheelSlot] = {s.index: WheelSlot(s.index, s.time_value, s.first_pos, s.last_pos, s.num,
                                                                s.magic) for s in slots}
        self._cols = None if columns is None else {k: np.asarray(columns[k], dtype=np.int64) for k in _FIELDS}
        if self._cols is None:
            self._cols = _empty_columns()
            self._fold()  # the slots given, as columns when they fit

    @classmethod
    def from_used(cls, used: np.ndarray, precision_ms: int = 1000) -> "WheelModel":
        """The model of a wheel file's used slots (store/timer/wheel's USED_DTYPE rows, by index)."""
        return cls((), precision_ms, columns={k: used[k] for k in _FIELDS})

    # -- the two forms -------------------------------------------------------------------------
    def _fold(self) -> bool:
        """The dict's slots moved into the columns; False (and the model the dict alone) when
        a value does not fit a long."""
        if self._cols is None:
            return False
        if not self._over:
            return True
        over = list(self._over.values())
        try:
            new = {k: np.array([getattr(s, k) for s in over], dtype=np.int64) for k in _FIELDS}
        except OverflowError:
            self._to_dict()
            return False
        cols = self._cols
        keep = ~np.isin(cols["index"], new["index"])
        merged = {k: np.concatenate((cols[k][keep], new[k])) for k in _FIELDS}
        order = np.argsort(merged["index"], kind="stable")
        self._cols = {k: v[order] for k, v in merged.items()}
        self._over = {}
        return True

    def _to_dict(self) -> None:
        cols, self._cols = self._cols, None
        if cols is not None:
            over = self._over
            self._over = {i: WheelSlot(*row) for i, row in zip(cols["index"].tolist(), zip(*(cols[k].tolist()
                                                                                            for k in _FIELDS)))}
            self._over.update(over)

    @property
    def slots(self) -> dict[int, WheelSlot]:
        """index -> WheelSlot of every slot the model knows (the model is the dict from then on)."""
        self._to_dict()
        return self._over

    def columns(self) -> dict | None:
        """The slots as int64 columns by index (None: a value past a long, go slot by slot)."""
        return self._cols if self._fold() else None

    # -- one slot --------------------------------------------------------------------------------
    def slot_index(self, time_ms: int) -> int:
        return slot_index(time_ms, self.precision_ms)

    def _known(self, index: int) -> WheelSlot | None:
        s = self._over.get(index)
        if s is None and self._cols is not None:
            cols = self._cols
            at = int(np.searchsorted(cols["index"], index))
            if at < len(cols["index"]) and int(cols["index"][at]) == index:
                s = self._over[index] = WheelSlot(*(int(cols[k][at]) for k in _FIELDS))
        return s

    def get_slot(self, time_ms: int) -> WheelSlot | None:
        """getSlot: the slot of that time, None where getSlot answers Slot(-1, -1, -1)."""
        s = self._known(self.slot_index(time_ms))
        if s is None or s.time_value != time_value(time_ms, self.precision_ms):
            return None
        return s

    def _raw(self, time_ms: int) -> WheelSlot:
        index = self.slot_index(time_ms)
        s = self._known(index)
        if s is None:
            s = self._over[index] = WheelSlot(index, 0, 0, 0, 0, 0)
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

    # -- many slots --------------------------------------------------------------------------------
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
        idx, v, whole = index[last], value[last], run_start[last] == slot_start[last]
        first, last_pos = positions[run_start[last]], positions[last]
        if not self._fold():  # the dict alone: slot by slot
            slots = self._over
            for i, tv, w, f, lp in zip(idx.tolist(), v.tolist(), whole.tolist(), first.tolist(), last_pos.tolist()):
                s = slots.get(i)
                if s is None:
                    s = slots[i] = WheelSlot(i, 0, 0, 0, 0, 0)
                if w and s.time_value == tv:
                    s.last_pos = lp
                else:  # put_slot's 3-argument form
                    s.time_value, s.first_pos, s.last_pos = tv, f, lp
            return
        cols = self._cols
        where = np.searchsorted(cols["index"], idx)
        found = where < len(cols["index"])
        found[found] = cols["index"][where[found]] == idx[found]
        held = np.zeros(len(idx), np.int64)  # the slot's time before (0: a slot of zeros, made by _raw)
        held[found] = cols["time_value"][where[found]]
        keep_first = whole & (held == v)
        rows = where[found]
        cols["last_pos"][rows] = last_pos[found]
        moved = ~keep_first[found]
        cols["time_value"][rows[moved]] = v[found][moved]
        cols["first_pos"][rows[moved]] = first[found][moved]
        if not found.all():  # new slots: of zeros, then put_slot's 3-argument form (whole runs of their own time)
            fresh = ~found
            new = {"index": idx[fresh], "time_value": v[fresh], "first_pos": np.where(keep_first[fresh], 0, first[fresh]),
                   "last_pos": last_pos[fresh], "num": np.zeros(int(fresh.sum()), np.int64),
                   "magic": np.zeros(int(fresh.sum()), np.int64)}
            merged = {k: np.concatenate((cols[k], new[k])) for k in _FIELDS}
            order = np.argsort(merged["index"], kind="stable")
            self._cols = {k: x[order] for k, x in merged.items()}

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

    def time_safe_columns(self, cols: dict | None = None) -> dict | None:
        """columns() (or the columns given) when every time in ms made of a time value fits a
        long, else None."""
        cols = self.columns() if cols is None else cols
        if cols is None:
            return None
        value = cols["time_value"]
        if len(value) and np.abs(value).max() >= (1 << 62) // max(abs(self.precision_ms), 1):
            return None
        return cols

    def _matching_mask(self, time_start_ms: int):
        """A mask over columns() of the slots getSlot answers for the 2 x slotsTotal times
        from time_start_ms on; None: go slot by slot."""
        start = time_value(time_start_ms, self.precision_ms)
        cols = self.time_safe_columns() if abs(start) < 1 << 61 else None
        if cols is None:
            return None
        first = start % (SLOTS_TOTAL * 2)
        return cols, cols["time_value"] == start + (cols["index"] - first) % (SLOTS_TOTAL * 2)

    def _matching(self, time_start_ms: int):
        """The slots getSlot answers for the 2 x slotsTotal times from time_start_ms on."""
        start = time_value(time_start_ms, self.precision_ms)
        first = start % (SLOTS_TOTAL * 2)
        slots = list(self.slots.values())
        return [s for s in slots if s.time_value == start + (s.index - first) % (SLOTS_TOTAL * 2)]

    def check_phy_pos(self, time_start_ms: int, max_offset: int) -> int:
        """checkPhyPos: the least firstPos of the slots whose lastPos is past max_offset."""
        got = self._matching_mask(time_start_ms)
        if got is not None:
            cols, mask = got
            mask = mask & (cols["last_pos"] > max_offset)
            return int(cols["first_pos"][mask].min()) if mask.any() else (1 << 63) - 1
        firsts = [s.first_pos for s in self._matching(time_start_ms) if s.last_pos > max_offset]
        return min(firsts, default=(1 << 63) - 1)

    def all_num(self, time_start_ms: int) -> int:
        """getAllNum: the pending count the broker reports (dequeueBehindMessages)."""
        got = self._matching_mask(time_start_ms)
        if got is not None:
            cols, mask = got
            total = int(cols["num"][mask].sum())
        else:
            total = sum(s.num for s in self._matching(time_start_ms))
        return (total + (1 << 31)) % (1 << 32) - (1 << 31)  # an int sum

    def num(self, time_ms: int) -> int:
        s = self.get_slot(time_ms)
        return 0 if s is None else s.num  # Slot(-1, -1, -1) has num 0

    def fork(self) -> "WheelModel":
        if self._cols is None:
            return WheelModel(self._over.values(), self.precision_ms)
        out = WheelModel((), self.precision_ms, columns={k: v.copy() for k, v in self._cols.items()})
        out._over = {i: dataclasses.replace(s) for i, s in self._over.items()}
        return out

    def used(self) -> list[WheelSlot]:
        """The slots that are not all zeros, by index."""
        return [s for _i, s in sorted(self.slots.items())
                if (s.time_value, s.first_pos, s.last_pos, s.num, s.magic) != (0, 0, 0, 0, 0)]

    def used_columns(self) -> dict | None:
        """used() as columns (None: a value past a long, go slot by slot with used())."""
        cols = self.columns()
        if cols is None:
            return None
        keep = np.zeros(len(cols["index"]), bool)
        for k in _FIELDS[1:]:
            keep |= cols[k] != 0
        return {k: v[keep] for k, v in cols.items()}


_FIELDS = ("index", "time_value", "first_pos", "last_pos", "num", "magic")


def _empty_columns() -> dict:
    return {k: np.empty(0, np.int64) for k in _FIELDS}
