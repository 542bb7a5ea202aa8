"""One named answer per broker question, each checked against what the broker wrote.

Each test takes its expected values from a fixture's truth.json (the broker's own reading of
the store it wrote) or from the broker's own files, never from a second implementation.
"""
from __future__ import annotations

import collections

import hypothesis.strategies as st
from hypothesis import given

from conftest import CLEAN_SCENARIOS, V4, V5, load_truth
from rmqtool.findings import RECOVERY_START_FILE
from rmqtool.formats.consumequeue import FILL_SIZE
from rmqtool.formats.indexfile import build_key, index_key_hash, index_key_hashes
from rmqtool.formats.properties import bytes_to_properties
from rmqtool.recovery.commitlog_walk import V4 as V4_RULES, abnormal_start, normal_start
from rmqtool.store.checkpoint import read_checkpoint
from rmqtool.recovery.outcome import Settings, simulate
from rmqtool.store.commitlog_end import CommitLog, last_file_end, written_end
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.indexfile import list_index_files
from rmqtool.verify.run import Verify, VerifyOptions


# --- the index key hash: IndexService.buildKey + IndexFile.indexKeyHashMethod ----------------

def _indexed_keys(message: dict) -> list[str]:
    """What buildIndex puts for a message: its UNIQ_KEY and each KEYS word, as topic#key."""
    keys = [message["dispatchUniqKey"]] if message.get("dispatchUniqKey") else []
    keys += [k for k in (message.get("dispatchKeys") or "").split(" ") if k]
    return [build_key(message["topic"], k) for k in keys]


def test_key_hash_is_what_the_broker_put_in_its_index_files():
    """Every key of every message the broker indexed has an entry at the message's offset with
    the key's hash, in the index files the broker wrote: both forms of the hash agree with them."""
    checked = 0
    for name, scenario in CLEAN_SCENARIOS.items():
        truth = load_truth(scenario / "truth.json")["truth"]
        entries = collections.defaultdict(set)  # phyOffset -> keyHashes the broker wrote there
        for f in list_index_files(scenario / "store").open_all():
            with f:
                for e in f.iter_entries():
                    entries[e.phy_offset].add(e.key_hash)
        if not entries:
            continue  # a scenario with indexing off
        pairs = [(m["physicalOffset"], key) for m in truth["messages"]
                 if m.get("transactionType", 0) != 3 << 2 for key in _indexed_keys(m)]
        vectorised = index_key_hashes([key for _, key in pairs]).tolist()
        for (offset, key), many in zip(pairs, vectorised):
            assert index_key_hash(key) == many, (name, key)
            assert many in entries[offset], (name, offset, key)
        checked += len(pairs)
    assert checked > 1000


def test_key_hash_of_a_key_hashing_to_integer_min_is_zero():
    # String.hashCode("polygenelubricants") is Integer.MIN_VALUE; Math.abs keeps it negative,
    # and indexKeyHashMethod returns 0 for it
    assert index_key_hash("polygenelubricants") == 0
    assert index_key_hashes(["polygenelubricants"]).tolist() == [0]


@given(st.lists(st.text(min_size=1, max_size=60), min_size=1, max_size=40))
def test_key_hash_scalar_and_vectorised_forms_agree(keys):
    """The one test that keeps the two forms together: keys of any UTF-16 content (surrogates,
    non-ASCII, short and long, repeated heads as UNIQ_KEYs have)."""
    keys = keys + [k + "ABCD" for k in keys]  # a shared head with several tails (the scalar's cache)
    assert [index_key_hash(k) for k in keys] == index_key_hashes(keys).tolist()


# --- the property string parse: MessageDecoder.string2messageProperties ----------------------

