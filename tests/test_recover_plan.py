"""rmqtool recover: the plan equals what the real broker did to every crash store.

Expected values come from the broker: the shared crash fixtures' summary.json and
truth.json (4.9.8 crash and crash-fast, 5.3.3 crash5), and fixtures/crash-made/ (shapes
made here, each recovered by the real 4.9.8 and 5.3.3 engines; see its README).
"""
from __future__ import annotations

import collections
import hashlib
import itertools
import json
import pathlib
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, V4, V5, load_truth
from helpers import writable_copy
from rmqtool.cli.app import app
from rmqtool.recovery.outcome import Settings, simulate
from rmqtool.recovery.plan import plan_recovery

MADE = FIXTURES / "crash-made"
SHARED = [(V4 / "crash", "4.9"), (V4 / "crash-fast", "4.9"), (V5 / "crash5", "5.3"), (V5 / "crash5", "4.9")]
CASES = [(base, variant, semantics) for base, semantics in SHARED
         for variant in json.loads((base / "summary.json").read_text())]
MADE_CASES = [(d.name, label) for d in sorted(p for p in MADE.iterdir() if p.is_dir())
              for label in json.loads((d / "truth.json").read_text())["engines"]]


def _id(x):
    return x.name if isinstance(x, pathlib.Path) else str(x)


