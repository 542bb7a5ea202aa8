"""rmqtool redispatch: consume queues and index files rebuilt from the commit log equal the
broker's own, byte for byte; plan, apply with backup, undo."""
from __future__ import annotations

import hashlib
import json
import pathlib
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import V4, V5, load_truth
from helpers import copy_tree
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode
from rmqtool.engine.redispatch import Selection, build, compare

CLEAN = [V4 / "basic" / "store", V4 / "batch" / "store", V4 / "txdelay" / "store", V4 / "timekey" / "store",
         V5 / "v2-and-crc" / "store"]
runner = CliRunner()


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _copy(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    copy_tree(src, dst, symlinks=False)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    (dst / "lock").unlink(missing_ok=True)
    return dst


def _state(root: pathlib.Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != "lock"}


@pytest.mark.parametrize("store", CLEAN, ids=lambda p: p.parent.name)
def test_rebuilt_files_are_the_brokers_byte_for_byte(store, tmp_path):
    built = build(store, tmp_path / "staging")
    changes = compare(store, built, cq=True, index=True, selection=Selection())
    assert changes and all(c.kind == "same" for c in changes), [c for c in changes if c.kind != "same"]
    assert sum(1 for c in changes if "/index/" in c.path) == len(list((store / "index").iterdir()))


def test_queues_the_broker_rebuilt_after_a_crash_are_rebuilt_the_same(tmp_path):
    """crash-fast/c1: the broker's abnormal recovery rebuilt a deleted queue from file 0."""
    store = V4 / "crash-fast" / "c1-delete-cq-queue-dir" / "expected" / "store"
    built = build(store, tmp_path / "staging", index=False)
    changes = compare(store, built, cq=True, index=False, selection=Selection())
    assert changes and all(c.kind == "same" for c in changes)


def test_a_deleted_queue_comes_back_as_it_was_and_undo_removes_it_again(tmp_path):
    src = V4 / "basic" / "store"
    root = _copy(src, tmp_path / "s")
    shutil.rmtree(root / "consumequeue" / "OrderTopic" / "2")
    deleted = _state(root)
    r = _run("redispatch", root, "-f", "json")
    assert r.exit_code == 3
    doc = json.loads(r.stdout)
    created = [c for c in doc["changes"] if c["kind"] == "create"]
    assert created and all("OrderTopic/2/" in c["file"] for c in created)
    r = _run("redispatch", root, "--cq", "-t", "OrderTopic", "-q", "2", "--apply", "--backup-dir", tmp_path / "b")
    assert r.exit_code == 0, r.output
    assert _state(root) == {k: v for k, v in _state(src).items()}
    assert _run("redispatch", root).exit_code == 0  # nothing differs now
    u = _run("undo", tmp_path / "b")
    assert u.exit_code == 0, u.output
    assert _state(root) == deleted
    assert not (root / "consumequeue" / "OrderTopic" / "2").exists()


@pytest.mark.parametrize("chosen", [["-t", "OrderTopic"], ["-q", "1"], ["-t", "NoSuchTopic"]])
def test_a_selection_rebuilds_queues_only_and_never_an_index_of_it(chosen, tmp_path):
    """-t/-q choose queues. By default (queues and index) the index was rebuilt from the chosen
    records alone, the other index files deleted: every other topic's keys gone from the one
    index the broker keeps for the store (a topic that is not there: the whole index). Now a
    selection rebuilds the queues only, and --index with one is refused (exit 2)."""
    src = V4 / "basic" / "store"
    root = _copy(src, tmp_path / "s")
    r = _run("redispatch", root, *chosen, "-f", "json")
    assert r.exit_code == 0, r.output
    assert not [c for c in json.loads(r.stdout)["changes"] if "/index/" in c["file"]]
    assert _run("redispatch", root, *chosen, "--apply", "--backup-dir", tmp_path / "b").exit_code == 0
    assert _state(root) == _state(src)
    refused = _run("redispatch", root, *chosen, "--index", "--apply", "--backup-dir", tmp_path / "b2")
    assert refused.exit_code == ExitCode.USAGE and "the index holds every topic's keys" in refused.stderr
    assert _state(root) == _state(src) and not (tmp_path / "b2").exists()


def test_a_batch_topic_nothing_names_is_rebuilt_as_the_batch_queue_its_records_say(tmp_path):
    """A 5.x store with no topics.json and no batchconsumequeue/ left: redispatch built plain
    queues for the BatchCQ topic (its records carry INNER_BASE), which recover then called a
    store the 5.3.3 broker does not load, advising redispatch: a loop. Its records say it is a
    batch topic, as recover takes them: the batch queues are the broker's, byte for byte."""
    from helpers import expand_store
    src = expand_store(V5 / "batchcq" / "store", tmp_path / "src")
    root = expand_store(V5 / "batchcq" / "store", tmp_path / "s")
    assert not (root / "config" / "topics.json").exists()
    for name in ("batchconsumequeue", "consumequeue", "index"):
        shutil.rmtree(root / name)
    config = load_truth(V5 / "batchcq" / "truth.json")["messageStoreConfig"]["effectiveGetterValues"]
    r = _run("redispatch", root, "--cq", "--cq-size", config["mappedFileSizeConsumeQueue"], "--batch-cq-size",
             config["mapperFileSizeBatchConsumeQueue"], "--apply", "--backup-dir", tmp_path / "b")
    assert r.exit_code == 0, r.output
    queues = {n: h for n, h in _state(src).items() if n.startswith(("consumequeue/", "batchconsumequeue/"))}
    assert queues and {n: h for n, h in _state(root).items() if n.startswith(("consumequeue/", "batchconsumequeue/"))} \
        == queues
    assert json.loads(_run("recover", root, "--from-checkpoint", "-f", "json").stdout)["loadable"] is True


def test_from_offset_keeps_what_lies_before_and_rebuilds_the_rest(tmp_path):
    src = V4 / "basic" / "store"
    root = _copy(src, tmp_path / "s")
    cq = root / "consumequeue" / "PaymentTopic" / "1"
    last = sorted(cq.iterdir())[-1]
    data = bytearray(last.read_bytes())
    data[200:] = bytes(len(data) - 200)  # units lost from the queue's tail
    last.write_bytes(bytes(data))
    first_lost = int.from_bytes(last.read_bytes()[180:188], "big") + 1
    r = _run("redispatch", root, "--cq", "--from-offset", first_lost, "--apply", "--backup-dir", tmp_path / "b",
             "-f", "json")
    assert r.exit_code == 0, r.output
    assert _state(root) == _state(src)


def test_index_rebuilt_from_scratch_holds_the_same_entries(tmp_path):
    root = _copy(V4 / "timekey" / "store", tmp_path / "s")
    original = [p.read_bytes() for p in sorted((root / "index").iterdir())]
    shutil.rmtree(root / "index")
    config = load_truth(V4 / "timekey" / "truth.json")["messageStoreConfig"]["effectiveGetterValues"]
    r = _run("redispatch", root, "--index", "--apply", "--backup-dir", tmp_path / "b",
             "--index-slots", config["maxHashSlotNum"], "--index-entries", config["maxIndexNum"])
    assert r.exit_code == 0, r.output
    assert [p.read_bytes() for p in sorted((root / "index").iterdir())] == original


def test_skip_unknown_topics_leaves_out_what_topics_json_lacks(tmp_path):
    root = _copy(V4 / "crash" / "c4-delete-first-cq-file" / "expected" / "store", tmp_path / "s")
    (root / "config").mkdir()
    (root / "config" / "topics.json").write_text(json.dumps({"topicConfigTable": {"CrashTopic": {}}}))
    shutil.rmtree(root / "consumequeue")
    config = load_truth(V4 / "crash" / "c4-delete-first-cq-file" / "truth.json")["messageStoreConfig"]
    r = _run("redispatch", root, "--cq", "--skip-unknown-topics", "--apply", "--backup-dir", tmp_path / "b",
             "--cq-size", config["effectiveGetterValues"]["mappedFileSizeConsumeQueue"])
    assert r.exit_code == 0, r.output
    assert (root / "consumequeue" / "CrashTopic").is_dir()
    assert not (root / "consumequeue" / "OtherTopic").exists()


def test_a_store_that_needs_recovery_is_sent_to_recover_first():
    r = _run("redispatch", V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file" / "input" / "store")
    assert r.exit_code == 3 and "rmqtool recover" in r.stderr  # as append refuses it (issue 20): not a usage error


def test_a_locked_store_is_refused(tmp_path):
    root = _copy(V4 / "basic" / "store", tmp_path / "s")
    shutil.rmtree(root / "consumequeue" / "OrderTopic" / "0")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from rmqtool.recovery.store_lock import StoreLock; l = StoreLock(sys.argv[1]); l.acquire(); "
        "print('held', flush=True); time.sleep(60)"), str(root / "lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = _state(root)
        r = _run("redispatch", root, "--apply")
        assert r.exit_code == 5, r.output
        assert _state(root) == before
    finally:
        holder.kill()
        holder.wait()


def test_batch_consume_queues_are_built_as_the_broker_built_them(store_copy):
    """A 5.x store's batch topics: their units go to batchconsumequeue/ (one 46-byte unit a
    stored batch), byte for byte as the 5.3.3 broker wrote them, and no plain consume queue."""
    from rmqtool.store.config import batch_topics
    store = store_copy(V5 / "batchcq" / "store")
    batch = batch_topics(store)
    assert batch and all((store / "batchconsumequeue" / t).is_dir() for t in batch)
    r = _run("redispatch", store, "-f", "json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 0
    built = [c for c in doc["changes"] if "/batchconsumequeue/" in c["file"]]
    on_disk = [p for p in (store / "batchconsumequeue").rglob("*") if p.is_file()]
    assert len(built) == len(on_disk) and all(c["kind"] == "same" for c in built)
    assert not any((store / "consumequeue" / t).exists() for t in batch)


@pytest.mark.parametrize("cut", ["zeroed", "deleted"])
def test_batch_consume_queues_are_built_again_from_an_offset(store_copy, tmp_path, cut):
    """--from-offset keeps each batch queue's units before the offset and builds the rest again:
    units zeroed or a file deleted past it come back byte for byte as the 5.3.3 broker wrote them."""
    src = V5 / "batchcq" / "store"
    store = store_copy(src)
    bcq = store / "batchconsumequeue" / "BatchCQTopic" / "0"
    second = bcq / f"{736:020d}"
    first_offset = int.from_bytes(second.read_bytes()[:8], "big")  # the second file's first record
    if cut == "zeroed":
        second.write_bytes(bytes(second.stat().st_size))
    else:
        second.unlink()
    damaged = _state(store)
    r = _run("redispatch", store, "--cq", "-f", "json", "--from-offset", first_offset)
    doc = json.loads(r.stdout)
    assert r.exit_code == 3
    changed = {c["file"] for c in doc["changes"] if c["kind"] != "same"}
    assert changed == {str(second)}
    r = _run("redispatch", store, "--cq", "--from-offset", first_offset, "--apply", "--backup-dir", tmp_path / "b")
    assert r.exit_code == 0, r.output
    assert second.read_bytes() == (src / second.relative_to(store)).read_bytes()
    assert _run("undo", tmp_path / "b").exit_code == 0
    assert _state(store) == damaged


def test_a_deleted_batch_queue_comes_back_as_it_was_and_undo_removes_it_again(tmp_path):
    src = V5 / "batchcq" / "store"
    root = _copy(src, tmp_path / "s")
    shutil.rmtree(root / "batchconsumequeue" / "BatchCQTopic" / "1")
    deleted = _state(root)
    r = _run("redispatch", root, "-f", "json")
    assert r.exit_code == 3
    created = [c for c in json.loads(r.stdout)["changes"] if c["kind"] == "create"]
    assert created and all("batchconsumequeue/BatchCQTopic/1/" in c["file"] for c in created)
    r = _run("redispatch", root, "--cq", "--apply", "--backup-dir", tmp_path / "b")
    assert r.exit_code == 0, r.output
    assert _state(root) == _state(src)
    assert _run("redispatch", root).exit_code == 0  # nothing differs now
    assert _run("undo", tmp_path / "b").exit_code == 0
    assert _state(root) == deleted


@pytest.mark.parametrize("name", ["../Escaped", "Order\0opic"])
def test_a_damaged_topic_never_names_a_directory_outside_the_store(store_copy, name):
    """A record's topic is not covered by its CRC: damage can make it '../x' or put a NUL in it.
    Dispatching it would write a queue outside consumequeue/ (or fail inside the OS call): the
    writers refuse with a clean error naming the store, and nothing is written anywhere."""
    store = store_copy(V4 / "basic" / "store")
    first = load_truth(V4 / "basic" / "truth.json")["truth"]["messages"][0]
    topic = first["topic"].encode()
    assert len(name) == len(topic)
    seg = store / "commitlog" / f"{0:020d}"
    data = bytearray(seg.read_bytes())
    at = data.index(topic, first["physicalOffset"], first["physicalOffset"] + first["storeSize"])
    data[at:at + len(topic)] = name.encode()
    seg.write_bytes(bytes(data))
    outside = sorted(store.parent.iterdir())
    before = _state(store)
    shutil.rmtree(store / "consumequeue")  # the queues are rebuilt from the commit log, the bad topic among them
    r = _run("redispatch", store, "--cq", "--apply", "--backup-dir", store.parent / "backup", "--cq-size",
             load_truth(V4 / "basic" / "truth.json")["messageStoreConfig"]["effectiveGetterValues"]
             ["mappedFileSizeConsumeQueue"])
    assert r.exit_code == int(ExitCode.CORRUPT), r.output
    assert "cannot name a queue directory" in r.stderr and "Traceback" not in r.stderr
    assert sorted(p for p in store.parent.iterdir() if p.name != "backup") == outside
    assert not (store / "consumequeue").exists() and _state(store) == {k: v for k, v in before.items()
                                                                        if not k.startswith("consumequeue")}


def test_a_queue_file_the_load_refuses_is_one_cq_rebuilds(tmp_path):
    """A queue file of another size (bytes appended) and a stray file in a queue directory
    make the broker's load fail. redispatch refused the store ("needs recovery first; run
    rmqtool recover", and recover refuses such a store): --cq rebuilds the queue instead,
    both files go into the backup, and the store is the broker's again. A selection without
    that queue still refuses, saying what helps."""
    original = _copy(V4 / "basic" / "store", tmp_path / "original")
    root = _copy(V4 / "basic" / "store", tmp_path / "s")
    queue = root / "consumequeue" / "OrderTopic" / "1"
    first = sorted(queue.iterdir())[0]
    first.write_bytes(first.read_bytes() + b"garbage")
    (queue / "README").write_text("not the broker's")
    before = _state(root)
    other = _run("redispatch", root, "--cq", "--topic", "PaymentTopic", "--apply", "--backup-dir", tmp_path / "b0")
    assert other.exit_code == ExitCode.CORRUPT and "the broker would not load this store" in other.stderr
    assert _state(root) == before
    r = _run("redispatch", root, "--cq", "--apply", "--backup-dir", tmp_path / "b")
    assert r.exit_code == 0, r.output
    assert _state(root) == _state(original)  # the rebuilt queue is the broker's, byte for byte
    assert json.loads(_run("recover", root, "-f", "json").stdout)["loadable"] is True
    assert _run("undo", tmp_path / "b").exit_code == 0 and _state(root) == before


@pytest.mark.parametrize("scenario", ["batchcq", "cqext"])
def test_a_store_whose_only_commit_log_file_is_empty_is_planned_without_a_traceback(tmp_path, scenario):
    """No file shows the mapped file size (the only one is empty): the dispatch reads each
    file by its own name and size (a TypeError went out of the parallel reput and segment_of)."""
    from helpers import expand_store
    store = expand_store(V5 / scenario / "store", tmp_path / "store")
    segments = sorted((store / "commitlog").iterdir())
    assert len(segments) == 1
    segments[0].write_bytes(b"")
    r = _run("redispatch", store, "-f", "json")
    assert r.exit_code in (0, 3) and r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert json.loads(r.stdout)["records_dispatched"] == 0
