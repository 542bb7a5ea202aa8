"""The compaction store (5.x, cleanup.policy=COMPACTION) read against the 5.3.3 engine's truth:
every compaction log record and compaction queue unit, the checkpoint, what a consumer reads;
the dump kinds, verify's findings on a damaged copy, info's listing."""
from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from conftest import V5, load_truth
from helpers import cli_runner, copy_tree, expand_store
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


def _run(*args):
    from rmqtool.cli.app import app
    return cli_runner().invoke(app, [str(a) for a in args])


def _jsonl(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_dump_kinds_show_the_engines_records_units_and_checkpoint(store):
    """dump compactionlog|compactioncq|positioncheckpoint, as JSON Lines, with documented fields."""
    from test_vocabulary import documented, keys_of

    log = _run("dump", "compactionlog", store, "-f", "jsonl")
    cq = _run("dump", "compactioncq", store, "-f", "jsonl")
    cp = _run("dump", "positioncheckpoint", store / "compaction" / "position-checkpoint", "-f", "jsonl")
    assert (log.exit_code, cq.exit_code, cp.exit_code) == (0, 0, 0), (log.stderr, cq.stderr, cp.stderr)
    want_records = [(t["topic"], t["queueId"], r) for t in TRUTH["compactionTopics"]
                    for r in t["compactionLog"]["records"] if r["kind"] != "NO_RECORD_SIZE_ZERO"]
    rows = _jsonl(log)
    assert [(r["topic"], r["queue_id"], r["compaction_log_offset"], r["store_size"], r.get("queue_offset"),
             r.get("compaction_key"), r.get("tombstone"), pathlib.Path(r["file"]).name, r["file_position"])
            for r in rows] == \
        [(t, q, w["logOffset"], w["totalSizeField"], w.get("queueOffset"), w.get("keys"),
          None if w["kind"] == "END_OF_FILE_BLANK" else w["kind"] == "MESSAGE_EMPTY_BODY", w["file"], w["posInFile"])
         for t, q, w in want_records]
    units = _jsonl(cq)
    assert [(u["queue_id"], u["queue_offset"], u["compaction_log_offset"], u["store_size"], u["end_position"])
            for u in units] == \
        [(t["queueId"], w["queueOffset"], w["logOffset"], w["size"], w["kind"] == "END_POSITION")
         for t in TRUTH["compactionTopics"] for f in t["compactionCq"]["files"] for w in f["units"]]
    assert {f"{r['topic']}_{r['queue_id']}": r["checkpoint_offset"] for r in _jsonl(cp)} == \
        TRUTH["positionCheckpoint"]["queueOffsetMap"]
    names, suffixes = documented()
    fields = keys_of(rows + units + _jsonl(cp), set())
    assert not {f for f in fields if f not in names and not any(f.endswith(s) for s in suffixes)}
    one = _run("dump", "compactionlog", store / "compaction" / "compactionLog" / "UserProfileTopic" / "0" /
               "00000000000000027600", "-f", "jsonl")
    assert [r["queue_offset"] for r in _jsonl(one)] == [
        r["queueOffset"] for r in TRUTH["compactionTopics"][0]["compactionLog"]["records"]
        if r.get("file") == "00000000000000027600" and r["kind"] == "MESSAGE"]
    assert _run("dump", "compactioncq", store / "checkpoint").exit_code == 4  # not a compaction queue file


def test_verify_and_info_on_the_clean_store(store):
    """Nothing wrong with the engine's compaction store; info lists its queues as a consumer reads them."""
    v = _run("verify", store, "--only", "compaction", "-f", "jsonl")
    assert v.exit_code == 0 and not _jsonl(v), v.stdout
    info = json.loads(_run("info", store, "-f", "json").stdout)
    queues = {(q["topic"], q["queue_id"]): q for q in info["compaction_queues"]}
    for t in TRUTH["compactionTopics"]:
        q = queues[(t["topic"], t["queueId"])]
        read = t["consumerRead"]
        assert (q["min_queue_offset"], q["max_queue_offset"], q["messages"], q["checkpoint_offset"]) == \
            (read["calls"][0][4], read["calls"][0][5], len(read["messages"]), t["positionMgrOffset"])
        assert q["tombstones"] == sum(r["kind"] == "MESSAGE_EMPTY_BODY" for r in t["compactionLog"]["records"])
    # the topic's consume_queues rows: what getMinOffsetInQueue and a consumer get, not consumequeue/'s 0
    rows = {(q["topic"], q["queue_id"]): q for q in info["consume_queues"]}
    for t in TRUTH["compactionTopics"]:
        row, read = rows[(t["topic"], t["queueId"])], t["consumerRead"]
        assert (row["min_queue_offset"], row["max_queue_offset"], row["messages"], row["served_by"]) == \
            (read["calls"][0][4], read["calls"][0][5], len(read["messages"]), "compaction")
    assert all("served_by" not in q for q in info["consume_queues"]
               if q["topic"] not in {t["topic"] for t in TRUTH["compactionTopics"]})


def test_verify_finds_a_missing_twin_and_a_damaged_record(store, tmp_path):
    """A copy with queue 0's last CQ file deleted, a body byte of a queue 1 record changed and
    position-checkpoint cut short: the twin check (the broker's load fails), the record's CRC and
    the checkpoint, each at its file and offset."""
    copy = tmp_path / "damaged"
    copy_tree(store, copy)
    t0, t1 = TRUTH["compactionTopics"][0], TRUTH["compactionTopics"][1]
    name = t0["compactionCq"]["files"][-1]["name"]
    (copy / t0["compactionCq"]["dir"] / name).unlink()
    record = next(r for r in t1["compactionLog"]["records"] if r["kind"] == "MESSAGE")
    log_file = copy / t1["compactionLog"]["dir"] / record["file"]
    raw = bytearray(log_file.read_bytes())
    body = record["bodyUtf8"].encode()
    body_at = raw.index(body, record["posInFile"])
    raw[body_at] ^= 0x01
    log_file.write_bytes(bytes(raw))
    checkpoint = copy / "compaction" / "position-checkpoint"
    checkpoint.write_text("{\"empty\":false,\"queueOffsetMap\":{")  # cut short, and no .bak to stand in
    (copy / "compaction" / "position-checkpoint.bak").unlink()
    v = _run("verify", copy, "--only", "compaction", "-f", "jsonl")
    assert v.exit_code == 3, v.stdout
    got = {(f["finding"], f["path"], f["offset"], f["consequence"]) for f in _jsonl(v)}
    assert ("compactionCqFileMissing", str(copy / t0["compactionLog"]["dir"] / name), None, "wontStart") in got
    assert ("bodyCrcMismatch", str(log_file), record["posInFile"], "unreachable") in got
    # the broker ignores a failed load of it and starts with no checkpoint
    assert any(f[:2] == ("configUnparseable", str(checkpoint)) and f[3] == "none" for f in got), got
    dumped = _run("dump", "compactionlog", copy, "-q", "1", "-f", "jsonl")
    assert dumped.exit_code == 3 and "bodyCrcMismatch" in dumped.stderr


def test_random_damage_never_crashes_the_readers(store, tmp_path_factory):
    """Damaged compaction files (flips, zeros, garbage, fields gone wrong, cut short): the
    readers and verify's checks end in findings or one RmqError, never a traceback, and read only."""
    import hypothesis.strategies as strategies
    from hypothesis import HealthCheck, given, settings

    from helpers import damage, examples
    from rmqtool.errors import RmqError
    from rmqtool.inspect.compaction_dumps import compaction_cq_rows, compaction_log_rows, position_checkpoint_rows
    from rmqtool.verify.compaction import check_compaction

    files = sorted(p.relative_to(store) for p in (store / "compaction").rglob("*") if p.is_file())

    @settings(max_examples=examples(5), deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=strategies.data())
    def run(data):
        root = tmp_path_factory.mktemp("fuzz")
        copy_tree(store / "compaction", root / "compaction")
        target = root / data.draw(strategies.sampled_from(files))
        raw = bytearray(target.read_bytes())
        raw = damage(raw, data, kinds=("flip", "zero", "garbage", "int", "truncate")) if raw else raw
        target.write_bytes(bytes(raw))
        before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
        try:
            list(check_compaction(root))
        except RmqError:
            pass
        for rows in (compaction_log_rows, compaction_cq_rows, position_checkpoint_rows):
            try:
                list(rows(root / "compaction", findings=[]))
            except RmqError:
                pass
        assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
        shutil.rmtree(root)
    run()


def test_append_refuses_a_compaction_topic_and_writes_nothing(tmp_path):
    """A COMPACTION topic is served from the compaction log, which only the broker's dispatch
    feeds: an appended message would be stored and never served, so append refuses it (exit
    4) with nothing written; a plain topic of the same store is appended as before."""
    from helpers import tree_fingerprint
    root = expand_store(FIXTURE / "store", tmp_path / "store")
    before = tree_fingerprint(root)
    for topic in sorted({t["topic"] for t in TRUTH["compactionTopics"]}):
        r = _run("append", root, "--topic", topic, "--keys", "k", "--body", "v")
        assert r.exit_code == 4 and "COMPACTION topic" in r.stderr, r.output
        assert tree_fingerprint(root) == before
    plain = _run("append", root, "--topic", TRUTH["spec"]["compaction.plainTopic"], "--body", "v")
    assert plain.exit_code == 0, plain.output


def test_a_lookup_by_queue_offset_of_a_compaction_topic_says_where_the_broker_serves_it(store):
    """query --queue-offset reads consumequeue/, which a COMPACTION topic's broker still writes but
    does not serve from: the row is what that queue holds, and stderr says the broker serves the
    queue from the compaction store (it said nothing); a plain topic's lookup says no such thing."""
    for t in TRUTH["compactionTopics"]:
        r = _run("query", store, "-t", t["topic"], "-q", t["queueId"], "--queue-offset", 0, "-f", "jsonl")
        assert r.exit_code == 0 and "COMPACTION topic's queue" in r.stderr and "dump compactioncq" in r.stderr
    plain = _run("query", store, "-t", TRUTH["spec"]["compaction.plainTopic"], "-q", 0, "--queue-offset", 0,
                 "-f", "jsonl")
    assert plain.exit_code == 0 and "COMPACTION" not in plain.stderr
