"""What ``recover --apply`` repairs in a timer store beyond what the broker does, as zeroed
byte ranges (the plan's actions: backed up, undone like the rest):

* units whose ``rmq_sys_wheel_timer`` record lies past the commit log's recovered end, when
  they make the timer log's tail: zeroed, so the next start's recover cuts the log before
  them instead of keeping units whose reads fail (and would read the records the broker
  writes there after the start);
* wheel slots whose lastPos points at or past where recover cuts the log and that hold no
  unit before it: zeroed, so the next units put there start a new chain (prevPos -1)
  instead of pointing at a stale position: the loops ``timerChainLoops`` predicts.

A slot that mixes kept units before recover's rescan with units past the cut cannot be
mended by zeros (its lastPos would need rewriting): it is left, and said so.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from rmqtool.formats.timerwheel import SLOT_SIZE
from rmqtool.recovery.timer.start import TimerStart
from rmqtool.store.timer.timerlog import deliver_times


@dataclasses.dataclass(frozen=True)
class TimerRepair:
    unit_ranges: list  # (timer log file path, start, end, first unit position, units)
    slots: list  # (slot index, lastPos) to zero
    left: list  # (slot index, why) not repaired
    cut_at: int  # where the next start's recover will cut the log once repaired


def plan_timer_repair(start: TimerStart) -> TimerRepair:
    load = start.load
    if not load.loadable:
        return TimerRepair([], [], [], load.cut_at)
    store, disk = start.store, start.disk_log
    cols = disk.columns  # the units in position order, as columns (no unit objects: a million of them)
    kept = cols[cols["position"] < load.cut_at]
    offset_py, size_py = kept["offset_py"].astype(np.int64), kept["size_py"].astype(np.int64)
    beyond = offset_py > store.commit_log_max - size_py  # offsetPy + sizePy past the end (no overflow)
    past = np.flatnonzero((offset_py >= store.commit_log_min) & beyond)
    cut = load.cut_at
    ranges = []
    if len(past):
        first = int(kept["position"][past[0]])
        if beyond[past[0]:].all():
            cut = first
            for f in disk.files:
                lo, hi = max(first, f.base_offset), min(load.cut_at, f.end)
                if lo < hi:
                    n = int(np.count_nonzero((kept["position"] >= lo) & (kept["position"] < hi)))
                    ranges.append((f.path, lo - f.base_offset, hi - f.base_offset, lo, n))
    precision = load.settings.precision_ms
    slots, left = [], []
    wheel = start.disk_wheel_slots if start.disk_wheel is not None and (start.disk_wheel["last_pos"] >= cut).any() \
        else []  # only a slot whose lastPos is at or past the cut has anything to repair
    if wheel:
        # the newest unit before the cut of each slot time (deliver time // precision)
        remaining = kept[kept["position"] < cut]
        times = (deliver_times(remaining) // precision).tolist()
        newest = dict(zip(times, remaining["position"].tolist()))  # positions ascend: the last one is the newest
        for s in wheel:
            if s.last_pos < cut:
                continue
            mine = newest.get(s.time_value)
            if mine is None:
                slots.append((s.index, s.last_pos))
            elif mine < load.rescan_from:
                left.append((s.index, f"lastPos {s.last_pos} is past the cut at {cut} and its other units lie before "
                                      f"recover's rescan from {load.rescan_from}: only rewriting lastPos mends it"))
    return TimerRepair(ranges, slots, left, cut)


def slot_range(index: int) -> tuple[int, int]:
    return index * SLOT_SIZE, (index + 1) * SLOT_SIZE
