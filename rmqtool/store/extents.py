"""Where a sparse file holds data: one SEEK_DATA / SEEK_HOLE loop for every reader.

The engines create their files at full size and write them from the front (RocketMQ's commit
log segments and index files, the timer wheel, QMQ's logs, which QMQ maps at 1 GiB), so the
unwritten rest is often a hole, and a hole reads as zeros. A reader that skips holes takes
time that follows the written data, not the file size. Where the file system cannot tell
holes (EINVAL, EOPNOTSUPP, or no SEEK_DATA on the platform), every byte counts as data:
slower, never wrong. Nothing here reads a byte but through a reader's own ``read``.
"""
from __future__ import annotations

import errno
import os
from typing import Iterator

from rmqtool.errors import StoreAccessError

# lseek's answers where a file system has no hole reporting: read everything then
_NO_HOLES = {errno.EINVAL, errno.EOPNOTSUPP, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)}


def next_extent(fd: int, pos: int, end: int, path=None) -> tuple[int, int] | None:
    """The first data extent of ``[pos, end)`` in the file open as ``fd``, as (start, stop)
    clipped to that range; None when only a hole follows ``pos`` there. (pos, end) where
    the file system cannot tell holes. An I/O error is a StoreAccessError naming ``path``
    and the position."""
    if pos >= end:
        return None
    if not hasattr(os, "SEEK_DATA"):
        return pos, end
    try:
        start = os.lseek(fd, pos, os.SEEK_DATA)
        if start >= end:
            return None
        stop = os.lseek(fd, start, os.SEEK_HOLE)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # no data after pos
            return None
        if exc.errno in _NO_HOLES:
            return pos, end
        raise StoreAccessError(f"seek failed ({exc.strerror})", path, pos) from None
    return start, min(stop, end)


def data_extents(fd: int, start: int, end: int, path=None) -> Iterator[tuple[int, int]]:
    """Every data extent of ``[start, end)``, in order (:func:`next_extent`'s)."""
    extent = next_extent(fd, start, end, path)
    while extent is not None:
        yield extent
        extent = next_extent(fd, extent[1], end, path)


def data_end(fd: int, end: int, path=None) -> int:
    """Where the last data extent of ``[0, end)`` ends (0 for a file that is all hole): the
    holes after it read as zeros without being read."""
    last = 0
    for _, last in data_extents(fd, 0, end, path):
        pass
    return last


def last_nonzero(fd: int, start: int, end: int, read, window: int, path=None) -> int | None:
    """Just past the last non-zero byte of ``[start, end)`` of the file open as ``fd``; None
    when all of it is zero. Its data extents are read from the back ``window`` bytes at a time
    through ``read(position, n)`` (a pread, a mapping's slice), holes unread, and a window is
    compared with zeros whole (one memcmp) before it is stripped."""
    for lo, hi in reversed(list(data_extents(fd, start, end, path))):
        while hi > lo:
            n = min(window, hi - lo)
            chunk = read(hi - n, n)
            if chunk != bytes(len(chunk)):
                return hi - n + len(chunk.rstrip(b"\0"))  # only this window is stripped
            hi -= n
    return None
