"""Every commit log record of every fixture store decodes to what the broker read back."""
from __future__ import annotations

import base64
import ipaddress

import pytest

from conftest import CLEAN_SCENARIOS, V4, V5, load_truth
from helpers import roundtrip
from rmqtool.formats.commitlog import MESSAGE_MAGIC_CODE_V2, BlankRecord, MessageRecord
from rmqtool.store.commitlog import Blank, Corrupt
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.crc import crc32, crc32_reference
from rmqtool.store.message import Message


def _scan(store):
    cl = CommitLog(store / "commitlog")
    return cl, list(cl.scan())


def _check_message(m: Message, tm: dict):
    assert m.commit_log_offset == tm["physicalOffset"]
    assert m.store_size == tm["storeSize"]
    assert m.topic == tm["topic"]
    assert m.queue_id == tm["queueId"]
    assert m.queue_offset == tm["queueOffset"]
    assert m.physical_offset == tm["commitLogOffsetField"]
    assert m.sys_flag == tm["sysFlag"]
    assert m.flag == tm["flag"]
    assert m.born_timestamp == tm["bornTimestamp"]
    assert m.store_timestamp == tm["storeTimestamp"]
    born_ip, _, born_port = m.born_host.rpartition(":")
    store_ip, _, store_port = m.store_host.rpartition(":")
    assert ipaddress.ip_address(born_ip.strip("[]")) == ipaddress.ip_address(tm["bornHost"])
    assert int(born_port) == tm["bornPort"]
    assert ipaddress.ip_address(store_ip.strip("[]")) == ipaddress.ip_address(tm["storeHost"])
    assert int(store_port) == tm["storePort"]
    assert m.reconsume_times == tm["reconsumeTimes"]
    assert m.prepared_transaction_offset == tm["preparedTransactionOffset"]
    assert m.body_crc == tm["bodyCRC"]
    assert len(m.body) == tm["bodyLength"]
    assert base64.b64encode(m.body).decode() == tm["body"]
    assert m.properties_raw.decode("utf-8") == tm["propertiesString"]
    assert len(m.properties_raw) == tm["propertiesLength"]
    assert m.properties == tm["properties"]
    assert m.tags == tm.get("tags")
    assert " ".join(m.keys) == (tm.get("keys") or "")
    assert m.uniq_key == tm.get("uniqKey")
    assert m.msg_id == tm["msgId"]
    assert m.transaction_type << 2 == tm["transactionType"]
    if "magicCode" in tm:
        assert m.magic_code == tm["magicCode"] & 0xFFFFFFFF
        assert m.message_version == (2 if tm["messageVersion"] == "MESSAGE_VERSION_V2" else 1)
    if tm.get("compressionType"):
        assert m.compression == tm["compressionType"].lower()
        assert base64.b64encode(m.decompressed_body()).decode() == tm["bodyDecompressed"]
    assert m.body_crc_ok is (not tm.get("bodyCrcCheckFailed", False))
    if "propertyCrc32DigitsReversedValue" in tm:
        assert m.property_crc_ok is True
    else:
        assert m.property_crc_ok is None


@pytest.mark.parametrize("name", sorted(CLEAN_SCENARIOS))
def test_every_message_matches_truth(name):
    scenario = CLEAN_SCENARIOS[name]
    truth = load_truth(scenario / "truth.json")
    cl, results = _scan(scenario / "store")
    messages = [r for r in results if isinstance(r, Message)]
    blanks = [r for r in results if isinstance(r, Blank)]
    assert not [r for r in results if isinstance(r, Corrupt)]
    assert len(messages) == len(truth["truth"]["messages"]) == truth["truth"]["commitlog"]["messageCount"]
    for m, tm in zip(messages, truth["truth"]["messages"]):
        _check_message(m, tm)
    markers = truth["truth"]["commitlog"]["blankMarkers"]
    assert [(b.offset, b.size, b.valid) for b in blanks] == [
        (bm["offset"], bm["totalSizeField"], bm["bytesToFileEnd"] == bm["totalSizeField"]) for bm in markers]
    assert cl.max_offset() == truth["truth"]["commitlog"]["maxPhyOffset"]
    assert cl.mapped_file_size == truth["messageStoreConfig"]["effectiveGetterValues"]["mappedFileSizeCommitLog"]
    assert not cl.findings


