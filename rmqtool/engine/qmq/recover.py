"""recover on a QMQ store as the command does it: the plan (``recovery/qmq/plan.py``) and,
with ``apply``, carried out with its backup (``apply.py``), in place or into a copy (``--to``:
the store is left as it is). An earlier apply cut short is rolled back first, so running the
command again finishes it."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import shlex

from rmqtool.engine.qmq.apply import apply_qmq_plan
from rmqtool.engine.recover_store import RecoverRun, copy_store
from rmqtool.errors import CorruptData, ExitCode, RepairUnfinished, StoreLocked, UsageError
from rmqtool.recovery.intent import copy_source, end_copy
from rmqtool.recovery.qmq.plan import plan_recovery
from rmqtool.recovery.store_lock import held_for
from rmqtool.recovery.undo import roll_back_unfinished
from rmqtool.store.qmq.view import QmqView


@dataclasses.dataclass(frozen=True)
class QmqGiven:
    """What the operator said of the broker: ``unit`` (consumer log unit bytes and what says so,
    from its config file), ``assume_defaults`` (a setting nothing shows may be QMQ's default),
    and ``again``: those options as words of the command that finishes a run cut short."""
    unit: tuple[int, str] | None = None
    assume_defaults: bool = False
    again: tuple[str, ...] = ()


def recover_qmq(view: QmqView, *, apply: bool = False, to: pathlib.Path | None = None,
                backup_dir: pathlib.Path | None = None, given: QmqGiven = QmqGiven()) -> RecoverRun:
    if not apply:
        return _recover(view, False, to, backup_dir, given)
    with held_for(view.root):  # planned and carried out (or copied) with no other rmqtool writer between
        return _recover(view, True, to, backup_dir, given)


def _recover(view: QmqView, apply: bool, to: pathlib.Path | None, backup_dir: pathlib.Path | None,
             given: QmqGiven) -> RecoverRun:
    root = view.root
    plan = plan_recovery(root, given.unit)
    doc = plan.to_json()
    run = RecoverRun(doc, plan)
    unfinished = view.unfinished
    loses = bool(plan.records_dropped or plan.records_unserved) or not plan.broker.started
    if plan.refusal is not None:  # shown, never carried out
        run.refusal = CorruptData(f"not recovered: {plan.refusal}", root)
        return run
    if apply and plan.unit_assumed and not given.assume_defaults:
        run.refusal = UsageError("not recovered: no consumer log in the store shows its unit format "
                                 "(consumerlog.v2.enable), and the consumer logs to write would be V1's, QMQ's "
                                 "default: a broker run with V2 throws on each of them; give --broker-config FILE "
                                 "(the broker's broker.properties) or --assume-defaults", root)
        return run
    if not apply:
        if plan.changes_anything or loses or unfinished is not None:
            run.exit_code = int(ExitCode.CORRUPT)
        return run
    if view.live is not None:
        raise StoreLocked(f"{view.live.holder} has the store's files open: not recovering it", root)
    if to is not None and unfinished is not None:
        raise RepairUnfinished(f"not copied: {unfinished.says()}: "
                               f"{unfinished.ways_out()}", root)
    with contextlib.ExitStack() as held:
        target = root
        if to is not None:  # the same command finishes a copy's repair cut short: it makes the copy again
            target = held.enter_context(copy_store(root, to, shlex.join(
                ["rmqtool", "recover", os.path.abspath(root), *given.again, "--apply", "--to", os.path.abspath(to)])))
        held.enter_context(held_for(target))  # the copy too, from its roll back to its last byte
        return _carry_out(run, plan, target, to, backup_dir, given)


def _carry_out(run: RecoverRun, plan, target: pathlib.Path, to: pathlib.Path | None,
               backup_dir: pathlib.Path | None, given: QmqGiven) -> RecoverRun:
    """:func:`recover_qmq` with ``apply``, the store (or its copy) held: an earlier apply cut
    short rolled back, the plan made again when it was, and carried out."""
    doc = run.doc
    again = roll_back_unfinished(target, "recover")
    if to is not None or again is not None:
        plan = plan_recovery(target, given.unit)  # the copy, or the store as it was before the cut-short apply
        doc = run.doc = plan.to_json()
        run.plan = plan
    run.applied = True
    if not plan.changes_anything:
        doc["applied"] = {"store_path": str(target), "backup_dir": None, "manifest": None}
        if to is not None or copy_source(target) is not None:
            end_copy(target)
        return run
    command = shlex.join(["rmqtool", "recover", os.path.abspath(target), *given.again, "--apply"])
    try:
        applied = apply_qmq_plan(plan, backup_dir if backup_dir is not None else again, command=command)
    except CorruptData as exc:
        run.refusal = exc
        return run
    # applied: 0, as a RocketMQ store's recover --apply; what the cut dropped or leaves unserved is in
    # the output (records_dropped, records_unserved: salvage reads them), and the plan said it with 3
    doc["applied"] = {"store_path": str(target), **applied.to_json()["applied"]}
    if to is not None or copy_source(target) is not None:  # a --to copy repaired in place too
        end_copy(target)
    return run
