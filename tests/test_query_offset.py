"""Lookups by where a message lies: commit log offset (lookMessageByOffset), offset msgId,
and topic/queue/queue offset through the consume queue (plain and 5.x batch)."""
from __future__ import annotations

import pytest

from conftest import V4, V5, load_truth
from rmqtool.errors import CorruptData, NothingFound, UsageError
from rmqtool.query.by_offset import message_at_offset, message_by_msg_id, message_by_queue_offset
from rmqtool.query.explain import Trace
from rmqtool.store.msgid import create_message_id

TIMEKEY = V4 / "timekey"


@pytest.mark.parametrize("scenario", [V4 / "timekey", V4 / "basic"], ids=["timekey", "basic"])
def test_look_message_by_offset_reproduces_the_broker(scenario):
    truth = load_truth(scenario / "truth.json")
    cases = truth["lookMessageByOffset"]
    assert any(c["result"] is None for c in cases) or scenario.name == "basic"
    for case in cases:
        expected = case["result"]
        if expected is None:
            with pytest.raises(NothingFound):
                message_at_offset(scenario / "store", case["commitLogOffset"])
            continue
        (m,) = message_at_offset(scenario / "store", case["commitLogOffset"]).messages
        assert (m.msg_id, m.topic, m.queue_id, m.queue_offset, m.store_size, m.physical_offset,
                m.store_timestamp, m.uniq_key) == (
            expected["msgId"], expected["topic"], expected["queueId"], expected["queueOffset"],
            expected["storeSize"], expected["commitLogOffsetField"], expected["storeTimestamp"],
            expected.get("uniqKey"))
        assert " ".join(m.keys) == (expected.get("keys") or "")


def test_offsets_where_no_message_starts():
    truth = load_truth(V4 / "basic" / "truth.json")
    store = V4 / "basic" / "store"
    first = truth["truth"]["messages"][0]
    with pytest.raises(NothingFound, match="inside a record|no message record"):
        message_at_offset(store, first["physicalOffset"] + 7)  # inside the first record
    blank = truth["truth"]["commitlog"]["blankMarkers"][0]
    with pytest.raises(NothingFound, match="blank"):
        message_at_offset(store, blank["offset"])
    with pytest.raises(NothingFound, match="past the end"):
        message_at_offset(store, truth["truth"]["commitlog"]["maxPhyOffset"])


def test_damaged_record_is_returned_with_its_crc_verdict_or_reported():
    store = V4 / "crash-fast" / "e2-corrupt-body-in-first-commitlog-file" / "expected" / "store"
    (m,) = message_at_offset(store, 2168).messages  # one body byte flipped
    assert m.body_crc_ok is False
    garbled = V5 / "crash5" / "b-garbled-last-message" / "input" / "store"
    truth = load_truth(V5 / "crash5" / "b-garbled-last-message" / "truth.json")
    last = truth["truth"]["commitlog"]["maxPhyOffset"]  # recovery dropped the record starting here
    with pytest.raises(CorruptData, match="recordLengthMismatch") as caught:
        message_at_offset(garbled, last)
    assert caught.value.path.endswith("00000000000000131072") and caught.value.offset == last - 131072


def test_msg_id_finds_every_message_and_checks_the_store_host():
    truth = load_truth(TIMEKEY / "truth.json")
    store = TIMEKEY / "store"
    for tm in truth["truth"]["messages"][::17]:
        (m,) = message_by_msg_id(store, tm["msgId"].lower()).messages
        assert m.commit_log_offset == tm["physicalOffset"]
    tm = truth["truth"]["messages"][5]
    other_host = create_message_id(bytes([203, 0, 113, 9]), 10911, tm["physicalOffset"])
    lines = []
    with pytest.raises(NothingFound, match="another broker"):
        message_by_msg_id(store, other_host, trace=Trace(lines.append))
    assert any(line.startswith("dropped:") for line in lines)
    with pytest.raises(UsageError):
        message_by_msg_id(store, "not-a-msg-id")


