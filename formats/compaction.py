"""The compaction store of a 5.x broker: a topic whose ``cleanup.policy`` is COMPACTION.

Mirrors ``store/src/main/java/org/apache/rocketmq/store/kv/CompactionLog.java``,
``CompactionPositionMgr.java`` and ``store/queue/SparseConsumeQueue.java`` at
rocketmq-all-5.3.3. Under ``<storeRoot>/compaction/``::

    compactionLog/<topic>/<queueId>/<20-digit byte offset>   the log (compactionMappedFileSize, made
                                                              at least 5 CQ files' worth of records)
    compactionCq/<topic>/<queueId>/<the same name>            its queue (compactionCqMappedFileSize)
    position-checkpoint (+ .bak)                              CompactionPositionMgr, fastjson

Log records are commit log records byte for byte (``commitlog.py``), except the
PHYSICALOFFSET field, which holds the record's offset in the compaction log. A file closed
for want of room ends with the commit log's END_OF_FILE blank (8 bytes written). A file
``doCompaction`` wrote ends with zeros and no blank.

A compaction queue unit is the 46-byte batch consume queue unit (``consumequeue.py``:
``BatchCqUnit``; ``SparseConsumeQueue`` extends ``BatchConsumeQueue``): commitLogOffset is
the record's offset in the compaction log, msgBaseOffset its queue offset, batchSize 1,
compactedOffset -1. A CQ file closed with its log file ends with an END_POSITION unit::

    commitLogOffset -1, size 0, tagsCode 0, storeTimestamp 0, msgBaseOffset 0, batchSize 0,
    compactedOffset -1 (what SparseConsumeQueue's putEndPositionInfo writes)

``position-checkpoint``: ``{"empty": bool, "queueOffsetMap": {"<topic>_<queueId>": offset}}``,
the last queue offset covered by the last compaction of each queue (a queue never
compacted has no entry: ``getOffset`` gives -1).
"""
from __future__ import annotations

from .consumequeue import BATCH_CQ_STORE_UNIT_SIZE, BatchCqUnit

COMPACTION_DIR = "compaction"
COMPACTION_LOG_DIR = "compactionLog"
COMPACTION_CQ_DIR = "compactionCq"
POSITION_CHECKPOINT_FILE = "position-checkpoint"  # CompactionPositionMgr.CHECKPOINT_FILE
COMPACTING_DIR = "compacting"  # doCompaction's staging folder under a queue's log dir

COMPACTION_CQ_UNIT = BatchCqUnit  # one layout, declared once in consumequeue.py
COMPACTION_CQ_UNIT_SIZE = BATCH_CQ_STORE_UNIT_SIZE

END_POSITION_LOG_OFFSET = -1  # the END_POSITION unit's commitLogOffset
CHECKPOINT_NONE = -1  # CompactionPositionMgr.getOffset of a queue never compacted
# the topic attribute that sends a topic's reads to the compaction store
CLEANUP_POLICY_ATTRIBUTE = "cleanup.policy"
CLEANUP_POLICY_COMPACTION = "COMPACTION"


def is_end_position(commit_log_offset: int, size: int, batch_size: int) -> bool:
    """The unit a closed compaction CQ file ends with (SparseConsumeQueue.putEndPositionInfo)."""
    return commit_log_offset == END_POSITION_LOG_OFFSET and size == 0 and batch_size == 0


def checkpoint_key(topic: str, queue_id: int) -> str:
    """CompactionPositionMgr's map key: topic and queue id joined by an underscore."""
    return f"{topic}_{queue_id}"
