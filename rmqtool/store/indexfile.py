"""Reading index files (``index/yyyyMMddHHmmssSSS``): header, hash slots, entries, chains.

The file does not record its geometry (maxHashSlotNum, maxIndexNum: broker settings).
When the caller does not give them, they are inferred: the default 1:4 ratio, else the
slot counts that put the last entry where the header's endPhyOffset occurs in the file;
the first one where entry 0 is blank, entry 1 holds the header's beginPhyOffset, the
last entry its endPhyOffset, and the last entry's slot names that entry (putKey leaves
each slot naming its newest entry) is taken. A file with no entries is read with the
default ratio, or with a sibling's geometry (IndexFiles.open_all).

Files are mapped read-only; nothing is ever written. A file too short for a header, or
whose entries cannot be located, raises FormatError naming it.
"""
from __future__ import annotations

import dataclasses
import mmap
import os
import pathlib
import struct
from typing import Iterator

from rmqtool.errors import FormatError, NotAStore, StoreAccessError, StoreNotFound
from rmqtool.findings import Finding
from rmqtool.formats.derive import struct_of
from rmqtool.formats.indexfile import (FILE_NAME_LENGTH, FIRST_INDEX, HASH_SLOT_SIZE, INDEX_HEADER_SIZE,
                                       INDEX_SIZE, INVALID_INDEX, IndexEntry, IndexHeader, IndexSlot,
                                       entry_position, index_file_size, slot_of, slot_position)
from rmqtool.store.segments import list_dir
from rmqtool.store.paths import INDEX_DIR

INDEX_HEADER = struct_of(IndexHeader)
INDEX_SLOT = struct_of(IndexSlot)
INDEX_ENTRY = struct_of(IndexEntry)


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
        """IndexHeader.load: a file never written to stores 0, read as 1."""
        return max(self.index_count, FIRST_INDEX)


@dataclasses.dataclass(slots=True, frozen=True)
class IndexEntryRecord:
    number: int  # the entry's index in the file (1..index_count-1)
    key_hash: int
    phy_offset: int
    time_diff: int  # seconds after the header's beginTimestamp
    prev_index: int
    position: int  # byte position in the file


def _default_geometry(file_size: int) -> tuple[int, int] | None:
    """The broker's default ratio, maxIndexNum = 4 * maxHashSlotNum, if the size fits it."""
    body = file_size - INDEX_HEADER_SIZE
    per_slot = HASH_SLOT_SIZE + 4 * INDEX_SIZE
    if body > 0 and body % per_slot == 0:
        return body // per_slot, 4 * (body // per_slot)
    return None


def _geometry_for_slots(file_size: int, hash_slot_num: int) -> tuple[int, int] | None:
    """(hash_slot_num, index_num) if that many slots leave room for a whole number of entries."""
    rest = file_size - INDEX_HEADER_SIZE - hash_slot_num * HASH_SLOT_SIZE
    if hash_slot_num > 0 and rest > 0 and rest % INDEX_SIZE == 0:
        return hash_slot_num, rest // INDEX_SIZE
    return None


