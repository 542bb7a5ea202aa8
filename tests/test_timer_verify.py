"""verify's timer checks on the timer-crash variants (at each run's fake clock): each finds the
damage the real 5.3.3 engine then showed, at the file and offset where it lies, with the
consequence the engine showed (truth.json ``summary``, ``onDiskAfterShutdown``); the as-is
store and timer/ give no error, only the timer's state."""
from __future__ import annotations

import json

import pytest

from conftest import V5, load_truth
from helpers import expand_store
from rmqtool.findings import (TIMER_CHAIN_LOOPS, TIMER_LOG_CUT, TIMER_STATE, TIMER_UNIT_PAST_COMMIT_LOG,
                              TIMER_UNIT_STRANDED, TIMERCHECK_MISSING, Consequence, Severity)
from rmqtool.verify.run import Verify, VerifyOptions

CRASH = V5 / "timer-crash"
UNIT, SLOT = 52, 32  # the timer log unit, the wheel slot (fixtures README)
CASES = {"timer": (V5 / "timer", "store")}
CASES.update({v.name: (v, "input/store") for v in sorted(CRASH.iterdir()) if (v / "truth.json").is_file()})


def _clock(truth: dict) -> int:
    after = truth["timerAfterLoad"]["state"] if "timerAfterLoad" in truth else truth["reload"]["timerAfterLoad"]
    return after["fakeNowMs"]


@pytest.fixture(scope="module")
def verified(tmp_path_factory):
    """Each store's timer findings, verify run once a store at its truth's clock."""
    root = tmp_path_factory.mktemp("timer-verify")
    out = {}
    for name, (source, sub) in CASES.items():
        truth = load_truth(source / "truth.json")
        store = expand_store(source / sub, root / name)
        found = list(Verify(store, VerifyOptions(only=("timer",), jobs=1, now_ms=_clock(truth))).findings())
        out[name] = truth, store, found
    return out


def _by_id(found, finding_id):
    return [f for f in found if f.id == finding_id]


@pytest.mark.parametrize("name", ["timer", "a-as-is"])
def test_clean_stores_give_no_error_only_the_state(verified, name):
    truth, store, found = verified[name]
    assert not [f for f in found if f.severity is not Severity.INFO]
    (state,) = _by_id(found, TIMER_STATE)
    after = truth["timerAfterLoad"]["state"] if "timerAfterLoad" in truth else truth["reload"]["timerAfterLoad"]
    assert state.details["pending"] == after["dequeueBehindMessages_allCongestNum"]
    assert state.details["read_time_ms"] == after["currReadTimeMs"]
    assert state.details["timer_queue_offset"] == after["currQueueOffset"]


def test_metrics_drift_names_only_the_topics_whose_count_is_not_the_pending_messages(verified):
    """timer/: timermetrics against the messages truth says are pending (outcome notDelivered, by
    the topic they were put to); a recall whose delete unit rolled nets out with the unit it
    recalls (TimerPayTopic was said to drift: 6 against 8 units)."""
    import collections
    from rmqtool.findings import TIMER_METRICS_DRIFT
    truth, _store, found = verified["timer"]
    topic_of = {p["label"]: p["topic"] for p in truth["puts"]}
    pending = collections.Counter(topic_of[label] for label, o in truth["outcomes"].items()
                                  if o.get("outcome") == "notDelivered")
    counts = truth["reload"]["timerAfterLoad"]["timingCountInMemory"]["timingCount"]
    differ = {t for t, c in counts.items() if c["count"] != pending[t]}
    drift = _by_id(found, TIMER_METRICS_DRIFT)
    assert set(drift[0].details["topics"] if drift else ()) == differ
    assert "TimerPayTopic" not in differ


def test_b_cut_log_loops(verified):
    truth, store, found = verified["b-timerlog-tail-zeroed"]
    m = truth["mutation"]
    (cut,) = _by_id(found, TIMER_LOG_CUT)
    size = truth["timerAfterLoad"]["timerLog"]["files"][0]["fileSize"]
    assert (cut.path, cut.offset, cut.consequence) == (str(store / m["file"]), m["zeroedFromPosition"] % size,
                                                      Consequence.LOOPS)
    loops = {i: at for i, end, at in truth["onDiskAfterShutdown"]["chainsNotEndingAtMinusOne"] if end == "loop"}
    got = _by_id(found, TIMER_CHAIN_LOOPS)
    assert {(f.path, f.offset, f.details["loops_back_to"]) for f in got} == {
        (str(store / "timerwheel"), i * SLOT, at) for i, at in loops.items()}
    assert {f.consequence for f in got} == {Consequence.LOOPS}
    assert truth["summary"]["readTimeStalled"]
    # the read time stalls at the first loop's slot: the engine's read time at the end of its run
    first = next(f for f in got if "units_after" in f.details)
    assert first.details["fire_time_ms"] == truth["summary"]["endState"]["currReadTimeMs"]


