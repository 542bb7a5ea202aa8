"""The read side of the broker's MappedFileQueue: a directory of fixed-size segments.

Each segment is named by the offset of its first byte (20 digits). The mapped file size
is not assumed: it is inferred from the files (the distance between consecutive names,
else the largest file), because stores run with many sizes. Discovery never writes.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import pathlib
import threading

from rmqtool.errors import NotAStore, StoreAccessError, StoreNotFound
from rmqtool.findings import (SEGMENT_EMPTY, SEGMENT_GAP, SEGMENT_NAME_INVALID, SEGMENT_OVERLAP,
                              SEGMENT_SIZE_ODD, SEGMENT_UNREADABLE, Finding)
from rmqtool.store.paths import LONG_MAX, is_segment_name
from rmqtool.store.small_file import not_a_file


@dataclasses.dataclass(slots=True, frozen=True)
class Segment:
    path: pathlib.Path
    base_offset: int  # offset of the segment's first byte, from its name
    size: int  # bytes on disk now

    @property
    def name(self) -> str:
        return self.path.name


@dataclasses.dataclass(slots=True)
class SegmentQueue:
    directory: pathlib.Path
    segments: list[Segment]
    mapped_file_size: int | None
    findings: list[Finding]
    # a commit log kept in several directories (store/commitlog_paths.py): all of them; () for one
    directories: tuple = ()

    @property
    def min_offset(self) -> int | None:
        return self.segments[0].base_offset if self.segments else None

    def find(self, offset: int) -> Segment | None:
        """The segment holding an offset, as findMappedFileByOffset does (by name and size)."""
        lo, hi = 0, len(self.segments) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            seg = self.segments[mid]
            end = seg.base_offset + max(seg.size, self.mapped_file_size or 0)
            if offset < seg.base_offset:
                hi = mid - 1
            elif offset >= end:
                lo = mid + 1
            else:
                return seg
        return None


def infer_mapped_file_size(segments: list[Segment]) -> int | None:
    """The store's mapped file size, from the files.

    Two witnesses: the distance between consecutive names, and the file sizes. A missing
    file fools the first, a truncated one the second; a size shared by two or more files
    wins, else the largest file when every distance is a whole number of it (files missing
    between), else the most common distance, else the largest file.
    """
    if not segments:
        return None
    sizes = collections.Counter(s.size for s in segments if s.size > 0)
    if sizes:
        size, count = sizes.most_common(1)[0]
        if count >= 2:
            return size
    steps = collections.Counter(
        b.base_offset - a.base_offset for a, b in zip(segments, segments[1:]) if b.base_offset > a.base_offset)
    largest = max(sizes, default=0)
    if largest and steps and all(step % largest == 0 for step in steps):
        return largest
    if steps:
        return steps.most_common(1)[0][0]
    return max(s.size for s in segments) or None


class _Listings(threading.local):
    """What :func:`one_listing` keeps: what each directory and file was first seen to hold."""
    depth = 0
    kept: dict | None = None


_listings = _Listings()


@contextlib.contextmanager
def one_listing():
    """Within the block, each directory is listed once, and each file's data end found once
    (:func:`seen_once`): a pass that looks at every queue from several sides (a start's
    simulation, check, report) lists a store of thousands of queue directories once instead
    of eight times, and sees one listing throughout. Only around work that writes nothing: a
    listing kept across a write would miss what it made. Blocks nest; what was kept goes
    when the outermost ends."""
    if _listings.depth == 0:
        _listings.kept = {}
    _listings.depth += 1
    try:
        yield
    finally:
        _listings.depth -= 1
        if _listings.depth == 0:
            _listings.kept = None


def seen_once(key: tuple, look):
    """``look()``, once for ``key`` within :func:`one_listing`; outside one, every call."""
    kept = _listings.kept
    if kept is None:
        return look()
    if key not in kept:
        kept[key] = look()
    return kept[key]


def list_dir(directory: str | os.PathLike) -> list[os.DirEntry]:
    """A directory's entries sorted by name; the OS refusing becomes a one-line StoreAccessError."""
    return list(seen_once(("entries", os.fspath(directory)), lambda: _scan_dir(directory)))


def _scan_dir(directory: str | os.PathLike) -> list[os.DirEntry]:
    try:
        return sorted(os.scandir(directory), key=lambda e: e.name)
    except PermissionError:
        raise StoreAccessError("permission denied", directory) from None
    except OSError as exc:
        raise StoreAccessError(f"cannot list directory ({exc.strerror})", directory) from None


