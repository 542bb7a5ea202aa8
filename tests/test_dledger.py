"""A DLedger commit log (enableDLegerCommitLog) read, checked and planned against the real 5.3.3
DLedgerCommitLog over dledger 0.3.1.2 (fixtures/rocketmq-5.3.3/dledger, README "DLedger commit log").

Every entry header and index unit field is checked against truth.json, which the engine's own
``DLedgerMmapFileStore.get`` and ``indexFileList.getData`` produced; the layouts (DLedgerEntryCoder)
are written out here from the fixture README, not taken from the code under test."""
from __future__ import annotations

import base64
import json
import pathlib
import struct

import pytest

from conftest import V5, load_truth
from helpers import cli_runner, copy_tree, expand_store, tree_fingerprint
from rmqtool.findings import (BODY_CRC_MISMATCH, CONSUME_QUEUE_UNIT_NO_RECORD, DLEDGER_ENTRY_INVALID,
                              DLEDGER_INDEX_MISMATCH, DLEDGER_RECORD_INVALID, SEGMENT_SIZE_ODD)
from rmqtool.formats import dledger as fmt
from rmqtool.query.by_key import query_by_key
from rmqtool.query.by_offset import message_by_msg_id
from rmqtool.store.commitlog import Blank
from rmqtool.store.dledger import Entry, find_dledger, survey
from rmqtool.store.view import StoreView

DLEDGER = V5 / "dledger"
CRASH = DLEDGER / "dledger-crash"
# the README's layouts: entry header magic 4, size 4, index 8, term 8, pos 8, channel 4, chainCrc 4,
# bodyCrc 4, bodyLength 4 (48 bytes, big-endian); index unit magic 4, pos 8, size 4, index 8, term 8
ENTRY = struct.Struct(">iiqqqiiii")
UNIT = struct.Struct(">iqiqq")
POS_AT, BODY_AT = 24, 48
BODY_AT_V4 = 88  # a record's body with IPv4 born and store hosts (the commit log record layout)


def _app():
    from rmqtool.cli.app import app
    return app


def _run(*args, codes=(0,)):
    r = cli_runner().invoke(_app(), [str(a) for a in args])
    assert r.exit_code in codes, (args, r.exit_code, r.stdout[-2000:], r.stderr[-2000:])
    return r


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, pathlib.Path]:
    base = tmp_path_factory.mktemp("dledger")
    return {"store": expand_store(DLEDGER / "store", base / "store"),
            "input": expand_store(CRASH / "input" / "store", base / "input"),
            "expected": expand_store(CRASH / "expected" / "store", base / "expected")}


@pytest.fixture(scope="module")
def truth() -> dict:
    return load_truth(DLEDGER / "truth.json")


@pytest.fixture(scope="module")
def crash_truth() -> dict:
    return load_truth(CRASH / "truth.json")


@pytest.fixture(scope="module")
def walked(stores) -> list:
    return list(find_dledger(stores["store"]).entries(records=True))


def test_schemas_are_the_coders_layouts():
    assert (fmt.HEADER_SIZE, fmt.BODY_OFFSET, fmt.POS_OFFSET, fmt.INDEX_UNIT_SIZE) == (44, BODY_AT, POS_AT, UNIT.size)
    sample = bytes(range(1, BODY_AT + 1))  # every field a different value: the order shows
    assert fmt.ENTRY_HEADER.unpack(sample) == ENTRY.unpack(sample)
    assert fmt.INDEX_UNIT.unpack(sample[:UNIT.size]) == UNIT.unpack(sample[:UNIT.size])


