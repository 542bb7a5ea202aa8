"""Consume queue units: the plain 20-byte unit and the 5.x batch unit.

Mirrors ``store/src/main/java/org/apache/rocketmq/store/ConsumeQueue.java`` (same layout at
4.9.8 and 5.3.3) and
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

The extension units (``consumequeue_ext/``) are ``formats/cqext.py``.

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

from construct import Bytes, Int16sb, Int32sb, Int64sb, Struct

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


def names_a_message(commit_log_offset: int, size: int) -> bool:
    """A written unit that names a record: not a fill unit (fillPreBlank's point nowhere)."""
    return is_written_unit(commit_log_offset, size) & (size != FILL_SIZE)  # on ints or numpy columns


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
