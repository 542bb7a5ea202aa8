"""A wheel slot's chain: its units from lastPos back through each unit's prevPos.

``TimerMessageStore.dequeue`` walks it so, reading each position without checking it,
until a prevPos of -1. A chain can also end on bytes that are no unit (a zeroed tail: the
engine reads prevPos 0 from them and goes on at position 0), on a position no timer log
file holds, past the read position the engine has after recover, or come back to a
position it already visited: a loop dequeue never leaves. The walk stops at the first
of these and says which.

A sound chain only steps back (a unit's prevPos was written before it), so positions are
remembered for the loop check only once a step goes forward or stays; readable units are
followed through ``TimerLog.links`` (lists), so a million-unit log walks in well under a
second.
"""
from __future__ import annotations

from typing import NamedTuple

from rmqtool import native
from rmqtool.formats.timerwheel import DEFAULT_TIMER_PRECISION_MS, SLOTS_TOTAL
from rmqtool.store.timer.timerlog import TimerLog, unit_slot_index_array

END_MINUS_ONE = "minusOne"  # prevPos -1: the slot's first unit reached, as it should
END_LOOP = "loop"  # a position visited before: dequeue walks this loop forever
END_BAD_UNIT = "badUnit"  # the bytes at the position are no unit (size != 52 or a bad magic)
END_PAST_LOG_END = "pastLogEnd"  # at or past the end of the last timer log file
END_NO_FILE = "noFile"  # before the first file, in a missing file, or negative
END_BEYOND_READ_POSITION = "beyondReadPosition"  # past the read end given (the engine reads no further)


class Chain(NamedTuple):  # a hundred thousand of them a run: a tuple is the cheapest to make
    last_pos: int  # where the walk started (the slot's lastPos)
    positions: tuple[int, ...]  # units visited, newest first (a bad unit's position included)
    end: str  # END_*
    end_position: int  # the position the walk stopped at (-1 for END_MINUS_ONE)
    loops_back_to: int | None  # END_LOOP: the position visited again
    units_of_other_slots: int  # units on the chain whose deliver time has another slot index (with slot_index)


def walk_chain(log: TimerLog, last_pos: int, *, slot_index: int | None = None, read_end: int | None = None,
               precision_ms: int = DEFAULT_TIMER_PRECISION_MS, slots: int = 2 * SLOTS_TOTAL) -> Chain:
    """Walk from ``last_pos``. ``read_end``: the log's read position (after recover: where it
    cut); positions at or past it end the walk. ``slot_index``: count units of other slots."""
    # a TimerLog read from disk is followed by row; a model of the log as load leaves it
    # (recovery/timer's, which appends units) is read unit by unit
    by_row = hasattr(log, "links")
    position_of, prev_of, prev_row_of = log.links() if by_row else ((), (), ())
    slot_of = log.slot_indexes(precision_ms, slots) if slot_index is not None and by_row else None
    positions: list[int] = []
    seen: set[int] | None = None  # kept once a step does not go back
    others = 0
    log_end = log.log_end

    def end(kind: str, at: int, loops: int | None = None) -> Chain:
        return Chain(last_pos, tuple(positions), kind, at, loops, others)

    pos = last_pos
    while True:
        if pos == -1:
            return end(END_MINUS_ONE, -1)
        if seen is not None and pos in seen:
            return end(END_LOOP, pos, pos)
        if read_end is not None and pos >= read_end:
            return end(END_BEYOND_READ_POSITION, pos)
        row = log.row_of(pos) if by_row else -1
        if row < 0:  # not a readable unit's place: decode what is there, as dequeue would
            if pos >= log_end:
                return end(END_PAST_LOG_END, pos)
            if log.file_of(pos) is None:
                return end(END_NO_FILE, pos)
            unit = log.unit_at(pos)
            positions.append(pos)
            if unit is None or not unit.readable:
                return end(END_BAD_UNIT, pos)
            seen = set(positions) if seen is None else seen | {pos}
            if slot_index is not None and unit.slot_index(precision_ms, slots) != slot_index:
                others += 1
            pos = unit.prev_pos
            continue
        while True:  # readable units, followed by row
            positions.append(pos)
            if seen is not None:
                seen.add(pos)
            if slot_of is not None and slot_of[row] != slot_index:
                others += 1
            nxt = prev_row_of[row]
            if nxt < 0:  # -1, or no readable unit there: the outer loop says which
                pos = prev_of[row]
                break
            if nxt >= row and seen is None:  # a step that does not go back: a loop becomes possible
                seen = set(positions)
            pos = position_of[nxt]
            if seen is not None and pos in seen:
                return end(END_LOOP, pos, pos)
            if read_end is not None and pos >= read_end:
                return end(END_BEYOND_READ_POSITION, pos)
            row = nxt


