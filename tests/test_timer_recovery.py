"""recovery/timer: TimerMessageStore.load/recover simulated on each timer-crash variant equals
what the real 5.3.3 engine left (truth.json ``timerAfterLoad``: state getters, wheel in
memory, timer log units, chains), at the fake clock of that run; and the run predicted from
it shows what the engine then did (loops, stranded, dropped, enqueued again)."""
from __future__ import annotations

import copy
import json

import pytest

from conftest import V5, load_truth
from helpers import expand_store
from rmqtool.recovery.outcome import Settings, simulate
from rmqtool.recovery.plan import plan_recovery
from rmqtool.report.plans import _timer_lines
from rmqtool.recovery.timer.load import TimerSettings
from rmqtool.recovery.timer.next_run import walk_chains
from rmqtool.recovery.timer.start import timer_start

CRASH = V5 / "timer-crash"
VARIANTS = sorted(p.name for p in CRASH.iterdir() if (p / "truth.json").is_file())
FIXTURE_SETTINGS = TimerSettings(roll_window_slots=600)  # the fixtures' timerRollWindowSlot


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """Each variant's input store expanded, its start simulated at the truth's clock."""
    root = tmp_path_factory.mktemp("timer-recovery")
    out = {}
    for v in VARIANTS:
        truth = load_truth(CRASH / v / "truth.json")
        store = expand_store(CRASH / v / "input/store", root / v)
        now = truth["timerAfterLoad"]["state"]["fakeNowMs"]
        out[v] = truth, timer_start(store, simulate(store, Settings()), now, FIXTURE_SETTINGS)
    return out


def _truth_end(c: dict) -> tuple:
    end = c["end"]
    if end.startswith("beyondReadPositionAt"):
        return "beyondReadPosition", int(end[len("beyondReadPositionAt"):])
    return end, c["loopsBackTo"] if end == "loop" else -1


@pytest.mark.parametrize("variant", VARIANTS)
def test_load_equals_the_engine(started, variant):
    truth, start = started[variant]
    after = truth["timerAfterLoad"]
    load = start.load
    assert load.loadable
    state = load.state()
    state.pop("timingCountInMemory", None)  # load.timing_count: checked below
    want = copy.deepcopy(after["state"])
    for key in ("fakeNowMs", "timingCountInMemory"):
        want.pop(key)
    if not load.checkpoint.present:  # a new DataVersion: the clock when the checkpoint was made, before now
        made = want["checkpointInMemory"].pop("dataVersionTimestamp")
        assert truth["clock"]["fakeEpochAtRestartS"] * 1000 <= made <= state["checkpointInMemory"].pop(
            "dataVersionTimestamp")
    assert state == want
    if load.timing_count is not None:
        assert load.timing_count == after["state"]["timingCountInMemory"]
    # the wheel in memory
    assert [s.row(1000) for s in load.wheel.used()] == after["wheelSlotsInMemory"]
    # the timer log: files, their write positions, the units before the cut
    assert [(f.name, f.from_offset, f.wrote) for f in load.log.live] == [
        (f["file"], f["fileFromOffset"], f["wrotePosition"]) for f in after["timerLog"]["files"]]
    units = [u for f in load.log.live for u in _units(load.log, f)]
    assert [(u.position, u.prev_pos, u.magic, u.curr_write_time, u.delayed_time, u.offset_py, u.size_py,
             u.hash_code_of_real_topic) for u in units] == [
        (u["position"], u["prevPos"], u["magic"], u["currWriteTime"], u["delayedTime"], u["offsetPy"],
         u["sizePy"], u["hashCodeOfRealTopic"]) for u in after["timerLog"]["units"]]
    # every used slot's chain as dequeue would walk it now
    chains = {c.index: c for c in walk_chains(load)}
    for c in after["chains"]:
        got = chains[c["index"]]
        assert (got.time_ms, list(got.chain.positions), got.chain.units_of_other_slots) == (
            c["timeMs"], c["chain"], c["unitsOfOtherSlots"]), c["index"]
        assert (got.chain.end, got.chain.end_position) == _truth_end(c), c["index"]
    assert len(chains) == len(after["chains"])
    assert load.cut_at == truth["summary"]["timerLogCutTo"]


def _units(log, f):
    for rel in range(0, f.wrote - 51, 52):
        u = log.unit_at(f.from_offset + rel)
        if u is None or not u.readable:
            return
        yield u