def _state(root: pathlib.Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("base,variant,semantics", CASES, ids=_id)
def test_plan_is_the_brokers_outcome_on_the_shared_crash_stores(base, variant, semantics):
    truth = json.loads((base / "summary.json").read_text())[variant]
    plan = plan_recovery(base / variant / "input" / "store", settings=Settings(semantics=semantics))
    doc = plan.to_json()
    assert doc["loadable"] == truth["loadOk"]
    if not truth["loadOk"]:
        assert doc["reason"] and plan.refusal and not plan.actions
        return
    assert doc["commit_log"]["max_offset_after"] == truth["maxPhyOffset"]
    assert doc["commit_log"]["min_offset"] == truth["minPhyOffset"]
    queues = truth.get("queues") or truth["queues_min_max_readable"]
    assert {k: [v["min_offset"], v["max_offset"]] for k, v in doc["queues"].items()} == \
        {k: v[:2] for k, v in queues.items()}
    assert len([m for m in doc["lost_messages"] if m["reason"] != "unit lost"]) == truth["lostFromCommitLog"]
    # every message the broker no longer served through its queue, lost from the log or not (item 8)
    assert dict(collections.Counter(f"{m['topic']}/{m['queue_id']}" for m in doc["lost_messages"])) == \
        truth.get("cqEntriesNotReachable", {})
    full = load_truth(base / variant / "truth.json")
    listed = full.get("diffVsPreCrash", {}).get("lostFromCommitLog", [])
    lost = {m["commit_log_offset"]: m for m in doc["lost_messages"]}
    for m in listed:
        got = lost[m["physicalOffset"]]
        assert (got["topic"], got["queue_id"], got["queue_offset"]) == (m["topic"], m["queueId"], m["queueOffset"])
        if got["readable"]:
            assert got["keys"] == (m["keys"].split() if m["keys"] else [])
    assert doc["mode"] == ("abnormal" if full["abortFileExistedBeforeLoad"] else "normal")


@pytest.mark.parametrize("name,label", MADE_CASES, ids=_id)
def test_plan_is_the_brokers_outcome_on_the_made_crash_stores(name, label):
    truth = json.loads((MADE / name / "truth.json").read_text())
    expected = truth["engines"][label]
    settings = Settings(semantics="5.3" if label.startswith("5.3") else "4.9",
                        verify_prop_crc="forceVerifyPropCRC" in label)
    plan = plan_recovery(MADE / name / "input" / "store", settings=settings)
    doc = plan.to_json()
    assert doc["loadable"] == (expected["loadOk"] and expected["startReturned"] is not False)
    assert doc["commit_log"]["max_offset_after"] == expected["maxPhyOffset"]
    assert {k: [v["min_offset"], v["max_offset"]] for k, v in doc["queues"].items()} == expected["queues"]


def test_the_two_versions_differ_where_the_brokers_did():
    """Two made shapes the 4.9.8 and 5.3.3 engines recover differently, and the plan with them."""
    torn = MADE / "torn-middle-normal" / "input" / "store"
    v4 = plan_recovery(torn, settings=Settings(semantics="4.9")).to_json()
    v5 = plan_recovery(torn, settings=Settings(semantics="5.3")).to_json()
    assert v4["commit_log"]["max_offset_after"] < v5["commit_log"]["max_offset_after"]
    assert v4["lost_messages"] and not v5["lost_messages"]
    stuck = MADE / "missing-middle-no-queues" / "input" / "store"
    assert not plan_recovery(stuck, settings=Settings(semantics="4.9")).loadable
    assert plan_recovery(stuck, settings=Settings(semantics="5.3")).loadable


@pytest.mark.parametrize("variant", [v for v in json.loads((V4 / "crash" / "summary.json").read_text())
                                     if (V4 / "crash" / v / "expected").is_dir()])
def test_index_files_destroyed_are_those_the_broker_destroyed(variant):
    """After an abnormal exit the broker destroys index files newer than the checkpoint's
    indexMsgTimestamp: the input's index files missing from the broker's output."""
    root = V4 / "crash" / variant
    before = {p.name for p in (root / "input" / "store" / "index").glob("*")} \
        if (root / "input" / "store" / "index").is_dir() else set()
    after = {p.name for p in (root / "expected" / "store" / "index").glob("*")}
    plan = plan_recovery(root / "input" / "store")
    assert {pathlib.Path(p).name for p in plan.to_json()["index_files_destroyed"]} == before - after
    kept = plan_recovery(root / "input" / "store", keep_index=True)
    assert not [a for a in kept.actions if "/index/" in a.path]


# ---- the command -------------------------------------------------------------------------------
runner = CliRunner()


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_clean_store_plans_nothing_and_exits_0():
    r = _run("recover", V4 / "basic" / "store", "-f", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["needs_recovery"] is False and doc["lost_messages"] == [] and doc["loadable"]


def test_crash_store_plan_exits_3_and_names_every_field():
    r = _run("recover", V4 / "crash" / "e3-corrupt-body-in-second-to-last-commitlog-file" / "input" / "store",
             "-f", "json")
    assert r.exit_code == 3
    doc = json.loads(r.stdout)
    for field in ("mode", "semantics", "start_file", "commit_log", "queues", "lost_messages", "files_deleted",
                  "index_files_destroyed", "loadable"):
        assert field in doc
    for m in doc["lost_messages"]:
        assert set(m) >= {"commit_log_offset", "topic", "queue_id", "queue_offset", "keys", "store_timestamp"}


def test_the_table_plan_is_numbered_and_fits_80_columns():
    r = runner.invoke(app, ["recover", str(V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file" / "input" /
                                             "store")], env={"COLUMNS": "80"})
    lines = r.stdout.splitlines()
    assert lines[0].startswith(" 1. abnormal recovery")
    assert all(len(line) <= 80 for line in lines)
    assert any("messages lost" in line for line in lines)


def test_a_store_without_commit_log_files_plans_every_queue_file_gone_in_plain_words(tmp_path):
    """recoverNormally with no commit log file destroys every consume queue; the table said
    "recovery starts in None"."""
    store = writable_copy(V4 / "basic" / "store", tmp_path / "store")
    for f in (store / "commitlog").iterdir():
        f.unlink()
    queue_files = sorted(str(p) for p in (store / "consumequeue").rglob("*") if p.is_file())
    table = runner.invoke(app, ["recover", str(store)], env={"COLUMNS": "200"}).stdout
    doc = json.loads(_run("recover", store, "-f", "json").stdout)
    assert " 2. recovery starts in no file: " in table and "None" not in table
    assert doc["start_file"] is None and sorted(doc["files_deleted"]) == queue_files


@pytest.mark.parametrize("marker", ["lock", "checkpoint"])
def test_a_directory_where_the_lock_or_checkpoint_goes_is_a_store_the_broker_does_not_start(marker, tmp_path):
    """RandomAccessFile cannot open a directory: the store's constructor (lock) or load()
    (StoreCheckpoint) throws. The plan said a normal start with nothing to do; with the lock a
    directory, info and report stopped on it (exit 8), verify said nothing and check said OK."""
    store = writable_copy(V4 / "basic" / "store", tmp_path / "store")
    (store / marker).unlink(missing_ok=True)
    (store / marker).mkdir()
    r = _run("recover", store, "-f", "json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 3 and doc["loadable"] is False
    assert doc["reason"].startswith(f"{store / marker}: a directory where ")
    verify = _run("verify", store, "-f", "json", "--no-progress")
    refused = [f for f in json.loads(verify.stdout) if f["finding"] == "storeNotLoadable"]
    assert verify.exit_code == 3 and [(f["path"], f["message"]) for f in refused] == [(str(store / marker),
                                                                                      doc["reason"])]
    report = _run("report", store, "-f", "json", "--now", "0")
    assert report.exit_code == 3 and json.loads(report.stdout)["store"]["loadable"] is False
    check = _run("check", store, "--now", "0")
    assert check.exit_code == 3 and check.stdout.startswith(f"RMQTOOL CHECK UNKNOWN - {store / marker}: ")
    # a writer says what helps (it said "run rmqtool recover", which refuses the store)
    redispatch = _run("redispatch", store, "--index", "--apply")
    assert redispatch.exit_code == 3 and doc["advice"] in redispatch.stderr and "run rmqtool recover" not in \
        redispatch.stderr
    if marker == "lock":  # what is there: the markers read it as the broker's File.exists() would
        info = json.loads(_run("info", store, "-f", "json").stdout)
        assert info["store"]["lock_file"] is True and info["store"]["locked_by_pid"] is None
        assert "lockFileUnexpected" in [f["finding"] for f in info["findings"]]


@pytest.mark.parametrize("base,variant", [(V4 / "crash", "e3-corrupt-body-in-second-to-last-commitlog-file"),
                                          (V4 / "crash", "c1-delete-cq-queue-dir"),
                                          (V5 / "crash5", "b-garbled-last-message"),
                                          (MADE, "roll-kill-last-missing")], ids=_id)
def test_apply_to_a_copy_leaves_the_input_and_repairs_once(base, variant, tmp_path):
    src = writable_copy(base / variant / "input" / "store", tmp_path / "in")
    before = _state(src)
    out = tmp_path / "out"
    planned = json.loads(_run("recover", src, "-f", "json").stdout)
    r = _run("recover", src, "--apply", "--to", out, "-f", "json")
    assert r.exit_code == 0, r.output
    assert _state(src) == before
    assert not (out / "abort").exists()
    again = _run("recover", out, "-f", "json")
    doc = json.loads(again.stdout)
    # messages already lost (c1's deleted queue) are listed again: exit 3, nothing to recover
    assert again.exit_code == (3 if doc["lost_messages"] else 0) and doc["needs_recovery"] is False, doc["findings"]
    assert doc["commit_log"]["max_offset_after"] == planned["commit_log"]["max_offset_after"]
    assert {k: v["max_offset"] for k, v in doc["queues"].items()} == \
        {k: v["max_offset"] for k, v in planned["queues"].items()}
    verify = _run("verify", out, "-f", "json", "--no-progress")
    errors = [f for f in json.loads(verify.stdout) if f["severity"] == "error"]
    assert not [f for f in errors if f["finding"] in ("recordTorn", "recoveryCutsCommitLog", "segmentAfterEnd",
                                                      "consumeQueueBeyondCommitLog", "trailingGarbage")]


def test_apply_in_place_then_undo_gives_every_byte_back(tmp_path):
    src = writable_copy(V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file" / "input" / "store", tmp_path / "s")
    before = _state(src)
    backup = tmp_path / "backup"
    r = _run("recover", src, "--apply", "--backup-dir", backup, "-f", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["applied"]["backup_dir"] == str(backup)
    assert _state(src) != before
    u = _run("undo", backup, "-f", "json")
    assert u.exit_code == 0, u.output
    after = _state(src)
    # every file as it was (the commit log's zeroed and deleted bytes, the queues and index
    # files dispatch rewrote, checkpoint and abort marker); files made since are gone
    lockless = lambda state: {k: v for k, v in state.items() if k != "lock"}  # noqa: E731
    assert lockless(after) == lockless(before)


def test_a_store_the_broker_would_not_load_is_not_written(tmp_path):
    src = writable_copy(V4 / "crash" / "b1-truncate-last-commitlog-mid-message" / "input" / "store", tmp_path / "s")
    before = _state(src)
    r = _run("recover", src, "--apply")
    assert r.exit_code == 3
    assert "not recovered" in r.stderr and "mapped file size" in r.stderr
    assert _state(src) == before


def test_a_missing_middle_file_is_planned_but_not_applied(tmp_path):
    src = writable_copy(MADE / "missing-middle-abnormal" / "input" / "store", tmp_path / "s")
    before = _state(src)
    doc = json.loads(_run("recover", src, "-f", "json").stdout)
    assert doc["loadable"] and doc["apply_refused"]
    assert any(f["finding"] == "segmentGap" for f in doc["findings"])
    r = _run("recover", src, "--apply")
    assert r.exit_code == 3 and _state(src) == before


def test_a_store_a_running_process_holds_is_refused(tmp_path):
    src = writable_copy(V4 / "crash" / "b2-garbage-tail-of-last-message" / "input" / "store", tmp_path / "s")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from rmqtool.recovery.store_lock import StoreLock; l = StoreLock(sys.argv[1]); l.acquire(); "
        "print('held', flush=True); time.sleep(60)"), str(src / "lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = _state(src)
        r = _run("recover", src, "--apply")
        assert r.exit_code == 5, r.output
        assert _state(src) == before
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("args", [["--semantics", "6.0"], ["--to", "/tmp/x"], ["--semantics", "4.9", "--verify-prop-crc"]])
def test_usage_errors(args):
    r = _run("recover", V4 / "basic" / "store", *args)
    assert r.exit_code == 2 and "error" in r.stderr


def test_verify_prop_crc_changes_the_end_as_force_verify_prop_crc_did():
    truth = json.loads((MADE / "prop-crc-digits" / "truth.json").read_text())["engines"]
    store = MADE / "prop-crc-digits" / "input" / "store"
    plain = json.loads(_run("recover", store, "--semantics", "5.3", "-f", "json").stdout)
    forced = json.loads(_run("recover", store, "--verify-prop-crc", "-f", "json").stdout)
    assert plain["commit_log"]["max_offset_after"] == truth["5.3.3"]["maxPhyOffset"]
    assert forced["commit_log"]["max_offset_after"] == truth["5.3.3-forceVerifyPropCRC"]["maxPhyOffset"]
    assert forced["semantics"] == "5.3"


def test_from_checkpoint_rescans_a_cleanly_closed_store():
    store = MADE / "torn-before-normal-start" / "input" / "store"  # no abort file
    normal = simulate(store, Settings(semantics="4.9"))
    forced = simulate(store, Settings(semantics="4.9", from_checkpoint=True))
    assert not normal.abnormal and forced.abnormal
    assert "forced" in forced.mode_reason


def test_served_only_leaves_out_what_recovery_cuts():
    root = V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file"
    truth = load_truth(root / "truth.json")
    store = root / "input" / "store"
    everything = _run("dump", "commitlog", store, "-f", "jsonl", "--no-progress")
    served = _run("dump", "commitlog", store, "-f", "jsonl", "--no-progress", "--served-only")
    rows = [json.loads(line) for line in served.stdout.splitlines()]
    messages = [r for r in rows if r["record"] == "message"]
    assert len(messages) == truth["truth"]["commitlog"]["messageCount"]
    assert max(r["commit_log_offset"] for r in messages) < truth["truth"]["commitlog"]["maxPhyOffset"]
    assert len(everything.stdout.splitlines()) > len(rows)
    lost = truth["diffVsPreCrash"]["lostFromCommitLog"][-1]
    found = _run("query", store, "--key", lost["keys"], "-f", "jsonl")
    assert found.exit_code == 0 and json.loads(found.stdout.splitlines()[0])["commit_log_offset"] == \
        lost["physicalOffset"]
    hidden = _run("query", store, "--key", lost["keys"], "-f", "jsonl", "--served-only")
    assert hidden.exit_code == 1 and "--served-only" in hidden.stderr


def test_served_only_needs_a_store():
    seg = next((V4 / "basic" / "store" / "commitlog").iterdir())
    assert _run("dump", "commitlog", seg, "--served-only").exit_code == 2


@pytest.mark.parametrize("semantics, entry, loads", [
    ("4.9", "notes.txt", False), ("5.3", "notes.txt", False),  # a file of another length stops the load
    ("4.9", "old/", False),  # 4.9.8 counts a directory too (its length is not the file size)
    ("5.3", "old/", True),  # 5.3.3 skips directories
])
def test_an_entry_that_is_not_the_brokers_in_commitlog(store_copy, semantics, entry, loads):
    """MappedFileQueue.load reads every entry of commitlog/ by name, as the real 4.9.8 and
    5.3.3 engines were seen to (tools/real-broker: loadResult false for each refusal)."""
    store = store_copy(V5 / "v2-and-crc" / "store")
    stray = store / "commitlog" / entry.rstrip("/")
    stray.mkdir() if entry.endswith("/") else stray.write_text("kept here by hand")
    r = _run("recover", store, "--semantics", semantics, "-f", "json")
    doc = json.loads(r.stdout)
    assert doc["loadable"] is loads
    if not loads:
        assert r.exit_code == 3 and str(stray) in doc["reason"] and doc["apply_refused"]
        assert _run("recover", store, "--semantics", semantics, "--apply").exit_code == 3
        assert stray.exists()


def test_an_empty_last_file_is_deleted_by_5_3_and_refused_by_4_9(store_copy):
    from rmqtool.recovery.outcome import Settings, simulate
    store = store_copy(V5 / "v2-and-crc" / "store")
    segments = sorted((store / "commitlog").iterdir())
    size = segments[0].stat().st_size
    empty = store / "commitlog" / f"{int(segments[-1].name) + size:020d}"
    empty.write_bytes(b"")
    five = simulate(store, Settings(semantics="5.3"))
    assert five.loadable and str(empty) in five.commit_log_files_deleted
    four = simulate(store, Settings(semantics="4.9"))
    assert not four.loadable and str(empty) in four.reason


def _topics_json(store: pathlib.Path, batch: dict[str, bool]) -> None:
    """A topics.json as the broker's fastjson writes it: ``batch`` maps topic -> queue.type BatchCQ."""
    table = {t: {"attributes": {"queue.type": "BatchCQ"} if b else {}, "order": False, "perm": 6,
                 "readQueueNums": 2, "topicFilterType": "SINGLE_TAG", "topicName": t, "topicSysFlag": 0,
                 "writeQueueNums": 2} for t, b in batch.items()}
    (store / "config").mkdir(exist_ok=True)
    (store / "config" / "topics.json").write_text(json.dumps({"dataVersion": {"counter": 1, "timestamp": 0},
                                                              "topicConfigTable": table}, indent="\t"))


@pytest.mark.parametrize("batch,refused", [
    ({"BatchCQTopic": True, "PlainTopic": False}, None),
    ({"BatchCQTopic": False, "PlainTopic": False}, "BatchCQTopic should be BatchCQ, but is SimpleCQ"),
    ({"PlainTopic": False}, "BatchCQTopic should be BatchCQ, but is SimpleCQ"),  # an unlisted topic is SimpleCQ
    ({"BatchCQTopic": True, "PlainTopic": True}, "PlainTopic should be SimpleCQ, but is BatchCQ"),
])
def test_the_queue_type_in_topics_json_decides_whether_5_3_loads(store_copy, batch, refused):
    """5.3.3 loadConsumeQueues: a queue directory whose topic's queue type (topics.json) is the
    other one fails the load (the engine's queueTypeShouldBe; the oracle's README shows the
    same refusal for a batch queue the engine was not told about)."""
    store = store_copy(V5 / "batchcq" / "store")
    _topics_json(store, batch)
    out = simulate(store, Settings())
    assert out.semantics == "5.3"
    if refused is None:
        truth = load_truth(V5 / "batchcq" / "truth.json")["truth"]["consumeQueues"]
        assert out.loadable and out.batch_topics == ["BatchCQTopic"]
        assert out.queues == {f"{t}/{q}": (v["apiMinOffsetInQueue"], v["apiMaxOffsetInQueue"])
                              for t, qs in truth.items() for q, v in qs.items()}
    else:
        topic, rest = refused.split(" ", 1)
        assert not out.loadable and f"The queue type of topic: {topic} {rest}" in out.reason


def test_lost_batch_messages_are_listed_with_their_batch_base(store_copy):
    """A torn tail in a batch topic: the plan lists the records past the end, readable or not,
    and the batch consume queue's units that point there (5.3.3 keeps none of them)."""
    name = "bcq-ahead-normal"
    expected = json.loads((MADE / name / "truth.json").read_text())["engines"]["5.3.3"]
    doc = plan_recovery(MADE / name / "input" / "store").to_json()
    assert doc["semantics"] == "5.3" and doc["commit_log"]["max_offset_after"] == expected["maxPhyOffset"]
    truth = load_truth(V5 / "batchcq" / "truth.json")["truth"]["messages"]
    past = [m for m in truth if m["physicalOffset"] >= expected["maxPhyOffset"]]
    assert [(m["commit_log_offset"], m["topic"], m["queue_offset"]) for m in doc["lost_messages"]] == \
        [(m["physicalOffset"], m["topic"], m["dispatchMsgBaseOffset"]) for m in past]


BATCH_SHAPES = ["bcq-ahead-normal", "bcq-torn-middle-abnormal", "bcq-queue-deleted-normal", "bcq-unit-zeroed",
                "bcq-all-deleted-abnormal", "inner-base-not-a-number"]


def _units(directory: pathlib.Path) -> bytes:
    """A batch queue's units, its files joined in name order, up to the first all-zero unit."""
    data = b"".join(p.read_bytes() for p in sorted(directory.iterdir()))
    units = [data[i:i + 46] for i in range(0, len(data) - 45, 46)]
    return b"".join(itertools.takewhile(lambda u: u != bytes(46), units))


def _batch_size(name: str) -> list:
    """--batch-cq-size for a shape whose batchconsumequeue/ is gone (nothing shows the size):
    the 5.3.3 broker's (truth.json of the batchcq fixture the shapes come from)."""
    if name.startswith("bcq-all-deleted"):
        config = load_truth(V5 / "batchcq" / "truth.json")["messageStoreConfig"]["effectiveGetterValues"]
        return ["--batch-cq-size", str(config["mapperFileSizeBatchConsumeQueue"])]
    return []


@pytest.mark.parametrize("name", BATCH_SHAPES)
def test_apply_leaves_the_batch_queues_the_broker_keeps(name, tmp_path):
    """recover --apply on a 5.3 store with batch consume queues: the queues come out as the real
    5.3.3 engine recovered them (made shapes' truth), each batch queue's units are the broker's own
    (a run of the fixture's units, byte for byte, however the engine had to rebuild them), and a
    second plan finds nothing. (On each of these results the real 5.3.3 engine, told the batch
    file size the files show, loaded the store and cut nothing: tools/real-broker.)"""
    expected = json.loads((MADE / name / "truth.json").read_text())["engines"]["5.3.3"]
    out = tmp_path / "out"
    r = _run("recover", MADE / name / "input" / "store", "--apply", "--to", out, "-f", "json", *_batch_size(name))
    assert r.exit_code == 0, r.output
    after = simulate(out, Settings())
    assert after.queues == {k: tuple(v) for k, v in expected["queues"].items()}
    assert after.max_offset_after == expected["maxPhyOffset"]
    assert plan_recovery(out).is_empty
    original = V5 / "batchcq" / "store" / "batchconsumequeue" / "BatchCQTopic"
    for queue in sorted((out / "batchconsumequeue" / "BatchCQTopic").iterdir()):
        got, broker = _units(queue), _units(original / queue.name)
        assert got and broker.find(got) % 46 == 0, queue


KEYED_CASES = [(d.name, label) for d in sorted(p for p in MADE.iterdir() if p.is_dir())
               for label, run in json.loads((d / "truth.json").read_text())["engines"].items() if "queryHits" in run]


@pytest.mark.parametrize("name,label", KEYED_CASES, ids=_id)
def test_after_apply_every_key_answers_as_the_broker_did(name, label, tmp_path):
    """A zeroed index file the broker keeps (its endTimestamp, 0, is not after the checkpoint's):
    after recover --apply, each key's index answer is the real engine's queryMessage after its own
    recovery of the same store (made shapes' truth; the engine, loading the applied store, gave
    the same answers and cut nothing: tools/real-broker)."""
    from rmqtool.query.by_key import query_by_key
    hits = json.loads((MADE / name / "truth.json").read_text())["engines"][label]["queryHits"]
    assert any(hits.values())
    out = tmp_path / "out"
    semantics = "5.3" if label.startswith("5.3") else "4.9"
    r = _run("recover", MADE / name / "input" / "store", "--semantics", semantics, "--apply", "--to", out)
    assert r.exit_code == 0, r.output
    for topic_key, expected in hits.items():
        topic, key = topic_key.split("\t")
        found = query_by_key(out, key, topic=topic, index_only=True)
        assert sorted({m.commit_log_offset for m in found.messages}) == expected, topic_key


def test_where_apply_keeps_more_than_5_3_the_plan_says_so(tmp_path):
    """5.3.3's normal recovery dispatches records past the queues' max physic offset, not the
    one at it: with batchconsumequeue/ gone, the batch record at that offset gets no unit
    (the real engine: made shape bcq-all-deleted-normal). The plan's queues are the broker's,
    and a note names the record; recover --apply dispatches from that offset and keeps it."""
    name = "bcq-all-deleted-normal"
    expected = json.loads((MADE / name / "truth.json").read_text())["engines"]["5.3.3"]
    doc = plan_recovery(MADE / name / "input" / "store").to_json()
    assert {k: [v["min_offset"], v["max_offset"]] for k, v in doc["queues"].items()} == expected["queues"]
    reach = max((m for m in load_truth(V5 / "batchcq" / "truth.json")["truth"]["messages"]
                 if m["topic"] == "PlainTopic"), key=lambda m: m["physicalOffset"])  # the plain queue's last record
    at = reach["physicalOffset"] + reach["storeSize"]
    (note,) = doc["notes"]
    assert f"commit log offset {at} " in note and "BatchCQTopic/0" in note
    out = tmp_path / "out"
    assert _run("recover", MADE / name / "input" / "store", "--apply", "--to", out, *_batch_size(name)).exit_code == 0
    kept = simulate(out, Settings()).queues
    assert "BatchCQTopic/0" not in expected["queues"] and kept["BatchCQTopic/0"][1] > kept["BatchCQTopic/0"][0]


def test_a_damaged_last_unit_is_its_message_not_one_more_lost(store_copy):
    """The last unit of a queue of a cleanly closed store names a commit log offset far past
    the end (damage): its message is lost as a unit lost (the start cuts the unit and does
    not dispatch it again), once, with its record; the damaged unit once made a second lost
    message at the damaged offset, unreadable ("log cut"), that the data does not show."""
    store = store_copy(V5 / "v2-and-crc" / "store")
    truth = load_truth(V5 / "v2-and-crc" / "truth.json")["truth"]["consumeQueues"]["PaymentTopic"]["1"]
    queue_offset, commit_log_offset = truth["entries"][-1][:2]
    path = store / "consumequeue" / "PaymentTopic" / "1" / "00000000000000000000"
    with open(path, "r+b") as f:
        f.seek(queue_offset * 20)
        f.write((commit_log_offset + (1 << 40)).to_bytes(8, "big"))
    doc = json.loads(_run("recover", store, "-f", "json").stdout)
    assert [(m["commit_log_offset"], m["queue_offset"], m["reason"]) for m in doc["lost_messages"]] == \
        [(commit_log_offset, queue_offset, "unit lost")]


@pytest.mark.parametrize("base, semantics", [(V4 / "basic", "4.9"), (V5 / "v2-and-crc", "5.3")], ids=_id)
def test_a_damaged_middle_unit_cuts_the_queue_and_loses_the_messages_after_it(store_copy, base, semantics):
    """A unit in the middle of a queue's last file names an offset past the end: the walk of
    ConsumeQueue.recover passes it (it looks written); the queues reach the end (a clean
    store's last message has its unit), so truncateDirtyLogicFiles reads each queue's last
    file and cuts this one at that unit; dispatch
    starts where the queues reached, past the messages the cut units named: each of them is
    lost, as verify counts them. The plan once listed only the one the last unit named, and
    the damaged unit as a message of its own."""
    store = store_copy(base / "store")
    entries = load_truth(base / "truth.json")["truth"]["consumeQueues"]["OrderTopic"]["1"]["entries"]
    directory = store / "consumequeue" / "OrderTopic" / "1"
    last = max(directory.iterdir(), key=lambda p: int(p.name))
    first = int(last.name) // 20  # the queue offset of the last file's first unit
    middle = (first + len(entries)) // 2
    with open(last, "r+b") as f:
        f.seek((middle - first) * 20)
        f.write((1 << 41).to_bytes(8, "big"))
    doc = json.loads(_run("recover", store, "--semantics", semantics, "-f", "json").stdout)
    assert [(m["commit_log_offset"], m["queue_offset"], m["reason"]) for m in doc["lost_messages"]] == \
        [(e[1], e[0], "unit lost") for e in entries[middle:]]
    found = [json.loads(line) for line in _run("verify", store, "-f", "jsonl").stdout.splitlines()]
    assert sum(f["messages"] for f in found if f["finding"] == "messageUnreachable") == len(entries) - middle


def test_a_queue_file_missing_in_the_middle_loses_its_messages(store_copy):
    """A queue's middle file deleted: the load takes the files it finds, the queue keeps its
    range, and the messages the missing units named are served by no unit: each is lost, as
    verify counts them. The plan once found only those its other spans happened to cover."""
    store = store_copy(V4 / "basic" / "store")
    entries = load_truth(V4 / "basic" / "truth.json")["truth"]["consumeQueues"]["AuditLogTopic"]["1"]["entries"]
    directory = store / "consumequeue" / "AuditLogTopic" / "1"
    files = sorted(directory.iterdir(), key=lambda p: int(p.name))
    assert len(files) >= 3
    gone = files[len(files) // 2]
    lo, hi = int(gone.name) // 20, (int(gone.name) + gone.stat().st_size) // 20
    gone.unlink()
    doc = json.loads(_run("recover", store, "-f", "json").stdout)
    assert [(m["commit_log_offset"], m["queue_offset"], m["reason"]) for m in doc["lost_messages"]] == \
        [(e[1], e[0], "unit lost") for e in entries if lo <= e[0] < hi]
    found = [json.loads(line) for line in _run("verify", store, "-f", "jsonl").stdout.splitlines()]
    assert sum(f["messages"] for f in found if f["finding"] == "messageNotInConsumeQueue") == hi - lo


def test_a_first_served_unit_naming_another_message_does_not_bound_the_head(store_copy):
    """crash5/a-as-is (abnormal recovery from the first file): a queue's first file deleted and
    the first unit of its next file garbled so the queue's recovery stops there. Dispatch from
    the first file puts queue offset 0's message at the write position (a cqOffset of 0 is
    not checked), where queue offset 50's unit belongs: the queue's first served unit names
    message 0. The messages of queue offsets 1-50 are served by no unit; the plan took that
    unit's message for the head's end and listed none of them, where verify counts them all."""
    store = store_copy(V5 / "crash5" / "a-as-is" / "input" / "store")
    directory = store / "consumequeue" / "CrashTopic" / "0"
    first, second = sorted(directory.iterdir(), key=lambda p: int(p.name))[:2]
    units = first.stat().st_size // 20
    first.unlink()
    with open(second, "r+b") as f:  # commitLogOffset far past the end, size negative: not written
        f.write((1 << 40).to_bytes(8, "big") + (-1).to_bytes(4, "big", signed=True))
    doc = json.loads(_run("recover", store, "-f", "json").stdout)
    lost = [m for m in doc["lost_messages"] if (m["topic"], m["queue_id"]) == ("CrashTopic", 0)]
    assert [m["queue_offset"] for m in lost] == list(range(1, units + 1))
    found = [json.loads(line) for line in _run("verify", store, "-f", "jsonl").stdout.splitlines()]
    assert sum(f["messages"] for f in found if f.get("consequence") == "unreachable"
               and f["finding"] in ("messageUnreachable", "messageNotInConsumeQueue")) == len(lost)


def test_a_unit_written_after_the_queue_s_end_is_no_lost_message(store_copy):
    """Bytes written into the zeros after a queue's last unit (damage) make a unit there that
    names a commit log offset past the end: the queue's recover stops at the first zero unit
    and never reads it, and the plan zeroes it as trailing garbage. It once also stood in the
    lost messages ("log cut", unreadable), a message the data does not show; verify counts none."""
    store = store_copy(V5 / "v2-and-crc" / "store")
    truth = load_truth(V5 / "v2-and-crc" / "truth.json")["truth"]["consumeQueues"]["PaymentTopic"]["1"]
    end = truth["entries"][-1][0] + 1
    path = store / "consumequeue" / "PaymentTopic" / "1" / "00000000000000000000"
    unit = end + 10
    assert (unit + 1) * 20 <= path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(unit * 20)
        f.write((1 << 62).to_bytes(8, "big") + (100).to_bytes(4, "big"))
    doc = json.loads(_run("recover", store, "-f", "json").stdout)
    assert doc["lost_messages"] == []
    assert [(a["file"], a["start"]) for a in doc["actions"] if a["finding"] == "trailingGarbage"] == [(str(path), unit * 20)]
    verify = [json.loads(line) for line in _run("verify", store, "-f", "jsonl").stdout.splitlines()]
    assert sum(f.get("messages", 0) for f in verify if f["finding"] == "recoveryCutsCommitLog") == 0


def test_a_queue_cut_at_a_damaged_unit_once_the_commit_log_is_cut_loses_as_many_for_verify(store_copy):
    """A damaged unit in a queue's second-last file names an offset past the end; a body CRC
    failure in the commit log's second-last file cuts the log, so truncateDirtyLogicFiles
    deletes the queue's last file and cuts the one before at the damaged unit: the messages
    its later units named are lost (recover: unit lost). verify found the CRC failure only
    while scanning, after it had opened the queues at the written end, and counted 1 of them;
    it now counts what recover lists."""
    store = store_copy(V4 / "basic" / "store")
    truth = load_truth(V4 / "basic" / "truth.json")["truth"]
    files = sorted(int(p.name) for p in (store / "commitlog").iterdir())
    cut = next(m for m in truth["messages"] if m["physicalOffset"] >= files[-2] + 1000)
    path = store / "commitlog" / f"{files[-2]:020d}"
    with open(path, "r+b") as f:
        f.seek(cut["physicalOffset"] - files[-2] + 8)  # BODYCRC
        f.write(((cut["bodyCRC"] ^ 0x5A5A5A5A) & 0xFFFFFFFF).to_bytes(4, "big"))
    entries = truth["consumeQueues"]["OrderTopic"]["2"]["entries"]
    queue_files = sorted((store / "consumequeue" / "OrderTopic" / "2").iterdir(), key=lambda p: int(p.name))
    before_last = queue_files[-2]
    first = int(before_last.name) // 20
    damaged = first + 21
    assert entries[damaged][1] < cut["physicalOffset"] and entries[int(queue_files[-1].name) // 20][1] >= \
        cut["physicalOffset"]
    with open(before_last, "r+b") as f:
        f.seek((damaged - first) * 20)
        f.write((1 << 39).to_bytes(8, "big"))
    doc = json.loads(_run("recover", store, "-f", "json").stdout)
    lost = [m for m in doc["lost_messages"] if (m["topic"], m["queue_id"], m["reason"]) == ("OrderTopic", 2, "unit lost")]
    assert len(lost) > 1 and {m["queue_offset"] for m in lost} == {
        e[0] for e in entries[damaged:] if e[1] < cut["physicalOffset"]}
    found = [json.loads(line) for line in _run("verify", store, "-f", "jsonl").stdout.splitlines()]
    assert sum(f.get("messages", 0) for f in found if f["finding"] in ("messageUnreachable", "messageNotInConsumeQueue")
               and f.get("topic") == "OrderTopic" and f.get("queue_id") == 2
               and f["consequence"] == "unreachable") == len(lost)


def test_the_plan_does_not_say_no_message_is_lost_when_a_queue_already_hides_some(store_copy):
    """Units zeroed in a queue's first file (a hole the start does not touch): the start loses
    nothing, and verify finds the messages the hole hides. The plan's table once said "no
    message is lost that the files show"; it now says what it looked at and sends to verify."""
    store = store_copy(V4 / "basic" / "store")
    entries = load_truth(V4 / "basic" / "truth.json")["truth"]["consumeQueues"]["PaymentTopic"]["0"]["entries"]
    first = store / "consumequeue" / "PaymentTopic" / "0" / f"{0:020d}"
    with open(first, "r+b") as f:
        f.seek(10 * 20)
        f.write(bytes(5 * 20))
    found = [json.loads(line) for line in _run("verify", store, "-f", "jsonl").stdout.splitlines()]
    hidden = sum(f.get("messages", 0) for f in found if f["finding"] == "messageNotInConsumeQueue")
    assert hidden == len(entries[10:15])
    table = " ".join(_run("recover", store).stdout.split())  # the lines as wrapped, joined
    assert "no message is lost" not in table and "messages a damaged queue already hides are verify's" in table
