"""recover's plan for a DLedger store (recovery/dledger.py), printed: numbered steps, or its JSON."""
from __future__ import annotations

import sys

from rmqtool.report.plans import numbered
from rmqtool.report.sink import render_document


def show_dledger_plan(doc: dict, steps: list[str], fmt: str) -> None:
    if fmt != "table":
        render_document(doc, fmt, title="recovery plan")
        return
    numbered(steps, sys.stdout)
