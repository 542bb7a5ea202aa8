"""RocketMQ's CRC rules. crcmod defines the CRC; the hot path uses zlib's implementation of
the same CRC-32 (about 10x faster), and tests assert the two agree.

UtilAll.crc32 masks CRC-32 to 31 bits: ``crc32(bytes) & 0x7FFFFFFF``. The body CRC of an
empty body is 0, as the broker stores it.
"""
from __future__ import annotations

import zlib

import crcmod.predefined

JAVA_CRC_MASK = 0x7FFFFFFF

_crcmod_crc32 = crcmod.predefined.mkCrcFun("crc-32")


def crc32_reference(data: bytes) -> int:
    """The defining implementation (crcmod), masked like UtilAll.crc32."""
    return _crcmod_crc32(bytes(data)) & JAVA_CRC_MASK


def crc32(data) -> int:
    """Fast implementation of the same value; takes any buffer (bytes, memoryview)."""
    return zlib.crc32(data) & JAVA_CRC_MASK
