"""Where an existing store's commit log ends: the broker's recovery of the last file.

The engine opens a store by finding its write position: trailing segments made ahead
and never used are skipped; the last one holding data is read record by record. What
lies after the end (zeros, or bytes that are not) is reported, never changed here.
"""
from __future__ import annotations

import dataclasses
import errno
import os
import pathlib

from rmqtool.errors import StoreAccessError
from rmqtool.formats.commitlog import BLANK_MAGIC_CODE
from rmqtool.store.commitlog import Blank, header_hop, scan_segment
from rmqtool.store.segments import Segment
from rmqtool.store.message import Message


@dataclasses.dataclass
class CommitLogEnd:
    """Where the commit log ends, and what lies after that end."""
    end: int  # next write offset
    segment_base: int | None  # the segment the end lies in (None: a new one is needed)
    wrote_position: int
    damaged_at: tuple | None = None  # (path, position) of bytes after the end that are not zero
    extra_segments: tuple = ()  # segments after the end (made ahead, or garbage)
    store_host: tuple | None = None  # of the last message


def all_zero_from(path: pathlib.Path, position: int) -> int | None:
    """None when the file holds only zeros from ``position`` on, else the first non-zero position."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise StoreAccessError(f"cannot open ({exc.strerror})", path) from None
    try:
        size = os.fstat(fd).st_size
        pos = position
        while pos < size:
            try:
                pos = os.lseek(fd, pos, os.SEEK_DATA)  # skip holes of a sparse file
            except OSError as exc:
                if exc.errno == errno.ENXIO:
                    return None  # nothing but a hole up to the end
                if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                    raise
            chunk = os.pread(fd, min(1 << 22, size - pos), pos)
            if not chunk:
                return None
            stripped = chunk.lstrip(b"\x00")
            if stripped:
                return pos + len(chunk) - len(stripped)
            pos += len(chunk)
        return None
    except OSError as exc:
        raise StoreAccessError(f"read failed ({exc.strerror})", path) from None
    finally:
        os.close(fd)


def first_bytes(path: pathlib.Path, n: int, position: int = 0) -> bytes:
    """Up to ``n`` bytes of a file from ``position`` (fewer at its end)."""
    try:
        with open(path, "rb") as f:
            f.seek(position)
            return f.read(n)
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", path, position or None) from None


def find_commit_log_end(segments: list[Segment], size: int, *, check_crc: bool) -> CommitLogEnd:
    """The commit log's write position, as the broker's recovery of the last file finds it.

    Trailing segments that start with zeros were made ahead and never used. The last one
    holding data is read record by record (with ``check_crc``, a full decode and body CRC
    check of each, as abnormal recovery; without, a header hop); the end is after its last
    good record, or the next segment's start when it ends with a blank record.
    """
    if not segments:
        return CommitLogEnd(0, None, 0)
    idx = len(segments) - 1
    while idx > 0 and first_bytes(segments[idx].path, 8) == bytes(8):
        idx -= 1
    tail = segments[idx]
    path = tail.path
    end_pos = 0
    full = False
    last_msg = None
    if check_crc:
        for r in scan_segment(tail, check_crc=True):
            if isinstance(r, Message):
                if r.body_crc_ok is False:
                    break
                end_pos = r.position + r.store_size
                last_msg = r
            elif isinstance(r, Blank):
                if r.valid:
                    full = True
                break
            else:
                break
    else:
        _count, end_pos = header_hop(str(path), tail.size)
        if end_pos > tail.size:
            end_pos = 0
            for r in scan_segment(tail, check_crc=False):  # a record runs past the end: find the last whole one
                if isinstance(r, Message):
                    end_pos = r.position + r.store_size
                else:
                    break
        head = first_bytes(path, 8, end_pos)
        if len(head) == 8:
            total, magic = int.from_bytes(head[:4], "big", signed=True), int.from_bytes(head[4:], "big")
            if magic == BLANK_MAGIC_CODE and total == tail.size - end_pos:
                full = True
        if end_pos:
            last_msg = _last_message(tail, end_pos)
    damaged = None
    if not full:
        nonzero = all_zero_from(path, end_pos)
        if nonzero is not None:
            damaged = (path, nonzero)
    later = segments[idx + 1:]
    if full:
        nxt = tail.base_offset + size
        if later and later[0].base_offset == nxt:
            result = CommitLogEnd(nxt, nxt, 0, damaged, tuple(later[1:]))
        else:
            result = CommitLogEnd(nxt, None, 0, damaged, tuple(later))
    else:
        result = CommitLogEnd(tail.base_offset + end_pos, tail.base_offset, end_pos, damaged, tuple(later))
    if last_msg is not None:
        result.store_host = (bytes(last_msg.store_ip), last_msg.store_port)
    return result


def _last_message(tail: Segment, end_pos: int) -> Message | None:
    """The record that ends at ``end_pos`` (for the store host of an existing store)."""
    start = max(0, end_pos - 64 * 1024)
    for r in scan_segment(tail, start=start, check_crc=False):
        if isinstance(r, Message) and r.position + r.store_size == end_pos:
            return r
        if isinstance(r, Message) and r.position >= end_pos:
            break
    return None
