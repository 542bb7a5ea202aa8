"""The few ``java.nio.ByteBuffer`` behaviours QMQ's recovery depends on, and its exceptions.

QMQ's validators and visitors read a mapped segment with relative gets and no bounds checks
of their own, so where they stop, and which exception ends the broker's start, is decided by
the buffer: a read past the limit throws ``BufferUnderflowException``, ``new byte[-1]`` throws
``NegativeArraySizeException``, a position outside [0, limit] ``IllegalArgumentException``.
Past the file's bytes (a short file) a mapping reads zeros up to the segment size.
"""
from __future__ import annotations

import struct

from rmqtool.store.qmq.segments import crc32_zero_extended

_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


class JavaException(Exception):
    """An exception the broker's Java code throws; ``file`` is the file it was reading."""

    def __init__(self, java_class: str, message: str, file: str | None = None, offset: int | None = None):
        super().__init__(f"{java_class}: {message}")
        self.java_class = java_class
        self.message = message
        self.file = file
        self.offset = offset  # where in ``file`` the record being read starts, when one is


def int32(value: int) -> int:
    """Java ``int`` arithmetic: wrap to 32 bits, signed."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def java_mod(a: int, b: int) -> int:
    """Java's ``%``: the sign of the dividend."""
    r = abs(a) % b
    return -r if a < 0 else r


def java_div(a: int, b: int) -> int:
    """Java's integer ``/``: rounds toward zero."""
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def int64(value: int) -> int:
    """Java ``long`` arithmetic: wrap to 64 bits, signed."""
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >= 1 << 63 else value


def new_array(length: int) -> None:
    """``new byte[length]``: a negative length throws."""
    if length < 0:
        raise JavaException("java.lang.NegativeArraySizeException", str(length))


class JavaBuffer:
    """A ByteBuffer over ``data`` (a file's bytes) seen from ``start``, with ``limit`` bytes
    readable; bytes past ``data`` read as zeros (QMQ maps every segment at its full size)."""

    __slots__ = ("data", "start", "limit", "position", "zeros_from")

    def __init__(self, data: bytes, start: int, limit: int, zeros_from: int | None = None):
        self.data, self.start, self.limit, self.position = data, start, limit, 0
        self.zeros_from = zeros_from  # where ``data`` holds only zeros on (a trailing hole): get_crc32 skips them

    def remaining(self) -> int:
        return self.limit - self.position

    def set_position(self, position: int) -> None:
        if not 0 <= position <= self.limit:
            raise JavaException("java.lang.IllegalArgumentException",
                                f"newPosition > limit: ({position} > {self.limit})" if position > self.limit
                                else f"newPosition < 0: ({position} < 0)")
        self.position = position

    def _take(self, n: int) -> int:
        """``get(new byte[n])``'s checks and move: where in ``data`` the n bytes begin."""
        new_array(n)
        if n > self.remaining():
            raise JavaException("java.nio.BufferUnderflowException", "")
        at = self.start + self.position
        self.position += n
        return at

    def get_bytes(self, n: int) -> bytes:
        at = self._take(n)
        piece = self.data[at:at + n]
        return piece + bytes(n - len(piece))

    def get_crc32(self, n: int) -> int:
        """``get_bytes(n)``'s CRC-32 (``Crc32.crc32`` of the array), without the bytes."""
        at = self._take(n)
        return crc32_zero_extended(self.data, at, n, self.zeros_from)

    def get_byte(self) -> int:
        return _I8.unpack(self.get_bytes(1))[0]

    def get_short(self) -> int:
        return _I16.unpack(self.get_bytes(2))[0]

    def get_int(self) -> int:
        return _I32.unpack(self.get_bytes(4))[0]

    def get_long(self) -> int:
        return _I64.unpack(self.get_bytes(8))[0]
