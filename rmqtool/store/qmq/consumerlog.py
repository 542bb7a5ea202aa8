"""Reading QMQ's consumer logs: ``consumerlog/<subject>/``, a unit per sequence.

Layouts in ``formats/qmq/consumerlog.py``. Which unit a store writes is a broker switch
(``consumerlog.v2.enable``), not in the files, so it is read from what they show: a
segment's size (220,000,000 bytes for V1 units, 320,000,000 for V2) when the file is whole,
else the V2 magic 0xA3B2 at the start of its first written unit (a V1 unit starts with a
millisecond timestamp, whose top bytes are zero for thousands of years).
A segment's units end with its last unit that is not all zeros: QMQ's start keeps a consumer
log up to the checkpoint's max sequence (``MaxSequenceLogSegmentValidator`` reads no byte), so
a run of zero units before written ones (a page lost in a crash) is units still, each read as
its bytes say (a V1 one as a message-log index of offset 0 and 0 bytes, a V2 one as of no
kind), and the units after it are served.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
from typing import Iterator

import construct as cs
import numpy as np

from rmqtool.errors import StoreAccessError
from rmqtool.formats.derive import struct_of
from rmqtool.formats.qmq.consumerlog import (CONSUMER_LOG_MAGIC_V2, CONSUMER_LOG_UNIT_BYTES,
                                             CONSUMER_LOG_V2_UNIT_BYTES, SEGMENT_SIZE_V1, SEGMENT_SIZE_V2,
                                             SEGMENT_TOTAL_UNIT, TYPE_MESSAGE_LOG_INDEX, TYPE_SMT_INDEX,
                                             MessageLogIndexV2, SmtIndexV2, UnitV1, is_fill_unit)
from rmqtool.store import extents
from rmqtool.store.arrays import dtype_of
from rmqtool.store.qmq.segments import LogDirectory, list_log, read_zero_extended

_V1 = struct_of(UnitV1)
_V2_MESSAGE = struct_of(MessageLogIndexV2)
_V2_SMT = struct_of(SmtIndexV2)
_V2_HEAD = 4  # magic, type
# the same layouts as numpy rows: V1 units, and V2 units read as message-log indexes (their
# magic and type say which rows are)
V1_DTYPE = dtype_of(UnitV1)
V2_DTYPE = dtype_of(cs.Struct("magic" / cs.Int16ub, "type" / cs.Int16ub, *MessageLogIndexV2.subcons))
assert V2_DTYPE.itemsize == CONSUMER_LOG_V2_UNIT_BYTES
KINDS = ("message", "smt", "fill", "invalid")  # UnitColumns.kind codes
MESSAGE, SMT, FILL, INVALID = range(4)


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerLogUnit:
    subject: str
    sequence: int
    path: str
    position: int
    kind: str  # "message" (a message-log index), "smt" (an SMT index), "fill", "invalid"
    timestamp: int
    wrote_offset: int = 0  # message: the record's start in the message log
    wrote_bytes: int = 0
    header_size: int = 0
    tablet_id: int = 0  # smt
    smt_position: int = 0
    smt_size: int = 0


def unit_bytes_of(directory: LogDirectory) -> int | None:
    """22 or 32, from the segments' sizes or their first unit; None for a log with no unit."""
    for seg in directory.segments:
        if seg.file_size in (SEGMENT_SIZE_V1, SEGMENT_SIZE_V2):
            return CONSUMER_LOG_UNIT_BYTES if seg.file_size == SEGMENT_SIZE_V1 else CONSUMER_LOG_V2_UNIT_BYTES
    for seg in directory.segments:
        head = read_zero_extended(seg, 0, 2)
        if seg.file_size >= 2:
            return CONSUMER_LOG_V2_UNIT_BYTES if int.from_bytes(head, "big") == CONSUMER_LOG_MAGIC_V2 \
                else CONSUMER_LOG_UNIT_BYTES
    return None


def subject_directory(store: str | os.PathLike, subject: str) -> pathlib.Path:
    """A subject's consumer log directory as QMQ names it: ``new File(consumerLogDir, subject)``.
    Java's File collapses repeated '/', drops a trailing one, and joins a subject that starts
    with '/' without a second (pathlib would take it as an absolute path: a damaged subject
    "/x" is consumerlog/x to QMQ, not /x). ".." stays as it is, as Java keeps it."""
    child = re.sub("/+", "/", subject).strip("/")
    base = pathlib.Path(store) / "consumerlog"
    return base / child if child else base


