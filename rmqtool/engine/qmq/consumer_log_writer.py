"""Consumer-log segment files written as QMQ's appenders write them.

Units are ``formats/qmq/consumerlog.py``'s, packed through the numpy rows derived from the schema:
V1 (22 bytes) or V2 (32 bytes, magic 0xA3B2, type message-log index); a fill unit is a
message-log index unit pointing nowhere (``fillPreBlank``). A segment file is written
sparse: its units, then a hole up to the segment size (QMQ maps it at full size).
"""
from __future__ import annotations

import functools
import pathlib
from typing import Callable, Iterator

import numpy as np

from rmqtool.formats.qmq.consumerlog import (CONSUMER_LOG_MAGIC_V2, CONSUMER_LOG_UNIT_BYTES, SEGMENT_TOTAL_UNIT,
                                             TYPE_MESSAGE_LOG_INDEX)
from rmqtool.recovery.qmq.plan import ConsumerLogRewrite, UnitRows
from rmqtool.store.qmq.consumerlog import V1_DTYPE, V2_DTYPE
from rmqtool.store.qmq.segments import list_log, read_zero_extended


def packed_units(units: UnitRows, size: int) -> bytes:
    """The units' bytes, a unit of ``size`` bytes each, packed at once through the schemas'
    numpy rows (a V2 unit a message-log index: its magic and type, reserved bytes zero)."""
    rows = np.zeros(len(units), V1_DTYPE if size == CONSUMER_LOG_UNIT_BYTES else V2_DTYPE)
    if size != CONSUMER_LOG_UNIT_BYTES:
        rows["magic"], rows["type"] = CONSUMER_LOG_MAGIC_V2, TYPE_MESSAGE_LOG_INDEX
    rows["timestamp"], rows["wrote_offset"] = units.timestamp, units.wrote_offset
    rows["wrote_bytes"], rows["header_size"] = units.wrote_bytes, units.header_size
    return rows.tobytes()


def segment_files(rw: ConsumerLogRewrite) -> tuple[dict[pathlib.Path, Callable[[], Iterator[bytes]]],
                                                    list[pathlib.Path]]:
    """The segment files a rewrite writes (path -> what makes its bytes before the hole, in
    parts, when the file is staged: a few MB in memory at a time) and the ones it removes
    (wholly past the new last unit)."""
    directory = pathlib.Path(rw.directory)
    seg_size = rw.unit_bytes * SEGMENT_TOTAL_UNIT
    first_pos = rw.first_sequence * rw.unit_bytes
    end_pos = first_pos + len(rw.units) * rw.unit_bytes
    existing = {s.base_offset: s for s in list_log(directory, seg_size).segments}
    bases = {b for b in existing if b + seg_size > first_pos}
    bases |= set(range(first_pos - first_pos % seg_size, end_pos, seg_size))
    writes, removes = {}, []
    for base in sorted(bases):
        path = directory / f"{base:020d}"
        lo, hi = max(first_pos, base), min(end_pos, base + seg_size)
        if lo >= hi and base >= first_pos:
            if base in existing:
                removes.append(path)
            continue
        writes[path] = functools.partial(_segment_parts, rw, existing.get(base), min(first_pos, base + seg_size) - base,
                                         (lo - first_pos) // rw.unit_bytes, (hi - first_pos) // rw.unit_bytes)
    return writes, removes


PART_UNITS = 1 << 18  # units packed at once: 8 MB of V2 units
PART_BYTES = 8 << 20  # bytes of a segment's kept head read at once


def _segment_parts(rw: ConsumerLogRewrite, segment, kept: int, lo: int, hi: int) -> Iterator[bytes]:
    """A segment's bytes before its hole, in parts: its first ``kept`` bytes as they are (zeros
    for a new file), then the rewrite's units ``lo`` to ``hi``."""
    for at in range(0, max(0, kept), PART_BYTES):
        n = min(PART_BYTES, kept - at)
        yield read_zero_extended(segment, at, n) if segment is not None else bytes(n)
    for at in range(lo, hi, PART_UNITS):
        yield packed_units(rw.units.part(at, min(at + PART_UNITS, hi)), rw.unit_bytes)
