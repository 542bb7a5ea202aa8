"""The 5.x RocksDB consume queue (``storeType=defaultRocksDB``, or ``rocksdbCQDoubleWriteEnable``
beside the file queues) and the RocksDB config store: keys and values as the broker lays
them out, at rocketmq-all-5.3.3. All integers big-endian (Java's ByteBuffer).

Where the database lies: ``RocksDBConsumeQueueStore``'s constructor (line 94) opens
``StorePathConfigHelper.getStorePathConsumeQueue(rootDir)`` = ``<root>/consumequeue``
(StorePathConfigHelper.java:23-25): RocksDB's own files (CURRENT, MANIFEST-*, OPTIONS-*,
*.sst, *.log, LOCK, IDENTITY, LOG) sit flat in ``consumequeue/``, beside the file queues'
``TOPIC/QUEUEID/`` directories when both are written. Two column families
(ConsumeQueueRocksDBStorage.java:37, 71-75): ``default`` holds the units, ``offset`` the
max/min offsets and the dispatch checkpoint.

Unit key (RocksDBConsumeQueueTable.java:52-58, built at 364-367)::

    +-------------+--------+-------------+--------+-----------+--------+-----------+
    | topicLength | CTRL_1 | topic bytes | CTRL_1 |  queueId  | CTRL_1 | cqOffset  |
    |   int32     |  0x01  |  n, UTF-8   |  0x01  |  int32    |  0x01  |  int64    |
    +-------------+--------+-------------+--------+-----------+--------+-----------+
    (CTRL_0/1/2 = 0x00/0x01/0x02: AbstractRocksDBStorage.java:63-65; 19 bytes + n:
    CQ_KEY_LENGTH_WITHOUT_TOPIC_BYTES, line 83)

Unit value (lines 61-75, built at 374-377; CQ_UNIT_SIZE = 28)::

    +--------------------+----------+-------------+---------------+
    | commitLogOffset    | msgSize  | tagsCode    | storeTimestamp|
    |      int64         |  int32   |   int64     |     int64     |
    +--------------------+----------+-------------+---------------+

Offset key (RocksDBConsumeQueueOffsetTable.java:58-68, built at 691-701; 14 bytes + n)::

    +-------------+--------+-------------+--------+-------------+--------+---------+
    | topicLength | CTRL_1 | topic bytes | CTRL_1 | "max"/"min" | CTRL_1 | queueId |
    |   int32     |  0x01  |  n, UTF-8   |  0x01  |  3 ASCII    |  0x01  |  int32  |
    +-------------+--------+-------------+--------+-------------+--------+---------+

Offset value (lines 70-78, built at 715-718; 16 bytes): commitLogOffset int64, cqOffset
int64. The "max" entry holds the last dispatched unit's (commitLogOffset, queue offset):
the queue's last unit, not one past it (RocksDBConsumeQueueStore.java:284-299 keeps the
batch's highest, ``putMaxPhyAndCqOffset`` writes it). The "min" entry is written when the
broker corrects the minimum (lines 566-592). The dispatch checkpoint is an offset key of
topic ``CHECKPOINT_TOPIC`` (TopicValidator.RMQ_SYS_ROCKSDB_OFFSET_TOPIC), "max", queue 0,
with an 8-byte value: the commit log offset the dispatch has built up to (lines 98-109,
280-288; ``forEach`` skips it by its length, 210-214).

The RocksDB config store (``RocksDBConfigManager``; RocksDBTopicConfigManager.java:147-148,
RocksDBSubscriptionGroupManager.java:191-192, RocksDBConsumerOffsetManager.java:115-116):
``<root>/config/topics/``, ``config/subscriptionGroups/``, ``config/consumerOffsets/``,
each a database with column families ``default``, ``kvDataVersion`` and ``forbidden``
(ConfigRocksDBStorage.java:36-41, 71-78). A ``default`` key is the UTF-8 name (topic,
group, or ``topic@group``); its value fastjson's JSON of the TopicConfig /
SubscriptionGroupConfig (``JSON.toJSONBytes(.., BrowserCompatible)``: non-ASCII as \\uXXXX)
or ``{"offsetTable":{queueId:offset}}`` (RocksDBOffsetSerializeWrapper); ``kvDataVersion``
holds key ``kvDataVersionKey`` with the DataVersion's JSON.
"""
from __future__ import annotations

