"""A subject's ``ConsumerLog`` through a QMQ start: loaded, rebuilt by the replay, then served.

Load (``ConsumerLogManager``): every directory of ``consumerlog/`` except names holding a
breaking whitespace, each cut by ``MaxSequenceLogSegmentValidator`` to the message
checkpoint's max sequence of its subject (to nothing when the checkpoint lacks it). The
replay writes a unit per record (``writeMessageLogIndex``): nothing when the sequence is
below the log's next sequence, fill units (offset 0, size Integer.MAX_VALUE) up to it when
it is ahead (segment after segment: a damaged sequence field, which the payload CRC does not
cover, can put it billions of units ahead, and then the replay is followed no further:
:class:`FillTooFar`). Serving (``DefaultStorage.getMessage``): a unit's payload is read only when it
lies inside the message log's written part; otherwise the answer is SUCCESS with no message.
"""
from __future__ import annotations

import bisect
import dataclasses
import pathlib

import numpy as np

from rmqtool.formats.qmq.consumerlog import (CONSUMER_LOG_MAGIC_V2, FILL_HEADER_SIZE, FILL_WROTE_BYTES,
                                             FILL_WROTE_OFFSET, SEGMENT_TOTAL_UNIT)
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE as MESSAGE_SEGMENT_SIZE
from rmqtool.recovery.qmq.javabuf import JavaException, int32, int64, java_div, java_mod
from rmqtool.recovery.qmq.logs import Log, load_log
from rmqtool.recovery.qmq.validators import max_sequence_validator
from rmqtool.store.qmq.consumerlog import INVALID, SMT, decode_unit, unit_columns_of

_BLOCK = 1 << 20  # units answered at once
_PROBE = 16  # units tried first
# segments of blank units the replay is followed through for one record: past them the broker's
# fill makes over 10^12 appends (about K^2 x 5 million for K segments) and writes K segments
# of 220 MB or more: its start does not finish
MAX_FILL_SEGMENTS = 1024

@dataclasses.dataclass(frozen=True, slots=True)
class Unit:
    kind: str  # "message" (a message-log index), "smt", "invalid"
    wrote_offset: int = 0
    wrote_bytes: int = 0
    header_size: int = 0
    origin: str = "file"  # "file", "rebuilt" (the replay wrote it), "fill" (fillPreBlank), FILL_IN_FILE
    error: str | None = None  # invalid: what readUnit throws


FILL = Unit("message", FILL_WROTE_OFFSET, FILL_WROTE_BYTES, FILL_HEADER_SIZE, "fill")
FILL_IN_FILE = "fill in file"  # a fill unit the files hold (an earlier replay's, or recover --apply's)


class FillTooFar(Exception):
    """A record's sequence so far past its consumer log's next sequence that the replay's fill
    up to it (``fillPreBlank``, a segment of blank units at a time) is not followed."""

    def __init__(self, subject: str, sequence: int, next_sequence: int, segments: int, segment_size: int,
                 appends: int, wrapped_by: tuple[int, int] | None = None):
        super().__init__(subject, sequence)
        self.subject, self.sequence, self.next_sequence = subject, sequence, next_sequence
        self.segments, self.segment_size, self.appends = segments, segment_size, appends
        self.wrapped_by = wrapped_by

    def text(self, message_log_offset: int) -> str:
        why = "" if self.wrapped_by is None else (
            f" (the next sequence is below 0: the record at message log offset {self.wrapped_by[1]} has sequence "
            f"{self.wrapped_by[0]}, whose unit offset, sequence x unit size, wraps past a Java long, and writeUnit "
            f"started the log there)")
        return (f"{self.subject}: the record at message log offset {message_log_offset} has sequence "
                f"{self.sequence}, {self.segments:,} consumer log segments past the log's next sequence "
                f"{self.next_sequence}{why}: writeUnit fills them all with blank units first ({self.segments:,} files "
                f"of {self.segment_size:,} bytes; fillPreBlank makes about {self.appends:.2g} appends, one "
                f"writeUnit call deeper a segment)")