def test_c_lost_timercheck_redelivers(verified):
    truth, store, found = verified["c-timercheck-deleted"]
    (f,) = _by_id(found, TIMERCHECK_MISSING)
    after = truth["timerAfterLoad"]["state"]
    assert (f.path, f.offset, f.consequence) == (str(store / "config/timercheck"), None, Consequence.REDELIVERS)
    assert f.details["enqueued_again"] == after["enqueueBehindMessages"]
    # every message delivered before the crash is due at once and its old unit is walked again
    assert f.details["delivered_at_once"] == f.details["units_walked_again"] == len(truth["summary"]["redeliveredLabels"])
    assert not [x for x in found if x.severity is Severity.ERROR and x is not f]


def test_d_slot_outside_the_rescan_strands(verified):
    truth, store, found = verified["d-wheel-slot-zeroed-outside-rescan"]
    (f,) = _by_id(found, TIMER_UNIT_STRANDED)
    stranded = truth["summary"]["strandedBehindReadTime"]
    units = [u for u in truth["onDiskBeforeLoad"]["timer"]["timerLogUnits"] if u["commitLogRecord"]["label"] in stranded]
    assert (f.path, f.offset, f.consequence) == (str(store / "timerwheel"), units[0]["slotIndex"] * SLOT,
                                                Consequence.STRANDS)
    assert (f.details["units"], f.details["timer_log_offset"]) == (len(units), units[0]["position"])
    assert [x.id for x in found if x.severity is Severity.ERROR] == [TIMER_UNIT_STRANDED]


def test_e_units_past_the_commit_log_are_dropped(verified):
    truth, store, found = verified["e-commitlog-truncated"]
    (f,) = _by_id(found, TIMER_UNIT_PAST_COMMIT_LOG)
    end = truth["commitLogAfterLoad"]["maxPhyOffset"]
    past = [u for u in truth["onDiskBeforeLoad"]["timer"]["timerLogUnits"] if u["offsetPy"] + u["sizePy"] > end]
    size = truth["timerAfterLoad"]["timerLog"]["files"][0]["fileSize"]
    first = past[0]["position"]
    assert (f.path, f.offset, f.consequence) == (str(store / "timerlog" / f"{first - first % size:020d}"),
                                                first % size, Consequence.DROPS_MESSAGES)
    assert (f.details["units"], f.details["commit_log_offset"]) == (len(past), end)
    lost = set(truth["summary"]["dueButNotDeliveredAtEnd"])
    assert lost <= {u["commitLogRecord"]["label"] for u in past}
    assert [x.id for x in found if x.severity is Severity.ERROR] == [TIMER_UNIT_PAST_COMMIT_LOG]


def test_a_unit_across_a_timer_log_file_s_cut_end_is_dropped_and_said(tmp_path):
    """A timer log file cut inside a unit: the broker reads the missing bytes as zeros, so the
    unit is there with a record size of 0, its read fails when due and dequeue drops it.
    recover's plan says so; verify said nothing (its own reading of the file has no unit
    there), and now names the unit with the consequence the plan gives."""
    from helpers import cli_runner
    from rmqtool.cli.app import app
    from rmqtool.findings import TIMER_UNIT_RECORD_MISMATCH
    truth = load_truth(CRASH / "a-as-is" / "truth.json")
    store = expand_store(CRASH / "a-as-is" / "input/store", tmp_path / "store")
    files = sorted((store / "timerlog").iterdir())
    last = files[-1]
    with open(last, "r+b") as f:
        f.truncate(UNIT + 36)  # the second unit's fields up to offsetPy, sizePy and the rest gone
    clock = str(_clock(truth))
    plan = json.loads(cli_runner().invoke(app, ["recover", str(store), "--now", clock, "-f", "json"]).stdout)["timer"]
    dropped = plan["run"]["dropped"]
    assert dropped == [int(last.name) + UNIT]
    found = list(Verify(store, VerifyOptions(only=("timer",), jobs=1, now_ms=int(clock))).findings())
    said = [f for f in found if f.id in (TIMER_UNIT_RECORD_MISMATCH, TIMER_UNIT_PAST_COMMIT_LOG)
            and f.consequence == Consequence.DROPS_MESSAGES]
    assert [(f.details["timer_log_offset"], f.details["units"]) for f in said] == [(dropped[0], 1)]
    assert (said[0].path, said[0].offset) == (str(last), UNIT)