def discover(directory: str | os.PathLike, *, required: bool = True,
             mapped_file_size: int | None = None) -> SegmentQueue:
    """List a segment directory: segments sorted by offset, the inferred size, and findings."""
    directory = pathlib.Path(directory)
    findings: list[Finding] = []
    if not directory.exists():
        if required:
            raise StoreNotFound("no such directory", directory)
        return SegmentQueue(directory, [], mapped_file_size, findings)
    if not directory.is_dir():
        raise NotAStore("not a directory", directory)
    segments = list_segments(directory, findings)
    size = mapped_file_size or infer_mapped_file_size(segments)
    check_sequence(segments, size, findings)
    return SegmentQueue(directory, segments, size, findings)


def list_segments(directory: pathlib.Path, findings: list[Finding]) -> list[Segment]:
    """The segment files of one directory, sorted by offset; what is no segment a finding."""
    segments, found = seen_once(("segments", os.fspath(directory)), lambda: _list_segments(directory))
    findings += found
    return list(segments)


def _what_is(entry: os.DirEntry) -> str:
    """What a directory entry that is no regular file is, in a few words."""
    try:
        mode = os.stat(entry.path).st_mode
    except OSError:
        return "a symbolic link to nothing" if entry.is_symlink() else "an entry that cannot be read"
    return not_a_file(mode) or "no regular file"


def _list_segments(directory: pathlib.Path) -> tuple[list[Segment], list[Finding]]:
    findings: list[Finding] = []
    segments = []
    for entry in list_dir(directory):
        if not is_segment_name(entry.name):
            findings.append(Finding(SEGMENT_NAME_INVALID, entry.path, None,
                                    "not a segment file (its name is not 20 digits of an offset a Java long "
                                    "holds); ignored"))
            continue
        if not entry.is_file(follow_symlinks=True):  # a segment's name on no file of bytes
            findings.append(Finding(SEGMENT_NAME_INVALID, entry.path, None,
                                    f"{_what_is(entry)} under a segment's name, not a segment file; ignored"))
            continue
        try:
            size = entry.stat().st_size
        except OSError as exc:
            findings.append(Finding(SEGMENT_UNREADABLE, entry.path, None, f"cannot stat ({exc.strerror})"))
            continue
        if int(entry.name) + size > LONG_MAX:  # no offset in it is a Java long: nothing can address it
            findings.append(Finding(SEGMENT_NAME_INVALID, entry.path, None,
                                    f"its {size} bytes from offset {entry.name} pass the largest offset a Java "
                                    f"long holds ({LONG_MAX}); ignored"))
            continue
        segments.append(Segment(pathlib.Path(entry.path), int(entry.name), size))
    segments.sort(key=lambda s: s.base_offset)
    return segments, findings


def check_sequence(segments: list[Segment], size: int | None, findings: list[Finding], where=None) -> None:
    """Sizes, gaps and overlaps of segments in offset order. ``where(base)``: words naming where
    a missing file belongs (a commit log over several directories)."""
    for i, seg in enumerate(segments):
        if seg.size == 0:
            findings.append(Finding(SEGMENT_EMPTY, str(seg.path), 0, "segment file is empty"))
        elif size and seg.size != size:
            findings.append(Finding(SEGMENT_SIZE_ODD, str(seg.path), None,
                                    f"size {seg.size} differs from the mapped file size {size}"))
        if i and size:
            prev = segments[i - 1]
            expected = prev.base_offset + size
            if seg.base_offset > expected:
                missing = ", ".join(f"{o:020d}" + (where(o) if where else "")
                                    for o in missing_bases(prev, seg, size)[:3])
                more = (seg.base_offset - expected) // size - 3
                missing += f" and {more} more" if more > 0 else ""
                findings.append(Finding(SEGMENT_GAP, str(seg.path), None,
                                        f"{missing} missing: a gap of {seg.base_offset - expected} bytes "
                                        f"between {prev.name} and {seg.path.name}"))
            elif seg.base_offset < expected:
                findings.append(Finding(SEGMENT_OVERLAP, str(seg.path), None,
                                        f"starts {expected - seg.base_offset} bytes inside {prev.name}"))


def missing_bases(prev: Segment, seg: Segment, size: int) -> range:
    """The base offsets of the files missing between two neighbours of a log of ``size``-byte
    files (empty when ``seg`` follows ``prev``)."""
    return range(prev.base_offset + size, seg.base_offset, size)
