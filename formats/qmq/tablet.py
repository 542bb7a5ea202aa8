"""Pull-log tablets: ``pulllog_smt/<tabletId>`` (decimal, not padded), one per evicted
pull-log memtable.

Mirrors ``qmq-store/.../store/SortedPullLogTable.java`` (``TabletBuilder``, ``validate``,
``getMessage``), ``PullLogMemTable.java`` (``dump``, ``keyOf``) and
``EvictedPullLogMemTableHandler.java``. The tablet id is the action-log end offset of the
PULL that created the memtable. Written at its exact size.

::

     0 +-------------+-------------------+-------------------+
       | magic int32 | totalPayloadSize  | positionOfIndex   |   (file offset of the index)
       | 0x00A2B100  |      int32        |      int32        |
    12 +-------------+--------+----------+-------------------+
       |  beginOffset int64   |  endOffset int64             |   (action-log offsets)
    28 +----------------------+------------------------------+
       | per consumer: int32 deltas (message sequence - base), every pulled, unacked message |
       +---------------------------------------------------------------------------------+
       | index entries, up to 28 + totalPayloadSize:                                        |
       |   magic int32 0xC1B2A300 | key: int16 len + UTF-8 ("consumerId@group@subject")   |
       |   startOfPullLogSequence int64 | baseOfMessageSequence int64 |                     |
       |   position int32 (of its deltas, after the header) | num int32                     |
       +---------------------------------------------------------------------------------+
       | crc int64: Crc32 over bytes [28, 28 + totalPayloadSize)                           |
       +---------------------------------------------------------------------------------+

At load the broker replays the action log from the last valid tablet's endOffset + 1.
"""
from __future__ import annotations

from construct import Const, GreedyRange, Int32sb, Int32ub, Int64sb, Struct

from .strings import ShortString

SORTED_MESSAGES_TABLE_MAGIC_V1 = 0x00A2B100
PULL_LOG_MAGIC_V1 = 0xC1B2A300  # MagicCode.PULL_LOG_MAGIC_V1, before each index entry
TABLET_HEADER_SIZE = 28
TABLET_CRC_SIZE = 8
ENTRY_SIZE = 4  # PullLogMemTable.ENTRY_SIZE: one int32 delta

TabletHeader = Struct(
    "magic" / Int32ub,
    "total_payload_size" / Int32sb,
    "position_of_index" / Int32sb,
    "begin_offset" / Int64sb,
    "end_offset" / Int64sb,
)
assert TabletHeader.sizeof() == TABLET_HEADER_SIZE

TabletIndexEntry = Struct(
    "magic" / Const(PULL_LOG_MAGIC_V1, Int32ub),
    "consumer" / ShortString,
    "start_of_pull_log_sequence" / Int64sb,
    "base_of_message_sequence" / Int64sb,
    "position" / Int32sb,
    "num" / Int32sb,
)

TabletIndex = GreedyRange(TabletIndexEntry)
TabletCrc = Int64sb


def consumer_key(subject: str, group: str, consumer_id: str) -> str:
    """``PullLogMemTable.keyOf``: the index entry's key."""
    return f"{consumer_id}@{group}@{subject}"