@pytest.mark.parametrize("name", sorted(CLEAN_SCENARIOS))
def test_schema_round_trips_every_record(name):
    """The construct schema and the fast decoder agree on every record, and build() is byte-exact."""
    scenario = CLEAN_SCENARIOS[name]
    cl, results = _scan(scenario / "store")
    compiled = MessageRecord.compile()
    for r in results:
        raw = open(r.path, "rb").read()
        if isinstance(r, Blank):
            blank = roundtrip(BlankRecord, raw[r.position:r.position + 8], size=8)
            assert blank.total_size == r.size
            continue
        record = raw[r.position:r.position + r.store_size]
        parsed = roundtrip(MessageRecord, record)
        assert compiled.parse(record) == parsed
        assert parsed.total_size == r.store_size
        assert parsed.magic_code == r.magic_code
        assert parsed.body == r.body and parsed.properties == r.properties_raw
        assert parsed.topic.decode() == r.topic
        assert (parsed.born_host, parsed.born_port) == (r.born_ip, r.born_port)
        assert (parsed.store_host, parsed.store_port) == (r.store_ip, r.store_port)
        assert parsed.queue_offset == r.queue_offset and parsed.physical_offset == r.physical_offset
        assert parsed.sys_flag == r.sys_flag and parsed.body_crc == r.body_crc
        assert (parsed.magic_code == MESSAGE_MAGIC_CODE_V2) == (r.message_version == 2)


def test_v2_records_and_property_crc():
    truth = load_truth(V5 / "v2-and-crc" / "truth.json")
    _, results = _scan(V5 / "v2-and-crc" / "store")
    v2 = [r for r in results if isinstance(r, Message) and r.message_version == 2]
    expected = [m["physicalOffset"] for m in truth["truth"]["messages"] if m["messageVersion"] == "MESSAGE_VERSION_V2"]
    assert [m.commit_log_offset for m in v2] == expected and expected
    assert all(m.topic == truth["longTopic"] and len(m.topic) == truth["longTopicLength"] for m in v2)
    assert all(m.property_crc_ok for m in results if isinstance(m, Message))


def test_fast_crc_equals_crcmod():
    _, results = _scan(V4 / "basic" / "store")
    for m in results[:500]:
        if isinstance(m, Message):
            assert crc32(m.body) == crc32_reference(m.body)
    for data in (b"", b"a", bytes(range(256)) * 7):
        assert crc32(data) == crc32_reference(data)


def _crash_variants():
    for root in (V4 / "crash", V4 / "crash-fast", V5 / "crash5"):
        for variant in sorted(p for p in root.iterdir() if (p / "truth.json").exists()):
            yield variant


@pytest.mark.parametrize("variant", list(_crash_variants()), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_crash_variant_messages_match_truth(variant):
    """What the broker kept after recovery (its compact fields) is what rmqtool reads, up to
    the recovered end; the stale bytes a recovery leaves after that end are not counted."""
    truth = load_truth(variant / "truth.json")
    store = variant / "expected" / "store"
    if not store.exists():
        assert truth["loadOk"] is False  # the broker refused to load it: nothing was recovered
        return
    end = truth["truth"]["commitlog"]["maxPhyOffset"]
    messages = [r for r in CommitLog(store / "commitlog").scan(to_offset=end) if isinstance(r, Message)]
    want = truth["truth"]["messages"]
    assert len(messages) == len(want) == truth["truth"]["commitlog"]["messageCount"]
    for m, tm in zip(messages, want):
        assert (m.commit_log_offset, m.store_size, m.topic, m.queue_id, m.queue_offset, m.sys_flag,
                m.store_timestamp, m.body_crc, len(m.body), m.msg_id, m.uniq_key, " ".join(m.keys) or None,
                m.tags) == (tm["physicalOffset"], tm["storeSize"], tm["topic"], tm["queueId"], tm["queueOffset"],
                            tm["sysFlag"], tm["storeTimestamp"], tm["bodyCRC"], tm["bodyLength"], tm["msgId"],
                            tm.get("uniqKey"), tm.get("keys"), tm.get("tags"))
        assert m.body_crc_ok is (not tm.get("bodyCrcCheckFailed", False))


@pytest.mark.parametrize("root", [V4 / "crash", V4 / "crash-fast", V5 / "crash5"], ids=lambda p: p.name)
def test_pre_crash_messages_match_truth_in_full(root):
    """The full records dumped before the halt, read from the untouched crashed store."""
    truth = load_truth(root / "pre-crash-truth.json")
    _, results = _scan(root / "a-as-is" / "input" / "store")
    messages = [r for r in results if isinstance(r, Message)]
    want = truth["truth"]["messages"]
    assert len(messages) >= len(want)  # the tail put after the dump is there too
    for m, tm in zip(messages, want):
        _check_message(m, tm)
