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

from operator import mul

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


# --- the index key hash: IndexFile.indexKeyHashMethod, one scalar and one vectorised form ----
# hashCode is a running h = 31 * h + c, so hash(head + tail) = hash(head) * 31**len(tail) +
# hash(tail): the scalar keeps the hash of a key without its last _TAIL characters and hashes
# only those per key. UNIQ_KEYs (topic#UNIQ_KEY) share their producer part and, within a
# millisecond, their time part: the append and dispatch hot paths hash 4 characters a key.

_M32 = 0xFFFFFFFF
_TAIL = 4
_TAIL_POWER = 31 ** _TAIL
_HEADS: dict[str, int] = {}  # key without its tail -> hash(head) * 31**_TAIL (mod 2^32)
_TAILS: dict[str, int] = {}  # a key's last _TAIL characters -> their hash started from 0
_POWERS: dict[int, tuple] = {}  # n -> 31^(n-1) .. 31^0 (mod 2^32)
_CACHE_LIMIT = 1 << 14  # entries each cache keeps (UNIQ_KEY heads change every millisecond)


def _ascii_hash(raw: bytes) -> int:
    """String.hashCode (unsigned) of ASCII bytes: one weighted sum instead of a loop."""
    powers = _POWERS.get(len(raw))
    if powers is None:
        powers = tuple(pow(31, len(raw) - 1 - i, 1 << 32) for i in range(len(raw)))
        if len(raw) <= 1024:  # longer keys are rare: not kept
            _POWERS[len(raw)] = powers
    return sum(map(mul, raw, powers)) & _M32


def _head_part(head: str) -> int:
    part = (_ascii_hash(head.encode("ascii")) * _TAIL_POWER) & _M32
    if len(_HEADS) >= _CACHE_LIMIT:
        _HEADS.clear()
    _HEADS[head] = part
    return part


def _tail_part(tail: str) -> int:
    a, b, c, d = tail.encode("ascii")
    part = ((a * 31 + b) * 31 + c) * 31 + d
    if len(_TAILS) >= _CACHE_LIMIT * 8:
        _TAILS.clear()
    _TAILS[tail] = part
    return part


def index_key_hash(key: str) -> int:
    """IndexFile.indexKeyHashMethod(key) of a built key (:func:`build_key`, IndexService.buildKey):
    abs(String.hashCode(key)), where abs(Integer.MIN_VALUE) stays negative and the broker
    uses 0. The one scalar form (:func:`index_key_hashes` is the vectorised one)."""
    if len(key) > _TAIL and key.isascii():
        head, tail = key[:-_TAIL], key[-_TAIL:]
        part = _HEADS.get(head)
        if part is None:
            part = _head_part(head)
        rest = _TAILS.get(tail)
        if rest is None:
            rest = _tail_part(tail)
        h = (part + rest) & _M32
    else:
        h = java_string_hash(key) & _M32
    if h & 0x80000000:
        h = (1 << 32) - h  # abs() of the negative int
        if h == 1 << 31:
            return 0  # Math.abs(Integer.MIN_VALUE) stays negative: the broker uses 0
    return h


def index_hash_of(hash_codes):
    """indexKeyHashMethod of String.hashCode values given as a numpy uint32 array (int64
    out, 0 .. 2^31-1): abs, Integer.MIN_VALUE -> 0."""
    import numpy as np

    signed = hash_codes.view(np.int32).astype(np.int64)
    return np.where(signed == -(1 << 31), 0, np.abs(signed))


_KEYS_AT_ONCE = 1 << 15  # the vectorised form's arrays take ~40 bytes a UTF-16 unit


def index_key_hashes(keys: list[str]):
    """:func:`index_key_hash` of each key as a numpy int64 array; keys must not be empty.

    Over the keys laid end to end, unit i weighs 31^(total-1-i); each key's sum is moved to
    its own end with 31's inverse mod 2^32 (uint64 arithmetic wraps mod 2^64, which keeps
    every value right mod 2^32). In chunks of _KEYS_AT_ONCE keys, so memory stays a few MiB."""
    import numpy as np

    if not keys:
        return np.zeros(0, np.int64)
    return np.concatenate([_hashes_of(keys[i:i + _KEYS_AT_ONCE]) for i in range(0, len(keys), _KEYS_AT_ONCE)])


def _powers_array(base: int, n: int):
    """base^0 .. base^(n-1) mod 2^32, uint64."""
    import numpy as np

    out = np.full(n, base, np.uint64)
    if n:
        out[0] = 1
        np.cumprod(out, out=out)
    return out & np.uint64(_M32)


_ASCII_MATRIX_LIMIT = 8 << 20  # bytes of the ASCII form's key matrix, at most


def _ascii_hashes_of(keys: list[str]):
    """:func:`_hashes_of` of ASCII keys, or None when they are not all ASCII: one row a key,
    right-aligned with NULs (a leading 0 adds nothing to a hashCode), times the powers of 31;
    a matrix product over uint8 instead of one weight a UTF-16 unit (about 10x cheaper)."""
    import numpy as np

    width = max(map(len, keys))
    if width * len(keys) > _ASCII_MATRIX_LIMIT:
        return None
    joined = "".join(keys) if len(keys[0]) * len(keys) == sum(map(len, keys)) and len(keys[0]) == width \
        else "".join([k.rjust(width, "\0") for k in keys])
    if not joined.isascii():
        return None
    rows = np.frombuffer(joined.encode("ascii"), np.uint8).reshape(len(keys), width)
    sums = (rows @ _powers_array(31, width)[::-1]) & np.uint64(_M32)
    return index_hash_of(sums.astype(np.uint32))


def _hashes_of(keys: list[str]):
    import numpy as np

    fast = _ascii_hashes_of(keys)
    if fast is not None:
        return fast
    mask = np.uint64(_M32)
    encoded = [k.encode("utf-16-be", "surrogatepass") for k in keys]
    units = np.frombuffer(b"".join(encoded), ">u2").astype(np.uint64)
    lengths = np.fromiter((len(e) >> 1 for e in encoded), np.int64, count=len(encoded))
    ends = np.cumsum(lengths)
    total = int(ends[-1])
    weights = _powers_array(31, total)[::-1]
    sums = np.add.reduceat(units * weights, ends - lengths) & mask
    inverse = _powers_array(pow(31, -1, 1 << 32), total + 1)
    return index_hash_of(((sums * inverse[total - ends]) & mask).astype(np.uint32))


def build_key(topic: str, key: str) -> str:
    """IndexService.buildKey: every key (and UNIQ_KEY) is indexed as topic#key."""
    return f"{topic}#{key}"


def slot_of(key_hash: int, hash_slot_num: int) -> int:
    """The slot a hash lands in (keyHash % hashSlotNum; keyHash is never negative)."""
    return key_hash % hash_slot_num
