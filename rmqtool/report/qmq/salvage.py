"""salvage's report on a QMQ store, for people: what was kept, what is unreadable, rejected,
kept with a damaged sequence, missing."""
from __future__ import annotations

from typing import TextIO


def qmq_salvage_table(doc: dict, stream: TextIO) -> None:
    w = stream.write
    w(f"kept {doc['messages_kept']} records ({doc['bytes_kept']} bytes) into {doc['out_path']}\n")
    if doc["recovered_end"] is not None:
        w(f"{doc['kept_past_recovered_end']} of them lie past {doc['recovered_end']}, where QMQ's next start cuts "
          f"the message log\n")
    for r in doc["damaged_regions"]:
        w(f"unreadable: {r['bytes']} bytes at {r['file']} position {r['file_position']} ({r['reason']})\n")
    for r in doc["messages_rejected"]:
        w(f"rejected: {r['subject']} sequence {r['sequence']} at {r['file']} position {r['file_position']} "
          f"({r['reason']})\n")
    for r in doc["sequences_apart"]:
        w(f"kept, its sequence apart: {r['subject']} sequence {r['sequence']} at {r['file']} position "
          f"{r['file_position']} (its sequence field is damaged)\n")
    for subject, gaps in doc["missing_sequences"].items():
        w(f"missing from {subject}: sequences {', '.join(str(a) if a == b else f'{a}-{b}' for a, b in gaps)}\n")
    if not doc["lost_anything"]:
        w("nothing is lost\n")
