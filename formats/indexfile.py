"""Index files: a hash table from message keys to commit log offsets, one file per period.

Mirrors ``store/src/main/java/org/apache/rocketmq/store/index/IndexFile.java``,
``IndexHeader.java`` and ``IndexService.java`` (same layout at 4.9.8 and 5.3.3).
All integers big-endian. Files live in ``index/`` and are named by their creation time,
``yyyyMMddHHmmssSSS`` in the broker's time zone (``UtilAll.timeMillisToHumanString``).

File layout, for maxHashSlotNum slots and maxIndexNum entries (both broker settings;
the file does not record them)::

     0 +------------------------------------------------------------------+
       | header (40 B)                                                    |
    40 +------------------------------------------------------------------+
       | hash slots: maxHashSlotNum x int32, the newest entry number      |
       |             whose keyHash % maxHashSlotNum is this slot (0: none) |
       +------------------------------------------------------------------+
       | entries: maxIndexNum x 20 B; entry 0 is never written, because   |
       |          indexCount starts at 1, so a file holds maxIndexNum - 1  |
       +------------------------------------------------------------------+

Header::

     0 +----------------+----------------+----------------+----------------+
       | beginTimestamp |  endTimestamp  | beginPhyOffset |  endPhyOffset  |  int64 x4
    32 +--------+-------+----------------+----------------+----------------+
       | hashSlotCount  |   indexCount   |   int32 x2: slots in use; next entry number
    40 +----------------+----------------+

Entry::

     0 +------------+---------------------------+------------+------------+
       |  keyHash   |        phyOffset          |  timeDiff  | prevIndex  |
       |   int32    |          int64            |   int32    |   int32    |
    20 +------------+---------------------------+------------+------------+

    keyHash: indexKeyHashMethod(topic + "#" + key). timeDiff: whole seconds after
    beginTimestamp. prevIndex: the entry that held the slot before this one (0 ends
    the chain), so a slot's chain runs newest to oldest.
"""
from __future__ import annotations

from construct import Int32sb, Int64sb, Struct

INVALID_INDEX = 0  # slot value / prevIndex meaning "no entry"
FIRST_INDEX = 1  # indexCount's initial value: entry 0 stays unused

# MessageStoreConfig defaults: 5,000,000 slots and four times as many entries.
DEFAULT_MAX_HASH_SLOT_NUM = 5_000_000
DEFAULT_MAX_INDEX_NUM = DEFAULT_MAX_HASH_SLOT_NUM * 4

FILE_NAME_LENGTH = len("yyyyMMddHHmmssSSS")

IndexHeader = Struct(
    "begin_timestamp" / Int64sb,
    "end_timestamp" / Int64sb,
    "begin_phy_offset" / Int64sb,
    "end_phy_offset" / Int64sb,
    "hash_slot_count" / Int32sb,
    "index_count" / Int32sb,
)

IndexSlot = Struct(
    "slot_value" / Int32sb,
)

IndexEntry = Struct(
    "key_hash" / Int32sb,
    "phy_offset" / Int64sb,
    "time_diff" / Int32sb,
    "prev_index" / Int32sb,
)


def _field_position(schema: Struct, name: str) -> int:
    """Where a field of a fixed-size Struct starts."""
    position = 0
    for sub in schema.subcons:
        if sub.name == name:
            return position
        position += sub.sizeof()
    raise KeyError(name)


# The sizes and positions every reader and writer uses, taken from the schemas.
INDEX_HEADER_SIZE = IndexHeader.sizeof()
HASH_SLOT_SIZE = IndexSlot.sizeof()
INDEX_SIZE = IndexEntry.sizeof()
ENTRY_PHY_OFFSET_POSITION = _field_position(IndexEntry, "phy_offset")  # within an entry
HEADER_INDEX_COUNT_POSITION = _field_position(IndexHeader, "index_count")
assert (INDEX_HEADER_SIZE, HASH_SLOT_SIZE, INDEX_SIZE) == (40, 4, 20)  # IndexHeader.INDEX_HEADER_SIZE etc.


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    """IndexFile's fileTotalSize."""
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_SIZE


def slot_position(slot: int) -> int:
    """absSlotPos: where a hash slot lies in the file."""
    return INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE


def entry_position(hash_slot_num: int, index: int) -> int:
    """absIndexPos: where entry ``index`` lies in a file of ``hash_slot_num`` slots."""
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index * INDEX_SIZE


def index_num_for(file_size: int, hash_slot_num: int) -> int | None:
    """The entry count a file of this size holds with this many slots (None: no whole number)."""
    rest = file_size - entry_position(hash_slot_num, 0)
    return rest // INDEX_SIZE if hash_slot_num > 0 and rest > 0 and rest % INDEX_SIZE == 0 else None


def hash_slot_num_for(file_size: int, index_num: int) -> int | None:
    """The slot count a file of this size holds with this many entries (None: no whole number)."""
    rest = file_size - INDEX_HEADER_SIZE - index_num * INDEX_SIZE
    return rest // HASH_SLOT_SIZE if index_num > 0 and rest > 0 and rest % HASH_SLOT_SIZE == 0 else None


def default_geometry(file_size: int) -> tuple[int, int] | None:
    """(maxHashSlotNum, maxIndexNum) in the broker's default 1:4 ratio, if a file of this size fits it."""
    slots, rest = divmod(file_size - INDEX_HEADER_SIZE, HASH_SLOT_SIZE + 4 * INDEX_SIZE)
    return (slots, 4 * slots) if slots > 0 and rest == 0 else None


def hash_slot_num_placing(index: int, position: int) -> int | None:
    """The slot count that puts entry ``index`` at byte ``position`` (None: none does)."""
    rest = position - entry_position(0, index)
    return rest // HASH_SLOT_SIZE if rest > 0 and rest % HASH_SLOT_SIZE == 0 else None


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def index_key_hash(key: str) -> int:
    """IndexFile.indexKeyHashMethod: abs(hashCode), where abs(Integer.MIN_VALUE) stays negative -> 0."""
    h = java_string_hash(key)
    if h == -(2**31):
        return 0
    return abs(h)


def build_key(topic: str, key: str) -> str:
    """IndexService.buildKey: every key (and UNIQ_KEY) is indexed as topic#key."""
    return f"{topic}#{key}"


def slot_of(key_hash: int, hash_slot_num: int) -> int:
    """The slot a hash lands in (keyHash % hashSlotNum; keyHash is never negative)."""
    return key_hash % hash_slot_num
