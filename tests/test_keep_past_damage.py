"""recover --keep-past-damage: a damaged record where the broker's recovery cuts the log is
replaced in place by a record of its size that the walk accepts, so every later message keeps
its commit log offset, queue offset and msgId. Checked against the fixtures' truth: a clean
4.9.8 store with one body byte flipped where normal recovery reads it (every put's offset,
queue offset and msgId in its truth.json), and the crash-made store whose truth says what
4.9.8 drops and 5.3.3 keeps."""
from __future__ import annotations

import json
import pathlib
import random
import shutil

import pytest

from conftest import FIXTURES, V4, load_truth
from helpers import cli_runner, tree_fingerprint, writable_copy
from rmqtool.cli.app import app
from rmqtool.findings import RECORD_QUARANTINED
from rmqtool.recovery.quarantine import QUARANTINE_PROPERTY

BASIC = V4 / "basic"
TORN = FIXTURES / "crash-made" / "torn-middle-normal"
BCQ_TORN = FIXTURES / "crash-made" / "bcq-torn-middle-abnormal"
PROP_CRC = FIXTURES / "crash-made" / "prop-crc-digits"
BODY_AT_V4 = 88  # a record's body with IPv4 hosts (fixtures/rocketmq-4.9.8/README.md's layout)
TOTAL_SIZE_AT = 0


def _run(*args) -> tuple[int, str]:
    r = cli_runner().invoke(app, [str(a) for a in args])
    return r.exit_code, r.stdout


def _json(*args) -> tuple[int, dict]:
    code, out = _run(*args, "-f", "json")
    return code, json.loads(out)


def _flip(path: pathlib.Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)[0]
        f.seek(position)
        f.write(bytes([b ^ 0xFF]))


