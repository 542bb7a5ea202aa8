"""info, and dump of consume queues, index files, checkpoint and config, against broker truth."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import CLEAN_SCENARIOS, V4, V5, load_truth
from rmqtool.cli.app import app
from rmqtool.store.msgid import decode_uniq_key

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def jsonl(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("name", sorted(CLEAN_SCENARIOS))
def test_info_matches_truth(name):
    scenario = CLEAN_SCENARIOS[name]
    truth = load_truth(scenario / "truth.json")
    r = run("info", scenario / "store", "--format", "json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["store"]["clean_shutdown"] is True
    assert doc["commitlog"]["max_offset"] == truth["truth"]["commitlog"]["maxPhyOffset"]
    assert doc["commitlog"]["min_offset"] == truth["truth"]["commitlog"]["minPhyOffset"]
    on_disk = {(q["topic"], q["queue_id"]): q for q in doc["consume_queues"]}
    for topic, queues in truth["truth"]["consumeQueues"].items():
        for qid, q in queues.items():
            if not q["entries"]:
                continue  # SCHEDULE_TOPIC_XXXX queues exist only in the broker's memory
            assert on_disk[(topic, int(qid))]["min_offset"] == q["minOffset"]
            assert on_disk[(topic, int(qid))]["max_offset"] == q["maxOffset"]
    headers = [(i["file"], i["begin_timestamp"], i["end_timestamp"], i["index_count"]) for i in doc["index_files"]]
    assert headers == [(i["fileName"], i["beginTimestamp"], i["endTimestamp"], i["indexCount"])
                       for i in truth["onDiskAfterShutdown"]["indexFiles"]]
    cp = truth["onDiskAfterShutdown"]["checkpoint"]
    assert doc["checkpoint"]["physic_msg_timestamp"] == cp["physicMsgTimestamp"]
    assert doc["checkpoint"]["min_timestamp"] == cp["minTimestamp"]
    assert doc["checkpoint"]["physic_msg_time"].endswith("Z")


def test_info_crashed_store_says_unclean_and_shows_damage():
    variant = V5 / "crash5" / "b-garbled-last-message"
    truth = load_truth(variant / "truth.json")
    r = run("info", variant / "input" / "store", "-f", "json")
    doc = json.loads(r.stdout)
    assert doc["store"]["clean_shutdown"] is not truth["abortFileExistedBeforeLoad"]
    # the crashed broker's PID: its UNIQ_KEYs carry the low 16 bits (MessageClientIDSetter)
    pids = {decode_uniq_key(m["uniqKey"]).pid for m in truth["truth"]["messages"]}
    assert pids == {doc["store"]["abort_pid"] & 0xFFFF}
    # the garbled last record does not count: where the broker's load ends the commit log
    assert doc["commitlog"]["max_offset"] == truth["afterLoadBeforeStart"]["maxPhyOffset"]
    assert doc["commitlog"]["max_offset"] == truth["mutation"]["lastMessagePhysicalOffset"]
    assert doc["commitlog"]["segments"][-1]["preallocated"] is True
    assert any(f["finding"] == "recordLengthMismatch" for f in doc["findings"])
    assert r.exit_code == 3


STARTED_CRASHES = sorted(d for c in (V4 / "crash", V5 / "crash5") for d in c.iterdir()  # the engine starts on these
                         if (d / "input" / "store").is_dir() and load_truth(d / "truth.json")["loadOk"])


@pytest.mark.parametrize("variant", STARTED_CRASHES, ids=lambda d: f"{d.parent.name}/{d.name}")
def test_info_queues_are_those_the_next_start_leaves(variant):
    """A crashed store's queues as the broker's start leaves them (truth.json: the engine's after
    it), as report and offsets show them: a queue file or directory deleted is put back by the
    start's dispatch. info showed the files cut at the recovered end (crash/c2: 300 where the
    started broker has 310; crash/c1: no row for the queue it makes again)."""
    store = variant / "input" / "store"
    truth = load_truth(variant / "truth.json")["truth"]["consumeQueues"]
    doc = json.loads(run("info", store, "-f", "json").stdout)
    shown = {(q["topic"], q["queue_id"]): (q["min_queue_offset"], q["max_queue_offset"]) for q in doc["consume_queues"]}
    want = {(t, int(q)): (v["minOffset"], v["maxOffset"]) for t, qs in truth.items() for q, v in qs.items()
            if v["entries"]}  # SCHEDULE_TOPIC_XXXX queues without a unit exist only in the broker's memory
    assert {k: shown.get(k) for k in want} == want


def test_info_table_and_bad_path(tmp_path):
    r = run("info", V4 / "basic" / "store")
    assert r.exit_code == 0 and "consume_queues" in r.stdout and "OrderTopic" in r.stdout
    r = run("info", tmp_path)
    assert r.exit_code == 4 and r.stderr.startswith("rmqtool: error: ")


@pytest.mark.parametrize("name", ["4.9.8/basic", "5.3.3/batchcq"])
def test_dump_consumequeue_matches_truth(name):
    scenario = CLEAN_SCENARIOS[name]
    truth = load_truth(scenario / "truth.json")
    r = run("dump", "consumequeue", scenario / "store", "-f", "jsonl")
    assert r.exit_code == 0, r.stderr
    got = {}
    for row in jsonl(r.stdout):
        got.setdefault((row["topic"], row["queue_id"]), []).append(
            [row["queue_offset"], row["commit_log_offset"], row["size"], row["tags_code"]]
            + ([row["batch_size"]] if "batch_size" in row else []))
    for topic, queues in truth["truth"]["consumeQueues"].items():
        for qid, q in queues.items():
            want = q["entries"]  # 5.3.3 adds batchNum, 1 for a plain queue
            if not want:
                continue
            have = got[(topic, int(qid))]
            if len(want[0]) == 5 and len(have[0]) == 4:
                have = [h + [1] for h in have]
            assert len(have[0]) == len(want[0])
            assert have == want


def test_dump_consumequeue_fill_units_and_single_file():
    store = V4 / "crash" / "c1-delete-cq-queue-dir" / "expected" / "store"
    r = run("dump", "consumequeue", store / "consumequeue" / "CrashTopic" / "1", "-f", "jsonl")
    rows = jsonl(r.stdout)
    assert rows[0]["queue_offset"] == 100 and rows[0]["is_fill"] is True and rows[0]["size"] == 2147483647
    assert not any(x["is_fill"] for x in rows if x["queue_offset"] >= 136)
    one = sorted((store / "consumequeue" / "CrashTopic" / "0").iterdir())[1]
    rows = jsonl(run("dump", "consumequeue", one, "-f", "jsonl").stdout)
    assert rows[0]["queue_offset"] == int(one.name) // 20 and all(x["file"] == str(one) for x in rows)


def test_dump_index_entries_walk_to_the_messages():
    truth = load_truth(V4 / "timekey" / "truth.json")
    offsets = {m["physicalOffset"] for m in truth["truth"]["messages"]}
    rows = jsonl(run("dump", "index", V4 / "timekey" / "store", "-f", "jsonl").stdout)
    headers = [x for x in rows if x["record"] == "header"]
    entries = [x for x in rows if x["record"] == "entry"]
    assert len(headers) == 3
    assert len(entries) == sum(h["index_count"] - 1 for h in headers)
    assert all(e["phy_offset"] in offsets for e in entries)


def test_dump_checkpoint_5x_fields():
    truth = load_truth(V5 / "crash5" / "a-as-is" / "truth.json")
    r = run("dump", "checkpoint", V5 / "crash5" / "a-as-is" / "expected" / "store" / "checkpoint", "-f", "json")
    doc = json.loads(r.stdout)
    cp = truth["onDiskAfterShutdown"]["checkpoint"]
    assert doc["confirm_phy_offset"] == cp["confirmPhyOffset"] == 159162
    assert doc["master_flushed_offset"] == cp["masterFlushedOffset"]
    assert doc["physic_msg_timestamp"] == cp["physicMsgTimestamp"]
    assert doc["has_5x_fields"] is True
    assert r.exit_code == 0


def test_dump_checkpoint_wrong_size(tmp_path):
    (tmp_path / "checkpoint").write_bytes(b"\0" * 100)
    r = run("dump", "checkpoint", tmp_path / "checkpoint")
    assert r.exit_code == 4 and "4096" in r.stderr and "Traceback" not in r.stderr


def test_dump_config_fastjson(tmp_path):
    cfg = tmp_path / "store" / "config"
    cfg.mkdir(parents=True)
    (tmp_path / "store" / "commitlog").mkdir()
    (cfg / "consumerOffset.json").write_text('{\n\t"offsetTable":{\n\t\t"T@g":{0:12,1:3}\n\t}\n}')
    (cfg / "delayOffset.json").write_text("")  # empty: the broker reads the .bak
    (cfg / "delayOffset.json.bak").write_text('{"offsetTable":{1:5,2:7}}')
    r = run("dump", "config", tmp_path / "store", "-f", "json")
    assert r.exit_code == 0, r.stderr
    docs = {d["file"]: d for d in json.loads(r.stdout)}
    assert docs["consumerOffset.json"]["document"] == {"offsetTable": {"T@g": {"0": 12, "1": 3}}}
    assert docs["delayOffset.json"]["source"] == "bak"
    assert docs["delayOffset.json"]["document"]["offsetTable"] == {"1": 5, "2": 7}
    r = run("info", tmp_path / "store", "-f", "json")
    summary = {c["file"]: c for c in json.loads(r.stdout)["config"]}
    assert summary["consumerOffset.json"]["queues"] == 2


def test_dump_kind_mismatch():
    r = run("dump", "index", V4 / "basic" / "store" / "checkpoint")
    assert r.exit_code == 4 and "rmqtool dump checkpoint" in r.stderr


@pytest.mark.parametrize("name,text", [
    ("consumerOffset.json", '{"offsetTable": null}'),
    ("consumerOffset.json", '[1, 2]'),
    ("delayOffset.json", '[]'),
    ("subscriptionGroup.json", '{"subscriptionGroupTable": [1]}'),
])
def test_info_one_bad_config_file_is_a_finding(store_copy, name, text):
    """Before the fix info failed as a whole (exit 4, no file named) on the first two."""
    store = store_copy(V4 / "txdelay" / "store")
    (store / "config").mkdir()
    (store / "config" / name).write_text(text)
    (store / "config" / "topics.json").write_text('{"topicConfigTable": {"T": {}}}')
    r = run("info", store, "-f", "json")
    assert r.exit_code == 3, r.stderr
    doc = json.loads(r.stdout)
    truth = load_truth(V4 / "txdelay" / "truth.json")
    assert doc["commitlog"]["max_offset"] == truth["truth"]["commitlog"]["maxPhyOffset"]  # the rest still shows
    config = {c["file"]: c for c in doc["config"]}
    assert config["topics.json"]["topics"] == 1 and config[name]["error"]
    bad = [f for f in doc["findings"] if f["finding"] == "configTableInvalid"]
    assert [f["path"] for f in bad] == [str(store / "config" / name)]
    line = next(ln for ln in r.stderr.splitlines() if "configTableInvalid" in ln)
    assert line.startswith("error: configTableInvalid: " + str(store / "config" / name))
    r = run("info", store)  # the table shows it once, in the findings section, and not again on stderr
    assert r.exit_code == 3 and "configTableInvalid" in r.stdout and "configTableInvalid" not in r.stderr


def test_info_reads_config_files_as_the_brokers_decode_does(store_copy):
    """fastjson loads a key without '@' (no lookup finds it); ScheduleMessageService's decode
    throws on a null table (putAll(null)), and with no .bak the broker starts without it."""
    store = store_copy(V4 / "txdelay" / "store")
    (store / "config").mkdir()
    (store / "config" / "consumerOffset.json").write_text('{"offsetTable": {"no-at-sign": {0: 1}}}')
    (store / "config" / "delayOffset.json").write_text('{"offsetTable": null}')
    r = run("info", store, "-f", "json")
    doc = json.loads(r.stdout)
    config = {c["file"]: c for c in doc["config"]}
    assert config["consumerOffset.json"]["topic_groups"] == 1 and "error" not in config["consumerOffset.json"]
    assert config["delayOffset.json"]["source"] is None
    [found] = [f for f in doc["findings"] if f["path"] == str(store / "config" / "delayOffset.json")]
    assert (found["finding"], found["consequence"]) == ("configUnparseable", "progressLost"), found
    assert r.exit_code == 3 and "offsetTable is null" in found["message"]


def test_dump_consumequeue_shows_invalid_units_with_a_finding_each(store_copy):
    """Units with commitLogOffset -1 were left out of the dump (one finding per file at most)."""
    import struct
    truth = load_truth(V4 / "basic" / "truth.json")
    want = truth["truth"]["consumeQueues"]["OrderTopic"]["0"]["entries"]
    store = store_copy(V4 / "basic" / "store")
    first = sorted((store / "consumequeue" / "OrderTopic" / "0").iterdir())[0]  # not among the last 3 files
    data = bytearray(first.read_bytes())
    for n in (5, 7):
        data[n * 20:n * 20 + 8] = struct.pack(">q", -1)
    first.write_bytes(bytes(data))
    r = run("dump", "consumequeue", store / "consumequeue" / "OrderTopic" / "0", "-f", "jsonl")
    assert r.exit_code == 3
    rows = jsonl(r.stdout)
    assert [x["queue_offset"] for x in rows] == [e[0] for e in want]
    for x, e in zip(rows, want):
        bad = x["queue_offset"] in (5, 7)
        assert x["valid"] is not bad
        assert [x["commit_log_offset"], x["size"], x["tags_code"]] == ([-1] + e[2:] if bad else e[1:])
    lines = [ln for ln in r.stderr.splitlines() if "consumeQueueUnitInvalid" in ln]
    assert [ln.split(": ")[2] for ln in lines] == [f"{first} at offset 100", f"{first} at offset 140"]


def test_dump_consumequeue_queue_dir_not_an_integer(store_copy):
    """A queue directory named other than an integer raised a ValueError traceback."""
    store = store_copy(V4 / "basic" / "store")
    topic = store / "consumequeue" / "OrderTopic"
    (topic / "0").rename(topic / "zero")
    r = run("dump", "consumequeue", topic / "zero", "-f", "jsonl")
    assert r.exit_code == 4 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"rmqtool: error: {topic / 'zero'}: ") and "queue id" in r.stderr
    r = run("dump", "consumequeue", next((topic / "zero").iterdir()), "-f", "jsonl")
    assert r.exit_code == 4 and "queue id" in r.stderr and "Traceback" not in r.stderr
    r = run("dump", "consumequeue", topic, "-f", "jsonl")  # the other queues, and a finding
    assert r.exit_code == 0
    assert {x["queue_id"] for x in jsonl(r.stdout)} == {1, 2, 3}
    assert f"warning: queueDirInvalid: {topic / 'zero'}: " in r.stderr


@pytest.mark.parametrize("kind", ["timercheck", "rocksdbconfig"])
def test_a_document_kind_the_store_lacks_is_null_in_json(kind):
    """4.9.8 basic has neither config/timercheck nor a RocksDB config store: -f json is one
    JSON value (null), not an empty stream; the stderr line says what is missing."""
    store = V4 / "basic" / "store"
    assert not (store / "config" / "timercheck").exists()
    r = run("dump", kind, store, "-f", "json")
    assert r.exit_code == 0 and json.loads(r.stdout) is None
    assert r.stderr.startswith("rmqtool: no ")
    assert run("dump", kind, store, "-f", "jsonl").stdout == ""
