"""The native kernel's Messages (rmqtool/native/messages.c) are build_messages' Python loop's:
every attribute of every scan result, with the kernel and without it, on the fixtures (against
their truth.json too) and on hypothesis-made records and damaged windows."""
from __future__ import annotations

import base64
import gc
import hashlib
import operator
import sys
import tracemalloc

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from conftest import CLEAN_SCENARIOS, load_truth
from helpers import canonical, damage, examples, fixture_commitlogs, kernel_and_pure
from rmqtool import native
from rmqtool.formats import crc as crc_rules
from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import MAX_TOPIC_LENGTH_V1, MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, \
    MessageRecord, message_length
from rmqtool.formats.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG
from rmqtool.store import message as message_module
from rmqtool.store.commitlog import CrcTally, crc_scan
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.crc import crc32
from rmqtool.store.message import Message, build_messages
from rmqtool.store.record_kernel import clean_records

KERNEL = native.kernel

pytestmark = pytest.mark.usefixtures("native_built")
_SLOTS = operator.attrgetter(*Message.__slots__)


def snapshot(r) -> tuple:
    """Every slot of a Message as built (private ones included), then its properties as read;
    helpers.canonical of anything else."""
    if type(r) is not Message:
        return canonical(r)
    return _SLOTS(r) + (r.properties, r.properties_utf8_ok, r._properties_utf8_ok)  # an unset slot raises


def scans(directory, unchecked: bool = True) -> list:
    """A scan's results with CRCs checked, the crc_scan's, and (``unchecked``) the scan's without CRCs."""
    log = CommitLog(directory)
    out = [[snapshot(r) for r in log.scan(check_crc=check)] for check in ((False, True) if unchecked else (True,))]
    tally = CrcTally()
    out.append([snapshot(r) for r in crc_scan(log.segments[0], tally=tally)] + [tally.messages, tally.message_bytes])
    return out


def distinct_commitlogs() -> list:
    """The fixtures' commit logs, each set of segment bytes once (the crash scenarios share most),
    the crash scenarios' undamaged copies left out."""
    seen, out = set(), []
    for directory in fixture_commitlogs():
        key = tuple(hashlib.sha256(f.read_bytes()).digest() for f in sorted(directory.iterdir()))
        if key not in seen and "a-as-is" not in directory.parts:
            seen.add(key)
            out.append(directory)
    return out


def test_fixtures_both_ways(monkeypatch):
    """Clean stores scanned with and without CRCs; the crash scenarios' (the careful path's
    resyncs, CRC failures) with them."""
    clean = {CLEAN_SCENARIOS[name] / "store" / "commitlog" for name in CLEAN_SCENARIOS}
    for directory in distinct_commitlogs():
        with_kernel, pure = kernel_and_pure(lambda: scans(directory, unchecked=directory in clean))
        assert with_kernel == pure, directory


@pytest.mark.parametrize("name", sorted(CLEAN_SCENARIOS))
def test_fixture_messages_match_truth(name):
    scenario = CLEAN_SCENARIOS[name]
    truth = load_truth(scenario / "truth.json")["truth"]["messages"]
    messages = [r for r in CommitLog(scenario / "store" / "commitlog").scan() if type(r) is Message]
    assert len(messages) == len(truth)
    for m, tm in zip(messages, truth):
        assert (m.commit_log_offset, m.store_size, m.topic, m.queue_id, m.queue_offset, m.physical_offset,
                m.sys_flag, m.flag, m.born_timestamp, m.store_timestamp, m.born_port, m.store_port,
                m.reconsume_times, m.prepared_transaction_offset, m.body_crc) == (
            tm["physicalOffset"], tm["storeSize"], tm["topic"], tm["queueId"], tm["queueOffset"],
            tm["commitLogOffsetField"], tm["sysFlag"], tm["flag"], tm["bornTimestamp"], tm["storeTimestamp"],
            tm["bornPort"], tm["storePort"], tm["reconsumeTimes"], tm["preparedTransactionOffset"], tm["bodyCRC"])
        assert base64.b64encode(m.body).decode() == tm["body"]
        assert m.properties_raw.decode("utf-8") == tm["propertiesString"]
        assert m.properties == tm["properties"] and m.properties_utf8_ok is True
        assert m.msg_id == tm["msgId"]
        assert m.body_crc_ok is (not tm.get("bodyCrcCheckFailed", False))
        assert m.property_crc_ok is (True if "propertyCrc32DigitsReversedValue" in tm else None)
        if "magicCode" in tm:
            assert m.magic_code == tm["magicCode"] & 0xFFFFFFFF


# --- hypothesis-made records ---

_TOPICS = st.one_of(
    st.sampled_from([b"T", b"TopicTest", "主题".encode(), b"bad\xff\xfe", b"x" * 200, "é".encode() * 70]),
    st.binary(min_size=1, max_size=20))
_ENTRY = st.one_of(
    st.sampled_from([b"TAGS\x01a", b"KEYS\x01k1 k2", b"UNIQ_KEY\x01ABC", "城市\x01杭州".encode(), b"a\x01b\x01c",
                     b"\x01v", b"n\x01", b"", b"noseparator", b"bad\xff\x01v"]),
    st.binary(max_size=12))


