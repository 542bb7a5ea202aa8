"""The body of a batch put: the inner messages of a ``MessageBatch``, one after another.

Mirrors ``MessageDecoder.encodeMessage`` / ``encodeMessages`` / ``decodeMessage`` /
``decodeMessages`` (``common/src/main/java/org/apache/rocketmq/common/message/MessageDecoder.java``,
same layout at 4.9.8 and 5.3.3), which the producer uses to build the body of a batch
(``MessageBatch.encode``), and the broker's reading of that body in
``CommitLog.MessageExtBatchEncoder.encode(MessageExtBatch)`` (4.9.8; ``MessageExtEncoder`` at
5.3.3), which turns each inner message into its own commit log record. All integers
big-endian. Not an on-disk layout: the bytes travel in the request, and each inner
message reaches the commit log as a normal record (``commitlog.py``).

Inner message, repeated until the body ends (no count, no padding)::

     0 +------------+------------+------------+------------+------------+
       | totalSize  | magicCode  |  bodyCRC   |    flag    | bodyLength |   int32 x5
       |            |  always 0  |  always 0  |            |            |
    20 +------------+------------+------------+------------+------------+
       | body (bodyLength bytes)                                       |
       +-----------------------+---------------------------------------+
       | propertiesLength int16 | properties (UTF-8, see properties.py) |
       +-----------------------+---------------------------------------+

    totalSize = 20 + bodyLength + 2 + propertiesLength: the inner message's own size.
    The broker skips totalSize, magicCode and bodyCRC; it computes the body CRC itself.
    properties is messageProperties2String of the inner message (4.x: no last separator);
    the broker appends a separator (when missing) and the batch's own properties string.
    encodeMessage refuses properties longer than Short.MAX_VALUE.
"""
from __future__ import annotations

from construct import Bytes, Const, GreedyRange, Int16sb, Int32sb, Rebuild, Struct, len_, this

BATCH_MESSAGE_MAGIC_CODE = 0  # encodeMessage writes 0 where a record has its magic code
BATCH_MESSAGE_BODY_CRC = 0  # and 0 for the CRC: the broker computes it
MAX_BATCH_PROPERTIES_LENGTH = 32767  # Short.MAX_VALUE

# The fixed 20 bytes each inner message starts with.
BatchMessageHead = Struct(
    "total_size" / Int32sb,
    "magic_code" / Int32sb,
    "body_crc" / Int32sb,
    "flag" / Int32sb,
    "body_length" / Int32sb,
)
BATCH_MESSAGE_HEAD_SIZE = 20
assert BatchMessageHead.sizeof() == BATCH_MESSAGE_HEAD_SIZE

# The length field between the body and the properties.
BatchPropertiesLength = Struct(
    "properties_length" / Int16sb,
)
assert BatchPropertiesLength.sizeof() == 2

# One whole inner message; lengths are rebuilt from the data, so build() is right by construction.
BatchMessage = Struct(
    "total_size" / Rebuild(Int32sb, BATCH_MESSAGE_HEAD_SIZE + len_(this.body) + 2 + len_(this.properties)),
    "magic_code" / Const(BATCH_MESSAGE_MAGIC_CODE, Int32sb),
    "body_crc" / Const(BATCH_MESSAGE_BODY_CRC, Int32sb),
    "flag" / Int32sb,
    "body_length" / Rebuild(Int32sb, len_(this.body)),
    "body" / Bytes(this.body_length),
    "properties_length" / Rebuild(Int16sb, len_(this.properties)),
    "properties" / Bytes(this.properties_length),
)

# A whole batch body: inner messages up to the end.
BatchBody = GreedyRange(BatchMessage)


def batch_message_size(body_length: int, properties_length: int) -> int:
    """encodeMessage's storeSize: the totalSize of one inner message."""
    return BATCH_MESSAGE_HEAD_SIZE + body_length + 2 + properties_length
