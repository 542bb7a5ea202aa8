"""``rmqtool report`` on a QMQ store: the message log's files and what its next start does,
with verify's findings, as the same document RocketMQ's report makes (inspect/report_model.py)
and the same page draws: ``family`` "qmq"; no consume queue, consumer offset or index
sections: each subject's consumer log range (``consumer_logs``, as its files end) and each
group's progress and lag (``group_progress``: ``offsets``' rows) in their place.

The answers come from the code that gives them: the files from ``store/qmq/segments.list_log``;
the written end, where the start's replay begins (the loaded message checkpoint's offset),
where it ends the log and which files it deletes from ``recovery/qmq/start.simulate_start``
(QMQ's ``DefaultStorage`` start, simulated); damaged ranges from verify's findings (handed in).
"""
from __future__ import annotations

import os
import pathlib
import time
from typing import Callable

from rmqtool.findings import MESSAGE_RECORD_INVALID, PAYLOAD_CRC_MISMATCH, Finding, Severity
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.inspect.qmq.offsets import group_progress, subject_ends
from rmqtool.inspect.report_model import Report, finding_row
from rmqtool.recovery.qmq.start import StartOutcome, simulate_start
from rmqtool.store.output_path import refuse_output_in_store
from rmqtool.store.qmq.segments import LogSegment, list_log

DAMAGE = frozenset({MESSAGE_RECORD_INVALID, PAYLOAD_CRC_MISMATCH})  # the message log's bytes not as written


def build_qmq_report(view, *, now: int | None, verify: Callable, html: str | os.PathLike | None = None) -> Report:
    """The report's model of a QMQ store (``view``: a QmqView; ``verify``: (view, now) -> findings)."""
    if html is not None:  # before verify's run: a page among the store's files would replace one
        refuse_output_in_store(html, "--html", [view])
    now = now if now is not None else int(time.time() * 1000)
    live = view.live
    findings = list(verify(view, now))
    log = list_log(view.root / "messagelog", PER_SEGMENT_FILE_SIZE)
    start = simulate_start(view.root)
    damaged = damaged_ranges(log.segments, findings)
    ends = subject_ends(view.root)
    doc = {"store": _store_section(view, log.segments, start, findings, now),
           "segments": _segments(log.segments, start, damaged),
           "damaged_ranges": damaged,
           "consumer_logs": [{"subject": e.subject, "first_sequence": e.first_sequence,
                              "next_sequence": e.next_sequence} for e in ends.values()],
           "group_progress": [g.record() for g in group_progress(view.root, ends=ends).rows],
           "findings": [finding_row(f) for f in findings]}
    if html is not None:
        from rmqtool.report.html_page import write_page
        write_page(doc, html)
    return Report(doc, findings, None if html is None else str(html), [live.note()] if live is not None else [])


def damaged_ranges(segments, findings: list[Finding]) -> list[dict]:
    """Verify's damage findings in a message log file, as message log byte ranges (a region's
    size; a record whose payload fails its CRC: the position alone, ``bytes`` null)."""
    by_path = {str(seg.path): seg for seg in segments}
    out = []
    for f in findings:
        seg = by_path.get(f.path or "")
        if f.id not in DAMAGE or seg is None or f.offset is None:
            continue
        start = seg.base_offset + f.offset
        length = (f.details or {}).get("store_size")
        out.append({"file": seg.path.name, "file_position": f.offset, "commit_log_offset": start,
                    "end_offset": start + length if length is not None else None, "bytes": length,
                    "finding": f.id, "severity": f.severity.value, "consequence": f.consequence.value})
    return out


def _replay_file(segments, start: StartOutcome) -> LogSegment | None:
    """The file the start's message log replay begins in."""
    log = start.message_log
    if log is None:
        return None
    return next((s for s in segments if s.base_offset <= log.replay_from < s.end_offset), None)


def _segments(segments, start: StartOutcome, damaged: list[dict]) -> list[dict]:
    log = start.message_log
    written = start.written_end
    cut = log.cut_at if log is not None else None
    first = _replay_file(segments, start)
    rows = []
    for seg in segments:
        row = {"file": seg.path.name, "base_offset": seg.base_offset, "size": seg.size, "end_offset": seg.end_offset,
               "written_to": min(max(written, seg.base_offset), seg.end_offset),
               "recovery_start": first is not None and seg.path == first.path,
               "damaged": sum(d["file"] == seg.path.name for d in damaged)}
        if cut is not None and seg.base_offset <= cut < seg.end_offset:
            row["cut_at"] = cut
        rows.append(row)
    return rows


def _replay_reason(start: StartOutcome) -> str | None:
    """Where the start's message log replay begins, and why (DefaultStorage's iterate: the loaded
    checkpoint's offset; the log's first offset without one; its end when the checkpoint lies past it)."""
    log = start.message_log
    if log is None:
        return None
    loaded = start.checkpoints.message_checkpoint_file
    if loaded is None:
        return f"no message checkpoint loads: the message log replay starts at its first offset {log.replay_from}"
    if log.records_replayed == 0 and log.replay_from == log.max_offset:
        return (f"the message log replay starts at {log.replay_from}, its end after the start: the loaded message "
                f"checkpoint ({pathlib.Path(loaded).name}) is at or past it, so nothing is replayed")
    return f"the message log replay starts at the loaded message checkpoint's offset {log.replay_from}"


def _store_section(view, segments, start: StartOutcome, findings: list[Finding], now: int) -> dict:
    first = _replay_file(segments, start)
    written = start.written_end  # the data's, also when the start refuses before reading the log
    recovered = start.recovered_end
    return {
        "family": "qmq",
        "path": str(view.root),
        "report_timestamp": now,
        "live": view.live is not None,
        "locked_by_pid": view.live.pid if view.live is not None else None,
        "clean_shutdown": None,  # QMQ keeps no abort marker
        "semantics": None,
        "recovery": "replay",
        "mode_reason": None,
        "loadable": start.loadable,
        "reason": start.reason,
        "advice": start.advice,
        "start_file": first.path.name if first is not None else None,
        "start_reason": _replay_reason(start),
        "mapped_file_size": PER_SEGMENT_FILE_SIZE,
        "written_end": written,
        "recovered_end": recovered,
        "bytes_dropped": written - recovered if recovered is not None and written is not None else None,
        "unflushed_from": None,
        "unflushed_bytes": None,
        "unflushed_ms": None,
        "errors": sum(f.severity == Severity.ERROR for f in findings),
        "warnings": sum(f.severity == Severity.WARNING for f in findings),
    }

