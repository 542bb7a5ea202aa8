"""QMQ's layouts (formats/qmq/) against the stores QMQ's DefaultStorage wrote: every
record, unit, action, tablet and checkpoint field equals what the engine read back
(truth.json, readBack), and building a parsed value gives its bytes again."""
from __future__ import annotations

import json
import zlib

import pytest

from conftest import FIXTURES, load_truth
from rmqtool.formats.qmq import actionlog, checkpoint, consumerlog, java, messagelog, payload, pulllog, tablet

QMQ = FIXTURES / "qmq"
BASIC, V2 = QMQ / "basic", QMQ / "v2-consumerlog"


def zero_extended(store, rel: str, upto: int) -> bytes:
    """A trimmed fixture file read as QMQ maps it: zeros after its written prefix."""
    data = (store / rel).read_bytes()[:upto]
    return data + bytes(upto - len(data))


def _message_log_bytes(scenario) -> tuple[bytes, list[dict]]:
    records = load_truth(scenario / "truth.json")["readBack"]["messageLog"]["records"]
    end = max(r["offset"] + r["size"] for r in records)
    return zero_extended(scenario / "store", "messagelog/00000000000000000000", end), records


@pytest.mark.parametrize("scenario", [BASIC, V2], ids=["basic", "v2"])
def test_message_log_records_equal_truth(scenario):
    data, records = _message_log_bytes(scenario)
    for r in records:
        got = messagelog.MessageLogRecord.parse(data[r["offset"]:r["offset"] + r["size"]])
        body = got.body
        assert (f"{got.magic:08x}", got.attributes, got.timestamp) == (r["magicHex"], r["attributes"], r["timestamp"])
        assert (body.sequence, body.subject, body.payload_crc, body.payload_size) == \
            (r["sequenceField"], r["subject"], r["payloadCrc"], r["payloadSize"])
        assert messagelog.record_size(len(body.subject.encode()), body.payload_size, got.magic) == r["size"]
        assert messagelog.header_size(len(body.subject.encode()), got.magic) == r["headerSize"]
        assert (zlib.crc32(body.payload) == body.payload_crc) == r["payloadCrcOk"]
        assert messagelog.MessageLogRecord.build(got) == data[r["offset"]:r["offset"] + r["size"]]


def test_payloads_equal_what_qmq_serializer_read():
    data, records = _message_log_bytes(BASIC)
    checked_negative = 0
    for r in records:
        want = r["payload"]
        raw = messagelog.MessageLogRecord.parse(data[r["offset"]:r["offset"] + r["size"]]).body.payload
        got = payload.Payload.parse(raw)
        h = got.header
        assert (h.flag, h.created_time, h.expire_time, h.subject, h.message_id) == \
            (want["flag"], want["createTime"], want["expireTime"], want["subject"], want["messageId"])
        assert bool(h.flag & payload.FLAG_DELAY) == want["flagDelay"]
        assert bool(h.flag & payload.FLAG_HAS_TAGS) == want["flagHasTags"]
        assert bool(h.flag & payload.FLAG_LOW_RELIABILITY) == want["flagLowReliability"]
        assert list(h.tags or []) == (want["tags"] or [])
        assert h.body_length == want["bodyLength"]
        attrs = payload.Attributes.parse(got.body)
        assert [a.key for a in attrs] == [a["key"] for a in want["attrs"]]
        for a, w in zip(attrs, want["attrs"]):
            value = a.value.encode()
            assert len(value) == w["valueBytes"]
            if "value" in w:
                assert a.value == w["value"]
            else:  # a long value: truth keeps its prefix and CRC
                assert a.value.startswith(w["valuePrefix"]) and zlib.crc32(value) == w["valueCrc32"]
            checked_negative += w["valueLengthShort"] < 0
        assert payload.Attributes.build(attrs) == got.body  # the negative int16 lengths written back
    assert checked_negative  # basic holds values of 32 KiB and more


