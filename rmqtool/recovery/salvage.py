"""Salvage: every intact message of a store, wherever it lies (past where recovery cuts the
log, inside damaged segments), and what is lost for good.

The one scanner reads every commit log file whole and resynchronises after damage the way
``dump`` does. A message is kept only when it proves itself: its physicalOffset field names
its own position, its lengths add up (or the scanner would not have decoded it), its body
CRC is right and, where it has one, its ``__CRC32#`` too. Everything else is reported: the
byte ranges no record could be read from, messages that decode but fail a check, and per
queue the queue offsets no kept message has (against the queue's range in its consume
queue, where there is one). A 5.x inner batch record holds INNER_NUM messages from queue
offset INNER_BASE, as the broker's dispatch reads them.
"""
from __future__ import annotations

import dataclasses
from typing import Iterator

from rmqtool.dispatch.dispatcher import inner_batch
from rmqtool.errors import RmqError
from rmqtool.findings import SEGMENT_GAP
from rmqtool.formats.properties import PROPERTY_INNER_BASE, PROPERTY_INNER_NUM
from rmqtool.store.commitlog import Corrupt
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import Message
from rmqtool.store.view import StoreView, view_of_root


def intact(m: Message) -> bool:
    return (m.physical_offset == m.commit_log_offset and m.body_crc_ok is not False
            and m.property_crc_ok is not False)


def is_inner_batch(m: Message) -> bool:
    """A 5.x inner batch record: INNER_NUM and INNER_BASE both there, as the broker's dispatch asks."""
    return PROPERTY_INNER_NUM in m.properties and PROPERTY_INNER_BASE in m.properties


def queue_offsets_of(m: Message) -> range:
    """The queue offsets a record's messages have: an inner batch's INNER_NUM from INNER_BASE
    (5.3.3's setBatchSizeIfNeeded), any other record its queueOffset field alone. An inner
    batch whose INNER_BASE does not parse (the broker fails that record, its messages are
    still there) counts from its queueOffset field, which 5.x sets to the same base."""
    if is_inner_batch(m):
        for props in (m.properties, {**m.properties, PROPERTY_INNER_BASE: str(m.queue_offset)}):
            try:
                base, num = inner_batch(props)
            except ValueError:
                continue
            if num > 0:
                return range(base, base + num)
            break
    return range(m.queue_offset, m.queue_offset + 1)


@dataclasses.dataclass
class SalvageReport:
    store: str
    recovered_end: int | None = None  # where the broker's recovery ends the log
    kept: int = 0
    kept_bytes: int = 0
    kept_past_recovered_end: int = 0  # messages the broker's recovery would drop
    damaged_regions: list = dataclasses.field(default_factory=list)
    rejected: list = dataclasses.field(default_factory=list)
    queue_offsets: dict = dataclasses.field(default_factory=dict)  # "T/Q" -> kept queue offsets (a set, then how many)
    missing: dict = dataclasses.field(default_factory=dict)  # "T/Q" -> [[first, last], ...]

    @property
    def lost_anything(self) -> bool:
        return bool(self.damaged_regions or self.rejected or self.missing)

    def reject(self, m: Message, reason: str) -> None:
        """A message the scan kept that the writer cannot take (``--to-store``: a topic no
        store can name): counted as rejected instead. Called as the messages are read, before
        the queues' missing offsets are worked out at their end."""
        self.kept -= 1
        self.kept_bytes -= m.store_size
        if self.recovered_end is not None and m.commit_log_offset >= self.recovered_end:
            self.kept_past_recovered_end -= 1
        key = f"{m.topic}/{m.queue_id}"
        self.queue_offsets.get(key, set()).difference_update(queue_offsets_of(m))
        if not self.queue_offsets.get(key, True):
            del self.queue_offsets[key]
        self.rejected.append(_rejected_row(m, reason))

    def to_json(self) -> dict:
        return {"store_path": self.store, "messages_kept": self.kept, "bytes_kept": self.kept_bytes,
                "recovered_end": self.recovered_end, "kept_past_recovered_end": self.kept_past_recovered_end,
                "damaged_regions": self.damaged_regions, "messages_rejected": self.rejected,
                "queue_offsets_kept": self.queue_offsets, "missing_queue_offsets": self.missing,
                "lost_anything": self.lost_anything}