def test_every_entry_field_by_field(stores, truth, walked):
    """Each entry as DLedgerMmapFileStore.get read it; the construct schema and the derived struct agree."""
    entries = [r for r in walked if isinstance(r, Entry)]
    want = truth["truth"]["entries"]
    assert len(entries) == len(want) == truth["truth"]["dledger"]["ledgerEndIndex"] + 1
    data = stores["store"] / "dledger-n0" / "data"
    raw = {p.name: p.read_bytes() for p in data.iterdir()}
    for e, t in zip(entries, want):
        got = {"index": e.index, "term": e.term, "pos": e.pos, "magic": e.magic, "size": e.size,
               "channel": e.channel, "chainCrc": e.chain_crc, "bodyCrc": e.body_crc, "bodyLength": e.body_length,
               "dataFile": e.data_file, "positionInDataFile": e.position, "recordOffset": e.record_offset}
        assert got == {k: t[k] for k in got}
        head = raw[e.data_file][e.position:e.position + BODY_AT]
        parsed = fmt.EntryHeader.parse(head)
        assert ENTRY.unpack(head) == tuple(parsed[k] for k in
                                           ("magic", "size", "index", "term", "pos", "channel", "chain_crc",
                                            "body_crc", "body_length"))
        assert fmt.EntryHeader.build(parsed) == head


def test_every_record_inside_its_entry(walked, truth):
    """The record at pos + 48, decoded by the one record decoder, as lookMessageByOffset decoded it."""
    entries = [r for r in walked if isinstance(r, Entry)]
    for e, t in zip(entries, truth["truth"]["entries"]):
        m, rec, d = e.record, t["record"], t["dispatch"]
        assert (m.commit_log_offset, m.physical_offset, m.store_size) == (d["commitLogOffset"], rec["commitLogOffsetField"],
                                                                         d["msgSize"])
        assert d["bufferSize"] == e.size == m.store_size + BODY_AT
        assert (m.topic, m.queue_id, m.queue_offset, m.sys_flag, m.flag) == (
            rec["topic"], rec["queueId"], rec["queueOffset"], rec["sysFlag"], rec["flag"])
        assert (m.born_timestamp, m.store_timestamp, m.body_crc, m.reconsume_times) == (
            rec["bornTimestamp"], rec["storeTimestamp"], rec["bodyCRC"], rec["reconsumeTimes"])
        assert m.magic_code == rec["magicCode"] & 0xFFFFFFFF
        assert m.properties_raw.decode("utf-8") == rec["propertiesString"]
        assert m.body == base64.b64decode(rec["body"]) and m.body_crc_ok is True
        assert m.msg_id == rec["msgId"]


def test_blank_fills(walked, truth):
    blanks = [r for r in walked if isinstance(r, Blank)]
    want = truth["truth"]["commitlog"]["blankMarkers"]
    assert [(b.offset, b.size, pathlib.Path(b.path).name, b.position, b.valid) for b in blanks] == [
        (m["offset"], m["sizeField"], m["dataFile"], m["positionInFile"], m["sizeField"] == m["bytesToFileEnd"])
        for m in want]


def test_every_index_unit_field_by_field(stores, truth):
    units = list(find_dledger(stores["store"]).index_units())
    want = truth["truth"]["indexUnits"]
    assert len(units) == len(want)
    index = stores["store"] / "dledger-n0" / "index"
    for u, t in zip(units, want):
        assert (pathlib.Path(u.path).name, u.position, u.magic, u.pos, u.size, u.index, u.term, u.slot) == (
            t["indexFile"], t["positionInIndexFile"], t["magic"], t["pos"], t["size"], t["entryIndex"], t["term"],
            t["index"])
        raw = (index / t["indexFile"]).read_bytes()[u.position:u.position + UNIT.size]
        assert UNIT.unpack(raw) == (t["magic"], t["pos"], t["size"], t["entryIndex"], t["term"])
        assert fmt.IndexUnit.parse(raw).term == t["term"]


def _refused_index_files(store: pathlib.Path, truth: dict) -> list[tuple[str, str]]:
    """The README's one deviation: entry index files of truth's indexFileSize, not the
    DLedger default a 5.3.3 broker cannot change, so MmapFileList.load refuses each one."""
    size = truth["truth"]["dledger"]["indexFileSize"]
    assert size != 32 * 5 * 1024 * 1024
    return [(SEGMENT_SIZE_ODD, str(f)) for f in sorted((store / "dledger-n0" / "index").iterdir())
            if f.stat().st_size == size]