class IndexFile:
    """One index file, mapped read-only. Use as a context manager, or call close()."""

    def __init__(self, path: str | os.PathLike, hash_slot_num: int | None = None,
                 index_num: int | None = None):
        self.path = pathlib.Path(path)
        self.findings: list[Finding] = []
        self._map = self._open()
        self.file_size = len(self._map)
        self.header = IndexFileHeader(*INDEX_HEADER.unpack_from(self._map, 0))
        if hash_slot_num is None or index_num is None:
            try:
                hash_slot_num, index_num = self._infer_geometry()
            except FormatError:
                self.close()
                raise
        elif index_file_size(hash_slot_num, index_num) != self.file_size:
            self.findings.append(Finding(
                "segmentSizeOdd", str(self.path), None,
                f"size {self.file_size} is not {index_file_size(hash_slot_num, index_num)} "
                f"for {hash_slot_num} slots and {index_num} entries"))
        self.hash_slot_num: int | None = hash_slot_num
        self.index_num: int | None = index_num

    def _open(self) -> mmap.mmap:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise StoreNotFound("no such file", self.path) from None
        except OSError as exc:
            raise StoreAccessError(f"cannot open ({exc.strerror})", self.path) from None
        try:
            size = os.fstat(fd).st_size
            if size < INDEX_HEADER_SIZE:
                raise FormatError(f"not an index file: {size} bytes, shorter than the "
                                  f"{INDEX_HEADER_SIZE}-byte header", self.path)
            return mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise StoreAccessError(f"cannot map ({exc.strerror})", self.path) from None
        finally:
            os.close(fd)

    def close(self):
        self._map.close()

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

    def _entry_fields(self, hash_slot_num: int, number: int) -> tuple | None:
        position = entry_position(hash_slot_num, number)
        if position + INDEX_SIZE > self.file_size:
            return None
        return INDEX_ENTRY.unpack_from(self._map, position)

    def _geometry_fits(self, hash_slot_num: int, index_num: int) -> bool:
        h = self.header
        if not FIRST_INDEX < h.index_count <= index_num:
            return False
        blank = self._entry_fields(hash_slot_num, 0)
        first = self._entry_fields(hash_slot_num, FIRST_INDEX)
        last = self._entry_fields(hash_slot_num, h.index_count - 1)
        if blank != (0, 0, 0, 0) or first is None or last is None:
            return False
        if first[1] != h.begin_phy_offset or first[3] != INVALID_INDEX or last[1] != h.end_phy_offset:
            return False
        if last[0] < 0:
            return False
        slot = INDEX_SLOT.unpack_from(self._map, slot_position(slot_of(last[0], hash_slot_num)))[0]
        return slot == h.index_count - 1

    def _infer_geometry(self) -> tuple[int | None, int | None]:
        default = _default_geometry(self.file_size)
        if self.header.index_count <= FIRST_INDEX:
            # Nothing written, so nothing to check a guess against: only the default ratio.
            if default:
                return default
            self.findings.append(Finding("indexGeometryUnknown", str(self.path), None,
                                         "no entries written and the size does not fit the default ratio"))
            return None, None
        for slots, entries in self._geometry_candidates(default):
            if self._geometry_fits(slots, entries):
                return slots, entries
        raise FormatError(f"not an index file: header indexCount {self.header.index_count} and size "
                          f"{self.file_size} fit no slot count whose entries match the header", self.path)

    def _geometry_candidates(self, default: tuple[int, int] | None) -> Iterator[tuple[int, int]]:
        """The default ratio first; then every place the last entry's phyOffset (the header's
        endPhyOffset) occurs, read as that entry; every slot count only as a last resort."""
        if default:
            yield default
        last = self.header.index_count - 1
        pattern = struct.pack(">q", self.header.end_phy_offset)
        if any(pattern):  # a zero pattern matches everywhere: no help
            pos = self._map.find(pattern, INDEX_HEADER_SIZE)
            while pos != -1:
                slot_bytes = pos - 4 - INDEX_HEADER_SIZE - last * INDEX_SIZE
                if slot_bytes > 0 and slot_bytes % HASH_SLOT_SIZE == 0:
                    candidate = _geometry_for_slots(self.file_size, slot_bytes // HASH_SLOT_SIZE)
                    if candidate and candidate != default:
                        yield candidate
                pos = self._map.find(pattern, pos + 1)
            return
        for slots in range(1, (self.file_size - INDEX_HEADER_SIZE) // HASH_SLOT_SIZE):
            candidate = _geometry_for_slots(self.file_size, slots)
            if candidate and candidate != default:
                yield candidate

    def slot(self, slot: int) -> int:
        """The raw slot value: the newest entry number of this slot's chain (0: none)."""
        if self.hash_slot_num is None or not 0 <= slot < self.hash_slot_num:
            raise IndexError(f"slot {slot} out of range")
        return INDEX_SLOT.unpack_from(self._map, slot_position(slot))[0]

    def iter_slots(self) -> Iterator[tuple[int, int]]:
        """(slot, value) for every slot in use."""
        if self.hash_slot_num is None:
            return
        values = struct.unpack_from(f">{self.hash_slot_num}i", self._map, INDEX_HEADER_SIZE)
        for slot, value in enumerate(values):
            if value != INVALID_INDEX:
                yield slot, value

    def entry(self, number: int) -> IndexEntryRecord | None:
        """Entry by number, or None past the file end or when the geometry is unknown."""
        if self.hash_slot_num is None or number < 0:
            return None
        fields = self._entry_fields(self.hash_slot_num, number)
        if fields is None:
            return None
        return IndexEntryRecord(number, *fields, entry_position(self.hash_slot_num, number))

    def iter_entries(self) -> Iterator[IndexEntryRecord]:
        """Entries 1..indexCount-1, in write order."""
        if self.hash_slot_num is None:
            return
        for number in range(FIRST_INDEX, max(self.header.index_count, FIRST_INDEX)):
            record = self.entry(number)
            if record is None:
                self.findings.append(Finding("recordTruncated", str(self.path), None,
                                             f"indexCount {self.header.index_count} runs past the file end"))
                return
            yield record

    def timestamp_of(self, entry: IndexEntryRecord) -> int:
        """The entry's store time as selectPhyOffset computes it (whole seconds)."""
        return self.header.begin_timestamp + entry.time_diff * 1000

    def lookup_chain(self, key_hash: int) -> Iterator[tuple[int, IndexEntryRecord]]:
        """Walk the slot of key_hash newest to oldest, as IndexFile.selectPhyOffset does:
        (entry number, entry) for every entry on the chain, whatever its own keyHash
        (callers compare it: different keys share slots). Stops at prevIndex 0, at a
        number outside 1..indexCount, at a negative timeDiff, or where the chain loops."""
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
                self.findings.append(Finding("indexChainBroken", str(self.path), None,
                                             f"entry {number} is past the file end or has a negative timeDiff"))
                return
            yield number, entry
            previous = entry.prev_index
            if previous <= INVALID_INDEX or previous > count:
                return
            if previous in seen:
                self.findings.append(Finding("indexChainBroken", str(self.path), entry.position,
                                             f"chain loops back from entry {number} to entry {previous}"))
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
        """Open every file; one that cannot be read becomes a finding instead. A file with
        no entries takes its geometry from a sibling of the same size (one broker config)."""
        files = []
        for path in self.paths:
            try:
                files.append(IndexFile(path, hash_slot_num, index_num))
            except FormatError as exc:
                self.findings.append(Finding("indexFileUnreadable", str(path), exc.offset, exc.message))
        known = {f.file_size: (f.hash_slot_num, f.index_num) for f in files if f.hash_slot_num is not None}
        for i, f in enumerate(files):
            if f.hash_slot_num is None and f.file_size in known:
                f.close()
                files[i] = IndexFile(f.path, *known[f.file_size])
        return files


def list_index_files(store_root: str | os.PathLike) -> IndexFiles:
    """The index files of a store root (an absent index/ is an empty list)."""
    directory = pathlib.Path(store_root) / INDEX_DIR
    if not pathlib.Path(store_root).is_dir():
        raise StoreNotFound("no such directory", store_root)
    findings: list[Finding] = []
    if not directory.exists():
        return IndexFiles([], findings)
    if not directory.is_dir():
        raise NotAStore("not a directory", directory)
    paths = []
    for entry in list_dir(directory):
        if is_index_file_name(entry.name) and entry.is_file():
            paths.append(pathlib.Path(entry.path))
        else:
            findings.append(Finding("indexFileNameInvalid", entry.path, None,
                                    "not an index file (name is not yyyyMMddHHmmssSSS); ignored"))
    return IndexFiles(paths, findings)