@pytest.mark.parametrize("scenario, unit", [(BASIC, consumerlog.UnitV1), (V2, consumerlog.UnitV2)], ids=["v1", "v2"])
def test_consumer_log_units_equal_truth(scenario, unit):
    logs = load_truth(scenario / "truth.json")["readBack"]["consumerLogs"]
    size = unit.sizeof() if unit is consumerlog.UnitV1 else consumerlog.CONSUMER_LOG_V2_UNIT_BYTES
    for subject, log in logs.items():
        assert log["unitBytes"] == size
        for u in log["units"]:
            raw = bytes.fromhex(u["rawHex"])
            got = unit.parse(raw)
            fields = got if unit is consumerlog.UnitV1 else got.index
            if unit is consumerlog.UnitV2:
                assert got.type == consumerlog.TYPE_MESSAGE_LOG_INDEX and u["type"] == "MESSAGE_LOG_INDEX"
            assert (fields.timestamp, fields.wrote_offset, fields.wrote_bytes, fields.header_size) == \
                (u["timestamp"], u["wroteOffset"], u["wroteBytes"], u["headerSize"])
            # the unit is where its sequence says, in the subject's file
            on_disk = zero_extended(scenario / "store", f"consumerlog/{subject}/00000000000000000000",
                                    (u["sequence"] + 1) * size)[u["sequence"] * size:]
            assert on_disk == raw and unit.build(got) == raw


def test_action_log_records_equal_truth():
    truth = load_truth(BASIC / "truth.json")["readBack"]["actionLog"]["records"]
    data = zero_extended(BASIC / "store", "actionlog/00000000000000000000", truth[-1]["endOffset"])
    kinds = set()
    for r in truth:
        raw = data[r["offset"]:r["endOffset"]]
        got = actionlog.ActionLogRecord.parse(raw)
        assert (f"{got.magic:08x}", got.record_type) == (r["magicHex"], r["recordType"])
        assert (got.body.action_type, got.body.payload_size) == (r["typeCode"], r["payloadSize"])
        assert r["size"] == r["payloadSize"] + actionlog.ACTION_HEADER_BYTES
        action = actionlog.ACTION_PAYLOADS[got.body.action_type].parse(got.body.payload)
        assert actionlog.ACTION_TYPES[got.body.action_type] == r["type"]
        assert (action.subject, action.group, action.consumer_id, action.timestamp) == \
            (r["subject"], r["group"], r["consumerId"], r["timestamp"])
        if r["type"] == "PULL":
            assert (action.broadcast, action.first_sequence, action.last_sequence, action.first_message_sequence,
                    action.last_message_sequence) == (r["broadcast"], r["firstSequence"], r["lastSequence"],
                                                      r["firstMessageSequence"], r["lastMessageSequence"])
        elif r["type"] == "RANGE_ACK":
            assert (action.first_sequence, action.last_sequence) == (r["firstSequence"], r["lastSequence"])
        assert actionlog.ActionLogRecord.build(got) == raw
        kinds.add(r["type"])
    assert kinds == set(actionlog.ACTION_TYPES.values())


def test_pull_log_tablets_equal_truth():
    for want in load_truth(BASIC / "truth.json")["readBack"]["pullLogTablets"]:
        data = (BASIC / "store" / want["file"]).read_bytes()
        assert len(data) == want["fileSize"]
        h = tablet.TabletHeader.parse(data)
        assert (f"{h.magic:08x}", h.total_payload_size, h.position_of_index, h.begin_offset, h.end_offset) == \
            (want["magicHex"], want["totalPayloadSize"], want["positionOfIndex"], want["beginOffset"], want["endOffset"])
        index_end = tablet.TABLET_HEADER_SIZE + h.total_payload_size
        entries = tablet.TabletIndex.parse(data[h.position_of_index:index_end])
        assert [(e.consumer, e.start_of_pull_log_sequence, e.base_of_message_sequence, e.position, e.num)
                for e in entries] == [(w["consumer"], w["startOfPullLogSequence"], w["baseOfMessageSequence"],
                                       w["position"], w["num"]) for w in want["index"]]
        for e, w in zip(entries, want["index"]):
            at = tablet.TABLET_HEADER_SIZE + e.position
            deltas = [int.from_bytes(data[at + 4 * i:at + 4 * i + 4], "big", signed=True) for i in range(e.num)]
            assert deltas == w["messageSequenceDeltas"]
        crc = tablet.TabletCrc.parse(data[index_end:index_end + tablet.TABLET_CRC_SIZE])
        assert crc == want["crc"] == zlib.crc32(data[tablet.TABLET_HEADER_SIZE:index_end])


