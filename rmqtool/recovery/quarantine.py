"""recover --keep-past-damage: where the broker's recovery walk fails a record and cuts the
log there, the record replaced in place by one of the same size that the walk accepts, so
that every later record keeps its commit log offset, queue offset and msgId (e2fsck's repair
around a bad block). This module decides, with the read side only, which records can be
replaced and with which fields; the engine builds the bytes (engine/quarantine_record.py).

A record is replaced only where its extent is proven: its totalSize is sane and the scanner's
resync (store/commitlog.find_record) lands exactly where that totalSize ends. Anything else
is refused with its reason, and the walk's cut stays where the broker puts it.
"""
from __future__ import annotations

import dataclasses

from rmqtool.dispatch.rules import DelayLevels
from rmqtool.formats.commitlog import MESSAGE_MAGIC_CODES, MIN_MESSAGE_LENGTH
from rmqtool.formats.properties import (PROPERTY_CRC32, PROPERTY_KEYS, PROPERTY_QUARANTINED, PROPERTY_TAGS,
                                        PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
from rmqtool.formats.sysflag import INNER_BATCH_FLAG
from rmqtool.recovery.commitlog_walk import MappedSegment, WalkOptions, walk
from rmqtool.store.commitlog import find_record
from rmqtool.store.message import PREFIX, RecordError, decode_message

QUARANTINE_PROPERTY = PROPERTY_QUARANTINED  # names the damage in the replacement record
# what the damaged record's consume queue unit and index entries were made of: kept, so they still match
KEPT_PROPERTIES = (PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
QUARANTINE_BODY = "rmqtool recover --keep-past-damage replaced this damaged record; the original bytes are in the " \
                  "backup directory"
MAX_QUARANTINES = 1000  # a log damaged more often than this wants salvage, not a repair in place
_PHYSICAL_OFFSET = 6  # PREFIX's physicalOffset field


@dataclasses.dataclass(frozen=True)
class Quarantine:
    """One damaged record the walk fails, and what replaces it (``refusal``: why it is not)."""
    path: str
    position: int
    offset: int  # commit log offset
    size: int  # its totalSize, kept
    reason: str  # why checkMessageAndReturnSize fails it
    fields_from: str = ""  # "record" (decoded without its CRC), "header" (its fixed fields), "neighbours"
    topic: str | None = None
    queue_id: int | None = None
    queue_offset: int | None = None
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple = (b"\x7f\x00\x00\x01", 0)
    store_timestamp: int = 0
    store_host: tuple = (b"\x7f\x00\x00\x01", 0)
    prop_crc: bool = False  # the record (or its neighbour) carries a 5.x __CRC32# entry
    properties: tuple = ()  # (name, value) of KEPT_PROPERTIES the damaged record shows
    refusal: str | None = None

    def to_json(self) -> dict:
        out = {"path": self.path, "position": self.position, "offset": self.offset, "size": self.size,
               "reason": self.reason}
        if self.refusal is not None:
            out["refused"] = self.refusal
        else:
            out.update(fields_from=self.fields_from, topic=self.topic, queue_id=self.queue_id,
                       queue_offset=self.queue_offset, prop_crc=self.prop_crc,
                       properties_kept=dict(self.properties))
        return out


@dataclasses.dataclass(frozen=True)
class KeepPastDamage:
    """What --keep-past-damage does: the records replaced (the last may be refused: the walk
    still cuts there), the recovered end before and after, and the messages kept that the
    broker would have dropped, by queue ("TOPIC/Q" -> count)."""
    quarantines: tuple[Quarantine, ...]
    recovered_end_before: int
    recovered_end_after: int
    kept: dict
    records: dict = dataclasses.field(default_factory=dict)  # offset -> the replacement's bytes

    @property
    def replaced(self) -> tuple[Quarantine, ...]:
        return tuple(q for q in self.quarantines if q.refusal is None)

    def to_json(self) -> dict:
        return {"quarantined": [q.to_json() for q in self.quarantines],
                "recovered_end_before": self.recovered_end_before, "recovered_end_after": self.recovered_end_after,
                "kept_messages": sum(self.kept.values()), "kept_by_queue": dict(sorted(self.kept.items()))}


def plan_keep_past_damage(segments, outcome, settings, build) -> KeepPastDamage | None:
    """The records to replace, from the broker's walk (``outcome.walk``) on: each failed record
    whose extent is proven is replaced and the walk goes on after it, until it ends at the
    written end or at a record that cannot be replaced. ``build(quarantine)``: the bytes of
    its replacement, or a str saying why there is none (the engine's encoder). None: the
    walk fails no record."""
    w = outcome.walk
    if w is None or not _cut_short(w, outcome):
        return None
    options = WalkOptions(outcome.semantics, settings.check_crc, settings.verify_prop_crc)
    delay_levels = DelayLevels()
    kept: dict[str, int] = {}
    quarantines: list[Quarantine] = []
    records: dict[int, bytes] = {}
    last = w.last_record
    while _cut_short(w, outcome) and len(quarantines) < MAX_QUARANTINES:
        q = _quarantine(segments[w.file_index], w.position, w.reason, w.failed_size, last and segments[last[0]],
                        last and last[1])
        if q.refusal is None:
            data = build(q)
            if isinstance(data, str):
                q = dataclasses.replace(q, refusal=data)
            else:
                records[q.offset] = data
        quarantines.append(q)
        if q.refusal is not None:
            break
        def on_record(request, kept=kept):
            key = f"{request.topic}/{request.queue_id}"
            kept[key] = kept.get(key, 0) + 1

        w = walk(segments, w.file_index, options, delay_levels, on_record=on_record, position=w.position + q.size)
        last = w.last_record or (w.file_index, w.position)
    return KeepPastDamage(tuple(quarantines), outcome.walk.end, w.end, kept, records)


def _cut_short(w, outcome) -> bool:
    """The walk failed a record before the written end (records follow it that it drops)."""
    return w.failed_size is not None and w.end < outcome.written_end


def _quarantine(seg, pos: int, reason: str, total: int, prev_seg, prev_pos) -> Quarantine:
    where = dict(path=str(seg.path), position=pos, offset=seg.base_offset + pos, size=total, reason=reason)
    if total < MIN_MESSAGE_LENGTH or pos + total > seg.size:
        return Quarantine(**where, refusal=f"its totalSize {total} is not a record's here: its extent is unknown")
    nxt = find_record(seg, pos + 1)
    if nxt != pos + total:
        said = "no record proves itself after it" if nxt is None else f"the next record that proves itself is at " \
                                                                      f"position {nxt}, not {pos + total}"
        return Quarantine(**where, refusal=f"its extent is not proven: {said}")
    with MappedSegment(seg) as mapped:
        buf = mapped.buf
        prefix = PREFIX.unpack_from(buf, pos)
        if prefix[1] not in MESSAGE_MAGIC_CODES:
            return Quarantine(**where, refusal="its magic code is not a message's: its fields are unknown")
        record = _decoded(buf, pos, seg.base_offset + pos, pos + total)
        after = _decoded(buf, nxt, seg.base_offset + nxt, len(buf))
    before = None
    if prev_seg is not None:
        with MappedSegment(prev_seg) as mapped:
            before = _decoded(mapped.buf, prev_pos, prev_seg.base_offset + prev_pos, len(mapped.buf))
    if (record.sys_flag if record is not None else prefix[7]) & INNER_BATCH_FLAG:
        # a batch consume queue's unit spans INNER_NUM queue offsets from INNER_BASE: a plain record in its
        # place would shift the units after it
        return Quarantine(**where, refusal="an inner-batch record (a batch consume queue's): a record in its place "
                                           "cannot keep its INNER_BASE and INNER_NUM span safely")
    if record is not None:
        return _kept(where, record, "record", record.topic, record.queue_id, record.queue_offset)
    own = prefix[_PHYSICAL_OFFSET] == seg.base_offset + pos  # the header names its own offset: its fields hold
    if own:
        queue_id, queue_offset = prefix[3], prefix[5]
        for n in (after, before):
            if n is not None and n.queue_id == queue_id and abs(n.queue_offset - queue_offset) == 1:
                return _kept(where, n, "header (topic from its neighbour)", n.topic, queue_id, queue_offset,
                             sys_flag=prefix[7])
    if before is not None and after is not None and (before.topic, before.queue_id) == (after.topic, after.queue_id) \
            and after.queue_offset == before.queue_offset + 2:
        return _kept(where, before, "neighbours", before.topic, before.queue_id, before.queue_offset + 1)
    return Quarantine(**where, refusal="its topic, queue and queue offset are unreadable and its neighbours do not "
                                       "show them")


def _decoded(buf, pos: int, offset: int, limit: int):
    """The record at ``pos`` decoded without its CRC checks (None: it is not one)."""
    try:
        return decode_message(buf, pos, offset, limit, check_crc=False)
    except (RecordError, IndexError, ValueError, UnicodeDecodeError):
        return None


def _kept(where: dict, source, fields_from: str, topic, queue_id, queue_offset, sys_flag=None) -> Quarantine:
    flag = source.sys_flag if sys_flag is None else sys_flag
    return Quarantine(**where, fields_from=fields_from, topic=topic, queue_id=queue_id, queue_offset=queue_offset,
                      sys_flag=flag, born_timestamp=source.born_timestamp, born_host=(source.born_ip, source.born_port),
                      store_timestamp=source.store_timestamp, store_host=(source.store_ip, source.store_port),
                      prop_crc=PROPERTY_CRC32.encode() in source.properties_raw,
                      properties=tuple((k, source.properties[k]) for k in KEPT_PROPERTIES
                                       if fields_from == "record" and k in source.properties))
