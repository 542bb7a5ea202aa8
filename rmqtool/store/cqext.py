"""The read side of a queue's ConsumeQueueExt (``consumequeue_ext/<topic>/<queueId>/``).

What the broker's ``ConsumeQueueExt`` does with these files, without writing a byte: where
``recover`` ends the last file (its walk skips units by their size field and stops at the first
size <= 0), what ``get(address)`` finds at an address (the unit, or why the lookup fails, which
``ConsumeQueue``'s iterator then logs as "[BUG] can't find consume queue extend file content"),
and every unit a file holds up to its read position, in order (``walk``). Layouts: ``formats/cqext.py``.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import pathlib
from typing import Iterator

from rmqtool.errors import StoreAccessError
from rmqtool.findings import CQ_EXT_ADDRESS_DANGLING, CQ_EXT_GARBAGE_AFTER_END, Finding
from rmqtool.formats.cqext import (CQ_EXT_END_MARK, CQ_EXT_MIN_UNIT_SIZE, DEFAULT_CQ_EXT_FILE_SIZE, CqExtUnitHeader,
                                   ext_addr_to_offset, ext_offset_to_addr, is_ext_addr)
from rmqtool.formats.derive import struct_of
from rmqtool.store.consumequeue import queue_directories
from rmqtool.store.paths import CONSUMEQUEUE_DIR, CONSUMEQUEUE_EXT_DIR
from rmqtool.store.segments import Segment, discover

EXT_HEADER = struct_of(CqExtUnitHeader)

# Why a walk of a file stopped before its read position (the truth files' names).
FILL_TO_END_MARKER = "FILL_TO_END_MARKER"  # the -1 fullFillToEnd wrote: the file is full
ZERO = "ZERO"  # a size field of 0: nothing written there
UNREADABLE_UNIT = "UNREADABLE_UNIT"  # a negative size, or a unit that does not fit before the read position

# Why ConsumeQueueExt.get(address) finds no unit (OK: it does).
LOOKUP_OK = "OK"
LOOKUP_NO_FILE = "NO_FILE"  # findMappedFileByOffset: no file holds the offset
LOOKUP_PAST_WRITE_POSITION = "PAST_WRITE_POSITION"  # selectMappedBuffer: at or past the file's read position
LOOKUP_UNREADABLE = "UNREADABLE_UNIT"  # CqExtUnit.read refuses the bytes there (size < 1, cut short)


@dataclasses.dataclass(slots=True, frozen=True)
class ExtUnit:
    """One ``CqExtUnit`` as read: the real tags hash, the store time, the filter bit map."""
    size: int
    tags_code: int
    msg_store_time: int
    bit_map_size: int
    filter_bit_map: bytes | None  # None when bitMapSize < 1 (CqExtUnit.getFilterBitMap)

    @property
    def bit_map_hex(self) -> str | None:
        return None if self.filter_bit_map is None else self.filter_bit_map.hex()


@dataclasses.dataclass(slots=True, frozen=True)
class WalkEntry:
    """A unit found at ``real_offset`` (``unit`` set), or where a file's walk stopped (``stop``)."""
    real_offset: int
    path: str
    pos_in_file: int
    unit: ExtUnit | None = None
    size_field: int | None = None
    stop: str | None = None

    @property
    def address(self) -> int:
        return ext_offset_to_addr(self.real_offset)

    @property
    def file(self) -> str:
        return os.path.basename(self.path)


@dataclasses.dataclass(slots=True, frozen=True)
class ExtLookup:
    """What ``ConsumeQueueExt.get(address)`` returns: the unit, or why not (``status``)."""
    address: int
    real_offset: int
    status: str
    unit: ExtUnit | None = None
    path: str | None = None
    pos_in_file: int | None = None

    @property
    def ok(self) -> bool:
        return self.unit is not None


