"""One record shape: every decoder reads back what the schema builds, and refuses alike
what lies past a length field's limit (V1 topic 127 bytes, V2 topic and properties 32767:
the broker reads those fields signed).

The decoders: decode_message (the careful path: the kernel's rule on one record), the
kernel's window (clean_records, whose records scan_segment, crc_scan and the column scan
build from), and dispatch's check_message. Limits come from formats/commitlog.py, never literals.
"""
from __future__ import annotations

import ipaddress
import itertools

import construct as cs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import FIELDS, examples
from rmqtool.dispatch.dispatcher import RecordUnreadable, check_message
from rmqtool.dispatch.rules import DelayLevels, tags_code
from rmqtool.engine.encoder import Encoder
from rmqtool.engine.message_inner import MessageInner
from rmqtool.engine.uniq_key import UniqIdGenerator
from rmqtool.errors import UsageError
from rmqtool.formats import crc as crc_rules
from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import (MAX_PROPERTIES_LENGTH, MAX_TOPIC_LENGTH_V1, MAX_TOPIC_LENGTH_V2,
                                       MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, STORE_TIMESTAMP_AT, TOPIC_LENGTH_SIZE,
                                       MessageRecord, message_length)
from rmqtool.formats.msgid import OffsetMessageId, UniqKey
from rmqtool.formats.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG
from rmqtool.store.commitlog import Corrupt, CrcTally, crc_run, crc_scan, scan_segment
from rmqtool.store.message import RECORD_START, Message, RecordError, build_messages, decode_message, sys_flag_of
from rmqtool.store.record_kernel import clean_records
from rmqtool.store.msgid import create_message_id, decode_message_id, decode_uniq_key
from rmqtool.store.segments import Segment

BASE = 1 << 30  # the temp segment's base offset: records carry non-zero commit log offsets
V1, V2 = MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2
_SETTINGS = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _lengths(limit: int) -> st.SearchStrategy[int]:
    """Lengths up to ``limit``, its edges drawn often."""
    return st.one_of(st.sampled_from([0, 1, limit - 1, limit]), st.integers(0, limit))


def _topic(n: int) -> bytes:
    return bytes(65 + i % 26 for i in range(n))


def _properties(n: int, crc_entry: bool) -> bytes:
    """``n`` bytes of a properties string: KEYS, TAGS, UNIQ_KEY as far as they fit, padding,
    and (``crc_entry``) a trailing reserved __CRC32# entry, filled in once the record is built."""
    tail = crc_rules.crc32_property(0) if crc_entry and n >= crc_rules.CRC32_RESERVED_LEN else b""
    head = props.properties_to_string({props.PROPERTY_KEYS: "k1 k2", props.PROPERTY_TAGS: "TagA",
                                       props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "AC1100"},
                                      trailing_separator=True).encode()
    room = n - len(tail)
    text = head[:room]
    if room - len(text) >= 4:
        text += b"P" + props.NAME_VALUE_SEPARATOR.encode() + b"x" * (room - len(text) - 3) + (
            props.PROPERTY_SEPARATOR.encode())
    text += b"y" * (room - len(text))
    return text + tail


@st.composite
def records(draw) -> dict:
    """The fields of a record, as MessageRecord.build takes them."""
    magic = draw(st.sampled_from([V1, V2]))
    born_v6, store_v6 = draw(st.booleans()), draw(st.booleans())
    sys_flag = draw(st.sampled_from([0, 1, 4, 8, 12, 0x300 | 1])) | (BORNHOST_V6_FLAG if born_v6 else 0) | (
        STOREHOSTADDRESS_V6_FLAG if store_v6 else 0)
    topic = _topic(draw(_lengths(MAX_TOPIC_LENGTH_V1 if magic == V1 else MAX_TOPIC_LENGTH_V2)))
    properties = _properties(draw(_lengths(MAX_PROPERTIES_LENGTH)), draw(st.booleans()))
    body = draw(st.one_of(st.just(b""), st.binary(min_size=1, max_size=300)))
    return dict(
        total_size=message_length(sys_flag, len(body), len(topic), len(properties), magic), magic_code=magic,
        body_crc=crc_rules.body_crc(body), queue_id=draw(st.integers(0, 1023)), flag=draw(st.integers(-5, 5)),
        queue_offset=draw(st.integers(0, 1 << 40)), physical_offset=BASE, sys_flag=sys_flag,
        born_timestamp=draw(st.integers(0, 1 << 42)), born_host=draw(st.binary(min_size=16 if born_v6 else 4,
                                                                            max_size=16 if born_v6 else 4)),
        born_port=draw(st.integers(0, 65535)), store_timestamp=draw(st.integers(0, 1 << 42)),
        store_host=bytes(range(16 if store_v6 else 4)), store_port=draw(st.integers(0, 65535)),
        reconsume_times=draw(st.integers(0, 16)), prepared_transaction_offset=draw(st.integers(0, 1 << 40)),
        body=body, topic=topic, properties=properties)


