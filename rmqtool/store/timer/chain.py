"""A wheel slot's chain: its units from lastPos back through each unit's prevPos.

``TimerMessageStore.dequeue`` walks it so, reading each position without checking it,
until a prevPos of -1. A chain can also end on bytes that are no unit (a zeroed tail: the
engine reads prevPos 0 from them and goes on at position 0), on a position no timer log
file holds, past the read position the engine has after recover, or come back to a
position it already visited: a loop dequeue never leaves. The walk stops at the first
of these and says which.
"""
from __future__ import annotations

import dataclasses

from rmqtool.formats.timerwheel import DEFAULT_TIMER_PRECISION_MS, SLOTS_TOTAL
from rmqtool.store.timer.timerlog import TimerLog

END_MINUS_ONE = "minusOne"  # prevPos -1: the slot's first unit reached, as it should
END_LOOP = "loop"  # a position visited before: dequeue walks this loop forever
END_BAD_UNIT = "badUnit"  # the bytes at the position are no unit (size != 52 or a bad magic)
END_PAST_LOG_END = "pastLogEnd"  # at or past the end of the last timer log file
END_NO_FILE = "noFile"  # before the first file, in a missing file, or negative
END_BEYOND_READ_POSITION = "beyondReadPosition"  # past the read end given (the engine reads no further)


@dataclasses.dataclass(frozen=True, slots=True)
class Chain:
    last_pos: int  # where the walk started (the slot's lastPos)
    positions: tuple[int, ...]  # units visited, newest first (a bad unit's position included)
    end: str  # END_*
    end_position: int  # the position the walk stopped at (-1 for END_MINUS_ONE)
    loops_back_to: int | None  # END_LOOP: the position visited again
    units_of_other_slots: int  # units on the chain whose deliver time has another slot index


def walk_chain(log: TimerLog, last_pos: int, *, slot_index: int | None = None, read_end: int | None = None,
               precision_ms: int = DEFAULT_TIMER_PRECISION_MS, slots: int = 2 * SLOTS_TOTAL) -> Chain:
    """Walk from ``last_pos``. ``read_end``: the log's read position (after recover: where it
    cut); positions at or past it end the walk. ``slot_index``: count units of other slots."""
    positions: list[int] = []
    seen: set[int] = set()
    others = 0
    pos = last_pos
    log_end = log.log_end
    while True:
        if pos == -1:
            return Chain(last_pos, tuple(positions), END_MINUS_ONE, -1, None, others)
        if pos in seen:
            return Chain(last_pos, tuple(positions), END_LOOP, pos, pos, others)
        if read_end is not None and pos >= read_end:
            return Chain(last_pos, tuple(positions), END_BEYOND_READ_POSITION, pos, None, others)
        if pos >= log_end:
            return Chain(last_pos, tuple(positions), END_PAST_LOG_END, pos, None, others)
        if log.file_of(pos) is None:
            return Chain(last_pos, tuple(positions), END_NO_FILE, pos, None, others)
        unit = log.unit_at(pos)
        if unit is None or not unit.readable:
            positions.append(pos)
            return Chain(last_pos, tuple(positions), END_BAD_UNIT, pos, None, others)
        positions.append(pos)
        seen.add(pos)
        if slot_index is not None and unit.slot_index(precision_ms, slots) != slot_index:
            others += 1
        pos = unit.prev_pos
