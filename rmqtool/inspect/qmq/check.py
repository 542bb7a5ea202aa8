"""`rmqtool check` on a QMQ store: the probe's measures from tails and heads, as on RocketMQ's.

It reads the last ``tail_bytes`` of the last message log segment holding data (the one
scanner, from the first clean record in that window) and of the segment before the last
(whose missing end record makes the start delete the segments after it), each subject's
consumer log from its last written unit back to its last message unit, the checkpoints,
and what the next start's constructor loads but the message log's records
(``recovery/qmq/start.probe_start``: names, directories, consumer and pull logs against the
checkpoints, the action log's last segments, the tablets, then the action replay that gives
each group's progress). Where a record's store
time is needed (a lag in ms), its header is read at the offset a unit names.

A QMQ store keeps no flush time, so it has no ``unflushed_*`` measure; its recovery is the
start's replays (the message log after the message checkpoint, the action log after its
replay state), not a walk of the log.
"""
from __future__ import annotations

import bisect
import dataclasses

from rmqtool import findings as ids
from rmqtool.findings import Finding, Severity, finding
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.inspect.check import Measure, StoreCheck, disk_use, dispatch_lag
from rmqtool.inspect.qmq.offsets import RecordHeads, group_progress, subject_ends
from rmqtool.recovery.qmq.javabuf import JavaException
from rmqtool.recovery.qmq.start import probe_start
from rmqtool.recovery.qmq.validators import validate_message_segment_from
from rmqtool.store.qmq import messagelog, record_kernel
from rmqtool.store.qmq.segments import LogDirectory, ZeroExtended, list_log
from rmqtool.store.qmq.view import QmqView

# The status line's summary of a QMQ store that is OK: (words, measure, unit)
SUMMARY = (("dispatch lag", "dispatch_lag_ms", " ms"), ("recovery", "recovery_seconds", " s"),
           ("disk", "disk_used_ratio", ""))


@dataclasses.dataclass(slots=True)
class _Tail:
    """The message log's tail as the scanner read it."""
    end: int  # the written end (message log offset)
    records: list[tuple[int, int]]  # (message log offset, store timestamp), in log order
    findings: list[Finding]
    start: int  # the message log offset the records begin at

    @property
    def newest_timestamp(self) -> int | None:
        return self.records[-1][1] if self.records else None

    def timestamp_from(self, offset: int) -> int | None:
        """The store time of the first tail record at or after ``offset`` (None: none)."""
        i = bisect.bisect_left(self.records, offset, key=lambda r: r[0])
        return self.records[i][1] if i < len(self.records) else None


def read_tail(log: LogDirectory, tail_bytes: int, live: bool) -> _Tail:
    """The message log's tail: the last ``tail_bytes`` of its last segment holding data, read
    by the scanner from the first clean record in them (the segment's whole when they hold
    none); its written end, records and findings. ``live``: findings past the last clean
    record are left out (a running broker may be writing there)."""
    for seg in reversed(log.segments):
        with ZeroExtended(seg) as data:
            if not data.written:
                continue  # a segment made, nothing written yet: the end is in the one before
            start = max(data.written - tail_bytes, 0)
            tail = _segment_tail(data, start, live)
            if start and (tail is None or not tail.records):  # no whole record in the window: the segment's
                tail = _segment_tail(data, 0, live)
        if tail is not None:
            return tail
        break
    return _whole_log(log)