def _build(x: dict) -> bytes:
    """The record, with its __CRC32# entry (if any) filled in as 5.x doAppend does."""
    raw = MessageRecord.build(x)
    assert len(raw) == x["total_size"]
    if crc_rules.stored_record_crc(x["properties"]) is not None:
        raw = raw[:-crc_rules.CRC32_RESERVED_LEN] + crc_rules.crc32_property(crc_rules.record_crc(raw))
        x["properties"] = raw[len(raw) - len(x["properties"]):]
    return raw


def _segment(tmp_path, raw: bytes) -> Segment:
    """A segment file holding ``raw`` at position 0, zeros after it."""
    path = tmp_path / f"{BASE:020d}"
    path.write_bytes(raw + bytes(64))
    return Segment(path, BASE, len(raw) + 64)


_RENAMED = {"store_size": "total_size", "born_ip": "born_host", "store_ip": "store_host"}


def _assert_is(m: Message, x: dict) -> None:
    assert {f: getattr(m, f) for f in FIELDS} == {f: x[_RENAMED.get(f, f)] for f in FIELDS}
    assert m.commit_log_offset == BASE and m.body == x["body"] and m.topic == x["topic"].decode()
    assert m.properties_raw == x["properties"] and m.properties_utf8_ok and m.topic_utf8_ok
    assert m.properties == props.string_to_properties(x["properties"].decode())
    assert m.body_crc_ok is True
    assert m.property_crc_ok is (True if crc_rules.stored_record_crc(x["properties"]) is not None else None)


@_SETTINGS
@given(x=records())
def test_every_decoder_reads_back_what_the_schema_builds(tmp_path, x):
    raw = _build(x)
    _assert_is(decode_message(raw, 0, BASE, len(raw)), x)
    assert MessageRecord.parse(raw).topic == x["topic"]

    records = clean_records(raw, 0, len(raw))  # the kernel takes it whole, and so does the scan
    assert (len(records), records.stop, records.refusal) == (1, len(raw), None)
    _assert_is(build_messages(raw, records, BASE, 0, None, True)[0], x)
    seg = _segment(tmp_path, raw)
    (scanned,) = list(scan_segment(seg))
    _assert_is(scanned, x)

    assert crc_run(raw, 0, len(raw), BASE, 0, None, []) == (len(raw), 1, len(raw))
    tally = CrcTally()
    assert list(crc_scan(seg, tally=tally)) == [] and (tally.messages, tally.message_bytes) == (1, len(raw))

    size, request = check_message(raw, 0, len(raw), BASE, DelayLevels())
    parsed = props.string_to_properties(x["properties"].decode())
    assert size == len(raw)
    assert request == (x["topic"].decode(), x["queue_id"], BASE, len(raw), tags_code(parsed.get(props.PROPERTY_TAGS)),
                       x["store_timestamp"], x["queue_offset"], parsed.get(props.PROPERTY_KEYS),
                       parsed.get(props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), x["sys_flag"]) + _batch_unit(parsed, x) \
        + (_multi_dispatch(parsed),)


def _multi_dispatch(parsed: dict) -> tuple | None:
    """The two multi-dispatch properties' values, when the record names queues to dispatch to."""
    if props.PROPERTY_INNER_MULTI_DISPATCH not in parsed:
        return None
    return parsed[props.PROPERTY_INNER_MULTI_DISPATCH], parsed.get(props.PROPERTY_INNER_MULTI_QUEUE_OFFSET)


def _batch_unit(parsed: dict, x: dict) -> tuple:
    """(msgBaseOffset, batchSize, inner) of a batch consume queue unit: setBatchSizeIfNeeded's
    INNER_BASE and INNER_NUM when both are there (left out of the queue when not Java numbers),
    else the queue offset and 1; inner says both properties are there."""
    if props.PROPERTY_INNER_NUM not in parsed or props.PROPERTY_INNER_BASE not in parsed:
        return x["queue_offset"], 1, False
    base, batch = _java_number(parsed[props.PROPERTY_INNER_BASE]), _java_number(parsed[props.PROPERTY_INNER_NUM])
    if base is None or batch is None or not -(1 << 63) <= base < 1 << 63 or not -(1 << 15) <= batch < 1 << 15:
        return -1, -1, True
    return base, batch, True


def _java_number(text: str) -> int | None:
    digits = text[1:] if text[:1] in ("+", "-") else text
    return int(text) if digits.isascii() and digits.isdigit() else None