def test_info_and_detection(stores, truth):
    """No flag: the store is found to be a DLedger one; info shows the engine's DLedger state."""
    doc = json.loads(_run("info", stores["store"], "-f", "json", codes=(3,)).stdout)
    d, t = doc["dledger"], truth["truth"]["dledger"]
    assert (d["self_id"], d["ledger_begin_index"], d["ledger_end_index"], d["ledger_end_term"]) == (
        t["selfId"], t["ledgerBeginIndex"], t["ledgerEndIndex"], t["ledgerEndTerm"])
    assert (d["committed_index"], d["recover_end"], d["curr_term"], d["vote_leader"]) == (
        t["committedIndex"], t["committedPos"], t["currTerm"], t["currVoteFor"])
    assert (d["data_file_size"], d["index_file_size"], d["entries"]) == (
        t["dataFileSize"], t["indexFileSize"], t["ledgerEndIndex"] + 1)
    assert [f["written_to"] for f in d["data_files"] if "written_to" in f] == [
        t["dataFiles"][-1]["fileFromOffset"] + t["dataFiles"][-1]["wrotePosition"]]
    cl = truth["truth"]["commitlog"]
    assert (doc["commitlog"]["min_commit_log_offset"], doc["commitlog"]["max_commit_log_offset"]) == (
        cl["minPhyOffset"], cl["maxPhyOffset"])
    assert [(f["finding"], f["path"]) for f in doc["findings"]] == _refused_index_files(stores["store"], truth)
    assert [s["read_by"] for s in doc["side_stores"] if s["name"] == "dledger-n0"] == ["rmqtool dump dledger"]


def test_lookups_across_envelopes(stores, truth):
    """Every msgId resolves (viewMessageById found all); key and UNIQ_KEY lookups find what the
    broker's queryMessage kept, through the index and by scanning the entries."""
    view = StoreView(stores["store"])
    for v in truth["viewMessageById"]:
        [m] = message_by_msg_id(view, v["msgId"]).messages
        assert (m.commit_log_offset, m.topic) == (v["physicalOffset"], v["topic"])
    for q in truth["queryMessage"]:
        want = sorted(r["physicalOffset"] for r in q["queryMessageResults"] if r["keyOrUniqKeyActuallyEquals"])
        for use_index in (True, False):
            got = query_by_key(view, q["key"], topic=q["topic"], max_num=q["maxNum"], use_index=use_index)
            assert sorted(m.commit_log_offset for m in got.messages) == want, (q["key"], use_index)


def test_dump_dledger_and_dump_commitlog(stores, truth):
    rows = [json.loads(x) for x in _run("dump", "dledger", stores["store"], "-f", "jsonl").stdout.splitlines()]
    entries = [r for r in rows if r["record"] == "dledger_entry"]
    want = truth["truth"]["entries"]
    assert [(r["entry_index"], r["term"], r["pos"], r["size"], r["magic"], r["commit_log_offset"], r["topic"],
             r["queue_offset"], r["msg_id"]) for r in entries] == [
        (t["index"], t["term"], t["pos"], t["size"], t["magic"], t["recordOffset"], t["record"]["topic"],
         t["record"]["queueOffset"], t["record"]["msgId"]) for t in want]
    assert sum(r["record"] == "blank" for r in rows) == len(truth["truth"]["commitlog"]["blankMarkers"])
    units = [json.loads(x) for x in _run("dump", "dledger", stores["store"] / "dledger-n0", "--index",
                                         "--from-index", 127, "--to-index", 130, "-f", "jsonl").stdout.splitlines()]
    assert [(u["slot"], u["pos"]) for u in units] == [(t["index"], t["pos"]) for t in truth["truth"]["indexUnits"][127:130]]
    msgs = [json.loads(x) for x in _run("dump", "commitlog", stores["store"], "-f", "jsonl").stdout.splitlines()]
    assert [(m["commit_log_offset"], m["topic"], m["queue_offset"]) for m in msgs] == [
        (t["recordOffset"], t["record"]["topic"], t["record"]["queueOffset"]) for t in want]
    # --show-blank shows DLedger's blank fills where the reput scan met them, and only with it
    shown = [json.loads(x) for x in _run("dump", "commitlog", stores["store"], "-f", "jsonl",
                                         "--show-blank").stdout.splitlines()]
    assert [(b["commit_log_offset"], b["store_size"], b["valid"]) for b in shown if b["record"] == "blank"] == [
        (m["offset"], m["sizeField"], m["sizeField"] == m["bytesToFileEnd"])
        for m in truth["truth"]["commitlog"]["blankMarkers"]]
    assert [m for m in shown if m["record"] != "blank"] == msgs
    second = truth["truth"]["commitlog"]["blankMarkers"][1]["offset"]
    after = [json.loads(x) for x in _run("dump", "commitlog", stores["store"], "-f", "jsonl", "--show-blank",
                                         "--from-offset", second).stdout.splitlines()]
    assert [b["commit_log_offset"] for b in after if b["record"] == "blank"] == [second]


