"""QMQ's ``LogManager`` as a start builds it: check (or make) the directory, load it, then ``recover()``.

``loadLogs`` skips names starting with ``.``; every other name goes to ``Long.parseLong`` in
the ``LogSegment`` constructor, and a name it refuses throws out of ``new DefaultStorage``
(the start is refused). An entry that parses but cannot be opened (a directory) throws an
``IOException`` that ``loadLogs`` catches: it is skipped. Every segment starts written to its
full size; ``recover()`` runs the log's validator on the last two segments only, sets the
written position where the first incomplete one ends and deletes the segments after it.
"""
from __future__ import annotations

import dataclasses
import mmap
import pathlib
from typing import Callable

from rmqtool.recovery.qmq.javabuf import JavaException, int32, java_mod
from rmqtool.store.extents import data_end
from rmqtool.store.qmq.segments import directory_refusal, list_log


@dataclasses.dataclass(slots=True)
class Segment:
    """A ``LogSegment``: its file, base offset, size (the log's constant) and written position."""
    path: pathlib.Path
    base_offset: int
    size: int
    data: bytes  # the file's bytes; the rest of the segment reads as zeros
    wrote: int
    data_end: int | None = None  # where the file's last data extent ends: a hole (zeros) after it

    @property
    def file_size(self) -> int:
        return len(self.data)


# validate(segment) -> (complete, validated size), as LogSegmentValidator.ValidateResult
Validator = Callable[[Segment], "tuple[bool, int]"]


def file_bytes(path: pathlib.Path) -> tuple[bytes, int]:
    """A file's bytes without copying a large file (a read-only mapping), and where its last
    data extent ends (the hole after it reads as zeros)."""
    size = path.stat().st_size
    if size == 0:
        return b"", 0
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), data_end(f.fileno(), size, path)


@dataclasses.dataclass(slots=True)
class Log:
    """A ``LogManager`` after its constructor: segments by base offset, what recover() did."""
    directory: pathlib.Path
    segment_size: int
    segments: dict[int, Segment]  # base offset -> segment, kept sorted
    deleted: list[Segment] = dataclasses.field(default_factory=list)  # removed by recover()
    skipped: list[pathlib.Path] = dataclasses.field(default_factory=list)  # entries loadLogs could not open
    recovered_offset: int | None = None  # where recover() ended the log; None when it had no segment

    def release(self) -> None:
        """Say the files' bytes read so far are done with: their mapped pages leave the resident
        set (``MADV_DONTNEED`` on the read-only mappings; a later read maps them again)."""
        for seg in self.segments.values():
            if isinstance(seg.data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
                seg.data.madvise(mmap.MADV_DONTNEED)

    def bases(self) -> list[int]:
        return sorted(self.segments)

    def latest(self) -> Segment | None:
        return self.segments[max(self.segments)] if self.segments else None

    def first(self) -> Segment | None:
        return self.segments[min(self.segments)] if self.segments else None

    def min_offset(self) -> int:
        first = self.first()
        return first.base_offset if first else 0

    def max_offset(self) -> int:
        latest = self.latest()
        return latest.base_offset + latest.wrote if latest else 0

    def locate(self, offset: int) -> Segment | None:
        """``LogManager.locateSegment``: the segment at a base offset, else the nearest one
        below the offset, even when the offset lies past that segment's end."""
        if offset % self.segment_size == 0:
            return self.segments.get(offset)
        lower = [b for b in self.segments if b < offset]
        return self.segments[max(lower)] if lower else None

    def alloc(self, base: int) -> Segment:
        # offset2FileName: at least 20 digits, after the sign (a wrapped offset is negative)
        seg = Segment(self.directory / f"{'-' if base < 0 else ''}{abs(base):020d}", base, self.segment_size, b"", 0)
        self.segments[base] = seg
        return seg

    def next_base(self) -> int:
        latest = self.latest()
        return latest.base_offset + self.segment_size if latest else 0

    def alloc_or_reset(self, expected_offset: int) -> Segment:
        """``LogManager.allocOrResetSegments``: a segment for an offset no segment holds;
        when it does not follow a full latest segment every segment is deleted first."""
        base = expected_offset - java_mod(expected_offset, self.segment_size)
        latest = self.latest()
        if latest is None or (self.next_base() == base and latest.wrote == latest.size):
            return self.alloc(base)
        self.deleted.extend(self.segments.values())
        self.segments.clear()
        return self.alloc(base)


def load_log(directory: pathlib.Path, segment_size: int, validator: Validator) -> Log:
    """``new LogManager(dir, fileSize, validator)``: load, then recover. Raises
    ``JavaException`` where the constructor throws."""
    refusal = directory_refusal(directory)  # createAndValidateLogDir
    if refusal is not None:
        raise JavaException("java.lang.RuntimeException", refusal, str(directory))
    log = Log(directory, segment_size, {})
    listed = list_log(directory, segment_size)  # store/qmq's one reading of loadLogs' names
    if listed.unparsable:  # the first in name order (File.listFiles' order is the file system's)
        path = listed.unparsable[0]
        raise JavaException("java.lang.NumberFormatException", f'For input string: "{path.name}"', str(path))
    log.skipped.extend(p for p in listed.skipped if not p.name.startswith("."))  # directories: IOException, skipped
    for seg in listed.segments:
        data, end = file_bytes(seg.path)
        log.segments[seg.base_offset] = Segment(seg.path, seg.base_offset, segment_size, data, segment_size, end)
    _recover(log, validator)
    return log


def _recover(log: Log, validator: Validator) -> None:
    bases = log.bases()
    if not bases:
        return
    offset = -1
    for base in bases[-2:]:
        seg = log.segments[base]
        complete, validated = validator(seg)
        offset = base + validated
        if complete:
            seg.wrote = seg.size
        else:
            break
    log.recovered_offset = offset
    latest = log.latest()
    if latest.base_offset + latest.size == offset:  # LogManager compares with the file size
        return
    seg = log.locate(offset)
    if seg is None:
        return
    seg.wrote = int32(java_mod(offset, log.segment_size))
    if seg.base_offset != latest.base_offset:
        for base in log.bases():
            if len(log.segments) <= 1:
                break
            if base > offset:
                log.deleted.append(log.segments.pop(base))