def test_property_parse_is_the_brokers_reading_of_every_fixture_message():
    checked = 0
    for name, scenario in CLEAN_SCENARIOS.items():
        for m in load_truth(scenario / "truth.json")["truth"]["messages"]:
            parsed, utf8_ok = bytes_to_properties(m["propertiesString"].encode("utf-8"))
            assert utf8_ok and parsed == m["properties"], (name, m["physicalOffset"])
            checked += 1
    assert checked > 5000


def test_property_parse_of_bytes_that_are_not_utf8_replaces_them_as_java_does():
    parsed, utf8_ok = bytes_to_properties(b"KEYS\x01a\xffb\x02TAGS\x01t")
    assert (parsed, utf8_ok) == ({"KEYS": "a\ufffdb", "TAGS": "t"}, False)
    assert bytes_to_properties(b"") == ({}, True)


# --- which file recovery starts from: CommitLog.recoverAbnormally / recoverNormally ----------

CRASH = V4 / "crash"


def _start_base(store) -> int:
    segments = CommitLog(store / "commitlog").segments
    min_ts = read_checkpoint(store / "checkpoint").min_timestamp
    index = abnormal_start(segments, V4_RULES, min_ts)
    return segments[max(index, 0)].base_offset


def test_abnormal_recovery_starts_where_the_broker_rebuilt_a_deleted_queue_from():
    """crash/c1: the broker rebuilt the deleted CrashTopic/1 only from the files it rescanned
    (fill units before): the first real unit it rebuilt lies in the start file, the unit
    before it (pre-crash) lies before that file."""
    truth = load_truth(CRASH / "c1-delete-cq-queue-dir" / "truth.json")["truth"]
    rebuilt = [u for u in truth["consumeQueues"]["CrashTopic"]["1"]["entries"] if u[2] != FILL_SIZE]
    first_queue_offset, first_offset = rebuilt[0][0], rebuilt[0][1]
    before = load_truth(CRASH / "a-as-is" / "truth.json")["truth"]["consumeQueues"]["CrashTopic"]["1"]["entries"]
    previous_offset = before[first_queue_offset - 1][1]
    store = CRASH / "c1-delete-cq-queue-dir" / "input" / "store"
    base = _start_base(store)
    assert previous_offset < base <= first_offset
    # verify's finding names the same file, from the first store times its scan read
    (start,) = [f for f in Verify(store, VerifyOptions(jobs=1)).findings() if f.id == RECOVERY_START_FILE]
    assert start.details["commit_log_offset"] == base


def test_abnormal_recovery_from_the_first_file_when_none_matches():
    """crash-fast: every file is inside the checkpoint's 3 s window, so file 0 is rescanned and
    the flipped byte in it (e2) ends the log inside file 0, where the truth has it."""
    scenario = V4 / "crash-fast" / "e2-corrupt-body-in-first-commitlog-file"
    store = scenario / "input" / "store"
    segments = CommitLog(store / "commitlog").segments
    assert abnormal_start(segments, V4_RULES, read_checkpoint(store / "checkpoint").min_timestamp) == -1
    assert load_truth(scenario / "truth.json")["afterLoadBeforeStart"]["maxPhyOffset"] < segments[1].base_offset


def test_normal_recovery_starts_at_the_third_last_file_at_4_9():
    segments = CommitLog(CRASH / "a-as-is" / "input" / "store" / "commitlog").segments
    assert normal_start(segments, V4_RULES, 0) == len(segments) - 3


# --- the bytes at a commit log offset: CommitLog.getMessage / getData (selectMappedBuffer) ---

def test_bytes_at_each_offset_are_the_record_the_broker_stored_there():
    for name, scenario in CLEAN_SCENARIOS.items():
        with CommitLogReader.of_store(scenario / "store") as reader:
            for m in load_truth(scenario / "truth.json")["truth"]["messages"][::7]:
                offset, size = m["physicalOffset"], m["storeSize"]
                raw = reader.get_data(offset, size)
                assert len(raw) == size and int.from_bytes(raw[:4], "big") == size, (name, offset)
                message = reader.read(offset)
                assert (message.topic, message.queue_offset, message.store_timestamp) == \
                    (m["topic"], m["queueOffset"], m["storeTimestamp"]), (name, offset)
                assert reader.store_timestamp(offset, size) == (m["storeTimestamp"], None)
                assert reader.get_data(offset, size, end=offset + 8) == raw[:8]  # never past what may be read


