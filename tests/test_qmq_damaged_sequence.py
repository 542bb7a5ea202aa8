"""A QMQ record whose sequence field is damaged (the payload CRC does not cover it): recover's
plan gives it no consumer-log unit (a unit for it would need the fill units of the whole gap:
billions for a high byte changed, which once ran a plan out of memory), lists it as unserved,
and exits 3 (salvage keeps it); the subject's other records keep their units, and QMQ's start
simulated still says the sequences are not served. A store without the damage lists none."""
from __future__ import annotations

import json
import types

import numpy as np
import pytest
from hypothesis import given, strategies as st

from conftest import FIXTURES
from helpers import busiest_subject, cli_runner, expand_store, qmq_records
from rmqtool.cli.app import app
from rmqtool.formats.qmq.consumerlog import FILL_WROTE_BYTES, FILL_WROTE_OFFSET
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE, RecordPrefix
from rmqtool.recovery.qmq.plan import SEQUENCE_DAMAGED, plan_recovery

SEQUENCE_AT = RecordPrefix.sizeof()  # the sequence follows magic, attributes and timestamp



@pytest.fixture()
def store(tmp_path):
    return expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "store")


def _damage(record, sequence: int) -> None:
    with open(record.path, "r+b") as f:
        f.seek(record.offset % PER_SEGMENT_FILE_SIZE + SEQUENCE_AT)
        assert int.from_bytes(f.read(8), "big", signed=True) == record.sequence
        f.seek(record.offset % PER_SEGMENT_FILE_SIZE + SEQUENCE_AT)
        f.write(sequence.to_bytes(8, "big", signed=True))


def test_an_undamaged_store_has_none(store):
    assert plan_recovery(store).records_unserved == ()