def _segment_tail(data: ZeroExtended, start: int, live: bool) -> _Tail | None:
    """The tail from ``start`` of one segment; None when no item ends in it (an end-of-segment
    record alone, or a window all damage whose end the log before it says)."""
    subjects = record_kernel.SubjectTable()
    records, found = [], []
    end = clean_end = None
    base = data.segment.base_offset
    for piece in messagelog.scan_pieces(data, subjects, True, None, start):
        bad = messagelog.piece_findings(data, piece, subjects)
        found += bad
        if isinstance(piece, record_kernel.MessageRun):
            records += zip((base + piece.position).tolist(), piece.timestamp.tolist())
        elif isinstance(piece, messagelog.MessageRecord):
            records.append((piece.offset, piece.timestamp))
        at = messagelog.item_end(data, piece)
        if at is not None:
            end = at
            clean_end = at if not bad else clean_end
    if end is None:
        return None
    if live:  # a running broker may be writing the bytes after its last whole record right now
        found = [f for f in found if clean_end is not None and f.offset is not None and f.offset < clean_end - base]
    return _Tail(end, records, found, records[0][0] if records else end)


def segment_cut(log: LogDirectory, tail: _Tail, tail_bytes: int) -> Finding | None:
    """The start validates the last two segments from their first record: where the one before
    the last (by name) is not complete (no end-of-segment record, its records not reaching its
    end: a crash before the end record was written, or damage in its tail), the start ends the
    log there and deletes the segments after it. The start's validator walks that segment from
    the first record in its last ``tail_bytes``; a finding when a later segment holds data the
    cut drops (the written end is past it)."""
    if len(log.segments) < 2:
        return None
    seg = log.segments[-2]
    with ZeroExtended(seg) as data:
        if not data.written:
            return None  # nothing in it: QMQ's walk stops at its start, as it does at a new segment's
        first = next(messagelog.scan_pieces(data, record_kernel.SubjectTable(), True, None,
                                            max(data.written - tail_bytes, 0)), None)
    # no record begins in the window (a record longer than it): the segment's whole, as read_tail reads
    # the last one; the validator from 0 is the start's own walk
    start = 0 if first is None else int(first.position[0]) if isinstance(first, record_kernel.MessageRun) \
        else first.position
    try:
        complete, validated = validate_message_segment_from(seg.path, seg.base_offset, seg.size, start)
    except JavaException:  # the start is refused there: the damage is what the scan of the segment shows
        return None
    cut = seg.base_offset + validated
    if complete or tail.end <= seg.end_offset:
        return None
    return finding(ids.RECOVERY_CUTS_MESSAGE_LOG, seg.path, validated,
                   f"the next start ends the message log at {cut}: {seg.path.name} is not complete there (no "
                   f"end-of-segment record), so the {tail.end - seg.end_offset} bytes written in the segments after "
                   f"it are deleted with them", message_log_offset=cut)


def _whole_log(log: LogDirectory) -> _Tail:
    """The written end as info reads it, from every segment: for a tail that shows none."""
    builder = record_kernel.LogColumnsBuilder(record_kernel.SubjectTable())
    for _data, _piece in messagelog.log_pieces(log.segments, builder):
        pass
    end = builder.written_end if builder.written_end is not None else 0
    return _Tail(end, [], [], end)


