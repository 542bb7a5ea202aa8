"""``rmqtool diff`` on two QMQ stores: a master and its slave, or a store and its copy.

A QMQ slave copies the master's message log and action log byte for byte, at the same
offsets, and builds its own consumer logs and progress from them: so the logs are compared
as bytes (``inspect/diff.differing_ranges``, the one block compare), records decoded only
around a difference; then each subject's consumer log range and units (all but their dispatch
times), each group's progress as each side's next start has it, and the loaded checkpoints
(their offsets and max sequences). Read-only.
"""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Iterator

import numpy as np

from rmqtool.formats.qmq import actionlog as actionlog_format
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.inspect.check_defaults import TAIL_BYTES
from rmqtool.inspect.diff import (BACK, SIDES, differing_ranges, item_holding, log_parting, match_by_key,
                                  match_by_offset)
from rmqtool.inspect.qmq.check import read_tail
from rmqtool.inspect.qmq.offsets import group_progress, subject_ends
from rmqtool.recovery.qmq.start import probe_start
from rmqtool.report.qmq.records import message_log_row
from rmqtool.store.qmq import consumerlog, messagelog, record_kernel
from rmqtool.store.qmq.segments import LogDirectory, ZeroExtended, list_log

ROW_FIELDS = ("record", "side", "message_log_offset", "subject", "sequence", "group", "field", "a", "b", "reason")
_WHERE = ("file", "file_position")


def _row(record: str, **fields) -> dict:
    row = dict.fromkeys(ROW_FIELDS)
    row["record"] = record
    row.update(fields)
    return row


class _Log:
    """One side's log as bytes: its segments read as QMQ maps them, up to its written end."""

    def __init__(self, log: LogDirectory, end: int):
        self.log, self.end = log, end
        self.start = log.segments[0].base_offset if log.segments else 0
        self._open: dict[int, ZeroExtended] = {}

    def _data(self, seg) -> ZeroExtended:
        if seg.base_offset not in self._open:
            self._open[seg.base_offset] = ZeroExtended(seg)
        return self._open[seg.base_offset]

    def read(self, offset: int, length: int) -> bytes:
        seg = self.log.locate(offset)
        if seg is None or offset >= self.end:
            return b""
        return self._data(seg).take(offset - seg.base_offset, min(length, seg.end_offset - offset, self.end - offset))

    def next_file_after(self, offset: int) -> int | None:
        return min((s.base_offset for s in self.log.segments if s.base_offset > offset), default=None)

    def close(self) -> None:
        for data in self._open.values():
            data.close()


def _data_end(log: LogDirectory) -> int:
    """Where a log's written bytes end: its last segment holding data, to its last byte."""
    for seg in reversed(log.segments):
        with ZeroExtended(seg) as data:
            if data.written:
                return seg.base_offset + data.written
    return log.segments[0].base_offset if log.segments else 0


def _span(item) -> tuple[int, int]:
    if isinstance(item, messagelog.BlankRecord):
        return item.offset, item.until - item.position
    if isinstance(item, messagelog.EmptyRecord):
        return item.offset, 1
    return item.offset, item.size


def _scan_from(data: ZeroExtended, start: int, stop: int) -> list:
    """The scanner's items of one segment from the first clean record at or after ``start``
    (from its first byte when ``start`` is 0), those that begin before ``stop``."""
    subjects = record_kernel.SubjectTable()
    out = []
    for piece in messagelog.scan_pieces(data, subjects, True, None, start):
        items = messagelog.records_of(data, piece, subjects) if isinstance(piece, record_kernel.MessageRun) \
            else (piece,)
        for item in items:
            if item.position >= stop:
                return out
            out.append(item)
    return out


def items_over(log: _Log, begin: int, end: int) -> Iterator:
    """One side's message log items (records, blanks, damage) that overlap [begin, end): each
    segment's scan starts a little before ``begin``, and further back until it holds the item
    ``begin`` lies in."""
    for seg in log.log.segments:
        if seg.end_offset <= begin or seg.base_offset >= end:
            continue
        s, e = max(begin, seg.base_offset) - seg.base_offset, min(end, seg.end_offset) - seg.base_offset
        with ZeroExtended(seg) as data:
            back = BACK
            while True:
                start = max(0, s - back)
                items = _scan_from(data, start, e)
                if start == 0 or (items and items[0].position <= s):
                    break
                back *= 8
        for item in items:
            off, size = _span(item)
            if off + max(size, 1) > begin and off < end:
                yield item


def _item_at(log: _Log, offset: int):
    return item_holding(items_over(log, offset, offset + 1), offset, _span)


def _fields(item) -> dict:
    if item is None:
        return {"record": None}
    row = message_log_row(item, "none")
    for k in _WHERE:
        row.pop(k, None)
    return row


def differing_fields(x, y) -> tuple[list[str], dict, dict]:
    fx, fy = _fields(x), _fields(y)
    names = [k for k in dict.fromkeys([*fx, *fy]) if fx.get(k) != fy.get(k)]
    return names, {k: fx.get(k) for k in names}, {k: fy.get(k) for k in names}


