"""Reading QMQ's message log: every record of a segment, damage found and resynchronised.

The record layout is ``formats/qmq/messagelog.py``. A record is clean when its magic is a
message log magic, its attributes a message's, its subject and payload lie inside the
segment and (V2, V3) the payload's CRC-32 equals the stored one; a subject that is not UTF-8
is read as QMQ reads it (malformed bytes replaced), the record one of a subject so spelled.
Reading follows ``MessageLogRecordVisitor``: an end-of-segment record ends the segment, a
blank record jumps to the position it names. Where the bytes are neither a record nor the
zeros after the written end, the scanner reports a damaged region and goes on at the next
clean record (or empty record) it finds, so one bad byte does not hide the rest.
"""
from __future__ import annotations

import dataclasses
import struct
import zlib
from typing import Iterator

from rmqtool.formats.qmq.messagelog import (ATTR_BLANK_RECORD, ATTR_EMPTY_RECORD, ATTR_MESSAGE_RECORD,
                                            BLANK_RECORD_BYTES, MESSAGE_LOG_MAGIC_V1, MESSAGE_LOG_MAGICS,
                                            MIN_RECORD_BYTES, RecordPrefix, header_size)
from rmqtool import findings as ids
from rmqtool.findings import Finding, finding
from rmqtool.formats.derive import struct_of
from rmqtool.store.qmq import record_kernel
from rmqtool.store.qmq.segments import LogSegment, ZeroExtended

_PREFIX = struct_of(RecordPrefix)  # magic, attributes, timestamp
_SEQUENCE_AND_SUBJECT_LENGTH = struct.Struct(">qh")
_CRC_AND_SIZE = struct.Struct(">qi")
_SIZE = struct.Struct(">i")
_MAGIC_BYTES = tuple(m.to_bytes(4, "big") for m in MESSAGE_LOG_MAGICS)


@dataclasses.dataclass(frozen=True, slots=True)
class MessageRecord:
    """One message record: where it is, its header fields, and whether its payload is whole."""
    offset: int  # message log offset of the record's first byte
    path: str
    position: int  # in the segment file
    magic: int
    timestamp: int
    sequence: int
    subject: str
    payload_crc: int | None  # None for V1 (no CRC field)
    payload_size: int
    header_size: int
    payload: bytes | None  # None where the reader asked for none (records_of(payloads=False)), or where it
    # runs past the segment's written bytes and no CRC says it is whole (parse_record: not read)
    payload_crc_ok: bool | None  # None for V1, and when not checked
    subject_utf8: bool = True  # False: its bytes are not UTF-8 (``subject`` holds QMQ's reading, U+FFFD for them)

    @property
    def size(self) -> int:
        return self.header_size + self.payload_size

    @property
    def payload_offset(self) -> int:
        return self.offset + self.header_size


@dataclasses.dataclass(frozen=True, slots=True)
class EmptyRecord:
    """The end-of-segment record: the rest of the segment holds nothing."""
    offset: int
    path: str
    position: int
    timestamp: int


@dataclasses.dataclass(frozen=True, slots=True)
class BlankRecord:
    """``fillPreBlank``'s record: the bytes up to ``until`` (a segment position) are skipped."""
    offset: int
    path: str
    position: int
    until: int


@dataclasses.dataclass(frozen=True, slots=True)
class Damage:
    """Bytes that are neither a clean record nor the zeros after the written end."""
    offset: int
    path: str
    position: int
    size: int
    reason: str


ScanItem = MessageRecord | EmptyRecord | BlankRecord | Damage