def test_runs_show_what_the_engine_did(started):
    """The predicted run: b's enqueue again makes the loops the engine made; d strands q1-03;
    e's s4 units are dropped; c enqueues the whole queue again; a is clean."""
    truth, a = started["a-as-is"]
    assert (a.run.first_loop, a.run.stranded, a.run.dropped) == (None, [], [])
    truth, b = started["b-timerlog-tail-zeroed"]
    loops = {i: at for i, end, at in truth["onDiskAfterShutdown"]["chainsNotEndingAtMinusOne"] if end == "loop"}
    got = {c.index: c.chain.loops_back_to for c in b.run.chains if c.chain.end == "loop"}
    assert got == loops
    assert b.run.first_loop.index == min(loops, key=lambda i: b.load.wheel.slots[i].time_value)
    written = [u for u in truth["onDiskAfterShutdown"]["timer"]["timerLogUnits"] if u["position"] >= b.load.cut_at]
    assert [(e.position, e.prev_pos, e.magic) for e in b.run.enqueued if e.action == "unit"] == [
        (u["position"], u["prevPos"], u["magic"]) for u in written]
    truth, c = started["c-timercheck-deleted"]
    assert c.load.enqueue_again == (0, 97) and c.load.read_time_reason == "sevenDayFloor"
    truth, d = started["d-wheel-slot-zeroed-outside-rescan"]
    stranded = truth["summary"]["strandedBehindReadTime"]
    assert [u.position for u in d.run.stranded] == [
        u["position"] for u in truth["onDiskBeforeLoad"]["timer"]["timerLogUnits"]
        if u["commitLogRecord"]["label"] in stranded]
    truth, e = started["e-commitlog-truncated"]
    lost = set(truth["summary"]["dueButNotDeliveredAtEnd"])
    dropped = {u["position"] for u in truth["onDiskBeforeLoad"]["timer"]["timerLogUnits"]
               if u["commitLogRecord"]["label"] in lost}
    assert dropped <= {u.position for u in e.run.dropped}


@pytest.mark.parametrize("variant", ["b-timerlog-tail-zeroed", "c-timercheck-deleted"])
def test_recover_plan_has_the_timer_section(started, variant, tmp_path):
    """recover's plan says what the start does to the timer: the state after load is the engine's."""
    truth, start = started[variant]
    after = truth["timerAfterLoad"]
    plan = plan_recovery(start.files.root, now_ms=after["state"]["fakeNowMs"])
    section = plan.to_json()["timer"]
    state = section["state_after_load"]
    want = {k: copy.deepcopy(v) for k, v in after["state"].items() if k != "fakeNowMs"}
    if "timingCountInMemory" not in state:  # no timermetrics file read: the engine's own empty table
        want.pop("timingCountInMemory")
    state["checkpointInMemory"].pop("dataVersionTimestamp")
    want["checkpointInMemory"].pop("dataVersionTimestamp")
    assert state == want
    assert (section["cut_at"], section["enqueue_again"]["from"]) == (
        truth["summary"]["timerLogCutTo"], after["state"]["currQueueOffset"])
    assert section["enqueue_again"]["to"] - section["enqueue_again"]["from"] == after["state"]["enqueueBehindMessages"]
    run = section["run"]
    if variant.startswith("b"):
        assert run["first_loop"]["fire_time_ms"] == truth["summary"]["endState"]["currReadTimeMs"]
    else:
        assert run["enqueued"]["delivered_at_once"] == len(truth["summary"]["redeliveredLabels"])
    lines = _timer_lines(section)
    assert any("loops" in line for line in lines) == variant.startswith("b")


def test_reload_of_the_clean_store_equals_the_engine(tmp_path):
    """timer/ (a clean shutdown) loaded again by the engine (truth ``reload``): the same state,
    no slot revised, every chain as the engine walked it."""
    truth = load_truth(V5 / "timer" / "truth.json")["reload"]
    after = truth["timerAfterLoad"]
    store = expand_store(V5 / "timer" / "store", tmp_path / "store")
    start = timer_start(store, simulate(store, Settings()), after["fakeNowMs"], FIXTURE_SETTINGS)
    want = {k: v for k, v in after.items() if k != "fakeNowMs"}
    assert start.load.state() == want  # timingCountInMemory too: the timermetrics file as the engine read it
    assert start.load.revised == [] == truth["wheelSlotsChangedByRecover"]
    chains = {c.index: c for c in walk_chains(start.load)}
    assert [(c["index"], c["chain"], _truth_end(c)) for c in truth["chainsAfterLoad"]] == [
        (i, list(chains[i].chain.positions), (chains[i].chain.end, chains[i].chain.end_position))
        for i in (c["index"] for c in truth["chainsAfterLoad"])]


