"""Reading a small file of the store root whole (checkpoint, abort, abort.bak, config/*.json).

The broker keeps these files small; a damaged one may not be, so a read is bounded: at
most ``limit`` bytes come into memory, and ``refuse`` may turn a file down by its size on
disk before any byte is read. Each way a read fails is one error, the same for every such
file: missing StoreNotFound (exit 8), a directory in its place FormatError, anything else
the OS refuses StoreAccessError.
"""
from __future__ import annotations

import os
import pathlib
import stat
from typing import Callable

from rmqtool.errors import FormatError, StoreAccessError, StoreNotFound

READ_WINDOW = 1 << 20  # bytes asked of one read: a large limit is read a window at a time
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def not_regular(mode: int) -> str | None:
    """What a file of ``mode`` is when it is neither a regular file nor a directory, else None."""
    return next((name for test, name in _KINDS if test(mode)), None)


def not_a_file(mode: int) -> str | None:
    """What a file of ``mode`` is when it is no regular file (a directory too), else None."""
    return "a directory" if stat.S_ISDIR(mode) else not_regular(mode)


def open_regular(path: str | os.PathLike, what: str = "file") -> int:
    """A descriptor of ``path`` open for reading, refused (FormatError) unless a regular file:
    opened without blocking, so a FIFO in a file's place is said, not waited on for ever (an
    open for reading blocks until a writer comes). The caller closes it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    kind = not_a_file(mode)
    if kind is not None:
        os.close(fd)
        raise FormatError(f"{kind} where a {what} should be (rmqtool reads regular files only)", path)
    return fd


def read_head(path: str | os.PathLike, limit: int, *, what: str = "file",
              refuse: Callable[[int], str | None] | None = None) -> tuple[bytes, int]:
    """At most the file's first ``limit`` bytes, and the file's size on disk. ``what`` names
    the file in the error for a directory in its place; ``refuse(size)`` returning a message
    refuses the file unread (FormatError)."""
    path = pathlib.Path(path)
    try:
        with open(open_regular(path, what), "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            why = refuse(size) if refuse is not None else None
            if why is not None:
                raise FormatError(why, path)
            chunks, left = [], limit
            while left > 0:  # a raw read may return less than asked before the end
                chunk = f.read(min(left, READ_WINDOW))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks), size
    except FileNotFoundError:
        raise StoreNotFound("no such file", path) from None
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", path) from None