def _past_a_limit(x: dict, which: str, length: int) -> bytes:
    """``x`` built by hand with one length field holding ``length`` (unsigned, past the field's
    signed limit) and that many bytes present; totalSize is the unsigned sum, so a reader
    taking the field unsigned would see a record whose lengths add up."""
    magic = x["magic_code"]
    if which == "topic":
        x["topic"] = _topic(length)
    else:
        x["properties"] = b"z" * length
    head = MessageRecord.build({**x, "topic": b"", "properties": b""})
    head = head[:len(head) - TOPIC_LENGTH_SIZE[magic] - 2]  # up to the end of the body
    raw = (head + len(x["topic"]).to_bytes(TOPIC_LENGTH_SIZE[magic], "big") + x["topic"]
           + len(x["properties"]).to_bytes(2, "big") + x["properties"])
    total = len(raw)
    return total.to_bytes(4, "big") + raw[4:]


@_SETTINGS
@given(x=records(), which=st.sampled_from(["topic", "properties"]), data=st.data())
def test_a_record_past_a_limit_is_refused_by_every_decoder_alike(tmp_path, x, which, data):
    if which == "topic":
        limit = MAX_TOPIC_LENGTH_V1 if x["magic_code"] == V1 else MAX_TOPIC_LENGTH_V2
        field_max = (1 << (8 * TOPIC_LENGTH_SIZE[x["magic_code"]])) - 1
    else:
        limit, field_max = MAX_PROPERTIES_LENGTH, (1 << 16) - 1
    length = data.draw(st.one_of(st.sampled_from([limit + 1, field_max]), st.integers(limit + 1, field_max)))
    raw = _past_a_limit(x, which, length)

    with pytest.raises(RecordError) as refused:
        decode_message(raw, 0, BASE, len(raw))
    assert refused.value.finding_id == "recordLengthMismatch"
    with pytest.raises(cs.ConstructError):
        MessageRecord.parse(raw)
    records = clean_records(raw, 0, len(raw))
    assert (len(records), records.stop) == (0, 0)
    assert (records.refusal.finding_id, records.refusal.reason) == (refused.value.finding_id, refused.value.message)
    assert crc_run(raw, 0, len(raw), BASE, 0, None, []) == (0, 0, 0)
    seg = _segment(tmp_path, raw)
    scanned = list(scan_segment(seg))
    assert isinstance(scanned[0], Corrupt) and scanned[0].position == 0
    assert scanned[0].reason == refused.value.message
    assert list(crc_scan(seg)) == scanned
    with pytest.raises(RecordUnreadable) as unreadable:
        check_message(raw, 0, len(raw), BASE, DelayLevels())
    assert unreadable.value.reason == refused.value.message


def test_decode_message_refuses_more_than_32767_property_bytes():
    """Fixed: decode_message (and the scanner's hot loop) read propertiesLength unsigned and took a
    record declaring 32768 property bytes, which MessageRecord.parse and check_message refuse."""
    raw = _past_a_limit(_minimal(), "properties", MAX_PROPERTIES_LENGTH + 1)
    with pytest.raises(RecordError, match=f"at most {MAX_PROPERTIES_LENGTH} bytes"):
        decode_message(raw, 0, BASE, len(raw))
    assert len(clean_records(raw, 0, len(raw))) == 0


def test_the_limits_are_the_schemas():
    """The tail's fields are the broker's signed ones, and build() refuses what they cannot hold."""
    assert MessageRecord.build(dict(_minimal(), topic=_topic(MAX_TOPIC_LENGTH_V1)))
    for magic, limit in ((V1, MAX_TOPIC_LENGTH_V1), (V2, MAX_TOPIC_LENGTH_V2)):
        with pytest.raises(cs.ConstructError):
            MessageRecord.build(dict(_minimal(), magic_code=magic, topic=_topic(limit + 1)))
    with pytest.raises(cs.ConstructError):
        MessageRecord.build(dict(_minimal(), properties=b"p" * (MAX_PROPERTIES_LENGTH + 1)))


def _minimal() -> dict:
    return dict(total_size=0, magic_code=V1, body_crc=0, queue_id=0, flag=0, queue_offset=0, physical_offset=0,
                sys_flag=0, born_timestamp=0, born_host=b"\0" * 4, born_port=0, store_timestamp=0,
                store_host=b"\0" * 4, store_port=0, reconsume_times=0, prepared_transaction_offset=0, body=b"",
                topic=b"T", properties=b"")


# --- the writers: the encoder's limits are the schema's --------------------------------------

