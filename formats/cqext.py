"""ConsumeQueueExt: the consume queue's extension units (SQL92 filter bit maps, the real tagsCode).

Mirrors ``store/src/main/java/org/apache/rocketmq/store/ConsumeQueueExt.java`` (the class and
its ``CqExtUnit``) at rocketmq-all-5.3.3 (the layout is the same at 4.9.8). Only with
``enableConsumeQueueExt``: ``ConsumeQueue.putMessagePositionInfoWrapper`` then writes an ext
unit for every message and stores the unit's *address* in the consume queue unit's 8-byte
tagsCode field instead of the tags hash. Files: ``consumequeue_ext/<topic>/<queueId>/``,
named by the byte offset of their first unit (20 digits), each ``mappedFileSizeConsumeQueueExt``
bytes (default 48 MiB). All integers big-endian.

Ext unit (``CqExtUnit.write``), variable length::

     0 +--------+---------------------------+---------------------------+
       |  size  |        tagsCode           |       msgStoreTime        |
       | int16  |  int64 (the tags hash)    |  int64 (storeTimestamp)   |
    18 +--------+-----------------+---------+---------------------------+
       | bitMapSize int16 | filterBitMap (bitMapSize bytes, absent if < 1) |
    20 +------------------+-----------------------------------------------+

    size = 20 + bitMapSize (``MIN_EXT_UNIT_SIZE`` + the bit map), at most Short.MAX_VALUE.
    A size field of -1 (``fullFillToEnd``) at the write position says the next unit did not fit
    (``size > fileSize - wrotePosition - END_BLANK_DATA_LENGTH``): the file is full, the next
    unit starts the next file.

Address (``decorate`` / ``unDecorate``): ``address = realOffset + Long.MIN_VALUE``, so every
address is negative; ``isExtAddr(x)`` is ``x <= MAX_ADDR`` with ``MAX_ADDR = Integer.MIN_VALUE - 1``,
which keeps addresses apart from tags hashes (an int widened to long is never below it).

Filter bit map (``org.apache.rocketmq.filter.util.BitsArray``): bit ``i`` is bit ``i % 8``
(mask ``1 << (i % 8)``) of byte ``i / 8``; a SQL92 consumer's ``bloomFilterData.bitPos`` are
set when its expression was true on the message at dispatch time.
"""
from __future__ import annotations

from construct import Bytes, If, Int16sb, Int64sb, Struct, this

# CqExtUnit.MIN_EXT_UNIT_SIZE: size (2) + tagsCode (8) + msgStoreTime (8) + bitMapSize (2)
CQ_EXT_MIN_UNIT_SIZE = 2 + 8 + 8 + 2
CQ_EXT_MAX_UNIT_SIZE = 2**15 - 1  # CqExtUnit.MAX_EXT_UNIT_SIZE = Short.MAX_VALUE
CQ_EXT_END_MARK = -1  # the short fullFillToEnd writes over a file's unusable end
FILL_TO_END_MARKER = CQ_EXT_END_MARK
END_BLANK_DATA_LENGTH = 4  # ConsumeQueueExt.END_BLANK_DATA_LENGTH: room a file always keeps
_LONG_MIN_VALUE = -(2**63)
CQ_EXT_MAX_ADDR = -(2**31) - 1  # ConsumeQueueExt.MAX_ADDR = Integer.MIN_VALUE - 1L
CQ_EXT_MAX_REAL_OFFSET = CQ_EXT_MAX_ADDR - _LONG_MIN_VALUE  # ConsumeQueueExt.MAX_REAL_OFFSET
DEFAULT_CQ_EXT_FILE_SIZE = 48 * 1024 * 1024  # MessageStoreConfig.mappedFileSizeConsumeQueueExt

CqExtUnitHeader = Struct(
    "size" / Int16sb,
    "tags_code" / Int64sb,
    "msg_store_time" / Int64sb,
    "bit_map_size" / Int16sb,
)
assert CqExtUnitHeader.sizeof() == CQ_EXT_MIN_UNIT_SIZE

# the header's fields, then bitMapSize bytes of bit map
CqExtUnit = Struct(
    *CqExtUnitHeader.subcons,
    "filter_bit_map" / If(this.bit_map_size > 0, Bytes(this.bit_map_size)),
)
assert len(CqExtUnit.build(dict(size=CQ_EXT_MIN_UNIT_SIZE, tags_code=0, msg_store_time=0,
                                 bit_map_size=0, filter_bit_map=None))) == CQ_EXT_MIN_UNIT_SIZE


def is_ext_addr(tags_code: int) -> bool:
    """ConsumeQueueExt.isExtAddr: the tagsCode field holds an address into consumequeue_ext."""
    return tags_code <= CQ_EXT_MAX_ADDR


def ext_addr_to_offset(address: int) -> int:
    """ConsumeQueueExt.unDecorate: the byte offset within the extension's files."""
    return address - _LONG_MIN_VALUE if is_ext_addr(address) else address


def ext_offset_to_addr(offset: int) -> int:
    """ConsumeQueueExt.decorate: the address a consume queue unit stores for an ext offset."""
    return offset if is_ext_addr(offset) else offset + _LONG_MIN_VALUE


def bit_is_set(bit_map: bytes, bit: int) -> bool:
    """BitsArray.getBit: bit ``bit`` is bit ``bit % 8`` of byte ``bit // 8``."""
    return bool(bit_map[bit // 8] & (1 << (bit % 8)))


def set_bits(bit_map: bytes) -> list[int]:
    """The positions set in a bit map, in BitsArray's order."""
    return [i for i in range(len(bit_map) * 8) if bit_is_set(bit_map, i)]
