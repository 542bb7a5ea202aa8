"""QMQ's log directories: fixed-size segments named by the offset of their first byte.

Mirrors ``LogManager.loadLogs`` and the ``LogSegment`` constructor (qmq-store 5abc92f4):
a name starting with ``.`` is skipped (the message log's ``.offset`` files); every other
name goes to ``Long.parseLong``, and one that is not a number stops the broker's start.
The segment size is a constant of each log (``formats/qmq``), not a setting: every
segment is mapped at that size, so a shorter file reads as zero-extended.
"""
from __future__ import annotations

import dataclasses
import errno
import mmap
import os
import pathlib
import stat
import zlib

from rmqtool.formats.qmq.java import NumberFormatError, java_parse
from rmqtool.store.extents import data_extents, last_nonzero


@dataclasses.dataclass(frozen=True, slots=True)
class LogSegment:
    path: pathlib.Path
    base_offset: int
    size: int  # the segment's logical size (the log's constant)
    file_size: int  # bytes on disk now; the rest reads as zeros

    @property
    def end_offset(self) -> int:
        return self.base_offset + self.size


@dataclasses.dataclass(frozen=True, slots=True)
class LogDirectory:
    directory: pathlib.Path
    segments: tuple[LogSegment, ...]
    skipped: tuple[pathlib.Path, ...]  # names starting with ".", and directories: LogManager skips them
    unparsable: tuple[pathlib.Path, ...]  # names Long.parseLong refuses: the broker does not start

    def locate(self, offset: int) -> LogSegment | None:
        """``LogManager.locateSegment``: the segment whose range holds ``offset``."""
        for seg in reversed(self.segments):
            if seg.base_offset <= offset:
                return seg if offset < seg.end_offset else None
        return None


def misaligned(log: LogDirectory) -> list[LogSegment]:
    """Segments whose name is not a multiple of the log's segment size. QMQ never names one so
    (``LogManager.computeBaseOffset``: offset - offset % fileSize), and it finds a byte's place
    in one at ``offset % fileSize``, where rmqtool's readers place it by the name."""
    return [seg for seg in log.segments if seg.base_offset % seg.size]


def list_log(directory: str | os.PathLike, segment_size: int) -> LogDirectory:
    """The segments of one log directory, as ``LogManager.loadLogs`` sees them."""
    directory = pathlib.Path(directory)
    segments, skipped, unparsable = [], [], []
    if directory.is_dir():
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            path = pathlib.Path(entry.path)
            if entry.name.startswith("."):
                skipped.append(path)
                continue
            try:
                base = java_parse(entry.name)
            except NumberFormatError:
                unparsable.append(path)
                continue
            if entry.is_file():
                segments.append(LogSegment(path, base, segment_size, entry.stat().st_size))
            else:  # RandomAccessFile fails on a directory: LogManager logs it and goes on
                skipped.append(path)
    segments.sort(key=lambda s: s.base_offset)
    return LogDirectory(directory, tuple(segments), tuple(skipped), tuple(unparsable))


def directory_refusal(directory: str | os.PathLike) -> str | None:
    """``LogManager.createAndValidateLogDir``: the message of the RuntimeException it throws for
    this log directory, or None where QMQ goes on (the directory is there, or it makes it).

    A subject names its consumer log's directory, so a damaged subject can name one no file
    system takes: a NUL in it (``File.toPath`` throws InvalidPathException), a name longer
    than the file system allows, or a path through a file. Permissions are not judged: they
    are the broker's user's, and this tool runs as another."""
    directory = pathlib.Path(directory)
    shown = os.path.abspath(os.fspath(directory).replace("\0", "?"))
    if "\0" in os.fspath(directory):  # File.exists() is false for it; toPath() throws
        return f"Failed to create log directory {shown}"
    try:
        st = os.stat(directory)
    except OSError as exc:  # File.exists() is false: createDirectories is tried
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG):
            return None if _creatable(directory) else f"Failed to create log directory {shown}"
        return None  # this tool may not look (a permission): the reads that follow say so
    if not stat.S_ISDIR(st.st_mode):
        return f"{shown} is not a readable log directory"
    return None


def _creatable(directory: pathlib.Path) -> bool:
    """Whether ``Files.createDirectories`` can make the missing names of ``directory``: each
    fits the file system's name length, and the nearest one there is a directory."""
    missing = []
    there = directory
    while not os.path.lexists(there):
        missing.append(there.name)
        if there.parent == there:
            break
        there = there.parent
    if not there.is_dir():
        return False
    try:
        longest = os.pathconf(there, "PC_NAME_MAX")
    except (OSError, ValueError):
        longest = 255
    return all(len(os.fsencode(name)) <= longest for name in missing)


