"""Reading QMQ's action log: ``actionlog/``, every pull, range ack and forever-offline.

Layouts in ``formats/qmq/actionlog.py``. Reading follows ``ActionLogVisitor``: an
end-of-segment record (record type 1) ends the segment, a blank one jumps to the position
it names; an action is clean when its payload parses to exactly its payload size with a
known action type. Anything else before the written end is damage, resynchronised at the
next clean action.
"""
from __future__ import annotations

import dataclasses
import struct
from typing import Iterator

import construct as cs

from rmqtool.formats.qmq.actionlog import (ACTION_HEADER_BYTES, ACTION_LOG_MAGIC_V1, ACTION_PAYLOADS, ACTION_TYPES,
                                           MIN_RECORD_BYTES, PER_SEGMENT_FILE_SIZE, RECORD_ACTION, RECORD_BLANK,
                                           RECORD_EMPTY)
from rmqtool import findings as ids
from rmqtool.findings import Finding, finding
from rmqtool.store.qmq.segments import LogSegment, ZeroExtended

_HEAD = struct.Struct(">Ibbi")  # magic, record type, action type, payload size
_BLANK = struct.Struct(">Ibi")
_MAGIC = ACTION_LOG_MAGIC_V1.to_bytes(4, "big")

SEGMENT_SIZE = PER_SEGMENT_FILE_SIZE


@dataclasses.dataclass(frozen=True, slots=True)
class ActionRecord:
    offset: int
    path: str
    position: int
    action_type: str  # PULL, RANGE_ACK, FOREVER_OFFLINE
    payload_size: int
    fields: dict  # the action's fields, named as formats/qmq/actionlog.py names them

    @property
    def size(self) -> int:
        return self.payload_size + ACTION_HEADER_BYTES

    @property
    def end_offset(self) -> int:
        """``ActionEvent.getOffset``: the record's end, where the action's replay resumes."""
        return self.offset + self.size


@dataclasses.dataclass(frozen=True, slots=True)
class ActionDamage:
    offset: int
    path: str
    position: int
    size: int
    reason: str


def parse_action(data: ZeroExtended, pos: int) -> ActionRecord | str | int | None:
    """The action at ``pos``; a sentence when there is none; for a blank record the position
    it jumps to; None for the end-of-segment record."""
    segment = data.segment
    if pos + MIN_RECORD_BYTES > segment.size:
        return "too close to the segment's end for a record"
    head = data.take(pos, ACTION_HEADER_BYTES)
    if head[:4] != _MAGIC:
        return f"magic 0x{head[:4].hex()} is not the action log's"
    record_type = head[4]
    if record_type == RECORD_EMPTY:
        return None
    if record_type == RECORD_BLANK:
        _, _, until = _BLANK.unpack_from(head)
        return until if pos < until <= segment.size else f"a blank record up to position {until}"
    if record_type != RECORD_ACTION:
        return f"record type {record_type} (0 action, 1 end of segment, 2 blank)"
    _, _, action_type, payload_size = _HEAD.unpack(head)
    if action_type not in ACTION_PAYLOADS:
        return f"action type {action_type} (0 PULL, 1 RANGE_ACK, 2 FOREVER_OFFLINE)"
    if payload_size < 0 or pos + ACTION_HEADER_BYTES + payload_size > segment.size:
        return f"payload size {payload_size}"
    payload = data.take(pos + ACTION_HEADER_BYTES, payload_size)
    schema = ACTION_PAYLOADS[action_type]
    try:
        parsed = schema.parse(payload)
    except (cs.ConstructError, UnicodeDecodeError) as exc:
        return f"{ACTION_TYPES[action_type]} payload unreadable ({type(exc).__name__})"
    if len(schema.build(parsed)) != payload_size:
        return f"{ACTION_TYPES[action_type]} payload of {payload_size} bytes holds a different length"
    fields = {k: v for k, v in parsed.items() if not k.startswith("_")}
    return ActionRecord(segment.base_offset + pos, str(segment.path), pos, ACTION_TYPES[action_type],
                        payload_size, fields)


def findings_of(item: ActionRecord | ActionDamage) -> list[Finding]:
    """What a scanned item says is wrong: bytes before the written end that are not an action."""
    if isinstance(item, ActionDamage):
        return [finding(ids.ACTION_RECORD_INVALID, item.path, item.position,
                        f"{item.size} bytes at action log offset {item.offset} are not an action: {item.reason}",
                        action_log_offset=item.offset)]
    return []


def scan_segment(segment: LogSegment) -> Iterator[ActionRecord | ActionDamage]:
    with ZeroExtended(segment) as data:
        yield from _scan(data)


def _scan(data: ZeroExtended) -> Iterator[ActionRecord | ActionDamage]:
    segment, written, pos = data.segment, data.written, 0
    while pos < written:
        item = parse_action(data, pos)
        if item is None:
            return
        if isinstance(item, int):
            pos = item
            continue
        if isinstance(item, ActionRecord):
            yield item
            pos += item.size
            continue
        nxt = pos + 1
        while nxt < written:
            nxt = data.find(_MAGIC, nxt)
            if nxt == -1:
                nxt = written
                break
            if not isinstance(parse_action(data, nxt), str):
                break
            nxt += 1
        yield ActionDamage(segment.base_offset + pos, str(segment.path), pos, min(nxt, written) - pos, item)
        pos = nxt