@dataclasses.dataclass(slots=True, frozen=True)
class _Msg:
    offset: int
    subject: str
    sequence: int
    message_id: str | None
    store_size: int
    store_timestamp: int


def _same_message(x: _Msg, y: _Msg) -> bool:
    """Two records at one offset are one message (changed) when they hold one subject's sequence."""
    return (x.subject, x.sequence) == (y.subject, y.sequence)


def _messages(log: _Log, ranges) -> dict[int, _Msg]:
    out: dict[int, _Msg] = {}
    for begin, end in ranges:
        for item in items_over(log, begin, end):
            if isinstance(item, messagelog.MessageRecord) and item.offset not in out:
                out[item.offset] = _Msg(item.offset, item.subject, item.sequence,
                                        message_log_row(item, "none").get("message_id"), item.size, item.timestamp)
    return out


def compare_message_logs(a: _Log, b: _Log, summary: dict) -> Iterator[dict]:
    found, divergences, first_record = log_parting(a, b, _messages, _item_at, _span, differing_fields,
                                                   lambda **f: _row("message_log_divergence", **f),
                                                   "message_log_offset", summary)
    yield from divergences

    left_a, left_b = found["a"], found["b"]
    for offset, ma in match_by_offset(left_a, left_b, _same_message):
        if offset == first_record:  # the divergence row names its fields already
            continue
        names, va, vb = differing_fields(_item_at(a, offset), _item_at(b, offset))
        if names:
            yield _row("message_differs", message_log_offset=offset, subject=ma.subject, sequence=ma.sequence,
                       message_id=ma.message_id, fields=names, field=", ".join(names), a=va, b=vb)
    matched = match_by_key(left_a, left_b, lambda m: m.message_id)
    summary["messages_only_in_a"], summary["messages_only_in_b"] = len(left_a), len(left_b)
    summary["messages_matched_by_message_id"] = matched
    for side, left in (("a", left_a), ("b", left_b)):
        for offset in sorted(left):
            m = left[offset]
            yield _row("message_only_in", side=side, message_log_offset=m.offset, subject=m.subject,
                       sequence=m.sequence, message_id=m.message_id, store_size=m.store_size,
                       store_timestamp=m.store_timestamp)


def compare_action_logs(a: _Log, b: _Log) -> list[dict]:
    """Where the action logs' bytes first differ, or one ends before the other."""
    lo, hi = max(a.start, b.start), min(a.end, b.end)
    ranges = differing_ranges(a, b, lo, hi) if lo < hi else []
    rows = []
    for side, log, other in (("a", a, b), ("b", b, a)):
        if log.end > other.end:
            rows.append(_row("action_log_divergence", side=side, action_log_offset=max(other.end, log.start),
                             reason="missing_tail", bytes_past=log.end - max(other.end, log.start)))
    if ranges:
        rows.append(_row("action_log_divergence", action_log_offset=ranges[0][0], reason="different_bytes"))
    return sorted(rows, key=lambda r: r["action_log_offset"])


def compare_subjects(ends: dict[str, dict]) -> list[dict]:
    """Each subject's consumer log range (``ends``: each side's ``subject_ends``)."""
    rows = []
    for subject in sorted(ends["a"].keys() | ends["b"].keys()):
        x, y = ends["a"].get(subject), ends["b"].get(subject)
        for field in ("first_sequence", "next_sequence"):
            va, vb = (getattr(e, field) if e is not None else None for e in (x, y))
            if va != vb:
                rows.append(_row("subject_range", subject=subject, field=field, a=va, b=vb))
    return rows


_WINDOW = 1 << 20  # consumer log units compared at once


def _units_window(end, first: int, n: int) -> np.ndarray:
    """Sequences ``first`` to ``first + n`` of a consumer log as (kind, offset, size, header)
    rows; a sequence no segment holds is kind -1. A unit's timestamp is when its side dispatched
    the record (a slave's own clock), so it is not compared."""
    rows = np.zeros((n, 4), np.int64)
    rows[:, 0] = -1
    for cols in end.units(first, first + n):
        at = cols.first_sequence - first
        rows[at:at + len(cols)] = np.stack([cols.kind, cols.wrote_offset, cols.wrote_bytes, cols.header_size], 1)
    return rows


def _unit(row) -> dict:
    kind = int(row[0])
    return {"kind": consumerlog.KINDS[kind] if kind >= 0 else None, "wrote_offset": int(row[1]),
            "wrote_bytes": int(row[2]), "header_size": int(row[3])}