def _read_unit(buf: bytes, pos: int, limit: int) -> tuple[ExtUnit | None, int]:
    """CqExtUnit.read over ``buf[pos:limit]``: (unit, size field); None when it refuses
    (size < 1) or the buffer ends inside the unit (a BufferUnderflowException in Java)."""
    if pos + 2 > limit:
        return None, 0
    size = int.from_bytes(buf[pos:pos + 2], "big", signed=True)
    if size < 1 or pos + CQ_EXT_MIN_UNIT_SIZE > limit:
        return None, size
    size, tags_code, store_time, bit_map_size = EXT_HEADER.unpack_from(buf, pos)
    if bit_map_size < 1:
        return ExtUnit(size, tags_code, store_time, bit_map_size, None), size
    start = pos + CQ_EXT_MIN_UNIT_SIZE
    if start + bit_map_size > limit:
        return None, size
    return ExtUnit(size, tags_code, store_time, bit_map_size, bytes(buf[start:start + bit_map_size])), size


def _stop_reason(size_field: int) -> str:
    if size_field == CQ_EXT_END_MARK:
        return FILL_TO_END_MARKER
    return ZERO if size_field == 0 else UNREADABLE_UNIT


class ConsumeQueueExt:
    """One queue's ext files, as the broker loads and recovers them (read only)."""

    def __init__(self, directory: str | os.PathLike, topic: str, queue_id: int,
                 mapped_file_size: int | None = None):
        self.directory = pathlib.Path(directory)
        self.topic = topic
        self.queue_id = queue_id
        listing = discover(self.directory, required=False, mapped_file_size=mapped_file_size)
        self.segments: list[Segment] = listing.segments
        # the size the files show (every file is mappedFileSizeConsumeQueueExt bytes), else the default
        self.mapped_file_size: int = listing.mapped_file_size or DEFAULT_CQ_EXT_FILE_SIZE
        self.findings: list[Finding] = listing.findings
        self._cache: tuple[Segment, bytes] | None = None
        self._recovered_end: int | None = None

    def _bytes(self, seg: Segment) -> bytes:
        """A file's bytes, as long as the mapped file (a short file reads as zeros past its end)."""
        if self._cache is None or self._cache[0] != seg:
            try:
                with open(seg.path, "rb") as f:
                    data = f.read(self.mapped_file_size)
            except OSError as exc:
                raise StoreAccessError(f"cannot read ({exc.strerror})", seg.path) from None
            self._cache = (seg, data.ljust(self.mapped_file_size, b"\0"))
        return self._cache[1]

    # --- recover: where the write position lands -------------------------------------------
    def skip_walk_end(self, seg: Segment, start: int = 0) -> int:
        """Where ConsumeQueueExt.recover's walk of one file stops: units skipped by their size
        field (garbage with a positive size is skipped too), ended by the first size <= 0."""
        return self.skip_walk(seg, start)[0]

    def skip_walk(self, seg: Segment, start: int = 0) -> tuple[int, int]:
        """recover's walk of one file from ``start``: (where it stops, the units it skipped)."""
        buf = self._bytes(seg)
        pos, units = start, 0
        while pos + 2 <= self.mapped_file_size:
            size = int.from_bytes(buf[pos:pos + 2], "big", signed=True)
            if size <= 0 or pos + size > self.mapped_file_size:
                break
            pos += size
            units += 1
        return pos, units

    def skip_walk_overrun(self) -> int | None:
        """Where recover's walk of the last file meets a size that skips past the file's end
        (a real offset; None: it does not): readBySkip's ``buffer.position`` past the limit
        throws IllegalArgumentException out of the broker's load. Garbage a damaged size
        skips into can hold such a size; the walk here stops there instead of throwing."""
        last = self.segments[-1] if self.segments else None
        if last is None:
            return None
        pos = self.recovered_end - last.base_offset  # where the walk stopped (walked once, kept)
        buf = self._bytes(last)
        if pos + 2 <= self.mapped_file_size and pos + int.from_bytes(buf[pos:pos + 2], "big", signed=True) \
                > self.mapped_file_size:
            return last.base_offset + pos
        return None

    @property
    def recovered_end(self) -> int:
        """recover's processOffset (a real offset): the last file's base plus its walk's end;
        every earlier file stays full (wrotePosition = the file size, as load leaves it)."""
        if self._recovered_end is None:
            last = self.segments[-1] if self.segments else None
            self._recovered_end = 0 if last is None else last.base_offset + self.skip_walk_end(last)
        return self._recovered_end

    def truncated_end(self, max_address: int) -> int:
        """Where recover and then truncateByMaxAddress(max_address) leave the write position (a
        real offset): one past the unit at the consume queue's last ext address; when there is
        no unit there ("[BUG] address ... not found") or the address is none, nothing is cut."""
        if not is_ext_addr(max_address):
            return self.recovered_end
        found = self.get(max_address)
        if not found.ok:
            return self.recovered_end
        return found.real_offset + found.unit.size

    def read_position(self, seg: Segment, end: int | None = None) -> int:
        """A file's read position after truncateDirtyFiles(end) (default: recover's end)."""
        end = self.recovered_end if end is None else end
        if seg.base_offset + self.mapped_file_size <= end:
            return self.mapped_file_size
        return max(0, end - seg.base_offset)

    @property
    def min_address(self) -> int:
        return ext_offset_to_addr(self.segments[0].base_offset if self.segments else 0)

    def max_address(self, end: int | None = None) -> int:
        """getMaxAddress: the last file's base plus its write position, decorated."""
        return ext_offset_to_addr(self.recovered_end if end is None else end)

    # --- get and walk --------------------------------------------------------------------------
    def find_segment(self, real_offset: int) -> Segment | None:
        """MappedFileQueue.findMappedFileByOffset(offset, returnFirstOnNotFound = offset == 0)."""
        if not self.segments:
            return None
        first, last, size = self.segments[0], self.segments[-1], self.mapped_file_size
        if first.base_offset <= real_offset < last.base_offset + size:
            for seg in self.segments:
                if seg.base_offset <= real_offset < seg.base_offset + size:
                    return seg
        return first if real_offset == 0 else None

    def get(self, address: int, end: int | None = None) -> ExtLookup:
        """ConsumeQueueExt.get(address): the unit there, or why there is none. ``end``: the
        write position to read against (default: where recover leaves it)."""
        real = ext_addr_to_offset(address)
        seg = self.find_segment(real) if is_ext_addr(address) else None
        if seg is None:
            return ExtLookup(address, real, LOOKUP_NO_FILE)
        pos = real % self.mapped_file_size
        limit = self.read_position(seg, end)
        if pos >= limit:
            return ExtLookup(address, real, LOOKUP_PAST_WRITE_POSITION, None, str(seg.path), pos)
        unit, _ = _read_unit(self._bytes(seg), pos, limit)
        return ExtLookup(address, real, LOOKUP_OK if unit else LOOKUP_UNREADABLE, unit, str(seg.path), pos)

    def walk(self, end: int | None = None) -> Iterator[WalkEntry]:
        """Every unit ConsumeQueueExt.get finds from the start of each file up to its read
        position, and where a file's walk stopped before it (a file ending at its read
        position has no stop entry)."""
        for seg in self.segments:
            limit = self.read_position(seg, end)
            buf = self._bytes(seg)
            pos = 0
            while pos < limit:
                unit, size_field = _read_unit(buf, pos, limit)
                if unit is None:
                    yield WalkEntry(seg.base_offset + pos, str(seg.path), pos, size_field=size_field,
                                    stop=_stop_reason(size_field))
                    break
                yield WalkEntry(seg.base_offset + pos, str(seg.path), pos, unit, size_field)
                pos += unit.size

    def garbage_after_end(self, end: int | None = None) -> tuple[Segment, int] | None:
        """(file, position) where bytes that are not all zero start past the write position ``end``
        (default: recover's) in its file (beyond the -1 marker, if that is what stopped the walk), or None."""
        end = self.recovered_end if end is None else end
        seg = next((s for s in reversed(self.segments) if s.base_offset <= end), None)
        if seg is None:
            return None
        pos = end - seg.base_offset
        if pos >= self.mapped_file_size:
            return None
        buf = self._bytes(seg)
        if int.from_bytes(buf[pos:pos + 2], "big", signed=True) == CQ_EXT_END_MARK:
            pos += 2  # the file was filled to its end: the marker is the broker's
        if not buf[pos:].strip(b"\0"):
            return None
        return seg, pos


