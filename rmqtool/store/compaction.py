"""The compaction store of a 5.x broker, read: ``compaction/compactionLog``, ``compactionCq``
and ``position-checkpoint`` (layouts: ``formats/compaction.py``).

The log's records are read by the commit log scanner (``commitlog.scan_segment``): a
compaction log file is a commit log segment named by the log offset of its first byte,
and its records' PHYSICALOFFSET fields hold those log offsets. What a consumer of a
compacted topic sees is what ``CompactionStore.getMessage`` walks: the compaction queue's
units, in order, each naming a record of the log.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Iterator

from rmqtool.errors import FormatError, StoreAccessError
from rmqtool.findings import CONFIG_UNPARSEABLE, SEGMENT_GAP, SEGMENT_OVERLAP, Consequence, Finding, finding
from rmqtool.formats.compaction import (CHECKPOINT_NONE, COMPACTION_CQ_DIR, COMPACTION_CQ_UNIT,
                                        COMPACTION_CQ_UNIT_SIZE, COMPACTION_DIR, COMPACTION_LOG_DIR,
                                        POSITION_CHECKPOINT_FILE, checkpoint_key, is_end_position)
from rmqtool.formats.derive import struct_of
from rmqtool.store.commitlog import Blank, Corrupt, ScanResult, scan_segment
from rmqtool.store.config import read_config_file
from rmqtool.store.consumequeue import queue_id_of
from rmqtool.store.message import Message
from rmqtool.store.segments import Segment, SegmentQueue, discover, list_dir

_UNIT = struct_of(COMPACTION_CQ_UNIT)
_UNITS_A_READ = 4096
_ZERO_UNIT = bytes(COMPACTION_CQ_UNIT_SIZE)
# the properties a record of a compacted topic is keyed by (CompactionLog: msg.getKeys())
_KEYS = "KEYS"


@dataclasses.dataclass(slots=True, frozen=True)
class CompactionCqUnit:
    """One 46-byte slot of a compaction queue file (an END_POSITION unit included)."""
    topic: str
    queue_id: int
    queue_offset: int  # msgBaseOffset
    log_offset: int  # commitLogOffset: the record's offset in the compaction log (-1: END_POSITION)
    size: int
    tags_code: int
    store_timestamp: int
    batch_num: int
    compacted_offset: int
    reserved: bytes
    path: str
    position: int

    @property
    def is_end_position(self) -> bool:
        return is_end_position(self.log_offset, self.size, self.batch_num)


def record_keys(message: Message) -> str | None:
    """The key compaction groups a record by: the whole KEYS string (``user-7 user-8`` is one key)."""
    return message.properties.get(_KEYS)


def is_tombstone(message: Message) -> bool:
    """An empty body: once compaction covers it, it removes its key and is dropped itself."""
    return not message.body


@dataclasses.dataclass
class CompactionQueue:
    """One topic-queue of the compaction store: its log files, its CQ files, its checkpoint."""
    topic: str
    queue_id: int
    log: SegmentQueue
    cq: SegmentQueue
    checkpoint: int  # CompactionPositionMgr.getOffset: -1 when the queue was never compacted

    def scan(self, *, check_crc: bool = True, findings: list | None = None) -> Iterator[ScanResult]:
        """Every record of the log, file by file: messages, END_OF_FILE blanks, damaged regions.
        Every file may end without a blank (a compacted file is not closed with one)."""
        for seg in self.log.segments:
            yield from scan_segment(seg, is_last=True, check_crc=check_crc, findings=findings)

    def messages(self, *, check_crc: bool = True) -> list[Message]:
        return [r for r in self.scan(check_crc=check_crc) if isinstance(r, Message)]

    def units(self) -> Iterator[CompactionCqUnit]:
        """Every written slot of every CQ file, up to each file's first all-zero slot."""
        for seg in self.cq.segments:
            yield from _file_units(seg, self.topic, self.queue_id)

    def latest_by_key(self, messages: list[Message] | None = None) -> dict[str, Message]:
        """The last record of each key in the log, by queue offset: what a full compaction keeps
        (a key whose last record is a tombstone is removed once compaction covers it)."""
        latest: dict[str, Message] = {}
        for m in sorted(self.messages() if messages is None else messages, key=lambda m: m.queue_offset):
            key = record_keys(m)
            if key is not None:
                latest[key] = m
        return latest