def test_entry_sizes_in_a_table_are_exact(stores, truth):
    """An entry's size is its length in bytes, as its pos is a position: the table shows the number
    (1149, not 1.1 KiB), so each pos + size is the next pos; an index unit's alike."""
    want = [(t["pos"], t["size"]) for t in truth["truth"]["entries"][:5]]
    assert any(size >= 1024 for _, size in want)
    table = _run("dump", "dledger", stores["store"], "-n", 5, "--columns", "pos,size").stdout.splitlines()
    assert [tuple(map(int, line.split())) for line in table[2:]] == want
    table = _run("dump", "dledger", stores["store"] / "dledger-n0", "--index", "--to-index", 5,
                 "--columns", "pos,size").stdout.splitlines()
    assert [tuple(map(int, line.split())) for line in table[2:]] == want


def test_verify_clean_store(stores, truth, tmp_path):
    """Nothing but what the broker refuses at load (README: the index files' size); recover's
    plan says it refuses and --apply writes nothing. The crashed store keeps DLedger's default
    index size: none of its files is refused."""
    found = [json.loads(x) for x in _run("verify", stores["store"], "-f", "jsonl", codes=(3,)).stdout.splitlines()]
    assert [(f["finding"], f["path"]) for f in found] == _refused_index_files(stores["store"], truth)
    plan = json.loads(_run("recover", stores["store"], "-f", "json", codes=(3,)).stdout)
    assert plan["loadable"] is False and str(_refused_index_files(stores["store"], truth)[0][1]) in plan["refusal"]
    assert plan["store_path"] == plan["store"] == str(stores["store"])  # a plan's name for it, and the old one
    copy = copy_tree(stores["store"], tmp_path / "copy", symlinks=True)
    before = tree_fingerprint(copy)
    refused = _run("recover", copy, "--apply", codes=(3,))
    assert "not recovered: the broker does not load this store" in refused.stderr
    assert tree_fingerprint(copy) == before
    for name in ("input", "expected"):
        crashed = [json.loads(x) for x in _run("verify", stores[name], "-f", "jsonl", codes=(0, 3)).stdout.splitlines()]
        assert SEGMENT_SIZE_ODD not in {f["finding"] for f in crashed}
        assert json.loads(_run("recover", stores[name], "-f", "json", codes=(0, 3)).stdout)["loadable"] is True


def test_verify_finds_the_torn_entry_where_the_engine_met_it(stores, crash_truth):
    """dledger-crash: DLedger keeps the torn entry (no CRC in its recover); its record fails, the
    reput skips it, and the unit that names it (still in the queue file) serves it torn."""
    mut = crash_truth["mutation"]
    data = stores["input"] / mut["dataFile"]
    base = int(data.name)
    for name in ("input", "expected"):
        found = [json.loads(x) for x in _run("verify", stores[name], "-f", "jsonl", codes=(3,)).stdout.splitlines()]
        by_id = {f["finding"]: f for f in found}
        torn = by_id[DLEDGER_RECORD_INVALID]
        assert (torn["path"], torn["offset"], torn["commit_log_offset"]) == (
            str(stores[name] / mut["dataFile"]), mut["entryPos"] - base + BODY_AT, mut["entryPos"] + BODY_AT)
        assert torn["consequence"] == "unreachable"
        unit = by_id[CONSUME_QUEUE_UNIT_NO_RECORD]
        assert (unit["topic"], unit["commit_log_offset"]) == ("DlgAuditTopic", mut["entryPos"] + BODY_AT)
        reloaded = json.loads((CRASH / "summary.json").read_text())["torn-last-entry"]["reloadOfExpected"]
        assert unit["queue_offset"] == reloaded["queues"]["DlgAuditTopic/0"][1] - 1  # served torn at a restart