@pytest.mark.parametrize("which", ["many", "two"])
@pytest.mark.parametrize("sequence", [1 << 32, (1 << 62) + 5])
def test_a_damaged_sequence_is_left_unserved(store, which, sequence):
    records = qmq_records(store)
    counts = {}
    for r in records:
        counts[r.subject] = counts.get(r.subject, 0) + 1
    subject = max(counts, key=counts.get) if which == "many" else min(counts, key=counts.get)
    ours = [r for r in records if r.subject == subject]
    damaged = ours[len(ours) // 2]
    _damage(damaged, sequence)
    plan = plan_recovery(store)
    assert plan.records_unserved == ((damaged.offset, subject, sequence, SEQUENCE_DAMAGED),)
    for rewrite in plan.consumer_logs:  # no unit anywhere near the damaged sequence
        assert all(u.sequence < len(records) for u in rewrite.units)
    r = cli_runner().invoke(app, ["recover", str(store), "-f", "json"])
    assert r.exit_code == 3 and '"records_unserved"' in r.stdout and str(sequence) in r.stdout
    applied = cli_runner().invoke(app, ["recover", str(store), "--apply", "-f", "json"])
    # applied: 0, as a RocketMQ store's; the sequence still unserved is in the output
    assert applied.exit_code == 0 and plan_recovery(store).records_unserved == plan.records_unserved
    assert str(sequence) in json.dumps(json.loads(applied.stdout)["records_unserved"])


def test_a_sequence_written_twice_is_the_later_record_and_the_one_it_left_is_filled(store):
    """A record whose sequence field now holds its predecessor's: of two records of one sequence
    the later in the log stands for it (as QMQ's replay, which writes units in log order, would
    leave it), and the sequence nobody holds any more gets a fill unit."""
    records = qmq_records(store)
    subject, ours = busiest_subject(records)
    before, damaged = ours[len(ours) // 2 - 1], ours[len(ours) // 2]
    _damage(damaged, before.sequence)
    plan = plan_recovery(store)
    assert plan.records_unserved == ()
    (rewrite,) = [c for c in plan.consumer_logs if c.subject == subject]
    units = {u.sequence: u for u in rewrite.units}
    assert (units[before.sequence].wrote_offset, units[before.sequence].wrote_bytes) == (damaged.offset, damaged.size)
    assert (units[damaged.sequence].wrote_offset, units[damaged.sequence].wrote_bytes) == (
        FILL_WROTE_OFFSET, FILL_WROTE_BYTES)
    others = [r for r in ours if r is not before and r is not damaged]
    assert all(units[r.sequence].wrote_offset == r.offset for r in others if r.sequence in units)


def test_gaps_that_each_hang_on_but_together_spread_too_far_fill_no_more_than_the_log_holds(store):
    """Two damaged sequences, each within the slack of the one before (the log's unreadable
    bytes, none here, and the subject's own records) but together further: the rewrite fills
    no more sequences than that slack, and the record past it is left unserved."""
    subject, ours = busiest_subject(qmq_records(store))
    ours = sorted(ours, key=lambda r: r.sequence)
    slack, top = len(ours), ours[-1].sequence
    near, far = ours[len(ours) // 2], ours[len(ours) // 2 + 1]
    _damage(near, top + slack - 2)
    _damage(far, top + 2 * slack - 4)  # each gap under the slack, the two gaps together over it
    plan = plan_recovery(store)
    assert [u[:3] for u in plan.records_unserved] == [(far.offset, subject, top + 2 * slack - 4)]
    (rewrite,) = [c for c in plan.consumer_logs if c.subject == subject]
    assert rewrite.units.fill_units() <= slack


@given(sequences=st.lists(st.integers(-(1 << 63), (1 << 63) - 1), min_size=2, max_size=12, unique=True),
       unreadable=st.integers(0, 400))
def test_the_run_kept_is_the_longest_that_misses_no_more_than_the_slack(sequences, unreadable):
    from rmqtool.formats.qmq import messagelog as messagelog_format
    from rmqtool.recovery.qmq.plan import _hanging_together
    seq = np.array(sorted(sequences), np.int64)
    records = types.SimpleNamespace(sequence=seq)
    kept, apart = _hanging_together(records, np.arange(len(seq)), "s", unreadable)
    slack = unreadable // messagelog_format.header_size(1, messagelog_format.MESSAGE_LOG_MAGIC_V1) + len(seq)

    def missing(lo, hi):  # sequences no record of seq[lo:hi] holds, between its ends (Python ints: no wrap)
        return int(seq[hi - 1]) - int(seq[lo]) + 1 - (hi - lo)

    runs = [(lo, hi) for lo in range(len(seq)) for hi in range(lo + 1, len(seq) + 1) if missing(lo, hi) <= slack]
    best = max(hi - lo for lo, hi in runs)
    lo, hi = int(kept[0]), int(kept[-1]) + 1
    assert list(kept) == list(range(lo, hi)) and hi - lo == best and missing(lo, hi) <= slack
    assert sorted([*kept.tolist(), *apart.tolist()]) == list(range(len(seq)))


@given(have=st.sets(st.integers(-5, 40), max_size=20), first=st.integers(-5, 40), top=st.integers(-5, 45))
def test_salvage_s_missing_runs_are_the_sequences_not_held(have, first, top):
    from rmqtool.recovery.qmq.salvage import missing_runs
    missing = [q for q in range(first, top + 1) if q not in have]
    runs = missing_runs(have, first, top)
    assert [q for lo, hi in runs for q in range(lo, hi + 1)] == missing
    assert all(b[0] > a[1] + 1 for a, b in zip(runs, runs[1:]))  # runs apart, not touching


@pytest.mark.parametrize("sequence", [1 << 40, -(1 << 40)], ids=["high-byte", "negative"])
def test_salvage_lists_a_damaged_sequence_apart(store, sequence, tmp_path):
    """A record whose sequence field is damaged is kept (its payload proves it) and listed
    apart, with recover's rule; the missing sequences end at the subject's others (once they
    ran up to the damaged one, a trillion of them, and their walk never ended): its own is the
    one missing."""
    from rmqtool.recovery.qmq.salvage import salvage_qmq
    subject, ours = busiest_subject(qmq_records(store))
    damaged = ours[len(ours) // 2]
    _damage(damaged, sequence)
    result = salvage_qmq(store)
    assert [(r.subject, r.sequence, r.offset) for r in result.sequence_apart] == [(subject, sequence, damaged.offset)]
    assert damaged.offset in {r.offset for r in result.kept}
    assert result.missing[subject] == [[damaged.sequence, damaged.sequence]]
    res = cli_runner().invoke(app, ["salvage", str(store), "--out", str(tmp_path / "out.jsonl"), "-f", "json"])
    assert res.exit_code == 3, res.output
    doc = json.loads(res.stdout)
    assert [(a["subject"], a["sequence"], a["message_log_offset"]) for a in doc["sequences_apart"]] == \
        [(subject, sequence, damaged.offset)]
    table = cli_runner().invoke(app, ["salvage", str(store), "--out", str(tmp_path / "again.jsonl")])
    assert f"sequence {sequence}" in table.stdout and "apart" in table.stdout

REPLAYED = FIXTURES / "qmq" / "crash" / "g-lost-message-checkpoints" / "input"  # no checkpoint: all replayed


@pytest.mark.parametrize("ahead", [1 << 40, (1 << 62) - 1], ids=["high-byte", "past-a-java-long"])
def test_a_damaged_sequence_the_replay_reaches_is_where_the_start_never_finishes(tmp_path, ahead):
    """A record the replay reaches whose sequence is a trillion or more past its subject's:
    QMQ's writeUnit would fill every consumer log segment up to it with blank units (once the
    simulation did, and verify, recover and report never ended). The start is said to never
    finish there, naming the record (and the record, without a unit, is not one the replay
    "begins after": with no checkpoint it begins at the first); the repair's checkpoint puts
    the replay past it."""
    store = expand_store(REPLAYED, tmp_path / "store")
    subject, ours = busiest_subject(qmq_records(store))
    damaged = ours[1]
    _damage(damaged, damaged.sequence + ahead)  # past a Java long, sequence x unit size wraps
    r = cli_runner().invoke(app, ["verify", str(store), "-f", "jsonl"])
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    (stop,) = [f for f in rows if f["finding"] == "storeNotLoadable"]
    # where sequence x unit size wraps below 0, writeUnit starts the log again at that negative
    # offset (every segment deleted) and the subject's next record is the one it cannot reach
    blocked = damaged if ahead == 1 << 40 else ours[2]
    assert (stop["path"], stop["offset"]) == (str(blocked.path), blocked.offset % PER_SEGMENT_FILE_SIZE)
    blocked_sequence = damaged.sequence + ahead if blocked is damaged else blocked.sequence
    assert "never finishes starting" in stop["message"] and f"sequence {blocked_sequence}," in stop["message"]
    if blocked is not damaged:  # the record that wrapped is named beside the one the replay cannot reach
        assert (f"the record at message log offset {damaged.offset} has sequence {damaged.sequence + ahead}, whose "
                f"unit offset") in stop["message"]
    # no checkpoint: the replay starts at the log's first record, so no record is one it begins after
    assert not [f for f in rows if f["finding"] == "messageNotInConsumerLog"]
    plan = plan_recovery(store)
    assert plan.broker.refusal.kind == "hangs"
    copy = tmp_path / "copy"
    assert cli_runner().invoke(app, ["recover", str(store), "--apply", "--to", str(copy)]).exit_code == 0
    assert plan_recovery(copy).broker.started


def test_a_sequence_a_few_segments_ahead_is_filled_as_qmq_fills_it(tmp_path):
    """Two consumer log segments ahead the simulation still follows the replay: every sequence
    from the subject's next one up to the record's is a fill unit, served as SUCCESS with no
    message, and the record is served at its sequence."""
    from rmqtool.formats.qmq.consumerlog import SEGMENT_TOTAL_UNIT
    store = expand_store(REPLAYED, tmp_path / "store")
    subject, ours = busiest_subject(qmq_records(store))
    last = ours[-1]
    sequence = last.sequence + 2 * SEGMENT_TOTAL_UNIT + 5
    _damage(last, sequence)
    broker = plan_recovery(store).broker
    assert broker.started
    (s,) = [s for s in broker.subjects if s.subject == subject]
    assert s.fill_units == ((last.sequence, sequence - 1),)
