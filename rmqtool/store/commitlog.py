"""Reading the commit log: segments scanned into located results.

Like ``CommitLog.checkMessageAndReturnSize``, every position yields one of three things:
a :class:`Message`, a :class:`Blank` (the end-of-file record), or a :class:`Corrupt`
region. Unlike the broker, the scan does not stop at damage: it looks for the next
record that proves itself (:func:`find_record`: its physicalOffset field names its own
position, or it is a blank record reaching exactly to the file end) and goes on from there.

This is the one scanner: dump, info, the query fallback, parallel scans, crc_scan and the
end of the commit log (``commitlog_end.py``) all read through :func:`scan_segment`. It
scans a byte range of a segment, and ranges cut anywhere add up to the whole scan, so a
segment can be split between processes. :func:`findings_of` says what a result reports.

Files are read with ``os.pread`` into a bounded window, so memory stays flat whatever
the store's size, and nothing is ever written. Holes of sparse files (a broker's segment
is created full size) are skipped with SEEK_DATA, so time follows the written data.

Speed (issue 2): the clean records of each window are found once by the kernel
(:func:`rmqtool.store.record_kernel.clean_records`), built into Messages in batches
(:func:`rmqtool.store.message.build_messages`) and handed out through ``itertools.chain``
rather than one generator switch per record; the careful path below takes over at the
first record the kernel does not take, and reads it by the same rule (on one record).

:func:`crc_scan` is the integrity check's scan: the same walk, but :func:`crc_run`
builds no Message for a record whose CRCs hold (the kernel's verdicts); it counts it and
yields only what is wrong (and blank records), through the same careful path.
"""
from __future__ import annotations

import dataclasses
import itertools
import mmap
import os
import struct

import construct as cs
from typing import Iterable, Iterator, Union

from rmqtool import native
from rmqtool.errors import StoreAccessError
from rmqtool.findings import (BLANK_RECORD_INVALID, BLANK_RECORD_MISSING, BODY_CRC_MISMATCH, Finding, finding,
                              PROPERTIES_INVALID_UTF8, PROPERTY_CRC_MISMATCH, RECORD_MAGIC_INVALID,
                              RECORD_OFFSET_MISMATCH, RECORD_SIZE_INVALID, RECORD_TRUNCATED,
                              TOPIC_INVALID_UTF8, TRAILING_GARBAGE)
from rmqtool.formats.commitlog import (BLANK_MAGIC_CODE, END_FILE_MIN_BLANK_LENGTH, MESSAGE_MAGIC_CODES,
                                       MIN_MESSAGE_LENGTH, PHYSICAL_OFFSET_AT, MessagePrefix)
from rmqtool.formats.derive import field_names, struct_of
from rmqtool.store import extents
from rmqtool.store.extents import next_extent
from rmqtool.store.segments import Segment
from rmqtool.store.message import RECORD_START, Message, RecordError, build_messages, decode_message

HOP = RECORD_START  # totalSize, magicCode: all a header-only hop needs
WINDOW = 1 << 20  # bytes read at once: small enough to stay in cache while records are decoded from it
# A scan's first read, doubled at each refill up to WINDOW: a short range (a lookup's one
# record, a range start being proved) costs a small read, a long scan soon reads WINDOW.
FIRST_WINDOW = 64 << 10
RUN_AHEAD = 4096  # bytes the window must hold past a position before a run of clean records starts
# Messages decoded ahead in one batch: small at first, so a caller that wants only the
# first record (read_message) does not pay for hundreds.
FIRST_BATCH = 4
MAX_BATCH = 256
_MAGIC_PATTERNS = tuple(m.to_bytes(4, "big") for m in (*MESSAGE_MAGIC_CODES, BLANK_MAGIC_CODE))
_PHYSICAL_OFFSET = struct_of(cs.Struct(MessagePrefix.subcons[field_names(MessagePrefix).index("physical_offset")]))


@dataclasses.dataclass(slots=True)
class Blank:
    """The end-of-file blank record: totalSize says how many bytes were left in the file."""
    offset: int
    size: int
    path: str
    position: int
    valid: bool = True  # False when totalSize is not the bytes left in the file