def test_recover_plans_what_the_engine_did(stores, crash_truth):
    summary = json.loads((CRASH / "summary.json").read_text())["torn-last-entry"]
    doc = json.loads(_run("recover", stores["input"], "-f", "json", codes=(3,)).stdout)
    assert doc["mode"] == "abnormal"
    recovered = summary["recovered"]
    assert (doc["dledger"]["ledger_end_index"], doc["dledger"]["recover_end"]) == (
        recovered["ledgerEndIndex"], recovered["maxPhyOffset"])
    assert doc["dledger"]["committed_index"] == summary["afterLoadBeforeStart"]["committedIndex"]
    # the engine's processOffset: the last file walked, plus its records' sizes without the headers
    entries = crash_truth["recovery"]["truth"]["entries"]
    last_file = int(crash_truth["mutation"]["dataFile"].rsplit("/", 1)[1])
    walked = [e for e in entries if e["pos"] >= last_file and e["index"] < crash_truth["mutation"]["entryIndex"]]
    assert doc["commitlog"]["process_offset"] == last_file + sum(e["dispatch"]["msgSize"] for e in walked)
    after = {f"{q['topic']}/{q['queue_id']}": q["max_queue_offset_after"] for q in doc["queues"]}
    assert after == {k: v[1] for k, v in recovered["queues"].items()}
    assert doc["lost_messages"] == [{"topic": "DlgAuditTopic", "queue_id": 0,
                                     "queue_offset": recovered["queues"]["DlgAuditTopic/0"][1]}]
    again = json.loads(_run("recover", stores["expected"], "-f", "json").stdout)  # the second restart
    assert {f"{q['topic']}/{q['queue_id']}": q["max_queue_offset_after"] for q in again["queues"]} == {
        k: v[1] for k, v in summary["reloadOfExpected"]["queues"].items()}
    # info shows the queues as that start leaves them, as it does a plain store's
    for name, want in (("input", recovered), ("expected", summary["reloadOfExpected"])):
        shown = json.loads(_run("info", stores[name], "-f", "json", codes=(0, 3)).stdout)["consume_queues"]
        assert {f"{q['topic']}/{q['queue_id']}": [q["min_queue_offset"], q["max_queue_offset"]] for q in shown} == {
            k: v[:2] for k, v in want["queues"].items()}


def test_recover_apply_zeroes_the_unit_the_engine_dropped_in_memory_only(tmp_path):
    """The second restart serves the torn record from the unit left in the file (reloadOfExpected):
    --apply zeroes it, with a backup undo puts back."""
    from helpers import tree_fingerprint
    summary = json.loads((CRASH / "summary.json").read_text())["torn-last-entry"]
    store = expand_store(CRASH / "input" / "store", tmp_path / "store")
    before = tree_fingerprint(store)
    backup = tmp_path / "backup"
    doc = json.loads(_run("recover", store, "--apply", "--backup-dir", backup, "-f", "json").stdout)
    assert doc["applied"]["units_zeroed"] == 1
    again = json.loads(_run("recover", store, "-f", "json", codes=(3,)).stdout)
    after = {f"{q['topic']}/{q['queue_id']}": q["max_queue_offset_before"] for q in again["queues"]}
    assert after == {k: v[1] for k, v in summary["recovered"]["queues"].items()}
    assert again["lost_messages"] == []
    _run("undo", backup)
    assert tree_fingerprint(store) == before


def _two_units_to_zero(crash_truth, dst: pathlib.Path) -> pathlib.Path:
    """The crashed store with entry 151's record (DlgOrderTopic/1 #28) failing the reput too (its
    bodyLength 10 short), so --apply zeroes a unit in two queue files: a kill can fall between them."""
    store = expand_store(CRASH / "input" / "store", dst)
    entry = next(e for e in crash_truth["recovery"]["truth"]["entries"] if e["index"] == 151)
    at = entry["positionInDataFile"] + BODY_AT + BODY_AT_V4 - 4  # the record's bodyLength
    with open(store / "dledger-n0" / "data" / entry["dataFile"], "r+b") as f:
        f.seek(at)
        length = struct.unpack(">i", f.read(4))[0]
        f.seek(at)
        f.write(struct.pack(">i", length - 10))
    return store