def parse_record(data: ZeroExtended, pos: int, check_crc: bool = True) -> MessageRecord | EmptyRecord | BlankRecord | str:
    """The record at segment position ``pos``, or why there is none (a sentence)."""
    segment = data.segment
    limit = segment.size
    if pos + MIN_RECORD_BYTES > limit:
        return "too close to the segment's end for a record"
    magic, attributes, timestamp = _PREFIX.unpack(data.take(pos, _PREFIX.size))
    if magic not in MESSAGE_LOG_MAGICS:
        return f"magic 0x{magic:08x} is not a message log magic"
    path, offset = str(segment.path), segment.base_offset + pos
    if attributes == ATTR_EMPTY_RECORD:
        return EmptyRecord(offset, path, pos, timestamp)
    if attributes == ATTR_BLANK_RECORD:
        if pos + BLANK_RECORD_BYTES > limit:
            return "a blank record cut by the segment's end"
        (until,) = _SIZE.unpack(data.take(pos + MIN_RECORD_BYTES, _SIZE.size))
        if not pos < until <= limit:
            return f"a blank record up to position {until}, outside ({pos}, {limit}]"
        return BlankRecord(offset, path, pos, until)
    if attributes != ATTR_MESSAGE_RECORD:
        return f"attributes {attributes} (0 message, 1 end of segment, 2 blank)"
    at = pos + MIN_RECORD_BYTES
    if at + _SEQUENCE_AND_SUBJECT_LENGTH.size > limit:
        return "a header cut by the segment's end"
    sequence, subject_length = _SEQUENCE_AND_SUBJECT_LENGTH.unpack(data.take(at, _SEQUENCE_AND_SUBJECT_LENGTH.size))
    if subject_length < 0:
        return f"subject length {subject_length}"
    at += _SEQUENCE_AND_SUBJECT_LENGTH.size
    has_crc = magic != MESSAGE_LOG_MAGIC_V1
    tail = _CRC_AND_SIZE if has_crc else _SIZE
    if at + subject_length + tail.size > limit:
        return "a header cut by the segment's end"
    rest = data.take(at, subject_length + tail.size)  # the subject and the fields after it, read at once
    subject_raw = rest[:subject_length]
    payload_crc, payload_size = tail.unpack_from(rest, subject_length) if has_crc else \
        (None, *_SIZE.unpack_from(rest, subject_length))
    at += subject_length + tail.size
    if payload_size < 0:
        return f"payload size {payload_size}"
    if at + payload_size > limit:
        return f"payload size {payload_size} runs past the segment's end"
    try:
        subject, subject_utf8 = subject_raw.decode("utf-8"), True
    except UnicodeDecodeError:  # QMQ reads it all the same (new String(bytes, UTF_8): malformed bytes replaced)
        subject, subject_utf8 = subject_raw.decode("utf-8", errors="replace"), False
    if at + payload_size <= data.written:
        payload = data.take(at, payload_size)
        crc_ok = (zlib.crc32(payload) == payload_crc) if has_crc and check_crc else None
    else:  # past the written bytes: a torn record, or a damaged size claiming zeros (read only if its CRC says so);
        # the CRC is taken even for a header-only read: whether the record ends there is the log's written end
        crc_ok = (data.crc32(at, payload_size) == payload_crc) if has_crc else None
        payload = data.take(at, payload_size) if crc_ok else None
    return MessageRecord(offset, path, pos, magic, timestamp, sequence, subject, payload_crc, payload_size,
                         header_size(subject_length, magic), payload, crc_ok, subject_utf8)


def _is_clean(item) -> bool:
    """A place to go on from after damage: a record, its CRC not failing, and its subject UTF-8
    unless a CRC proves it (bytes inside damage that merely look like a V1 header prove nothing)."""
    if isinstance(item, str):
        return False
    if isinstance(item, MessageRecord):
        return item.payload_crc_ok is not False and (item.subject_utf8 or item.payload_crc_ok is True)
    return True


def _next_record(data: ZeroExtended, start: int, end: int, accept) -> tuple[int, object] | None:
    """The first position in ``[start, end)`` where a magic begins a record ``accept`` takes,
    with that record (``parse_record``'s); None when there is none."""
    found = None
    for needle in _MAGIC_BYTES:  # each magic's first taken record, bounded by the best so far
        at = data.find(needle, start, end)
        while at != -1:
            item = parse_record(data, at)
            if accept(item):
                found, end = (at, item), at
                break
            at = data.find(needle, at + 1, end)
    return found


def _resync(data: ZeroExtended, start: int) -> int:
    """The next position after ``start`` where a clean record begins, else the written end."""
    found = _next_record(data, start, data.written, _is_clean)
    return data.written if found is None else found[0]


def scan_segment(segment: LogSegment, check_crc: bool = True) -> Iterator[ScanItem]:
    """Every record of one segment in order, damage included; ends at the written end.
    ``check_crc=False`` walks headers only (``payload_crc_ok`` None): the end, not the bodies
    (a record whose payload runs past the written bytes has its CRC taken all the same).
    After a record that fails its CRC come the CRC-proven records that start inside the bytes
    its size claims (:func:`records_within`): a damaged size hides no record from any reader."""
    subjects = record_kernel.SubjectTable()
    with ZeroExtended(segment) as data:
        for piece in scan_pieces(data, subjects, check_crc):
            for item in records_of(data, piece, subjects) if isinstance(piece, record_kernel.MessageRun) else (piece,):
                yield item
                if isinstance(item, MessageRecord) and item.payload_crc_ok is False:
                    yield from records_within(data, item.position + 1, item.position + item.size)


