"""Issue 20 item 17, salvage: records moved by --to-store get a __CRC32# of their new place
(none when they had none); a 5.x inner batch counts INNER_NUM queue offsets; --to-store
works when the source's index files have two geometries."""
from __future__ import annotations

import base64
import json
import pathlib

from typer.testing import CliRunner

from conftest import FIXTURES, V4, V5, load_truth
from rmqtool.cli.app import app
from rmqtool.formats.crc import stored_record_crc
from rmqtool.formats.properties import PROPERTY_CRC32
from rmqtool.query.by_key import query_by_key
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import Message

runner = CliRunner()
V2_AND_CRC = V5 / "v2-and-crc"
BATCHCQ = V5 / "batchcq"


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _messages(store: pathlib.Path) -> list[Message]:
    return [r for r in CommitLog(store / "commitlog").scan(check_crc=True) if isinstance(r, Message)]


def _flip_body_byte(store: pathlib.Path, m: dict, segment_size: int) -> None:
    """Flip the last body byte of a truth message (the body ends where topic and properties
    begin: storeSize less the topic length field, the topic, propertiesLength and properties)."""
    body_end = (m["storeSize"] - m["topicLengthFieldSize"] - len(m["topic"].encode()) - 2 - m["propertiesLength"])
    offset = m["physicalOffset"] + body_end - 1
    path = store / "commitlog" / f"{offset // segment_size * segment_size:020d}"
    raw = bytearray(path.read_bytes())
    raw[offset % segment_size] ^= 0x10
    path.write_bytes(bytes(raw))


def _verify_findings(store: pathlib.Path) -> list[dict]:
    r = _run("verify", store, "-f", "jsonl")
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def test_moved_records_get_a_crc32_of_their_new_place(store_copy, tmp_path):
    truth = load_truth(V2_AND_CRC / "truth.json")
    messages = truth["truth"]["messages"]
    size = truth["messageStoreConfig"]["effectiveGetterValues"]["mappedFileSizeCommitLog"]
    src = store_copy(V2_AND_CRC / "store")
    damaged = messages[1]  # in file 0: every record after it moves up in the new store
    assert damaged["bodyLength"] > 0
    _flip_body_byte(src, damaged, size)
    new = tmp_path / "new"
    r = _run("salvage", src, "--to-store", new, "-f", "json")
    assert r.exit_code == 3, r.output  # the flipped message is lost
    assert [x["commit_log_offset"] for x in json.loads(r.stdout)["messages_rejected"]] == [damaged["physicalOffset"]]
    findings = _verify_findings(new)
    assert not [f for f in findings if f["finding"] == "propertyCrcMismatch"]
    assert not [f for f in findings if f["severity"] == "error"], findings
    got = _messages(new)
    expected = [m for m in messages if m["physicalOffset"] != damaged["physicalOffset"]]
    assert len(got) == len(expected)
    assert sum(g.commit_log_offset != e["physicalOffset"] for g, e in zip(got, expected)) > 100  # they did move
    for g, e in zip(got, expected):
        assert (g.topic, g.queue_id, bytes(g.body), g.keys, g.store_timestamp) == (
            e["topic"], e["queueId"], base64.b64decode(e["body"]), (e["keys"] or "").split(), e["storeTimestamp"])
        assert g.property_crc_ok is True and stored_record_crc(bytes(g.properties_raw)) is not None
        # the properties are the stored ones, the __CRC32# entry aside (never a second one)
        assert {k: v for k, v in g.properties.items() if k != PROPERTY_CRC32} == {
            k: v for k, v in e["properties"].items() if k != PROPERTY_CRC32}
        assert bytes(g.properties_raw)[:-20] == e["propertiesString"].encode()[:-20]


def test_an_intact_5x_store_comes_out_byte_for_byte(tmp_path):
    # nothing moves: the engine's __CRC32# entries are 5.3.3's own (empty properties and an
    # incoming __CRC32# among them, see the fixture README)
    new = tmp_path / "new"
    assert _run("salvage", V2_AND_CRC / "store", "--to-store", new).exit_code == 0
    for seg in sorted((V2_AND_CRC / "store" / "commitlog").iterdir()):
        assert (new / "commitlog" / seg.name).read_bytes() == seg.read_bytes(), seg.name


def test_records_without_crc32_keep_none(tmp_path):
    store = V4 / "crash" / "e3-corrupt-body-in-second-to-last-commitlog-file" / "input" / "store"
    new = tmp_path / "new"
    assert _run("salvage", store, "--to-store", new).exit_code == 3
    got = _messages(new)
    assert got and not any(b"__CRC32#" in bytes(m.properties_raw) for m in got)
    assert all(m.property_crc_ok is None for m in got)