def _killed(*args, after: int) -> int:
    """rmqtool run in a process that SIGKILLs itself at its ``after``-th change step; its return code."""
    import os
    import subprocess
    import sys
    from conftest import REPO
    env = dict(os.environ, RMQTOOL_KILL_AFTER=str(after), PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "rmqtool", *map(str, args)], env=env, capture_output=True,
                          timeout=120).returncode


@pytest.mark.parametrize("same_backup_dir", [False, True])
def test_recover_apply_killed_between_two_files_is_finished_as_a_plain_store_is(crash_truth, tmp_path,
                                                                                 same_backup_dir):
    """--apply killed after the first of two queue files is swapped in: the same command (with the
    same --backup-dir or none) rolls the store back from that backup and repairs it afresh into it,
    as an uninterrupted run does, and undo of that backup gives back the original. It planned the
    half-changed store (one unit zeroed, not two), backed those bytes up in a new backup that undid
    to the half-changed store, and refused the same --backup-dir as not empty (exit 2)."""
    from rmqtool.store.paths import UNFINISHED_FILE
    reference = _two_units_to_zero(crash_truth, tmp_path / "reference")
    before = tree_fingerprint(reference)
    done = json.loads(_run("recover", reference, "--apply", "--backup-dir", tmp_path / "b0", "-f", "json").stdout)
    assert done["applied"]["units_zeroed"] == 2
    repaired = tree_fingerprint(reference)
    store = _two_units_to_zero(crash_truth, tmp_path / "store")
    backup = tmp_path / "backup"
    assert _killed("recover", store, "--apply", "--backup-dir", backup, after=2) == -9
    assert tree_fingerprint(store) not in (before, repaired)  # one file swapped in of two
    given = ["--backup-dir", backup] if same_backup_dir else []
    doc = json.loads(_run("recover", store, "--apply", *given, "-f", "json").stdout)
    assert doc["applied"]["units_zeroed"] == 2
    assert pathlib.Path(doc["applied"]["backup_dir"]).resolve() == backup.resolve()
    assert not (store / UNFINISHED_FILE).exists() and tree_fingerprint(store) == repaired
    _run("undo", backup)
    assert tree_fingerprint(store) == before


def test_what_finishes_a_killed_dledger_apply_keeps_its_options(crash_truth, tmp_path):
    """The marker's finish is the command as given (--no-check-crc: the walk the plan was made
    with); it dropped the options, and the run that finished it planned another walk."""
    from rmqtool.store.unfinished import read_unfinished
    store = _two_units_to_zero(crash_truth, tmp_path / "store")
    assert _killed("recover", store, "--no-check-crc", "--apply", "--backup-dir", tmp_path / "b", after=2) == -9
    assert read_unfinished(store).finish == f"rmqtool recover {store} --no-check-crc --apply"


def test_the_plan_of_a_dledger_store_a_repair_marked_is_not_called_clean(tmp_path):
    """A repair killed right after it marked the store (intent.begin, before its first change) on
    a store whose plan is empty: the plan exited 0, calling clean a store every command calls
    half changed. Exit 3, as a plain store's plan: the marker alone makes the difference."""
    from rmqtool.recovery import intent
    from rmqtool.store.paths import UNFINISHED_FILE
    store = expand_store(CRASH / "expected" / "store", tmp_path / "store")  # the broker's start after the crash
    clean = _run("recover", store, "-f", "json")
    backup = tmp_path / "backup"
    backup.mkdir()
    intent.begin(backup, store, "recover", f"rmqtool recover {store} --apply", f"rmqtool undo {backup}")
    planned = _run("recover", store, "-f", "json", codes=(3,))
    assert "interrupted recover" in planned.stderr and json.loads(planned.stdout) == json.loads(clean.stdout)
    (store / UNFINISHED_FILE).unlink()
    _run("recover", store)