def records_within(data: ZeroExtended, lo: int, hi: int) -> Iterator[MessageRecord]:
    """The message records whose CRC proves them that start in ``[lo, hi)`` of a segment (and
    its written part), in order: inside a record that fails its CRC, whose damaged size can
    claim the records after it (600 MB of them once). Only a CRC proves a record here: a V1
    header (no CRC) inside a payload proves nothing."""
    pos, hi = lo, min(hi, data.written)
    while pos < hi:
        found = _next_record(data, pos, hi, _proven)
        if found is None:
            return
        at, item = found
        yield item
        pos = at + item.size


def _proven(item) -> bool:
    return isinstance(item, MessageRecord) and item.payload_crc_ok is True


def log_pieces(segments, builder: record_kernel.LogColumnsBuilder, hints=None
               ) -> Iterator[tuple[ZeroExtended, object]]:
    """``scan_pieces`` over a log's segments, each segment open while its pieces are read; every
    message record (a run, or one the careful path read) is also gathered into ``builder``.
    ``hints``: message log offsets where records are said to start (sorted, unique; the
    consumer logs' units), to prove the walk with (``record_kernel.clean_run``).
    After a record that fails its CRC, the records :func:`records_within` finds in the bytes it
    claims are gathered and given too (a unit that points at one points at a record the data
    proves). The builder learns where each piece ends (:func:`item_end`): its columns' written end."""
    for seg in segments:
        index = builder.segment(str(seg.path), seg.base_offset)
        mine = None
        if hints is not None:
            lo, hi = hints.searchsorted(seg.base_offset), hints.searchsorted(seg.end_offset)
            mine = hints[lo:hi] - seg.base_offset
        with ZeroExtended(seg) as data:
            data.will_read()
            for piece in scan_pieces(data, builder.subjects, builder.check_crc, mine):
                failing = ()
                if isinstance(piece, record_kernel.MessageRun):
                    builder.add(index, seg.base_offset, piece)
                    if piece.crc_ok is not None and not piece.crc_ok.all():
                        run = piece.rows(~piece.crc_ok)
                        failing = zip(run.position.tolist(), run.size.tolist())
                elif isinstance(piece, MessageRecord):
                    builder.add(index, seg.base_offset, record_kernel.single_run(piece, builder.subjects,
                                                                                 builder.check_crc))
                    if piece.payload_crc_ok is False:
                        failing = ((piece.position, piece.size),)
                builder.reached(item_end(data, piece))
                yield data, piece
                for position, size in failing:
                    for inner in records_within(data, position + 1, position + size):
                        builder.add(index, seg.base_offset, record_kernel.single_run(inner, builder.subjects,
                                                                                     builder.check_crc))
                        builder.reached(item_end(data, inner))
                        yield data, inner


def records_of(data: ZeroExtended, run: record_kernel.MessageRun, subjects: record_kernel.SubjectTable,
               payloads: bool = True) -> Iterator[MessageRecord]:
    """The kernel's run as the records ``parse_record`` gives; ``payloads=False``: without their
    payloads (None), for a reader of the header fields only. A damaged size can claim most of
    a 1 GiB segment, zeros where the file is cut short: read for nothing, it once took 1.5 GB."""
    segment = data.segment
    path, base, names, written = str(segment.path), segment.base_offset, subjects.names, data.written
    crc_ok = run.crc_ok.tolist() if run.crc_ok is not None else None
    for k, (pos, size, head, magic, timestamp, sequence, sid, crc) in enumerate(zip(
            run.position.tolist(), run.size.tolist(), run.header_size.tolist(), run.magic.tolist(),
            run.timestamp.tolist(), run.sequence.tolist(), run.subject_id.tolist(), run.payload_crc.tolist())):
        v1 = magic == MESSAGE_LOG_MAGIC_V1
        ok = None if v1 or crc_ok is None else crc_ok[k]
        read = payloads and (pos + size <= written or ok is True)  # parse_record's rule past the written bytes
        yield MessageRecord(base + pos, path, pos, magic, timestamp, sequence, names[sid], None if v1 else crc,
                            size - head, head, data.take(pos + head, size - head) if read else None, ok)


