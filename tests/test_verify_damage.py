"""verify over damaged copies of clean fixture stores: each kind of damage gives its finding
at the file and offset computed from truth.json; random damage never crashes, hangs or writes."""
from __future__ import annotations

import hashlib
import pathlib

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from conftest import V4, V5, load_truth
from helpers import copy_tree, damage, examples
from rmqtool.errors import RmqError
from rmqtool.findings import Severity
from rmqtool.verify.run import Verify, VerifyOptions

BASIC = V4 / "basic"
CRC = V5 / "v2-and-crc"
HEADER_V4 = 96  # bytes before the body of a record with IPv4 hosts (formats/commitlog.py)


def run(store, **options) -> list:
    return list(Verify(store, VerifyOptions(jobs=options.pop("jobs", 1), **options)).findings())


def ids(findings) -> set:
    return {f.id for f in findings}


def by_id(findings, finding_id) -> list:
    return [f for f in findings if f.id == finding_id]


def segment_size(truth) -> int:
    return truth["messageStoreConfig"]["effectiveGetterValues"]["mappedFileSizeCommitLog"]


def place(store: pathlib.Path, truth: dict, offset: int) -> tuple[pathlib.Path, int]:
    size = segment_size(truth)
    return store / "commitlog" / f"{offset - offset % size:020d}", offset % size