def garbage_finding(ext: ConsumeQueueExt, end: int | None = None) -> Finding | None:
    """Non-zero bytes past the write position of the ext's last file (``end``: the write
    position the broker's start leaves, default recover's)."""
    end = ext.recovered_end if end is None else end
    found = ext.garbage_after_end(end)
    if found is None:
        return None
    seg, pos = found
    return Finding(CQ_EXT_GARBAGE_AFTER_END, str(seg.path), pos,
                   f"non-zero bytes from {pos}, past the ext write position {end - seg.base_offset} the broker's "
                   f"start leaves in this file: the next ext units of {ext.topic}/{ext.queue_id} are "
                   f"written over them")


def ext_directory(cq_directory: str | os.PathLike) -> pathlib.Path:
    """The ext directory of a consume queue directory (``.../consumequeue/T/Q`` -> ``.../consumequeue_ext/T/Q``)."""
    cq_directory = pathlib.Path(cq_directory)
    return cq_directory.parent.parent.parent / CONSUMEQUEUE_EXT_DIR / cq_directory.parent.name / cq_directory.name


def cq_directory(ext_dir: str | os.PathLike) -> pathlib.Path:
    """The consume queue directory of an ext directory (``.../consumequeue_ext/T/Q`` -> ``.../consumequeue/T/Q``)."""
    ext_dir = pathlib.Path(ext_dir)
    return ext_dir.parent.parent.parent / CONSUMEQUEUE_DIR / ext_dir.parent.name / ext_dir.name