# walk_chains: below this many chains still walking, and after _MORE_STEPS more array steps, the rest
# finish one at a time (a chain of a million units is not a million array steps; a few short
# ones left need not build walk_chain's lists of every unit)
_FEW = 16
_MORE_STEPS = 64
_ENDS = (None, END_MINUS_ONE, END_BEYOND_READ_POSITION)  # the ends walk_chains settles itself, by code
_ALL_ENDS = _ENDS + (END_LOOP, END_BAD_UNIT, END_PAST_LOG_END, END_NO_FILE)
_CODE = {e: k for k, e in enumerate(_ALL_ENDS)}


class ChainSet:
    """Many chains as arrays (what walk_chain_set gives): chain k started at ``last_pos[k]``,
    visited ``positions[starts[k]:stops[k]]`` (newest first), ended as ``ends[k]`` (a code
    into END_NAMES) at ``end_position[k]``; ``others[k]`` units of another slot index;
    ``loops_back_to``: chain -> the position visited again, for the chains that loop."""
    END_NAMES = _ALL_ENDS

    def __init__(self, last_pos, positions, starts, stops, ends, end_position, others, loops_back_to):
        self.last_pos, self.positions, self.starts, self.stops = last_pos, positions, starts, stops
        self.ends, self.end_position, self.others, self.loops_back_to = ends, end_position, others, loops_back_to

    def __len__(self) -> int:
        return len(self.last_pos)

    @property
    def lengths(self):
        return self.stops - self.starts

    def chain(self, k: int) -> Chain:
        """Chain k as walk_chain gives it."""
        a, b = int(self.starts[k]), int(self.stops[k])
        return Chain(int(self.last_pos[k]), tuple(self.positions[a:b].tolist()), _ALL_ENDS[int(self.ends[k])],
                     int(self.end_position[k]), self.loops_back_to.get(k), int(self.others[k]))

    def __getitem__(self, k: int) -> Chain:
        return self.chain(k)

    def __iter__(self):
        return (self.chain(k) for k in range(len(self)))

    def ending(self, end: str):
        """The chains (their numbers) that end so."""
        import numpy as np
        return np.flatnonzero(self.ends == _CODE[end])


def walk_chains(log: TimerLog, last_positions, *, slot_indexes=None, read_end: int | None = None,
                precision_ms: int = DEFAULT_TIMER_PRECISION_MS, slots: int = 2 * SLOTS_TOTAL) -> list[Chain]:
    """``[walk_chain(log, p, slot_index=s, ...) for p, s in ...]``, the same chains, walked all
    at once (walk_chain_set)."""
    return list(walk_chain_set(log, last_positions, slot_indexes=slot_indexes, read_end=read_end,
                               precision_ms=precision_ms, slots=slots))


def walk_chain_set(log: TimerLog, last_positions, *, slot_indexes=None, read_end: int | None = None,
                   precision_ms: int = DEFAULT_TIMER_PRECISION_MS, slots: int = 2 * SLOTS_TOTAL) -> ChainSet:
    """The chains of walk_chains as one ChainSet: each step moves every chain still walking
    back one unit (numpy), so a million units in a hundred thousand chains take a few dozen
    array steps. A chain that steps forward (a loop is possible), ends anywhere but -1 or the
    read end, or is one of the few still walking at the end, is walked by walk_chain."""
    import numpy as np
    heads = np.asarray(last_positions if isinstance(last_positions, np.ndarray) else list(last_positions),
                       dtype=np.int64)
    wanted = None if slot_indexes is None else np.asarray(
        slot_indexes if isinstance(slot_indexes, np.ndarray) else list(slot_indexes), dtype=np.int64)
    if "walk_columns" not in log._cache:  # contiguous: a walk step gathers at random rows
        position_col, prev_col = log.columns["position"], log.columns["prev_pos"]
        ordered = len(position_col) < 2 or bool((position_col[1:] > position_col[:-1]).all())
        log._cache["walk_columns"] = (np.ascontiguousarray(position_col), prev_col == -1, ordered)
    if "prev_rows" not in log._cache:
        log._cache["prev_rows"] = log.rows_of(log.columns["prev_pos"])
    position_col, minus_one, ordered = log._cache["walk_columns"]
    prev_rows = log._cache["prev_rows"]
    # the rows at or past the read end: from one row on when the rows go by position (they do)
    first_beyond = None if read_end is None or not ordered else int(np.searchsorted(position_col, read_end))
    end_code = np.zeros(len(heads), dtype=np.int8)  # index into _ENDS; 0: walk_chain decides
    end_at = np.full(len(heads), -1, dtype=np.int64)
    rows = log.rows_of(heads)
    startable = rows >= 0
    if read_end is not None:
        startable &= heads < read_end
    n = len(heads)
    walked = _walk_back_native(prev_rows, minus_one, position_col, np.where(startable, rows, -1), read_end,
                               end_code, end_at)
    if walked is None:
        all_ids, all_rows = _walk_back(prev_rows, minus_one, position_col, first_beyond, rows, startable, read_end,
                                       end_code, end_at)
    else:
        all_ids, all_rows = walked
    positions = position_col[all_rows]
    others = np.zeros(n, np.int64)
    if wanted is not None and len(all_ids):
        other = np.concatenate(([0], np.cumsum(
            unit_slot_index_array(log, precision_ms, slots)[all_rows] != wanted[all_ids])))
        cuts = np.flatnonzero(np.diff(all_ids)) + 1
        starts = np.concatenate(([0], cuts)).astype(np.int64)
        stops_at = np.concatenate((cuts, [len(all_ids)])).astype(np.int64)
        others[all_ids[starts]] = other[stops_at] - other[starts]
    loops: dict[int, int] = {}
    rest = np.flatnonzero(end_code == 0).tolist()
    if rest:  # the chains walk_chain walks: their units put in among the others, by chain
        more_ids, more_positions = [], []
        for i in rest:
            c = walk_chain(log, int(heads[i]), slot_index=None if wanted is None else int(wanted[i]),
                           read_end=read_end, precision_ms=precision_ms, slots=slots)
            end_code[i], end_at[i], others[i] = _CODE[c.end], c.end_position, c.units_of_other_slots
            if c.loops_back_to is not None:
                loops[i] = c.loops_back_to
            more_ids.append(np.full(len(c.positions), i, np.int64))
            more_positions.append(np.asarray(c.positions, dtype=np.int64))
        all_ids = np.concatenate([all_ids] + more_ids)
        positions = np.concatenate([positions] + more_positions)
        order = np.argsort(all_ids, kind="stable")
        all_ids, positions = all_ids[order], positions[order]
    counts = np.bincount(all_ids, minlength=n).astype(np.int64)
    stops = np.cumsum(counts)
    return ChainSet(heads, positions, stops - counts, stops, end_code, end_at, others, loops)


