"""recover --apply on a DLedger store: the consume queues made to say on disk what the broker's
recovery left in memory.

``DLedgerCommitLog``'s abnormal recovery truncates consume queue units past its processOffset by
moving their write position only (recovery/dledger.py); the reput writes most of them again,
but a unit whose record fails the reput's check stays in the file, so the next restart serves
the damaged record (fixtures' dledger-crash ``reloadOfExpected``). The repair zeroes each such
unit, from the queue's offset after recovery to its end before, in a copy of its file swapped
in with a backup (``recovery/apply.apply_file_changes``: ``rmqtool undo`` puts it back). DLedger's
own files are not touched: its recover keeps its entries and index as they are.
"""
from __future__ import annotations

import pathlib
import shutil
import tempfile

from rmqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE
from rmqtool.recovery.apply import REPLACE, apply_file_changes
from rmqtool.recovery.dledger import DLedgerPlan
from rmqtool.store.view import StoreView


def units_to_zero(view: StoreView, plan: DLedgerPlan) -> list[tuple[pathlib.Path, int, int]]:
    """(consume queue file, first byte, end byte) of the units the broker's memory no longer
    has after the plan's recovery but the file still holds."""
    out = []
    queues = view.consume_queues()
    for cut in plan.queues:
        if cut.max_offset_after >= cut.max_offset_before:
            continue
        q = queues.find(cut.topic, cut.queue_id, batch=False)
        if q is None:
            continue
        for u in q.iter_units(cut.max_offset_after, cut.max_offset_before):
            out.append((pathlib.Path(u.path), u.position, u.position + CQ_STORE_UNIT_SIZE))
    return out


def apply_dledger_plan(view: StoreView, plan: DLedgerPlan, backup_dir=None, command: str | None = None) -> dict:
    """Zero the units :func:`units_to_zero` names, with a backup; what was done (``applied``)."""
    zeroed = units_to_zero(view, plan)
    if not zeroed:
        return {"store_path": str(view.root), "units_zeroed": 0}
    by_file: dict[pathlib.Path, list[tuple[int, int]]] = {}
    for path, start, end in zeroed:
        by_file.setdefault(path, []).append((start, end))
    with tempfile.TemporaryDirectory(prefix="rmqtool-dledger-") as tmp:
        changes = []
        for i, (path, ranges) in enumerate(sorted(by_file.items())):
            staged = pathlib.Path(tmp) / f"{i:04d}"
            shutil.copyfile(path, staged)
            with open(staged, "r+b") as f:
                for start, end in ranges:
                    f.seek(start)
                    f.write(bytes(end - start))
            changes.append((REPLACE, path, staged))
        applied = apply_file_changes(view.root, changes, backup_dir, plan.to_json(), command=command,
                                     operation="recover")
    return {"store_path": str(view.root), "units_zeroed": len(zeroed), "backup_dir": str(applied.backup_dir),
            "manifest": str(applied.manifest)}