def test_recover_apply_refuses_a_dledger_store_an_undo_cut_short_left(crash_truth, tmp_path):
    """An undo killed between its two files: recover --apply refuses for the marker (exit 5, naming
    the undo that finishes it) and writes nothing, as on a plain store; it planned the half-undone
    store and applied over it. The undo run again gives back the original."""
    store = _two_units_to_zero(crash_truth, tmp_path / "store")
    before = tree_fingerprint(store)
    backup = tmp_path / "backup"
    _run("recover", store, "--apply", "--backup-dir", backup)
    repaired = tree_fingerprint(store)
    assert _killed("undo", backup, after=2) == -9
    half = tree_fingerprint(store)
    assert half not in (before, repaired)
    refused = _run("recover", store, "--apply", codes=(5,))
    assert f"rmqtool undo {backup}" in refused.stderr and "interrupted undo" in refused.stderr, refused.stderr
    assert tree_fingerprint(store) == half and not list(tmp_path.glob("store.recovery-*"))
    _run("undo", backup)
    assert tree_fingerprint(store) == before


def test_damage_in_headers_index_and_records(stores, truth, tmp_path):
    """A pos field, an index unit's term and a body byte changed: each found at its place;
    the walk reads on past the bad header (the next header names its own place)."""
    store = expand_store(DLEDGER / "store", tmp_path / "store")
    entries = truth["truth"]["entries"]
    bad_header, bad_unit = entries[-5], truth["truth"]["indexUnits"][10]
    bad_body = next(e for e in entries[20:] if e["record"]["bodyLength"] > 0 and e["record"]["sysFlag"] & 0x30 == 0)
    data = store / "dledger-n0" / "data"

    def patch(path, at, raw):
        with open(path, "r+b") as f:
            f.seek(at)
            f.write(raw)
    patch(data / bad_header["dataFile"], bad_header["positionInDataFile"] + POS_AT, struct.pack(">q", 7))
    unit_path = store / "dledger-n0" / "index" / bad_unit["indexFile"]
    patch(unit_path, bad_unit["positionInIndexFile"] + 24, struct.pack(">q", 9))
    body_at = bad_body["positionInDataFile"] + BODY_AT + BODY_AT_V4
    with open(data / bad_body["dataFile"], "r+b") as f:
        f.seek(body_at)
        byte = f.read(1)
        f.seek(body_at)
        f.write(bytes([byte[0] ^ 0xFF]))
    s = survey(find_dledger(store), records=True)
    found = {(f.id, pathlib.Path(f.path).name, f.offset) for f in s.findings}
    assert (DLEDGER_ENTRY_INVALID, bad_header["dataFile"], bad_header["positionInDataFile"]) in found
    assert (DLEDGER_INDEX_MISMATCH, bad_unit["indexFile"], bad_unit["positionInIndexFile"]) in found
    assert s.recover_end == bad_header["pos"]
    assert s.ledger_end_index == bad_header["index"] - 1
    assert s.entries == len(entries) - 1  # the ones after the bad header are read again
    out = [json.loads(x) for x in _run("verify", store, "-f", "jsonl", codes=(3,)).stdout.splitlines()]
    crc = [f for f in out if f["finding"] == BODY_CRC_MISMATCH]
    assert [(pathlib.Path(f["path"]).name, f["offset"], f["commit_log_offset"]) for f in crc] == [
        (bad_body["dataFile"], bad_body["positionInDataFile"] + BODY_AT, bad_body["recordOffset"])]
    assert {DLEDGER_ENTRY_INVALID, DLEDGER_INDEX_MISMATCH} <= {f["finding"] for f in out}