def test_bytes_past_the_last_file_are_none():
    scenario = CLEAN_SCENARIOS["4.9.8/basic"]
    end = load_truth(scenario / "truth.json")["truth"]["commitlog"]["maxPhyOffset"]
    with CommitLogReader.of_store(scenario / "store") as reader:
        last = reader.commit_log.segments[-1]
        assert reader.get_data(last.base_offset + last.size, 16) == b""
        assert reader.get_data(end, 16) == bytes(16)  # written ahead: zeros, as the mapped file holds


# --- where the written data ends, where the last file's records end, where recovery ends it ----

def test_written_end_and_last_file_end_are_the_brokers_max_offset_of_a_clean_store():
    for name, scenario in CLEAN_SCENARIOS.items():
        expected = load_truth(scenario / "truth.json")["truth"]["commitlog"]["maxPhyOffset"]
        log = CommitLog(scenario / "store" / "commitlog")
        assert written_end(log.segments, log.mapped_file_size) == expected, name
        assert last_file_end(log.segments, log.mapped_file_size).end == expected == log.max_offset(), name


def test_a_last_file_whose_first_record_is_torn_holds_no_record_for_the_written_end(store_copy):
    """The last two files cut short, each inside a record, the last inside its first: the
    written end is one past the last whole record (in the file before), for info, verify and
    recover alike; the one answer once gave the last file's start, verify the record's end."""
    import json
    from typer.testing import CliRunner
    from rmqtool.cli.app import app

    store = store_copy(V5 / "v2-and-crc" / "store")
    messages = load_truth(V5 / "v2-and-crc" / "truth.json")["truth"]["messages"]
    files = sorted((store / "commitlog").iterdir())
    size = files[0].stat().st_size
    before, last = files[-2], files[-1]
    inside = [m for m in messages if int(before.name) <= m["physicalOffset"] < int(last.name)]
    torn = inside[len(inside) // 2]
    with open(before, "r+b") as f:
        f.truncate(torn["physicalOffset"] - int(before.name) + torn["storeSize"] // 2)
    with open(last, "r+b") as f:
        f.truncate(16)
    expected = torn["physicalOffset"]  # where the record before the torn one ends
    assert written_end(CommitLog(store / "commitlog", mapped_file_size=size).segments, size) == expected
    runner = CliRunner()
    info = json.loads(runner.invoke(app, ["info", str(store), "-f", "json"]).stdout)["commitlog"]
    found = [json.loads(line) for line in runner.invoke(app, ["verify", str(store), "-f", "jsonl"]).stdout.splitlines()]
    plan = json.loads(runner.invoke(app, ["recover", str(store), "-f", "json"]).stdout)
    assert info["written_end"] == next(f["written_end"] for f in found if f["finding"] == "commitLogEnd") == \
        plan["commit_log"]["written_end"] == expected


def test_recovered_end_is_where_the_brokers_next_start_ended_the_log():
    checked = 0
    for root in (V4 / "crash", V4 / "crash-fast", V5 / "crash5"):
        for scenario in sorted(p.parent for p in root.glob("*/truth.json")):
            truth = load_truth(scenario / "truth.json")
            if not truth.get("loadOk", True) or "afterLoadBeforeStart" not in truth:
                continue
            out = simulate(scenario / "input" / "store", Settings(), list_lost=False)
            assert out.recovered_end == truth["afterLoadBeforeStart"]["maxPhyOffset"], scenario.name
            assert out.written_end >= out.recovered_end
            checked += 1
    assert checked >= 15