def salvage(store, recovered_end: int | None = None) -> tuple[Iterator[Message], SalvageReport]:
    """The kept messages, in commit log order (an iterator: read it to the end before the
    report is complete), and the report. ``store``: the view the command opened (or a store root)."""
    view = view_of_root(store)
    report = SalvageReport(str(view.root), recovered_end)

    def messages() -> Iterator[Message]:
        log = view.commit_log
        last_record = -1  # where the last record that decodes starts
        for r in log.scan(check_crc=True):
            if isinstance(r, Message):
                last_record = r.commit_log_offset
                if intact(r):
                    report.kept += 1
                    report.kept_bytes += r.store_size
                    if recovered_end is not None and r.commit_log_offset >= recovered_end:
                        report.kept_past_recovered_end += 1
                    report.queue_offsets.setdefault(f"{r.topic}/{r.queue_id}", set()).update(queue_offsets_of(r))
                    yield r
                else:
                    why = [w for w, bad in (("physicalOffset names another position",
                                             r.physical_offset != r.commit_log_offset),
                                            ("body CRC", r.body_crc_ok is False),
                                            ("__CRC32# property", r.property_crc_ok is False)) if bad]
                    report.rejected.append(_rejected_row(r, ", ".join(why)))
            elif isinstance(r, Corrupt):
                report.damaged_regions.append({"commit_log_offset": r.offset, "file": r.path, "file_position": r.position,
                                               "bytes": r.size, "finding": r.finding_id, "reason": r.reason})
        _gaps(log, report, last_record)
        report.damaged_regions.sort(key=lambda d: d["commit_log_offset"])
        _missing(view, report)

    return messages(), report


def _rejected_row(m: Message, reason: str) -> dict:
    return {"commit_log_offset": m.commit_log_offset, "file": m.path, "file_position": m.position,
            "size": m.store_size, "topic": m.topic, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
            "reason": reason}


def _gaps(log: CommitLog, report: SalvageReport, last_record: int) -> None:
    """Commit log files missing between two that are there, where records after them show
    the log went on (a stray file far past the end leaves no gap of lost messages)."""
    size = log.mapped_file_size
    for prev, seg in zip(log.segments, log.segments[1:]):
        start = prev.base_offset + size if size else seg.base_offset
        if start < seg.base_offset <= last_record:
            report.damaged_regions.append({
                "commit_log_offset": start, "file": str(log.directory / f"{start:020d}"), "file_position": 0,
                "bytes": seg.base_offset - start, "finding": SEGMENT_GAP,
                "reason": f"no commit log file holds offsets {start} to {seg.base_offset}: missing"})


def _missing(view: StoreView, report: SalvageReport) -> None:
    """Per queue, the queue offsets between its first and last known ones that no kept
    message has; known: the kept messages and the queue's consume queue range. A batch
    consume queue's range is left out: it comes from its last unit's fields, where one
    flipped bit would claim billions of messages missing."""
    ranges: dict[str, tuple[int, int]] = {}

    def know(key: str, lo: int, hi: int) -> None:
        if key in ranges:
            lo, hi = min(lo, ranges[key][0]), max(hi, ranges[key][1])
        ranges[key] = (lo, hi)

    try:
        for q in view.consume_queues().queues:
            if not q.is_batch and q.max_offset > q.min_offset():
                know(f"{q.topic}/{q.queue_id}", q.min_offset(), q.max_offset)
    except RmqError:
        pass  # unreadable queues only narrow what is known to be missing
    for key, seen in report.queue_offsets.items():
        know(key, min(seen), max(seen) + 1)
    for key, (lo, hi) in sorted(ranges.items()):
        gaps, expect = [], lo  # walk the kept offsets in order: the gaps between them (a damaged
        for offset in sorted(report.queue_offsets.get(key, ())):  # field can be far off: never the whole range)
            if offset > expect:
                gaps.append([expect, offset - 1])
            expect = max(expect, offset + 1)
        if expect < hi:
            gaps.append([expect, hi - 1])
        if gaps:
            report.missing[key] = gaps
    report.queue_offsets = {k: len(v) for k, v in report.queue_offsets.items()}
