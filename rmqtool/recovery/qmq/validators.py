"""The three ``LogSegmentValidator``s a QMQ start runs, read the way the Java reads.

* ``MessageLog.MessageLogSegmentValidator``: record by record from the segment's start; a bad
  magic, unknown attributes or a payload CRC that differs ends the valid part (PARTIAL); an
  end-of-segment record makes the segment COMPLETE. It reads a CRC field whatever the magic,
  checks no length, and a payload size of -1 throws ``NegativeArraySizeException`` out of the
  broker's constructor: the start is refused.
* ``ActionLog.ActionLogSegmentValidator``: the same walk over actions; any exception while
  reading an action (and an action without subject, group, consumer or timestamp) ends the
  valid part instead of the start. A record counts ``payloadSize + 10`` bytes, whatever the
  reader consumed.
* ``MaxSequenceLogSegmentValidator`` (consumer logs): no byte is read, the segment is cut at
  (max sequence of the message checkpoint + 1) units; a segment starting past that throws.
"""
from __future__ import annotations

import pathlib

from rmqtool.formats.qmq.actionlog import ACTION_HEADER_BYTES, ACTION_LOG_MAGIC_V1, FOREVER_OFFLINE, PULL, RANGE_ACK
from rmqtool.formats.qmq.messagelog import (ATTR_BLANK_RECORD, ATTR_EMPTY_RECORD, ATTR_MESSAGE_RECORD,
                                            MESSAGE_LOG_MAGICS)
from rmqtool.recovery.qmq.javabuf import JavaBuffer, JavaException, int32, int64
from rmqtool.recovery.qmq.logs import Segment, Validator, file_bytes

MESSAGE_MAGICS = frozenset(int32(m) for m in MESSAGE_LOG_MAGICS)
ACTION_MAGIC = int32(ACTION_LOG_MAGIC_V1)
_ACTION_NAMES = {PULL: "PULL", RANGE_ACK: "RANGE_ACK", FOREVER_OFFLINE: "FOREVER_OFFLINE"}


def _walk(segment: Segment, consume, start: int = 0) -> tuple[bool, int]:
    """``validate``: COMPLETE when the counted position reaches the segment size or an
    end-of-segment record is met, PARTIAL at the position of the first invalid record.
    ``start``: the end of a run of records from position 0 already known to pass ``consume``
    one by one (the counted position and the buffer's are then both there)."""
    buf = JavaBuffer(segment.data, 0, segment.size, segment.data_end)
    buf.position = position = start
    try:
        while True:
            if position == segment.size:
                return True, segment.size
            result = consume(buf)
            if result == -1:
                return False, position
            if result == 0:
                return True, segment.size
            position = int32(position + result)
    except JavaException as exc:
        if exc.file is None:
            exc.file, exc.offset = str(segment.path), position
        raise


def _message_record_size(subject_size: int, payload_size: int) -> int:
    """``MessageLog.recordSize``: a negative length counts as 0."""
    return 4 + 1 + 8 + 8 + 2 + max(subject_size, 0) + 8 + 4 + max(payload_size, 0)


def _consume_message(buf: JavaBuffer) -> int:
    if buf.get_int() not in MESSAGE_MAGICS:
        return -1
    attributes = buf.get_byte()
    buf.get_long()
    if attributes == ATTR_BLANK_RECORD:
        return buf.get_int()
    if attributes == ATTR_EMPTY_RECORD:
        return 0
    if attributes != ATTR_MESSAGE_RECORD:
        return -1
    buf.get_long()
    subject_size = buf.get_short()
    buf.set_position(buf.position + subject_size)
    crc = buf.get_long()
    payload_size = buf.get_int()
    if buf.get_crc32(payload_size) != crc:  # new byte[payloadSize] then get (may throw), then its CRC
        return -1
    return _message_record_size(subject_size, payload_size)


def validate_message_segment(segment: Segment) -> tuple[bool, int]:
    return _walk(segment, _consume_message)


def validate_message_segment_from(path: pathlib.Path, base_offset: int, size: int, start: int) -> tuple[bool, int]:
    """``validate_message_segment`` of a segment file from ``start``, a record's position taken
    as the end of the records before it that pass (a probe of its tail: what they hold is not read)."""
    data, end = file_bytes(path)
    return _walk(Segment(path, base_offset, size, data, size, end), _consume_message, start)


def message_segment_validator(validated: dict[str, int]) -> Validator:
    """``validate_message_segment`` that starts each segment past the run of records from
    position 0 that ``_consume_message`` accepts (``LogColumns.validated_prefixes``: each a
    V2 or V3 message record whose CRC holds, found by the message-log kernel); the walk from
    there is the Java-faithful one."""
    def validate(segment: Segment) -> tuple[bool, int]:
        return _walk(segment, _consume_message, validated.get(str(segment.path), 0))
    return validate


def read_string(buf: JavaBuffer) -> str:
    """``PayloadHolderUtils.readString``: an int16 length, then UTF-8 (malformed bytes replaced)."""
    return buf.get_bytes(buf.get_short()).decode("utf-8", errors="replace")


def read_action(buf: JavaBuffer, action_type: int) -> dict:
    """The ``ActionReaderWriter`` of a type: the action's fields, read from the buffer."""
    action = {"type": _ACTION_NAMES[action_type], "subject": read_string(buf), "group": read_string(buf),
              "consumer_id": read_string(buf), "timestamp": buf.get_long()}
    if action_type == PULL:
        action["broadcast"] = buf.get_byte() == 1
        action["first_sequence"], action["last_sequence"] = buf.get_long(), buf.get_long()
        action["first_message_sequence"], action["last_message_sequence"] = buf.get_long(), buf.get_long()
    elif action_type == RANGE_ACK:
        action["first_sequence"], action["last_sequence"] = buf.get_long(), buf.get_long()
    return action


def action_type_of(code: int) -> int:
    """``ActionType.fromCode``: an unknown code throws."""
    if code not in _ACTION_NAMES:
        raise JavaException("java.lang.RuntimeException", f"unknown action type code {code}")
    return code


def _consume_action(buf: JavaBuffer) -> int:
    if buf.get_int() != ACTION_MAGIC:
        return -1
    record_type = buf.get_byte()
    if record_type == 2:
        return buf.get_int()
    if record_type == 1:
        return 0
    if record_type != 0:
        return -1
    try:  # the validator catches every exception of the action's read
        action_type = action_type_of(buf.get_byte())
        payload_size = buf.get_int()
        action = read_action(buf, action_type)
    except JavaException:
        return -1
    if not action["subject"] or not action["group"] or not action["consumer_id"] or action["timestamp"] <= 0:
        return -1
    return int32(payload_size + ACTION_HEADER_BYTES)


def validate_action_segment(segment: Segment) -> tuple[bool, int]:
    return _walk(segment, _consume_action)


def max_sequence_validator(max_sequence: int, unit_bytes: int) -> Validator:
    """``MaxSequenceLogSegmentValidator(maxSequence, unitBytes)``."""
    max_offset = int64(int64(max_sequence + 1) * unit_bytes)

    def validate(segment: Segment) -> tuple[bool, int]:
        if segment.base_offset > max_offset:
            raise JavaException("java.lang.RuntimeException",
                                f"base offset larger than checkpoint max offset. base: {segment.base_offset}, "
                                f"max: {max_offset}, segment: LogSegment{{file={segment.path.absolute()}}}",
                                str(segment.path))
        if int64(segment.base_offset + segment.size) <= max_offset:
            return True, segment.size
        return False, int32(max_offset - segment.base_offset)
    return validate