@dataclasses.dataclass(slots=True)
class Corrupt:
    """A region that holds no readable record."""
    offset: int
    size: int  # bytes skipped
    path: str
    position: int
    finding_id: str
    reason: str

    def finding(self) -> Finding:
        return finding(self.finding_id, self.path, self.position, f"{self.reason}; {self.size} bytes skipped",
                       commit_log_offset=self.offset, bytes_skipped=self.size)


ScanResult = Union[Message, Blank, Corrupt]
# a column scan's reads: numpy's per-call cost spread over ~3.5k records, and the window's several
# passes (chain, CRCs, topics, properties) still in cache: 8 MiB measured ~10% slower (2-6 MiB alike)
COLUMN_WINDOW = 4 << 20
# crc_scan's reads, into one reused buffer: the kernel's numpy calls a window spread over ~3k records
# (its good records become no objects, so nothing keeps the buffer)
CRC_WINDOW = 4 << 20
# ... and with the native kernel, whose crc_run takes a window in one C call, mapped instead: the
# CRCs read the page cache where the copy would have read and written every byte (16 MiB: fewer
# maps and unmaps than 4, measured 10% faster; 64 MiB gains 5% more but holds 4x the pages)
CRC_MAP = 16 << 20


@dataclasses.dataclass
class ColumnMode:
    """What a column scan (:func:`column_scan`) keeps between runs."""
    special_topics: frozenset = frozenset()
    topic_hashes: dict = dataclasses.field(default_factory=dict)
    hints: object = None  # commit log offsets where records are said to start, sorted, unique (speed only)


def findings_of(result: ScanResult) -> list[Finding]:
    """What one scan result reports, as registered findings with its file and position and,
    in their details, the record's commit log offset (and topic, queue, queue offset).

    A damaged region reports its own finding; an end-of-file blank record whose totalSize
    is not the bytes left reports blankRecordInvalid; a message reports each check that
    failed (CRCs, a physicalOffset field naming another place, bytes that are not UTF-8).
    A clean message or blank reports nothing.
    """
    if isinstance(result, Message):
        m = result
        if (m.body_crc_ok is not False and m.property_crc_ok is not False and m.topic_utf8_ok
                and m.physical_offset == m.commit_log_offset and m.properties_utf8_ok):
            return []
        where = {"commit_log_offset": m.commit_log_offset, "topic": m.topic, "queue_id": m.queue_id,
                 "queue_offset": m.queue_offset}
        out = []
        if m.body_crc_ok is False:
            out.append(finding(BODY_CRC_MISMATCH, m.path, m.position, f"the body CRC field {m.body_crc} does not "
                               f"match the body (message at commit log offset {m.commit_log_offset})", **where))
        if m.property_crc_ok is False:
            out.append(finding(PROPERTY_CRC_MISMATCH, m.path, m.position, "the __CRC32# property does not match "
                               f"the record (message at commit log offset {m.commit_log_offset})", **where))
        if m.physical_offset != m.commit_log_offset:
            out.append(finding(RECORD_OFFSET_MISMATCH, m.path, m.position,
                               f"physicalOffset field {m.physical_offset}, but the record lies at commit log "
                               f"offset {m.commit_log_offset}", **where))
        if not m.topic_utf8_ok:
            out.append(finding(TOPIC_INVALID_UTF8, m.path, m.position, "the topic bytes are not valid UTF-8",
                               **where))
        if not m.properties_utf8_ok:
            out.append(finding(PROPERTIES_INVALID_UTF8, m.path, m.position,
                               "the properties bytes are not valid UTF-8", **where))
        return out
    if isinstance(result, Blank):
        if result.valid:
            return []
        return [finding(BLANK_RECORD_INVALID, result.path, result.position,
                        f"end-of-file blank record whose totalSize {result.size} is not the bytes left "
                        f"in the file", commit_log_offset=result.offset)]
    return [result.finding()]


# The column scan's reused buffers, given back when their window closes: a fresh bytearray a band
# is zeroed (a memset of every byte) only to be read over; kept one a size, per process
_SPARES: dict = {}