def outside_its_own(store: str | os.PathLike, directory: pathlib.Path) -> bool:
    """Whether a subject's directory is not one of its own under consumerlog/: that directory
    itself (a subject "", "/" or "."), or one a ".." takes elsewhere. rmqtool writes nothing
    there; QMQ would load whatever that directory holds."""
    base = os.path.normpath(pathlib.Path(store) / "consumerlog")
    return not os.path.normpath(directory).startswith(base + os.sep)


def open_consumer_log(store: str | os.PathLike, subject: str, unit_bytes: int | None = None) -> tuple[LogDirectory, int | None]:
    """A subject's consumer log directory and its unit size (given, else read from the files)."""
    directory = subject_directory(store, subject)
    probe = list_log(directory, SEGMENT_SIZE_V1)
    unit = unit_bytes or unit_bytes_of(probe)
    if unit is None or unit == CONSUMER_LOG_UNIT_BYTES:
        return probe, unit
    return list_log(directory, unit * SEGMENT_TOTAL_UNIT), unit


def decode_unit(subject: str, sequence: int, path: str, position: int, raw: bytes) -> ConsumerLogUnit:
    if len(raw) == CONSUMER_LOG_UNIT_BYTES:
        ts, off, size, header = _V1.unpack(raw)
        kind = "fill" if is_fill_unit(off, size, header) else "message"
        return ConsumerLogUnit(subject, sequence, path, position, kind, ts, off, size, header)
    magic, unit_type = int.from_bytes(raw[:2], "big"), int.from_bytes(raw[2:4], "big")
    if magic == CONSUMER_LOG_MAGIC_V2 and unit_type == TYPE_MESSAGE_LOG_INDEX:
        ts, off, size, header, _ = _V2_MESSAGE.unpack(raw[_V2_HEAD:])
        kind = "fill" if is_fill_unit(off, size, header) else "message"
        return ConsumerLogUnit(subject, sequence, path, position, kind, ts, off, size, header)
    if magic == CONSUMER_LOG_MAGIC_V2 and unit_type == TYPE_SMT_INDEX:
        ts, tablet, pos, size, _ = _V2_SMT.unpack(raw[_V2_HEAD:])
        return ConsumerLogUnit(subject, sequence, path, position, "smt", ts, tablet_id=tablet, smt_position=pos,
                               smt_size=size)
    return ConsumerLogUnit(subject, sequence, path, position, "invalid", 0)


