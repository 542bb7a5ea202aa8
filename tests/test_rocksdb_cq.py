"""The 5.x RocksDB consume queue and config store, read offline (dump rocksdbcq|rocksdbconfig,
verify's rocksdbcq area, info's side stores).

The databases are written here with rocksdict from the 5.3.3 layouts (tests/rocksdb_store.py,
which spells the bytes out from the sources); the units are the real 5.3.3 broker's file
consume queue units of fixtures/rocketmq-5.3.3/v2-and-crc (truth.json), so every field is
checked against the truth, and the commit log they point into is the broker's own.
"""
from __future__ import annotations

import json
import pathlib
import shutil
import sys

import pytest

from conftest import V5, load_truth
from helpers import cli_runner, copy_tree, writable_copy
from rmqtool.errors import ExitCode
from rmqtool.formats import rocksdb_cq as layout
from rocksdb_store import (edit_rocksdb, offset_key, offset_value, snapshot, truth_units, unit_key, unit_value,
                           write_rocksdb_config, write_rocksdb_cq)

SOURCE = V5 / "v2-and-crc"
FIELDS = ("topic", "queue_id", "queue_offset", "commit_log_offset", "store_size", "tags_code", "store_timestamp")


def _cli(*args):
    from rmqtool.cli.app import app
    return cli_runner().invoke(app, [str(a) for a in args])