class _FileWindow:
    """A read-only window over one file, refilled with pread as the scan moves."""

    def __init__(self, path: str, size: int, max_window: int = WINDOW, mapped: bool = False):
        self.path = path
        self.size = size
        self.max_window = max_window
        self.first_window = FIRST_WINDOW if max_window == WINDOW else max_window
        try:
            self.fd = os.open(path, os.O_RDONLY)
        except PermissionError:
            raise StoreAccessError("permission denied", path) from None
        except OSError as exc:
            raise StoreAccessError(f"cannot open ({exc.strerror})", path) from None
        self.buf = b""
        self.base = 0
        self.window = self.first_window
        # A column scan reads its big windows into one reused buffer: a fresh 16 MiB bytes
        # object a read costs page faults that take longer than the copy. Only reads without
        # a cap use it; a search (find_record) keeps reading bytes, which never change under it.
        self.spare = None  # made at the first read that can use it
        # ``mapped`` (the caller's choice, with the native kernel: its loops read only what they
        # need, where a copy of every byte would cost more than the loops): reads without a cap
        # map the window instead (mmap, no populate). Only inside the size the file has now, so
        # no page of the mapping lies past its end; a file cut shorter while mapped (nothing in a
        # stopped broker's store does that) would raise SIGBUS, which reads never risk.
        self.mapped = mapped and self._file_size() >= size

    def _file_size(self) -> int:
        try:
            return os.fstat(self.fd).st_size
        except OSError:
            return -1

    def _map(self, pos: int, want: int) -> tuple[mmap.mmap, int] | None:
        """[pos, pos + want) of the file mapped (from the page boundary before pos), and where the
        mapping starts; None when the file cannot be mapped (then it is read, from now on)."""
        at = pos - pos % mmap.ALLOCATIONGRANULARITY
        try:
            return mmap.mmap(self.fd, min(pos + want, self.size) - at, access=mmap.ACCESS_READ, offset=at), at
        except OSError:  # a file system without mmap: pread reads it the same
            self.mapped = False
            return None

    def close(self):
        self.buf = b""  # a mapping is unmapped when the last reference to it goes, never under a reader
        if self.spare is not None:  # for the next window of its size (results never hold it: copies)
            _SPARES.setdefault(len(self.spare), self.spare)
            self.spare = None
        os.close(self.fd)

    def get(self, pos: int, length: int, cap: int | None = None) -> tuple[bytes, int]:
        """(buffer, index of pos in it) covering [pos, pos + length), clipped to the file end;
        a refill reads at most ``cap`` bytes more than asked for."""
        length = min(length, self.size - pos)
        if pos < self.base or pos + length > self.base + len(self.buf):
            want = max(length, self.window if cap is None else min(self.window, cap))
            self.window = min(self.window * 2, self.max_window)
            mapping = self._map(pos, want) if cap is None and self.mapped and length > 0 else None
            try:
                if mapping is not None:
                    self.buf, pos_in = mapping
                elif cap is None and want == self.max_window > WINDOW and pos + want <= self.size:
                    if self.spare is None:
                        self.spare = _SPARES.pop(want, None) or bytearray(want)
                    got = os.preadv(self.fd, [self.spare], pos)
                    self.buf = self.spare if got == want else os.pread(self.fd, want, pos)  # short: a file cut under us
                    pos_in = pos
                else:
                    self.buf = os.pread(self.fd, want, pos)
                    pos_in = pos
            except OSError as exc:
                raise StoreAccessError(f"read failed ({exc.strerror})", self.path, pos) from None
            self.base = pos_in
            if len(self.buf) - (pos - pos_in) < length:  # the file was cut shorter while it was read
                raise StoreAccessError(f"the file is now {max(self._file_size(), 0)} bytes, shorter than the "
                                       f"{self.size} it had when listed: something cut it while it was read "
                                       f"(read it again once its writer has stopped)", self.path, pos)
        return self.buf, pos - self.base

    def pread(self, pos: int, length: int) -> bytes:
        """Bytes at ``pos``, read past the window (it stays where the scan left it)."""
        try:
            return os.pread(self.fd, length, pos)
        except OSError as exc:
            raise StoreAccessError(f"read failed ({exc.strerror})", self.path, pos) from None

    def data_from(self, pos: int) -> int | None:
        """The first position >= pos outside a hole of a sparse file; None when only a hole follows.

        A broker's segment is created full size and written from the front, so the unwritten
        rest is often a hole: it is skipped, not read (store/extents.py).
        """
        extent = next_extent(self.fd, pos, self.size, self.path)
        return None if extent is None else extent[0]

    def data_end(self, pos: int) -> int:
        """Where the data that ``pos`` lies in ends: the next hole, or the file end."""
        extent = next_extent(self.fd, pos, self.size, self.path)
        return self.size if extent is None else extent[1]

    def find_record(self, start: int, base_offset: int) -> int | None:
        """The first position >= start where a record proves itself, else None. Holes are skipped."""
        if start < self.size and self._proves_itself(start, base_offset):
            return start  # the common case: a range that starts at a record (no search)
        pos = start
        while pos < self.size:
            data = self.data_from(pos)
            if data is None:
                return None
            if data > pos:  # a header may begin in the zeros just before the data
                pos = max(start, data - HOP.size)
            # at least 9 bytes: it moves on; a search reads small windows even in a column scan
            n = min(WINDOW, self.data_end(data) - pos)
            buf, i = self.get(pos, n, WINDOW)
            base = self.base  # _proves_itself may move the window; buf stays this chunk
            if type(buf) is mmap.mmap:  # its find reads a byte past its end (CPython 3.11's fastsearch):
                buf, i, base = self.pread(pos, n), 0, pos  # at a mapping ending at the file's end, a SIGSEGV
            chunk_end = len(buf)
            best = None
            for pattern in _MAGIC_PATTERNS:
                # once a candidate proved itself, another magic code counts only before it: its
                # search stops there (not at the chunk's end, a megabyte on for a range's start)
                end = chunk_end if best is None else best - base + 3 + len(pattern)
                j = buf.find(pattern, i + 4, end)
                while j >= 0:
                    candidate = base + j - 4
                    if candidate >= start and self._proves_itself(candidate, base_offset):
                        if best is None or candidate < best:
                            best = candidate
                        break
                    j = buf.find(pattern, j + 1, end)
            if best is not None:
                return best
            if base + chunk_end >= self.size:
                return None
            # overlap: a header may straddle the chunk end; but always move on (a chunk that
            # ends within 8 bytes of pos, at the end of a data extent, would be read again)
            pos = max(base + chunk_end - 8, pos + 1)
        return None

    def _proves_itself(self, candidate: int, base_offset: int) -> bool:
        if candidate + 8 > self.size:
            return False
        buf, i = self.get(candidate, MIN_MESSAGE_LENGTH, WINDOW)
        total, magic = HOP.unpack_from(buf, i)
        if magic == BLANK_MAGIC_CODE:
            return total == self.size - candidate
        # a message magic code too, as the search's candidates have: a range must not start
        # at a record whose magic is damaged when the range before runs on through it
        if magic not in MESSAGE_MAGIC_CODES or total < MIN_MESSAGE_LENGTH or candidate + total > self.size \
                or len(buf) - i < PHYSICAL_OFFSET_AT + _PHYSICAL_OFFSET.size:
            return False
        (field,) = _PHYSICAL_OFFSET.unpack_from(buf, i + PHYSICAL_OFFSET_AT)
        return field == base_offset + candidate

    def first_nonzero(self, start: int) -> int | None:
        """The first position >= start holding a non-zero byte, or None if all zero (holes skipped)."""
        pos = start
        while pos < self.size:
            data = self.data_from(pos)
            if data is None:
                return None
            n = min(WINDOW, self.data_end(data) - data) or min(WINDOW, self.size - data)
            chunk = self.pread(data, n)
            if not chunk:
                return None
            if chunk != bytes(len(chunk)):
                return data + len(chunk) - len(chunk.lstrip(b"\x00"))  # only this window is stripped
            pos = data + len(chunk)
        return None

    def last_nonzero(self, start: int) -> int | None:
        """Position just past the last non-zero byte in [start, size), or None if all zero
        (store/extents.last_nonzero: holes unread, a window compared with zeros at a time)."""
        return extents.last_nonzero(self.fd, start, self.size, self.pread, WINDOW, self.path)


