"""The commit log directory: where the written commit log ends, which segment is the last
written, which segments a scan reads, and :class:`CommitLog`, the directory read through them.

Every reader and the engine take these answers from here, so they agree:

* :func:`last_written`: the broker makes the next segment ahead (AllocateMappedFileService),
  so a store often ends with segments that start with zeros and were never used; the last
  written segment is the last one that does not.
* :func:`segment_ranges`: the segments a scan of [from_offset, to_offset) reads, with the
  byte range of each and whether it may end without a blank record (the last written one
  and those after it).
* :func:`written_end`: the **written end**, one past the last record written (damage
  skipped by resync).
* :func:`last_file_end`: where the last written file's good records end, read from its
  start and stopped by the first record that fails (recoverNormally's walk over that one
  file): the append position (MappedFile.wrotePosition) the engine continues from and a
  live store is read up to, and the store host of its last message. It is the written end
  when the last file holds no damage, and the recovered end of a cleanly shut-down store. The other end an operator needs, the **recovered end** (where the
  broker's next start ends the log, its getMaxPhyOffset afterwards), depends on the start
  file, the checkpoint and the broker version: ``recovery/outcome.py`` simulates it
  (``Outcome.recovered_end``); the two differ when damage lies before the written end.

Reading follows the written data, not the file size: holes of sparse files are skipped
(SEEK_DATA) and zeros are compared a window at a time. Nothing here writes.
"""
from __future__ import annotations

import dataclasses
import itertools
import os
import pathlib
from typing import Iterator

from rmqtool.errors import StoreAccessError
from rmqtool.findings import Finding
from rmqtool.store.commitlog import Blank, CrcTally, ScanResult, _FileWindow, crc_scan, scan_segment
from rmqtool.store.message import RECORD_START, Message
from rmqtool.store.segments import Segment, SegmentQueue, discover, seen_once

_HEADER = 8  # totalSize and magicCode: a segment whose first 8 bytes are zero holds no record


@dataclasses.dataclass
class CommitLogEnd:
    """Where the commit log ends, and what lies after that end."""
    end: int  # next write offset (getMaxPhyOffset)
    segment_base: int | None  # the segment the end lies in (None: a new one is needed)
    wrote_position: int
    damaged_at: tuple | None = None  # (path, position) of bytes after the end that are not zero
    extra_segments: tuple = ()  # segments after the end (made ahead, or garbage)
    store_host: tuple | None = None  # (ip bytes, port) of the last message
    last_written: int = -1  # index of the last written segment; -1 when none is
    last_message: Message | None = None  # the last good record before the end
    stopped_by: ScanResult | None = None  # what ended the walk before the data did (damage), if anything


def first_bytes(path: pathlib.Path, n: int, position: int = 0) -> bytes:
    """Up to ``n`` bytes of a file from ``position`` (fewer at its end)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise StoreAccessError(f"cannot open ({exc.strerror})", path) from None
    try:
        return os.pread(fd, n, position)
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", path, position or None) from None
    finally:
        os.close(fd)


def all_zero_from(path: pathlib.Path, position: int) -> int | None:
    """None when the file holds only zeros from ``position`` on, else the first non-zero position."""
    return _zero_check(path, position, _FileWindow.first_nonzero)


def last_nonzero_from(path: pathlib.Path, position: int = 0) -> int | None:
    """Just past the last non-zero byte of a file from ``position`` on; None when all zero
    (holes skipped unread: a file made ahead and barely written costs its data only)."""
    return _zero_check(path, position, _FileWindow.last_nonzero)


def _zero_check(path: pathlib.Path, position: int, check) -> int | None:
    # a pass that writes nothing asks a queue file's end from several sides: found once there
    return seen_once((check.__name__, os.fspath(path), position), lambda: _look(path, position, check))


def _look(path: pathlib.Path, position: int, check) -> int | None:
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise StoreAccessError(f"cannot open ({exc.strerror})", path) from None
    window = _FileWindow(str(path), size)
    try:
        return check(window, position)
    finally:
        window.close()


def last_written(segments: list[Segment]) -> int:
    """Index of the last segment holding any record; -1 if none does.

    A segment whose first 8 bytes are zero was made ahead and never written (a record
    always starts a segment). A segment the OS refuses to read counts as written, so the
    scan that reads it reports why.
    """
    for i in range(len(segments) - 1, -1, -1):
        seg = segments[i]
        if seg.size == 0:
            continue
        try:
            head = first_bytes(seg.path, _HEADER)
        except StoreAccessError:
            return i
        if head != bytes(len(head)):
            return i
    return -1


@dataclasses.dataclass(frozen=True, slots=True)
class SegmentRange:
    """One segment's share of a commit log scan."""
    segment: Segment
    index: int  # place of the segment in the commit log
    is_last: bool  # the last written segment or one after it: it may end without a blank record
    start: int = 0  # byte position the scan starts at (a record start is found from there)
    end: int | None = None  # byte position the scan ends at (None: the file end)