@st.composite
def properties_bytes(draw) -> bytes:
    raw = b"\x02".join(draw(st.lists(_ENTRY, max_size=5)))
    if draw(st.booleans()):
        raw += b"\x02"
    if draw(st.integers(0, 3)) == 0:  # 5.x enabledAppendPropCRC: a trailing __CRC32# entry (its value unchecked here)
        raw += crc_rules.crc32_property(draw(st.integers(0, 0xFFFFFFFF)))
    return raw


@st.composite
def record(draw) -> bytes:
    v6 = draw(st.integers(0, 3))
    sys_flag = (BORNHOST_V6_FLAG if v6 & 1 else 0) | (STOREHOSTADDRESS_V6_FLAG if v6 & 2 else 0) | \
        draw(st.sampled_from([0, 1, 4, 8, 12]))
    topic = draw(_TOPICS)
    magic = MESSAGE_MAGIC_CODE_V2 if len(topic) > MAX_TOPIC_LENGTH_V1 else MESSAGE_MAGIC_CODE_V1
    body = draw(st.binary(max_size=64))
    properties = draw(properties_bytes())
    body_crc = crc32(body) & 0x7FFFFFFF if draw(st.booleans()) else draw(st.integers(0, 0x7FFFFFFF))
    i32, i64 = st.integers(-(1 << 31), (1 << 31) - 1), st.integers(-(1 << 63), (1 << 63) - 1)
    return MessageRecord.build(dict(
        total_size=message_length(sys_flag, len(body), len(topic), len(properties), magic), magic_code=magic,
        body_crc=body_crc, queue_id=draw(i32), flag=draw(i32), queue_offset=draw(i64), physical_offset=draw(i64),
        sys_flag=sys_flag, born_timestamp=draw(i64), born_host=draw(st.binary(min_size=16, max_size=16))
        if v6 & 1 else draw(st.binary(min_size=4, max_size=4)), born_port=draw(i32), store_timestamp=draw(i64),
        store_host=bytes(15) + b"\x01" if v6 & 2 else b"\x7f\x00\x00\x01", store_port=draw(i32),
        reconsume_times=draw(i32), prepared_transaction_offset=draw(i64), body=body, topic=topic,
        properties=properties))


SEGMENT = 16 << 10


@pytest.fixture(scope="module")
def segment_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("native-messages")


def write_segment(directory, raw: bytes):
    log = directory / "commitlog"
    log.mkdir(exist_ok=True)
    (log / "00000000000000000000").write_bytes(raw[:SEGMENT].ljust(SEGMENT, b"\0"))
    return log


