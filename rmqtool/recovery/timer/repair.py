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

from rmqtool.formats.timerwheel import SLOT_SIZE
from rmqtool.recovery.timer.start import TimerStart


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
    kept = [u for u in disk.units if u.position < load.cut_at]
    past = [u for u in kept if u.offset_py >= store.commit_log_min and u.offset_py + u.size_py > store.commit_log_max]
    cut = load.cut_at
    ranges = []
    if past:
        first = past[0].position
        if all(u.offset_py + u.size_py > store.commit_log_max for u in kept if u.position >= first):
            cut = first
            for f in disk.files:
                lo, hi = max(first, f.base_offset), min(load.cut_at, f.end)
                if lo < hi:
                    n = sum(1 for u in kept if lo <= u.position < hi)
                    ranges.append((f.path, lo - f.base_offset, hi - f.base_offset, lo, n))
    precision = load.settings.precision_ms
    remaining = {}
    for u in kept:
        if u.position < cut:
            remaining.setdefault(u.deliver_time_ms // precision, []).append(u.position)
    slots, left = [], []
    for s in start.disk_wheel_slots:
        if s.last_pos < cut:
            continue
        mine = remaining.get(s.time_value, [])
        if not mine:
            slots.append((s.index, s.last_pos))
        elif max(mine) < load.rescan_from:
            left.append((s.index, f"lastPos {s.last_pos} is past the cut at {cut} and its other units lie before "
                                  f"recover's rescan from {load.rescan_from}: only rewriting lastPos mends it"))
    return TimerRepair(ranges, slots, left, cut)


def slot_range(index: int) -> tuple[int, int]:
    return index * SLOT_SIZE, (index + 1) * SLOT_SIZE