@pytest.mark.parametrize("variant", ["a-as-is", "c-timercheck-deleted"])
def test_recover_takes_the_clock_verify_takes(variant, tmp_path):
    """recover --now: the plan's timer section is the start at that clock, as verify --now's.
    At the truth's clock the state after load is the engine's; a week past the timercheck's
    read time the engine's floor (now - 7 days + 60 s) is the read time, and the units the
    plan leaves behind it are the ones verify says are stranded (none where the timercheck is
    gone: the start enqueues the whole timer queue again)."""
    from helpers import cli_runner
    from rmqtool.cli.app import app
    truth = load_truth(CRASH / variant / "truth.json")
    store = expand_store(CRASH / variant / "input/store", tmp_path / "store")
    runner = cli_runner()

    def section(now: int) -> dict:
        r = runner.invoke(app, ["recover", str(store), "--now", str(now), "-f", "json"])
        assert r.exit_code in (0, 3), r.output
        return json.loads(r.stdout)["timer"]

    after = truth["timerAfterLoad"]["state"]
    at_truth = section(after["fakeNowMs"])
    assert at_truth["now_ms"] == after["fakeNowMs"]
    assert at_truth["read_time_ms"] == after["currReadTimeMs"]
    later = after["currReadTimeMs"] + 8 * 86_400_000
    floor = section(later)
    assert (floor["read_time_ms"], floor["read_time_reason"]) == (later - 7 * 86_400_000 + 60_000, "sevenDayFloor")
    r = runner.invoke(app, ["verify", str(store), "--only", "timer", "-f", "jsonl", "--now", str(later)])
    stranded = sum(f["units"] for f in map(json.loads, r.stdout.splitlines()) if f["finding"] == "timerUnitStranded")
    assert len(floor["run"]["skipped_by_read_time"]) + len(floor["run"]["stranded"]) == stranded
    # the crash left units pending past the read time; without a timercheck the start enqueues all again
    assert (stranded > 0) == (variant == "a-as-is")


@pytest.mark.parametrize("variant", VARIANTS)
def test_info_shows_the_queue_offset_and_lag_the_load_leaves(started, variant):
    """info's timer section: the queue offset the next start enqueues from and the enqueue lag
    are the engine's after its load (b: revised to 85, 12 behind; c: 0, the whole queue; e:
    clamped to 84), where the timercheck's offset was shown (97, and a lag of -13 for e); the
    timer log's end is where the load's recovery ends it."""
    from helpers import cli_runner
    from rmqtool.cli.app import app
    truth, start = started[variant]
    state = truth["timerAfterLoad"]["state"]
    r = cli_runner().invoke(app, ["info", str(start.files.root), "-f", "json"])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    timer = json.loads(r.stdout)["timer"]
    assert (timer["timer_queue_offset_at_start"], timer["enqueue_behind_messages"], timer["timer_log_recovered_end"]) == (
        state["currQueueOffset"], state["enqueueBehindMessages"], state["timerLogMaxOffset"])


def test_a_cut_of_written_units_is_left_to_the_start_and_said_until_redispatch_rebuilds(tmp_path):
    """A unit written before the end of the timer log damaged (its size 0): the start cuts the
    log there and enqueues the records of the units after it again. --apply mends the wheel's
    slots past the cut and leaves the cut to the start; the plan after it still says so (exit
    3, a timerLogCut finding, as verify's) where it said "nothing to recover" and exited 0, and
    applying it again writes nothing. redispatch --timer rebuilds the log: then both are clean."""
    from helpers import cli_runner
    from rmqtool.cli.app import app
    from rmqtool.store.timer.timerlog import scan_timer_log

    runner = cli_runner()
    store = expand_store(V5 / "timer" / "store", tmp_path / "store")
    log = scan_timer_log(store / "timerlog")
    unit = log.units[-3]  # two written units after it
    base = unit.position - unit.position % log.file_size
    with open(store / "timerlog" / f"{base:020d}", "r+b") as f:
        f.seek(unit.position - base)
        f.write(bytes(4))  # its size field

    def plan() -> tuple[int, dict]:
        r = runner.invoke(app, ["recover", str(store), "-f", "json"])
        return r.exit_code, json.loads(r.stdout)

    assert plan()[0] == 3
    assert runner.invoke(app, ["recover", str(store), "--apply", "--backup-dir", str(tmp_path / "b1")]).exit_code == 0
    code, doc = plan()
    assert code == 3 and not doc["actions"] and doc["timer"]["cut_at"] == unit.position
    assert [f["finding"] for f in doc["findings"]] == ["timerLogCut"]
    assert doc["timer"]["written_end"] == log.files[-1].end
    verify = runner.invoke(app, ["verify", str(store), "--only", "timer", "-f", "jsonl"])
    assert "timerLogCut" in {json.loads(x)["finding"] for x in verify.stdout.splitlines()}
    text = runner.invoke(app, ["recover", str(store)]).stdout
    assert "left to the start (timerLogCut)" in text and "nothing to recover" not in text
    again = runner.invoke(app, ["recover", str(store), "--apply", "--backup-dir", str(tmp_path / "b2")])
    assert again.exit_code == 0 and not (tmp_path / "b2").exists()
    assert runner.invoke(app, ["redispatch", str(store), "--timer", "--apply", "--backup-dir",
                               str(tmp_path / "b3")]).exit_code == 0
    assert plan()[0] == 0
    assert runner.invoke(app, ["verify", str(store), "--only", "timer"]).exit_code == 0
