"""verify over the real broker's stores: clean ones have no error; each crash variant's damage
gives its finding at the file and offset its truth.json (or the README) names."""
from __future__ import annotations

import functools
import pathlib

import pytest

from conftest import CLEAN_SCENARIOS, FIXTURES, V4, V5, load_truth
from helpers import copy_tree
from rmqtool.findings import Severity
from rmqtool.verify.run import Verify, VerifyOptions

CRASH_ROOTS = {"4.9.8/crash": V4 / "crash", "4.9.8/crash-fast": V4 / "crash-fast", "5.3.3/crash5": V5 / "crash5"}
# Stores with no damage: the clean scenarios, and each crash's untouched variant before and after recovery.
CLEAN_STORES = {**{name: d / "store" for name, d in CLEAN_SCENARIOS.items()},
                **{f"{name}/a-as-is/{side}": d / "a-as-is" / side / "store"
                   for name, d in CRASH_ROOTS.items() for side in ("input", "expected")}}


@functools.lru_cache(maxsize=None)
def findings_of(store: pathlib.Path) -> tuple:
    return tuple(Verify(store, VerifyOptions(jobs=1)).findings())


def of(store: pathlib.Path, finding_id: str) -> list:
    return [f for f in findings_of(store) if f.id == finding_id]


def variant(root: str, name: str) -> tuple[pathlib.Path, dict]:
    d = CRASH_ROOTS[root] / name
    return d / "input" / "store", load_truth(d / "truth.json")


def cq_file_size(truth: dict) -> int:
    return truth["messageStoreConfig"]["effectiveGetterValues"]["mappedFileSizeConsumeQueue"]


def unit_place(truth: dict, queue_offset: int) -> tuple[str, int]:
    """(file name, position) of a queue offset's unit, from the store's consume queue file size."""
    size = cq_file_size(truth)
    at = queue_offset * 20
    return f"{at - at % size:020d}", at % size


@pytest.mark.parametrize("name", sorted(CLEAN_STORES))
def test_clean_stores_have_no_error(name):
    errors = [f.one_line() for f in findings_of(CLEAN_STORES[name]) if f.severity is Severity.ERROR]
    assert errors == []


@pytest.mark.parametrize("name", sorted(CLEAN_SCENARIOS))
def test_commit_log_end_is_the_brokers_max_offset(name):
    truth = load_truth(CLEAN_SCENARIOS[name] / "truth.json")
    (end,) = of(CLEAN_SCENARIOS[name] / "store", "commitLogEnd")
    assert end.details["commit_log_offset"] == truth["truth"]["commitlog"]["maxPhyOffset"]
    assert end.details["messages"] == truth["truth"]["commitlog"]["messageCount"]


def test_clean_shutdown_has_no_abort_finding_and_a_crash_has_one():
    assert not of(CLEAN_STORES["4.9.8/basic"], "abortFilePresent")
    store, truth = variant("4.9.8/crash", "a-as-is")
    assert truth["abortFileExistedBeforeLoad"]
    assert [f.path for f in of(store, "abortFilePresent")] == [str(store / "abort")]


@pytest.mark.parametrize("root,name", [(root, d.name) for root in ("4.9.8/crash", "4.9.8/crash-fast")
                                       for d in sorted(CRASH_ROOTS[root].glob("e*-corrupt-body-*"))])
def test_corrupt_body(root, name):
    store, truth = variant(root, name)
    m = truth["mutation"]
    segment = store / m["file"]
    (f,) = of(store, "bodyCrcMismatch")
    assert f.path == str(segment)
    assert f.offset == m["messagePhysicalOffset"] - int(segment.name)
    assert f.details["commit_log_offset"] == m["messagePhysicalOffset"]


def test_truncated_last_segment():
    store, truth = variant("4.9.8/crash", "b1-truncate-last-commitlog-mid-message")
    m = truth["mutation"]
    segment = store / m["file"]
    (odd,) = of(store, "segmentSizeOdd")
    assert odd.path == str(segment) and str(m["newLength"]) in odd.message
    (cut,) = of(store, "recordTruncated")
    assert (cut.path, cut.offset) == (str(segment), m["lastMessageOffset"] - int(segment.name))
    # what points at the cut record: index entries and the consume queue unit past the new end
    entries = of(store, "indexEntryNoRecord")
    assert entries and {f.details["commit_log_offset"] for f in entries} == {m["lastMessageOffset"]}


@pytest.mark.parametrize("root,name", [("4.9.8/crash", "b2-garbage-tail-of-last-message"),
                                       ("5.3.3/crash5", "b-garbled-last-message"),
                                       ("5.3.3/crash5", "d-abort-removed-garbled-last-message")])