def read_zero_extended(segment: LogSegment, position: int = 0, length: int | None = None) -> bytes:
    """Bytes of a segment as QMQ maps it: past the file's end, zeros up to the segment size."""
    end = segment.size if length is None else min(segment.size, position + length)
    if position >= end:
        return b""
    with open(segment.path, "rb") as f:
        f.seek(position)
        data = f.read(max(0, min(end, segment.file_size) - position))
    return data + bytes(end - position - len(data))


_ZEROS = bytes(1 << 20)  # what crc32_zero_extended feeds for the zeros past the data, a piece at a time


def crc32_zero_extended(data, at: int, n: int, zeros_from: int | None = None) -> int:
    """The CRC-32 of ``n`` bytes of ``data`` (a buffer, a mapping) from ``at``, zeros past its
    end, as QMQ reads a segment mapped at full size; without copying them: a damaged size can
    claim most of a 1 GiB segment, and a copy of it once took 780 MB. ``zeros_from``: where
    ``data`` holds only zeros on (a file's trailing hole): those are not read either (read
    through the mapping, a hole's pages filled the page cache, 600 MB of them)."""
    held = len(data) if zeros_from is None else min(len(data), zeros_from)  # the bytes that are read
    end = min(at + n, held)
    crc = 0
    if end > at:
        with memoryview(data) as view, view[at:end] as piece:  # released before the mapping closes
            crc = zlib.crc32(piece)
    for left in range(n - max(end - at, 0), 0, -len(_ZEROS)):
        crc = zlib.crc32(_ZEROS[:left] if left < len(_ZEROS) else _ZEROS, crc)
    return crc


class ZeroExtended:
    """A segment's bytes as QMQ maps them, without reading the file into memory: the file's
    bytes (mapped), then zeros up to the segment's size. ``written`` is the length without
    its trailing zeros: where the written data ends, found from the back in chunks."""

    CHUNK = 1 << 20

    def __init__(self, segment: LogSegment):
        self.segment = segment
        self._file = open(segment.path, "rb")
        size = os.fstat(self._file.fileno()).st_size
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        self.file_size = size
        self._released = 0  # the pages before it were released
        self.written = self._written()

    def _written(self) -> int:
        if not self.file_size:
            return 0
        last = last_nonzero(self._file.fileno(), 0, self.file_size, lambda at, n: self._map[at:at + n], self.CHUNK,
                            self.segment.path)
        return last or 0

    def take(self, position: int, length: int) -> bytes:
        """``length`` bytes at ``position`` (zeros past the file, none past the segment)."""
        end = min(position + length, self.segment.size)
        piece = self._map[position:min(end, self.file_size)] if position < self.file_size else b""
        return piece.ljust(max(end - position, 0), b"\0")  # one copy: the zeros are not made apart first

    def crc32(self, position: int, length: int) -> int:
        """The CRC-32 of what ``take`` gives, without taking it."""
        length = max(min(position + length, self.segment.size) - position, 0)
        return crc32_zero_extended(self._map if self.file_size else b"", position, length, self.written)

    @property
    def mapped(self):
        """The file's bytes as mapped (no zeros after them): the kernel walks them directly."""
        return self._map

    def will_read(self) -> None:
        """Say the written bytes are about to be read whole (verify's and the start simulation's
        passes): ``MADV_WILLNEED`` lets the OS read them ahead."""
        if self.file_size and self.written and hasattr(mmap, "MADV_WILLNEED"):
            self._map.madvise(mmap.MADV_WILLNEED, 0, self.written)

    def release(self, end: int) -> None:
        """Say the mapped bytes before ``end`` are read: their pages leave this process's
        resident set (``MADV_DONTNEED``; the mapping is the file's, read-only, so a later read
        maps them again from the page cache)."""
        end -= end % mmap.PAGESIZE
        if end > self._released and hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED, self._released, end - self._released)
            self._released = end

    def find(self, needle: bytes, start: int, end: int | None = None) -> int:
        """Where ``needle`` first begins in ``[start, end)`` of the written bytes, -1 if nowhere.
        Only the file's data extents are searched (a needle may run on into the zeros after one):
        a hole of hundreds of MB before a stray byte is skipped unread, where a search through the
        map filled a page-cache page for every page of it (600 MB of resident set)."""
        if not self.file_size:
            return -1
        end = self.written if end is None else end
        for lo, hi in data_extents(self._file.fileno(), start, end, self.segment.path):
            at = self._map.find(needle, lo, min(hi + len(needle) - 1, end))
            if at != -1:
                return at
        return -1

    def close(self) -> None:
        if self.file_size:
            self._map.close()
        self._file.close()

    def __enter__(self) -> "ZeroExtended":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
