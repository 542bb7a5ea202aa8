"""The compaction store (5.x, cleanup.policy=COMPACTION) read against the 5.3.3 engine's truth:
every compaction log record and compaction queue unit, the checkpoint, what a consumer reads;
the dump kinds, verify's findings on a damaged copy, info's listing."""
from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from conftest import V5, load_truth
from helpers import cli_runner, expand_store
from rmqtool.store.commitlog import Blank
from rmqtool.store.compaction import consumer_view, is_tombstone, open_compaction_store, record_keys
from rmqtool.store.message import Message

FIXTURE = V5 / "compaction"
TRUTH = load_truth(FIXTURE / "truth.json")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> pathlib.Path:
    return expand_store(FIXTURE / "store", tmp_path_factory.mktemp("compaction") / "store")


@pytest.fixture(scope="module")
def compaction(store):
    return open_compaction_store(store)


def _queue(compaction, topic, queue_id):
    return next(q for q in compaction.queues if (q.topic, q.queue_id) == (topic, queue_id))


def test_every_record_equals_the_engines(compaction):
    """Each record of each compaction log, as MappedFile.iterator saw it: messages (PHYSICALOFFSET =
    the log offset), END_OF_FILE blanks, and where a compacted file's zeros begin."""
    assert sorted((q.topic, q.queue_id) for q in compaction.queues) == \
        sorted((t["topic"], t["queueId"]) for t in TRUTH["compactionTopics"])
    for t in TRUTH["compactionTopics"]:
        q = _queue(compaction, t["topic"], t["queueId"])
        findings: list = []
        got = list(q.scan(findings=findings))
        assert not findings
        want = [r for r in t["compactionLog"]["records"] if r["kind"] != "NO_RECORD_SIZE_ZERO"]
        assert len(got) == len(want)
        for r, w in zip(got, want):
            assert r.path.endswith("/" + w["file"]) and r.position == w["posInFile"]
            if w["kind"] == "END_OF_FILE_BLANK":
                assert isinstance(r, Blank) and r.offset == w["logOffset"] and r.size == w["totalSizeField"]
                continue
            assert isinstance(r, Message) and r.body_crc_ok
            assert (r.commit_log_offset, r.store_size, r.physical_offset, r.topic, r.queue_id, r.queue_offset,
                    record_keys(r), r.tags, r.body.decode(), r.body_crc, r.store_timestamp, r.uniq_key) == \
                (w["logOffset"], w["totalSizeField"], w["physicalOffsetField"], w["topic"], w["queueId"],
                 w["queueOffset"], w["keys"], w["tags"], w["bodyUtf8"], w["bodyCRC"], w["storeTimestamp"],
                 w["uniqKey"])
            assert is_tombstone(r) == (w["kind"] == "MESSAGE_EMPTY_BODY")
        # a compacted file ends in zeros, no blank: the engine's iterator stops where ours does
        for zero in (r for r in t["compactionLog"]["records"] if r["kind"] == "NO_RECORD_SIZE_ZERO"):
            last = [r for r in got if r.path.endswith("/" + zero["file"])][-1]
            assert last.position + last.store_size == zero["posInFile"]


def test_every_cq_unit_equals_the_engines(compaction):
    for t in TRUTH["compactionTopics"]:
        q = _queue(compaction, t["topic"], t["queueId"])
        got = list(q.units())
        want = [(f["name"], u) for f in t["compactionCq"]["files"] for u in f["units"]]
        assert len(got) == len(want)
        for u, (name, w) in zip(got, want):
            assert (pathlib.Path(u.path).name, u.position, u.log_offset, u.size, u.tags_code, u.store_timestamp,
                    u.queue_offset, u.batch_num, u.compacted_offset, int.from_bytes(u.reserved, "big"),
                    u.is_end_position) == \
                (name, w["posInFile"], w["logOffset"], w["size"], w["tagsCode"], w["storeTimestamp"],
                 w["queueOffset"], w["batchNum"], w["compactedOffset"], w["reserved"], w["kind"] == "END_POSITION")


def test_checkpoint_and_consumer_read(compaction):
    """position-checkpoint's map, and the queue offsets getMessage serves (consumerRead)."""
    assert compaction.checkpoint_offsets == TRUTH["positionCheckpoint"]["queueOffsetMap"]
    for t in TRUTH["compactionTopics"]:
        q = _queue(compaction, t["topic"], t["queueId"])
        assert q.checkpoint == t["positionMgrOffset"]
        view = consumer_view(q)
        read = t["consumerRead"]
        assert (view.min_offset, view.max_offset) == tuple(read["calls"][0][4:6])
        assert [(u.queue_offset, m.physical_offset, record_keys(m), m.body.decode(), m.uniq_key, m.msg_id,
                 m.store_timestamp) for u, m in view.messages] == \
            [(w["queueOffset"], w["physicalOffsetField"], w["keys"], w["bodyUtf8"], w["uniqKey"], w["msgId"],
              w["storeTimestamp"]) for w in read["messages"]]


def test_latest_record_per_key_is_the_last_put(compaction):
    """After compaction each key's last record in the log is its last put; a key missing from the
    log had a tombstone as its last put (compaction removed the key)."""
    for t in TRUTH["compactionTopics"]:
        q = _queue(compaction, t["topic"], t["queueId"])
        puts = [p for p in TRUTH["putResults"] if (p["topic"], p["queueId"]) == (t["topic"], t["queueId"])]
        last_put = {}
        for p in puts:
            last_put[p["keys"]] = p
        latest = q.latest_by_key()
        for key, p in last_put.items():
            if key in latest:
                assert latest[key].uniq_key == p["uniqKey"]
            else:
                assert p["bodyLength"] == 0, key
        assert set(latest) <= set(last_put)