def test_inner_batches_count_every_queue_offset(tmp_path):
    truth = load_truth(BATCHCQ / "truth.json")
    r = _run("salvage", BATCHCQ / "store", "--out", tmp_path / "k.jsonl", "-f", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["missing_queue_offsets"] == {} and not doc["lost_anything"]
    assert doc["messages_kept"] == len(truth["truth"]["messages"])
    assert doc["queue_offsets_kept"] == {f"{topic}/{q}": v["messageTotalInQueue"]
                                         for topic, qs in truth["truth"]["consumeQueues"].items()
                                         for q, v in qs.items()}


def test_a_lost_inner_batch_is_all_its_queue_offsets(store_copy, tmp_path):
    truth = load_truth(BATCHCQ / "truth.json")
    size = truth["messageStoreConfig"]["effectiveGetterValues"]["mappedFileSizeCommitLog"]
    src = store_copy(BATCHCQ / "store")
    lost = next(m for m in truth["truth"]["messages"] if m["dispatchBatchSize"] > 5 and m["queueOffset"] > 0)
    _flip_body_byte(src, lost, size)
    r = _run("salvage", src, "--out", tmp_path / "k.jsonl", "-f", "json")
    assert r.exit_code == 3
    first = lost["dispatchMsgBaseOffset"]
    assert json.loads(r.stdout)["missing_queue_offsets"] == {
        f"{lost['topic']}/{lost['queueId']}": [[first, first + lost["dispatchBatchSize"] - 1]]}


def _jsonl(path: pathlib.Path, rows) -> pathlib.Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_to_store_from_index_files_of_two_geometries(tmp_path):
    """A broker whose maxHashSlotNum / maxIndexNum changed: older index files in the old
    geometry, newer ones in the new one (made here with the engine)."""
    rows = [{"topic": "T", "queue_id": i % 2, "body": base64.b64encode(b"body-%d" % i).decode(), "keys": f"k-{i}"}
            for i in range(60)]
    src = tmp_path / "src"
    first = _run("append", src, "--create", "--from-jsonl", _jsonl(tmp_path / "a.jsonl", rows[:30]),
                 "--index-slots", 8, "--index-entries", 16, "--commitlog-size", 4096, "--no-progress")
    assert first.exit_code == 0, first.output
    (src / "index").rename(tmp_path / "old-index")
    second = _run("append", src, "--from-jsonl", _jsonl(tmp_path / "b.jsonl", rows[30:]),
                  "--index-slots", 16, "--index-entries", 40, "--no-progress")
    assert second.exit_code == 0, second.output
    for f in (tmp_path / "old-index").iterdir():
        f.rename(src / "index" / f.name)
    assert len({f.stat().st_size for f in (src / "index").iterdir()}) == 2
    out = tmp_path / "k.jsonl"
    assert _run("salvage", src, "--out", out).exit_code == 0
    new = tmp_path / "new"
    r = _run("salvage", src, "--to-store", new)
    assert r.exit_code == 0, r.output
    got = _messages(new)
    assert [(m.keys, bytes(m.body)) for m in got] == [([r["keys"]], base64.b64decode(r["body"])) for r in rows]
    assert len(out.read_text().splitlines()) == len(rows)
    for row in rows:  # every message found from the new store's index alone
        found = query_by_key(new, row["keys"], topic="T", index_only=True).messages
        assert [bytes(m.body) for m in found] == [base64.b64decode(row["body"])], row["keys"]


def test_out_dash_streams_the_messages_to_stdout_and_the_report_to_stderr(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # never a file named "-"
    store = V4 / "crash" / "e3-corrupt-body-in-second-to-last-commitlog-file" / "input" / "store"
    r = _run("salvage", store, "--out", "-", "-f", "json")
    assert r.exit_code == 3
    doc = json.loads(r.stderr)
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(rows) == doc["messages_kept"] > 0 and all(row["record"] == "message" for row in rows)
    assert not (tmp_path / "-").exists()


def test_to_store_refuses_inner_batches_it_would_misnumber(tmp_path):
    new = tmp_path / "new"
    r = _run("salvage", BATCHCQ / "store", "--to-store", new)
    assert r.exit_code == 2 and "--out" in r.stderr
    assert not new.exists()


def test_a_missing_commit_log_file_is_named(tmp_path):
    variant = FIXTURES / "crash-made" / "missing-middle-no-queues"
    base = FIXTURES / load_truth(variant / "truth.json")["base"] / "commitlog"
    store = variant / "input" / "store"
    gone = sorted({p.name for p in base.iterdir()} - {p.name for p in (store / "commitlog").iterdir()})
    r = _run("salvage", store, "--out", tmp_path / "k.jsonl", "-f", "json")
    assert r.exit_code == 3
    gaps = [d for d in json.loads(r.stdout)["damaged_regions"] if d["finding"] == "segmentGap"]
    assert gone and [(pathlib.Path(d["file"]).name, d["bytes"]) for d in gaps] == [
        (gone[0], sum((base / name).stat().st_size for name in gone))]


def test_a_damaged_batch_unit_claims_no_missing_messages(store_copy, tmp_path):
    truth = load_truth(BATCHCQ / "truth.json")
    src = store_copy(BATCHCQ / "store")
    topic, queue = "BatchCQTopic", "0"
    last_file = sorted((src / "batchconsumequeue" / topic / queue).iterdir())[-1]
    unit = truth["truth"]["consumeQueues"][topic][queue]["unitSize"]
    raw = bytearray(last_file.read_bytes())
    last = max(i for i in range(0, len(raw), unit) if any(raw[i:i + unit]))
    raw[last + 28 + 3] ^= 1  # msgBaseOffset (after commitLogOffset, size, tagsCode, storeTimestamp)
    last_file.write_bytes(bytes(raw))
    r = _run("salvage", src, "--out", tmp_path / "k.jsonl", "-f", "json")
    assert r.exit_code == 0, r.stdout
    assert json.loads(r.stdout)["missing_queue_offsets"] == {}


def test_an_inner_batch_whose_inner_base_does_not_parse_still_counts_its_messages(tmp_path):
    variant = FIXTURES / "crash-made" / "inner-base-not-a-number"
    truth = load_truth(BATCHCQ / "truth.json")
    assert load_truth(variant / "truth.json")["base"] == "rocketmq-5.3.3/batchcq/store"
    r = _run("salvage", variant / "input" / "store", "--out", tmp_path / "k.jsonl", "-f", "json")
    assert r.exit_code == 0, r.stdout  # the broker cuts the log at it; salvage keeps its messages
    doc = json.loads(r.stdout)
    assert doc["missing_queue_offsets"] == {} and doc["kept_past_recovered_end"] > 0
    assert doc["queue_offsets_kept"] == {f"{topic}/{q}": v["messageTotalInQueue"]
                                         for topic, qs in truth["truth"]["consumeQueues"].items()
                                         for q, v in qs.items()}


def test_to_store_takes_the_index_geometry_when_the_index_files_cannot_tell(tmp_path):
    rows = [{"topic": "T", "body": base64.b64encode(b"b%d" % i).decode(), "keys": f"k-{i}"} for i in range(20)]
    src = tmp_path / "src"
    made = _run("append", src, "--create", "--from-jsonl", _jsonl(tmp_path / "a.jsonl", rows),
                "--index-slots", 16, "--index-entries", 40, "--no-progress")
    assert made.exit_code == 0, made.output
    for f in (src / "index").iterdir():  # no entries left to tell the geometry (not the default 1:4)
        f.write_bytes(bytes(f.stat().st_size))
    new = tmp_path / "new"
    refused = _run("salvage", src, "--to-store", new)
    assert refused.exit_code == 2 and "give both" in refused.stderr and not new.exists()
    r = _run("salvage", src, "--to-store", new, "--index-slots", 16, "--index-entries", 40)
    assert r.exit_code == 0, r.output
    for row in rows:
        found = query_by_key(new, row["keys"], topic="T", index_only=True).messages
        assert [bytes(m.body) for m in found] == [base64.b64decode(row["body"])]
    assert _run("salvage", src, "--out", tmp_path / "k.jsonl", "--index-slots", 16).exit_code == 2


def test_append_from_a_5x_dump_writes_crc32_entries_that_hold(tmp_path):
    # the same rows path: new store times make every copied __CRC32# wrong
    rows = tmp_path / "rows.jsonl"
    dumped = _run("dump", "commitlog", V2_AND_CRC / "store", "-f", "jsonl", "--body", "base64")
    assert dumped.exit_code == 0
    rows.write_text(dumped.stdout)
    new = tmp_path / "new"
    assert _run("append", new, "--create", "--from-jsonl", rows, "--no-progress", "--semantics", "5.3").exit_code == 0
    got = _messages(new)
    assert len(got) == len(load_truth(V2_AND_CRC / "truth.json")["truth"]["messages"])
    assert all(m.property_crc_ok is True for m in got)
    assert not [f for f in _verify_findings(new) if f["finding"] == "propertyCrcMismatch"]


def test_a_stray_file_far_past_the_end_is_no_missing_range(store_copy, tmp_path):
    src = store_copy(V4 / "basic" / "store")
    segments = sorted((src / "commitlog").iterdir())
    size = segments[-1].stat().st_size
    stray = src / "commitlog" / f"{int(segments[-1].name) + 1000 * size:020d}"
    stray.write_bytes(b"garbage" + bytes(size - 7))
    r = _run("salvage", src, "--out", tmp_path / "k.jsonl", "-f", "json")
    doc = json.loads(r.stdout)
    assert not [d for d in doc["damaged_regions"] if d["finding"] == "segmentGap"]
    assert [pathlib.Path(d["file"]).name for d in doc["damaged_regions"]] == [stray.name]
    assert doc["messages_kept"] == len(load_truth(V4 / "basic" / "truth.json")["truth"]["messages"])
