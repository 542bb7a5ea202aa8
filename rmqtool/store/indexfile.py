"""Reading index files (``index/yyyyMMddHHmmssSSS``): header, hash slots, entries, chains.

The file does not record its geometry (maxHashSlotNum, maxIndexNum: broker settings).
When the caller does not give them, :func:`infer_geometry` works them out from the file
(the one place that does; the engine uses it too). Files are read with ``pread`` in
bounded windows, never mapped: memory never follows a file's size (a default one is
420 MB), and nothing is ever written. A file too short for a header, or whose entries
cannot be located, raises FormatError naming it; a header with negative counts gives an
``indexHeaderInvalid`` finding and is read as the broker loads it (indexCount 1).
"""
from __future__ import annotations

import array
import dataclasses
import os
import pathlib
import struct
import sys
from typing import Iterator

from rmqtool.errors import FormatError, StoreAccessError, StoreNotFound
from rmqtool.findings import (INDEX_CHAIN_BROKEN, INDEX_FILE_NAME_INVALID, INDEX_FILE_UNREADABLE,
                              INDEX_GEOMETRY_UNKNOWN, INDEX_HEADER_INVALID, RECORD_TRUNCATED,
                              SEGMENT_SIZE_ODD, Finding)
from rmqtool.formats.derive import struct_of
from rmqtool.formats.indexfile import (ENTRY_PHY_OFFSET_POSITION, FILE_NAME_LENGTH, FIRST_INDEX, HASH_SLOT_SIZE,
                                       HEADER_INDEX_COUNT_POSITION, INDEX_HEADER_SIZE, INDEX_SIZE, INVALID_INDEX,
                                       IndexEntry, IndexHeader, IndexSlot, default_geometry, entry_position,
                                       hash_slot_num_for, hash_slot_num_placing, index_file_size, index_num_for,
                                       slot_of, slot_position)
from rmqtool.store.segments import list_dir
from rmqtool.store.small_file import read_head
from rmqtool.store.extents import data_extents
from rmqtool.store.paths import INDEX_DIR

INDEX_HEADER = struct_of(IndexHeader)
INDEX_SLOT = struct_of(IndexSlot)
INDEX_ENTRY = struct_of(IndexEntry)

READ_WINDOW = 1 << 20  # bytes read at once when a file is walked: memory never follows its size
# Geometry inference, when the header's offsets cannot locate the entries (every entry names
# commit log offset 0): the most slot/entry splits tried one by one before giving up.
MAX_SPLITS_TRIED = 50_000
# How far into a file the search for where the entries begin goes: slot tables of up to 16M
# slots (the default is 5M). A larger one is found only in the default ratio or a full file.
MAX_SEARCHED = 64 << 20
SLOT_SAMPLE = 1024  # leading slots whose values a candidate geometry must keep in range
_ZERO_ENTRY = bytes(INDEX_SIZE)


@dataclasses.dataclass(slots=True, frozen=True)
class IndexFileHeader:
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int  # slots in use
    index_count: int  # as stored: the next entry number; entries 1..index_count-1 are written

    @property
    def loaded_index_count(self) -> int:
        """IndexHeader.load: a file never written to stores 0, read as 1 (and so is a negative one)."""
        return max(self.index_count, FIRST_INDEX)


@dataclasses.dataclass(slots=True, frozen=True)
class IndexEntryRecord:
    number: int  # the entry's index in the file (1..index_count-1)
    key_hash: int
    phy_offset: int
    time_diff: int  # seconds after the header's beginTimestamp
    prev_index: int
    position: int  # byte position in the file


class _Bytes:
    """A file read with pread: what a read returns is all the memory it takes."""

    def __init__(self, fd: int, size: int, path: pathlib.Path):
        self.fd, self.size, self.path = fd, size, path

    def read(self, position: int, length: int) -> bytes:
        try:
            return os.pread(self.fd, length, position)
        except OSError as exc:
            raise StoreAccessError(f"cannot read ({exc.strerror})", self.path, position) from None

    def data_ranges(self, start: int, stop: int) -> Iterator[tuple[int, int]]:
        """[start, stop) without the holes of a sparse file (all zeros: no pattern there)."""
        return data_extents(self.fd, start, stop, self.path)

    def find_all(self, pattern: bytes, start: int, stop: int, step: int, phase: int) -> Iterator[int]:
        """Positions p in [start, stop) with p % step == phase where ``pattern`` lies, in
        order, reading a window at a time and skipping holes."""
        span = len(pattern)
        last = -1
        for lo, hi in self.data_ranges(start, stop + span - 1):
            position = max(lo - span + 1, start, last + 1)  # a match may begin in the hole before
            hi = min(hi, stop)
            while position < hi:
                chunk = self.read(position, min(READ_WINDOW, hi - position) + span - 1)
                at = chunk.find(pattern)
                while at != -1 and position + at < hi:
                    if (position + at) % step == phase:
                        last = position + at
                        yield last
                    at = chunk.find(pattern, at + 1)
                position += READ_WINDOW