def ext_beside(cq_directory: str | os.PathLike, topic: str, queue_id: int) -> ConsumeQueueExt | None:
    """The queue's ConsumeQueueExt when its directory exists beside ``consumequeue/`` (the store
    then runs with enableConsumeQueueExt), else None."""
    cq_directory = pathlib.Path(cq_directory)
    if cq_directory.parent.parent.name != CONSUMEQUEUE_DIR:
        return None
    directory = ext_directory(cq_directory)
    return ConsumeQueueExt(directory, topic, queue_id) if directory.is_dir() else None


def open_exts(store_root: str | os.PathLike, findings: list[Finding] | None = None) -> list[ConsumeQueueExt]:
    """Every ``consumequeue_ext/TOPIC/QUEUEID/`` of a store, sorted as the broker walks them."""
    base = pathlib.Path(store_root) / CONSUMEQUEUE_EXT_DIR
    size = _shown_file_size(pathlib.Path(store_root))  # every queue's files together: one cut short is the odd one
    return [ConsumeQueueExt(d, topic, qid, size) for topic, qid, d in queue_directories(base, findings)]


@dataclasses.dataclass(frozen=True, slots=True)
class ExtWriting:
    """Whether dispatch to this store's plain consume queues writes ext units
    (ConsumeQueue.isExtWriteEnable: the broker runs with enableConsumeQueueExt), the ext file
    size it writes them with (mappedFileSizeConsumeQueueExt), and what says so."""
    enabled: bool
    file_size: int
    reason: str
    size_from: str = "default"  # what says file_size: "config" (--broker-config), "files", or "default"