def test_garbled_last_record(root, name):
    store, truth = variant(root, name)
    m = truth["mutation"]
    segment = store / m["file"]
    start = m.get("lastMessageOffset", m.get("lastMessagePhysicalOffset"))
    # the second half of the record is garbage: its tail's length fields no longer add up
    (f,) = of(store, "recordLengthMismatch")
    assert (f.path, f.offset) == (str(segment), start - int(segment.name))
    assert f.details["commit_log_offset"] == start
    (end,) = of(store, "commitLogEnd")
    assert end.details["commit_log_offset"] == truth["truth"]["commitlog"]["maxPhyOffset"]
    assert bool(of(store, "abortFilePresent")) == ("removed" not in m)


def test_zeroed_last_records():
    store, truth = variant("4.9.8/crash", "b3-zeroed-last-3-messages")
    m = truth["mutation"]
    lost = truth["diffVsPreCrash"]["lostFromCommitLog"]
    assert min(x["physicalOffset"] for x in lost) == m["zeroedFromPhysicalOffset"]
    (end,) = of(store, "commitLogEnd")
    assert end.details["commit_log_offset"] == m["zeroedFromPhysicalOffset"] == truth["truth"]["commitlog"]["maxPhyOffset"]
    # each queue that lost messages has units past the new end, from its first lost queue offset
    beyond = {(pathlib.Path(f.path).parent.parent.name, int(pathlib.Path(f.path).parent.name)): f
              for f in of(store, "consumeQueueBeyondCommitLog")}
    first_lost = {}
    for x in lost:
        key = (x["topic"], x["queueId"])
        first_lost[key] = min(first_lost.get(key, x["queueOffset"]), x["queueOffset"])
    assert set(beyond) == set(first_lost)
    for key, queue_offset in first_lost.items():
        name, position = unit_place(truth, queue_offset)
        assert (pathlib.Path(beyond[key].path).name, beyond[key].offset) == (name, position)
    entries = of(store, "indexEntryNoRecord")
    assert {f.details["commit_log_offset"] for f in entries} == {x["physicalOffset"] for x in lost}


@pytest.mark.parametrize("root", ["4.9.8/crash", "4.9.8/crash-fast"])
def test_deleted_queue_directory(root):
    store, truth = variant(root, "c1-delete-cq-queue-dir")
    topic, queue_id = truth["mutation"]["removed"].split("/")[1:]
    found = of(store, "consumeQueueMissing")
    assert {(f.details["topic"], f.details["queue_id"]) for f in found} == {(topic, int(queue_id))}
    in_log = [x for x in truth["truth"]["messages"] if x["topic"] == topic and x["queueId"] == int(queue_id)]
    assert sum(f.details["messages"] for f in found) == len(in_log)
    assert min(f.details["commit_log_offset"] for f in found) == min(x["physicalOffset"] for x in in_log)
    # split by what the next start serves: the messages the rebuilt queue holds no more are unreachable
    lost = len(truth["diffVsPreCrash"]["preCrashOffsetsNotReachableViaConsumeQueue"].get(f"{topic}/{queue_id}", []))
    assert sum(f.details["messages"] for f in found if f.consequence.value == "unreachable") == lost


def test_deleted_last_queue_file():
    store, truth = variant("4.9.8/crash", "c2-delete-last-cq-file")
    removed = pathlib.Path(truth["mutation"]["removed"])
    topic, queue_id = removed.parts[1], int(removed.parts[2])
    first = int(removed.name) // 20
    (f,) = of(store, "messageNotDispatched")
    assert (f.details["topic"], f.details["queue_id"], f.details["queue_offset"]) == (topic, queue_id, first)
    expected = [x for x in truth["truth"]["messages"]
                if x["topic"] == topic and x["queueId"] == queue_id and x["queueOffset"] >= first]
    assert f.details["messages"] == len(expected)


def test_deleted_first_queue_file():
    store, truth = variant("4.9.8/crash", "c4-delete-first-cq-file")
    unreachable = truth["diffVsPreCrash"]["preCrashOffsetsNotReachableViaConsumeQueue"]
    (f,) = of(store, "messageNotInConsumeQueue")
    (queue, lost), = unreachable.items()
    topic, queue_id = queue.split("/")
    assert (f.details["topic"], f.details["queue_id"]) == (topic, int(queue_id))
    assert f.details["queue_offset"] == min(x["queueOffset"] for x in lost)
    assert f.details["messages"] == len(lost)
    assert f.details["commit_log_offset"] == min(x["physicalOffset"] for x in lost)


def test_truncated_queue_file():
    store, truth = variant("4.9.8/crash", "c3-truncate-cq-file")
    m = truth["mutation"]
    (f,) = of(store, "segmentSizeOdd")
    assert f.path == str(store / m["truncated"]) and str(m["newLength"]) in f.message


@pytest.mark.parametrize("root", ["4.9.8/crash", "4.9.8/crash-fast"])
def test_removed_index_directory(root):
    store, truth = variant(root, "d-remove-index-dir")
    (f,) = of(store, "indexMissing")
    assert f.path == str(store / truth["mutation"]["removed"])
    assert f.details["messages"] == len(truth["truth"]["messages"])  # every message has a UNIQ_KEY


