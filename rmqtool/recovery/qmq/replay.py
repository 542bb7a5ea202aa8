"""QMQ's replay at start: ``LogIterateService`` driving ``MessageLogRecordVisitor`` and
``ActionLogVisitor`` from a checkpoint to the log's end.

The service starts at the checkpoint (the log's min offset when it is <= 0, its max offset
when it is past the end) and repeats: a visitor over one segment from there to the segment's
written position, records read until the visitor says no more, then on by the bytes it
visited. ``start()`` blocks until the service reaches the log's max offset. The visitors do
not resynchronise: a bad magic (a start that is not a record boundary) jumps to the end of
the segment, so nothing after it is replayed; a record cut short stops the visitor without
moving on, and a service that cannot move on never reaches the end: the start hangs.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from rmqtool.formats.qmq.messagelog import ATTR_BLANK_RECORD, ATTR_EMPTY_RECORD, MESSAGE_LOG_MAGIC_V2
from rmqtool.recovery.qmq.javabuf import JavaBuffer, JavaException, int32
from rmqtool.recovery.qmq.logs import Log
from rmqtool.recovery.qmq.validators import ACTION_MAGIC, MESSAGE_MAGICS, action_type_of, read_action

NO_MORE = object()
_MIN_MESSAGE_RECORD_BYTES = 13
_MIN_ACTION_RECORD_BYTES = 5


@dataclasses.dataclass(frozen=True, slots=True)
class MessageLogRecord:
    """What ``MessageLogRecordVisitor`` posts for one record."""
    subject: str
    sequence: int
    wrote_offset: int
    wrote_bytes: int
    header_size: int
    base_offset: int  # the segment's


@dataclasses.dataclass(frozen=True, slots=True)
class ActionEvent:
    offset: int  # the record's end (ActionEvent.getOffset)
    action: dict


@dataclasses.dataclass(slots=True)
class _Visit:
    start_offset: int
    base_offset: int
    buffer_size: int
    visited: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class Replay:
    start: int  # where the service started (after the checkpoint's adjustment)
    events: tuple
    end: int  # where it stopped: the log's max offset unless it hangs
    hangs_at: int | None  # the offset it cannot move past
    hang_reason: str | None
    hang_exception: str | None = None  # the Java exception thrown there each pass, if one is


def _read_message(buf: JavaBuffer, visit: _Visit):
    if buf.remaining() < _MIN_MESSAGE_RECORD_BYTES:
        return NO_MORE
    start = buf.position
    magic = buf.get_int()
    if magic not in MESSAGE_MAGICS:
        visit.visited = visit.buffer_size
        return NO_MORE
    attributes = buf.get_byte()
    buf.get_long()
    if attributes == ATTR_BLANK_RECORD:
        if buf.remaining() < 4:
            return NO_MORE
        blank = buf.get_int()
        visit.visited = int32(visit.visited + blank + buf.position - start)
        return None
    if attributes == ATTR_EMPTY_RECORD:
        visit.visited = visit.buffer_size
        return NO_MORE
    if buf.remaining() < 8 + 4:
        return NO_MORE
    sequence = buf.get_long()
    subject_size = buf.get_short()
    if buf.remaining() < subject_size:
        return NO_MORE
    subject = buf.get_bytes(subject_size).decode("utf-8", errors="replace")
    if magic >= int32(MESSAGE_LOG_MAGIC_V2):  # a signed comparison, as in the Java
        if buf.remaining() < 8:
            return NO_MORE
        buf.get_long()
    if buf.remaining() < 4:
        return NO_MORE
    payload_size = buf.get_int()
    if buf.remaining() < payload_size:
        return NO_MORE
    header_size = ((buf.position - start) + 0x8000) % 0x10000 - 0x8000  # (short)
    buf.set_position(buf.position + payload_size)
    record_bytes = buf.position - start
    visit.visited = int32(visit.visited + record_bytes)
    return MessageLogRecord(subject, sequence, visit.start_offset + start, record_bytes, header_size,
                            visit.base_offset)


def _read_action(buf: JavaBuffer, visit: _Visit):
    if buf.remaining() < _MIN_ACTION_RECORD_BYTES:
        return NO_MORE
    start = buf.position
    if buf.get_int() != ACTION_MAGIC:
        visit.visited = visit.buffer_size
        return NO_MORE
    attributes = buf.get_byte()
    if attributes == 2:
        if buf.remaining() < 4:
            return NO_MORE
        blank = buf.get_int()
        visit.visited = int32(visit.visited + blank + buf.position - start)
        return None
    if attributes == 1:
        visit.visited = visit.buffer_size
        return NO_MORE
    if attributes != 0:
        # thrown out of the service's pass: it retries from the same offset, forever
        raise JavaException("java.lang.RuntimeException", f"Unknown record type {attributes}")
    try:
        if buf.remaining() < 5:
            return NO_MORE
        action_type = action_type_of(buf.get_byte())
        payload_size = buf.get_int()
        if buf.remaining() < payload_size:
            return NO_MORE
        action = read_action(buf, action_type)
    except JavaException:
        return NO_MORE  # logged ("fail read action log"), the visitor stops here
    visit.visited = int32(visit.visited + buf.position - start)
    return ActionEvent(visit.start_offset + visit.visited, action)


def _iterate(log: Log, checkpoint: int, read_one: Callable) -> Replay:
    if checkpoint <= 0:
        iterate_from = log.min_offset()
    elif checkpoint > log.max_offset():
        iterate_from = log.max_offset()
    else:
        iterate_from = checkpoint
    first, events = iterate_from, []
    while log.max_offset() - iterate_from > 0:
        start = max(iterate_from, log.min_offset())  # the visitor's initialOffset
        seg = log.locate(start)
        visit = None
        if seg is not None:
            pos = start % seg.size
            if 0 <= pos < seg.wrote:
                visit = _Visit(start, seg.base_offset, seg.wrote - pos)
                buf = JavaBuffer(seg.data, pos, seg.wrote - pos)
                try:
                    while (record := read_one(buf, visit)) is not NO_MORE:
                        if record is not None:
                            events.append(record)
                except JavaException as exc:
                    return Replay(first, tuple(events), iterate_from, iterate_from,
                                  f"{exc.message or 'thrown'} at offset {start + buf.position}", exc.java_class)
        visited = visit.visited if visit else 0
        if start + visited == iterate_from:
            where = start + (visit.visited if visit else 0)
            return Replay(first, tuple(events), iterate_from, where,
                          "the visitor stops without moving on before the log's end")
        iterate_from = start + visited
    return Replay(first, tuple(events), iterate_from, None, None)


def replay_message_log(log: Log, checkpoint_offset: int) -> Replay:
    return _iterate(log, checkpoint_offset, _read_message)


def replay_action_log(log: Log, replay_state: int) -> Replay:
    return _iterate(log, replay_state, _read_action)