def segment_ranges(segments: list[Segment], from_offset: int | None = None,
                   to_offset: int | None = None, *, last: int | None = None) -> list[SegmentRange]:
    """The segments a scan of commit log offsets [from_offset, to_offset) reads, in order.
    ``last``: the last written segment's index when the caller knows it (files read elsewhere)."""
    last = last_written(segments) if last is None else last
    out = []
    for n, seg in enumerate(segments):
        if from_offset is not None and seg.base_offset + seg.size <= from_offset:
            continue
        if to_offset is not None and seg.base_offset >= to_offset:
            break
        start = from_offset - seg.base_offset if from_offset is not None and from_offset > seg.base_offset else 0
        end = to_offset - seg.base_offset if to_offset is not None and to_offset < seg.base_offset + seg.size \
            else None
        out.append(SegmentRange(seg, n, n >= last, start, end))
    return out


def segment_end(base_offset: int, end_position: int, full: bool, mapped_file_size: int) -> int:
    """The commit log offset after a segment's last record: its next segment's start when it
    ends with a valid blank record (the broker rolls to the next file), else base + end."""
    return base_offset + (mapped_file_size if full else end_position)


def written_end(segments: list[Segment], mapped_file_size: int | None = None, *,
                resume_at: int | None = None) -> int:
    """The written end: one past the last record (a message, its CRC good or not, or a blank
    record) the one scanner reads back, damaged regions skipped by its resync: in the last
    written segment, or where it holds no whole record (its first one torn), the one before
    that holds one; the first segment's start when no segment holds a record.

    ``resume_at``: a record start in the last written segment before which every record was
    read already (the end is at least there)."""
    if not segments:
        return 0
    last = last_written(segments)
    for i in range(last, -1, -1):
        seg = segments[i]
        start = (resume_at or 0) if i == last else 0
        end, full, found = start, False, start > 0
        for r in scan_segment(seg, is_last=i == last, check_crc=False, start=start):
            if isinstance(r, (Message, Blank)):
                end = r.position + (r.store_size if isinstance(r, Message) else r.size)
                full, found = isinstance(r, Blank) and r.valid, True
        if found:
            return segment_end(seg.base_offset, end, full, mapped_file_size or seg.size)
    return segments[0].base_offset


def last_file_end(segments: list[Segment], mapped_file_size: int | None = None, *,
                        check_crc: bool = False, resume_at: int | None = None) -> CommitLogEnd:
    """Where the last written file's good records end: the append position, as the broker's
    recovery walk (CommitLog.recoverNormally) over that one file finds it.

    The last written segment is read record by record with the one scanner (its lengths
    checked as checkMessageAndReturnSize does; with ``check_crc`` also each body CRC, as
    abnormal recovery does). The end is after the last good record, or the next segment's
    start when the segment ends with a valid blank record. Trailing segments made ahead
    and never used, and anything after the end, are reported, never changed here.

    ``resume_at``: a record start in the last written segment before which every record
    was read already (recovery's walk read them): the scan goes on from there, and
    ``last_message`` is None when no record follows it.
    """
    if not segments:
        return CommitLogEnd(0, None, 0)
    last = last_written(segments)
    tail = segments[max(last, 0)]
    last_message = stopped_by = None
    full = False
    start = resume_at or 0
    if resume_at is None and not check_crc:  # the clean records up to the last one are read once, as arrays
        start = _clean_prefix_resume(tail)
    for r in scan_segment(tail, is_last=True, check_crc=check_crc, start=start):
        if isinstance(r, Message):
            if check_crc and r.body_crc_ok is False:
                stopped_by = r
                break
            last_message = r
        elif isinstance(r, Blank) and r.valid:
            full = True
            break
        else:
            stopped_by = r
            break
    end_pos = last_message.position + last_message.store_size if last_message is not None else resume_at or 0
    damaged = None
    if not full:
        nonzero = all_zero_from(tail.path, end_pos)
        if nonzero is not None:
            damaged = (tail.path, nonzero)
    later = segments[max(last, 0) + 1:]
    if full:
        nxt = segment_end(tail.base_offset, end_pos, True, mapped_file_size or tail.size)
        if later and later[0].base_offset == nxt:
            result = CommitLogEnd(nxt, nxt, 0, damaged, tuple(later[1:]))
        else:
            result = CommitLogEnd(nxt, None, 0, damaged, tuple(later))
    else:
        result = CommitLogEnd(tail.base_offset + end_pos, tail.base_offset, end_pos, damaged, tuple(later))
    result.last_written = last
    result.last_message = last_message
    result.stopped_by = stopped_by
    if last_message is not None:
        result.store_host = (bytes(last_message.store_ip), last_message.store_port)
    return result


