"""A subject's ``ConsumerLog`` through a QMQ start: loaded, rebuilt by the replay, then served.

Load (``ConsumerLogManager``): every directory of ``consumerlog/`` except names holding a
breaking whitespace, each cut by ``MaxSequenceLogSegmentValidator`` to the message
checkpoint's max sequence of its subject (to nothing when the checkpoint lacks it). The
replay writes a unit per record (``writeMessageLogIndex``): nothing when the sequence is
below the log's next sequence, fill units (offset 0, size Integer.MAX_VALUE) up to it when
it is ahead. Serving (``DefaultStorage.getMessage``): a unit's payload is read only when it
lies inside the message log's written part; otherwise the answer is SUCCESS with no message.
"""
from __future__ import annotations

import dataclasses
import pathlib
import struct

from rmqtool.formats.qmq.consumerlog import (CONSUMER_LOG_MAGIC_V2, CONSUMER_LOG_UNIT_BYTES, FILL_HEADER_SIZE,
                                             FILL_WROTE_BYTES, FILL_WROTE_OFFSET, SEGMENT_TOTAL_UNIT,
                                             TYPE_MESSAGE_LOG_INDEX, TYPE_SMT_INDEX)
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE as MESSAGE_SEGMENT_SIZE
from rmqtool.recovery.qmq.javabuf import JavaException, int32
from rmqtool.recovery.qmq.logs import Log, load_log
from rmqtool.recovery.qmq.validators import max_sequence_validator

_V1 = struct.Struct(">qqih")
_V2_MESSAGE = struct.Struct(">hhqqih")
# Guava CharMatcher.breakingWhitespace(): whitespace but the non-breaking spaces
_NON_BREAKING = {"\u00a0", "\u2007", "\u202f"}


def has_breaking_whitespace(name: str) -> bool:
    return any((c.isspace() or c in "\u180e\u200b") and c not in _NON_BREAKING for c in name)


@dataclasses.dataclass(frozen=True, slots=True)
class Unit:
    kind: str  # "message" (a message-log index), "smt", "invalid"
    wrote_offset: int = 0
    wrote_bytes: int = 0
    header_size: int = 0
    origin: str = "file"  # "file", "rebuilt" (the replay wrote it), "fill" (fillPreBlank)
    error: str | None = None  # invalid: what readUnit throws


FILL = Unit("message", FILL_WROTE_OFFSET, FILL_WROTE_BYTES, FILL_HEADER_SIZE, "fill")


def _java_mod(a: int, b: int) -> int:
    """Java's ``%``: the sign of the dividend."""
    r = abs(a) % b
    return -r if a < 0 else r


@dataclasses.dataclass(slots=True)
class ConsumerLog:
    subject: str
    unit_bytes: int
    log: Log
    written: dict[int, Unit] = dataclasses.field(default_factory=dict)  # sequence -> unit the start wrote
    min_sequence: int = 0  # ConsumerLog.minSequence (raised from the message log's .offset file)

    def next_sequence(self) -> int:
        return self.log.max_offset() // self.unit_bytes

    def min_offset(self) -> int:
        return max(self.log.min_offset() // self.unit_bytes, self.min_sequence)

    def bound(self) -> tuple[int, int]:
        """``getOffsetBound``: (min, max) sequences; max is the next sequence to write."""
        nxt = self.next_sequence()
        return min(self.min_offset(), nxt), nxt

    def write_message_log_index(self, sequence: int, wrote_offset: int, wrote_bytes: int, header_size: int) -> str:
        """``writeUnit``: "skipped" (below the next sequence), "written" or "failed"."""
        while True:
            if sequence < self.next_sequence():
                return "skipped"
            expected = sequence * self.unit_bytes
            seg = self.log.locate(expected)
            if seg is None:
                before = len(self.log.deleted)
                seg = self.log.alloc_or_reset(expected)
                if len(self.log.deleted) != before:
                    self.written.clear()  # every segment was deleted with what the replay wrote
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

    def _fill_pre_blank(self, seg, until: int) -> None:
        start = seg.base_offset + seg.wrote
        count = max(0, -(-(until - start) // self.unit_bytes))
        for _ in range(min(count, (seg.size - seg.wrote) // self.unit_bytes)):
            self.written[(seg.base_offset + seg.wrote) // self.unit_bytes] = FILL
            seg.wrote += self.unit_bytes

    def unit_at(self, seg, position: int) -> Unit:
        """``readUnit`` at a position of a segment."""
        sequence = (seg.base_offset + position) // self.unit_bytes
        if sequence in self.written and seg is self.log.segments.get(seg.base_offset):
            return self.written[sequence]
        raw = bytes(seg.data[position:position + self.unit_bytes])
        raw += bytes(self.unit_bytes - len(raw))
        if self.unit_bytes == CONSUMER_LOG_UNIT_BYTES:
            _, offset, size, header = _V1.unpack(raw)
            return Unit("message", offset, size, header)
        magic, unit_type = int.from_bytes(raw[:2], "big", signed=True), int.from_bytes(raw[2:4], "big")
        if magic & 0xFFFF != CONSUMER_LOG_MAGIC_V2:
            return Unit("invalid", error=f"illegal consumer log magic code {magic}")
        if unit_type == TYPE_MESSAGE_LOG_INDEX:
            _, _, _, offset, size, header = _V2_MESSAGE.unpack_from(raw)
            return Unit("message", offset, size, header)
        if unit_type == TYPE_SMT_INDEX:
            return Unit("smt")
        return Unit("invalid", error=f"illegal consumer log unit payload type {int32(unit_type << 16) >> 16}")

    def get_message(self, sequence: int, message_log: Log) -> tuple[str, Unit | None, bool]:
        """``DefaultStorage.getMessage`` (strict, one message): (status, the unit read, whether
        a message came with it). A status "exception: ..." is a throw out of the read."""
        low, high = self.bound()
        if high == 0:
            return "NO_MESSAGE", None, False
        if sequence > high:
            return "OFFSET_OVERFLOW", None, False
        if sequence < low:
            return "EMPTY_CONSUMER_LOG", None, False
        offset = sequence * self.unit_bytes
        seg = self.log.locate(offset)
        position = offset % (self.unit_bytes * SEGMENT_TOTAL_UNIT)
        if seg is None or not 0 <= position < seg.wrote:
            return "EMPTY_CONSUMER_LOG", None, False
        unit = self.unit_at(seg, position)
        if unit.kind == "invalid":
            return f"exception: java.lang.RuntimeException: {unit.error}", unit, False
        if unit.kind == "smt":
            return "SUCCESS", unit, False  # smt/ tablets are not modelled: no message read
        try:
            return "SUCCESS", unit, read_payload(message_log, unit)
        except JavaException as exc:
            return f"exception: {exc.java_class}", unit, False


def read_payload(message_log: Log, unit: Unit) -> bool:
    """``MessageLog.getMessage``: whether the unit's payload lies in the written message log."""
    payload_offset = unit.wrote_offset + unit.header_size
    seg = message_log.locate(payload_offset)
    if seg is None:
        return False
    size = int32(unit.wrote_bytes - unit.header_size)
    position = int32(_java_mod(payload_offset, MESSAGE_SEGMENT_SIZE))
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
