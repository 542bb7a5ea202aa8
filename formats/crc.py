"""The two CRCs a message record carries: the body CRC, and 5.x's ``__CRC32#`` property.

Mirrors ``UtilAll.crc32``, ``CommitLog.checkMessageAndReturnSize`` (4.9.8 and 5.3.3),
``CommitLog.DefaultAppendMessageCallback.doAppend`` and ``MessageDecoder.createCrc32``
(5.3.3). The CRC is CRC-32 (``java.util.zip.CRC32``, as zlib's), masked to 31 bits so it
is never negative as a Java int.

Body CRC (the record's ``bodyCRC`` field)::

    bodyCRC = CRC-32(body) & 0x7FFFFFFF          0 for an empty body (CRC-32 of nothing is 0;
                                                 the broker checks it only when bodyLength > 0)

Record CRC (5.x with ``enabledAppendPropCRC``): the last 20 bytes of the properties are a
reserved ``__CRC32#`` entry, filled in doAppend after queueOffset, physicalOffset and
storeTimestamp are in place; its CRC covers every byte of the record before the entry::

     0                                                      totalSize - 20        totalSize
     +------------------------------------------------------+---------------------+
     | totalSize ... body ... topic ... properties (start)  | __CRC32# 01 d0..d9 02 |
     +------------------------------------------------------+---------------------+
     |<------------- CRC-32 & 0x7FFFFFFF of these -------->|

    d0..d9: the CRC's decimal digits, least significant first, padded with '0'
    (createCrc32); checkMessageAndReturnSize reads them back from the last one.

These are the rules, as pure functions over bytes; ``crc32`` is any CRC-32 function of a
buffer (zlib's by default). Which implementation the hot paths run is decided in one place,
``rmqtool.store.crc``.
"""
from __future__ import annotations

import zlib

from .properties import NAME_VALUE_SEPARATOR, PROPERTY_CRC32, PROPERTY_SEPARATOR, delete_property

JAVA_CRC_MASK = 0x7FFFFFFF  # UtilAll.crc32: crc32.getValue() & 0x7FFFFFFF

CRC32_DIGITS = 10
CRC32_ENTRY_HEAD = (PROPERTY_CRC32 + NAME_VALUE_SEPARATOR).encode()
CRC32_ENTRY_END = PROPERTY_SEPARATOR.encode()
# CommitLog.CRC32_RESERVED_LEN: "__CRC32#" + \u0001 + 10 digits + \u0002
CRC32_RESERVED_LEN = len(CRC32_ENTRY_HEAD) + CRC32_DIGITS + len(CRC32_ENTRY_END)
assert CRC32_RESERVED_LEN == 20


def body_crc(body, crc32=zlib.crc32) -> int:
    """The bodyCRC field of a record holding ``body``."""
    return crc32(body) & JAVA_CRC_MASK if len(body) else 0


def record_crc(record, crc32=zlib.crc32) -> int:
    """The CRC a 5.x ``__CRC32#`` entry holds: over the whole record but its last 20 bytes."""
    return crc32(memoryview(record)[:len(record) - CRC32_RESERVED_LEN]) & JAVA_CRC_MASK


def crc32_property_digits(crc: int) -> str:
    """The 10 digits of the ``__CRC32#`` value: lowest decimal digit first, padded with '0'."""
    return str(crc)[::-1].ljust(CRC32_DIGITS, "0")


def crc32_from_digits(digits: str) -> int | None:
    """The digits read back from the last one; None when they are not 10 digits."""
    if len(digits) != CRC32_DIGITS or not digits.isdigit():
        return None
    return int(digits[::-1])


def crc32_property(crc: int) -> bytes:
    """The reserved entry as createCrc32 writes it: the last 20 bytes of the record."""
    return CRC32_ENTRY_HEAD + crc32_property_digits(crc).encode("ascii") + CRC32_ENTRY_END


def ends_with_crc32_entry(properties_raw: bytes) -> bool:
    """Whether properties end with a ``__CRC32#`` entry's shape (its head, 10 bytes, the
    separator), whatever its digits: the reserved 20 bytes of a 5.x record."""
    return (len(properties_raw) >= CRC32_RESERVED_LEN and properties_raw.endswith(CRC32_ENTRY_END)
            and properties_raw.startswith(CRC32_ENTRY_HEAD, len(properties_raw) - CRC32_RESERVED_LEN))


def stored_record_crc(properties_raw: bytes) -> int | None:
    """The CRC in a record's trailing ``__CRC32#`` entry, or None when its properties do not
    end with one (4.x, or 5.x without enabledAppendPropCRC)."""
    if not ends_with_crc32_entry(properties_raw):
        return None
    tail = properties_raw[-CRC32_RESERVED_LEN:]
    return crc32_from_digits(tail[_DIGITS_AT:_DIGITS_END].decode("ascii", "replace"))


def reserve_crc32_entry(properties: bytes) -> bytes:
    """A single message's properties as 5.3.3 stores them with enabledAppendPropCRC, before
    doAppend fills the entry in: any ``__CRC32#`` entry it came with deleted
    (asyncPutMessage's deleteProperty), a separator added when they do not end with one
    (MessageExtEncoder's needAppendLastPropertySeparator; none to an empty string), then the
    20 reserved bytes (zeros until :func:`fill_crc32_entry`)."""
    if CRC32_ENTRY_HEAD[:-1] in properties:
        properties = delete_property(properties, PROPERTY_CRC32)
    if properties and not properties.endswith(CRC32_ENTRY_END):
        properties += CRC32_ENTRY_END
    return properties + bytes(CRC32_RESERVED_LEN)


def fill_crc32_entry(buf, pos: int, size: int, start: bytes, crc32=zlib.crc32) -> None:
    """doAppend's last step under enabledAppendPropCRC: the placed record at
    ``buf[pos:pos + size]`` (queue offset, physical offset and store timestamp written) gets
    the entry over its reserved last 20 bytes. ``start`` is its first 8 bytes (totalSize and
    magic code), which a writer may put in place only after this: the CRC covers them too."""
    end = pos + size - CRC32_RESERVED_LEN
    crc = crc32(memoryview(buf)[pos + len(start):end], crc32(start))
    buf[end:pos + size] = crc32_property(crc & JAVA_CRC_MASK)


_DIGITS_AT = len(CRC32_ENTRY_HEAD)
_DIGITS_END = _DIGITS_AT + CRC32_DIGITS


def java_digits_value(digits: str | None) -> int | None:
    """The ``__CRC32#`` value as 5.3.3's checkMessageAndReturnSize reads it under
    forceVerifyPropCRC: ``(c - '0')`` of each char from the last one, in Java int arithmetic
    (no check that they are digits, so damage can read as a negative number, which fails
    the record); None when there is no entry."""
    if digits is None:
        return None
    value = 0
    for ch in reversed(digits):
        value = (value * 10 + (ord(ch) - 48)) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value