def find_record(segment: Segment, position: int) -> int | None:
    """The next position >= ``position`` in a segment where a record proves itself, else None.

    A record proves itself when its physicalOffset field names its own commit log offset,
    or, for an end-of-file blank record, when its totalSize reaches exactly to the file end.
    This is where a scan resynchronises after damage and where a byte range starts.
    """
    window = _FileWindow(str(segment.path), segment.size)
    try:
        return window.find_record(position, segment.base_offset)
    finally:
        window.close()


def scan_segment(segment: Segment, *, is_last: bool = True, start: int = 0, end: int | None = None,
                 end_offset: int | None = None, check_crc: bool = True, findings: list | None = None,
                 needle: bytes | None = None, zeros_end: bool = False, rows=None) -> Iterator[ScanResult]:
    """The damage-tolerant scan of the byte range [start, end) of one segment; yields located results.

    A whole scan (start 0, no end) reads every record from the file's first byte. A range
    gives exactly its share of that whole scan, so ranges cut anywhere add up to it, none
    twice, none missing: a range starting after byte 0 begins at the first record that
    proves itself at or after ``start`` (:func:`find_record`; the bytes before it belong to
    the range before), and goes on past ``end`` up to the first record that proves itself
    at or after ``end``. A damaged region is reported whole by the range it starts in.

    ``end_offset`` is ``end`` given as a commit log offset. ``is_last``: the segment is the
    last written one (or after it), so it may end without a blank record; otherwise a missing
    blank record goes to ``findings``. ``needle``: a prefilter for searches; records whose
    bytes do not hold it are hopped over by totalSize, not decoded, and may be left out.
    ``zeros_end``: a header of zeros ends the scan, as it ends the broker's recovery, without
    looking at what follows (a lookup past the index's end wants the written records, not a
    check of the rest of the file). ``rows``: a callable that takes each window's run of clean
    records instead, ``rows(buf, i, stop, offset0, position0, path) -> (index of the first
    record not taken, results)`` (dump's JSON Lines rows written natively: the results then
    hold its encoded rows beside Messages). The file is opened when the first result is asked for.
    """
    if end_offset is not None:
        end = end_offset - segment.base_offset if end is None else min(end, end_offset - segment.base_offset)
    return itertools.chain.from_iterable(_scan_pieces(segment, is_last, start, end, check_crc, findings,
                                                      needle=needle, zeros_end=zeros_end, rows=rows))