def test_files_and_directories_are_told_apart(stores, truth, tmp_path):
    """A DLedger data or index file is named for what it is (dump commitlog points at dump
    dledger); a root holding nothing but dledger-<id>/ is a store."""
    data = stores["store"] / "dledger-n0" / "data"
    first = sorted(data.iterdir())[1]
    refused = _run("dump", "commitlog", first, codes=(4,))
    assert f"try: rmqtool dump dledger {first}" in refused.stderr
    rows = [json.loads(x) for x in _run("dump", "dledger", first, "-f", "jsonl").stdout.splitlines()]
    assert {pathlib.Path(r["file"]).name for r in rows} == {first.name}
    assert _run("dump", "checkpoint", stores["store"] / "dledger-n0" / "checkpoint", codes=(4,)).stderr.count(
        "rmqtool info") == 1
    bare = tmp_path / "bare"
    copy_tree(stores["store"] / "dledger-n0", bare / "dledger-n0", dirs_exist_ok=True)
    doc = json.loads(_run("info", bare, "-f", "json", codes=(3,)).stdout)  # its index files' size refused
    assert doc["dledger"]["entries"] == truth["truth"]["dledger"]["ledgerEndIndex"] + 1
    for create in (("--create",), ()):  # without --create too: said as a DLedger store, not as no store
        refused = _run("append", bare, *create, "--topic", "T", "--body", "b", codes=(4,))
        assert "DLedger commit log store" in refused.stderr and "--create" not in refused.stderr
    # report draws a plain commit log: it showed a DLedger store empty and clean
    refused = _run("report", stores["store"], "-f", "json", codes=(4,))
    assert "report does not read it" in refused.stderr and not refused.stdout
    assert not (bare / "commitlog").exists()  # no second log beside DLedger's


def test_a_live_dledger_store_is_read_up_to_its_entries(stores, truth):
    """A running broker holds the lock: lookups read up to the end of the entries written
    (not the plain log's end, which a DLedger store does not have)."""
    from helpers import lock_held_elsewhere
    with lock_held_elsewhere(stores["store"] / "lock", 30):
        last = truth["viewMessageById"][-1]
        r = _run("query", stores["store"], "--msg-id", last["msgId"], "-f", "jsonl")
        assert json.loads(r.stdout)["commit_log_offset"] == last["physicalOffset"]
        assert f"reading up to commit log offset {truth['truth']['dledger']['committedPos']}" in r.stderr


def test_verify_store_checks_a_dledger_store_as_verify_does(stores):
    """The library's verify_store takes the one choice verify makes (verify/run.verify_run): a
    DLedger store gets its entry log's checks, the crashed one's findings the command gives
    (it ran the plain commit log's checks: hundreds of recordMagicInvalid)."""
    from rmqtool.verify.run import verify_store
    for name in ("store", "input"):
        command = [json.loads(x) for x in _run("verify", stores[name], "-f", "jsonl", "--jobs", "1",
                                                codes=(0, 3)).stdout.splitlines()]
        assert [f.to_json() for f in verify_store(stores[name])] == command


@pytest.mark.parametrize("odd", ["empty", "name", "directory"])
def test_an_odd_entry_in_the_index_directory(stores, crash_truth, tmp_path, odd):
    """An empty index file after the one written, a file of no offset's name, a directory under
    an offset's name: info, verify and recover read on (a traceback went out of the index size
    check); the empty file is one MmapFileList.load refuses; dump --index lists the written
    units only (it listed every zero unit of the 160 MiB file before the empty one)."""
    store = copy_tree(stores["input"], tmp_path / "store", symlinks=True)
    index = store / "dledger-n0" / "index"
    size = crash_truth["recovery"]["truth"]["dledger"]["indexFileSize"]
    if odd == "empty":
        (index / f"{size:020d}").write_bytes(b"")
    elif odd == "name":
        (index / "junk name").write_text("x")
    else:
        (index / f"{size:020d}").mkdir()
    for command in ("info", "verify", "recover"):
        r = _run(command, store, "-f", "json" if command != "verify" else "jsonl", codes=(0, 3))
        assert r.exception is None or isinstance(r.exception, SystemExit), (command, r.exception)
    plan = json.loads(_run("recover", store, "-f", "json", codes=(0, 3)).stdout)
    assert plan["loadable"] is (odd != "empty")
    units = _run("dump", "dledger", store, "--index", "-f", "jsonl", codes=(0, 3)).stdout.splitlines()
    assert len(units) == len(crash_truth["recovery"]["truth"]["indexUnits"])
