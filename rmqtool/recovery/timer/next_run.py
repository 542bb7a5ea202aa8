"""What the timer store does once started on what load/recover left (:class:`TimerLoad`).

* Enqueue (``TimerEnqueueGetService`` / ``PutService``): the ``rmq_sys_wheel_timer`` queue
  from ``currQueueOffset`` to its max is read again; a record due before the write time is
  delivered at once (no unit), any other is appended to the timer log (``doEnqueue``: the
  roll rule, MAGIC_DELETE for a recall) with prevPos = its slot's lastPos *as the wheel has
  it*, so a lastPos that pointed into a cut tail makes a unit that points at itself or at a
  later unit: a chain that loops.
* Dequeue (``dequeue``): from ``currReadTimeMs`` on, slot by slot, each slot's chain walked
  from lastPos through prevPos until -1 or a read that fails; a chain that loops is walked
  forever (the read time never moves again); each unit's record is read (3 tries) and a
  unit whose record cannot be read is dropped silently.

The write time is the clock at start (a parameter).
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from rmqtool.formats.indexfile import java_string_hash
from rmqtool.formats.timerlog import MAGIC_DEFAULT, MAGIC_DELETE, MAGIC_ROLL
from rmqtool.recovery.timer.load import MessageStoreAtLoad, TimerLoad
from rmqtool.recovery.timer.log_model import pack_unit
from rmqtool.store.timer.chain import END_LOOP, Chain, ChainSet, walk_chain_set
from rmqtool.store.timer.timerlog import deliver_times, slot_indexes_of, units_of

TIMER_OUT_MS = "TIMER_OUT_MS"
REAL_TOPIC = "REAL_TOPIC"
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
UNIQ_KEY = "UNIQ_KEY"
KEYS = "KEYS"


def topic_hash(topic: str | None) -> int:
    """hashTopicForMetrics: String.hashCode of REAL_TOPIC, 0 for none."""
    return 0 if topic is None else java_string_hash(topic)


@dataclasses.dataclass
class Enqueued:
    queue_offset: int
    offset_py: int
    size_py: int
    deliver_ms: int | None  # TIMER_OUT_MS
    action: str  # "unit" | "deliverNow" | "missing" | "unparseable"
    position: int | None = None  # the unit appended
    prev_pos: int | None = None
    magic: int | None = None
    key: str | None = None


class SlotChain(NamedTuple):  # one a used slot: a tuple is the cheapest to make
    """A slot's chain as dequeue walks it (store/timer/chain.Chain) and the slot."""
    index: int
    time_ms: int
    chain: Chain


class SlotChains:
    """Every slot dequeue reaches, by time, and its chain (store/timer/chain.ChainSet): the
    chains stay arrays; iterating gives SlotChain tuples (for the few a finding names)."""

    def __init__(self, index, time_ms, chains: ChainSet):
        self.index, self.time_ms, self.chains = index, time_ms, chains

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, k: int) -> SlotChain:
        return SlotChain(int(self.index[k]), int(self.time_ms[k]), self.chains.chain(k))

    def __iter__(self):
        return (self[k] for k in range(len(self)))

    @property
    def lengths(self) -> np.ndarray:
        """Units each chain visits."""
        return self.chains.lengths

    def loops(self) -> list[SlotChain]:
        """The chains that loop, by time."""
        return [self[k] for k in self.chains.ending(END_LOOP).tolist()]

    def first_with_units(self) -> SlotChain | None:
        """The first chain (by time) that visits a unit."""
        some = np.flatnonzero(self.lengths > 0)
        return self[int(some[0])] if len(some) else None

    def units_after(self, time_ms: int) -> int:
        """Units the chains of later slots visit."""
        return int(self.lengths[self.time_ms > time_ms].sum())

    def units_before(self, time_ms: int) -> int:
        """Units the chains of earlier slots visit."""
        return int(self.lengths[self.time_ms < time_ms].sum())


@dataclasses.dataclass
class TimerRun:
    write_time_ms: int
    after: TimerLoad  # the wheel and log once the enqueue has appended
    enqueued: list  # Enqueued, in queue order
    chains: SlotChains  # by slot time from the read time on
    first_loop: SlotChain | None  # dequeue stops here for good
    stranded: list  # TimerLogUnit: pending units (due from the read time on) no chain reaches
    skipped: list  # TimerLogUnit: due between the checkpoint's read time and the 7-day floor: never read
    dropped: list  # TimerLogUnit: reached, but the record cannot be read
    walked_again: int = 0  # units in slots from the read time up to the write time (due now)