def _unpack_entry(raw: bytes) -> tuple[int, int, int, int] | None:
    return INDEX_ENTRY.unpack(raw) if len(raw) == INDEX_SIZE else None


# --- geometry --------------------------------------------------------------------------------

def _fits(data: _Bytes, header: IndexFileHeader, hash_slot_num: int, index_num: int) -> bool:
    """Whether the file reads as the broker writes it with this geometry, from a few reads:
    entry 0 blank; entry 1 holds the header's beginPhyOffset and starts its chain; the last
    entry holds its endPhyOffset and its slot names it (putKey leaves each slot naming its
    newest entry); written entries are never all zeros (a key hash, an offset or a link is
    set); and the leading slots name entries that exist."""
    count = header.index_count
    if hash_slot_num < 1 or not FIRST_INDEX < count <= index_num:
        return False
    if index_file_size(hash_slot_num, index_num) != data.size:
        return False
    if data.read(entry_position(hash_slot_num, 0), INDEX_SIZE) != _ZERO_ENTRY:
        return False
    first = data.read(entry_position(hash_slot_num, FIRST_INDEX), INDEX_SIZE)
    last = data.read(entry_position(hash_slot_num, count - 1), INDEX_SIZE)
    if first == _ZERO_ENTRY or last == _ZERO_ENTRY:
        return False
    first_fields, last_fields = _unpack_entry(first), _unpack_entry(last)
    if first_fields is None or last_fields is None:
        return False
    key_hash, phy_offset, time_diff, prev_index = first_fields
    if phy_offset != header.begin_phy_offset or prev_index != INVALID_INDEX or key_hash < 0 or time_diff < 0:
        return False
    key_hash, phy_offset, time_diff, prev_index = last_fields
    if phy_offset != header.end_phy_offset or key_hash < 0 or time_diff < 0:
        return False
    if prev_index < INVALID_INDEX or (count - 1 > FIRST_INDEX and prev_index >= count - 1):
        return False  # a chain links to older entries only
    slot = INDEX_SLOT.unpack(data.read(slot_position(slot_of(key_hash, hash_slot_num)), HASH_SLOT_SIZE))[0]
    if slot != count - 1:
        return False
    sample = min(hash_slot_num, SLOT_SAMPLE)
    values = _ints(data.read(slot_position(0), sample * HASH_SLOT_SIZE))
    # a slot may name entry indexCount itself: putKey sets the slot before the header's count
    return len(values) == sample and min(values) >= INVALID_INDEX and max(values) <= count


def _ints(raw: bytes) -> array.array:
    values = array.array("i", raw[:len(raw) - len(raw) % 4])
    if sys.byteorder == "little":
        values.byteswap()
    return values