@dataclasses.dataclass(slots=True)
class CrcTally:
    """What crc_scan counted: every message record it read, its CRCs good or bad."""
    messages: int = 0
    message_bytes: int = 0


def crc_scan(segment: Segment, *, is_last: bool = True, start: int = 0, end: int | None = None,
             end_offset: int | None = None, findings: list | None = None,
             tally: CrcTally | None = None) -> Iterator[ScanResult]:
    """The integrity check's scan of one segment: ``scan_segment(check_crc=True)`` without the good messages.

    Yields what that scan yields, in order, except the messages whose body CRC and
    ``__CRC32#`` property CRC (when there is one) both hold: those are only counted, in
    ``tally``, with the failing ones. A message yielded is the one the full scan gives.
    """
    if tally is None:
        tally = CrcTally()
    if end_offset is not None:
        end = end_offset - segment.base_offset if end is None else min(end, end_offset - segment.base_offset)
    return itertools.chain.from_iterable(_scan_pieces(segment, is_last, start, end, True, findings, tally))


def column_scan(segment: Segment, mode: ColumnMode, *, is_last: bool = True, start: int = 0,
                end: int | None = None, end_offset: int | None = None,
                findings: list | None = None) -> Iterator:
    """``scan_segment(check_crc=True)`` with its plain messages as :class:`RecordColumns` blocks.

    Yields, in order, what that scan yields, except that each run of clean records comes
    as one block of their columns (``RecordColumns``) followed by the run's special records as Messages
    (:func:`rmqtool.store.record_columns.column_run`): a block's records and the Messages
    after it interleave by offset, nothing else does. For whole-store checks.
    """
    if end_offset is not None:
        end = end_offset - segment.base_offset if end is None else min(end, end_offset - segment.base_offset)
    return itertools.chain.from_iterable(_scan_pieces(segment, is_last, start, end, True, findings,
                                                      columns=mode))


def _failed(message: Message) -> bool:
    return message.body_crc_ok is False or message.property_crc_ok is False


def crc_run(buf: bytes, i: int, stop: int, offset0: int, position0: int, path: str | None,
            failures: list) -> tuple[int, int, int]:
    """Check the CRCs of the clean records of ``buf`` from index ``i`` on; (where it stopped, messages, their bytes).

    The records are the kernel's (:func:`rmqtool.store.record_kernel.clean_records`), their
    verdicts :func:`~rmqtool.store.record_kernel.crc_verdicts`; a record that fails is
    appended to ``failures`` decoded, as the full scan gives it.
    """
    from rmqtool.store.record_kernel import clean_records, crc_verdicts, good_crc_run  # numpy
    good = 0
    fast = good_crc_run(buf, i, stop)  # the native kernel: the run of good records in one pass
    if fast is not None:
        good, j = fast
        if j >= stop or j > len(buf) - HOP.size:  # it stopped where the records below would stop
            return j, good, j - i
    else:
        j = i
    records = clean_records(buf, j, stop)  # from the first record the kernel did not take
    if len(records):
        verdicts = crc_verdicts(buf, records)
        failed = ~verdicts.ok
        if failed.any():
            build_messages(buf, records.where(failed), offset0, position0, path, True, failures)
    return records.stop, good + len(records), records.stop - i


