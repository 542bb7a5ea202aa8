"""A DLedger commit log read (``enableDLegerCommitLog``): entries, the record inside each, the entry index.

The broker's ``DLedgerCommitLog`` (rocketmq-all-5.3.3) keeps its messages in DLedger's entry log
(``dledger-<selfId>/data``) instead of ``commitlog/``: each entry is a 48-byte DLedger header
and, as its body, one complete commit log record (layouts: ``formats/dledger.py``). A record's
commit log offset is ``pos + BODY_OFFSET``, which is where its bytes lie in the data files, so
the consume queues, index files and offset msgIds name the data files' own offsets:
:class:`DLedgerCommitLog` is the commit log every random read goes through (its segments are
the data files) and its ``scan`` walks the entries, not records back to back.

The walk (:func:`walk_entries`) checks what ``DLedgerMmapFileStore.recover`` checks (magic,
size, pos, index order, term order) and reads on past damage by finding the next header whose
pos field names its own place (a header says where it is, so a resync cannot land inside a
body by chance). Read-only: never writes a byte.
"""
from __future__ import annotations

import dataclasses
import itertools
import mmap
import os
import pathlib
from typing import Iterator

from rmqtool.errors import StoreAccessError
from rmqtool.findings import DLEDGER_ENTRY_INVALID, DLEDGER_RECORD_INVALID, SEGMENT_EMPTY, SEGMENT_SIZE_ODD, Finding
from rmqtool.formats import dledger as fmt
from rmqtool.store.commitlog import Blank, Corrupt, ScanResult
from rmqtool.store.commitlog_end import CommitLog, last_nonzero_from
from rmqtool.store.message import Message, RecordError, decode_message
from rmqtool.store.paths import dledger_home
from rmqtool.store.segments import Segment, SegmentQueue, discover
from rmqtool.store.small_file import read_head

_MAGIC_BYTES = fmt.CURRENT_MAGIC.to_bytes(4, "big")
_HEADER = fmt.ENTRY_HEADER.size  # what the walk reads of an entry before it knows its size


@dataclasses.dataclass(slots=True)
class Entry:
    """One DLedger entry (``DLedgerEntry``): its header's fields and where it lies."""
    magic: int
    size: int
    index: int
    term: int
    pos: int
    channel: int
    chain_crc: int
    body_crc: int
    body_length: int
    path: str
    position: int  # in its data file
    record: Message | Corrupt | None = None  # the commit log record of its body (walk with records=True)

    @property
    def record_offset(self) -> int:
        """The commit log offset of its record (DLedgerCommitLog's append hook: pos + BODY_OFFSET)."""
        return self.pos + fmt.BODY_OFFSET

    @property
    def data_file(self) -> str:
        return pathlib.Path(self.path).name


@dataclasses.dataclass(slots=True, frozen=True)
class IndexUnit:
    """One 32-byte unit of the entry index (``encodeIndex``); ``slot`` is its unit number."""
    slot: int
    magic: int
    pos: int
    size: int
    index: int
    term: int
    path: str
    position: int

    @property
    def written(self) -> bool:
        return any((self.magic, self.pos, self.size, self.index, self.term))


def _properties(text: str | None) -> dict[str, str]:
    """Java properties text as DLedger writes it (``key=value`` lines, IOUtils.properties2String)."""
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def _read_properties(path: pathlib.Path) -> dict[str, str] | None:
    """A DLedger properties file, with ``.bak`` as IOUtils.file2String falls back to it; None: neither."""
    for p in (path, path.with_name(path.name + ".bak")):
        if p.is_file():
            return _properties(read_head(p, 1 << 16, what="DLedger properties file")[0].decode("utf-8", "replace"))
    return None