def patch(path: pathlib.Path, position: int, data: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[position:position + len(data)] = data
    path.write_bytes(bytes(raw))


def v4_message(truth, *, body: bool = True) -> dict:
    """A message with IPv4 hosts (and a body), from the middle of the store."""
    messages = truth["truth"]["messages"]
    return next(m for m in messages[len(messages) // 2:]
                if m["sysFlag"] & 0x30 == 0 and (m["bodyLength"] > 0) == body and m["sysFlag"] & 0xC == 0)


def test_flipped_body_byte(store_copy):
    store, truth = store_copy(BASIC / "store"), load_truth(BASIC / "truth.json")
    m = v4_message(truth)
    path, position = place(store, truth, m["physicalOffset"])
    raw = path.read_bytes()
    patch(path, position + HEADER_V4, bytes([raw[position + HEADER_V4] ^ 0x01]))
    found = run(store)
    (f,) = by_id(found, "bodyCrcMismatch")
    assert (f.path, f.offset, f.details["commit_log_offset"]) == (str(path), position, m["physicalOffset"])
    assert (f.details["topic"], f.details["queue_id"], f.details["queue_offset"]) == (
        m["topic"], m["queueId"], m["queueOffset"])


def test_deleted_middle_segment(store_copy):
    store, truth = store_copy(BASIC / "store"), load_truth(BASIC / "truth.json")
    size = segment_size(truth)
    victim = store / "commitlog" / f"{5 * size:020d}"
    victim.unlink()
    found = run(store)
    (gap,) = by_id(found, "segmentGap")
    assert gap.path == str(store / "commitlog" / f"{6 * size:020d}")
    inside = [m for m in truth["truth"]["messages"] if 5 * size <= m["physicalOffset"] < 6 * size]
    units = by_id(found, "consumeQueueUnitNoRecord")
    assert sorted(f.details["commit_log_offset"] for f in units) == sorted(m["physicalOffset"] for m in inside)
    # each topic-queue that had messages there now skips queue offsets
    gaps = {(f.details["topic"], f.details["queue_id"]) for f in by_id(found, "queueOffsetGap")}
    assert gaps == {(m["topic"], m["queueId"]) for m in inside}


def test_zeroed_range_inside_a_segment_is_skipped_and_reported(store_copy):
    store, truth = store_copy(BASIC / "store"), load_truth(BASIC / "truth.json")
    messages = truth["truth"]["messages"]
    i = len(messages) // 3
    first, second = messages[i], messages[i + 1]
    assert place(store, truth, first["physicalOffset"])[0] == place(store, truth, second["physicalOffset"])[0]
    path, position = place(store, truth, first["physicalOffset"])
    patch(path, position, bytes(first["storeSize"] + second["storeSize"]))
    found = run(store)
    (f,) = by_id(found, "recordMagicInvalid")
    assert (f.path, f.offset) == (str(path), position)
    assert f.details["bytes_skipped"] == first["storeSize"] + second["storeSize"]
    not_in_log = by_id(found, "consumeQueueUnitNoRecord")
    assert {f.details["commit_log_offset"] for f in not_in_log} == {first["physicalOffset"], second["physicalOffset"]}


def test_garbage_after_the_last_record(store_copy):
    store, truth = store_copy(BASIC / "store"), load_truth(BASIC / "truth.json")
    end = truth["truth"]["commitlog"]["maxPhyOffset"]
    path, position = place(store, truth, end)
    patch(path, position + 100, b"\xee" * 50)
    found = run(store)
    (f,) = by_id(found, "trailingGarbage")
    assert (f.path, f.offset) == (str(path), position)


def test_truncated_middle_segment(store_copy):
    store, truth = store_copy(BASIC / "store"), load_truth(BASIC / "truth.json")
    size = segment_size(truth)
    path = store / "commitlog" / f"{2 * size:020d}"
    inside = [m for m in truth["truth"]["messages"] if 2 * size <= m["physicalOffset"] < 3 * size]
    cut = inside[-3]
    path.write_bytes(path.read_bytes()[:cut["physicalOffset"] - 2 * size + 10])
    found = run(store)
    assert {f.path for f in by_id(found, "segmentSizeOdd")} == {str(path)}
    (f,) = by_id(found, "recordTruncated")
    assert (f.path, f.offset) == (str(path), cut["physicalOffset"] - 2 * size)


def test_physical_offset_and_queue_offset_fields(store_copy):
    store, truth = store_copy(BASIC / "store"), load_truth(BASIC / "truth.json")
    m = v4_message(truth)
    path, position = place(store, truth, m["physicalOffset"])
    patch(path, position + 28, (m["physicalOffset"] + 1).to_bytes(8, "big"))  # physicalOffset field
    patch(path, position + 20, (m["queueOffset"] + 5).to_bytes(8, "big"))  # queueOffset field
    found = run(store)
    (moved,) = by_id(found, "recordOffsetMismatch")
    assert (moved.path, moved.offset) == (str(path), position)
    (gap,) = by_id(found, "queueOffsetGap")
    assert (gap.details["commit_log_offset"], gap.details["queue_offset"]) == (m["physicalOffset"], m["queueOffset"] + 5)
    (repeat,) = by_id(found, "queueOffsetRepeat")
    assert repeat.details["queue_offset"] == m["queueOffset"] + 1  # the next record goes back
    (unit,) = by_id(found, "consumeQueueUnitMismatch")
    assert unit.details["commit_log_offset"] == m["physicalOffset"] and "queue offset" in unit.message


def test_altered_crc32_digits_and_name(store_copy):
    store, truth = store_copy(CRC / "store"), load_truth(CRC / "truth.json")
    messages = [m for m in truth["truth"]["messages"] if "propertyCrc32OffsetInRecord" in m]
    digits, name, separator = messages[10], messages[20], messages[30]
    for m, at, value in ((digits, 9, b"9"), (name, 6, b"3"), (separator, 8, b"x")):
        path, position = place(store, truth, m["physicalOffset"])
        patch(path, position + m["propertyCrc32OffsetInRecord"] + at, value)
    found = run(store)
    (f,) = by_id(found, "propertyCrcMismatch")
    assert f.details["commit_log_offset"] == digits["physicalOffset"]
    (f,) = by_id(found, "propertyCrcUnreadable")
    assert f.details["commit_log_offset"] == name["physicalOffset"]
    # a damaged separator leaves no entry at all: between records that carry one, it is missing
    (f,) = by_id(found, "propertyCrcMissing")
    assert f.details["commit_log_offset"] == separator["physicalOffset"]


def test_zeroed_consume_queue_units(store_copy):
    store, truth = store_copy(BASIC / "store"), load_truth(BASIC / "truth.json")
    entries = truth["truth"]["consumeQueues"]["OrderTopic"]["0"]["entries"]
    path = store / "consumequeue" / "OrderTopic" / "0" / f"{0:020d}"
    patch(path, 3 * 20, bytes(3 * 20))
    found = run(store)
    (hole,) = by_id(found, "consumeQueueHole")
    assert (hole.path, hole.offset, hole.details["units"]) == (str(path), 60, 3)
    (lost,) = by_id(found, "messageNotInConsumeQueue")
    assert (lost.details["queue_offset"], lost.details["messages"]) == (3, 3)
    assert lost.details["commit_log_offset"] == entries[3][1]


def test_consume_queue_unit_with_wrong_tags_code_and_size(store_copy):
    store, truth = store_copy(BASIC / "store"), load_truth(BASIC / "truth.json")
    queue_offset, commit_log_offset, size, tags_code = truth["truth"]["consumeQueues"]["PaymentTopic"]["2"]["entries"][7]
    path = store / "consumequeue" / "PaymentTopic" / "2" / f"{0:020d}"
    patch(path, 7 * 20 + 8, (size + 1).to_bytes(4, "big") + (tags_code ^ 1).to_bytes(8, "big", signed=True))
    found = run(store)
    (f,) = by_id(found, "consumeQueueUnitMismatch")
    assert (f.path, f.offset, f.details["queue_offset"]) == (str(path), 140, queue_offset)
    assert f"size {size + 1} (record: {size})" in f.message and "tags code" in f.message


def test_consume_queue_file_of_a_wrong_size(store_copy):
    store = store_copy(BASIC / "store")
    path = store / "consumequeue" / "AuditLogTopic" / "1" / f"{0:020d}"
    path.write_bytes(path.read_bytes()[:-10])  # half a unit short
    found = run(store)
    assert str(path) in {f.path for f in by_id(found, "segmentSizeOdd")}
    (f,) = by_id(found, "recordTruncated")
    assert (f.path, f.offset) == (str(path), path.stat().st_size - path.stat().st_size % 20)


def test_index_entry_damage(store_copy):
    store, truth = store_copy(BASIC / "store"), load_truth(BASIC / "truth.json")
    header = truth["onDiskAfterShutdown"]["indexFiles"][0]
    slots = truth["messageStoreConfig"]["effectiveGetterValues"]["maxHashSlotNum"]
    path = store / "index" / header["fileName"]
    entry = lambda n: 40 + 4 * slots + 20 * n  # noqa: E731
    raw = path.read_bytes()
    patch(path, entry(5), (int.from_bytes(raw[entry(5):entry(5) + 4], "big") ^ 1).to_bytes(4, "big"))  # keyHash
    patch(path, entry(9) + 16, (9).to_bytes(4, "big"))  # prevIndex naming itself: a loop
    found = run(store)
    assert [(f.path, f.offset) for f in by_id(found, "indexEntryMismatch")] == [(str(path), entry(5))]
    assert (str(path), entry(9)) in {(f.path, f.offset) for f in by_id(found, "indexChainBroken")}


def test_deleted_middle_index_file(store_copy):
    store, truth = store_copy(BASIC / "store"), load_truth(BASIC / "truth.json")
    headers = truth["onDiskAfterShutdown"]["indexFiles"]
    (store / "index" / headers[1]["fileName"]).unlink()
    found = run(store)
    (f,) = by_id(found, "indexKeyNotIndexed")
    assert f.details["commit_log_offset"] == headers[1]["beginPhyOffset"]


def test_deleted_checkpoint(store_copy):
    store = store_copy(BASIC / "store")
    (store / "checkpoint").unlink()
    found = run(store)
    (f,) = by_id(found, "checkpointMissing")
    assert f.path == str(store / "checkpoint")
    assert f.severity is Severity.WARNING


def test_store_timestamps_going_back_are_info(store_copy):
    truth = load_truth(V4 / "timekey" / "truth.json")
    messages = sorted(truth["truth"]["messages"], key=lambda m: m["physicalOffset"])
    back = [b["physicalOffset"] for a, b in zip(messages, messages[1:]) if b["storeTimestamp"] < a["storeTimestamp"]]
    found = by_id(run(V4 / "timekey" / "store"), "storeTimestampBackwards")
    assert back and [f.details["commit_log_offset"] for f in found] == back
    assert {f.severity for f in found} == {Severity.INFO}


def test_config_against_the_queues(store_copy):
    store, truth = store_copy(BASIC / "store"), load_truth(BASIC / "truth.json")
    queue = truth["truth"]["consumeQueues"]["OrderTopic"]["1"]
    config = store / "config"
    config.mkdir()
    (config / "topics.json").write_text('{"topicConfigTable":{"OrderTopic":{"topicName":"OrderTopic",'
                                        '"readQueueNums":1,"writeQueueNums":1},"PaymentTopic":{"readQueueNums":4,'
                                        '"writeQueueNums":4},"AuditLogTopic":{"readQueueNums":4,"writeQueueNums":4}}}')
    (config / "consumerOffset.json").write_text(
        '{"offsetTable":{"OrderTopic@g1":{0:1,1:%d},"GoneTopic@g2":{0:0}}}' % (queue["maxOffset"] + 5))
    found = run(store, only=("config",))
    assert {(f.details["topic"], f.details["queue_id"]) for f in by_id(found, "topicQueueCountMismatch")} == {
        ("OrderTopic", q) for q in (1, 2, 3)}
    (missing,) = by_id(found, "consumerOffsetTopicMissing")
    assert (missing.details["topic"], missing.details["group"]) == ("GoneTopic", "g2")
    out = {(f.details["topic"], f.details["queue_id"]) for f in by_id(found, "consumerOffsetAboveMax")}
    assert out == {("OrderTopic", 1)}  # GoneTopic has no queue, and offset 0 consumed nothing
    assert ids(found) <= {"topicQueueCountMismatch", "consumerOffsetTopicMissing", "consumerOffsetAboveMax"}


def test_unparseable_config_falls_back_to_an_older_bak(store_copy):
    import os

    store = store_copy(BASIC / "store")
    config = store / "config"
    config.mkdir()
    (config / "consumerOffset.json.bak").write_text('{"offsetTable":{}}')
    (config / "consumerOffset.json").write_text('{"offsetTable":{')
    os.utime(config / "consumerOffset.json.bak", (1_000_000, 1_000_000))
    found = run(store, only=("config",))
    assert {f.id for f in found} == {"configUnparseable", "configBakUsed", "configBakStale"}
    (stale,) = by_id(found, "configBakStale")
    assert stale.path == str(config / "consumerOffset.json.bak")


# --- random damage -----------------------------------------------------------------------

SMALL = V4 / "txdelay" / "store"


def _digest(root: pathlib.Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    root = tmp_path_factory.mktemp("verify-random") / "store"
    copy_tree(SMALL, root)
    for p in [root, *root.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    return root


@settings(max_examples=examples(100), deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_never_crashes_hangs_or_writes(scratch, data):
    files = sorted(p for p in scratch.rglob("*") if p.is_file() and p.stat().st_size)
    target = data.draw(st.sampled_from(files))
    original = target.read_bytes()
    raw = bytearray(original)
    try:
        raw = damage(raw, data, kinds=("flip", "zero", "garbage", "int", "truncate"))
        target.write_bytes(bytes(raw))
        before = _digest(scratch)
        try:
            found = run(scratch)
        except RmqError as exc:  # the store could not be checked: exit 8, one line naming the file
            assert exc.path and pathlib.Path(exc.path).resolve().is_relative_to(scratch.resolve()), exc.one_line()
            found = []
        assert _digest(scratch) == before
        for f in found:
            assert f.severity in Severity and f.message
    finally:
        target.write_bytes(original)


def test_a_non_numeric_inner_base_is_where_a_5_x_broker_cuts_the_log():
    """INNER_BASE changed to 'x...' (fixtures/crash-made/inner-base-not-a-number): the 5.3.3
    engine's recovery cut the commit log at that record (its truth's maxPhyOffset); verify
    names that record, with the finding that says why."""
    import json
    from conftest import FIXTURES
    made = FIXTURES / "crash-made" / "inner-base-not-a-number"
    cut = json.loads((made / "truth.json").read_text())["engines"]["5.3.3"]["maxPhyOffset"]
    found = [f for f in Verify(made / "input" / "store").findings() if f.id == "innerBatchPropertyInvalid"]
    assert [(f.offset, f.details["commit_log_offset"], f.severity) for f in found] == [(cut, cut, Severity.ERROR)]