@dataclasses.dataclass
class _Scan:
    """What one scan of a segment keeps while it moves: its file, its mode, its batch size."""
    window: "_FileWindow"
    path: str
    base: int  # the segment's base offset
    check_crc: bool
    is_last: bool
    findings: list | None
    tally: CrcTally | None
    needle: bytes | None
    zeros_end: bool
    columns: ColumnMode | None
    rows: object = None  # scan_segment's ``rows``
    batch_size: int = FIRST_BATCH


def _scan_pieces(segment: Segment, is_last: bool, start: int, end: int | None, check_crc: bool,
                 findings: list | None, tally: CrcTally | None = None,
                 needle: bytes | None = None, zeros_end: bool = False,
                 columns: ColumnMode | None = None, rows=None) -> Iterator[Iterable[ScanResult]]:
    """scan_segment's results in pieces: batches of clean messages, and single results.

    With a ``tally`` (crc_scan), messages whose CRCs hold are counted there, not yielded.
    With ``columns`` (column_scan), clean records come as RecordColumns blocks. At each
    position a run of the kernel's clean records (:func:`_clean_run`) goes first; where it
    takes nothing, the careful path (:func:`_careful_step`) reads one record or one damaged region.
    """
    path = str(segment.path)
    # with the native kernel, crc_scan (which keeps nothing of a window) reads it mapped; a column scan
    # reads into its reused buffer: mapped, verify --jobs 2 peaked 12 MiB higher on 1 M messages, no faster
    mapped = tally is not None and native.kernel is not None
    window = _FileWindow(path, segment.size, COLUMN_WINDOW if columns is not None else CRC_MAP if mapped else
                         CRC_WINDOW if tally is not None else WINDOW, mapped=mapped)
    scan = _Scan(window, path, segment.base_offset, check_crc, is_last, findings, tally, needle, zeros_end, columns,
                 rows)
    size = segment.size
    try:
        if end is not None and end <= start:  # an empty range: no record starts in it
            return
        if start > 0:  # inside the file: from the first record that proves itself
            pos = window.find_record(start, scan.base)
            if pos is None:
                return
        else:
            pos = 0
        # records starting before ``limit`` are this range's; at ``end`` the limit moves on
        # to the first record that proves itself there (where the next range begins)
        limit = size if end is None or end >= size else max(end, 0)
        synced = limit == size
        while True:
            if pos >= limit:
                if synced:
                    return
                nxt = window.find_record(limit, scan.base)
                limit = size if nxt is None else nxt
                synced = True
                if pos >= limit:
                    return
            if size - pos < END_FILE_MIN_BLANK_LENGTH:
                yield _tail(window, pos, scan.base)
                return
            buf, i = window.get(pos, RUN_AHEAD)
            wbase = window.base
            j = yield from _clean_run(scan, buf, i, min(len(buf), limit - wbase), wbase)
            if j > i:
                pos = wbase + j
                continue
            pos = yield from _careful_step(scan, pos)
            if pos is None:
                return
    finally:
        window.close()