@dataclasses.dataclass(frozen=True)
class DLedgerCheckpoint:
    """``dledger-<id>/checkpoint`` (DLedgerMmapFileStore.persistCheckPoint) and ``currterm`` (MemberState)."""
    committed_index: int | None  # None: no checkpoint (recover leaves committedIndex -1)
    end_index: int | None
    curr_term: int | None
    vote_leader: str | None
    found: bool  # whether a checkpoint file (or its .bak) was there


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


class DLedgerLog:
    """One ``dledger-<selfId>`` directory: the data files, the entry index, checkpoint and term."""

    def __init__(self, home: pathlib.Path):
        self.home = home
        self.self_id = home.name[len(fmt.DIR_PREFIX):]
        self.data: SegmentQueue = discover(home / fmt.DATA_DIR, required=False)
        self.index: SegmentQueue = discover(home / fmt.INDEX_DIR, required=False)

    def __repr__(self) -> str:
        return f"DLedgerLog({str(self.home)!r})"

    @property
    def checkpoint(self) -> DLedgerCheckpoint:
        cp = _read_properties(self.home / fmt.CHECKPOINT_FILE)
        term = _read_properties(self.home / fmt.CURRTERM_FILE) or {}
        return DLedgerCheckpoint(_int((cp or {}).get(fmt.COMMITTED_INDEX_KEY)), _int((cp or {}).get(fmt.END_INDEX_KEY)),
                                 _int(term.get(fmt.CURR_TERM_KEY)), term.get(fmt.VOTE_LEADER_KEY), cp is not None)

    @property
    def refused_at_load(self) -> list[Finding]:
        """The files MmapFileList.load refuses (the broker exits at load): empty files and files
        of odd sizes in the data and index directories, and entry index files of a size the
        broker's DLedger cannot have."""
        return [f for f in (*self.data.findings, *self.index.findings, *self.load_refusals)
                if f.id in (SEGMENT_SIZE_ODD, SEGMENT_EMPTY)]

    @property
    def load_refusals(self) -> list[Finding]:
        """What MmapFileList.load refuses in the data and index directories beyond what their
        listings found (files of odd sizes among their neighbours): entry index files of a size
        the broker's DLedger cannot have."""
        return _index_sizes_refused(self.index)

    def entries(self, *, records: bool = False, check_crc: bool = True,
                from_offset: int | None = None, to_offset: int | None = None) -> Iterator[Entry | Blank | Corrupt]:
        return walk_entries(self.data.segments, records=records, check_crc=check_crc,
                            from_offset=from_offset, to_offset=to_offset)

    def begin_index(self) -> int | None:
        """reviseLedgerBeginIndex: the index field of the first data file's first entry (None: no entry there)."""
        if not self.data.segments or self.data.segments[0].size < fmt.BODY_OFFSET:
            return None
        with open(self.data.segments[0].path, "rb") as f:
            h = fmt.ENTRY_HEADER.unpack(f.read(fmt.BODY_OFFSET))
        return h[2] if fmt.MAGIC_1 <= h[0] <= fmt.CURRENT_MAGIC else None

    def index_units(self) -> Iterator[IndexUnit]:
        return read_index_units(self.index.segments, self.index.mapped_file_size)

    def commit_log(self) -> "DLedgerCommitLog":
        return DLedgerCommitLog.of_queue(self.data)


def _index_sizes_refused(index: SegmentQueue) -> list[Finding]:
    """Entry index files of a size the broker's DLedger cannot load: DLedgerCommitLog sets
    DLedger's data file size from mappedFileSizeCommitLog but never its index file size, so
    DLedger's default is the only one, and MmapFileList.load refuses a file of any other length
    (the broker then exits). Files that differ from their neighbours are found already."""
    flagged = {f.path for f in index.findings if f.id in (SEGMENT_SIZE_ODD, SEGMENT_EMPTY)}
    return [Finding(SEGMENT_SIZE_ODD, str(seg.path), None,
                    f"DLedger entry index file of {seg.size} bytes: the broker's DLedgerCommitLog leaves "
                    f"DLedger's index file size at its default ({fmt.DEFAULT_INDEX_FILE_SIZE}), and "
                    f"MmapFileList.load refuses a file of another length (the broker exits at load)")
            for seg in index.segments if seg.size != fmt.DEFAULT_INDEX_FILE_SIZE and str(seg.path) not in flagged]


