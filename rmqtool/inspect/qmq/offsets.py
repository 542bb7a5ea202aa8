"""``rmqtool offsets`` on a QMQ store, and the group lag ``check`` measures: each group's
progress in each subject against the subject's consumer log.

The progress is what the next start has (``recovery/qmq/start.probe_start``: the action
checkpoint, then the action log's actions after it, replayed): a group's max pulled message
sequence (``pull``: the consumer log sequence up to which it has taken messages) and each
consumer's pull and ack (pull-log sequences: ``unacked`` is pulled and not yet acked, which
QMQ sends again). The consumer log's range is read from its segments' names and its last
written unit; a store time from the header of the record a unit names.

A broadcast group's consumers each take every message, each keeping its own progress: the
group's max pulled sequence is no one's, so no lag is said for it (``lag_messages`` null).
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Iterator

from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.recovery.qmq.next_start import refusal_finding
from rmqtool.recovery.qmq.start import StartProbe, probe_start
from rmqtool.store.qmq import consumerlog, messagelog
from rmqtool.store.qmq.segments import LogDirectory, ZeroExtended, list_log, read_zero_extended

# Units read back at a time from a consumer log's end, looking for its last message unit
_UNITS_BACK = 1024


@dataclasses.dataclass(frozen=True, slots=True)
class SubjectEnd:
    """A subject's consumer log as its files end."""
    subject: str
    first_sequence: int  # the first segment's first unit (ConsumerLog's min sequence)
    next_sequence: int  # one past the last written unit
    last_message: tuple[int, int] | None  # (message log offset, size) the last unit naming a record names
    directory: LogDirectory
    unit_bytes: int

    @property
    def dispatched_end(self) -> int | None:
        """One past the record the last unit naming one names (None: no unit names one)."""
        return None if self.last_message is None else sum(self.last_message)

    def record_at(self, sequence: int) -> int | None:
        """The message log offset the unit at ``sequence`` names (None: no unit there names a record)."""
        at = sequence * self.unit_bytes
        seg = next((s for s in self.directory.segments if s.base_offset <= at < s.end_offset), None)
        if seg is None:
            return None
        unit = consumerlog.decode_unit(self.subject, sequence, str(seg.path), at - seg.base_offset,
                                       read_zero_extended(seg, at - seg.base_offset, self.unit_bytes))
        named = unit.kind == "message" and names_record(unit.wrote_offset, unit.wrote_bytes)
        return unit.wrote_offset if named else None

    def units(self, first: int, stop: int) -> Iterator[consumerlog.UnitColumns]:
        """The units from sequence ``first`` up to ``stop`` that its segments hold, as columns, a
        part of a segment at a time (a sequence no segment holds is left out)."""
        part = _UNITS_BACK * 64 * self.unit_bytes
        for seg in self.directory.segments:
            lo, hi = max(first * self.unit_bytes, seg.base_offset), min(stop * self.unit_bytes, seg.end_offset)
            for at in range(lo, hi, part):
                n = min(part, hi - at)
                cols = consumerlog.unit_columns_of(read_zero_extended(seg, at - seg.base_offset, n), 0,
                                                   n // self.unit_bytes, self.unit_bytes)
                yield dataclasses.replace(cols, first_sequence=at // self.unit_bytes)

    def named_offsets(self, first: int, stop: int) -> list:
        """The message log offsets the units from sequence ``first`` up to ``stop`` name (those
        naming a record)."""
        return [cols.wrote_offset[(cols.kind == consumerlog.MESSAGE)
                                  & names_record(cols.wrote_offset, cols.wrote_bytes)]
                for cols in self.units(first, stop)]


def names_record(wrote_offset, wrote_bytes):
    """Whether a message unit names a record: bytes at an offset in the log. A unit cut short
    (a crash while it was written; QMQ maps the segment at full size, so the rest reads as zeros),
    zeroed, or garbled to a negative offset or size names none (on ints or numpy columns)."""
    return (wrote_offset >= 0) & (wrote_bytes > 0)


def subject_end(root: str | os.PathLike, subject: str) -> SubjectEnd | None:
    """The subject's consumer log end, read back from its last written unit to its last message
    unit naming a record (None: no unit written)."""
    directory, unit = consumerlog.open_consumer_log(root, subject)
    if unit is None or not directory.segments:
        return None
    first = directory.segments[0].base_offset // unit
    following = None
    for seg in reversed(directory.segments):
        end = consumerlog.written_units_end(seg, unit)
        while end > 0:
            if following is None:
                following = (seg.base_offset + end) // unit
            start = max(end - _UNITS_BACK * unit, 0)
            cols = consumerlog.unit_columns_of(read_zero_extended(seg, start, end - start), 0, (end - start) // unit,
                                               unit)
            named = (cols.kind == consumerlog.MESSAGE) & names_record(cols.wrote_offset, cols.wrote_bytes)
            messages = named.nonzero()[0]
            if len(messages):
                k = int(messages[-1])
                return SubjectEnd(subject, first, following, (int(cols.wrote_offset[k]), int(cols.wrote_bytes[k])),
                                  directory, unit)
            end = start
    return None if following is None else SubjectEnd(subject, first, following, None, directory, unit)


def subject_ends(root: str | os.PathLike) -> dict[str, SubjectEnd]:
    """Every subject QMQ loads (consumerlog/ names without breaking whitespace) that has a unit."""
    return {s: e for s in consumerlog.loaded_subjects(root) if (e := subject_end(root, s)) is not None}


class RecordHeads:
    """Store times (and subjects) of message log records, read from their headers at the
    offsets units name."""

    def __init__(self, root: str | os.PathLike):
        self.log = list_log(pathlib.Path(root) / "messagelog", PER_SEGMENT_FILE_SIZE)

    def _item(self, offset: int | None):
        """(segment, the scanner's item at ``offset``, a header read without its payload's CRC),
        or None when no segment holds it."""
        seg = self.log.locate(offset) if offset is not None else None
        if seg is None:
            return None
        with ZeroExtended(seg) as data:
            return seg, messagelog.parse_record(data, offset - seg.base_offset, check_crc=False)

    def timestamp_at(self, offset: int | None) -> int | None:
        """The store time of the message record at ``offset``, or of the first after an
        end-of-segment or blank record there; None when no record starts there."""
        for _hop in range(3):
            found = self._item(offset)
            if found is None:
                return None
            seg, item = found
            if isinstance(item, messagelog.MessageRecord):
                return item.timestamp
            if isinstance(item, messagelog.EmptyRecord):
                offset = seg.end_offset
            elif isinstance(item, messagelog.BlankRecord):
                offset = seg.base_offset + item.until
            else:
                return None
        return None

    def subject_at(self, offset: int) -> str | None:
        """The subject of the message record at ``offset`` (None: no message record starts there)."""
        found = self._item(offset)
        return found[1].subject if found is not None and isinstance(found[1], messagelog.MessageRecord) else None


@dataclasses.dataclass(frozen=True, slots=True)
class GroupProgress:
    subject: str
    group: str
    broadcast: bool
    pull: int  # the group's max pulled message sequence (-1: none yet)
    first_sequence: int | None  # the subject's consumer log range (None: no unit written)
    next_sequence: int | None
    lag_messages: int | None
    lag_ms: int | None
    next_store_timestamp: int | None  # of the first message the group has not pulled
    newest_store_timestamp: int | None  # of the subject's last message
    consumers: dict  # consumer id -> {"pull", "ack", "unacked"} (pull-log sequences)

    def record(self) -> dict:
        return {"subject": self.subject, "group": self.group, "broadcast": self.broadcast, "pull": self.pull,
                "first_sequence": self.first_sequence, "next_sequence": self.next_sequence,
                "lag_messages": self.lag_messages, "lag_ms": self.lag_ms,
                "next_store_timestamp": self.next_store_timestamp,
                "newest_store_timestamp": self.newest_store_timestamp, "consumers": self.consumers}


@dataclasses.dataclass(frozen=True)
class QmqOffsets:
    rows: list[GroupProgress]
    probe: StartProbe
    findings: tuple = ()  # storeNotLoadable: the start that loads the progress stops
    kind = "qmq_offset"  # its rows' kind (report/columns.VIEWS)
    nothing = "group progress"  # what a lookup that matches no row finds none of

    def notes(self) -> list[str]:
        """What the rows do not show (stderr lines)."""
        if self.probe.refusal is None:
            return []
        return ["note: no consumer progress is loaded where QMQ's start stops (rmqtool recover shows why)"]


def group_progress(root: str | os.PathLike, *, group: str | None = None, subject: str | None = None,
                   probe: StartProbe | None = None, ends: dict[str, SubjectEnd] | None = None,
                   heads: RecordHeads | None = None) -> QmqOffsets:
    """Each group's progress in each subject (``group``, ``subject``: only those), in subject
    and group order; ``probe``, ``ends``, ``heads``: what the caller has read already."""
    probe = probe if probe is not None else probe_start(root)
    ends = ends if ends is not None else subject_ends(root)
    heads = heads if heads is not None else RecordHeads(root)
    rows = []
    for p in probe.consumer_progress:
        if (group is not None and p["group"] != group) or (subject is not None and p["subject"] != subject):
            continue
        end = ends.get(p["subject"])
        consumers = {c: {"pull": pull, "ack": ack, "unacked": max(pull - ack, 0)}
                     for c, (pull, ack) in p["consumers"].items()}
        lag = lag_ms = following_ts = newest_ts = None
        if end is not None:
            newest_ts = heads.timestamp_at(end.last_message[0]) if end.last_message else None
            if not p["broadcast"]:
                lag = max(end.next_sequence - 1 - p["pull"], 0)
                if lag:
                    following_ts = heads.timestamp_at(end.record_at(max(p["pull"] + 1, end.first_sequence)))
                lag_ms = 0 if not lag else (newest_ts - following_ts if None not in (newest_ts, following_ts)
                                            else None)
        rows.append(GroupProgress(p["subject"], p["group"], p["broadcast"], p["pull"],
                                  end.first_sequence if end else None, end.next_sequence if end else None,
                                  lag, lag_ms, following_ts, newest_ts, consumers))
    return QmqOffsets(rows, probe, (refusal_finding(root, probe.refusal),) if probe.refusal is not None else ())