def _clean_run(scan: _Scan, buf, i: int, stop: int, wbase: int) -> Iterator[Iterable[ScanResult]]:
    """The kernel's clean records of ``buf`` from ``i`` (``wbase``: the file position of ``buf[0]``),
    as the scan's mode wants them; returns the index of the first record not taken."""
    offset0 = scan.base + wbase
    if scan.needle is not None:
        return _hop_to_needle(buf, i, stop, scan.needle)
    if scan.columns is not None:
        from rmqtool.store.record_columns import column_run  # numpy: only for the commands that want columns
        hints = scan.columns.hints
        if hints is not None:  # as indices in buf
            lo, hi = hints.searchsorted((offset0 + i, offset0 + stop))
            hints = hints[lo:hi] - offset0
        j, block, special = column_run(buf, i, stop, offset0, wbase, scan.columns.topic_hashes,
                                       scan.columns.special_topics, hints=hints)
        if j > i:
            piece: list = [block] if block is not None and len(block) else []
            for k in special:
                piece.append(decode_message(buf, k, offset0 + k, len(buf), check_crc=True, path=scan.path,
                                            file_position=wbase + k))
            yield piece
        return j
    if scan.rows is not None:
        j, piece = scan.rows(buf, i, stop, offset0, wbase, scan.path)
        if piece:
            yield piece
        return j
    if scan.tally is not None:
        failures: list = []
        j, count, length = crc_run(buf, i, stop, offset0, wbase, scan.path, failures)
        scan.tally.messages += count
        scan.tally.message_bytes += length
        if failures:
            yield failures
        return j if count else i
    from rmqtool.store.record_kernel import clean_records, crc_verdicts  # numpy: loaded when a scan runs
    records = clean_records(buf, i, stop)
    verdicts = crc_verdicts(buf, records) if scan.check_crc and len(records) else None  # once a window
    lo = 0
    while lo < len(records):  # small batches first: a caller may want only the first record
        hi = lo + scan.batch_size
        yield build_messages(buf, records.rows(lo, hi), offset0, wbase, scan.path, scan.check_crc,
                             verdicts=None if verdicts is None else verdicts.rows(lo, hi))
        lo = hi
        scan.batch_size = min(scan.batch_size * 2, MAX_BATCH)
    return records.stop if len(records) else i


def _careful_step(scan: _Scan, pos: int) -> Iterator[Iterable[ScanResult]]:
    """The careful path at ``pos``, where no run of clean records starts: one record read alone
    (the kernel's rule on one record, through decode_message), a blank record, a damaged region
    up to where a record proves itself again, or the written end. Returns where the scan goes
    on, or None when it ends here."""
    window, base, size, path = scan.window, scan.base, scan.window.size, scan.path
    buf, i = window.get(pos, RUN_AHEAD)
    total, magic = HOP.unpack_from(buf, i)
    if magic in MESSAGE_MAGIC_CODES:
        if total < MIN_MESSAGE_LENGTH:
            problem = (RECORD_SIZE_INVALID, f"totalSize {total} is smaller than any record")
        elif pos + total > size:
            problem = (RECORD_TRUNCATED if total <= (1 << 30) else RECORD_SIZE_INVALID,
                       f"totalSize {total} reaches past the file end ({size - pos} bytes left)")
        else:
            buf, i = window.get(pos, total)
            try:
                message = decode_message(buf, i, base + pos, i + total, check_crc=scan.check_crc,
                                         path=path, file_position=pos)
            except RecordError as exc:
                problem = (exc.finding_id, exc.message)
            else:
                if scan.tally is None:
                    yield (message,)
                else:
                    scan.tally.messages += 1
                    scan.tally.message_bytes += total
                    if _failed(message):
                        yield (message,)
                return pos + total
        nxt = window.find_record(pos + 1, base)
        stop = nxt if nxt is not None else (window.last_nonzero(pos) or size)
        yield (Corrupt(base + pos, stop - pos, path, pos, *problem),)
        return nxt
    if magic == BLANK_MAGIC_CODE:
        yield (Blank(base + pos, total, path, pos, valid=(total == size - pos)),)
        return None
    # No record here. Zeros are the unwritten part of the segment, unless a
    # record follows them (zeroed damage); anything else is garbage.
    if total == 0 and magic == 0 and (scan.zeros_end or window.first_nonzero(pos) is None):
        # zeros to the end (one forward pass, holes skipped): the written end
        _blank_missing(scan, pos)
        return None
    nxt = window.find_record(pos + 1, base)
    if nxt is None:
        yield _tail(window, pos, base)
        _blank_missing(scan, pos)
        return None
    zero = total == 0 and magic == 0
    yield (Corrupt(base + pos, nxt - pos, path, pos, RECORD_MAGIC_INVALID,
                   f"{nxt - pos} {'zeroed ' if zero else ''}bytes hold no record "
                   f"(magic 0x{magic:08X}); next record at position {nxt}"),)
    return nxt


