"""Fast builder of large synthetic commit logs: valid records, the layout taken from the schemas.

One template record per (topic, queue) is built with ``formats/commitlog.py``'s
MessageRecord, so every byte of the layout comes from the schema. Each message is a
copy of its template with the fields that change patched in place with ``pack_into``
structs derived from the same schemas: queueOffset, physicalOffset, the timestamps,
the first 8 body bytes (the message number), the UNIQ_KEY's last 12 hex digits, the body
CRC and, with ``append_prop_crc``, the 5.x ``__CRC32#`` digits. Segments end as the
broker ends them (an 8-byte blank record when the next message does not fit, the rest
zero), so a scan reads the output clean. About 1 GiB in a few seconds.

Every value a message gets is a pure function of its number (``GenSpec.body(i)`` and so
on), so tests can check a scan against what was asked for.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import random
import shutil
import struct
import sys

import construct as cs

from rmqtool.errors import UsageError
from rmqtool.formats import crc as crc_rules
from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import (END_FILE_MIN_BLANK_LENGTH, MAX_TOPIC_LENGTH_V1, MESSAGE_MAGIC_CODE_V1,
                                       MESSAGE_MAGIC_CODE_V2, BlankRecord, MessageHosts,
                                       MessagePrefix, MessageRecord, message_length)
from rmqtool.formats.derive import field_names, struct_of
from rmqtool.formats.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG
from rmqtool.store.crc import crc32
from rmqtool.store.paths import COMMITLOG_DIR, is_segment_name, segment_name

GEN_VERSION = 1  # bump when the bytes written for a spec change: cached stores are rebuilt
MANIFEST = "gen.json"
CHUNK = 16 << 20  # bytes written at once; memory stays flat whatever the size
STORE_HOST_V4 = (bytes([192, 0, 2, 10]), 10911)  # documentation ranges, as in the fixtures
STORE_HOST_V6 = (bytes.fromhex("20010db8000000000000000000000010"), 10911)
BORN_PORT = 53000
UNIQ_KEY_HEAD = "C63364070FA01B2C3D4E"  # producer ip 198.51.100.7, pid, class loader hash
UNIQ_KEY_TAIL_DIGITS = 12  # the per-message part: time since month start and counter
# RocketMQ 5.x writes V2 records for topics longer than this (autoMessageVersionOnTopicLen)


def _field_run(schema: cs.Struct, first: str, count: int) -> tuple[int, struct.Struct]:
    """(byte offset, struct) of ``count`` consecutive fields of a fixed-size schema, from the schema."""
    k = field_names(schema).index(first)
    offset = cs.Struct(*schema.subcons[:k]).sizeof()
    return offset, struct_of(cs.Struct(*schema.subcons[k:k + count]))


# queueOffset, physicalOffset, sysFlag, bornTimestamp: one run in the prefix
_QUEUE_RUN_AT, _QUEUE_RUN = _field_run(MessagePrefix, "queue_offset", 4)
_BODY_CRC_AT, _BODY_CRC = _field_run(MessagePrefix, "body_crc", 1)
_STORE_TS_AT = tuple(MessagePrefix.sizeof() + _field_run(h, "store_timestamp", 1)[0] for h in MessageHosts)
_STORE_TS = _field_run(MessageHosts[0], "store_timestamp", 1)[1]
assert _QUEUE_RUN.format.endswith("qqlq"), _QUEUE_RUN.format


@dataclasses.dataclass(frozen=True)
class GenSpec:
    """What to write. Messages go round robin over the (topic, queue) pairs."""

    segment_size: int = 1 << 30
    segments: int = 1  # segments to fill, each ended by a blank record (when message_count is None)
    message_count: int | None = None  # else: write this many, in as many segments as they need
    body_size: int = 1024
    topics: tuple[str, ...] = ("BenchTopicA", "BenchTopicB", "BenchTopicC")
    queues: int = 4
    ipv6_queues: tuple[int, ...] = ()  # queue ids whose born and store hosts are IPv6
    append_prop_crc: bool = False  # 5.x enabledAppendPropCRC: a trailing __CRC32# property
    start_timestamp: int = 1_717_200_000_000
    seed: int = 1

    @property
    def pairs(self) -> int:
        return len(self.topics) * self.queues

    def topic(self, i: int) -> str:
        return self.topics[(i % self.pairs) // self.queues]

    def queue_id(self, i: int) -> int:
        return i % self.pairs % self.queues

    def queue_offset(self, i: int) -> int:
        return i // self.pairs

    def ipv6(self, i: int) -> bool:
        return self.queue_id(i) in self.ipv6_queues

    def born_timestamp(self, i: int) -> int:
        return self.start_timestamp + i

    def store_timestamp(self, i: int) -> int:
        return self.start_timestamp + i + 3

    def body_pattern(self) -> bytes:
        return random.Random(self.seed).randbytes(self.body_size)

    def body(self, i: int) -> bytes:
        """The message number (8 bytes, big-endian) over the seeded pattern, cut to body_size."""
        return (i.to_bytes(8, "big") + self.body_pattern()[8:])[:self.body_size]

    def uniq_key(self, i: int) -> str:
        return UNIQ_KEY_HEAD + f"{i:0{UNIQ_KEY_TAIL_DIGITS}X}"

    def properties(self, i: int) -> dict[str, str]:
        """The properties a message gets, without the __CRC32# entry."""
        return {
            props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: self.uniq_key(i),
            props.PROPERTY_CLUSTER: "DefaultCluster",
            props.PROPERTY_TAGS: f"Tag{self.queue_id(i) % 3}",
            props.PROPERTY_KEYS: f"bench-{self.queue_id(i)} key-{self.queue_id(i)}",
        }

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, obj: dict) -> "GenSpec":
        obj = dict(obj)
        obj["topics"] = tuple(obj["topics"])
        obj["ipv6_queues"] = tuple(obj["ipv6_queues"])
        return cls(**obj)