def ext_writing(store_root: str | os.PathLike, broker_config=None) -> ExtWriting:
    """The one answer to "does this store's dispatch write ext units": the broker config's
    enableConsumeQueueExt when a ``--broker-config`` names it (false: the broker neither reads
    nor writes the ext), else whether ``consumequeue_ext/`` is there (only such a broker makes
    it). The file size: the config's mappedFileSizeConsumeQueueExt, else the ext files' own,
    else the default."""
    root = pathlib.Path(store_root)
    said = broker_config.bool_setting("enableConsumeQueueExt") if broker_config is not None else None
    if said is not None:
        enabled, reason = said
    else:
        enabled = (root / CONSUMEQUEUE_EXT_DIR).is_dir()
        reason = (f"{CONSUMEQUEUE_EXT_DIR}/ is there: the broker runs with enableConsumeQueueExt" if enabled
                  else f"no {CONSUMEQUEUE_EXT_DIR}/")
    size = broker_config.int_setting("mappedFileSizeConsumeQueueExt", DEFAULT_CQ_EXT_FILE_SIZE) \
        if broker_config is not None else None
    if size is not None:
        return ExtWriting(enabled, size[0], reason, "config")
    shown = _shown_file_size(root) if enabled else None
    return ExtWriting(enabled, shown or DEFAULT_CQ_EXT_FILE_SIZE, reason, "files" if shown else "default")


def _shown_file_size(root: pathlib.Path) -> int | None:
    """mappedFileSizeConsumeQueueExt as the ext files of every queue show it together (one
    queue's single file cut short must not set it for all), else None."""
    sizes = collections.Counter()
    for _topic, _queue_id, directory in queue_directories(root / CONSUMEQUEUE_EXT_DIR):
        sizes.update(seg.size for seg in discover(directory, required=False).segments if seg.size > 0)
    if not sizes:
        return None
    size, count = sizes.most_common(1)[0]
    return size if count >= 2 else max(sizes)


def queue_max_ext_address(queue) -> int:
    """The maxExtAddr ConsumeQueue.recover hands truncateByMaxAddress: the tagsCode of the
    queue's last written unit when it is an ext address (else 1, which cuts nothing)."""
    last = queue.get(queue.max_offset - 1) if queue.max_offset > 0 else None
    return last.tags_code if last is not None and is_ext_addr(last.tags_code) else 1


@dataclasses.dataclass(slots=True)
class QueueExt:
    """A consume queue's ext as the broker reads it after its start: the ext files (None when
    the queue has no ext directory) and the write position recover and truncateByMaxAddress
    leave (``end``, a real offset)."""
    ext: ConsumeQueueExt | None
    end: int | None

    def lookup(self, tags_code_field: int) -> ExtLookup | None:
        """What the consume queue's iterator finds for a unit's tagsCode field: None when the
        field is a tags hash, else the lookup (``getExt``)."""
        if not is_ext_addr(tags_code_field):
            return None
        if self.ext is None:
            return ExtLookup(tags_code_field, ext_addr_to_offset(tags_code_field), LOOKUP_NO_FILE)
        return self.ext.get(tags_code_field, self.end)


def queue_ext(queue) -> QueueExt:
    """The ext of a plain consume queue (``store.consumequeue.ConsumeQueue``)."""
    ext = ext_beside(queue.directory, queue.topic, queue.queue_id)
    return QueueExt(ext, None if ext is None else ext.truncated_end(queue_max_ext_address(queue)))


class DanglingRuns:
    """Runs of consecutive units of a queue whose ext lookup fails, one finding a run (at its
    first unit's file and position)."""

    def __init__(self, topic: str, queue_id: int):
        self.topic, self.queue_id = topic, queue_id
        self.runs: list[list] = []  # [first queue offset, last queue offset, path, position, status, ext offset]

    def add(self, queue_offset: int, path: str, position: int, found: ExtLookup) -> None:
        if found.ok:
            return
        last = self.runs[-1] if self.runs else None
        if last is not None and last[1] == queue_offset - 1 and last[4] == found.status:
            last[1] = queue_offset
        else:
            self.runs.append([queue_offset, queue_offset, path, position, found.status, found.real_offset])

    def findings(self) -> list[Finding]:
        return [Finding(CQ_EXT_ADDRESS_DANGLING, path, position,
                        f"queue offsets {first}..{last} of {self.topic}/{self.queue_id} ({last - first + 1} units): "
                        f"their ext address finds no ext unit ({status}, the first at ext offset {real}); getMessage "
                        f"gets no tagsCode for them, so TAG filtering falls back to the client and SQL92 groups to "
                        f"the commit log check")
                for first, last, path, position, status, real in self.runs]