def _blank_missing(scan: _Scan, pos: int) -> None:
    """A segment that is not the last written one ends without its end-of-file blank record."""
    if not scan.is_last and scan.findings is not None:
        scan.findings.append(Finding(BLANK_RECORD_MISSING, scan.path, pos,
                                     "segment ends without an end-of-file blank record"))


def _hop_to_needle(buf: bytes, i: int, stop: int, needle: bytes) -> int:
    """Hop by totalSize over the records of ``buf`` from ``i`` that do not hold ``needle``;
    return where it stopped: the first record that holds it, is not whole in ``buf``, starts
    at or after ``stop``, or does not look like a message (the careful path's business)."""
    k = buf.find(needle, i)
    if k < 0:
        k = len(buf)
    unpack = HOP.unpack_from
    v1, v2 = MESSAGE_MAGIC_CODES
    min_length = MIN_MESSAGE_LENGTH
    limit = min(len(buf), k)  # a record reaching past the needle's first byte holds it, or may
    # a header cut short by the buffer's end (a file cut short) is the careful path's
    stop = min(stop, len(buf) - HOP.size + 1)
    while i < stop:
        total, magic = unpack(buf, i)
        end = i + total
        if total < min_length or end > limit or (magic != v1 and magic != v2):
            return i
        i = end
    return i


HOP_MAP = 32 << 20  # header_hop's mapped span: a few syscalls a GiB, little resident at once


def _mapped_hop(kernel, path: str, size: int) -> tuple[int, int] | None:
    """header_hop's loop in the kernel, over the file mapped HOP_MAP bytes at a time (a
    1 KB record's header is one cache line of its 1 KB: the hop reads no other byte);
    None when the file is shorter than ``size`` (the pread loop then reads what is there)."""
    window = _FileWindow(path, size)  # opened as the pread path opens it (its errors)
    v1, v2 = MESSAGE_MAGIC_CODES
    count = pos = 0
    try:
        if window._file_size() < size:
            return None
        while pos + HOP.size <= size:
            at = pos - pos % mmap.ALLOCATIONGRANULARITY
            length = min(HOP_MAP, size - at)
            try:
                mapped = mmap.mmap(window.fd, length, access=mmap.ACCESS_READ, offset=at)
            except OSError:  # a file system without mmap: the pread loop reads it the same
                return None
            with mapped:  # totalSize <= 0 ends the hop, as in header_hop's loop; no limit
                hopped, j = kernel.hop(mapped, pos - at, length, 1 << 62, 1, v1, v2, None)
            count += hopped
            if j <= length - HOP.size:  # a header inside the span that is not a message's
                return count, at + j
            pos = at + j
        return count, pos
    finally:
        window.close()


def _tail(window: _FileWindow, pos: int, base: int) -> tuple[Corrupt, ...]:
    last = window.last_nonzero(pos)
    if last is None:
        return ()
    return (Corrupt(base + pos, last - pos, window.path, pos, TRAILING_GARBAGE,
                    f"{last - pos} bytes of garbage after the last record"),)


def header_hop(path: str, size: int) -> tuple[int, int]:
    """The bench's header-only scan: hop totalSize to totalSize; (messages, bytes of records).

    Stops at the first header that is not a message (a blank record, zeros, garbage); the
    position returned is past the last record hopped over, so it may lie past ``size``
    when the last record runs past the file end.
    
    Without the native kernel, read through the pread window: an mmap hop in Python
    (MADV_SEQUENTIAL, or MADV_POPULATE_READ per 4-64 MiB chunk) was measured no faster, the
    page faults or page-table fills cost what the copy saves. The kernel's hop is fast
    enough for the copy to be most of the time, so it reads the file mapped (:func:`_mapped_hop`).
    """
    kernel = native.kernel
    if kernel is not None:
        hopped = _mapped_hop(kernel, path, size)
        if hopped is not None:
            return hopped
    window = _FileWindow(path, size)
    unpack = HOP.unpack_from
    v1, v2 = MESSAGE_MAGIC_CODES
    count = 0
    pos = 0
    try:
        while pos + 8 <= size:
            buf, i = window.get(pos, 8)
            try:
                while True:  # unpack_from raises at the buffer end: no bounds test per record
                    total, magic = unpack(buf, i)
                    if total <= 0 or (magic != v1 and magic != v2):
                        return count, window.base + i
                    count += 1
                    i += total
            except struct.error:
                pass
            pos = window.base + i
    finally:
        window.close()
    return count, pos