def _jsonl(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def truth() -> dict:
    return load_truth(SOURCE / "truth.json")


@pytest.fixture(scope="module")
def store(tmp_path_factory, truth) -> pathlib.Path:
    """The broker's store with its file queues and, flat in consumequeue/, the same units in RocksDB
    (rocksdbCQDoubleWriteEnable's layout); config/ holding the RocksDB config store."""
    root = writable_copy(SOURCE / "store", tmp_path_factory.mktemp("rocksdb") / "store")
    write_rocksdb_cq(root, truth_units(truth))
    write_rocksdb_config(root, "topics", {
        "OrderTopic": {"topicName": "OrderTopic", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
                       "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False, "attributes": {}},
        "\u4e3b\u9898": {"topicName": "\u4e3b\u9898", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}},
        {"counter": 3, "stateVersion": 0, "timestamp": 1717200000000})
    write_rocksdb_config(root, "subscriptionGroups", {"OrderGroup": {"groupName": "OrderGroup",
                                                                     "consumeEnable": True, "retryQueueNums": 1}},
                         {"counter": 1, "stateVersion": 0, "timestamp": 1717200000001})
    # fastjson writes a Map<Integer, Long>'s keys unquoted (RocksDBOffsetSerializeWrapper)
    write_rocksdb_config(root, "consumerOffsets", {"OrderTopic@OrderGroup": b'{"offsetTable":{0:53,1:47}}'}, None)
    return root


def test_the_layouts_build_the_bytes_the_source_lays_out():
    """formats/rocksdb_cq against the bytes written out from RocksDBConsumeQueueTable / OffsetTable."""
    topic = "T\u00e9"
    assert layout.cq_key(topic.encode(), 3, 2**40 + 5) == unit_key(topic, 3, 2**40 + 5)
    assert len(unit_key(topic, 3, 0)) == layout.CQ_KEY_LENGTH_WITHOUT_TOPIC + len(topic.encode())
    assert layout.cq_value(123456789012, 676, -5, 1795317381096) == unit_value(123456789012, 676, -5, 1795317381096)
    assert layout.offset_key(topic.encode(), 7, "max") == offset_key(topic, 7, "max")
    assert layout.offset_key(topic.encode(), 7, "min") == offset_key(topic, 7, "min")
    assert layout.offset_value(99, 42) == offset_value(99, 42)
    assert layout.checkpoint_key() == offset_key("CHECKPOINT_TOPIC", 0, "max")
    assert layout.cq_key(topic.encode(), 3, 9).startswith(layout.cq_queue_prefix(topic.encode(), 3))
    parsed = layout.CqValue.parse(unit_value(1, 2, 3, 4))
    assert (parsed.commit_log_offset, parsed.size, parsed.tags_code, parsed.store_timestamp) == (1, 2, 3, 4)


def test_dump_gives_every_unit_field_by_field_and_writes_nothing(store, truth):
    db = store / "consumequeue"
    before = snapshot(db)
    result = _cli("dump", "rocksdbcq", store, "-f", "jsonl")
    assert result.exit_code == 0, result.stderr
    rows = _jsonl(result)
    expected = truth_units(truth)
    key = lambda r: (r["topic"], r["queue_id"], r["queue_offset"])  # noqa: E731
    assert sorted(({k: r[k] for k in FIELDS} for r in rows), key=key) == sorted(expected, key=key)
    # key order: a queue's units in queue offset order, topics by length first (the key starts with it)
    for a, b in zip(rows, rows[1:]):
        if (a["topic"], a["queue_id"]) == (b["topic"], b["queue_id"]):
            assert b["queue_offset"] == a["queue_offset"] + 1
    assert len({r["topic"] for r in rows}) == len(truth["truth"]["consumeQueues"])
    assert all(r["file"] == str(db) for r in rows)
    assert snapshot(db) == before  # not a byte, not a file (no LOCK taken, no rocksdict-config.json)
    one = _jsonl(_cli("dump", "rocksdbcq", db, "-t", "OrderTopic", "-q", "1", "--from-offset", 3, "--to-offset", 6,
                      "-f", "jsonl"))
    assert [(r["topic"], r["queue_id"], r["queue_offset"]) for r in one] == [("OrderTopic", 1, n) for n in (3, 4, 5)]


def test_reader_queues_and_offsets_match_the_truth(store, truth):
    from rmqtool.store.rocksdb_cq import RocksDBConsumeQueue
    with RocksDBConsumeQueue(store / "consumequeue") as rq:
        expected = sorted((t, int(q)) for t, qs in truth["truth"]["consumeQueues"].items() for q in qs)
        assert rq.queues() == expected
        for topic, queue_id in expected:
            q = truth["truth"]["consumeQueues"][topic][str(queue_id)]
            assert rq.max_offset(topic, queue_id) == q["maxOffset"]
            assert rq.min_offset(topic, queue_id) is None  # the broker writes "min" only when it corrects one
            assert [u.queue_offset for u in rq.units(topic, queue_id)] == list(range(q["minOffset"], q["maxOffset"]))
        units = truth_units(truth)
        assert rq.checkpoint == max(u["commit_log_offset"] + u["store_size"] for u in units)
        assert rq.findings == []


def test_the_file_queue_reader_and_info_know_the_rocksdb_files(store, truth):
    """The RocksDB files flat in consumequeue/ are no topic directories to flag; info lists each database."""
    from rmqtool.findings import QUEUE_DIR_INVALID
    from rmqtool.store.consumequeue import open_consume_queues
    cqs = open_consume_queues(store)
    assert cqs.findings == []
    assert len(cqs.queues) == sum(len(qs) for qs in truth["truth"]["consumeQueues"].values())
    result = _cli("info", store, "-f", "json")
    doc = json.loads(result.stdout)
    assert not [f for f in doc["findings"] if f["id"] == QUEUE_DIR_INVALID]
    listed = {s["name"]: s["read_by"] for s in doc["side_stores"]}
    assert listed["consumequeue"] == "rmqtool dump rocksdbcq"
    assert {listed[f"config/{t}"] for t in layout.CONFIG_TYPES} == {"rmqtool dump rocksdbconfig"}
    # a stray file in a consumequeue/ without RocksDB is still said, as before
    plain = writable_copy(SOURCE / "store", store.parent / "plain")
    (plain / "consumequeue" / "stray").write_bytes(b"x")
    assert [f.id for f in open_consume_queues(plain).findings] == [QUEUE_DIR_INVALID]
    none = _cli("dump", "rocksdbcq", plain)
    assert none.exit_code == 0 and "no RocksDB consume queue" in none.stderr
    assert none.stdout.strip() in ("", "(no rows)")
    shutil.rmtree(plain)


def test_the_config_store_exports_as_rocksdbconfigtojson(store):
    before = {t: snapshot(store / "config" / t) for t in layout.CONFIG_TYPES}
    result = _cli("dump", "rocksdbconfig", store, "-f", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) == set(layout.CONFIG_TYPES)
    assert doc["topics"]["dataVersion"] == {"counter": 3, "stateVersion": 0, "timestamp": 1717200000000}
    assert doc["topics"]["topicConfigTable"]["OrderTopic"]["writeQueueNums"] == 2
    assert doc["topics"]["topicConfigTable"]["\u4e3b\u9898"]["topicName"] == "\u4e3b\u9898"
    assert doc["subscriptionGroups"]["subscriptionGroupTable"]["OrderGroup"]["retryQueueNums"] == 1
    assert doc["consumerOffsets"] == {"offsetTable": {"OrderTopic@OrderGroup": {"0": 53, "1": 47}}}
    only = json.loads(_cli("dump", "rocksdbconfig", store / "config" / "consumerOffsets", "-f", "json").stdout)
    assert only == doc["consumerOffsets"]
    typed = json.loads(_cli("dump", "rocksdbconfig", store, "--type", "topics", "-f", "json").stdout)
    assert typed == doc["topics"]
    assert {t: snapshot(store / "config" / t) for t in layout.CONFIG_TYPES} == before


def test_without_rocksdict_the_command_names_the_extra(store, monkeypatch):
    monkeypatch.setitem(sys.modules, "rocksdict", None)  # import rocksdict raises ImportError
    result = _cli("dump", "rocksdbcq", store)
    assert result.exit_code == ExitCode.OPERATIONAL
    assert "rmqtool[rocksdb]" in result.stderr and "Traceback" not in result.stderr


def test_verify_finds_each_damage_and_the_side_by_side_difference(store, truth, tmp_path):
    """Clean: nothing. Damaged (one damage a queue): a unit deleted inside a queue, a unit pointing
    at no record, a max entry naming another unit, a tags code changed (only the file queue has
    the broker's): each reported for its queue and queue offset."""
    clean = _cli("verify", store, "--only", "rocksdbcq", "-f", "jsonl")
    assert clean.exit_code == 0 and _jsonl(clean) == [], clean.stdout
    damaged = writable_copy(store, tmp_path / "damaged")
    db = damaged / "consumequeue"
    cq = truth["truth"]["consumeQueues"]
    pay0, pay1 = cq["PaymentTopic"]["0"]["entries"], cq["PaymentTopic"]["1"]["entries"]
    order1 = cq["OrderTopic"]["1"]["entries"]
    stamp = {m["physicalOffset"]: m["storeTimestamp"] for m in truth["truth"]["messages"]}
    qo, phy, size, tags, _ = order1[4]
    edit_rocksdb(db, delete=[unit_key("OrderTopic", 0, 5)],
                 put={unit_key("OrderTopic", 1, qo): unit_value(phy, size, tags + 1, stamp[phy]),
                      unit_key("PaymentTopic", 1, 2): unit_value(10**9, pay1[2][2], pay1[2][3], 0)},
                 put_offset={offset_key("PaymentTopic", 0, "max"): offset_value(pay0[3][1], pay0[3][0])})
    result = _cli("verify", damaged, "--only", "rocksdbcq", "-f", "jsonl")
    assert result.exit_code == ExitCode.CORRUPT
    got = {(f["finding"], f.get("topic"), f.get("queue_id"), f.get("queue_offset")) for f in _jsonl(result)}
    assert got == {
        ("rocksdbCqUnitMissing", "OrderTopic", 0, 5),
        ("rocksdbCqFileQueueDiffers", "OrderTopic", 0, 5),  # the file queue has the unit RocksDB lost
        ("rocksdbCqFileQueueDiffers", "OrderTopic", 1, qo),  # tags code
        ("rocksdbCqUnitMismatch", "PaymentTopic", 1, 2),
        ("rocksdbCqFileQueueDiffers", "PaymentTopic", 1, 2),
        ("rocksdbCqOffsetMismatch", "PaymentTopic", 0, pay0[3][0]),
        ("rocksdbCqOffsetMismatch", None, None, None),  # the checkpoint before the bogus unit's end
    }
    assert all(f["path"] == str(db) for f in _jsonl(result))


def test_a_rocksdb_only_store_has_its_queues_checked_against_the_commit_log(truth, tmp_path):
    """storeType=defaultRocksDB: no file queue. Nothing reads as consumeQueueMissing; the messages
    of a queue whose last units were never dispatched to RocksDB are rocksdbCqUnitMissing."""
    root = writable_copy(SOURCE / "store", tmp_path / "store")
    shutil.rmtree(root / "consumequeue")
    entries = truth["truth"]["consumeQueues"]["PaymentTopic"]["1"]["entries"]
    kept = [u for u in truth_units(truth)
            if (u["topic"], u["queue_id"]) != ("PaymentTopic", 1) or u["queue_offset"] < len(entries) - 2]
    write_rocksdb_cq(root, kept)
    result = _cli("verify", root, "-f", "jsonl", "--jobs", 1)
    assert result.exit_code == ExitCode.CORRUPT, result.stdout
    bad = [f for f in _jsonl(result) if f["severity"] != "info"]
    assert [(f["finding"], f["topic"], f["queue_id"], f["queue_offset"]) for f in bad] == [
        ("rocksdbCqUnitMissing", "PaymentTopic", 1, len(entries) - 2)]
    assert bad[0]["path"] == str(root / "consumequeue")


def test_a_database_rocksdb_refuses_is_one_line_naming_it(store, tmp_path):
    broken = tmp_path / "broken" / "consumequeue"
    copy_tree(store / "consumequeue", broken, ignore=shutil.ignore_patterns("*Topic*"))
    (broken / "CURRENT").write_text("MANIFEST-999999\n")  # names a manifest that is not there
    before = snapshot(broken)
    result = _cli("dump", "rocksdbcq", broken)
    assert result.exit_code == ExitCode.BAD_INPUT
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(broken) in lines[0] and "Traceback" not in result.stderr
    assert snapshot(broken) == before
    # a damaged block met while reading: rocksdict's own items() would end there quietly
    damaged = tmp_path / "damaged" / "consumequeue"
    copy_tree(store / "consumequeue", damaged, ignore=shutil.ignore_patterns("*Topic*"))
    for sst in damaged.glob("*.sst"):
        data = bytearray(sst.read_bytes())
        data[100:200] = bytes(b ^ 0xFF for b in data[100:200])
        sst.write_bytes(bytes(data))
    result = _cli("dump", "rocksdbcq", damaged)
    assert result.exit_code == ExitCode.BAD_INPUT, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(damaged) in lines[0] and "Corruption" in lines[0], lines


def test_light_message_queue_units_match_their_records_by_the_multi_dispatch_properties(tmp_path):
    """dispatchLMQ (RocksDBConsumeQueueStore.java:301-329) writes a unit per INNER_MULTI_DISPATCH
    name at its INNER_MULTI_QUEUE_OFFSET, queue 0 for a %LMQ% name. A store the project's engine
    writes (two appends naming %LMQ%room1), its file queue's units and the LMQ's written to RocksDB."""
    from rmqtool.store.commitlog_reader import CommitLogReader
    from rmqtool.store.consumequeue import open_consume_queues
    root = tmp_path / "lmq"
    for n in range(2):
        r = _cli("append", root, *(["--create"] if n == 0 else []), "--topic", "LmqParent", "--queue", 0,
                 "--body", f"m{n}", "--property", "INNER_MULTI_DISPATCH=%LMQ%room1",
                 "--property", f"INNER_MULTI_QUEUE_OFFSET={n}")
        assert r.exit_code == 0, r.stderr
    with CommitLogReader.of_store(root) as reader:
        units = [{"topic": u.topic, "queue_id": u.queue_id, "queue_offset": u.queue_offset,
                  "commit_log_offset": u.commit_log_offset, "store_size": u.size, "tags_code": u.tags_code,
                  "store_timestamp": reader.read(u.commit_log_offset).store_timestamp}
                 for q in open_consume_queues(root).queues for u in q.iter_units()]
    assert [u["queue_offset"] for u in units] == [0, 1]
    lmq = [dict(u, topic="%LMQ%room1", queue_id=0) for u in units]
    write_rocksdb_cq(root, units + lmq)
    clean = _cli("verify", root, "--only", "rocksdbcq", "-f", "jsonl")
    assert clean.exit_code == 0 and _jsonl(clean) == [], clean.stdout
    edit_rocksdb(root / "consumequeue", put={unit_key("%LMQ%room1", 0, 1): unit_value(
        units[0]["commit_log_offset"], units[0]["store_size"], 0, units[0]["store_timestamp"])})
    bad = _jsonl(_cli("verify", root, "--only", "rocksdbcq", "-f", "jsonl"))
    # the unit names the record of LMQ offset 0; and the max entry no longer names the last unit's record
    assert {(f["finding"], f["topic"], f["queue_offset"]) for f in bad} == {
        ("rocksdbCqUnitMismatch", "%LMQ%room1", 1), ("rocksdbCqOffsetMismatch", "%LMQ%room1", 1)}


def test_a_database_a_writer_holds_is_read_from_its_wal(tmp_path):
    """As a running broker holds it: LOCK taken, the units only in the write-ahead log (no .sst yet)."""
    from rocksdict import Options, Rdict
    from rmqtool.store.rocksdb_cq import RocksDBConsumeQueue
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    live = tmp_path / "live"
    db = Rdict(str(live), options)
    offsets = db.create_column_family("offset", Options(raw_mode=True))
    db[unit_key("T", 0, 0)] = unit_value(4116, 278, 7, 1795317381096)
    offsets[offset_key("T", 0, "max")] = offset_value(4116, 0)
    try:
        assert not list(live.glob("*.sst")) and list(live.glob("*.log"))
        with RocksDBConsumeQueue(live) as rq:
            assert [(u.topic, u.queue_id, u.queue_offset, u.commit_log_offset, u.size, u.tags_code, u.store_timestamp)
                    for u in rq.units()] == [("T", 0, 0, 4116, 278, 7, 1795317381096)]
            assert rq.max_offset("T", 0) == 1
    finally:
        db.close()


def test_a_rocksdb_file_given_to_another_dump_names_the_command_that_reads_it(store):
    import shlex
    for given, kind, hinted in ((store / "consumequeue" / "CURRENT", "consumequeue", "rocksdbcq"),
                                (store / "consumequeue" / "LOCK", "commitlog", "rocksdbcq"),
                                (store / "config" / "topics" / "CURRENT", "config", "rocksdbconfig")):
        refused = _cli("dump", kind, given)
        assert refused.exit_code == ExitCode.BAD_INPUT
        hint = refused.stderr.split("(try: ")[1].rsplit(")", 1)[0]
        assert shlex.split(hint) == ["rmqtool", "dump", hinted, str(given.parent)]
        assert _cli(*shlex.split(hint)[1:]).exit_code == 0
