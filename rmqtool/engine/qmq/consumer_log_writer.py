"""Consumer-log segment files written as QMQ's appenders write them.

Units are ``formats/qmq/consumerlog.py``'s, packed with the struct derived from the schema:
V1 (22 bytes) or V2 (32 bytes, magic 0xA3B2, type message-log index); a fill unit is a
message-log index unit pointing nowhere (``fillPreBlank``). A segment file is written
sparse: its units, then a hole up to the segment size (QMQ maps it at full size).
"""
from __future__ import annotations

import pathlib

from rmqtool.formats.derive import struct_of
from rmqtool.formats.qmq.consumerlog import (CONSUMER_LOG_MAGIC_V2, CONSUMER_LOG_UNIT_BYTES, SEGMENT_TOTAL_UNIT,
                                             TYPE_MESSAGE_LOG_INDEX, MessageLogIndexV2, UnitV1)
from rmqtool.recovery.qmq.plan import ConsumerLogRewrite, UnitSpec
from rmqtool.store.qmq.segments import list_log, read_zero_extended

_V1 = struct_of(UnitV1)
_V2_INDEX = struct_of(MessageLogIndexV2)
_V2_HEAD = CONSUMER_LOG_MAGIC_V2.to_bytes(2, "big") + TYPE_MESSAGE_LOG_INDEX.to_bytes(2, "big")
_V2_RESERVED = bytes(6)


def unit_bytes_of(unit: UnitSpec, size: int) -> bytes:
    if size == CONSUMER_LOG_UNIT_BYTES:
        return _V1.pack(unit.timestamp, unit.wrote_offset, unit.wrote_bytes, unit.header_size)
    return _V2_HEAD + _V2_INDEX.pack(unit.timestamp, unit.wrote_offset, unit.wrote_bytes, unit.header_size,
                                     _V2_RESERVED)


def segment_files(rw: ConsumerLogRewrite) -> tuple[dict[pathlib.Path, bytes], list[pathlib.Path]]:
    """The segment files a rewrite writes (path -> its bytes before the hole) and the ones it
    removes (wholly past the new last unit)."""
    directory = pathlib.Path(rw.directory)
    seg_size = rw.unit_bytes * SEGMENT_TOTAL_UNIT
    first_pos = rw.first_sequence * rw.unit_bytes
    end_pos = first_pos + len(rw.units) * rw.unit_bytes
    existing = {s.base_offset: s for s in list_log(directory, seg_size).segments}
    bases = {b for b in existing if b + seg_size > first_pos}
    bases |= set(range(first_pos - first_pos % seg_size, end_pos, seg_size))
    packed = b"".join(unit_bytes_of(u, rw.unit_bytes) for u in rw.units)
    writes, removes = {}, []
    for base in sorted(bases):
        path = directory / f"{base:020d}"
        lo, hi = max(first_pos, base), min(end_pos, base + seg_size)
        if lo >= hi and base >= first_pos:
            if base in existing:
                removes.append(path)
            continue
        kept = read_zero_extended(existing[base], 0, max(0, min(first_pos, base + seg_size) - base)) \
            if base in existing else bytes(max(0, min(first_pos, base + seg_size) - base))
        writes[path] = kept + packed[lo - first_pos:hi - first_pos]
    return writes, removes