_PREFIX_WINDOW = 8 << 20  # the clean-prefix walk's largest read: numpy's per-call cost spread over ~7k records
_PREFIX_FIRST_WINDOW = 64 << 10  # its first: a sparse file holding a few records costs kilobytes


def _clean_prefix_resume(tail: Segment) -> int:
    """Where :func:`last_file_end`'s walk (without CRCs) can start and give the same answer: the
    last record of the clean chain from the file's start (the one kernel's rule,
    store/record_kernel.clean_records, a window at a time) whose physicalOffset names its place,
    so the scan starts exactly there (a record that proves itself); every record before it
    is a message the scan reads whole. 0 when there is none."""
    import numpy as np  # loaded when the end is looked for

    from rmqtool.formats.commitlog import MESSAGE_MAGIC_CODES
    from rmqtool.store.record_kernel import clean_records
    window = _FileWindow(str(tail.path), tail.size)
    resume = pos = 0
    size = _PREFIX_FIRST_WINDOW
    try:
        while pos < tail.size:
            buf = window.pread(pos, size)
            records = clean_records(buf, 0, len(buf))
            if not len(records):
                break
            proven = np.flatnonzero(records.header["physical_offset"] == tail.base_offset + pos + records.position)
            if len(proven):
                resume = pos + int(records.position[proven[-1]])
            at = int(records.end[-1])
            if records.refusal is not None or len(buf) - at < _HEADER:
                break  # a record the rule refuses, or the file's end: the scan reads on from resume
            total, magic = RECORD_START.unpack_from(buf, at)
            if magic not in MESSAGE_MAGIC_CODES or at + total <= len(buf):
                break  # not a message, or one the chain did not take: the scan says what
            pos += at  # a record going on past the window: read on from it
            size = max(min(size * 2, _PREFIX_WINDOW), total)
    finally:
        window.close()
    return resume


class CommitLog:
    """The commit log directory of a store, read-only."""

    def __init__(self, directory: str | os.PathLike, mapped_file_size: int | None = None):
        self.queue: SegmentQueue = discover(directory, mapped_file_size=mapped_file_size)

    @classmethod
    def of_queue(cls, queue: SegmentQueue) -> "CommitLog":
        """The commit log of a directory listed already (not listed again)."""
        log = cls.__new__(cls)
        log.queue = queue
        return log

    @property
    def directory(self) -> pathlib.Path:
        return self.queue.directory

    @property
    def segments(self) -> list[Segment]:
        return self.queue.segments

    @property
    def mapped_file_size(self) -> int | None:
        return self.queue.mapped_file_size

    @property
    def findings(self) -> list[Finding]:
        return self.queue.findings

    def scan(self, from_offset: int | None = None, to_offset: int | None = None, *, check_crc: bool = True,
             findings: list | None = None, needle: bytes | None = None,
             zeros_end: bool = False) -> Iterator[ScanResult]:
        """Every record from ``from_offset`` up to ``to_offset``, in order: the one scanner over
        each segment's share (:func:`segment_ranges`)."""
        return itertools.chain.from_iterable(
            scan_segment(r.segment, is_last=r.is_last, start=r.start, end=r.end, check_crc=check_crc,
                         findings=findings, needle=needle, zeros_end=zeros_end)
            for r in segment_ranges(self.segments, from_offset, to_offset))

    def crc_scan(self, from_offset: int | None = None, to_offset: int | None = None, *,
                 findings: list | None = None, tally: CrcTally | None = None) -> Iterator[ScanResult]:
        """As :meth:`scan` with check_crc, without the messages whose CRCs hold: see :func:`crc_scan`."""
        if tally is None:
            tally = CrcTally()
        return itertools.chain.from_iterable(
            crc_scan(r.segment, is_last=r.is_last, start=r.start, end=r.end, findings=findings, tally=tally)
            for r in segment_ranges(self.segments, from_offset, to_offset))

    def max_offset(self) -> int | None:
        """getMaxPhyOffset of a store the broker could append to: the append position
        (:func:`last_file_end`); None without segments."""
        return last_file_end(self.segments, self.mapped_file_size).end if self.segments else None