READ_BY = "info, verify, check, diff, spark verify, query, dump commitlog, dump dledger and recover (its plan)"


def refuse_dledger(root: str | os.PathLike, command: str) -> None:
    """For a command that reads or writes a plain commit log only: a store whose records live in
    DLedger's entry log is refused in one line naming the commands that read it (exit 4)."""
    if not (pathlib.Path(root) / "commitlog").is_dir() and find_dledger(root) is not None:
        raise dledger_refusal(root, command)


def dledger_refusal(root, command: str):
    """The one line (UnsupportedFamily, exit 4) a command that does not read a DLedger store
    refuses it with: what the store is, and the commands that read it."""
    from rmqtool.store.family import UnsupportedFamily
    return UnsupportedFamily(f"a DLedger commit log store (dledger-<selfId>/data, enableDLegerCommitLog): "
                             f"{command} does not read it; {READ_BY} do", root)


def find_dledger(root: str | os.PathLike) -> DLedgerLog | None:
    """The DLedger commit log a store root holds (store/paths.dledger_home), or None."""
    home = dledger_home(root)
    return DLedgerLog(home) if home is not None else None


class _Mapped:
    """A data or index file mapped read-only (sparse files cost only their written pages)."""

    def __init__(self, seg: Segment):
        self.seg = seg
        try:
            with open(seg.path, "rb") as f:
                self.buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if seg.size else b""
        except OSError as exc:
            raise StoreAccessError(f"cannot read ({exc.strerror})", seg.path) from None

    def close(self) -> None:
        if isinstance(self.buf, mmap.mmap):
            self.buf.close()


def _entry_refusal(h: tuple, absolute: int, room: int, last: tuple[int, int] | None) -> str | None:
    """Why ``DLedgerMmapFileStore.recover`` stops at this header (0.3.1.2 lines 239-249), or None."""
    magic, size, index, term, pos, _ch, _chain, _body, body_length = h
    if pos != absolute:
        return f"pos field {pos} != where the entry lies ({absolute})"
    if body_length + fmt.BODY_OFFSET != size:
        return f"size {size} != bodyLength {body_length} + {fmt.BODY_OFFSET}"
    if not fmt.MAGIC_1 <= magic <= fmt.CURRENT_MAGIC:
        return f"magic {magic} is not an entry's ({fmt.CURRENT_MAGIC})"
    if last is not None and index != last[0] + 1:
        return f"index {index} does not follow the previous entry's {last[0]}"
    if last is not None and term < last[1]:
        return f"term {term} is below the previous entry's {last[1]}"
    if size <= fmt.HEADER_SIZE:
        return f"size {size} is not above the header size {fmt.HEADER_SIZE}"
    if size > room:
        return f"size {size} runs past the end of its file ({room} bytes left)"
    return None


def _resync(buf, start: int, stop: int, base: int) -> int | None:
    """The next position in [start, stop) where a header names its own place (magic, pos, sizes), or None."""
    at = start
    while True:
        at = buf.find(_MAGIC_BYTES, at, stop)
        if at < 0 or at + _HEADER > stop:
            return None
        h = fmt.ENTRY_HEADER.unpack_from(buf, at)
        if h[4] == base + at and h[8] + fmt.BODY_OFFSET == h[1] and at + h[1] <= stop:
            return at
        at += 1


