"""The timer start's bulk paths give what the one-unit-at-a-time rules give: the log model's
row columns are the units a rescan accepts (read unit by unit up to each write position), its
chains walked all at once are the chains dequeue walks unit by unit, and recover's slot
revisions applied a file at a time leave the wheel as reviseSlot called unit by unit does.
(The fixtures' truth is checked through these paths by test_timer_recovery/verify.)"""
from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import examples
from rmqtool.formats.timerlog import UNIT_SIZE, UNIT_STRUCT
from rmqtool.formats.timerwheel import SLOTS_TOTAL
from rmqtool.recovery.timer.log_model import TimerLogFile, TimerLogModel
from rmqtool.recovery.timer.wheel_model import IGNORE, WheelModel, WheelSlot
from rmqtool.store.timer.chain import walk_chain, walk_chains

PRECISION = 1000
T0 = 1_800_000_000_000
FILE_SIZE = UNIT_SIZE * 6 + 20
WRAP = 2 * SLOTS_TOTAL * PRECISION  # one turn of the wheel: the same slot index, another time

# a time: a few seconds (some ms apart within one), some a wheel turn later (same index)
times = st.builds(lambda s, ms, turn: T0 + s * PRECISION + ms + turn * WRAP,
                  st.integers(0, 4), st.sampled_from([0, 1, 999]), st.integers(0, 1))


@settings(max_examples=examples(30), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 1), st.integers(-1, 500), st.integers(0, 9)), max_size=4),
       st.lists(st.tuples(times, st.integers(0, 10_000)), max_size=40))
def test_revise_many_is_revise_slot_unit_by_unit(held, revisions):
    slots = {}
    for s, turn, pos, num in held:
        t = T0 + s * PRECISION + turn * WRAP
        slots[(t // PRECISION) % (2 * SLOTS_TOTAL)] = WheelSlot((t // PRECISION) % (2 * SLOTS_TOTAL), t // PRECISION,
                                                                 pos, pos, num, 0)
    one, bulk = WheelModel(slots.values(), PRECISION), WheelModel(slots.values(), PRECISION)
    for t, pos in revisions:
        one.revise_slot(t, IGNORE, pos, True)
    bulk.revise_many(np.array([t for t, _ in revisions], dtype=np.int64),
                     np.array([p for _, p in revisions], dtype=np.int64))
    assert {i: vars(s) for i, s in bulk.slots.items()} == {i: vars(s) for i, s in one.slots.items()}


def _unit(kind: int, prev: int, t: int) -> bytes:
    if kind == 0:  # nothing written
        return bytes(UNIT_SIZE)
    size, magic = (UNIT_SIZE, kind % 4) if kind < 5 else (51, 1) if kind == 5 else (UNIT_SIZE, 0x20)
    return UNIT_STRUCT.pack(size, prev, magic, t, 1000, 4096 + prev, 300, 7, 0)


class _UnitByUnit:
    """The model read unit by unit (no row interface): how dequeue reads it."""

    def __init__(self, model: TimerLogModel):
        self.log_end, self.file_of, self.unit_at = model.log_end, model.file_of, model.unit_at


log_files = st.lists(st.tuples(
    st.lists(st.tuples(st.integers(0, 7), st.integers(-1, 3 * FILE_SIZE // UNIT_SIZE), times), max_size=6),
    st.integers(0, FILE_SIZE), st.integers(0, FILE_SIZE)), min_size=1, max_size=3)


@settings(max_examples=examples(30), deadline=None)
@given(log_files, st.lists(st.integers(-1, 3 * FILE_SIZE // UNIT_SIZE + 2), min_size=20, max_size=40))
def test_model_rows_and_chains_are_read_unit_by_unit(files, heads):
    model = TimerLogModel([
        TimerLogFile(f"{i * FILE_SIZE:020d}", i * FILE_SIZE, FILE_SIZE,
                     bytearray(b"".join(_unit(k, -1 if p < 0 else p * UNIT_SIZE, t) for k, p, t in units)[:cut]),
                     wrote=wrote)
        for i, (units, cut, wrote) in enumerate(files)])
    expected = []
    for f in model.live:
        for rel in range(0, f.wrote - UNIT_SIZE + 1, UNIT_SIZE):
            unit = model.unit_at(f.from_offset + rel)
            if unit is None or not unit.readable:
                break
            expected.append(unit)
    assert model.columns.tolist() == [dataclasses.astuple(u) for u in expected]
    lasts = [-1 if h < 0 else h * UNIT_SIZE + (7 if h % 5 == 4 else 0) for h in heads]
    indexes = [h % 3 for h in heads]
    by_unit = _UnitByUnit(model)
    want = [walk_chain(by_unit, p, slot_index=s, read_end=model.max_offset, precision_ms=PRECISION)
            for p, s in zip(lasts, indexes)]
    assert walk_chains(model, lasts, slot_indexes=indexes, read_end=model.max_offset, precision_ms=PRECISION) == want


# properties strings around REAL_TOPIC: duplicates, entries that only contain the name, empty
# or non-ASCII values, a second \u0001, a trailing separator, bytes that are no UTF-8
_pieces = st.sampled_from([b"REAL_TOPIC\x01TopicA", b"REAL_TOPIC\x01TopicB", b"REAL_TOPIC\x01", b"XREAL_TOPIC\x01C",
                           b"REAL_TOPIC\x01T\x01x", b"REAL_TOPIC\x01\xc3\xa9t", b"UNIQ_KEY\x01AB12", b"\xff\xfe",
                           b"KEYS\x01REAL_TOPIC\x01D", b"", b"TIMER_OUT_MS\x011800000000000"])


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.tuples(st.lists(_pieces, max_size=4), st.booleans()), min_size=1, max_size=6), st.binary(max_size=3))
def test_real_topic_hashes_read_as_the_broker_reads_properties(records, gap):
    from rmqtool.formats.indexfile import java_string_hash
    from rmqtool.formats.properties import bytes_to_properties
    from rmqtool.store.timer.records import _real_topic_hashes
    buf, starts, ends = b"", [], []
    for pieces, trailing in records:
        props = b"\x02".join(pieces) + (b"\x02" if trailing else b"")
        buf += gap
        starts.append(len(buf))
        buf += props
        ends.append(len(buf))
    codes, known = _real_topic_hashes(buf, np.array(starts, np.int64), np.array(ends, np.int64), {})
    plain = {b"REAL_TOPIC\x01TopicA", b"REAL_TOPIC\x01TopicB"}
    for (pieces, _t), s, e, code, ok in zip(records, starts, ends, codes.tolist(), known.tolist()):
        real = bytes_to_properties(buf[s:e])[0].get("REAL_TOPIC")
        if ok:
            assert real is not None and code == java_string_hash(real)
        # the common record is read in bulk, when something between records ends a value (in a
        # commit log the next record's header; here a gap holding a separator): a value run on
        # into the next record only sends that one to the careful path, never to a wrong hash
        if (sum(p in plain for p in pieces) == 1 and all(p in plain or p.startswith((b"UNIQ_KEY", b"TIMER"))
                                                         for p in pieces) and (b"\x01" in gap or b"\x02" in gap)):
            assert ok