def _walk_back(prev_rows, minus_one, position_col, first_beyond, rows, startable, read_end, end_code, end_at):
    """The array walk: each step moves every chain still walking back one unit; a chain that
    stops on a unit whose prevPos is -1 gets code 1, one past the read end code 2 (end_at its
    position), any other is left at 0 (walk_chain walks it). (chain of each row, rows) of the
    settled chains, a chain's rows together, newest first."""
    import numpy as np
    ids, cur = np.flatnonzero(startable), rows[startable]
    walked_ids, walked_rows = [], []
    more = _MORE_STEPS
    while len(ids) > _FEW or (len(ids) and (more := more - 1) >= 0):  # the few left finish in walk_chain
        walked_ids.append(ids)
        walked_rows.append(cur)
        nxt = prev_rows[cur]
        stops = nxt < 0
        end_code[ids[stops & minus_one[cur]]] = 1
        go = ~stops & (nxt < cur)  # a step forward, or no readable unit next: walk_chain decides
        ids, cur = ids[go], nxt[go]
        if read_end is not None:
            beyond = cur >= first_beyond if first_beyond is not None else position_col[cur] >= read_end
            end_code[ids[beyond]] = 2
            end_at[ids[beyond]] = position_col[cur[beyond]]
            ids, cur = ids[~beyond], cur[~beyond]
    n = len(end_code)
    if not walked_ids:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    # each chain's units in the order walked: a chain walking at step s was walking at every
    # step before, so its unit of step s goes s places after its first (no sort)
    settled = end_code != 0
    counts = np.zeros(n, np.int64)
    for ids in walked_ids:
        counts[ids] += 1
    counts[~settled] = 0
    first = np.cumsum(counts) - counts
    all_rows = np.empty(int(counts.sum()), np.int64)
    for step, (ids, rows) in enumerate(zip(walked_ids, walked_rows)):
        keep = settled[ids]
        all_rows[first[ids[keep]] + step] = rows[keep]
    return np.repeat(np.arange(n, dtype=np.int64), counts), all_rows


def _walk_back_native(prev_rows, minus_one, position_col, heads, read_end, end_code, end_at):
    """:func:`_walk_back` in the native kernel, a chain at a time to its end (the chains the
    array walk leaves to walk_chain only for being few are settled here as walk_chain settles
    them); None without the kernel, or where it declines (then the array walk runs)."""
    import numpy as np
    kernel = native.kernel
    if kernel is None or not len(heads) or read_end is not None and not -(1 << 63) <= read_end < 1 << 63:
        return None
    n = len(heads)
    code = np.zeros(n, np.int8)
    at = np.full(n, -1, np.int64)
    counts = np.zeros(n, np.int64)
    rows = np.empty(len(prev_rows), np.int64)  # a sound log's chains share no unit
    written = kernel.walk_back(np.ascontiguousarray(prev_rows, np.int64), np.ascontiguousarray(minus_one, bool),
                               np.ascontiguousarray(position_col, np.int64), np.ascontiguousarray(heads, np.int64),
                               0 if read_end is None else read_end, read_end is not None, code, at, counts, rows)
    if written is None:
        return None
    end_code[:] = code
    end_at[:] = at
    return np.repeat(np.arange(n, dtype=np.int64), counts), rows[:written]