def entry_record(buf, e: Entry, *, check_crc: bool = True) -> Message | Corrupt:
    """The commit log record an entry's body holds, decoded by the one record decoder at
    ``pos + BODY_OFFSET`` (DLedgerCommitLog.checkMessageAndReturnSize skips the header); a
    Corrupt (dledgerRecordInvalid) when the body is not one clean record of bodyLength bytes."""
    at = e.position + fmt.BODY_OFFSET
    offset = e.record_offset
    if e.body_length < 8:
        return Corrupt(offset, e.body_length, e.path, at, DLEDGER_RECORD_INVALID,
                       f"entry {e.index}: a body of {e.body_length} bytes holds no record")
    total = int.from_bytes(buf[at:at + 4], "big", signed=True)
    if total != e.body_length:
        return Corrupt(offset, e.body_length, e.path, at, DLEDGER_RECORD_INVALID,
                       f"entry {e.index}: record totalSize {total} != the entry's bodyLength {e.body_length}")
    try:
        return decode_message(buf, at, offset, at + total, check_crc=check_crc, path=e.path, file_position=at)
    except RecordError as exc:
        return Corrupt(offset, e.body_length, e.path, at, DLEDGER_RECORD_INVALID,
                       f"entry {e.index}: {exc.finding_id}: {exc.message}")


def walk_entries(segments: list[Segment], *, records: bool = False, check_crc: bool = True,
                 from_offset: int | None = None, to_offset: int | None = None,
                 start: int = 0) -> Iterator[Entry | Blank | Corrupt]:
    """Every entry of the data files in order (with ``records``, each entry's record decoded),
    the blank fill that ends a file (a Blank), and a Corrupt (dledgerEntryInvalid) for bytes
    recover would stop at, the walk going on at the next header that names its own place.
    A file's written part ends at its blank fill or at a size field of 0 (recover's end).
    ``from_offset``/``to_offset``: only entries whose record offset lies in that range.
    ``start``: a position in the first file, the walk beginning at the first header at or
    after it that names its own place (a tail read: nothing before it is judged)."""
    last: tuple[int, int] | None = None
    for k, seg in enumerate(segments):
        if to_offset is not None and seg.base_offset >= to_offset:
            break
        if from_offset is not None and seg.base_offset + seg.size <= from_offset:
            last = None  # entries never cross a file's end: a later file is walked from its start
            continue
        m = _Mapped(seg)
        try:
            buf, base, path, p = m.buf, seg.base_offset, str(seg.path), 0
            if start and not k:
                p = _resync(buf, start, seg.size, base)
                if p is None:
                    continue
            while p + fmt.MIN_BLANK_LEN <= seg.size:
                magic, size = fmt.BLANK_FILL.unpack_from(buf, p)
                if magic == fmt.BLANK_MAGIC_CODE:
                    yield Blank(base + p, size, path, p, size == seg.size - p)
                    break
                if size == 0:
                    break  # recover: "Recover data file to the end"
                refusal = (_entry_refusal(h := fmt.ENTRY_HEADER.unpack_from(buf, p), base + p, seg.size - p, last)
                           if p + _HEADER <= seg.size else "an entry header cut off by the end of its file")
                if refusal is not None:
                    nxt = _resync(buf, p + 1, seg.size, base)
                    skipped = (nxt if nxt is not None else seg.size) - p
                    yield Corrupt(base + p, skipped, path, p, DLEDGER_ENTRY_INVALID,
                                  f"DLedger recover stops here: {refusal}")
                    last = None
                    if nxt is None:
                        break
                    p = nxt
                    continue
                e = Entry(*h, path, p)
                last = (e.index, e.term)
                if from_offset is not None and e.record_offset < from_offset:
                    p += size
                    continue
                if to_offset is not None and e.record_offset >= to_offset:
                    return
                if records:
                    e.record = entry_record(buf, e, check_crc=check_crc)
                yield e
                p += size
        finally:
            m.close()


