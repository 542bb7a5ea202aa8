"""Action log records: ``actionlog/<20-digit base offset>``, every pull, range ack and
forever-offline of every consumer.

Mirrors ``qmq-store/.../store/ActionLog.java`` (``ActionAppender``, ``fillPreBlank``,
``ActionLogSegmentValidator``), ``ActionLogVisitor.java``, ``ActionType.java`` and
``action/{Pull,RangeAck,ForeverOffline}ActionReaderWriter.java``. A segment is
``PER_SEGMENT_FILE_SIZE`` bytes (a constant).

::

     0 +-------------+-------------+-------------+--------------------+----------+
       | magic int32 | recordType  | actionType  | payloadSize int32  | payload  |
       | 0xC3B2A100  |   int8      |   int8      |                    |   ...    |
    10 +-------------+-------------+-------------+--------------------+----------+

    recordType 0: an action (record = payload + 10 bytes); 1: the rest of the segment is
    unused (magic and type only, 5 bytes); 2: blank, magic, type and an int32 size, the
    position where records start (``fillPreBlank``).
    The action's event offset (``ActionEvent.getOffset``) is the record's END offset.

Payloads (strings: int16 length + UTF-8)::

    PULL (0):            subject | group | consumerId | timestamp int64 | broadcast int8 |
                         firstSequence int64 | lastSequence int64          (pull-log sequences)
                         firstMessageSequence int64 | lastMessageSequence int64
    RANGE_ACK (1):       subject | group | consumerId | timestamp int64 |
                         firstSequence int64 | lastSequence int64          (pull-log sequences)
    FOREVER_OFFLINE (2): subject | group | consumerId | timestamp int64
"""
from __future__ import annotations

from construct import Bytes, Flag, Int8sb, Int32sb, Int32ub, Int64sb, Struct, Switch, this

from .strings import ShortString

PER_SEGMENT_FILE_SIZE = 100 * 1024 * 1024  # ActionLog.PER_SEGMENT_FILE_SIZE
ACTION_LOG_MAGIC_V1 = 0xC3B2A100

RECORD_ACTION = 0
RECORD_EMPTY = 1
RECORD_BLANK = 2
MIN_RECORD_BYTES = 5  # magic + record type: what an end-of-segment record takes
ACTION_HEADER_BYTES = 10  # magic, record type, action type, payload size

PULL = 0
RANGE_ACK = 1
FOREVER_OFFLINE = 2
ACTION_TYPES = {PULL: "PULL", RANGE_ACK: "RANGE_ACK", FOREVER_OFFLINE: "FOREVER_OFFLINE"}

_WHO = (
    "subject" / ShortString,
    "group" / ShortString,
    "consumer_id" / ShortString,
    "timestamp" / Int64sb,
)

PullAction = Struct(
    *_WHO,
    "broadcast" / Flag,
    "first_sequence" / Int64sb,
    "last_sequence" / Int64sb,
    "first_message_sequence" / Int64sb,
    "last_message_sequence" / Int64sb,
)

RangeAckAction = Struct(
    *_WHO,
    "first_sequence" / Int64sb,
    "last_sequence" / Int64sb,
)

ForeverOfflineAction = Struct(*_WHO)

ACTION_PAYLOADS = {PULL: PullAction, RANGE_ACK: RangeAckAction, FOREVER_OFFLINE: ForeverOfflineAction}

ActionRecord = Struct(
    "action_type" / Int8sb,
    "payload_size" / Int32sb,
    "payload" / Bytes(this.payload_size),
)

ActionLogRecord = Struct(
    "magic" / Int32ub,
    "record_type" / Int8sb,
    "body" / Switch(this.record_type, {
        RECORD_ACTION: ActionRecord,
        RECORD_BLANK: Struct("size" / Int32sb),
    }, default=Struct()),
)