def predict_run(load: TimerLoad, store: MessageStoreAtLoad, write_time_ms: int) -> TimerRun:
    """The start at the clock ``write_time_ms``: enqueue, then dequeue walks."""
    precision = load.settings.precision_ms
    write = write_time_ms // precision * precision
    load = dataclasses.replace(load, wheel=load.wheel.fork(), log=load.log.fork())
    enqueued = _enqueue(load, store, write)
    chains = walk_chains(load, load.curr_read_time_ms)
    loops = chains.loops()
    first_loop = loops[0] if loops else None
    read_from = load.curr_read_time_ms // precision
    cp = load.checkpoint
    pending_from = cp.last_read_time_ms // precision if cp.present and cp.last_read_time_ms else read_from
    cols = load.log.columns  # every unit the log holds after load and the appends, in order
    due = deliver_times(cols) // precision
    magic = cols["magic"]
    pending = np.asarray(due >= min(read_from, pending_from), dtype=bool) & ~(((magic & MAGIC_DELETE) != 0) & ((magic & MAGIC_ROLL) == 0))
    skipped = pending & np.asarray(due < read_from, dtype=bool)
    reached = np.zeros(len(cols), bool)
    rows = load.log.rows_of(chains.chains.positions)
    reached[rows[rows >= 0]] = True
    stranded = pending & ~skipped & ~reached
    dropped = pending & ~skipped & reached
    if store.plain is not None and dropped.any():  # their own record there: readable (the rest read one by one)
        at = np.flatnonzero(dropped)
        dropped[at[store.plain(cols, at)]] = False
    dropped[np.flatnonzero(dropped)] = [store.record(o, n) is None for o, n in
                                        zip(cols["offset_py"][dropped].tolist(), cols["size_py"][dropped].tolist())]
    walked_again = chains.units_before(write)
    return TimerRun(write, load, enqueued, chains, first_loop, units_of(cols, np.flatnonzero(stranded)),
                    units_of(cols, np.flatnonzero(skipped)), units_of(cols, np.flatnonzero(dropped)), walked_again)


def _enqueue(load: TimerLoad, store: MessageStoreAtLoad, write: int) -> list[Enqueued]:
    lo, hi = load.enqueue_again
    out = []
    window = load.settings.roll_window * load.settings.precision_ms
    for qo in range(lo, hi):
        unit = store.queue_unit(0, qo)
        record = store.record(*unit) if unit is not None else None
        if record is None:
            out.append(Enqueued(qo, unit[0] if unit else -1, unit[1] if unit else -1, None, "missing"))
            continue
        props = record.properties
        key = props.get(KEYS) or props.get(UNIQ_KEY)
        try:
            delayed = int(props.get(TIMER_OUT_MS))
        except (TypeError, ValueError):
            out.append(Enqueued(qo, record.offset_py, record.size_py, None, "unparseable", key=key))
            continue
        if delayed < write:
            out.append(Enqueued(qo, record.offset_py, record.size_py, delayed, "deliverNow", key=key))
            continue
        out.append(_do_enqueue(load, record, delayed, write, window, qo, key))
    return out


def _do_enqueue(load: TimerLoad, record, delayed: int, write: int, window: int, qo: int, key) -> Enqueued:
    """doEnqueue: the unit appended at the log's end, the slot's lastPos its prevPos."""
    precision = load.settings.precision_ms
    deliver = delayed
    magic = MAGIC_DEFAULT
    if delayed - write >= window:
        magic |= MAGIC_ROLL
        third = load.settings.roll_window // 3 * precision
        delayed = write + (window // precision // 2) * precision if delayed - write - window < third else write + window
    if TIMER_DEL_UNIQKEY in record.properties:
        magic |= MAGIC_DELETE
    wheel = load.wheel
    slot = wheel.get_slot(delayed)
    first, last, num, smagic = (slot.first_pos, slot.last_pos, slot.num, slot.magic) if slot else (-1, -1, 0, 0)
    unit = pack_unit(last, magic, write, delayed - write, record.offset_py, record.size_py,
                     topic_hash(record.properties.get(REAL_TOPIC)))
    pos = load.log.append(unit)
    wheel.put_slot(delayed, pos if first == -1 else first, pos, num - 1 if magic & MAGIC_DELETE else num + 1, smagic)
    return Enqueued(qo, record.offset_py, record.size_py, deliver, "unit", pos, last, magic, key)


def walk_chains(load: TimerLoad, from_ms: int | None = None) -> SlotChains:
    """Every slot getSlot answers from ``from_ms`` on (every used slot when None), walked as
    dequeue walks it (up to the log's read position), by time: all at once
    (store/timer/chain.walk_chain_set)."""
    precision = load.settings.precision_ms
    index, value, last = _slots_from(load.wheel, from_ms, precision)
    chains = walk_chain_set(load.log, last, slot_indexes=index, read_end=load.log.max_offset, precision_ms=precision)
    try:
        time_ms = np.asarray(value, dtype=np.int64) * precision if isinstance(value, np.ndarray) else np.asarray(
            [v * precision for v in value], dtype=np.int64)
    except OverflowError:  # a time past a long (damage): Python's ints
        time_ms = np.asarray([v * precision for v in np.asarray(value).tolist()], dtype=object)
    return SlotChains(np.asarray(index, dtype=np.int64), time_ms, chains)


def _slots_from(wheel, from_ms: int | None, precision: int) -> tuple:
    """(index, stored time value, lastPos) of the used slots getSlot answers from ``from_ms``
    on (all when None), by (time, index)."""
    cols = wheel.used_columns()
    cols = wheel.time_safe_columns(cols) if cols is not None else None
    if cols is None or (from_ms is not None and abs(from_ms) >= 1 << 62):  # damage: Python's ints
        used = [s for s in sorted(wheel.used(), key=lambda s: (s.time_value, s.index))
                if from_ms is None or (s.time_value >= from_ms // precision
                                       and wheel.slot_index(s.time_value * precision) == s.index)]
        return [s.index for s in used], [s.time_value for s in used], [s.last_pos for s in used]
    index, value = cols["index"], cols["time_value"]
    order = np.lexsort((index, value))
    if from_ms is not None:
        order = order[(value[order] >= from_ms // precision)
                      & (slot_indexes_of(value[order] * precision, precision) == index[order])]
    return index[order], value[order], cols["last_pos"][order]
