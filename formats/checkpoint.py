"""The store checkpoint: when the commit log, consume queues and index were last flushed.

Mirrors ``store/src/main/java/org/apache/rocketmq/store/StoreCheckpoint.java`` at 4.9.8
(three timestamps) and at 5.3.3 (two offsets added after them). The broker maps one OS
page (``MappedFile.OS_PAGE_SIZE`` = 4096) of the file ``checkpoint`` in the store root
and writes only its first bytes; the rest stays zero. All integers big-endian::

     0 +---------------------------+
       | physicMsgTimestamp  int64 |  store time of the last commit log message flushed
     8 +---------------------------+
       | logicsMsgTimestamp  int64 |  store time of the last message dispatched to a consume queue
    16 +---------------------------+
       | indexMsgTimestamp   int64 |  store time of the last message indexed (0: none)
    24 +---------------------------+  --- 5.x only from here; zero in a 4.x file ---
       | masterFlushedOffset int64 |  HA / controller mode; 0 otherwise
    32 +---------------------------+
       | confirmPhyOffset    int64 |  after a recovery: start offset of the last valid message
    40 +---------------------------+
       | zero padding up to 4096   |
  4096 +---------------------------+

Recovery uses min(physicMsgTimestamp, logicsMsgTimestamp) - 3 s (getMinTimestamp), and
with the index also min(that, indexMsgTimestamp) (getMinTimestampIndex).
"""
from __future__ import annotations

from construct import Bytes, Int64sb, Struct

CHECKPOINT_FILE_SIZE = 4096  # OS_PAGE_SIZE
MIN_TIMESTAMP_MARGIN_MS = 3000  # getMinTimestamp subtracts 3 s

Checkpoint4 = Struct(
    "physic_msg_timestamp" / Int64sb,
    "logics_msg_timestamp" / Int64sb,
    "index_msg_timestamp" / Int64sb,
)
assert Checkpoint4.sizeof() == 24

Checkpoint5 = Struct(
    "physic_msg_timestamp" / Int64sb,
    "logics_msg_timestamp" / Int64sb,
    "index_msg_timestamp" / Int64sb,
    "master_flushed_offset" / Int64sb,
    "confirm_phy_offset" / Int64sb,
)
assert Checkpoint5.sizeof() == 40

# The whole file. One schema serves both versions: a 4.x file has zeros where 5.x keeps
# its offsets. The padding is kept as read, so a file round-trips byte for byte.
CheckpointFile = Struct(
    *Checkpoint5.subcons,
    "padding" / Bytes(CHECKPOINT_FILE_SIZE - Checkpoint5.sizeof()),
)
assert CheckpointFile.sizeof() == CHECKPOINT_FILE_SIZE


def min_timestamp(physic_msg_timestamp: int, logics_msg_timestamp: int) -> int:
    """StoreCheckpoint.getMinTimestamp: where abnormal recovery looks for its start file."""
    return max(min(physic_msg_timestamp, logics_msg_timestamp) - MIN_TIMESTAMP_MARGIN_MS, 0)


def min_timestamp_index(physic_msg_timestamp: int, logics_msg_timestamp: int,
                        index_msg_timestamp: int) -> int:
    """StoreCheckpoint.getMinTimestampIndex: the same, counting the index as well."""
    return min(min_timestamp(physic_msg_timestamp, logics_msg_timestamp), index_msg_timestamp)