def test_the_encoder_writes_up_to_the_limits_and_refuses_past_them():
    """Fixed: topic_part wrote V2 topics of up to 65535 bytes, whose length field the broker
    reads negative (this test failed before: a 32768-byte topic was encoded). A topic also
    names its consume queue directory: past a file name's NAME_MAX bytes the record would be
    written and never dispatched, so the encoder refuses it too."""
    from rmqtool.store.paths import NAME_MAX

    encoder = Encoder((b"\x7f\x00\x00\x01", 10911))

    def encoded(topic: str, properties: str) -> Message:
        p = encoder.prepare(MessageInner(topic=topic, body=b"b", properties_string=properties))
        raw = p.to_bytes(0, BASE, 1)
        return decode_message(raw, 0, BASE, len(raw))

    at_limits = encoded("t" * NAME_MAX, "p" * MAX_PROPERTIES_LENGTH)
    assert at_limits.message_version == 2 and len(at_limits.topic) == NAME_MAX
    assert len(at_limits.properties_raw) == MAX_PROPERTIES_LENGTH
    assert encoded("t" * MAX_TOPIC_LENGTH_V1, "").message_version == 1
    assert encoded("t" * (MAX_TOPIC_LENGTH_V1 + 1), "").message_version == 2
    with pytest.raises(UsageError, match=f"more than the {NAME_MAX} bytes"):
        encoded("t" * (NAME_MAX + 1), "")
    with pytest.raises(UsageError, match=f"more than {MAX_TOPIC_LENGTH_V2}"):
        encoded("t" * (MAX_TOPIC_LENGTH_V2 + 1), "")
    with pytest.raises(UsageError, match=f"more than {MAX_PROPERTIES_LENGTH}"):
        encoded("t", "p" * (MAX_PROPERTIES_LENGTH + 1))


# --- msgId and UNIQ_KEY: made and read through formats/msgid.py ------------------------------

_IPS = st.sampled_from(sorted(UniqKey)).flatmap(lambda n: st.binary(min_size=n, max_size=n))


@settings(max_examples=examples(200), deadline=None)
@given(ip=_IPS, pid=st.integers(0, 1 << 22), loader=st.integers(-(1 << 31), (1 << 31) - 1),
       now=st.integers(1_500_000_000_000, 2_000_000_000_000), skip=st.integers(0, 70_000))
def test_uniq_keys_are_the_schemas(ip, pid, loader, now, skip):
    ids = UniqIdGenerator(ip=ip, pid=pid, loader_hash=loader, clock=lambda: now)
    ids._counter = itertools.count(skip)
    key = ids.create()
    parsed = UniqKey[len(ip)].parse(bytes.fromhex(key))
    assert (parsed.ip, parsed.pid, parsed.class_loader_hash, parsed.counter) == (ip, pid & 0xFFFF, loader,
                                                                                 skip & 0xFFFF)
    assert key == key.upper() and len(key) == 2 * UniqKey[len(ip)].sizeof()
    decoded = decode_uniq_key(key, near_ms=now)
    assert ipaddress.ip_address(decoded.ip).packed == ip
    assert (decoded.pid, decoded.class_loader_hash, decoded.counter) == (pid & 0xFFFF, loader, skip & 0xFFFF)
    assert decoded.time_since_month_start_ms == parsed.time_since_month_start


@settings(max_examples=examples(200), deadline=None)
@given(ip=_IPS, port=st.integers(0, 65535), offset=st.integers(0, (1 << 63) - 1))
def test_offset_msg_ids_are_the_schemas(ip, port, offset):
    msg_id = create_message_id(ip, port, offset)
    assert bytes.fromhex(msg_id) == OffsetMessageId[len(ip)].build(
        dict(store_ip=ip, store_port=port, commit_log_offset=offset))
    decoded = decode_message_id(msg_id)
    assert (decoded.store_ip, decoded.store_port, decoded.commit_log_offset) == (ip, port, offset)


def test_header_fields_read_at_their_derived_positions():
    """RECORD_START, sys_flag_of and STORE_TIMESTAMP_AT (the engine's recovery reads a segment's
    first record with them) give what the broker read back, IPv4 and IPv6 records alike."""
    from conftest import V4, load_truth

    truth = load_truth(V4 / "basic" / "truth.json")["truth"]["messages"]
    picked = [m for m in truth if ":" in m["storeHost"]][:20] + [m for m in truth if ":" not in m["bornHost"]][:20]
    assert len(picked) == 40
    for tm in picked:
        head = first_record_bytes(V4 / "basic" / "store" / "commitlog", tm["physicalOffset"])
        assert RECORD_START.unpack_from(head) == (tm["storeSize"], V1)  # 4.9.8 writes V1 only
        sys_flag = sys_flag_of(head)
        at = STORE_TIMESTAMP_AT[(sys_flag >> 4) & 3]
        assert (sys_flag, int.from_bytes(head[at:at + 8], "big")) == (tm["sysFlag"], tm["storeTimestamp"])


def first_record_bytes(commitlog, offset: int) -> bytes:
    segments = sorted(commitlog.iterdir())
    base = max(int(p.name) for p in segments if int(p.name) <= offset)
    with open(commitlog / f"{base:020d}", "rb") as f:
        f.seek(offset - base)
        return f.read(128)
