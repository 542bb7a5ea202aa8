"""What ``dump commitlog`` emits: every record of a commit log as a row.

PATH is a store, its ``commitlog/`` directory or one segment file. Messages are picked by
topic, queue, store time and commit log offset; end-of-file blanks (with ``show_blank``)
and damaged regions are rows too. Damage never stops a dump: each damaged record becomes
a finding naming its file and position, and :attr:`CommitLogDump.damaged` counts them.
"""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Iterator

from rmqtool.errors import CodecMissing
from rmqtool.findings import Finding
from rmqtool.inspect.hints import wrong_kind
from rmqtool.inspect.selection import MessageSelection
from rmqtool.report.records import human_time, message_record
from rmqtool.store import detect
from rmqtool.store.commitlog import Blank, CommitLog, Corrupt, scan_segment
from rmqtool.store.message import Message
from rmqtool.store.paths import is_segment_name
from rmqtool.store.segments import Segment, last_written


def commitlog_segments(path: pathlib.Path) -> tuple[list[Segment], list[Finding]]:
    """(segments to scan, findings about them) of a store, a commitlog/ directory or one segment."""
    kind = detect.kind_of(path)
    if kind == detect.STORE or (kind == detect.COMMITLOG and path.is_dir()):
        cl = CommitLog(path / "commitlog" if kind == detect.STORE else path)
        return cl.segments, list(cl.findings)
    if kind == detect.COMMITLOG:
        base = int(path.name) if is_segment_name(path.name) else 0
        return [Segment(path, base, path.stat().st_size)], []
    raise wrong_kind(path, kind, "a commit log segment")


def record_findings(r) -> list[Finding]:
    """The findings a scanned record shows. Counted here by hand until the scanner emits
    them itself; then this one function goes."""
    if isinstance(r, Message):
        found = []
        if r.body_crc_ok is False:
            found.append(Finding("bodyCrcMismatch", r.path, r.position, f"body CRC field {r.body_crc} does not "
                                 f"match the body (message at commit log offset {r.commit_log_offset})"))
        if r.property_crc_ok is False:
            found.append(Finding("propertyCrcMismatch", r.path, r.position, "the __CRC32# property does not match "
                                 f"the record (message at commit log offset {r.commit_log_offset})"))
        if not r.properties_utf8_ok:
            found.append(Finding("propertiesInvalidUtf8", r.path, r.position, "properties are not valid UTF-8 "
                                 f"(message at commit log offset {r.commit_log_offset})"))
        if not r.topic_utf8_ok:
            found.append(Finding("topicInvalidUtf8", r.path, r.position, "topic is not valid UTF-8 "
                                 f"(message at commit log offset {r.commit_log_offset})"))
        return found
    if isinstance(r, Blank):
        return [] if r.valid else [Finding("blankRecordInvalid", r.path, r.position,
                                           f"blank record totalSize {r.size} is not the bytes left in the file")]
    return [r.finding()]


def blank_row(b: Blank) -> dict:
    return {"record": "blank", "commit_log_offset": b.offset, "store_size": b.size, "valid": b.valid,
            "file": b.path, "file_position": b.position}


def corrupt_row(c: Corrupt) -> dict:
    return {"record": "corrupt", "commit_log_offset": c.offset, "store_size": c.size, "finding": c.finding_id,
            "reason": c.reason, "file": c.path, "file_position": c.position}


@dataclasses.dataclass
class CommitLogDump:
    """One ``dump commitlog`` run: construct it (bad paths raise here, before any output),
    iterate :meth:`rows`, then read :attr:`findings` and :attr:`damaged`.

    ``body`` is text, hex, base64 or none; ``preview`` cuts text bodies to that many
    characters; ``for_people`` adds what a table shows (store_time, keys as one string).
    """
    path: pathlib.Path
    selection: MessageSelection = MessageSelection()
    from_offset: int | None = None
    to_offset: int | None = None  # exclusive
    limit: int | None = None
    body: str = "base64"
    preview: int | None = None
    decompress: bool = False
    check_crc: bool = True
    show_blank: bool = False
    for_people: bool = False
    segments: list[Segment] = dataclasses.field(init=False)
    findings: list[Finding] = dataclasses.field(init=False)  # about segments and records, in scan order
    damaged: int = dataclasses.field(init=False, default=0)  # records with a finding

    def __post_init__(self):
        self.segments, self.findings = commitlog_segments(pathlib.Path(self.path))

    @property
    def total_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def _row(self, r) -> dict | None:
        """The row for a scanned record, or None when it is not asked for."""
        if isinstance(r, Message):
            if not self.selection.matches(r):
                return None
            try:
                row = {"record": "message", **message_record(r, self.body, decompress=self.decompress,
                                                              preview=self.preview)}
            except CodecMissing as exc:  # operational: every such body would fail the same way
                raise CodecMissing(exc.message, r.path, r.position) from None
            if "body_decompress_error" in row:
                self.damaged += 1
                self.findings.append(Finding("bodyDecompressFailed", r.path, r.position,
                                             f"{row['body_decompress_error']} (message at commit log offset "
                                             f"{r.commit_log_offset})"))
            if self.for_people:
                row["store_time"] = human_time(r.store_timestamp)
                row["keys"] = " ".join(r.keys)
            return row
        if isinstance(r, Blank):
            return blank_row(r) if self.show_blank or not r.valid else None
        return corrupt_row(r)

    def rows(self, progress=None) -> Iterator[dict]:
        """The rows, in commit log order; ``progress.advance(bytes)`` after each segment."""
        segments = self.segments
        last = last_written(segments)
        start_at, stop_at, limit = self.from_offset, self.to_offset, self.limit
        emitted = 0
        if limit is not None and limit <= 0:
            return
        for n, seg in enumerate(segments):
            if stop_at is not None and seg.base_offset >= stop_at:
                break
            if start_at is not None and seg.base_offset + seg.size <= start_at:
                continue
            start = start_at - seg.base_offset if start_at and start_at > seg.base_offset else 0
            for r in scan_segment(seg, is_last=(n >= last), start=start, end_offset=stop_at,
                                  check_crc=self.check_crc, findings=self.findings):
                found = record_findings(r)
                if found:
                    self.damaged += 1
                    self.findings += found
                row = self._row(r)
                if row is None:
                    continue
                yield row
                emitted += 1
                if limit is not None and emitted >= limit:
                    return
            if progress is not None:
                progress.advance(seg.size)