@pytest.fixture(scope="module")
def basic(tmp_path_factory):
    """The 4.9.8 basic store (clean shutdown) with one body byte flipped in the third-last
    file, which 4.9.8's normal recovery walks; planned, applied, planned again, verified,
    dumped and undone, once."""
    truth = load_truth(BASIC / "truth.json")
    size = truth["messageStoreConfig"]["changedFromDefault"]["mappedFileSizeCommitLog"]
    puts = sorted(truth["putResults"], key=lambda p: p["wroteOffset"])
    files = (truth["truth"]["commitlog"]["maxPhyOffset"] + size - 1) // size
    in_file = [p for p in puts if p["wroteOffset"] // size == files - 3]
    damaged = in_file[len(in_file) // 2]
    root = tmp_path_factory.mktemp("keep-basic")
    store = writable_copy(BASIC / "store", root / "store")
    _flip(store / "commitlog" / f"{damaged['wroteOffset'] - damaged['wroteOffset'] % size:020d}",
          damaged["wroteOffset"] % size + BODY_AT_V4 + 3)
    before = tree_fingerprint(store)
    out = {"truth": truth, "puts": puts, "damaged": damaged, "size": size, "store": store}
    v4 = ("--semantics", "4.9")  # a 4.9.8 store: its files do not say so
    out["plan_code"], out["plan"] = _json("recover", store, *v4, "--keep-past-damage")
    out["apply_code"], out["apply"] = _json("recover", store, *v4, "--keep-past-damage", "--apply", "--backup-dir",
                                            root / "backup")
    out["again_code"], out["again"] = _json("recover", store, *v4)
    _code, verify = _run("verify", store, "-f", "jsonl", "--no-progress", "--jobs", "1")
    out["verify"] = [json.loads(line) for line in verify.splitlines()]
    _code, dump = _run("dump", "commitlog", store, "-f", "jsonl")
    out["records"] = [json.loads(line) for line in dump.splitlines()]
    out["undo_code"], _ = _run("undo", root / "backup")
    out["same"] = tree_fingerprint(store) == before
    return out


def test_plan_lists_the_damaged_record_and_what_it_keeps(basic):
    damaged, puts = basic["damaged"], basic["puts"]
    k = basic["plan"]["keep_past_damage"]
    (q,) = k["quarantined"]
    assert "refused" not in q
    assert (q["offset"], q["size"], q["topic"], q["queue_offset"]) == (
        damaged["wroteOffset"], damaged["wroteBytes"], damaged["topicRequested"], damaged["logicsOffset"])
    assert q["fields_from"] == "record"
    later = [p for p in puts if p["wroteOffset"] > damaged["wroteOffset"]]
    assert k["kept_messages"] == len(later)  # the broker drops every one of them
    by_topic: dict = {}
    for name, n in k["kept_by_queue"].items():
        by_topic[name.rsplit("/", 1)[0]] = by_topic.get(name.rsplit("/", 1)[0], 0) + n
    assert by_topic == {t: sum(1 for p in later if p["topicRequested"] == t) for t in by_topic}
    assert k["recovered_end_before"] == damaged["wroteOffset"]
    assert k["recovered_end_after"] == basic["truth"]["truth"]["commitlog"]["maxPhyOffset"]
    assert basic["plan_code"] == 3  # the plan changes data: nothing is written


def test_apply_keeps_everything_and_a_second_plan_agrees(basic):
    assert basic["apply_code"] == 0
    assert basic["apply"]["applied"]["backup_dir"]
    assert basic["apply"]["applied"]["recovered_end"] == basic["truth"]["truth"]["commitlog"]["maxPhyOffset"]
    cl = basic["again"]["commit_log"]
    assert cl["recovered_end"] == cl["written_end"] == basic["truth"]["truth"]["commitlog"]["maxPhyOffset"]
    assert basic["again"]["lost_messages"] == []
    assert basic["again_code"] == 0


def test_every_later_message_keeps_its_offset_queue_offset_and_msgid(basic):
    damaged = basic["damaged"]
    by_offset = {r["commit_log_offset"]: r for r in basic["records"] if r["record"] == "message"}
    for p in basic["puts"]:
        r = by_offset[p["wroteOffset"]]
        if p["wroteOffset"] == damaged["wroteOffset"]:
            assert QUARANTINE_PROPERTY in r["properties"] and r["body_crc_ok"]
            assert (r["store_size"], r["topic"], r["queue_offset"]) == (
                p["wroteBytes"], p["topicRequested"], p["logicsOffset"])
            continue
        assert (r["msg_id"], r["queue_offset"], r["topic"], r["store_size"]) == (
            p["msgId"], p["logicsOffset"], p["topicRequested"], p["wroteBytes"])


def test_verify_reports_the_quarantined_record(basic):
    damaged, size = basic["damaged"], basic["size"]
    found = [f for f in basic["verify"] if f.get("finding") == RECORD_QUARANTINED]
    assert [(pathlib.Path(f["path"]).name, f["offset"], f["severity"]) for f in found] == [
        (f"{damaged['wroteOffset'] - damaged['wroteOffset'] % size:020d}", damaged["wroteOffset"] % size, "warning")]
    # its TAGS, KEYS and UNIQ_KEY kept: its consume queue unit and index entries still match it
    assert [f for f in basic["verify"] if f.get("severity") == "error"] == []


def test_undo_gives_back_every_byte(basic):
    assert basic["undo_code"] == 0
    assert basic["same"]


@pytest.fixture(scope="module")
def torn(tmp_path_factory):
    """crash-made torn-middle-normal: 4.9.8 cuts at a flipped body byte, 5.3.3 keeps all."""
    root = tmp_path_factory.mktemp("keep-torn")
    store = writable_copy(TORN / "input" / "store", root / "store")
    out = {"truth": load_truth(TORN / "truth.json"), "store": store}
    out["plan_code"], out["plan"] = _json("recover", store, "--semantics", "4.9", "--keep-past-damage")
    out["apply_code"], out["apply"] = _json("recover", store, "--semantics", "4.9", "--keep-past-damage", "--apply",
                                            "--backup-dir", root / "backup")
    out["again_code"], out["again"] = _json("recover", store, "--semantics", "4.9")
    return out


def test_crash_made_store_keeps_what_the_broker_drops(torn):
    v4, v5 = torn["truth"]["engines"]["4.9.8"], torn["truth"]["engines"]["5.3.3"]
    k = torn["plan"]["keep_past_damage"]
    (q,) = k["quarantined"]
    assert q["offset"] == v4["maxPhyOffset"] and "refused" not in q
    name = f"{q['topic']}/{q['queue_id']}"
    assert q["queue_offset"] == v4["queues"][name][1]  # the first message 4.9.8 drops from its queue
    # every message 4.9.8 drops is kept: the replaced one's queue offset stays taken
    kept = {n: k["kept_by_queue"].get(n, 0) + (n == name) for n in v4["queues"]}
    assert kept == {n: v5["queues"][n][1] - v4["queues"][n][1] for n in v4["queues"]}
    assert torn["apply_code"] == 0
    cl = torn["again"]["commit_log"]
    assert cl["recovered_end"] == cl["written_end"] == v5["maxPhyOffset"]
    assert {n: [r["min_offset"], r["max_offset"]] for n, r in torn["again"]["queues"].items()} == v5["queues"]


def test_a_5x_record_with_a_crc32_entry_and_a_v2_topic(tmp_path):
    """prop-crc-digits (5.3.3, enabledAppendPropCRC, V2 records): with forceVerifyPropCRC the
    walk cuts at the changed __CRC32# digit; the replacement carries a __CRC32# entry of its
    own, which the walk checks, and the store keeps every record 5.3.3 keeps without it."""
    truth = load_truth(PROP_CRC / "truth.json")["engines"]["5.3.3"]
    store = writable_copy(PROP_CRC / "input" / "store", tmp_path / "store")
    _code, plan = _json("recover", store, "--verify-prop-crc", "--keep-past-damage")
    (q,) = plan["keep_past_damage"]["quarantined"]
    assert q["prop_crc"] and q["fields_from"] == "record" and "refused" not in q
    code, _ = _json("recover", store, "--verify-prop-crc", "--keep-past-damage", "--apply", "--backup-dir",
                    tmp_path / "backup")
    assert code == 0
    _code, again = _json("recover", store, "--verify-prop-crc")
    assert again["commit_log"]["recovered_end"] == again["commit_log"]["written_end"] == truth["maxPhyOffset"]
    assert again["lost_messages"] == []


def test_a_record_whose_extent_is_not_proven_is_refused(tmp_path):
    """The damaged record's totalSize made 8 bytes longer: the resync lands where it really
    ends, not where its totalSize says: refused, and the log is still cut there."""
    truth = load_truth(TORN / "truth.json")
    offset, size = truth["engines"]["4.9.8"]["maxPhyOffset"], int(truth["sizes"][0])
    store = writable_copy(TORN / "input" / "store", tmp_path / "store")
    path = store / "commitlog" / f"{offset - offset % size:020d}"
    with open(path, "r+b") as f:
        f.seek(offset % size + TOTAL_SIZE_AT)
        total = int.from_bytes(f.read(4), "big")
        f.seek(offset % size + TOTAL_SIZE_AT)
        f.write((total + 8).to_bytes(4, "big"))
    before = tree_fingerprint(store)
    code, plan = _json("recover", store, "--semantics", "4.9", "--keep-past-damage")
    (q,) = plan["keep_past_damage"]["quarantined"]
    assert q["offset"] == offset and "extent is not proven" in q["refused"]
    assert plan["keep_past_damage"]["recovered_end_after"] == offset and plan["keep_past_damage"]["kept_messages"] == 0
    assert code == 3 and tree_fingerprint(store) == before


def test_unreadable_fields_are_refused_with_a_reason(tmp_path):
    """bcq-torn-middle-abnormal: the torn record's extent holds, but neither it nor its
    neighbours show its topic, queue and queue offset: refused, said why."""
    store = BCQ_TORN / "input" / "store"
    code, plan = _json("recover", store, "--keep-past-damage")
    (q,) = plan["keep_past_damage"]["quarantined"]
    assert q["refused"] and "topic" not in q
    assert code == 3
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_a_record_too_small_for_its_replacement_is_refused():
    """The replacement is built by the engine's encoder: a damaged record too short for its
    topic and the property gets a reason, not bytes; one of room enough gets exactly its size."""
    from rmqtool.engine.quarantine_record import quarantine_record
    from rmqtool.formats.commitlog import MIN_MESSAGE_LENGTH
    from rmqtool.recovery.quarantine import Quarantine
    q = Quarantine("commitlog/00000000000000000000", 0, 0, MIN_MESSAGE_LENGTH + 4, "body CRC mismatch",
                   fields_from="record", topic="OrderTopic", queue_id=1, queue_offset=7)
    assert "has no room" in quarantine_record(q)
    roomy = Quarantine(q.path, 0, 0, 400, q.reason, fields_from="record", topic="OrderTopic", queue_id=1,
                       queue_offset=7, properties=(("KEYS", "k-1"),))
    data = quarantine_record(roomy)
    assert len(data) == 400 and int.from_bytes(data[:4], "big") == 400
    assert QUARANTINE_PROPERTY.encode() in data and b"KEYS\x01k-1" in data


def test_undo_puts_back_the_zeros_of_a_torn_record_it_replaced(tmp_path):
    """A torn record whose body holds whole pages of zeros (what reached the disk of a large
    message): its replacement fills them, and undo writes the zeros back too, not only the
    original's non-zero pages (a restore that kept holes left the replacement's bytes there)."""
    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.store import Store

    root = tmp_path / "store"
    with Store.open(root, writable=True, commitlog_size=1 << 20, cq_size=6000, index_slots=1000,
                    index_entries=4000) as store:
        # bodies that do not compress (the producer compresses a body over 4 KiB)
        puts = [store.append(producer_message("BigTopic", random.Random(i).randbytes(20_000), keys=f"k{i}"))
                for i in range(3)]
    torn = puts[1]
    segment = root / "commitlog" / f"{0:020d}"
    with open(segment, "r+b") as f:  # two whole pages of its body never reached the disk
        f.seek(torn.wrote_offset + 4096)
        f.write(bytes(8192))
    before = tree_fingerprint(root)
    code, _ = _run("recover", root, "--apply", "--keep-past-damage", "--backup-dir", tmp_path / "backup")
    assert code == 0
    assert tree_fingerprint(root) != before
    code, _ = _run("undo", tmp_path / "backup")
    assert code == 0
    assert tree_fingerprint(root) == before
