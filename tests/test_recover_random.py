"""recover and salvage over random damage: never a crash or a hang, the plan never writes,
and an apply never loses a byte its backup does not hold (undo gives every one back)."""
from __future__ import annotations

import hashlib
import pathlib
import shutil

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from conftest import V4
from helpers import damage
from rmqtool.errors import RmqError
from rmqtool.recovery import apply_plan, plan_recovery, undo
from rmqtool.recovery.salvage import salvage

SOURCE = V4 / "crash" / "a-as-is" / "input" / "store"


def _digest(root: pathlib.Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("recover-random") / "store"
    shutil.copytree(SOURCE, root)
    for p in [root, *root.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    return root


@settings(max_examples=1000, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_plans_salvages_applies_and_undoes(pristine, tmp_path_factory, data):
    root = tmp_path_factory.mktemp("case") / "store"
    shutil.copytree(pristine, root)
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.stat().st_size and p.name != "lock")
    for _ in range(data.draw(st.integers(1, 2))):
        target = data.draw(st.sampled_from(files))
        target.write_bytes(bytes(damage(bytearray(target.read_bytes()), data,
                                        kinds=("flip", "zero", "garbage", "int", "truncate"))))
    if data.draw(st.booleans()):
        data.draw(st.sampled_from(files)).unlink(missing_ok=True)
    before = _digest(root)
    try:
        plan = plan_recovery(root)
    except RmqError as exc:  # a clean error naming a file of the store, nothing written
        assert exc.path is not None, exc.one_line()
        assert _digest(root) == before
        return
    assert _digest(root) == before
    plan.to_json()
    try:
        kept, report = salvage(root)
        for m in kept:
            assert m.physical_offset == m.commit_log_offset
        report.to_json()
    except RmqError as exc:
        assert exc.path is not None, exc.one_line()
    assert _digest(root) == before
    if plan.refusal or not plan.actions:
        return
    applied = apply_plan(plan, root.parent / "backup")
    undo(applied.backup_dir)
    assert _digest(root) == before