@dataclasses.dataclass
class SegmentInfo:
    base_offset: int
    first_message: int  # number of the segment's first message
    messages: int
    record_bytes: int  # bytes of message records, blank record not counted
    blank_position: int | None  # where the end-of-file blank record lies, None when there is none


@dataclasses.dataclass
class GenResult:
    commitlog: pathlib.Path
    spec: GenSpec
    message_count: int
    record_bytes: int
    segments: list[SegmentInfo]

    def to_json(self) -> dict:
        return {"version": GEN_VERSION, "spec": self.spec.to_json(), "message_count": self.message_count,
                "record_bytes": self.record_bytes, "segments": [dataclasses.asdict(s) for s in self.segments]}

    @classmethod
    def from_json(cls, commitlog: pathlib.Path, obj: dict) -> "GenResult":
        return cls(pathlib.Path(commitlog), GenSpec.from_json(obj["spec"]), obj["message_count"],
                   obj["record_bytes"], [SegmentInfo(**s) for s in obj["segments"]])


@dataclasses.dataclass
class _Template:
    raw: bytes  # the whole record for message number `pair` (fields patched per message)
    sys_flag: int
    store_ts_at: int
    body_at: int
    uniq_at: int  # byte position of the UNIQ_KEY's per-message digits


def _template(spec: GenSpec, pair: int) -> _Template:
    v6 = spec.ipv6(pair)
    sys_flag = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG if v6 else 0
    topic = spec.topic(pair).encode("utf-8")
    magic = MESSAGE_MAGIC_CODE_V2 if len(topic) > MAX_TOPIC_LENGTH_V1 else MESSAGE_MAGIC_CODE_V1
    text = props.properties_to_string(spec.properties(pair))
    if spec.append_prop_crc:
        # as 5.x CommitLog does: end with a separator, then the reserved __CRC32# entry
        if not text.endswith(props.PROPERTY_SEPARATOR):
            text += props.PROPERTY_SEPARATOR
        text += crc_rules.crc32_property(0).decode()
    properties = text.encode("utf-8")
    body = spec.body(pair)
    store_ip, store_port = STORE_HOST_V6 if v6 else STORE_HOST_V4
    born_ip = bytes.fromhex("20010db8000000010000000000000007") if v6 else bytes([198, 51, 100, 7])
    total = message_length(sys_flag, len(body), len(topic), len(properties), magic)
    raw = MessageRecord.build(dict(
        total_size=total, magic_code=magic, body_crc=0, queue_id=spec.queue_id(pair), flag=0,
        queue_offset=0, physical_offset=0, sys_flag=sys_flag, born_timestamp=0, born_host=born_ip,
        born_port=BORN_PORT, store_timestamp=0, store_host=store_ip, store_port=store_port,
        reconsume_times=0, prepared_transaction_offset=0, body=body, topic=topic, properties=properties))
    assert len(raw) == total
    hosts = (sys_flag >> 4) & 3
    body_at = MessagePrefix.sizeof() + MessageHosts[hosts].sizeof()
    uniq = spec.uniq_key(pair).encode("ascii")
    uniq_at = raw.index(uniq, body_at + len(body)) + len(uniq) - UNIQ_KEY_TAIL_DIGITS
    return _Template(raw, sys_flag, _STORE_TS_AT[hosts], body_at, uniq_at)