# Bytes of records one kernel run starts in: a segment is read a window at a time, so the
# run's columns and the mapped pages held stay a few MB whatever the segment's size (a 1 GB
# segment in one run held the whole file resident, about 1.3 GB at its peak), and a window's
# headers are still in the CPU cache when its payloads' CRCs are computed.
WINDOW = 8 << 20


def scan_pieces(data: ZeroExtended, subjects: record_kernel.SubjectTable, check_crc: bool = True, hints=None,
                start: int = 0) -> Iterator[record_kernel.MessageRun | ScanItem]:
    """The segment's items in order: runs of clean message records as the kernel's columns
    (a run ends at the first record starting past a ``WINDOW`` of bytes; the next goes on
    from there), everything else (and a record the kernel leaves to it) one item at a time.
    ``start``: a position to begin near (a tail): the items from the first clean record at or
    after it (the bytes before that may be the middle of a record: not damage)."""
    segment, written = data.segment, data.written
    pos = _resync(data, start) if start else 0
    buf = data.mapped
    while pos < written:
        data.release(pos)  # what is behind is read: its pages leave the resident set
        # the kernel's records end by the written end: one that runs on into the zeros (a payload
        # ending in zero bytes, or a damaged size claiming 600 MB of a hole) is parse_record's,
        # which does not read those zeros (the kernel's CRC read them: a hole's pages filled the cache)
        run = record_kernel.clean_run(buf, pos, min(written, pos + WINDOW), written, subjects, check_crc, hints)
        if len(run):
            yield run
            pos = run.stop
            continue
        item = parse_record(data, pos, check_crc)
        if isinstance(item, EmptyRecord):
            yield item
            return
        if isinstance(item, BlankRecord):
            yield item
            pos = item.until
            continue
        if isinstance(item, MessageRecord):
            yield item
            pos += item.size
            continue
        # neither a record nor the zeros after the written end: damage up to the next clean record
        nxt = _resync(data, pos + 1)
        end = min(nxt, written)
        yield Damage(segment.base_offset + pos, str(segment.path), pos, end - pos, item)
        pos = nxt


def findings_of(item: ScanItem) -> list[Finding]:
    """What a scanned item says is wrong: damaged bytes, or a payload whose CRC does not match."""
    if isinstance(item, Damage):
        return [finding(ids.MESSAGE_RECORD_INVALID, item.path, item.position,
                        f"{item.size} bytes at message log offset {item.offset} are not a record: {item.reason}",
                        message_log_offset=item.offset, store_size=item.size)]
    if isinstance(item, MessageRecord) and item.payload_crc_ok is False:
        return [finding(ids.PAYLOAD_CRC_MISMATCH, item.path, item.position,
                        f"the payload of {item.subject} sequence {item.sequence} does not match its CRC",
                        subject=item.subject, sequence=item.sequence, message_log_offset=item.offset)]
    return []


def piece_findings(data: ZeroExtended, piece, subjects: record_kernel.SubjectTable) -> list[Finding]:
    """:func:`findings_of` every item a :func:`log_pieces` piece holds: a run's records whose
    payload fails its CRC (read without their payloads), or the one item."""
    if not isinstance(piece, record_kernel.MessageRun):
        return findings_of(piece)
    if piece.crc_ok is None or piece.crc_ok.all():
        return []
    return [f for record in records_of(data, piece.rows(~piece.crc_ok), subjects, payloads=False)
            for f in findings_of(record)]


def item_end(data: ZeroExtended, item) -> int | None:
    """The message log offset where a scanned item's bytes end, counted no further than the
    segment's written bytes: a record whose size claims zeros past them, its payload proven
    by no CRC (a torn record, or a damaged size), ends where the writing did. None for the
    end-of-segment record (the log's records end before it)."""
    base = data.segment.base_offset
    if isinstance(item, record_kernel.MessageRun):  # the kernel's records end by the written end
        return base + int(item.position[-1] + item.size[-1]) if len(item) else None
    if isinstance(item, MessageRecord):
        if item.position + item.size <= data.written or item.payload_crc_ok is True:
            return item.offset + item.size
        return base + max(data.written, item.position)
    if isinstance(item, BlankRecord):
        return base + item.until
    if isinstance(item, Damage):
        return item.offset + item.size
    return None
