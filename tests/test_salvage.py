"""rmqtool salvage: every intact message, also those the broker's recovery drops; what is
lost for good; the JSONL that append takes; a fresh store through the engine."""
from __future__ import annotations

import base64
import json
import pathlib

from typer.testing import CliRunner

from conftest import V4, V5, load_truth
from helpers import expand_store
from rmqtool.cli.app import app
from rmqtool.engine.store import Store
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import Message

runner = CliRunner()
E3 = V4 / "crash" / "e3-corrupt-body-in-second-to-last-commitlog-file"


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _messages(store: pathlib.Path) -> list[Message]:
    return [r for r in CommitLog(store / "commitlog").scan(check_crc=True) if isinstance(r, Message)]


def test_salvage_keeps_what_recovery_drops_and_names_what_is_lost(tmp_path):
    truth = load_truth(E3 / "truth.json")
    mutated = truth["mutation"]["messagePhysicalOffset"]
    dropped = truth["diffVsPreCrash"]["lostFromCommitLog"]
    out = tmp_path / "kept.jsonl"
    r = _run("salvage", E3 / "input" / "store", "--out", out, "-f", "json")
    assert r.exit_code == 3
    doc = json.loads(r.stdout)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # every message the broker's recovery drops is kept, but the one whose body was flipped
    assert doc["recovered_end"] == truth["truth"]["commitlog"]["maxPhyOffset"]
    assert doc["kept_past_recovered_end"] == len(dropped) - 1
    kept = {row["commit_log_offset"] for row in rows}
    assert {m["physicalOffset"] for m in dropped} - kept == {mutated}
    assert [r["commit_log_offset"] for r in doc["messages_rejected"]] == [mutated]
    lost = next(m for m in dropped if m["physicalOffset"] == mutated)
    assert doc["missing_queue_offsets"] == {f"{lost['topic']}/{lost['queueId']}": [[lost["queueOffset"]] * 2]}
    assert doc["messages_kept"] == len(rows) == truth["diffVsPreCrash"]["preCrashMessageCount"] - 1