def _file_units(seg: Segment, topic: str, queue_id: int) -> Iterator[CompactionCqUnit]:
    size = COMPACTION_CQ_UNIT_SIZE
    path = str(seg.path)
    try:
        f = open(seg.path, "rb")
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", path) from None
    with f:
        pos = 0
        while pos + size <= seg.size:
            chunk = f.read(min(_UNITS_A_READ, (seg.size - pos) // size) * size)
            if len(chunk) < size:
                return
            for i in range(0, len(chunk) - size + 1, size):
                raw = chunk[i:i + size]
                if raw == _ZERO_UNIT:
                    return
                log_offset, unit_size, tags_code, ts, base, batch, compacted, reserved = _UNIT.unpack(raw)
                yield CompactionCqUnit(topic, queue_id, base, log_offset, unit_size, tags_code, ts, batch, compacted,
                                       reserved, path, pos + i)
            pos += len(chunk)


@dataclasses.dataclass
class CompactionStore:
    root: pathlib.Path  # <store>/compaction
    queues: list[CompactionQueue]
    checkpoint_offsets: dict[str, int]  # position-checkpoint's queueOffsetMap as loaded (.bak fallback)
    checkpoint_path: str | None  # the file it was loaded from; None: nothing loaded
    findings: list[Finding]
    orphan_cq_dirs: list[pathlib.Path]  # compactionCq/<topic>/<queueId> with no log directory

    @property
    def present(self) -> bool:
        return self.root.is_dir()


def _queue_dirs(base: pathlib.Path) -> dict[tuple[str, int], pathlib.Path]:
    found = {}
    if not base.is_dir():
        return found
    for topic in list_dir(base):
        if not topic.is_dir():
            continue
        for queue in list_dir(topic.path):
            queue_id = queue_id_of(queue.name)
            if queue.is_dir() and queue_id is not None:
                found[(topic.name, queue_id)] = pathlib.Path(queue.path)
    return found


def compaction_served(store_root: str | os.PathLike) -> frozenset[tuple[str, int]]:
    """(topic, queue id) of the queues the compaction store serves: getMessage of a COMPACTION
    topic reads compaction/, not consumequeue/ (what info shows as ``served_by``)."""
    return frozenset(_queue_dirs(pathlib.Path(store_root) / COMPACTION_DIR / COMPACTION_LOG_DIR))


def read_position_checkpoint(compaction_root: str | os.PathLike) -> tuple[dict[str, int], str | None, list[Finding]]:
    """``position-checkpoint`` as CompactionPositionMgr loads it (a ConfigManager: its .bak when
    the file is missing, empty or broken): (queueOffsetMap, the file read or None, findings).
    A file neither it nor its .bak can stand for is a finding: the broker ignores load's result
    and starts with an empty map (every queue counts as never compacted)."""
    try:
        loaded = read_config_file(compaction_root, POSITION_CHECKPOINT_FILE)
        path, doc = loaded.path, loaded.document
        table = doc.get("queueOffsetMap") if isinstance(doc, dict) else None
        if (doc is not None and not isinstance(doc, dict)) or (table is not None and not isinstance(table, dict)):
            raise FormatError("not CompactionPositionMgr's JSON (an object with a queueOffsetMap object)", path)
        offsets: dict[str, int] = {}
        for key, value in (table or {}).items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise FormatError(f"queueOffsetMap[{key!r}] is not a number", path)
            offsets[str(key)] = value
    except FormatError as exc:
        return {}, None, [finding(CONFIG_UNPARSEABLE, exc.path, exc.offset, f"{exc.message}: the broker starts "
                                  f"with no compaction checkpoint (every queue counts as never compacted)",
                                  consequence=Consequence.NONE)]
    return offsets, path if loaded.source else None, list(loaded.findings)


def open_compaction_store(store_root: str | os.PathLike) -> CompactionStore:
    """The compaction store under a store root (empty when the store has none)."""
    root = pathlib.Path(store_root) / COMPACTION_DIR
    findings: list[Finding] = []
    offsets, cp_path = {}, None
    if root.is_dir():
        offsets, cp_path, found = read_position_checkpoint(root)
        findings += found
    logs = _queue_dirs(root / COMPACTION_LOG_DIR)
    cqs = _queue_dirs(root / COMPACTION_CQ_DIR)
    queues = []
    for (topic, queue_id), log_dir in sorted(logs.items()):
        log = discover(log_dir)
        cq = discover(cqs[(topic, queue_id)], required=False) if (topic, queue_id) in cqs else \
            SegmentQueue(root / COMPACTION_CQ_DIR / topic / str(queue_id), [], None, [])
        # names are log offsets in both folders and compaction leaves gaps between them: the
        # segment geometry is no finding here, only names and reads
        findings += [f for f in log.findings + cq.findings if f.id not in (SEGMENT_GAP, SEGMENT_OVERLAP)]
        queues.append(CompactionQueue(topic, queue_id, log, cq,
                                      offsets.get(checkpoint_key(topic, queue_id), CHECKPOINT_NONE)))
    orphans = [d for k, d in sorted(cqs.items()) if k not in logs]
    return CompactionStore(root, queues, offsets, cp_path, findings, orphans)


@dataclasses.dataclass(slots=True)
class ConsumerView:
    """What ``CompactionStore.getMessage`` gives a consumer of a compacted queue."""
    min_offset: int  # the first unit's queue offset (0 for an empty queue)
    max_offset: int  # one past the last unit's queue offset
    messages: list[tuple[CompactionCqUnit, Message]]  # the units a consumer is served, with their records


def consumer_view(queue: CompactionQueue, messages: list[Message] | None = None) -> ConsumerView:
    """The queue offsets a consumer of the compacted topic reads: every CQ unit (END_POSITION
    units skipped) whose record is there, in order; the offsets compacted away are skipped."""
    by_offset = {m.commit_log_offset: m for m in (queue.messages() if messages is None else messages)}
    units = [u for u in queue.units() if not u.is_end_position]
    served = [(u, by_offset[u.log_offset]) for u in units if u.log_offset in by_offset]
    if not units:
        return ConsumerView(0, 0, [])
    return ConsumerView(units[0].queue_offset, units[-1].queue_offset + 1, served)


__all__ = ["Blank", "Corrupt", "CompactionCqUnit", "CompactionQueue", "CompactionStore", "ConsumerView",
           "consumer_view", "is_tombstone", "open_compaction_store", "read_position_checkpoint", "record_keys"]
