"""recover and salvage over random damage: never a crash or a hang, the plan never writes,
and an apply never loses a byte its backup does not hold (undo gives every one back)."""
from __future__ import annotations

import hashlib
import pathlib

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from conftest import V4, V5
from helpers import copy_tree, damage, examples, writable_copy
from rmqtool.errors import RmqError
from rmqtool.recovery.apply import apply_plan
from rmqtool.recovery.plan import plan_recovery
from rmqtool.recovery.undo import undo
from rmqtool.recovery.salvage import salvage

SOURCE = V4 / "crash" / "a-as-is" / "input" / "store"


def _digest(root: pathlib.Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return writable_copy(SOURCE, tmp_path_factory.mktemp("recover-random") / "store")


def _damaged_copy(pristine: pathlib.Path, tmp_path_factory, data, keep: tuple) -> pathlib.Path:
    """A copy of the store with one or two files damaged and perhaps one deleted (``keep``: names left alone)."""
    root = tmp_path_factory.mktemp("case") / "store"
    copy_tree(pristine, root)
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.stat().st_size and p.name not in keep)
    for _ in range(data.draw(st.integers(1, 2))):
        target = data.draw(st.sampled_from(files))
        target.write_bytes(bytes(damage(bytearray(target.read_bytes()), data,
                                        kinds=("flip", "zero", "garbage", "int", "truncate"))))
    if data.draw(st.booleans()):
        data.draw(st.sampled_from(files)).unlink(missing_ok=True)
    return root


def _plan_changing_nothing(root: pathlib.Path):
    """The plan of a damaged store, which writes nothing; None on a clean error naming a file."""
    before = _digest(root)
    try:
        plan = plan_recovery(root)
    except RmqError as exc:
        assert exc.path is not None, exc.one_line()
        plan = None
    assert _digest(root) == before
    if plan is not None:
        plan.to_json()
    return plan


@settings(max_examples=examples(30), deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_plans_salvages_applies_and_undoes(pristine, tmp_path_factory, data):
    root = _damaged_copy(pristine, tmp_path_factory, data, keep=("lock",))
    before = _digest(root)
    plan = _plan_changing_nothing(root)
    if plan is None:
        return
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


BATCH_SOURCE = V5 / "batchcq" / "store"


@pytest.fixture(scope="module")
def pristine_batch(tmp_path_factory):
    """The 5.3.3 batchcq store, marked as not cleanly shut down (recovery dispatches again)."""
    root = writable_copy(BATCH_SOURCE, tmp_path_factory.mktemp("recover-random-batch") / "store")
    (root / "lock").unlink()
    (root / "abort").write_bytes(b"")
    return root


@settings(max_examples=examples(20), deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_to_batch_queues_plans_applies_and_the_engine_recovers(pristine_batch, tmp_path_factory,
                                                                             data):
    """Random damage to a 5.x store with batch consume queues (its commit log, queues, index,
    checkpoint): the plan is a plan or a clean error, apply then undo gives every byte back,
    and the engine's recovering open (recover --apply) either opens and closes the store or
    refuses it with a clean error."""
    from rmqtool.engine.store import Store
    root = _damaged_copy(pristine_batch, tmp_path_factory, data, keep=("abort",))
    before = _digest(root)
    plan = _plan_changing_nothing(root)
    if plan is None or plan.refusal:
        return
    if plan.actions:
        applied = apply_plan(plan, root.parent / "backup")
        undo(applied.backup_dir)
        assert _digest(root) == before
    try:
        with Store.open(root, writable=True, recover=True, backup_dir=root.parent / "backup2"):
            pass
    except RmqError as exc:
        assert exc.path is not None, exc.one_line()