def test_legacy_pull_log_units_equal_truth():
    for want in load_truth(BASIC / "truth.json")["readBack"]["pullLogs"]["legacyPullLogs"]:
        rel = f"pulllog/{want['consumerId']}/{want['groupAndSubject']}/00000000000000000000"
        data = zero_extended(BASIC / "store", rel, want["maxSequence"] * pulllog.PULL_LOG_UNIT_BYTES)
        got = [pulllog.PullLogUnit.parse(data[i:i + 8]) for i in range(0, len(data), 8)]
        assert got[want["minSequence"]:] == want["messageSequences"]


@pytest.mark.parametrize("scenario", [BASIC, V2], ids=["basic", "v2"])
def test_checkpoint_files_parse_as_the_serdes_did(scenario):
    files = load_truth(scenario / "truth.json")["checkpointFiles"]
    assert files
    for f in files:
        data = (scenario / "store" / "checkpoint" / f["file"]).read_bytes()
        assert data.decode() == f["text"]
        if f["file"].startswith(checkpoint.ACTION_CHECKPOINT_PREFIX):
            cp = checkpoint.parse_action_checkpoint(data)
            assert len(cp.groups) == f["parsedGroups"]
            assert checkpoint.build_action_checkpoint(cp) == data
            prefix = checkpoint.ACTION_CHECKPOINT_PREFIX
        else:
            cp = checkpoint.parse_message_checkpoint(data)
            assert checkpoint.build_message_checkpoint(cp) == data
            prefix = checkpoint.MESSAGE_CHECKPOINT_PREFIX
        assert cp.offset == f["parsedOffset"] == checkpoint.snapshot_version(f["file"], prefix)


CRASHES = sorted(p for p in (QMQ / "crash").iterdir() if p.is_dir())


@pytest.mark.parametrize("variant", CRASHES, ids=[p.name for p in CRASHES])
def test_crash_inputs_checkpoints_parse_or_fail_as_the_serdes_did(variant):
    """Each checkpoint of each crash input: the same offset and sequences as the serde, or
    refused where the serde threw (crash/f's garbled file, which QMQ skipped)."""
    for f in load_truth(variant / "truth.json")["checkpointFilesInInput"]:
        data = (variant / "input" / "checkpoint" / f["file"]).read_bytes()
        action = f["file"].startswith(checkpoint.ACTION_CHECKPOINT_PREFIX)
        parse = checkpoint.parse_action_checkpoint if action else checkpoint.parse_message_checkpoint
        if "parseError" in f:
            with pytest.raises(checkpoint.CheckpointSyntaxError) as refused:
                parse(data)
            assert str(refused.value) == f["parseError"]  # the exception as the engine reported it
            continue
        cp = parse(data)
        assert cp.offset == f["parsedOffset"]
        if action:
            assert len(cp.groups) == f["parsedGroups"]
        else:
            assert cp.max_sequences == f["parsedMaxSequences"]


@pytest.mark.parametrize("text, ok", [("12", True), ("-3", True), ("+7", True), (" 1", False), ("1_0", False),
                                      ("", False), ("9223372036854775808", False), ("0x1", False)])
def test_java_parse_long(text, ok):
    if ok:
        assert java.java_parse(text) == int(text)
    else:
        with pytest.raises(java.NumberFormatError):
            java.java_parse(text)


def test_offset_files_are_json_maps():
    for f in load_truth(BASIC / "truth.json")["readBack"]["offsetFiles"]:
        assert json.loads((BASIC / "store" / f["file"]).read_text()) == json.loads(f["text"])