def _located(data: _Bytes, header: IndexFileHeader) -> Iterator[tuple[int, int]]:
    """Geometries that put entry 1 where the header's beginPhyOffset lies (or, when that is 0,
    the last entry where its endPhyOffset lies), fewest slots first; never more than
    MAX_SEARCHED bytes of slot table are searched."""
    count = header.index_count
    size = data.size
    most_slots = min((size - entry_position(0, count)) // HASH_SLOT_SIZE, MAX_SEARCHED // HASH_SLOT_SIZE)
    if most_slots < 1:
        return
    number, value = ((FIRST_INDEX, header.begin_phy_offset) if header.begin_phy_offset
                     else (count - 1, header.end_phy_offset))
    pattern = struct.pack(">q", value)
    start = entry_position(1, number) + ENTRY_PHY_OFFSET_POSITION
    stop = entry_position(most_slots, number) + ENTRY_PHY_OFFSET_POSITION + 1
    for position in data.find_all(pattern, start, stop, HASH_SLOT_SIZE, start % HASH_SLOT_SIZE):
        slots = hash_slot_num_placing(number, position - ENTRY_PHY_OFFSET_POSITION)
        entries = index_num_for(size, slots) if slots else None
        if entries:
            yield slots, entries


def infer_geometry(data: _Bytes, header: IndexFileHeader) -> tuple[int, int] | str:
    """(maxHashSlotNum, maxIndexNum) of a file, or why they cannot be told (no entries to
    check a guess against, or nothing locating them). Raises FormatError when no geometry
    makes the file read as the broker writes it. Every candidate is checked with a few
    reads; the search for one reads in windows, skips holes, and stops at the first fit."""
    size, count = data.size, header.index_count
    default = default_geometry(size)
    if count <= FIRST_INDEX:
        # Nothing written, so nothing to check a guess against: only the default ratio.
        return default or "no entries written and the size does not fit the default ratio"
    if entry_position(1, count) > size:
        raise FormatError(f"not an index file: header indexCount {count} leaves no room for a slot "
                          f"in {size} bytes", data.path, HEADER_INDEX_COUNT_POSITION)
    full_slots = hash_slot_num_for(size, count)  # a full file's indexCount is maxIndexNum
    for geometry in (default, (full_slots, count) if full_slots else None):
        if geometry and _fits(data, header, *geometry):
            return geometry
    if header.begin_phy_offset or header.end_phy_offset:
        for geometry in _located(data, header):
            if _fits(data, header, *geometry):
                return geometry
    else:
        # Every entry names offset 0 (the store's first message alone): nothing locates the
        # entries, so each split is tried, in a small file only, and only one may fit.
        counts = range(count, (size - INDEX_HEADER_SIZE) // INDEX_SIZE + 1)
        if len(counts) > MAX_SPLITS_TRIED:
            return (f"every entry names commit log offset 0, so nothing locates the entries, and "
                    f"{len(counts)} slot/entry splits are too many to try")
        fitting = [(slots, entries) for entries in counts for slots in [hash_slot_num_for(size, entries)]
                   if slots and _fits(data, header, slots, entries)]
        if len(fitting) == 1:
            return fitting[0]
        if fitting:
            return f"{len(fitting)} slot/entry splits fit its entries"
    raise FormatError(f"not an index file: header indexCount {count} and size {size} fit no slot count "
                      f"whose entries match the header", data.path)


def read_index_header(path: str | os.PathLike) -> IndexFileHeader | None:
    """An index file's header alone, its first 40 bytes read (None: the file is shorter)."""
    raw, _size = read_head(pathlib.Path(path), INDEX_HEADER_SIZE)
    return IndexFileHeader(*INDEX_HEADER.unpack(raw)) if len(raw) == INDEX_HEADER_SIZE else None


def infer_index_geometry(path: str | os.PathLike) -> tuple[int, int] | None:
    """(maxHashSlotNum, maxIndexNum) an index file's entries show it was written with; None
    when it has no entries (a guess is all there would be), when they do not tell, or when
    it is no index file (the engine's question before it appends)."""
    try:
        with IndexFile(path) as f:
            if f.hash_slot_num is None or f.header.index_count <= FIRST_INDEX:
                return None
            return f.hash_slot_num, f.index_num
    except FormatError:
        return None


# --- the reader --------------------------------------------------------------------------

class IndexFile:
    """One index file, read with pread. Use as a context manager, or call close()."""

    def __init__(self, path: str | os.PathLike, hash_slot_num: int | None = None,
                 index_num: int | None = None):
        self.path = pathlib.Path(path)
        self.findings: list[Finding] = []
        self._data = self._open()
        self.file_size = self._data.size
        try:
            self.header = IndexFileHeader(*INDEX_HEADER.unpack(self._data.read(0, INDEX_HEADER_SIZE)))
            self._check_header()
            if hash_slot_num is None or index_num is None:
                geometry = infer_geometry(self._data, self.header)
                if isinstance(geometry, str):
                    self.findings.append(Finding(INDEX_GEOMETRY_UNKNOWN, str(self.path), None, geometry))
                    geometry = (None, None)
                hash_slot_num, index_num = geometry
            elif index_file_size(hash_slot_num, index_num) != self.file_size:
                self.findings.append(Finding(
                    SEGMENT_SIZE_ODD, str(self.path), None,
                    f"size {self.file_size} is not {index_file_size(hash_slot_num, index_num)} "
                    f"for {hash_slot_num} slots and {index_num} entries"))
        except BaseException:
            self.close()
            raise
        self.hash_slot_num: int | None = hash_slot_num
        self.index_num: int | None = index_num

    def _open(self) -> _Bytes:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise StoreNotFound("no such file", self.path) from None
        except OSError as exc:
            raise StoreAccessError(f"cannot open ({exc.strerror})", self.path) from None
        try:
            size = os.fstat(fd).st_size
        except OSError as exc:
            os.close(fd)
            raise StoreAccessError(f"cannot stat ({exc.strerror})", self.path) from None
        if size < INDEX_HEADER_SIZE:
            os.close(fd)
            raise FormatError(f"not an index file: {size} bytes, shorter than the "
                              f"{INDEX_HEADER_SIZE}-byte header", self.path)
        return _Bytes(fd, size, self.path)

    def _check_header(self) -> None:
        h = self.header
        bad = [f"{name} {value} is negative" for name, value in
               (("indexCount", h.index_count), ("hashSlotCount", h.hash_slot_count)) if value < 0]
        # putKey counts a new slot before the entry, so a crash may leave one more slot than entries
        if h.hash_slot_count > h.loaded_index_count:
            bad.append(f"hashSlotCount {h.hash_slot_count} is more than indexCount {h.loaded_index_count}")
        if h.index_count < 0:
            bad.append("read as the broker loads it: indexCount 1, no entries")
        if bad:
            self.findings.append(Finding(INDEX_HEADER_INVALID, str(self.path), 0, "; ".join(bad)))

    def close(self):
        data = getattr(self, "_data", None)  # None when opening failed
        if data is not None and data.fd >= 0:
            os.close(data.fd)
            data.fd = -1

    __del__ = close  # a file left open by its caller does not keep its descriptor

    def __enter__(self) -> IndexFile:
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def is_write_full(self) -> bool | None:
        """IndexFile.isWriteFull: indexCount >= maxIndexNum (None when the geometry is unknown)."""
        return None if self.index_num is None else self.header.index_count >= self.index_num

    def slot(self, slot: int) -> int:
        """The raw slot value: the newest entry number of this slot's chain (0: none)."""
        if self.hash_slot_num is None or not 0 <= slot < self.hash_slot_num:
            raise IndexError(f"slot {slot} out of range")
        raw = self._data.read(slot_position(slot), HASH_SLOT_SIZE)
        return INDEX_SLOT.unpack(raw)[0] if len(raw) == HASH_SLOT_SIZE else INVALID_INDEX

    def iter_slots(self) -> Iterator[tuple[int, int]]:
        """(slot, value) for every slot in use, a window of the table at a time."""
        if self.hash_slot_num is None:
            return
        per_window = READ_WINDOW // HASH_SLOT_SIZE
        for first in range(0, self.hash_slot_num, per_window):
            n = min(per_window, self.hash_slot_num - first)
            raw = self._data.read(slot_position(first), n * HASH_SLOT_SIZE)
            if raw.count(0) == len(raw):
                continue  # an unused stretch of the table (most of a sparse file)
            for slot, value in enumerate(_ints(raw), start=first):
                if value != INVALID_INDEX:
                    yield slot, value

    def entry(self, number: int) -> IndexEntryRecord | None:
        """Entry by number, or None past the file end or when the geometry is unknown."""
        if self.hash_slot_num is None or number < 0:
            return None
        position = entry_position(self.hash_slot_num, number)
        fields = _unpack_entry(self._data.read(position, INDEX_SIZE))
        return None if fields is None else IndexEntryRecord(number, *fields, position)

    def iter_entries(self) -> Iterator[IndexEntryRecord]:
        """Entries 1..indexCount-1, in write order, a window at a time."""
        if self.hash_slot_num is None:
            return
        count = self.header.loaded_index_count
        per_window = READ_WINDOW // INDEX_SIZE
        for first in range(FIRST_INDEX, count, per_window):
            n = min(per_window, count - first)
            position = entry_position(self.hash_slot_num, first)
            raw = self._data.read(position, n * INDEX_SIZE)
            whole = len(raw) // INDEX_SIZE
            for i, fields in enumerate(INDEX_ENTRY.iter_unpack(raw[:whole * INDEX_SIZE])):
                yield IndexEntryRecord(first + i, *fields, position + i * INDEX_SIZE)
            if whole < n:
                self.findings.append(Finding(RECORD_TRUNCATED, str(self.path), None,
                                             f"indexCount {self.header.index_count} runs past the file end"))
                return

    def timestamp_of(self, entry: IndexEntryRecord) -> int:
        """The entry's store time as selectPhyOffset computes it (whole seconds)."""
        return self.header.begin_timestamp + entry.time_diff * 1000

    def lookup_chain(self, key_hash: int) -> Iterator[tuple[int, IndexEntryRecord]]:
        """Walk the slot of key_hash newest to oldest, as IndexFile.selectPhyOffset does:
        (entry number, entry) for every entry on the chain, whatever its own keyHash
        (callers compare it: different keys share slots). Stops at prevIndex 0, at a
        number outside 1..indexCount, at a negative timeDiff, or where the chain loops; a link
        to no earlier entry is a finding (the broker follows one still inside the file)."""
        if self.hash_slot_num is None or self.header.index_count <= FIRST_INDEX:
            return
        count = self.header.index_count
        number = self.slot(slot_of(key_hash, self.hash_slot_num))
        if number <= INVALID_INDEX or number > count:
            return
        seen = set()
        while True:
            seen.add(number)
            entry = self.entry(number)
            if entry is None or entry.time_diff < 0:
                self.findings.append(Finding(INDEX_CHAIN_BROKEN, str(self.path), None,
                                             f"entry {number} is past the file end or has a negative timeDiff"))
                return
            yield number, entry
            previous = entry.prev_index
            if previous in seen:
                self.findings.append(Finding(INDEX_CHAIN_BROKEN, str(self.path), entry.position,
                                             f"chain loops back from entry {number} to entry {previous}"))
                return
            if previous > count or previous >= number:  # an entry links only to one put before it
                self.findings.append(Finding(INDEX_CHAIN_BROKEN, str(self.path), entry.position,
                                             f"entry {number}'s prevIndex {previous} is no earlier entry "
                                             f"(indexCount {count})"))
            if previous <= INVALID_INDEX or previous > count:
                return
            number = previous


def is_index_file_name(name: str) -> bool:
    return len(name) == FILE_NAME_LENGTH and name.isdigit()


@dataclasses.dataclass(slots=True)
class IndexFiles:
    """The files of index/, oldest first (by name, as IndexService.load sorts them)."""
    paths: list[pathlib.Path]
    findings: list[Finding]

    def open_all(self, hash_slot_num: int | None = None, index_num: int | None = None) -> list[IndexFile]:
        """Open every file; one that cannot be read becomes a finding instead. A file whose
        geometry cannot be told takes a sibling's of the same size (one broker config). What
        opening each file found (its header, its geometry) moves to these findings; a file's
        own list then holds what reading it finds later."""
        files = []
        for path in self.paths:
            try:
                files.append(IndexFile(path, hash_slot_num, index_num))
            except FormatError as exc:
                self.findings.append(Finding(INDEX_FILE_UNREADABLE, str(path), exc.offset, exc.message))
        known = {f.file_size: (f.hash_slot_num, f.index_num) for f in files if f.hash_slot_num is not None}
        for i, f in enumerate(files):
            if f.hash_slot_num is None and f.file_size in known:
                f.close()
                files[i] = IndexFile(f.path, *known[f.file_size])
        for f in files:
            self.findings.extend(f.findings)
            f.findings.clear()
        return files


def index_file_paths(directory: pathlib.Path) -> list[pathlib.Path]:
    """The index files of an index/ directory, oldest first (by name, as IndexService.load)."""
    if not directory.is_dir():
        return []
    return [pathlib.Path(e.path) for e in list_dir(directory) if is_index_file_name(e.name) and e.is_file()]


def list_index_files(store_root: str | os.PathLike) -> IndexFiles:
    """The index files of a store root (an absent index/ is an empty list)."""
    directory = pathlib.Path(store_root) / INDEX_DIR
    if not pathlib.Path(store_root).is_dir():
        raise StoreNotFound("no such directory", store_root)
    findings: list[Finding] = []
    if not directory.exists():
        return IndexFiles([], findings)
    if not directory.is_dir():  # IndexService.load lists nothing in it, and its dispatch cannot make a file there
        return IndexFiles([], [Finding(INDEX_FILE_NAME_INVALID, str(directory), None,
                                       "a file where the index directory belongs: the broker loads no index file "
                                       "from it and cannot make one there; read as no index")])
    paths = []
    for entry in list_dir(directory):
        if is_index_file_name(entry.name) and entry.is_file():
            paths.append(pathlib.Path(entry.path))
        else:
            findings.append(Finding(INDEX_FILE_NAME_INVALID, entry.path, None,
                                    "not an index file (name is not yyyyMMddHHmmssSSS); ignored"))
    return IndexFiles(paths, findings)