def test_zeroed_checkpoint_and_recovery_from_the_first_file():
    store, truth = variant("5.3.3/crash5", "c-checkpoint-zeroed")
    assert truth["mutation"]["zeroed"] == "checkpoint"
    (f,) = of(store, "checkpointZeroed")
    assert f.path == str(store / "checkpoint")
    # README: with the zeroed checkpoint no file matches, so recovery rescans from file 0
    (start,) = of(store, "recoveryStartFile")
    assert pathlib.Path(start.path).name == f"{0:020d}" and "abnormally" in start.message


def test_recovery_start_is_the_brokers():
    """crash5 a-as-is: the first message is later than the checkpoint's minTimestamp, so
    every variant rescanned from file 0 (README); 4.9.8 crash: e2's damage in file 0 lies
    before the start (nothing lost), e3's in 196608 after it."""
    store, _ = variant("5.3.3/crash5", "a-as-is")
    (start,) = of(store, "recoveryStartFile")
    assert pathlib.Path(start.path).name == f"{0:020d}"
    store, truth = variant("4.9.8/crash", "e2-corrupt-body-in-first-commitlog-file")
    assert truth["diffVsPreCrash"]["lostFromCommitLog"] == []
    (start,) = of(store, "recoveryStartFile")
    assert start.details["commit_log_offset"] > truth["mutation"]["messagePhysicalOffset"]
    e3_store, e3 = variant("4.9.8/crash", "e3-corrupt-body-in-second-to-last-commitlog-file")
    (e3_start,) = of(e3_store, "recoveryStartFile")
    assert e3_start.details["commit_log_offset"] <= e3["mutation"]["messagePhysicalOffset"]
    assert e3["diffVsPreCrash"]["lostFromCommitLog"]


def test_checkpoint_windows_count_messages_after_each_timestamp():
    store, truth = variant("4.9.8/crash", "a-as-is")
    from rmqtool.store.checkpoint import read_checkpoint

    cp = read_checkpoint(store / "checkpoint")
    messages = truth["truth"]["messages"]  # nothing was lost: the input's commit log holds all of them
    assert len(messages) == truth["diffVsPreCrash"]["preCrashMessageCount"]
    windows = {f.message.split(" message(s) stored after ")[1].split(" ")[0]: f for f in of(store, "checkpointWindow")}
    for name, value in (("physicMsgTimestamp", cp.physic_msg_timestamp), ("logicsMsgTimestamp", cp.logics_msg_timestamp),
                        ("indexMsgTimestamp", cp.index_msg_timestamp)):
        after = sorted((x["physicalOffset"] for x in messages if x["storeTimestamp"] > value))
        assert windows[name].details["messages"] == len(after)
        assert windows[name].details["commit_log_offset"] == after[0]


def test_messages_below_a_queues_min_offset_are_said_to_be_below_it(tmp_path):
    """config/consumers: CrashTopic/0 starts at queue offset 50 (truth's minOffset) while the
    commit log still holds the messages before it: verify says they lie below the queue's min
    offset, not inside its range."""
    import json as _json

    from helpers import cli_runner, expand_store
    from rmqtool.cli.app import app

    root = FIXTURES / "config" / "consumers"
    low = load_truth(root / "truth.json")["truth"]["consumeQueues"]["CrashTopic"]["0"]["minOffset"]
    store = expand_store(root / "store", tmp_path / "store")
    rows = [_json.loads(line) for line in
            cli_runner().invoke(app, ["verify", str(store), "-f", "jsonl"]).stdout.splitlines()]
    (below,) = [r for r in rows if r["finding"] == "messageNotInConsumeQueue" and r.get("topic") == "CrashTopic"]
    assert f"queue offsets 0..{low - 1} " in below["message"]
    assert f"below the queue's min offset {low}" in below["message"] and "inside the queue's range" not in below["message"]


def test_a_checkpoint_cut_to_its_fields_is_read_as_the_broker_maps_it(tmp_path):
    """StoreCheckpoint maps 4096 bytes and reads its fields at 0, 8 and 16: a file cut to those
    24 bytes gives the broker the same crash start. verify said it was unreadable (an error)
    and predicted a start from file 0; now the start is the intact file's, and the size a
    warning."""
    store, _ = variant("4.9.8/crash", "e3-corrupt-body-in-second-to-last-commitlog-file")
    (intact,) = of(store, "recoveryStartFile")
    cut = pathlib.Path(copy_tree(store, tmp_path / "store"))
    (cut / "checkpoint").chmod(0o644)
    with open(cut / "checkpoint", "r+b") as f:
        f.truncate(24)
    found = list(Verify(cut, VerifyOptions(jobs=1)).findings())
    (start,) = [f for f in found if f.id == "recoveryStartFile"]
    assert (pathlib.Path(start.path).name, start.details) == (pathlib.Path(intact.path).name, intact.details)
    (size,) = [f for f in found if f.id == "checkpointInvalid"]
    assert size.severity == Severity.WARNING and "24 bytes" in size.message