@settings(max_examples=examples(12), suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(data=st.data())
def test_made_records_both_ways(monkeypatch, segment_dir, data):
    raw = bytearray(b"".join(data.draw(st.lists(record(), min_size=1, max_size=12))))
    if data.draw(st.booleans()):
        raw = damage(raw, data)
    log = write_segment(segment_dir, bytes(raw))
    message_module._TOPICS.clear()  # topics met for the first time, then from the cache
    with_kernel, pure = kernel_and_pure(lambda: scans(log))
    assert with_kernel == pure


# --- the kernel call itself: declines, errors, references ---

def _window():
    raw = b"".join(MessageRecord.build(dict(
        total_size=message_length(0, 5, len(topic), len(p)), magic_code=MESSAGE_MAGIC_CODE_V1, body_crc=0,
        queue_id=1, flag=0, queue_offset=i, physical_offset=0, sys_flag=0, born_timestamp=1 << 40,
        born_host=b"\x01\x02\x03\x04", born_port=5000, store_timestamp=1 << 41, store_host=b"\x7f\x00\x00\x01",
        store_port=10911, reconsume_times=0, prepared_transaction_offset=0, body=b"hello", topic=topic,
        properties=p)) for i, (topic, p) in enumerate([(b"A", b"TAGS\x01t"), ("Ü".encode(), b""), (b"A", b"K\x01v\x02")]
                                                    * 20))
    return raw, clean_records(raw, 0, len(raw))


def _columns(records):
    return (records.position, records.end, records.hosts, records.body_at, records.body_end, records.topic_at,
            records.topic_end, records.properties_at)


def test_kernel_declines_what_it_does_not_cover():
    raw, records = _window()
    cols = list(_columns(records))
    call = lambda buf, columns, crc=None: KERNEL.messages(buf, tuple(columns), 0, 0, "p", crc, out, {},  # noqa: E731
                                                         message_module._decode_topic)
    out: list = []
    assert call(raw, cols) == len(records) and len(out) == len(records)
    out.clear()
    bad = [cols[:1] + [cols[1] + len(raw)] + cols[2:],  # a record ending past the buffer
           cols[:2] + [cols[2] + 4] + cols[3:],  # no such hosts
           cols[:5] + [cols[5] - 10**6] + cols[6:],  # a part before the body's end
           [c.astype(np.int32) for c in cols],  # not int64
           cols[:7] + [cols[7][:-1]],  # columns of different lengths
           cols[:7]]  # a column short
    for columns in bad:
        assert call(raw, columns) is None and not out
    assert call(raw[:100], cols) is None and not out
    ok = np.ones(len(records), bool)
    assert call(raw, cols, (ok, ok, ok.astype(np.uint8))) is None and not out  # a verdict not bool
    assert call(raw, cols, (ok, ok)) is None and not out


def test_kernel_topic_decoder_error_propagates():
    raw, records = _window()

    def decoder(topic_raw):
        if topic_raw != b"A":
            raise RuntimeError("decoder")
        return message_module._decode_topic(topic_raw)

    out: list = []
    with pytest.raises(RuntimeError):
        KERNEL.messages(raw, _columns(records), 0, 0, "p", None, out, {}, decoder)
    assert [m.topic for m in out] == ["A"]  # built before the error, whole


def test_no_references_leak():
    """Messages built and dropped over and over: the objects they shared keep their counts, memory stays."""
    raw, records = _window()
    path = "a path"
    message_module._TOPICS.clear()
    verdicts = (np.ones(len(records), bool), np.ones(len(records), bool), np.zeros(len(records), bool))

    def once():
        for crc in (None, verdicts):
            out: list = []
            KERNEL.messages(raw, _columns(records), 3, 4, path, crc, out, message_module._TOPICS,
                            message_module._decode_topic)
            for m in out:
                m.properties

    once()
    gc.collect()

    def counts():
        return [sys.getrefcount(x) for x in (path, *message_module._TOPICS.values(), *message_module._TOPICS)]

    held = counts()
    tracemalloc.start()
    try:
        once()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(50):
            once()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 4096
    assert counts() == held


def test_properties_getter_in_c_is_the_python_one(monkeypatch):
    """Message.properties' C getter against its Python getter: common strings, declined
    ones, a bytearray set by hand, the kernel switched off after the build, a set value, errors."""
    assert Message.properties.fget is KERNEL.message_properties
    raws = [b"TAGS\x01a\x02KEYS\x01k", b"", b"a\x01b\x01c", "城市\x01杭州".encode(), b"bad\xff\x01v", b"\x02",
            bytearray(b"TAGS\x01a")]

    def built():
        out = []
        for raw in raws:
            m = Message(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b"\0" * 4, 0, 0, b"\0" * 4, 0, 0, 0, b"", "T", raw)
            out.append((m.properties, m.properties_utf8_ok, m.properties is m.properties))
        return out

    with_kernel, pure = kernel_and_pure(built)
    assert with_kernel == pure
    assert [p for p, _, _ in pure] == [props.bytes_to_properties(bytes(r))[0] for r in raws]
    m = Message(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b"", 0, 0, b"", 0, 0, 0, b"", "T", b"A\x01b")
    m.properties = {"x": "y"}
    assert m.properties == {"x": "y"}
    del m._properties
    with pytest.raises(AttributeError):
        m.properties
    with pytest.raises(TypeError):
        KERNEL.message_properties(object())


def test_build_messages_from_a_reused_buffer(monkeypatch):
    """A bytearray window (crc_scan's reused read buffer): the Messages own their bytes, both ways."""
    raw, records = _window()
    part = records.rows(3, 40)
    verdicts = (np.arange(len(part)) % 2 == 0, np.arange(len(part)) % 3 == 0, np.arange(len(part)) % 5 == 0)

    class Verdicts:
        body_ok, has_entry, entry_ok = verdicts

    def built():
        buf = bytearray(raw)
        out = [m for check in (False, True)
               for m in build_messages(buf, part, 1000, 7, "p", check, verdicts=Verdicts if check else None)]
        buf[:] = bytes(len(buf))  # the window reused: the Messages keep what they were built from
        return [snapshot(m) for m in out]

    with_kernel, pure = kernel_and_pure(built)
    assert with_kernel == pure
    assert {s[Message.__slots__.index("property_crc_ok")] for s in pure} == {True, False, None}


@settings(max_examples=examples(15), deadline=None)
@given(data=st.data())
def test_kernel_never_reads_past_the_buffer(data):
    """Columns no kernel made (bounds drawn around the buffer's): the call declines or builds, never crashes."""
    raw, records = _window()
    raw = raw[:data.draw(st.integers(0, len(raw)))]
    n = data.draw(st.integers(0, 4))
    near = st.integers(-4, len(raw) + 4)
    columns = [np.array(data.draw(st.lists(near, min_size=n, max_size=n)), np.int64) for _ in range(8)]
    columns[2] = np.array(data.draw(st.lists(st.integers(-1, 4), min_size=n, max_size=n)), np.int64)
    if data.draw(st.booleans()):  # mostly in order, as a record's parts are
        for c in range(3, 8):
            columns[c] = np.maximum(columns[c], columns[c - 1] if c > 3 else columns[0])
    out: list = []
    got = KERNEL.messages(raw, tuple(columns), 0, 0, "p", None, out, {}, message_module._decode_topic)
    assert got is None and not out or got == n == len(out)
    for m in out:
        assert len(m.body) + len(m.properties_raw) <= len(raw)