def check_qmq_store(view: QmqView, *, now: int, tail_bytes: int, recovery_rate: float) -> StoreCheck:
    root = view.root
    log = list_log(root / "messagelog", PER_SEGMENT_FILE_SIZE)
    tail = read_tail(log, tail_bytes, view.live is not None)
    cut = segment_cut(log, tail, tail_bytes) if view.live is None else None
    if cut is not None:
        tail.findings.insert(0, cut)
    heads = RecordHeads(root)
    values: list[tuple] = [("written_end", tail.end, None, None)]  # (measure, value, subject, group)
    ends = subject_ends(root)
    dispatched = [e.dispatched_end for e in ends.values() if e.dispatched_end is not None]
    if dispatched:
        b, ms = dispatch_lag(tail, max(dispatched), heads.timestamp_at)
        values += [("dispatch_lag_bytes", b, None, None), ("dispatch_lag_ms", ms, None, None)]
        if view.live is None:  # a running broker may be writing the record a unit names
            values.append(("dispatch_ahead_bytes", max(max(dispatched) - tail.end, 0), None, None))
    for subject, e in ends.items():
        if e.dispatched_end is not None:
            b, ms = dispatch_lag(tail, e.dispatched_end, heads.timestamp_at)
            values += [("subject_dispatch_lag_bytes", b, subject, None), ("subject_dispatch_lag_ms", ms, subject, None)]
    probe = probe_start(root)
    values += _recovery(log, tail, probe, recovery_rate)
    if probe.message_log_first is not None:  # the load ran: what it drops is known
        values += [("units_lost_at_start", n, subject, None)
                   for subject, n in lost_at_start(probe, ends, heads.subject_at).items()]
    if tail.newest_timestamp is not None:
        values.append(("newest_age_ms", now - tail.newest_timestamp, None, None))
    for g in group_progress(root, probe=probe, ends=ends, heads=heads).rows:  # offsets' rows
        if g.lag_messages is not None:
            values.append(("lag_messages", g.lag_messages, g.subject, g.group))
        if g.lag_ms is not None:
            values.append(("lag_ms", g.lag_ms, g.subject, g.group))
    values.append(("load_refused", int(probe.refusal is not None), None, None))
    values.append(("repair_unfinished", int(view.unfinished is not None), None, None))
    dirs = [root, *(root / d for d in ("messagelog", "consumerlog", "actionlog", "pulllog", "pulllog_smt",
                                       "checkpoint"))]
    ratio, free, allocated = disk_use([d for d in dirs if d.is_dir()], [root])
    values += [("disk_used_ratio", ratio, None, None), ("disk_free_bytes", free, None, None),
               ("store_allocated_bytes", allocated, None, None),
               ("tail_errors", sum(f.severity == Severity.ERROR for f in tail.findings), None, None),
               ("tail_warnings", sum(f.severity == Severity.WARNING for f in tail.findings), None, None)]
    path = str(root)
    return StoreCheck(path, [Measure(path, m, v, subject=s, group=g, family="qmq") for m, v, s, g in values],
                      tail.findings, summary=SUMMARY)


def lost_at_start(probe, ends: dict, subject_at) -> dict[str, int]:
    """Per subject, the sequences the next start serves without their message (or not at all)
    because its load lacks their units and its replay, which begins after their records, does
    not write them again: up to the loaded message checkpoint's max sequence, those its consumer
    log does not reach (a file gone); and units on disk that the load cuts (a subject the
    checkpoint lacks is cut to nothing) naming a record of that subject (``subject_at(offset)``:
    not a directory renamed, whose units name another subject's records, counted there) the
    message log still holds before the replay start. QMQ never deletes a log's last segment,
    so neither happens on a healthy store."""
    replay_from = max(probe.message_checkpoint if probe.message_checkpoint is not None else -1,
                      probe.message_log_first)
    lost = {}
    for subject in sorted(set(probe.max_sequences) | set(ends)):
        loaded = probe.loaded_next.get(subject, 0)
        n = max(probe.max_sequences.get(subject, -1) + 1 - loaded, 0)
        end = ends.get(subject)
        if end is not None and end.next_sequence > loaded:
            cut = [o[(o >= probe.message_log_first) & (o < replay_from)]
                   for o in end.named_offsets(loaded, end.next_sequence)]
            first = next((int(o[0]) for o in cut if len(o)), None)
            if first is not None and subject_at(first) == subject:
                n += sum(len(o) for o in cut)
        lost[subject] = n
    return lost


def _recovery(log: LogDirectory, tail: _Tail, probe, rate: float) -> list[tuple]:
    """The bytes the next start replays: the message log after the loaded message checkpoint's
    offset (all of it without one), and the action log after its replay state."""
    first = log.segments[0].base_offset if log.segments else 0
    loaded = probe.message_checkpoint
    start = loaded if loaded is not None and loaded > 0 else first
    replayed = max(tail.end - max(start, first), 0)
    if probe.action_replay is not None:
        begin, end = probe.action_replay
        replayed += max(end - begin, 0)
    return [("recovery_bytes", replayed, None, None), ("recovery_seconds", round(replayed / rate, 3), None, None)]
