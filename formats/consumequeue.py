"""Consume queue units: the plain 20-byte unit, its optional extension, and the 5.x batch unit.

Mirrors ``store/src/main/java/org/apache/rocketmq/store/ConsumeQueue.java`` and
``ConsumeQueueExt.java`` (same layout at 4.9.8 and 5.3.3), and
``store/src/main/java/org/apache/rocketmq/store/queue/BatchConsumeQueue.java`` at 5.3.3.
All integers big-endian. A queue lives in ``consumequeue/<topic>/<queueId>/`` (batch:
``batchconsumequeue/<topic>/<queueId>/``) as segment files named by the byte offset of
their first unit within the queue, zero-padded to 20 digits.

Consume queue unit (``CQ_STORE_UNIT_SIZE`` = 20); its queue offset is its byte offset / 20::

     0 +---------------------------+------------+---------------------------+
       |     commitLogOffset       |    size    |         tagsCode          |
       |        int64              |   int32    |          int64            |
    20 +---------------------------+------------+---------------------------+

    A unit of 20 zero bytes is unwritten space (the broker stops recovery at the first
    unit whose commitLogOffset < 0 or size <= 0). A rebuilt queue that starts inside a
    file is padded first with fill units (commitLogOffset 0, size Integer.MAX_VALUE,
    tagsCode 0: ``ConsumeQueue.fillPreBlank``). With the extension enabled, tagsCode
    may instead hold an address into consumequeue_ext (a value <= Integer.MIN_VALUE - 1).

Consume queue extension unit (``ConsumeQueueExt.CqExtUnit``, in
``consumequeue_ext/<topic>/<queueId>/``, only with enableConsumeQueueExt), variable length::

     0 +--------+---------------------------+---------------------------+
       |  size  |        tagsCode           |       msgStoreTime        |
       | int16  |         int64             |          int64            |
    18 +--------+-----------------+---------+---------------------------+
       | bitMapSize int16 | filterBitMap (bitMapSize bytes, absent if < 1) |
    20 +------------------+-----------------------------------------------+

    size = 20 + bitMapSize. A size field of -1 (0xFFFF) fills a file's unusable end.

Batch consume queue unit (5.x ``BatchConsumeQueue.CQ_STORE_UNIT_SIZE`` = 46); its queue
offset is msgBaseOffset, the unit covers [msgBaseOffset, msgBaseOffset + batchSize)::

     0 +---------------------------+------------+---------------------------+
       |     commitLogOffset       |    size    |         tagsCode          |
    20 +---------------------------+------------+---------------------------+
       |     storeTimestamp        |       msgBaseOffset       | batchSize  |
       |        int64              |          int64            |   int16    |
    38 +----------------------------+---------------------------+----------+
       | compactedOffset int32 (-1) | reserved, 4 zero bytes    |
    46 +----------------------------+---------------------------+
"""
from __future__ import annotations

from construct import Bytes, If, Int16sb, Int32sb, Int64sb, Struct, this

CQ_STORE_UNIT_SIZE = 20
BATCH_CQ_STORE_UNIT_SIZE = 46
# MessageStoreConfig's default file sizes (mappedFileSizeConsumeQueue, mapperFileSizeBatchConsumeQueue)
DEFAULT_CQ_FILE_SIZE = 300_000 * CQ_STORE_UNIT_SIZE
DEFAULT_BATCH_CQ_FILE_SIZE = 300_000 * BATCH_CQ_STORE_UNIT_SIZE

# Integer.MAX_VALUE: the size field of a fill unit.
FILL_SIZE = 2**31 - 1
FILL_COMMIT_LOG_OFFSET = 0
FILL_TAGS_CODE = 0

CqUnit = Struct(
    "commit_log_offset" / Int64sb,
    "size" / Int32sb,
    "tags_code" / Int64sb,
)
assert CqUnit.sizeof() == CQ_STORE_UNIT_SIZE

# The unit ConsumeQueue.fillPreBlank writes before the first real unit of a rebuilt queue.
CQ_FILL_UNIT = dict(commit_log_offset=FILL_COMMIT_LOG_OFFSET, size=FILL_SIZE, tags_code=FILL_TAGS_CODE)
CQ_FILL_UNIT_BYTES = CqUnit.build(CQ_FILL_UNIT)
CQ_BLANK_UNIT_BYTES = bytes(CQ_STORE_UNIT_SIZE)


def is_fill_unit(commit_log_offset: int, size: int, tags_code: int) -> bool:
    # & rather than and: the same test runs on numpy columns (store/arrays.py)
    return ((commit_log_offset == FILL_COMMIT_LOG_OFFSET) & (size == FILL_SIZE)
            & (tags_code == FILL_TAGS_CODE))


def is_written_unit(commit_log_offset: int, size: int) -> bool:
    """The test ConsumeQueue.recover applies: anything else ends the written data."""
    return (commit_log_offset >= 0) & (size > 0)  # on ints or numpy columns


# --- consumequeue_ext -------------------------------------------------------------------

CQ_EXT_MIN_UNIT_SIZE = 2 + 8 + 8 + 2
CQ_EXT_MAX_UNIT_SIZE = 2**15 - 1  # Short.MAX_VALUE
CQ_EXT_END_MARK = -1  # the short written over a file's unusable end (fullFillToEnd)
# Addresses into the extension are stored as offset + Long.MIN_VALUE, so they are
# negative; ConsumeQueueExt.MAX_ADDR = Integer.MIN_VALUE - 1 keeps them apart from tagsCodes.
CQ_EXT_MAX_ADDR = -(2**31) - 1
_LONG_MIN_VALUE = -(2**63)

CqExtUnit = Struct(
    "size" / Int16sb,
    "tags_code" / Int64sb,
    "msg_store_time" / Int64sb,
    "bit_map_size" / Int16sb,
    "filter_bit_map" / If(this.bit_map_size > 0, Bytes(this.bit_map_size)),
)
assert len(CqExtUnit.build(dict(size=CQ_EXT_MIN_UNIT_SIZE, tags_code=0, msg_store_time=0,
                                 bit_map_size=0, filter_bit_map=None))) == CQ_EXT_MIN_UNIT_SIZE


def is_ext_addr(tags_code: int) -> bool:
    """ConsumeQueueExt.isExtAddr: the tagsCode is an address into consumequeue_ext."""
    return tags_code <= CQ_EXT_MAX_ADDR


def ext_addr_to_offset(address: int) -> int:
    """ConsumeQueueExt.unDecorate: the byte offset within the extension's files."""
    return address - _LONG_MIN_VALUE if is_ext_addr(address) else address


# --- batchconsumequeue (5.x) --------------------------------------------------------------

COMPACTED_OFFSET_NONE = -1  # BatchConsumeQueue.INVALID_POS, what the broker writes

BatchCqUnit = Struct(
    "commit_log_offset" / Int64sb,
    "size" / Int32sb,
    "tags_code" / Int64sb,
    "store_timestamp" / Int64sb,
    "msg_base_offset" / Int64sb,
    "batch_size" / Int16sb,
    "compacted_offset" / Int32sb,
    "reserved" / Bytes(4),
)
assert BatchCqUnit.sizeof() == BATCH_CQ_STORE_UNIT_SIZE


def is_written_batch_unit(commit_log_offset: int, size: int, msg_base_offset: int,
                          batch_size: int) -> bool:
    """The test BatchConsumeQueue.recover applies: anything else ends the written data."""
    return (commit_log_offset >= 0) & (size > 0) & (msg_base_offset >= 0) & (batch_size > 0)
