"""salvage's report for people: what was kept, what is unreadable, rejected, missing."""
from __future__ import annotations

import io
import sys
from typing import TextIO

from rmqtool.report.plans import paths_in, said
from rmqtool.report.progress import erase_bars
from rmqtool.report.sink import render_document


def show_salvage(doc: dict, fmt: str, on_stderr: bool = False, table=None) -> None:
    """The report on stdout, or on stderr when stdout holds the messages (``--out -``);
    ``table``: how a family's report reads for people (RocketMQ's: :func:`salvage_table`)."""
    stream = sys.stderr if on_stderr else sys.stdout
    erase_bars()
    if fmt == "table":  # each line wrapped as a plan's are: a path broken only after a "/"
        text = io.StringIO()
        (table or salvage_table)(doc, text)
        keep = paths_in(doc)
        for line in text.getvalue().splitlines():
            said(line, stream, keep)
    else:
        render_document(doc, fmt, stream, title="salvage")


def salvage_table(doc: dict, stream: TextIO) -> None:
    w = stream.write
    w(f"kept {doc['messages_kept']} messages ({doc['bytes_kept']} bytes) into {doc['out_path']}\n")
    if doc["recovered_end"] is not None:
        w(f"{doc['kept_past_recovered_end']} of them lie past {doc['recovered_end']}, where the broker's "
          f"recovery cuts the log\n")
    for r in doc["damaged_regions"]:
        w(f"unreadable: {r['bytes']} bytes at {r['file']} position {r['file_position']} ({r['reason']})\n")
    for r in doc["messages_rejected"]:
        w(f"rejected: {r['topic']}/{r['queue_id']} queue offset {r['queue_offset']} at {r['file']} position "
          f"{r['file_position']} ({r['reason']})\n")
    for key, gaps in doc["missing_queue_offsets"].items():
        text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in gaps[:20])
        more = f" and {len(gaps) - 20} more ranges" if len(gaps) > 20 else ""
        w(f"missing from {key}: queue offsets {text}{more}\n")
    if not doc["lost_anything"]:
        w("nothing is lost\n")
