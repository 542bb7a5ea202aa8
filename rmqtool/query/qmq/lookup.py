"""Lookups in a QMQ store, each walking what the broker walks.

* by subject and sequence: the subject's consumer-log unit, then the record it points at
  (``DefaultStorage.getMessage``); a unit past the message log's end gives no message
  (QMQ answers SUCCESS with none), a unit whose record is another's is said so;
* by message id: QMQ keeps no index of ids, so the message log is read, payload by payload;
* by time: QMQ has no time lookup; each subject's records are appended in time order, so
  its sequences are searched by the append time of the record each unit points at (a
  unit's own timestamp is the dispatch time, and units rebuilt by a recovery carry the
  recovery's clock, so they are not used).
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Iterator

import construct as cs

from rmqtool.formats.qmq import payload as qpayload
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.store.qmq import consumerlog, messagelog
from rmqtool.store.qmq.segments import LogDirectory, ZeroExtended, list_log


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """A lookup's answer: the record, or why there is none where the unit points."""
    subject: str
    sequence: int
    record: messagelog.MessageRecord | None
    reason: str | None = None


class QmqLookup:
    def __init__(self, root: str | os.PathLike):
        self.root = pathlib.Path(root)
        self.log: LogDirectory = list_log(self.root / "messagelog", PER_SEGMENT_FILE_SIZE)
        self._units: dict[str, list] = {}

    def record_at(self, offset: int) -> messagelog.MessageRecord | str:
        seg = self.log.locate(offset)
        if seg is None:
            return f"message log offset {offset} is in no segment"
        with ZeroExtended(seg) as data:
            if offset - seg.base_offset >= data.written:
                return f"message log offset {offset} is past the written end"
            item = messagelog.parse_record(data, offset - seg.base_offset)
        return item if isinstance(item, messagelog.MessageRecord) else f"no record at offset {offset}: {item}"

    def units(self, subject: str) -> list:
        if subject not in self._units:
            directory, unit = consumerlog.open_consumer_log(self.root, subject)
            self._units[subject] = list(consumerlog.read_units(directory, unit, subject)) if unit else []
        return self._units[subject]

    def by_sequence(self, subject: str, sequence: int) -> Found:
        unit = next((u for u in self.units(subject) if u.sequence == sequence), None)
        if unit is None:
            return Found(subject, sequence, None, f"{subject} has no consumer-log unit for sequence {sequence}")
        if unit.kind != "message":
            return Found(subject, sequence, None, f"the unit of sequence {sequence} is a {unit.kind} unit")
        rec = self.record_at(unit.wrote_offset)
        if isinstance(rec, str):
            return Found(subject, sequence, None, rec)
        if (rec.subject, rec.sequence) != (subject, sequence):
            return Found(subject, sequence, rec, f"the unit points at {rec.subject} sequence {rec.sequence}")
        return Found(subject, sequence, rec)

    def by_message_id(self, message_id: str) -> Iterator[messagelog.MessageRecord]:
        needle = message_id.encode("utf-8")
        for seg in self.log.segments:
            for item in messagelog.scan_segment(seg):
                if isinstance(item, messagelog.MessageRecord) and item.payload is not None and needle in item.payload:
                    try:
                        header = qpayload.PayloadHeader.parse(item.payload)
                    except (cs.ConstructError, UnicodeDecodeError):
                        continue
                    if header.message_id == message_id:
                        yield item

    def by_time(self, subject: str, timestamp_ms: int) -> Found | None:
        """The first sequence of ``subject`` whose record was appended at or after the time."""
        units = [u for u in self.units(subject) if u.kind == "message"]
        lo, hi = 0, len(units)
        while lo < hi:
            mid = (lo + hi) // 2
            rec = self.record_at(units[mid].wrote_offset)
            stamp = rec.timestamp if isinstance(rec, messagelog.MessageRecord) else None
            if stamp is not None and stamp < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return self.by_sequence(subject, units[lo].sequence) if lo < len(units) else None
