"""recover --apply on timer stores: what it mends beyond the broker (units past the commit log's
end cut, slots pointing past the timer log's end cleared) with a backup undo gives back; and
random damage to the timer files never crashes verify or recover, nor makes them write."""
from __future__ import annotations

import json
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import V5, load_truth
from helpers import cli_runner, examples, expand_store, tree_fingerprint
from rmqtool.cli.app import app
from rmqtool.recovery.apply import apply_plan
from rmqtool.recovery.plan import plan_recovery
from rmqtool.recovery.undo import undo

CRASH = V5 / "timer-crash"


def _clock(variant: str) -> str:
    return str(load_truth(CRASH / variant / "truth.json")["timerAfterLoad"]["state"]["fakeNowMs"])


def _timer_findings(runner, store: pathlib.Path, now: str) -> list[dict]:
    r = runner.invoke(app, ["verify", str(store), "--only", "timer", "-f", "jsonl", "--now", now])
    assert r.exit_code in (0, 3), r.output
    return [json.loads(line) for line in r.stdout.splitlines()]


@pytest.mark.parametrize("variant,finding", [("b-timerlog-tail-zeroed", "timerChainLoops"),
                                             ("e-commitlog-truncated", "timerUnitPastCommitLog")])
def test_apply_mends_the_timer_and_undo_gives_it_back(tmp_path, variant, finding):
    """The plan's actions applied with their backup (recovery/apply; the engine's dispatch after
    it is not the timer's concern), then undone. (test_timer_verify shows the finding before.)"""
    runner = cli_runner()
    store = expand_store(CRASH / variant / "input/store", tmp_path / "store")
    now = _clock(variant)
    before = tree_fingerprint(store)
    plan = plan_recovery(store, now_ms=int(now))
    assert plan.timer["repair"]["slots_zeroed"]
    assert finding in {a.finding for a in plan.actions}
    apply_plan(plan, tmp_path / "backup")
    after = _timer_findings(runner, store, now)
    assert not [f for f in after if f["consequence"] in ("loops", "dropsMessages", "strands")], after
    # a cut left to the start enqueues units again; one over the zeros the apply wrote, enqueueing
    # nothing, changes nothing and is not said (e: it was, as "queue offsets 84..83 enqueued again")
    cuts = [f for f in after if f["finding"] == "timerLogCut"]
    assert all(f["enqueued_again"] > 0 for f in cuts), cuts
    assert [f.id for f in plan_recovery(store, now_ms=int(now)).left] == ["timerLogCut"] * len(cuts)
    undo(tmp_path / "backup", store)
    assert tree_fingerprint(store) == before


_TARGETS = ("timerwheel", "timerlog/00000000000000000000", "timerlog/00000000000000004096", "config/timercheck",
            "config/timermetrics")


@settings(max_examples=examples(2), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(_TARGETS), at=st.integers(0, 12000), data=st.binary(min_size=1, max_size=64),
       truncate=st.booleans())
def test_random_timer_damage_never_crashes_nor_writes(tmp_path_factory, target, at, data, truncate):
    store = expand_store(CRASH / "a-as-is" / "input/store", tmp_path_factory.mktemp("case") / "store")
    path = store / target
    size = path.stat().st_size
    with open(path, "r+b") as f:
        if truncate:
            f.truncate(min(at, size))
        else:
            f.seek(at % max(size, 1))
            f.write(data)
    before = tree_fingerprint(store)
    runner = cli_runner()
    for argv in (["verify", str(store), "--only", "timer", "--now", _clock("a-as-is")], ["recover", str(store), "--now", _clock("a-as-is")]):
        r = runner.invoke(app, argv)
        assert r.exit_code in (0, 2, 3, 4, 8), (argv, r.output, r.exception)
        assert "Traceback" not in r.output + r.stderr
    assert tree_fingerprint(store) == before


_LOST_OR_AGAIN = {"strands", "loops", "redelivers"}


@pytest.mark.parametrize("variant", sorted(p.name for p in CRASH.iterdir() if p.is_dir()))
def test_recover_says_what_the_timer_run_loses_as_verify_does(tmp_path, variant):
    """The start's timer run loses deliveries or makes them again (a chain missing units, a
    loop, timercheck gone) though no file needs a change: recover said "nothing to recover:
    the store is as a clean shutdown leaves it" and exited 0 while verify reported the error.
    Now its plan says it in words (timer.run.losses) and exits 3, before and after --apply,
    exactly where verify's timer findings say so at the same clock."""
    runner = cli_runner()
    store = expand_store(CRASH / variant / "input/store", tmp_path / "store")
    now = _clock(variant)
    for applied in (False, True):
        if applied:
            runner.invoke(app, ["recover", str(store), "--apply", "--backup-dir", str(tmp_path / "bk"), "--now", now])
        r = runner.invoke(app, ["recover", str(store), "--now", now, "-f", "json"])
        losses = json.loads(r.stdout)["timer"]["run"]["losses"]
        said = {f["finding"] for f in _timer_findings(runner, store, now)
                if f["consequence"] in _LOST_OR_AGAIN and f["finding"] != "timerLogCut"}  # the cut: plan.left
        assert bool(losses) == bool(said), (applied, losses, said)
        if said:
            assert r.exit_code == 3, (applied, r.output)
