"""Items that name commit log offsets (consume queue units, index entries), matched with the
commit log one band at a time.

A queue's units and an index file's entries are written in commit log order, so they are
read in order, a chunk at a time, as the bands pass: each band takes the items pointing
into it, and only a chunk of items is held ahead. An item that points behind the band
being checked (damage: a unit out of order, an offset in a missing file) is kept aside as
late; :meth:`rmqtool.verify.commitlog.CommitLogCheck.recheck` checks the bands holding
late items again at the end. A healthy store has none, and the memory held is a band's
worth of items whatever the store's size.
"""
from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

FIRST_CHUNK = 1 << 10  # items read at once, doubled while a band needs more (thousands of queues share memory)
MAX_CHUNK = 1 << 16
_TAIL = 4  # the last items read decide whether to read on: one wild offset does not stop the reading


def _rows(dtype: np.dtype) -> np.dtype:
    return np.dtype((np.void, dtype.itemsize))


def subset(items: np.ndarray, which) -> np.ndarray:
    """``items[which]`` of a structured array (a mask or indices), copied as raw rows: numpy
    copies structured rows field by field, about ten times slower."""
    return items.view(_rows(items.dtype))[which].view(items.dtype)


def joined(parts: list[np.ndarray]) -> np.ndarray:
    """Structured arrays of one dtype end to end, copied as raw rows."""
    dtype = parts[0].dtype
    return np.concatenate([p.view(_rows(dtype)) for p in parts]).view(dtype)


def _tail_below(parts: list[np.ndarray], hi: int) -> bool:
    """Whether to read on: nothing read yet, or the smallest of the last _TAIL offsets (over
    the parts end to end) is below ``hi``."""
    need, low = _TAIL, None
    for part in reversed(parts):
        tail = part["offset"][-need:]
        low = tail.min() if low is None else min(low, tail.min())
        need -= len(tail)
        if need <= 0:
            break
    return low is None or low < hi


class OffsetLookups:
    """The items of one file sequence, in order; ``read(n)`` gives the next (at most n) as a
    structured array with an int64 ``offset`` field, or None when there are no more."""

    def __init__(self, read: Callable[[int], np.ndarray | None]):
        self._read = read
        # the items read and not yet taken, as the reads gave them (a band takes its share
        # of each: what is held ahead is never copied again), and whether each is in order
        self.parts: list = []
        self.ordered: list = []
        self.done = False
        self.chunk = FIRST_CHUNK
        self.late: list = []

    @property
    def items(self) -> np.ndarray | None:
        """The items read and not yet taken, end to end (None: none)."""
        return joined(self.parts) if self.parts else None

    def take(self, lo: int, hi: int) -> np.ndarray | None:
        """The items pointing into [lo, hi), in order (None when there are none); those
        pointing before ``lo`` go to the late ones."""
        parts, ordered = self.parts, self.ordered
        reads = 0
        while not self.done and _tail_below(parts, hi):
            got = self._read(self.chunk)
            if got is None:
                self.done = True
                break
            reads += 1
            if len(got):
                parts.append(got)
                ordered.append(None)  # not looked at yet
        if reads > 1:
            self.chunk = min(self.chunk * 2, MAX_CHUNK)
        taken: list = []
        kept: list = []
        kept_ordered: list = []
        for items, in_order in zip(parts, ordered):
            offset = items["offset"]
            if offset[0] >= hi and in_order:  # all of it ahead
                kept.append(items)
                kept_ordered.append(True)
                continue
            if in_order is None:
                in_order = bool((offset[1:] >= offset[:-1]).all())
            if in_order and offset[0] >= lo:  # in order, as written: a leading run, no copy
                cut = int(np.searchsorted(offset, hi))
                if cut:
                    taken.append(items[:cut])
                if cut < len(items):
                    kept.append(items[cut:])
                    kept_ordered.append(True)
                continue
            ahead = offset >= hi
            if ahead.all():
                kept.append(items)
                kept_ordered.append(in_order)
                continue
            behind = offset < lo
            if behind.any():
                self.late.append(subset(items, behind))
            if not ahead.any() and not behind.any():
                taken.append(items)
                continue
            taken.append(subset(items, ~ahead & ~behind))
            if ahead.any():
                kept.append(subset(items, ahead))
                kept_ordered.append(in_order or None)
        self.parts, self.ordered = kept, kept_ordered
        taken = [t for t in taken if len(t)]
        if not taken:
            return None
        return taken[0] if len(taken) == 1 else joined(taken)

    def finish(self) -> None:
        """After the last band: whatever is left (read or not) is late."""
        while not self.done:
            got = self._read(MAX_CHUNK)
            if got is None:
                self.done = True
            elif len(got):
                self.late.append(got)
        self.late.extend(self.parts)
        self.parts, self.ordered = [], []
        self.late = [joined(self.late)] if self.late else []

    def late_items(self) -> np.ndarray | None:
        return self.late[0] if self.late else None

    def take_late(self, lo: int, hi: int) -> np.ndarray | None:
        """The late items pointing into [lo, hi) (a band checked again); the others stay late."""
        items = self.late_items()
        if items is None:
            return None
        inside = (items["offset"] >= lo) & (items["offset"] < hi)
        if not inside.any():
            return None
        self.late = [subset(items, ~inside)]
        return subset(items, inside)

    def leftover(self) -> np.ndarray | None:
        """The late items no band held (they point where no message starts), given once."""
        items = self.late_items()
        self.late = []
        return items if items is not None and len(items) else None


def late_offsets(lookups: Iterable[OffsetLookups]) -> np.ndarray:
    """After the last band: the offsets every one of ``lookups`` could not match in order."""
    late = []
    for one in lookups:
        one.finish()
        items = one.late_items()
        if items is not None:
            late.append(items["offset"])
    return np.concatenate(late) if late else np.zeros(0, np.int64)