from construct import Bytes, Const, Int32sb, Int64sb, PaddedString, Struct, this

CTRL_0 = 0x00
CTRL_1 = 0x01
CTRL_2 = 0x02

OFFSET_COLUMN_FAMILY = "offset"
DEFAULT_COLUMN_FAMILY = "default"
MAX_MARKER = "max"
MIN_MARKER = "min"
CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC"  # TopicValidator.RMQ_SYS_ROCKSDB_OFFSET_TOPIC

CQ_KEY_LENGTH_WITHOUT_TOPIC = 4 + 1 + 1 + 4 + 1 + 8
CQ_VALUE_SIZE = 8 + 4 + 8 + 8
OFFSET_KEY_LENGTH_WITHOUT_TOPIC = 4 + 1 + 1 + 3 + 1 + 4
OFFSET_VALUE_SIZE = 8 + 8
CHECKPOINT_VALUE_SIZE = 8

_SEP = Const(bytes([CTRL_1]))

CqKey = Struct(
    "topic_length" / Int32sb,
    "_sep1" / _SEP,
    "topic" / Bytes(this.topic_length),
    "_sep2" / _SEP,
    "queue_id" / Int32sb,
    "_sep3" / _SEP,
    "queue_offset" / Int64sb,
)

CqValue = Struct(
    "commit_log_offset" / Int64sb,
    "size" / Int32sb,
    "tags_code" / Int64sb,
    "store_timestamp" / Int64sb,
)
assert CqValue.sizeof() == CQ_VALUE_SIZE

OffsetKey = Struct(
    "topic_length" / Int32sb,
    "_sep1" / _SEP,
    "topic" / Bytes(this.topic_length),
    "_sep2" / _SEP,
    "marker" / PaddedString(3, "ascii"),
    "_sep3" / _SEP,
    "queue_id" / Int32sb,
)

OffsetValue = Struct(
    "commit_log_offset" / Int64sb,
    "queue_offset" / Int64sb,
)
assert OffsetValue.sizeof() == OFFSET_VALUE_SIZE

CheckpointValue = Struct("commit_log_offset" / Int64sb)


# the config store (ConfigRocksDBStorage, RocksDBConfigToJsonCommand)
CONFIG_TYPES = ("topics", "subscriptionGroups", "consumerOffsets")  # ExportRocksDBConfigToJsonRequestHeader.ConfigType
CONFIG_TABLE_NAMES = {"topics": "topicConfigTable", "subscriptionGroups": "subscriptionGroupTable",
                      "consumerOffsets": "offsetTable"}  # the key each type's document holds its table under
KV_DATA_VERSION_COLUMN_FAMILY = "kvDataVersion"
FORBIDDEN_COLUMN_FAMILY = "forbidden"
KV_DATA_VERSION_KEY = b"kvDataVersionKey"


def topic_prefix(topic: bytes) -> bytes:
    """The bytes every key of a topic (units or offsets) starts with."""
    return len(topic).to_bytes(4, "big", signed=True) + bytes([CTRL_1]) + topic + bytes([CTRL_1])


def cq_queue_prefix(topic: bytes, queue_id: int) -> bytes:
    """The bytes every unit key of one queue starts with: its units follow in queue offset order."""
    return topic_prefix(topic) + queue_id.to_bytes(4, "big", signed=True) + bytes([CTRL_1])


def cq_key(topic: bytes, queue_id: int, queue_offset: int) -> bytes:
    return CqKey.build(dict(topic_length=len(topic), topic=topic, queue_id=queue_id, queue_offset=queue_offset))


def cq_value(commit_log_offset: int, size: int, tags_code: int, store_timestamp: int) -> bytes:
    return CqValue.build(dict(commit_log_offset=commit_log_offset, size=size, tags_code=tags_code,
                              store_timestamp=store_timestamp))


def offset_key(topic: bytes, queue_id: int, marker: str) -> bytes:
    return OffsetKey.build(dict(topic_length=len(topic), topic=topic, marker=marker, queue_id=queue_id))


def offset_value(commit_log_offset: int, queue_offset: int) -> bytes:
    return OffsetValue.build(dict(commit_log_offset=commit_log_offset, queue_offset=queue_offset))


def checkpoint_key() -> bytes:
    return offset_key(CHECKPOINT_TOPIC.encode(), 0, MAX_MARKER)