@dataclasses.dataclass(slots=True)
class ConsumerLog:
    subject: str
    unit_bytes: int
    log: Log
    written: dict[int, Unit] = dataclasses.field(default_factory=dict)  # sequence -> unit the replay rebuilt
    fills: list[list[int]] = dataclasses.field(default_factory=list)  # [first, last] runs of fill units, in order
    min_sequence: int = 0  # ConsumerLog.minSequence (raised from the message log's .offset file)
    wrapped_by: tuple[int, int] | None = None  # (sequence, message log offset) of a record whose unit offset wrapped

    def next_sequence(self) -> int:
        return java_div(self.log.max_offset(), self.unit_bytes)

    def min_offset(self) -> int:
        return max(java_div(self.log.min_offset(), self.unit_bytes), self.min_sequence)

    def bound(self) -> tuple[int, int]:
        """``getOffsetBound``: (min, max) sequences; max is the next sequence to write."""
        nxt = self.next_sequence()
        return min(self.min_offset(), nxt), nxt

    def write_message_log_index(self, sequence: int, wrote_offset: int, wrote_bytes: int, header_size: int) -> str:
        """``writeUnit``: "skipped" (below the next sequence), "written" or "failed". Raises
        :class:`FillTooFar` where the fill up to the sequence is more than rmqtool follows."""
        first = True
        while True:
            if sequence < self.next_sequence():
                return "skipped"
            expected = int64(sequence * self.unit_bytes)  # Java's long: a damaged high byte wraps
            seg = self.log.locate(expected)
            if seg is None:
                before = len(self.log.deleted)
                seg = self.log.alloc_or_reset(expected)
                if len(self.log.deleted) != before:
                    self.written.clear()  # every segment was deleted with what the replay wrote
                    self.fills.clear()
            if first:
                first = False
                ahead = java_div(expected - seg.base_offset, seg.size)  # segments the fill allocates
                if ahead > MAX_FILL_SEGMENTS:
                    raise FillTooFar(self.subject, sequence, self.next_sequence(), ahead, seg.size,
                                     self._appends(seg, expected, ahead), self.wrapped_by)
                if expected < 0 <= sequence:  # the log starts again below 0: later records meet the fill
                    self.wrapped_by = (sequence, wrote_offset)
            self._fill_pre_blank(seg, expected)
            if seg.wrote > seg.size:
                return "failed"
            if seg.wrote == seg.size:  # END_OF_FILE: a next segment, and again
                self.log.alloc(self.log.next_base())
                continue
            at = (seg.base_offset + seg.wrote) // self.unit_bytes
            self.written[at] = Unit("message", wrote_offset, wrote_bytes, header_size, "rebuilt")
            seg.wrote += self.unit_bytes
            return "written"

    def _appends(self, seg, expected: int, ahead: int) -> int:
        """The blank-unit appends fillPreBlank makes on the way to ``expected``: at each
        segment (one writeUnit call deeper each) it loops from that segment's write position
        to ``expected``, a unit at a time, though the segment fills after its first units."""
        distance = (expected - seg.base_offset) // self.unit_bytes  # from this segment's base, in units
        per = seg.size // self.unit_bytes
        return distance - seg.wrote // self.unit_bytes + ahead * distance - per * ahead * (ahead + 1) // 2

    def _fill_pre_blank(self, seg, until: int) -> None:
        start = seg.base_offset + seg.wrote
        count = max(0, -(-(until - start) // self.unit_bytes))
        count = min(count, (seg.size - seg.wrote) // self.unit_bytes)  # appends to a full segment write nothing
        if count <= 0:
            return
        first = start // self.unit_bytes
        if self.fills and self.fills[-1][1] == first - 1:
            self.fills[-1][1] = first + count - 1
        else:
            self.fills.append([first, first + count - 1])
        seg.wrote += count * self.unit_bytes

    def fill_run(self, sequence: int) -> list[int] | None:
        """The run of fill units holding a sequence, if any."""
        at = bisect.bisect_right(self.fills, [sequence, float("inf")]) - 1
        return self.fills[at] if at >= 0 and self.fills[at][1] >= sequence else None

    def same_unit_until(self, seg, position: int) -> int:
        """The last sequence from the one at ``position`` whose unit is the same by
        construction (a run of fill units, or zeros past the file's bytes)."""
        sequence = (seg.base_offset + position) // self.unit_bytes
        run = self.fill_run(sequence)
        if run is not None:
            return run[1]
        if sequence in self.written or position < len(seg.data):
            return sequence
        last = (seg.base_offset + seg.wrote) // self.unit_bytes - 1
        later = [s for s in self.written if s > sequence] + [r[0] for r in self.fills if r[0] > sequence]
        return max(sequence, min([last, *(s - 1 for s in later)]))

    def unit_at(self, seg, position: int) -> Unit:
        """``readUnit`` at a position of a segment."""
        sequence = (seg.base_offset + position) // self.unit_bytes
        if sequence in self.written:
            return self.written[sequence]
        if self.fill_run(sequence) is not None:
            return FILL
        raw = bytes(seg.data[position:position + self.unit_bytes])
        raw += bytes(self.unit_bytes - len(raw))
        unit = decode_unit(self.subject, sequence, "", position, raw)  # store/qmq's one unit decoder
        if unit.kind in ("message", "fill"):  # readUnit makes no difference: a fill is a unit too
            return Unit("message", unit.wrote_offset, unit.wrote_bytes, unit.header_size,
                        FILL_IN_FILE if unit.kind == "fill" else "file")
        if unit.kind == "smt":
            return Unit("smt")
        magic, unit_type = int.from_bytes(raw[:2], "big", signed=True), int.from_bytes(raw[2:4], "big")
        if magic & 0xFFFF != CONSUMER_LOG_MAGIC_V2:
            return Unit("invalid", error=f"illegal consumer log magic code {magic}")
        return Unit("invalid", error=f"illegal consumer log unit payload type {int32(unit_type << 16) >> 16}")

    def get_message(self, sequence: int, message_log: Log) -> tuple[str, Unit | None, bool, int]:
        """``DefaultStorage.getMessage`` (strict, one message): (status, the unit read, whether
        a message came with it, the last sequence from this one sure to get the same answer).
        A status "exception: ..." is a throw out of the read."""
        low, high = self.bound()
        if high == 0:
            return "NO_MESSAGE", None, False, sequence
        if sequence > high:
            return "OFFSET_OVERFLOW", None, False, sequence
        if sequence < low:
            return "EMPTY_CONSUMER_LOG", None, False, low - 1
        offset = sequence * self.unit_bytes
        seg = self.log.locate(offset)
        position = java_mod(offset, self.unit_bytes * SEGMENT_TOTAL_UNIT)
        if seg is None or not 0 <= position < seg.wrote:
            return "EMPTY_CONSUMER_LOG", None, False, sequence
        unit = self.unit_at(seg, position)
        same_until = min(sequence + self.same_unit_until(seg, position) - (seg.base_offset + position) // self.unit_bytes,
                         high - 1)
        if unit.kind == "invalid":
            return f"exception: java.lang.RuntimeException: {unit.error}", unit, False, same_until
        if unit.kind == "smt":
            return "SUCCESS", unit, False, same_until  # smt/ tablets are not modelled: no message read
        try:
            return "SUCCESS", unit, read_payload(message_log, unit), same_until
        except JavaException as exc:
            return f"exception: {exc.java_class}", unit, False, same_until


    def plain_answers(self, sequence: int, high: int, message_log: Log) -> np.ndarray | None:
        """``get_message`` of the sequences from ``sequence`` on, at once, while each is a plain
        case: a unit of the file (not rebuilt, not a fill run of the replay) that ``readUnit``
        reads as a message-log index, whose payload offset lies inside a message log segment
        and whose read cannot throw. Each is then SUCCESS; the array says whether a message
        comes with it (``read_payload``). None when ``sequence`` is not such a case (the
        per-sequence path answers it)."""
        low = self.bound()[0]
        if not low <= sequence < high:
            return None
        offset = sequence * self.unit_bytes
        seg = self.log.locate(offset)
        per_segment = self.unit_bytes * SEGMENT_TOTAL_UNIT
        position = java_mod(offset, per_segment)
        if seg is None or position < 0 or position != offset - seg.base_offset:
            return None
        if sequence in self.written or self.fill_run(sequence) is not None:
            return None
        next_base = min((b for b in self.log.segments if b > offset), default=seg.base_offset + seg.size)
        count = min(high - sequence, (min(seg.wrote, len(seg.data)) - position) // self.unit_bytes,
                    (min(seg.base_offset + seg.size, next_base) - offset) // self.unit_bytes, _BLOCK)
        if count <= 0:
            return None
        probe = self._plain(seg, position, min(count, _PROBE), message_log)  # a non-plain case costs little
        if probe is None or len(probe) < min(count, _PROBE) or count <= _PROBE:
            return probe
        if self.written or self.fills:  # a block ends before the next unit the replay wrote
            later = [s for s in self.written if s > sequence] + [r[0] for r in self.fills if r[0] > sequence]
            count = min(count, min(later, default=sequence + count) - sequence)
        return self._plain(seg, position, count, message_log)

    def _plain(self, seg, position: int, count: int, message_log: Log) -> np.ndarray | None:
        units = unit_columns_of(seg.data, position, count, self.unit_bytes)
        message_segments = message_log.bases()
        plain = units.kind != INVALID
        plain &= units.kind != SMT
        off, wrote_bytes, header = units.wrote_offset, units.wrote_bytes, units.header_size
        plain &= (off > 0) & (off < 1 << 62)
        payload_offset = off + header
        plain &= (payload_offset > 0) & (payload_offset % MESSAGE_SEGMENT_SIZE != 0)
        at = np.searchsorted(np.array(message_segments, np.int64), payload_offset) - 1
        in_log = at >= 0
        wrote = np.array([message_log.segments[b].wrote for b in message_segments] or [0], np.int64)[at]
        size = ((wrote_bytes - header + (1 << 31)) % (1 << 32)) - (1 << 31)  # int32 arithmetic
        pos = payload_offset % MESSAGE_SEGMENT_SIZE
        reach = ((pos + size + (1 << 31)) % (1 << 32)) - (1 << 31)
        has_message = in_log & (reach <= wrote)
        plain &= ~has_message | ((size >= 0) & (size <= MESSAGE_SEGMENT_SIZE - pos))  # else the read throws
        stop = np.flatnonzero(~plain)
        n = int(stop[0]) if len(stop) else count
        return has_message[:n] if n else None


def read_payload(message_log: Log, unit: Unit) -> bool:
    """``MessageLog.getMessage``: whether the unit's payload lies in the written message log."""
    payload_offset = unit.wrote_offset + unit.header_size
    seg = message_log.locate(payload_offset)
    if seg is None:
        return False
    size = int32(unit.wrote_bytes - unit.header_size)
    position = int32(java_mod(payload_offset, MESSAGE_SEGMENT_SIZE))
    if int32(position + size) > seg.wrote:
        return False
    if not 0 <= position <= seg.size:
        raise JavaException("java.lang.IllegalArgumentException", f"newPosition {position}")
    if not 0 <= size <= seg.size - position:
        raise JavaException("java.lang.IllegalArgumentException", f"newLimit {size}")
    return True


def open_consumer_log(directory: pathlib.Path, subject: str, unit_bytes: int, max_sequence: int | None) -> ConsumerLog:
    """``new ConsumerLog(config, subject[, maxSequence])``; raises where the Java throws."""
    validator = max_sequence_validator(-1 if max_sequence is None else max_sequence, unit_bytes)
    return ConsumerLog(subject, unit_bytes, load_log(directory, unit_bytes * SEGMENT_TOTAL_UNIT, validator))