def test_ipv6_store_host_msg_id():
    truth = load_truth(V4 / "basic" / "truth.json")
    v6 = [m for m in truth["truth"]["messages"] if ":" in m["storeHost"]]
    assert v6
    for tm in v6[:10]:
        (m,) = message_by_msg_id(V4 / "basic" / "store", tm["msgId"]).messages
        assert len(tm["msgId"]) == 56 and m.commit_log_offset == tm["physicalOffset"]


@pytest.mark.parametrize("scenario", [V4 / "timekey", V5 / "v2-and-crc"], ids=["timekey", "v2-and-crc"])
def test_queue_offset_through_the_consume_queue(scenario):
    truth = load_truth(scenario / "truth.json")
    store = scenario / "store"
    checked = 0
    for topic, queues in truth["truth"]["consumeQueues"].items():
        for queue_id, cq in queues.items():
            if not cq.get("entries"):
                continue
            for entry in cq["entries"][::7]:
                result = message_by_queue_offset(store, topic, int(queue_id), entry[0])
                (m,) = result.messages
                assert (m.commit_log_offset, m.store_size, m.queue_offset) == (entry[1], entry[2], entry[0])
                assert not result.notes
                checked += 1
            with pytest.raises(NothingFound, match="outside"):
                message_by_queue_offset(store, topic, int(queue_id), cq["maxOffset"])
    assert checked > 30
    with pytest.raises(NothingFound, match="no consume queue"):
        message_by_queue_offset(store, "NoSuchTopic", 0, 0)


def test_fill_units_hold_no_message():
    store = V4 / "crash" / "c1-delete-cq-queue-dir" / "expected" / "store"
    with pytest.raises(NothingFound, match="fill unit"):
        message_by_queue_offset(store, "CrashTopic", 1, 100)
    truth = load_truth(V4 / "crash" / "c1-delete-cq-queue-dir" / "truth.json")
    first_readable = truth["truth"]["consumeQueues"]["CrashTopic"]["1"]["getMessageReadable"][0]
    (m,) = message_by_queue_offset(store, "CrashTopic", 1, first_readable[0]).messages
    assert m.commit_log_offset == first_readable[1]


def test_batch_consume_queue_lookups_match_get_message():
    truth = load_truth(V5 / "batchcq" / "truth.json")
    store = V5 / "batchcq" / "store"
    for case in truth["batchLookups"]:
        lines = []
        (m,) = message_by_queue_offset(store, "BatchCQTopic", case["queueId"], case["queueOffset"],
                                       trace=Trace(lines.append)).messages
        # getMessage returns up to 4 batches from here; the first is the one holding the offset
        assert m.commit_log_offset == case["returnedCommitLogOffsets"][0] == case["cqUnit"][1]
        assert m.store_size == case["cqUnit"][2]
        assert any("the whole batch" in line for line in lines)


def test_unit_pointing_at_another_queue_is_reported(store_copy):
    """A consume queue unit that names a record of another queue: returned, with a note."""
    truth = load_truth(TIMEKEY / "truth.json")
    store = store_copy(TIMEKEY / "store")
    q0 = truth["truth"]["consumeQueues"]["TimeTopic"]["0"]["entries"]
    q1 = truth["truth"]["consumeQueues"]["TimeTopic"]["1"]["entries"]
    cq = store / "consumequeue" / "TimeTopic" / "0" / "00000000000000000000"
    data = bytearray(cq.read_bytes())
    data[3 * 20:3 * 20 + 20] = (q1[0][1].to_bytes(8, "big") + q1[0][2].to_bytes(4, "big") + bytes(8))
    cq.write_bytes(bytes(data))
    result = message_by_queue_offset(store, "TimeTopic", 0, 3)
    assert result.messages[0].commit_log_offset == q1[0][1] != q0[3][1]
    assert any("TimeTopic/1" in n for n in result.notes)
