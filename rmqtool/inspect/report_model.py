"""What ``rmqtool report`` shows of a store, as one JSON-ready document (the model the HTML
page is drawn from, and what ``-f json`` prints).

Every answer comes from the code that already gives it, on one view of the store (opened
once, the broker's next start simulated once and shared with verify):

* the commit log's files and the written end: the view (``StoreView.segments``, ``written_end``);
* the recovery start file, the mode and where the next start cuts the log: recovery/'s
  simulation (``Outcome.start_file``, ``Outcome.recovered_end``), never recomputed here;
* the unflushed window: check's measures (``inspect/check.check_store``: the checkpoint's
  physicMsgTimestamp against the tail's store times);
* damaged ranges: verify's findings that name a commit log file and a position in it (the
  verify run is handed in, as inspect/ may not import verify/);
* queue ranges: the queues as the next start leaves them (``recovery/loaded_end.loaded_queues``:
  the simulation's, the ranges recover plans with), in info's rows
  (``inventory.consume_queue_info``); committed offsets and lag against the same queues:
  offsets' (``store/consumer_offsets.consumer_offsets``);
* index coverage: info's index headers (``inventory.index_info``);
* findings with their consequence, what they mean and what to do (``rmqtool/findings.py``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import time
from typing import Callable

from rmqtool.errors import RmqError
from rmqtool.findings import (BLANK_RECORD_INVALID, BLANK_RECORD_MISSING, BODY_CRC_MISMATCH, BODY_DECOMPRESS_FAILED,
                              INNER_BATCH_PROPERTY_INVALID, OPERATOR_ACTIONS, PROPERTIES_INVALID_UTF8,
                              PROPERTY_CRC_MISMATCH, PROPERTY_CRC_MISSING, PROPERTY_CRC_UNREADABLE, RECORD_LENGTH_MISMATCH,
                              RECORD_MAGIC_INVALID, RECORD_OFFSET_MISMATCH, RECORD_QUARANTINED, RECORD_SIZE_INVALID,
                              RECORD_TORN, RECORD_TRUNCATED, REGISTRY, SEGMENT_UNREADABLE, TOPIC_INVALID_UTF8,
                              TRAILING_GARBAGE, Finding, Severity)
from rmqtool.inspect.check import check_store
from rmqtool.inspect.check_defaults import RECOVERY_RATE, TAIL_BYTES
from rmqtool.inspect.inventory import consume_queue_info, index_info
from rmqtool.recovery.loaded_end import loaded_queues
from rmqtool.recovery.outcome import Settings, simulate
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.consumer_offsets import consumer_offsets
from rmqtool.store.detect import require_store
from rmqtool.store.output_path import refuse_output_in_store
from rmqtool.store.segments import missing_bases, one_listing
from rmqtool.store.view import StoreView

# verify as report runs it: (view, now_ms) -> every finding (the family's tools hand verify/'s run in)
VerifyFn = Callable[[StoreView, int], list]


def open_for_report(path: str | os.PathLike) -> StoreView:
    """The store opened once, with the broker's next start simulated as verify and recover
    simulate it (another family's store, or one whose records DLedger's entry log holds: one
    line, exit 4; the page draws a plain commit log, and would show that store empty)."""
    from rmqtool.store.dledger import refuse_dledger
    root = require_store(path)
    refuse_dledger(root, "report")
    return StoreView(root, simulate=lambda view: simulate(view, Settings()))


@dataclasses.dataclass(frozen=True)
class Report:
    """The model: ``document`` (sections of rows, stable JSON) and the findings behind it."""
    document: dict
    findings: list[Finding]
    html: str | None = None  # the page written, when one was asked for
    notices: list[str] = dataclasses.field(default_factory=list)  # lines for stderr (a live store)

    @property
    def errors(self) -> int:
        return sum(f.severity == Severity.ERROR for f in self.findings)


@one_listing()
def build_report(store: str | os.PathLike | StoreView, *, now: int | None, verify: VerifyFn,
                 html: str | os.PathLike | None = None) -> Report:
    """The report's model of a store; ``now``: the clock (epoch ms) check and verify read;
    ``html``: also write the page there (report/html_page.py, written whole or not at all)."""
    view = store if isinstance(store, StoreView) else open_for_report(store)
    if html is not None:  # before verify's run: a page among the store's files would replace one
        refuse_output_in_store(html, "--html", [view])
    now = now if now is not None else int(time.time() * 1000)
    live = view.live  # first: a running broker's store is read up to its written end now
    findings = list(verify(view, now))
    segments = view.segments if view.has_commit_log else []
    # a live store's next start is not predicted; one without commit log files is (the broker
    # destroys every consume queue: recoverNormally's else branch)
    outcome = _outcome(view) if live is None else None
    measures = _measures(view, now) if segments else {}
    written = (view.written_end if live is None else min(view.written_end, live.commit_log_end)) if segments else 0
    recovered = outcome.recovered_end if outcome is not None and outcome.loadable else None
    unflushed = measures.get("unflushed_bytes")
    unflushed_from = measures["written_end"] - unflushed if unflushed else None  # check's tail end minus its window
    damaged = damaged_ranges(view, findings)
    # the queues and the lag as the next start leaves them: recover's ranges, what its dispatch
    # puts back included (no start predicted: the files cut where info cuts them)
    loaded = loaded_queues(view, outcome)
    queues, _f = consume_queue_info(loaded, segments[0].base_offset if segments else None)
    offsets = consumer_offsets(view, queues=loaded)
    index, _f = index_info(view)
    doc = {
        "store": _store_section(view, outcome, written, recovered, unflushed_from, measures, findings, now),
        "segments": _segments(view, outcome, written, recovered, unflushed_from, damaged),
        "damaged_ranges": damaged,
        "consume_queues": queues,
        "consumer_offsets": [r.record() for r in offsets.rows],
        "index_files": index,
        "findings": [finding_row(f) for f in findings],
    }
    if html is not None:
        from rmqtool.report.html_page import write_page
        write_page(doc, html)
    return Report(doc, findings, None if html is None else str(html), [live.note()] if live is not None else [])


def _outcome(view: StoreView):
    """The simulated next start (the view's, run once; verify may have run it already); None
    when it could not run (the page says so)."""
    try:
        return view.outcome
    except Exception:  # noqa: BLE001 - as info: the page shows the rest, the next start stays unknown
        return None


def _measures(view: StoreView, now: int) -> dict:
    """check's store-wide measures by name (written_end, unflushed_bytes, unflushed_ms, ...)."""
    try:
        found = check_store(view, now=now, tail_bytes=TAIL_BYTES, recovery_rate=RECOVERY_RATE)
    except RmqError:  # a checkpoint that cannot be read: verify's finding says so, the window stays unknown
        return {}
    return {m.measure: m.value for m in found.measures if m.topic is None and m.group is None}


def finding_row(f: Finding) -> dict:
    """A finding's JSON row with what it means and what to do (as ``rmqtool findings ID`` says)."""
    return f.to_json() | {"meaning": REGISTRY[f.id][1], "action": OPERATOR_ACTIONS[f.id]}


# The findings whose bytes are not as the broker wrote them (a record, a region, a file's tail);
# not those about records that are whole (queue offsets that skip, a file missing before them,
# a property a writer left out) nor the cut (recoveryCutsCommitLog: the recovered end, drawn apart)
DAMAGE = frozenset({BODY_CRC_MISMATCH, PROPERTY_CRC_MISMATCH, INNER_BATCH_PROPERTY_INVALID, RECORD_MAGIC_INVALID,
                    RECORD_SIZE_INVALID, RECORD_LENGTH_MISMATCH, RECORD_OFFSET_MISMATCH, RECORD_QUARANTINED,
                    RECORD_TRUNCATED, PROPERTIES_INVALID_UTF8, TOPIC_INVALID_UTF8, BLANK_RECORD_INVALID,
                    BLANK_RECORD_MISSING, TRAILING_GARBAGE, BODY_DECOMPRESS_FAILED, RECORD_TORN,
                    PROPERTY_CRC_UNREADABLE, PROPERTY_CRC_MISSING, SEGMENT_UNREADABLE})


def damaged_ranges(view: StoreView, findings: list[Finding]) -> list[dict]:
    """Verify's damage findings (DAMAGE) that name a commit log file and a position in it, as
    byte ranges of the commit log: a damaged region's skipped bytes, a damaged record's own
    length when its header still reads (else ``bytes`` null)."""
    by_name = {seg.name: seg for seg in view.segments} if view.has_commit_log else {}
    directory = view.paths.commitlog.resolve()
    out = []
    with contextlib.ExitStack() as stack:
        reader = None
        for f in findings:
            if f.id not in DAMAGE or f.path is None or f.offset is None:
                continue
            path = pathlib.Path(f.path)
            seg = by_name.get(path.name)
            if seg is None or path.parent.resolve() != directory:
                continue
            start = seg.base_offset + f.offset
            length = (f.details or {}).get("bytes_skipped")
            if length is None:
                reader = reader or stack.enter_context(CommitLogReader(view.commit_log))
                length = _record_size(reader, start)
            out.append({"file": seg.name, "file_position": f.offset, "commit_log_offset": start,
                        "end_offset": start + length if length is not None else None, "bytes": length,
                        "finding": f.id, "severity": f.severity.value, "consequence": f.consequence.value})
    return out


def _record_size(reader: CommitLogReader, offset: int) -> int | None:
    """The totalSize of the record at ``offset`` as its header says (None: not readable there)."""
    try:
        return reader.read(offset, check_crc=False).store_size
    except RmqError:
        return None


def _segments(view: StoreView, outcome, written: int, recovered: int | None, unflushed_from: int | None,
              damaged: list[dict]) -> list[dict]:
    """A row a commit log file, and a row for each run of files missing between two (``missing_files``)."""
    start_file = outcome.start_file if outcome is not None else None
    segments = view.segments if view.has_commit_log else []
    size = view.mapped_file_size if segments else None
    rows = []
    for i, seg in enumerate(segments):
        gap = missing_bases(segments[i - 1], seg, size) if i and size else range(0)
        if gap:
            rows.append({"file": f"{gap[0]:020d}", "base_offset": gap[0], "size": 0, "end_offset": seg.base_offset,
                         "written_to": gap[0], "recovery_start": False, "damaged": 0, "missing_files": len(gap)})
        end = seg.base_offset + seg.size
        row = {"file": seg.name, "base_offset": seg.base_offset, "size": seg.size, "end_offset": end,
               "written_to": min(max(written, seg.base_offset), end),
               "recovery_start": start_file is not None and pathlib.Path(start_file).name == seg.name,
               "damaged": sum(d["file"] == seg.name for d in damaged)}
        if unflushed_from is not None and unflushed_from < end and written > seg.base_offset:
            row["unflushed_from"] = max(unflushed_from, seg.base_offset)
        if recovered is not None and recovered < written and seg.base_offset <= recovered < end:
            row["cut_at"] = recovered  # the next start ends the log here; what follows is dropped
        rows.append(row)
    return rows


def _store_section(view: StoreView, outcome, written: int, recovered: int | None, unflushed_from: int | None,
                   measures: dict, findings: list[Finding], now: int) -> dict:
    markers = view.markers
    o = outcome
    return {
        "path": str(view.root),
        "report_timestamp": now,
        "live": view.live is not None,
        "locked_by_pid": view.live.pid if view.live is not None else None,
        "clean_shutdown": markers.clean_shutdown,
        "semantics": o.semantics if o is not None else None,
        "recovery": ("abnormal" if o.abnormal else "normal") if o is not None else None,
        "mode_reason": o.mode_reason if o is not None else None,
        "loadable": o.loadable if o is not None else None,
        "reason": o.reason if o is not None else None,
        "advice": o.advice if o is not None else None,
        "start_file": pathlib.Path(o.start_file).name if o is not None and o.start_file else None,
        "start_reason": o.start_reason if o is not None else None,
        "mapped_file_size": view.mapped_file_size if view.has_commit_log else None,
        "written_end": written,
        "recovered_end": recovered,
        "bytes_dropped": written - recovered if recovered is not None else None,
        "unflushed_from": unflushed_from,
        "unflushed_bytes": measures.get("unflushed_bytes"),
        "unflushed_ms": measures.get("unflushed_ms"),
        "errors": sum(f.severity == Severity.ERROR for f in findings),
        "warnings": sum(f.severity == Severity.WARNING for f in findings),
    }