def read_index_units(segments: list[Segment], file_size: int | None) -> Iterator[IndexUnit]:
    """Every unit of the entry index files up to the first all-zero unit of the last file
    (an unwritten tail), and of the others up to their last non-zero byte (a file's unwritten
    tail, a made-ahead file of 160 MiB of zeros, is read past its holes, never unit by unit);
    the unit number from the file's name (unit i at byte i x 32)."""
    unit = fmt.INDEX_UNIT_SIZE
    zero = bytes(unit)
    for n, seg in enumerate(segments):
        written = last_nonzero_from(seg.path) if seg.size else None
        if written is None:
            continue
        m = _Mapped(seg)
        try:
            path = str(seg.path)
            for p in range(0, min(seg.size, written + unit - 1) // unit * unit, unit):
                raw = m.buf[p:p + unit]
                if raw == zero and n == len(segments) - 1:
                    break
                magic, pos, size, index, term = fmt.INDEX_UNIT.unpack(raw)
                yield IndexUnit((seg.base_offset + p) // unit, magic, pos, size, index, term, path, p)
        finally:
            m.close()


class DLedgerCommitLog(CommitLog):
    """The commit log of a DLedger store as every reader takes it: the data files are its
    segments (a record's offset is its place in them, so random reads need nothing else), and
    a scan walks the entries and yields the record of each (DLedgerCommitLog.checkMessageAndReturnSize)."""

    def scan(self, from_offset: int | None = None, to_offset: int | None = None, *, check_crc: bool = True,
             findings: list | None = None, needle: bytes | None = None, zeros_end: bool = False) -> Iterator[ScanResult]:
        for r in walk_entries(self.segments, records=True, check_crc=check_crc, from_offset=from_offset,
                              to_offset=to_offset):
            if isinstance(r, Entry):
                yield r.record
            elif isinstance(r, Corrupt) or from_offset is None or r.offset >= from_offset:
                yield r  # a blank fill (magic -1) ends a file as the plain log's blank record does

    def crc_scan(self, from_offset: int | None = None, to_offset: int | None = None, *,
                 findings: list | None = None, tally=None) -> Iterator[ScanResult]:
        return self.scan(from_offset, to_offset, check_crc=True, findings=findings)


@dataclasses.dataclass
class Survey:
    """One walk of a DLedger log with its index beside it: what ``info`` and ``verify`` report.

    ``recover_end`` is where ``DLedgerMmapFileStore.recover`` ends the data (its processOffset:
    the first header it rejects in the files it walks, from the third-last file on, else one
    past the last entry) and ``ledger_end_index`` / ``ledger_end_term`` the last entry before it."""
    entries: int = 0
    first_index: int | None = None
    ledger_end_index: int = -1
    ledger_end_term: int = -1
    recover_end: int | None = None
    walked_end: int | None = None  # one past the last entry walked (past damage too)
    blanks: list = dataclasses.field(default_factory=list)
    units: int = 0  # written index units
    findings: list = dataclasses.field(default_factory=list)


def _index_place(index: SegmentQueue, slot: int) -> tuple[str, int | None]:
    """The index file and position of unit ``slot`` (its directory when no file holds it)."""
    at = slot * fmt.INDEX_UNIT_SIZE
    seg = index.find(at)
    return (str(seg.path), at - seg.base_offset) if seg is not None else (str(index.directory), None)


def _unit_difference(e: Entry, u: IndexUnit) -> str | None:
    want = (e.magic, e.pos, e.size, e.index, e.term)
    got = (u.magic, u.pos, u.size, u.index, u.term)
    if want == got:
        return None
    names = ("magic", "pos", "size", "index", "term")
    return ", ".join(f"{n} {g} (entry: {w})" for n, g, w in zip(names, got, want) if g != w)


def survey(log: DLedgerLog, *, records: bool = False, check_crc: bool = True, recover_files: bool = False) -> Survey:
    """The walk of :func:`surveyed`, run to its end."""
    out = Survey()
    for _ in surveyed(log, out, records=records, check_crc=check_crc, recover_files=recover_files):
        pass
    return out


def surveyed(log: DLedgerLog, out: Survey, *, records: bool = False, check_crc: bool = True,
             recover_files: bool = False) -> Iterator[Entry | Blank | Corrupt]:
    """Walk the entries (``records``: each record decoded, its damage a finding), comparing
    each with its index unit as recover does (magic, pos, size, index, term; unit i at i x 32),
    and yield what is walked in order; ``out`` holds the counts, ends and findings when done.
    ``recover_files``: only the files DLedger's recover walks (from the third-last on), as
    info reads a store without reading all of it; ``first_index`` is then the first file's
    first entry's (reviseLedgerBeginIndex) and ``entries`` counts the whole log."""
    from rmqtool.findings import BLANK_RECORD_INVALID, DLEDGER_INDEX_MISMATCH, finding
    segs = log.data.segments
    recover_from = segs[max(0, len(segs) - 3)].base_offset if segs else 0  # recover's start file
    units = iter(log.index_units())
    unit = next(units, None)
    last_entry: Entry | None = None
    walk_from = recover_from if recover_files else None
    if recover_files:
        out.first_index = log.begin_index()
    for r in walk_entries(segs if walk_from is None else [x for x in segs if x.base_offset >= walk_from],
                          records=records, check_crc=check_crc):
        if isinstance(r, Blank):
            out.blanks.append(r)
            if not r.valid:
                out.findings.append(finding(BLANK_RECORD_INVALID, r.path, r.position,
                                            f"DLedger blank fill whose size field {r.size} is not the bytes left "
                                            f"in the file", commit_log_offset=r.offset))
            yield r
            continue
        if isinstance(r, Corrupt):
            out.findings.append(r.finding())
            if out.recover_end is None and r.offset >= recover_from:
                out.recover_end = r.offset
                out.ledger_end_index = last_entry.index if last_entry is not None else -1
                out.ledger_end_term = last_entry.term if last_entry is not None else -1
            yield r
            continue
        out.entries += 1
        if out.first_index is None:
            out.first_index = r.index
        if recover_files:
            out.entries = r.index - out.first_index + 1
        last_entry = r
        out.walked_end = r.pos + r.size
        while unit is not None and unit.slot < r.index:
            unit = next(units, None)
        if unit is None or unit.slot != r.index:
            path, at = _index_place(log.index, r.index)
            out.findings.append(finding(DLEDGER_INDEX_MISMATCH, path, at,
                                        f"no index unit for entry {r.index} (pos {r.pos}): recover writes the "
                                        f"index again from here", entry_index=r.index))
        else:
            out.units += 1
            diff = _unit_difference(r, unit)
            if diff is not None:
                out.findings.append(finding(DLEDGER_INDEX_MISMATCH, unit.path, unit.position,
                                            f"index unit {unit.slot}: {diff}; recover writes the index again "
                                            f"from here", entry_index=r.index))
        if isinstance(r.record, Corrupt):
            out.findings.append(r.record.finding())
        yield r
    for u in itertools.chain(() if unit is None else (unit,), units):
        if last_entry is not None and u.slot <= last_entry.index:
            continue
        if u.written:
            out.findings.append(finding(DLEDGER_INDEX_MISMATCH, u.path, u.position,
                                        f"index unit {u.slot} lies past the last entry "
                                        f"({last_entry.index if last_entry else 'none'}): recover truncates it",
                                        entry_index=u.slot))
            break  # one finding for the tail
    if out.recover_end is None:
        out.recover_end = out.walked_end if out.walked_end is not None else recover_from
        if last_entry is not None:
            out.ledger_end_index, out.ledger_end_term = last_entry.index, last_entry.term


def records_of(entries) -> Iterator[Message]:
    """The clean-enough records (decoded Messages) of walked entries."""
    return (e.record for e in entries if isinstance(e, Entry) and isinstance(e.record, Message))