def build_commitlog(directory: str | os.PathLike, spec: GenSpec) -> GenResult:
    """Write the segments of ``spec`` into ``directory`` (created; it must hold no segment yet)."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if any(is_segment_name(p.name) for p in directory.iterdir()):
        raise UsageError("directory already holds commit log segments", directory)
    if spec.message_count is None and spec.segments < 1:
        raise UsageError("nothing to write: segments < 1 and no message_count", directory)
    templates = [_template(spec, k) for k in range(spec.pairs)]
    longest = max(len(t.raw) for t in templates)
    if longest + END_FILE_MIN_BLANK_LENGTH > spec.segment_size:
        raise UsageError(f"a {longest}-byte record does not fit in a {spec.segment_size}-byte segment", directory)
    chunk = bytearray(max(CHUNK, longest))
    segments: list[SegmentInfo] = []
    i = 0
    while (i < spec.message_count) if spec.message_count is not None else (len(segments) < spec.segments):
        base = len(segments) * spec.segment_size
        with open(directory / segment_name(base), "xb") as f:
            info = _fill_segment(f, chunk, templates, spec, base, i)
            f.truncate(spec.segment_size)  # the unwritten rest is zero, as in a pre-allocated file
        segments.append(info)
        i += info.messages
    return GenResult(directory, spec, i, sum(s.record_bytes for s in segments), segments)


def _fill_segment(f, chunk: bytearray, templates: list[_Template], spec: GenSpec, base: int,
                  first: int) -> SegmentInfo:
    """Write messages from number ``first`` until the segment is full or message_count is reached."""
    view = memoryview(chunk)
    pairs = len(templates)
    size = spec.segment_size
    stop = spec.message_count if spec.message_count is not None else 1 << 62
    t0 = spec.start_timestamp
    body_size = spec.body_size
    marker_size = min(8, body_size)
    prop_crc = spec.append_prop_crc
    crc_tail = crc_rules.CRC32_DIGITS + 1  # the digits and the closing separator
    pack_run, pack_crc, pack_ts = _QUEUE_RUN.pack_into, _BODY_CRC.pack_into, _STORE_TS.pack_into
    run_at, crc_at = _QUEUE_RUN_AT, _BODY_CRC_AT
    used = 0  # bytes of chunk not yet written
    pos = 0  # position in the segment
    i = first
    blank_position = None
    while i < stop:
        t = templates[i % pairs]
        raw = t.raw
        n = len(raw)
        if pos + n + END_FILE_MIN_BLANK_LENGTH > size:
            blank = BlankRecord.build(dict(total_size=size - pos))
            if used + len(blank) > len(chunk):
                f.write(view[:used])
                used = 0
            chunk[used:used + len(blank)] = blank
            used += len(blank)
            blank_position = pos
            break
        if used + n > len(chunk):
            f.write(view[:used])
            used = 0
        chunk[used:used + n] = raw
        # the values of GenSpec.queue_offset, born_timestamp and store_timestamp, inlined
        pack_run(chunk, used + run_at, i // pairs, base + pos, t.sys_flag, t0 + i)
        pack_ts(chunk, used + t.store_ts_at, t0 + i + 3)
        body_at = used + t.body_at
        if marker_size:
            chunk[body_at:body_at + marker_size] = i.to_bytes(8, "big")[:marker_size]
            pack_crc(chunk, used + crc_at, crc32(view[body_at:body_at + body_size]))
        uniq_at = used + t.uniq_at
        chunk[uniq_at:uniq_at + UNIQ_KEY_TAIL_DIGITS] = b"%012X" % i
        if prop_crc:
            end = used + n
            digits = crc_rules.crc32_property_digits(crc32(view[used:end - crc_rules.CRC32_RESERVED_LEN]))
            chunk[end - crc_tail:end - 1] = digits.encode("ascii")
        used += n
        pos += n
        i += 1
    f.write(view[:used])
    return SegmentInfo(base, first, i - first, pos, blank_position)


def ensure_store(root: str | os.PathLike, spec: GenSpec) -> GenResult:
    """``root/commitlog`` built for ``spec``; reused when ``root/gen.json`` says it already is."""
    root = pathlib.Path(root)
    commitlog = root / COMMITLOG_DIR
    manifest = root / MANIFEST
    if manifest.exists():
        try:
            obj = json.loads(manifest.read_text())
            result = GenResult.from_json(commitlog, obj)
            if obj.get("version") == GEN_VERSION and result.spec == spec and _intact(result):
                return result
        except (ValueError, KeyError, TypeError):
            pass  # unreadable manifest: rebuild
    manifest.unlink(missing_ok=True)
    if commitlog.exists():
        shutil.rmtree(commitlog)
    result = build_commitlog(commitlog, spec)
    manifest.write_text(json.dumps(result.to_json(), indent=1))
    return result


def _intact(result: GenResult) -> bool:
    names = sorted(p.name for p in result.commitlog.iterdir()) if result.commitlog.is_dir() else []
    expected = [segment_name(s.base_offset) for s in result.segments]
    return names == expected and all(
        (result.commitlog / n).stat().st_size == result.spec.segment_size for n in names)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gen", description=__doc__.splitlines()[0])
    ap.add_argument("root", type=pathlib.Path, help="store root; the segments go to ROOT/commitlog")
    ap.add_argument("--segment-mib", type=int, default=1024)
    ap.add_argument("--segments", type=int, default=1)
    ap.add_argument("--messages", type=int, default=None)
    ap.add_argument("--body-size", type=int, default=1024)
    args = ap.parse_args(argv)
    spec = GenSpec(segment_size=args.segment_mib << 20, segments=args.segments,
                   message_count=args.messages, body_size=args.body_size)
    result = ensure_store(args.root, spec)
    print(f"{result.message_count} messages, {result.record_bytes} record bytes, "
          f"{len(result.segments)} segment(s) in {result.commitlog}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
