"""Consumer log units: ``consumerlog/<subject>/<20-digit base byte offset>``.

Mirrors ``qmq-store/.../store/ConsumerLog.java`` (``MessageLogIndexAppender``,
``MessageLogIndexV2Appender``, ``SMTIndexAppender``, ``readUnit``, ``fillPreBlank``) and
``MagicCode.CONSUMER_LOG_MAGIC_V2``. The unit of sequence s is at byte s x unit size; a
segment holds ``SEGMENT_TOTAL_UNIT`` units. Which unit a store writes is a broker switch
(``consumerlog.v2.enable``), so a reader tells V1 from V2 by what the units hold.

V1 unit, 22 bytes::

     0 +-----------------------+-----------------------+-------------+----------+
       |   timestamp int64     |  wroteOffset int64    | wroteBytes  | header   |
       |   (dispatch time)     |  (record start)       |   int32     | Size i16 |
    22 +-----------------------+-----------------------+-------------+----------+

V2 unit, 32 bytes: magic int16 0xA3B2, type int16, then by type::

    0xC100 message-log index: timestamp int64 | wroteOffset int64 | wroteBytes int32 |
                              headerSize int16 | 6 zero bytes
    0xC101 SMT index:         timestamp int64 | tabletId int64 | position int32 |
                              size int32 | 4 zero bytes

A fill unit (``fillPreBlank``, before the first sequence of a rebuilt or restarted log)
points nowhere: wroteOffset 0, wroteBytes Integer.MAX_VALUE, headerSize 0.
"""
from __future__ import annotations

from construct import Bytes, Const, Int16sb, Int16ub, Int32sb, Int64sb, Struct, Switch, this

CONSUMER_LOG_UNIT_BYTES = 22
CONSUMER_LOG_V2_UNIT_BYTES = 32
SEGMENT_TOTAL_UNIT = 10_000_000
SEGMENT_SIZE_V1 = CONSUMER_LOG_UNIT_BYTES * SEGMENT_TOTAL_UNIT
SEGMENT_SIZE_V2 = CONSUMER_LOG_V2_UNIT_BYTES * SEGMENT_TOTAL_UNIT

CONSUMER_LOG_MAGIC_V2 = 0xA3B2
TYPE_MESSAGE_LOG_INDEX = 0xC100  # PayloadType.MESSAGE_LOG_INDEX
TYPE_SMT_INDEX = 0xC101  # PayloadType.SMT_INDEX

FILL_WROTE_OFFSET = 0
FILL_WROTE_BYTES = 2**31 - 1
FILL_HEADER_SIZE = 0

UnitV1 = Struct(
    "timestamp" / Int64sb,
    "wrote_offset" / Int64sb,
    "wrote_bytes" / Int32sb,
    "header_size" / Int16sb,
)
assert UnitV1.sizeof() == CONSUMER_LOG_UNIT_BYTES

# a V2 message-log index: the V1 unit's fields, then 6 zero bytes
MessageLogIndexV2 = Struct(*UnitV1.subcons, "reserved" / Bytes(6))

SmtIndexV2 = Struct(
    "timestamp" / Int64sb,
    "tablet_id" / Int64sb,
    "position" / Int32sb,
    "size" / Int32sb,
    "reserved" / Bytes(4),  # zeros
)

UnitV2 = Struct(
    "magic" / Const(CONSUMER_LOG_MAGIC_V2, Int16ub),
    "type" / Int16ub,
    "index" / Switch(this.type, {TYPE_MESSAGE_LOG_INDEX: MessageLogIndexV2, TYPE_SMT_INDEX: SmtIndexV2}),
)
assert MessageLogIndexV2.sizeof() + 4 == SmtIndexV2.sizeof() + 4 == CONSUMER_LOG_V2_UNIT_BYTES


def is_fill_unit(wrote_offset: int, wrote_bytes: int, header_size: int) -> bool:
    return (wrote_offset == FILL_WROTE_OFFSET) & (wrote_bytes == FILL_WROTE_BYTES) & (header_size == FILL_HEADER_SIZE)
