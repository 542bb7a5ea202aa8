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
