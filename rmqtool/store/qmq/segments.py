"""QMQ's log directories: fixed-size segments named by the offset of their first byte.

Mirrors ``LogManager.loadLogs`` and the ``LogSegment`` constructor (qmq-store 5abc92f4):
a name starting with ``.`` is skipped (the message log's ``.offset`` files); every other
name goes to ``Long.parseLong``, and one that is not a number stops the broker's start.
The segment size is a constant of each log (``formats/qmq``), not a setting: every
segment is mapped at that size, so a shorter file reads as zero-extended.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

from rmqtool.formats.qmq.java import NumberFormatError, java_parse


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
    skipped: tuple[pathlib.Path, ...]  # names starting with "." (LogManager skips them)
    unparsable: tuple[pathlib.Path, ...]  # names Long.parseLong refuses: the broker does not start

    def locate(self, offset: int) -> LogSegment | None:
        """``LogManager.locateSegment``: the segment whose range holds ``offset``."""
        for seg in reversed(self.segments):
            if seg.base_offset <= offset:
                return seg if offset < seg.end_offset else None
        return None


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
            else:
                unparsable.append(path)  # RandomAccessFile on a directory fails: not a segment
    segments.sort(key=lambda s: s.base_offset)
    return LogDirectory(directory, tuple(segments), tuple(skipped), tuple(unparsable))


def read_zero_extended(segment: LogSegment, position: int = 0, length: int | None = None) -> bytes:
    """Bytes of a segment as QMQ maps it: past the file's end, zeros up to the segment size."""
    end = segment.size if length is None else min(segment.size, position + length)
    if position >= end:
        return b""
    with open(segment.path, "rb") as f:
        f.seek(position)
        data = f.read(max(0, min(end, segment.file_size) - position))
    return data + bytes(end - position - len(data))