def test_a_clean_store_loses_nothing(tmp_path):
    truth = load_truth(V4 / "basic" / "truth.json")
    r = _run("salvage", V4 / "basic" / "store", "--out", tmp_path / "k.jsonl", "-f", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["messages_kept"] == len(truth["truth"]["messages"]) and not doc["lost_anything"]


def test_garbage_is_a_damaged_region(tmp_path):
    store = V4 / "crash" / "b2-garbage-tail-of-last-message" / "input" / "store"
    r = _run("salvage", store, "--out", tmp_path / "k.jsonl", "-f", "json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 3
    mutation = load_truth(store.parent.parent / "truth.json")["mutation"]
    assert doc["damaged_regions"] or doc["messages_rejected"]
    where = [(d["file"].split("/")[-1], d["file_position"]) for d in doc["damaged_regions"] + doc["messages_rejected"]]
    assert any(name == mutation["file"].split("/")[-1] for name, _pos in where)


def test_the_jsonl_goes_back_in_with_append_and_to_store_gives_the_same(tmp_path):
    out = tmp_path / "kept.jsonl"
    assert _run("salvage", E3 / "input" / "store", "--out", out).exit_code == 3
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    a = _run("append", tmp_path / "via-append", "--create", "--from-jsonl", out, "--keep-store-timestamp",
             "--keep-store-host", "--no-progress")
    assert a.exit_code == 0, a.output
    assert _run("salvage", E3 / "input" / "store", "--to-store", tmp_path / "via-salvage").exit_code == 3
    expected = [(r["topic"], r["queue_id"], r["keys"], base64.b64decode(r["body"]), r["store_timestamp"],
                 r["properties"].get("UNIQ_KEY")) for r in rows]
    for target in ("via-append", "via-salvage"):
        got = [(m.topic, m.queue_id, m.keys, bytes(m.body), m.store_timestamp, m.properties.get("UNIQ_KEY"))
               for m in _messages(tmp_path / target)]
        assert got == expected, target
    with Store.open(tmp_path / "via-salvage") as s:  # queues renumbered without the lost one
        per_queue = {}
        for r in rows:
            per_queue[(r["topic"], r["queue_id"])] = per_queue.get((r["topic"], r["queue_id"]), 0) + 1
        assert s.queue_offsets() == per_queue


def test_a_5x_store_with_crc_properties_salvages_whole(tmp_path):
    truth = load_truth(V5 / "v2-and-crc" / "truth.json")
    r = _run("salvage", V5 / "v2-and-crc" / "store", "--to-store", tmp_path / "n", "-f", "json")
    assert r.exit_code == 0, r.output
    got = _messages(tmp_path / "n")
    assert len(got) == len(truth["truth"]["messages"])
    assert all(m.body_crc_ok is not False and m.property_crc_ok is not False for m in got)


def test_to_store_rejects_a_message_whose_damaged_topic_names_no_directory_and_keeps_the_rest(tmp_path):
    """The body CRC does not cover the topic: a flipped byte can make it "a/b", which names no
    queue directory. --to-store leaves that message out and says so (it stopped whole); --out
    keeps it, bytes as they are."""
    truth = load_truth(V4 / "basic" / "truth.json")["truth"]["messages"]
    store = expand_store(V4 / "basic" / "store", tmp_path / "store")
    first = _messages(store)[0]
    topic_at = first.position + first.store_size - len(first.properties_raw) - 2 - len(first.topic.encode())
    # topic length byte, then the topic, then the properties' length and bytes: put a "/" in its middle
    segment = pathlib.Path(first.path)
    data = bytearray(segment.read_bytes())
    assert data[topic_at - 1] == len(first.topic.encode())
    data[topic_at + 1] = ord("/")
    segment.write_bytes(bytes(data))
    damaged = _messages(store)[0].topic
    assert "/" in damaged
    r = _run("salvage", store, "--to-store", tmp_path / "new", "-f", "json")
    assert r.exit_code == 3, r.output
    doc = json.loads(r.stdout)
    assert [(x["commit_log_offset"], x["topic"]) for x in doc["messages_rejected"]] == [(first.commit_log_offset,
                                                                                         damaged)]
    assert doc["messages_kept"] == len(truth) - 1 == len(_messages(tmp_path / "new"))
    assert damaged not in doc["queue_offsets_kept"]
    kept = _run("salvage", store, "--out", tmp_path / "k.jsonl", "-f", "json")
    assert json.loads(kept.stdout)["messages_kept"] == len(truth)


def test_usage(tmp_path):
    existing = tmp_path / "x.jsonl"
    existing.write_text("")
    assert _run("salvage", V4 / "basic" / "store").exit_code == 2
    r = _run("salvage", V4 / "basic" / "store", "--out", existing)
    assert r.exit_code == 2 and existing.read_text() == ""


def test_to_store_asks_for_the_sizes_its_source_does_not_show(tmp_path):
    """A source without index/ (or whose index files have no entry left) or without
    consumequeue/: the new store's sizes there can only be guessed, and a broker configured
    otherwise reads files of the guessed size at the wrong places. --to-store is refused (exit
    2, naming the options, nothing made) until they are given, by option or --broker-config;
    then the new store's files are of those sizes (the source's own, read before the damage)."""
    import shutil
    source = expand_store(V4 / "basic" / "store", tmp_path / "basic")
    info = json.loads(_run("info", source, "-f", "json").stdout)
    slots, entries = info["index_files"][0]["max_hash_slot_num"], info["index_files"][0]["max_index_num"]
    cq = load_truth(V4 / "basic" / "truth.json")["messageStoreConfig"]["effectiveGetterValues"][
        "mappedFileSizeConsumeQueue"]
    shutil.rmtree(source / "index")
    shutil.rmtree(source / "consumequeue")
    r = _run("salvage", source, "--to-store", tmp_path / "new")
    assert r.exit_code == 2 and "--cq-size and --index-slots and --index-entries" in r.stderr, r.output
    ignored = _run("salvage", source, "--to-store", tmp_path / "new", "--batch-cq-size", 460, "--assume-defaults")
    assert ignored.exit_code == 2 and "--batch-cq-size" in ignored.stderr, ignored.output  # never taken silently
    assert not (tmp_path / "new").exists()
    conf = tmp_path / "broker.conf"
    conf.write_text(f"mappedFileSizeConsumeQueue={cq}\nmaxHashSlotNum={slots}\nmaxIndexNum={entries}\n")
    r = _run("salvage", source, "--to-store", tmp_path / "new", "--broker-config", conf)
    assert r.exit_code == 0, r.output
    made = json.loads(_run("info", tmp_path / "new", "-f", "json").stdout)
    assert {(f["max_hash_slot_num"], f["max_index_num"]) for f in made["index_files"]} == {(slots, entries)}
    assert {p.stat().st_size for p in (tmp_path / "new" / "consumequeue").rglob("0*") if p.is_file()} == {cq}, \
        [(p, p.stat().st_size) for p in (tmp_path / "new" / "consumequeue").rglob("0*")][:5]