def compare_consumer_logs(ends: dict[str, dict]) -> list[dict]:
    """Each subject's consumer log units over the sequences both sides hold: the first that
    differs (the record it names, its size, or its kind), with how many do."""
    rows = []
    for subject in sorted(ends["a"].keys() & ends["b"].keys()):
        x, y = ends["a"][subject], ends["b"][subject]
        lo, hi = max(x.first_sequence, y.first_sequence), min(x.next_sequence, y.next_sequence)
        first = last = None
        count = 0
        for w in range(lo, hi, _WINDOW):
            n = min(_WINDOW, hi - w)
            ua, ub = _units_window(x, w, n), _units_window(y, w, n)
            bad = (ua != ub).any(1).nonzero()[0]
            if len(bad):
                if first is None:
                    first = (w + int(bad[0]), _unit(ua[bad[0]]), _unit(ub[bad[0]]))
                last, count = w + int(bad[-1]), count + len(bad)
        if first is not None:  # field: what differs in the first (the whole units in a and b)
            fields = ", ".join(k for k in first[1] if first[1][k] != first[2][k])
            rows.append(_row("consumer_log_units", subject=subject, sequence=first[0], field=fields, a=first[1],
                             b=first[2], units_differing=count, last_sequence=last))
    return rows


def compare_progress(progresses: dict) -> list[dict]:
    """Each group's progress as each side's next start has it (``progresses``: each side's
    ``group_progress``); where a side's start stops before it loads any, one row says so (not
    one a group)."""
    sides, refused = {}, []
    for side, progress in progresses.items():
        sides[side] = {(g.subject, g.group): g for g in progress.rows}
        if progress.probe.refusal is not None:
            refused.append(_row("group_progress", side=side, reason=f"no progress loaded: QMQ's start stops "
                                                                     f"({progress.probe.refusal.text})"))
    if refused:
        return refused
    rows = []
    for key in sorted(sides["a"].keys() | sides["b"].keys()):
        x, y = sides["a"].get(key), sides["b"].get(key)
        for field in ("pull", "consumers"):
            va, vb = (getattr(g, field) if g is not None else None for g in (x, y))
            if field == "consumers":
                va, vb = ({c: [v["pull"], v["ack"]] for c, v in d.items()} if d is not None else None for d in (va, vb))
            if va != vb:
                rows.append(_row("group_progress", subject=key[0], group=key[1], field=field, a=va, b=vb))
    return rows


def compare_checkpoints(probes: dict) -> list[dict]:
    """The offsets of the snapshots each side's start loads, and the message checkpoint's max
    sequence of each subject (``probes``: each side's ``probe_start``)."""
    rows = []
    for field, attr in (("message_checkpoint_offset", "message_checkpoint"),
                        ("action_checkpoint_offset", "action_checkpoint")):
        va, vb = (getattr(probes[side], attr) for side in SIDES)
        if va != vb:
            rows.append(_row("checkpoint_field", field=field, a=va, b=vb))
    maxima = [probes[side].max_sequences for side in SIDES]
    for subject in sorted(maxima[0].keys() | maxima[1].keys()):
        va, vb = (m.get(subject) for m in maxima)
        if va != vb:
            rows.append(_row("checkpoint_field", subject=subject, field="max_sequence", a=va, b=vb))
    return rows


class QmqDiff:
    """Two QMQ stores' differences: ``rows`` as they are made (the summary last); ``equal``
    once they are out."""

    kind = "qmq_diff"

    def __init__(self, a: pathlib.Path, b: pathlib.Path):
        self.a, self.b = a, b
        self.equal: bool | None = None

    @property
    def rows(self) -> Iterator[dict]:
        counts: dict[str, int] = {}
        summary: dict = {}

        def counted(rows):
            for row in rows:
                counts[row["record"]] = counts.get(row["record"], 0) + 1
                yield row

        logs = {}
        for side, root in (("a", self.a), ("b", self.b)):
            log = list_log(root / "messagelog", PER_SEGMENT_FILE_SIZE)
            actions = list_log(root / "actionlog", actionlog_format.PER_SEGMENT_FILE_SIZE)
            logs[side] = (_Log(log, read_tail(log, TAIL_BYTES, False).end), _Log(actions, _data_end(actions)))
        try:
            yield from counted(compare_message_logs(logs["a"][0], logs["b"][0], summary))
            yield from counted(compare_action_logs(logs["a"][1], logs["b"][1]))
        finally:
            for pair in logs.values():
                for log in pair:
                    log.close()
        roots = {"a": self.a, "b": self.b}
        probes = {side: probe_start(root) for side, root in roots.items()}  # each side's start, read once
        ends = {side: subject_ends(root) for side, root in roots.items()}
        yield from counted(compare_subjects(ends))
        yield from counted(compare_consumer_logs(ends))
        yield from counted(compare_progress({side: group_progress(root, probe=probes[side], ends=ends[side])
                                             for side, root in roots.items()}))
        yield from counted(compare_checkpoints(probes))
        differences = sum(counts.values())
        self.equal = differences == 0
        what = ", ".join(f"{n} {k}" for k, n in counts.items())
        yield _row("summary", reason="equal" if self.equal else f"differ: {what}", equal=self.equal,
                   differences=differences, counts=counts, store_a=str(self.a), store_b=str(self.b), **summary)


def diff_qmq_stores(a: pathlib.Path, b: pathlib.Path) -> QmqDiff:
    return QmqDiff(pathlib.Path(a), pathlib.Path(b))
