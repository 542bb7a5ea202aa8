"""recover's plan for a DLedger store (recovery/dledger.py), printed: numbered steps, or its JSON."""
from __future__ import annotations

import sys

from rmqtool.report.plans import numbered, paths_in
from rmqtool.report.sink import render_document
from rmqtool.store.unfinished import undo_command


def show_dledger_plan(doc: dict, steps: list[str], fmt: str, applied: bool = False) -> None:
    if fmt != "table":
        render_document(doc, fmt, title="recovery plan")
        return
    numbered(steps, sys.stdout, keep=paths_in(doc))
    if applied:
        a = doc["applied"]
        sys.stdout.write(f"nothing to change: nothing written to {a['store_path']}\n" if not a["units_zeroed"] else
                         f"applied to {a['store_path']}: {a['units_zeroed']} consume queue unit(s) zeroed; backup in "
                         f"{a['backup_dir']} ({undo_command(a['backup_dir'])} puts it back)\n")