def written_units_end(seg, unit_bytes: int) -> int:
    """Where a segment's units end: just past its last unit that is not all zeros (0 for none);
    holes are not read."""
    if not seg.file_size:
        return 0
    try:
        fd = os.open(seg.path, os.O_RDONLY)
    except OSError as exc:
        raise StoreAccessError(f"cannot open ({exc.strerror})", seg.path) from None
    try:
        end = extents.last_nonzero(fd, 0, min(seg.file_size, seg.size), lambda at, n: os.pread(fd, n, at),
                                   1 << 20, seg.path)
    finally:
        os.close(fd)
    return 0 if end is None else min(-(-end // unit_bytes) * unit_bytes, seg.size - seg.size % unit_bytes)


def read_units(directory: LogDirectory, unit_bytes: int, subject: str) -> Iterator[ConsumerLogUnit]:
    """Every written unit of a consumer log, in sequence order: each segment's up to its last
    unit that is not all zeros."""
    chunk = unit_bytes * 65536  # units are read a chunk at a time: a segment holds 10,000,000
    for seg in directory.segments:
        end = written_units_end(seg, unit_bytes)
        for start in range(0, end, chunk):
            data = read_zero_extended(seg, start, min(chunk, end - start))
            for at in range(0, len(data) - unit_bytes + 1, unit_bytes):
                position = start + at
                yield decode_unit(subject, (seg.base_offset + position) // unit_bytes, str(seg.path), position,
                                  data[at:at + unit_bytes])


@dataclasses.dataclass(frozen=True, slots=True)
class UnitColumns:
    """Units of one segment (a chunk of it) as columns, the rows ``read_units`` gives. Positions
    and sequences rise by one unit a row: they are computed when asked, not held."""
    path: str
    start: int  # the first unit's position in the segment file
    first_sequence: int
    unit_bytes: int
    kind: np.ndarray  # an index into KINDS
    wrote_offset: np.ndarray  # message and fill units; 0 elsewhere
    wrote_bytes: np.ndarray
    header_size: np.ndarray
    timestamp: np.ndarray | None = None  # when asked for (unit_columns' timestamps); 0 for an invalid unit

    def __len__(self) -> int:
        return len(self.kind)

    @property
    def position(self) -> np.ndarray:
        return self.start + np.arange(len(self.kind), dtype=np.int64) * self.unit_bytes

    @property
    def sequence(self) -> np.ndarray:
        return self.first_sequence + np.arange(len(self.kind), dtype=np.int64)


def _unit_columns(seg, start: int, data: bytes, count: int, unit_bytes: int, timestamps: bool = False) -> UnitColumns:
    if unit_bytes == CONSUMER_LOG_UNIT_BYTES:
        rows = np.frombuffer(data, V1_DTYPE, count)
        message = np.ones(count, bool)
        kind = np.full(count, MESSAGE, np.int8)
    else:
        rows = np.frombuffer(data, V2_DTYPE, count)
        magic_ok = rows["magic"] == CONSUMER_LOG_MAGIC_V2
        message = magic_ok & (rows["type"] == TYPE_MESSAGE_LOG_INDEX)
        kind = np.where(message, MESSAGE, np.where(magic_ok & (rows["type"] == TYPE_SMT_INDEX), SMT, INVALID))
    every = unit_bytes == CONSUMER_LOG_UNIT_BYTES  # V1: every unit is a message unit
    off, size, header = (rows[f].astype(np.int64) if every else np.where(message, rows[f].astype(np.int64), 0)
                         for f in ("wrote_offset", "wrote_bytes", "header_size"))
    kind = np.where(message & is_fill_unit(off, size, header), FILL, kind).astype(np.int8)
    # an SMT unit's timestamp lies where a message-log index's does; an invalid unit has none
    times = np.where(kind == INVALID, 0, rows["timestamp"].astype(np.int64)) if timestamps else None
    if seg is None:
        return UnitColumns("", start, start // unit_bytes, unit_bytes, kind, off, size, header, times)
    return UnitColumns(str(seg.path), start, (seg.base_offset + start) // unit_bytes, unit_bytes, kind, off, size,
                       header, times)


def unit_columns_of(data, position: int, count: int, unit_bytes: int) -> UnitColumns:
    """``count`` whole units of ``data`` (a segment's bytes) from ``position``, as columns
    (no path, sequences relative to the first)."""
    return _unit_columns(None, position, memoryview(data)[position:position + count * unit_bytes], count,
                         unit_bytes)


def unit_columns(directory: LogDirectory, unit_bytes: int, timestamps: bool = False) -> Iterator[UnitColumns]:
    """``read_units`` as columns: the same units, a chunk of a segment at a time (their
    timestamps too when asked)."""
    chunk = unit_bytes * 65536
    for seg in directory.segments:
        end = written_units_end(seg, unit_bytes)
        for start in range(0, end, chunk):
            data = read_zero_extended(seg, start, min(chunk, end - start))
            yield _unit_columns(seg, start, data, len(data) // unit_bytes, unit_bytes, timestamps)


def subjects(store: str | os.PathLike) -> list[str]:
    """Every directory under consumerlog/ (what the files hold; :func:`loaded_subjects`: what QMQ loads)."""
    root = pathlib.Path(store) / "consumerlog"
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


# Guava CharMatcher.breakingWhitespace(): whitespace but the non-breaking spaces
_NON_BREAKING = {"\u00a0", "\u2007", "\u202f"}


def has_breaking_whitespace(name: str) -> bool:
    return any((c.isspace() or c in "\u180e\u200b") and c not in _NON_BREAKING for c in name)


def loaded_subjects(store: str | os.PathLike) -> list[str]:
    """The consumer log directories QMQ loads: ConsumerLogManager.loadConsumerLogs skips a name
    with breaking whitespace ("consumer log directory name is invalid, skip"), which it then
    neither truncates nor serves."""
    return [s for s in subjects(store) if not has_breaking_whitespace(s)]


CONSUMER_LOG_V2_ENABLE = "consumerlog.v2.enable"  # BrokerConstants.CONSUMER_LOG_V2_ENABLE


def unit_bytes_configured(conf) -> tuple[int, str] | None:
    """(consumer log unit bytes, what says so) as a QMQ broker run with the config file ``conf``
    (a BrokerConfig, or None: not given) writes them: StorageConfigImpl.isConsumerLogV2Enable
    reads ``consumerlog.v2.enable`` through LocalDynamicConfig.getBoolean (the value trimmed,
    blank or absent the default false, else Boolean.valueOf)."""
    from rmqtool.store.broker_conf import java_trim
    if conf is None:
        return None
    value = java_trim(conf.settings.get(CONSUMER_LOG_V2_ENABLE) or "")
    v2 = value.lower() == "true"
    said = f"{CONSUMER_LOG_V2_ENABLE}={value}" if value else f"no {CONSUMER_LOG_V2_ENABLE} (false)"
    return (CONSUMER_LOG_V2_UNIT_BYTES if v2 else CONSUMER_LOG_UNIT_BYTES), f"{conf.path}: {said}"
