"""Message log records: one ``messagelog/`` for every subject.

Mirrors ``qmq-store/.../store/MessageLog.java`` (``RawMessageAppender.doAppend``,
``recordSize``, ``fillPreBlank``, ``MessageLogSegmentValidator``), ``MagicCode.java`` and
``MessageLogRecordVisitor.java``. A segment ``messagelog/<20-digit base offset>`` is
``PER_SEGMENT_FILE_SIZE`` bytes (a constant, not configurable); its name is the log offset
of its first byte. Records follow each other from position 0.

Message record (attributes 0)::

     0 +-------------+------+-----------------------+-----------------------+
       | magic int32 | attr |  timestamp int64 (ms) |  sequence int64       |
    21 +-------------+------+-----+-----------------+-----------------------+
       | subjectLength int16      | subject (UTF-8) ...                     |
       +--------------------------+-----------------+-----------------------+
       | payloadCrc int64 (V2, V3)| payloadSize int32 | payload ...         |
       +--------------------------+-------------------+---------------------+

    header = 35 + subject bytes (27 + subject bytes for V1, which has no CRC field);
    record = header + payload. sequence is the record's per-subject consumer-log sequence;
    payloadCrc the client's CRC-32 of the payload (``Crc32.crc32``), as a long.

End of segment (attributes 1, ``MIN_RECORD_BYTES`` = 13), written when the next record
does not fit; zeros follow to the segment's end::

       | magic int32 | attr = 1 | timestamp int64 |

Blank (attributes 2, 17 bytes, ``fillPreBlank`` for a slave's first sync): ``size`` is
the position where real records start, the bytes up to it are skipped::

       | magic int32 | attr = 2 | timestamp int64 | size int32 |

``messagelog/.<20-digit>.offset`` beside a segment (``ConsumerLogManager.createOffsetFileFor``)
is JSON ``{subject: max sequence before the segment}``; ``LogManager.loadLogs`` skips a
name that starts with ``.``, and any other name that is not a number stops the broker.
"""
from __future__ import annotations

from construct import Bytes, If, Int8sb, Int32sb, Int32ub, Int64sb, Struct, Switch, this

from .strings import ShortString

PER_SEGMENT_FILE_SIZE = 1 << 30  # MessageLog.PER_SEGMENT_FILE_SIZE

MESSAGE_LOG_MAGIC_V1 = 0xA1B2C300
MESSAGE_LOG_MAGIC_V2 = 0xA1B2C301  # adds the payload CRC
MESSAGE_LOG_MAGIC_V3 = 0xA1B2C302  # what 5abc92f4 writes
MESSAGE_LOG_MAGICS = (MESSAGE_LOG_MAGIC_V1, MESSAGE_LOG_MAGIC_V2, MESSAGE_LOG_MAGIC_V3)

ATTR_MESSAGE_RECORD = 0
ATTR_EMPTY_RECORD = 1
ATTR_BLANK_RECORD = 2

MIN_RECORD_BYTES = 13  # magic, attributes, timestamp: the end-of-segment record
BLANK_RECORD_BYTES = 17
# magic, attributes, timestamp, sequence, subject length, payload CRC, payload size
FIXED_HEADER_BYTES = 4 + 1 + 8 + 8 + 2 + 8 + 4
assert FIXED_HEADER_BYTES == 35

# What every record starts with.
RecordPrefix = Struct(
    "magic" / Int32ub,
    "attributes" / Int8sb,
    "timestamp" / Int64sb,
)

MessageBody = Struct(
    "sequence" / Int64sb,
    "subject" / ShortString,
    # the visitor skips the CRC only for magic >= V2; V1 records have none
    "payload_crc" / If(this._.magic != MESSAGE_LOG_MAGIC_V1, Int64sb),
    "payload_size" / Int32sb,
    "payload" / Bytes(this.payload_size),
)

MessageLogRecord = Struct(
    "magic" / Int32ub,
    "attributes" / Int8sb,
    "timestamp" / Int64sb,
    "body" / Switch(this.attributes, {
        ATTR_MESSAGE_RECORD: MessageBody,
        ATTR_BLANK_RECORD: Struct("size" / Int32sb),
    }, default=Struct()),
)


def header_size(subject_bytes: int, magic: int = MESSAGE_LOG_MAGIC_V3) -> int:
    """Bytes before the payload (``MessageLog.recordSize`` minus the payload)."""
    return FIXED_HEADER_BYTES + subject_bytes - (8 if magic == MESSAGE_LOG_MAGIC_V1 else 0)


def record_size(subject_bytes: int, payload_size: int, magic: int = MESSAGE_LOG_MAGIC_V3) -> int:
    return header_size(subject_bytes, magic) + payload_size
