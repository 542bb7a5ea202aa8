"""rmqtool offsets: committed consumer offsets against the queues, from fixtures/config/.

Queue ranges and store timestamps come from the base store's truth.json (read back
through the 4.9.8 broker's APIs); committed offsets from the config files themselves.
"""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, load_truth
from helpers import REDISPATCHED, crash_store_with_offsets
from rmqtool.cli.app import app
from rmqtool.findings import CONSUMER_OFFSET_ABOVE_MAX, CONSUMER_OFFSET_FOR_MISSING_QUEUE, Severity
from rmqtool.formats.config import consumer_offsets as parse_offset_table, topic_group
from rmqtool.formats.config import dumps_fastjson, loads_fastjson
from rmqtool.store.consumer_offsets import (FOUND, NO_MESSAGE_IN_QUEUE, OFFSET_OVERFLOW_BADLY, OFFSET_OVERFLOW_ONE,
                                     OFFSET_TOO_SMALL, consumer_offsets, pull_outcome)

CONFIG_FIXTURES = FIXTURES / "config"
VARIANTS = ("consumers", "bak-fallback", "null-table", "out-of-range", "removed-topic")
BASE = FIXTURES / "rocketmq-4.9.8" / "crash" / "c4-delete-first-cq-file"
runner = CliRunner()


def store_of(variant: str) -> pathlib.Path:
    return CONFIG_FIXTURES / variant / "store"


def truth() -> dict:
    return load_truth(BASE / "truth.json")


def truth_queue(topic: str, queue_id: int) -> dict | None:
    return truth()["truth"]["consumeQueues"].get(topic, {}).get(str(queue_id))


def truth_store_timestamp(topic: str, queue_id: int, queue_offset: int) -> int:
    """The store timestamp of the message a queue offset points to, from the broker's truth."""
    entries = {e[0]: e[1] for e in truth_queue(topic, queue_id)["entries"]}
    by_offset = {m["physicalOffset"]: m["storeTimestamp"] for m in truth()["truth"]["messages"]}
    return by_offset[entries[queue_offset]]


def committed_in(path: pathlib.Path) -> dict[tuple[str, str, int], int]:
    """(group, topic, queue id) -> committed offset, straight from a config file."""
    doc = loads_fastjson(path.read_text(encoding="utf-8"))
    return {(group, topic, qid): offset for key, queues in parse_offset_table(doc).items()
            for topic, group in [topic_group(key)] for qid, offset in queues.items()}


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# --- the fixtures are what their README says ----------------------------------------------

def _generator():
    spec = importlib.util.spec_from_file_location("make_fixtures", CONFIG_FIXTURES / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fixture_files_are_what_the_generator_writes():
    for variant, files in _generator().variants().items():
        config = store_of(variant) / "config"
        assert sorted(p.name for p in config.iterdir()) == sorted(files)
        for name, data in files.items():
            assert (config / name).read_bytes() == data, f"{variant}/{name}"


@pytest.mark.parametrize("variant", VARIANTS)
def test_fixture_store_links_to_the_broker_store(variant):
    store = store_of(variant)
    for entry in ("commitlog", "consumequeue", "index", "checkpoint", "lock"):
        assert (store / entry).is_symlink()
        assert (store / entry).resolve() == (BASE / "expected" / "store" / entry).resolve()
    assert (CONFIG_FIXTURES / variant / "truth.json").resolve() == (BASE / "truth.json").resolve()


def test_config_files_are_fastjson_pretty_output():
    config = store_of("consumers") / "config"
    text = (config / "consumerOffset.json").read_text(encoding="utf-8")
    assert text.startswith('{\n\t"offsetTable":{\n\t\t"')
    assert '"CrashTopic@order_group":{0:240,1:310\n\t\t}' in text  # unquoted Integer keys, no newline before
    assert not text.endswith("\n")  # MixAll.string2File writes the string as it is
    for path in config.iterdir():
        text = path.read_text(encoding="utf-8")
        assert dumps_fastjson(loads_fastjson(text)) == text, path.name
    topics = loads_fastjson((config / "topics.json").read_text(encoding="utf-8"))
    assert list(topics) == ["dataVersion", "topicConfigTable"]  # fastjson sorts bean fields
    crash = topics["topicConfigTable"]["CrashTopic"]
    assert list(crash) == sorted(crash) and crash["readQueueNums"] == 2
    bak = committed_in(config / "consumerOffset.json.bak")
    main = committed_in(config / "consumerOffset.json")
    assert bak.keys() == main.keys() and all(bak[k] <= main[k] for k in main)  # the persist before


# --- the broker's pull rules ----------------------------------------------------------------

def test_pull_outcome_matches_the_broker_truth():
    """truth.json records getMessage at each queue's max offset: status and nextBeginOffset."""
    seen = set()
    for path in sorted(FIXTURES.glob("rocketmq-*/**/truth.json")):
        for topic, queues in load_truth(path).get("truth", {}).get("consumeQueues", {}).items():
            for q in queues.values():
                for pull in q.get("getMessageNonFoundStatuses", []):
                    status, next_offset, _ = pull_outcome(pull["requestOffset"], q["apiMinOffsetInQueue"],
                                                          q["apiMaxOffsetInQueue"])
                    assert (status, next_offset) == (pull["status"], pull["nextBeginOffset"]), (path, topic)
                    seen.add(status)
    assert seen == {NO_MESSAGE_IN_QUEUE, OFFSET_OVERFLOW_ONE}


def test_pull_outcome_out_of_range():
    assert pull_outcome(20, 50, 310)[:2] == (OFFSET_TOO_SMALL, 50)
    assert pull_outcome(400, 0, 310)[:2] == (OFFSET_OVERFLOW_BADLY, 310)
    assert pull_outcome(49, 50, 310)[2] == "OFFSET_TOO_SMALL: PULL_OFFSET_MOVED, the next pull starts at min offset 50"
    assert pull_outcome(7, 0, 0)[:2] == (NO_MESSAGE_IN_QUEUE, 0)
    assert "PULL_OFFSET_MOVED" in pull_outcome(7, 0, 0)[2] and "PULL_OFFSET_MOVED" not in pull_outcome(0, 0, 0)[2]
    assert pull_outcome(50, 50, 310)[:2] == (FOUND, 50)


# --- the library against truth -----------------------------------------------------------

def _check_against_truth(rows, committed: dict):
    assert {(r.group, r.topic, r.queue_id): r.committed_offset for r in rows} == committed
    for r in rows:
        q = truth_queue(r.topic, r.queue_id)
        if q is None or not q["entries"]:
            assert (r.min_offset, r.max_offset, r.newest_store_timestamp) == (None, None, None)
            continue
        low, high = q["apiMinOffsetInQueue"], q["apiMaxOffsetInQueue"]
        assert (r.min_offset, r.max_offset) == (low, high)
        assert r.lag_messages == max(high - r.committed_offset, 0)
        assert r.newest_store_timestamp == truth_store_timestamp(r.topic, r.queue_id, high - 1)
        start = max(r.committed_offset, low)
        if start < high:
            assert r.next_store_timestamp == truth_store_timestamp(r.topic, r.queue_id, start)
            assert r.lag_ms == r.newest_store_timestamp - r.next_store_timestamp
        else:
            assert r.next_store_timestamp is None and r.lag_ms is None


def test_consumers_against_truth():
    result = consumer_offsets(store_of("consumers"))
    config = store_of("consumers") / "config" / "consumerOffset.json"
    assert result.source_path == str(config) and result.findings == []
    _check_against_truth(result.rows, committed_in(config))
    by_key = {(r.group, r.topic, r.queue_id): r for r in result.rows}
    assert by_key[("order_group", "CrashTopic", 0)].pull_status == FOUND
    assert by_key[("order_group", "CrashTopic", 0)].lag_ms > 0
    caught_up = by_key[("order_group", "CrashTopic", 1)]
    assert caught_up.pull_status == OFFSET_OVERFLOW_ONE and caught_up.lag_messages == 0
    retry = by_key[("order_group", "%RETRY%order_group", 0)]
    assert retry.pull_status == NO_MESSAGE_IN_QUEUE and retry.next_pull_offset == 0
    assert [(r.group, r.topic, r.queue_id) for r in result.rows] == sorted(by_key)


def test_filters_by_group_and_topic():
    store = store_of("consumers")
    everything = consumer_offsets(store).rows
    crash = consumer_offsets(store, topic="CrashTopic").rows
    assert crash == [r for r in everything if r.topic == "CrashTopic"] and {r.group for r in crash} == {
        "order_group", "report_group"}
    assert consumer_offsets(store, group="audit_group").rows == [r for r in everything if r.group == "audit_group"]
    assert consumer_offsets(store, group="audit_group", topic="CrashTopic").rows == []


def test_out_of_range_is_flagged_as_the_broker_treats_it():
    store = store_of("out-of-range")
    config = store / "config" / "consumerOffset.json"
    result = consumer_offsets(store)
    committed = committed_in(config)
    _check_against_truth(result.rows, committed)
    low = truth_queue("CrashTopic", 0)["apiMinOffsetInQueue"]
    high = truth_queue("CrashTopic", 1)["apiMaxOffsetInQueue"]
    by_key = {(r.group, r.topic, r.queue_id): r for r in result.rows}
    below = by_key[("order_group", "CrashTopic", 0)]
    assert committed[("order_group", "CrashTopic", 0)] < low
    assert (below.pull_status, below.next_pull_offset) == (OFFSET_TOO_SMALL, low)
    assert below.status == f"OFFSET_TOO_SMALL: PULL_OFFSET_MOVED, the next pull starts at min offset {low}"
    above = by_key[("order_group", "CrashTopic", 1)]
    assert committed[("order_group", "CrashTopic", 1)] > high
    assert (above.pull_status, above.next_pull_offset, above.lag_messages) == (OFFSET_OVERFLOW_BADLY, high, 0)
    assert by_key[("audit_group", "OtherTopic", 0)].pull_status == OFFSET_OVERFLOW_ONE
    found = {(f.id, f.severity) for f in result.findings}
    assert found == {("consumerOffsetBelowMin", Severity.WARNING), ("consumerOffsetAboveMax", Severity.ERROR)}
    below_finding = next(f for f in result.findings if f.id == "consumerOffsetBelowMin")
    assert below_finding.path == str(config)
    assert f"{low - committed[('order_group', 'CrashTopic', 0)]} messages were deleted" in below_finding.message


def test_truncated_main_file_falls_back_to_bak():
    store = store_of("bak-fallback")
    result = consumer_offsets(store)
    bak = store / "config" / "consumerOffset.json.bak"
    assert result.source_path == str(bak) and result.config.source == "bak"
    _check_against_truth(result.rows, committed_in(bak))
    assert [f.id for f in result.findings] == ["configUnparseable", "configBakUsed"]


def test_null_offset_table_is_loaded_as_the_broker_loads_it():
    result = consumer_offsets(store_of("null-table"))
    assert result.rows == [] and result.config.source == "main"
    assert [(f.id, f.severity) for f in result.findings] == [("consumerOffsetTableInvalid", Severity.ERROR)]
    assert "offsetTable is null" in result.findings[0].message


def test_offsets_for_a_removed_topic():
    store = store_of("removed-topic")
    result = consumer_offsets(store)
    committed = committed_in(store / "config" / "consumerOffset.json")
    _check_against_truth(result.rows, committed)
    legacy = [r for r in result.rows if r.topic == "LegacyTopic"]
    assert legacy and all(r.pull_status == NO_MESSAGE_IN_QUEUE and r.next_pull_offset == 0 for r in legacy)
    flagged = sorted(f.message.split(":")[0] for f in result.findings if f.id == "consumerOffsetForMissingQueue")
    assert flagged == sorted(f"LegacyTopic@legacy_group queue {r.queue_id}" for r in legacy if r.committed_offset > 0)
    assert all("topics.json has no such topic" in f.message for f in result.findings)
    assert {f.severity for f in result.findings} == {Severity.WARNING}


def _store_with_config(tmp_path, files: dict[str, str]) -> pathlib.Path:
    store = tmp_path / "store"
    store.mkdir()
    for entry in ("commitlog", "consumequeue"):
        os.symlink(BASE / "expected" / "store" / entry, store / entry)
    (store / "config").mkdir()
    for name, text in files.items():
        (store / "config" / name).write_text(text, encoding="utf-8")
    return store


def test_an_entry_the_broker_cannot_cast_makes_it_load_the_bak(tmp_path):
    """fastjson casts each entry into Map<Integer, Long>: one it cannot cast ("x", a number past
    a Long) throws, the whole decode with it, and ConfigManager.load reads the .bak. Keys
    without '@' load (no lookup finds them); quoted numbers and floats are cast."""
    main = dumps_fastjson({"offsetTable": {"CrashTopic@g": {0: 300, 1: "x"}}})
    bak = dumps_fastjson({"offsetTable": {"CrashTopic@g": {0: 250}, "OtherTopic@g": {"0": "12"},
                                          "OtherTopic@h": {0: -1}, "noSeparator": {0: 3}}})
    store = _store_with_config(tmp_path, {"consumerOffset.json": main, "consumerOffset.json.bak": bak})
    result = consumer_offsets(store)
    assert result.config.source == "bak"
    assert [(r.topic, r.group, r.queue_id, r.committed_offset) for r in result.rows] == [
        ("CrashTopic", "g", 0, 250), ("OtherTopic", "g", 0, 12), ("OtherTopic", "h", 0, -1)]
    assert [(f.id, f.consequence) for f in result.findings] == [
        ("configUnparseable", "rebuilt"), ("configBakUsed", "rebuilt"), ("consumerOffsetKeyInvalid", "none")]
    none = result.rows[-1]
    assert none.pull_status is None and none.lag_messages is None and "ConsumeFromWhere" in none.status

    # past a Long, with no .bak: loadBak finds nothing, and the broker starts with no offsets
    (store / "config" / "consumerOffset.json.bak").unlink()
    (store / "config" / "consumerOffset.json").write_text('{"offsetTable":{"CrashTopic@g":{0:9223372036854775808}}}')
    result = consumer_offsets(store)
    assert result.rows == [] and result.config.source is None
    assert [(f.id, f.consequence) for f in result.findings] == [("configUnparseable", "progressLost")]
    assert "is not a Long" in result.findings[0].message
    r = run("offsets", store)
    assert r.exit_code == 3 and "configUnparseable" in r.stderr


def test_main_and_bak_both_broken_is_a_finding_not_a_crash(tmp_path):
    store = _store_with_config(tmp_path, {"consumerOffset.json": '{"offsetTable":{', "consumerOffset.json.bak": "{,"})
    result = consumer_offsets(store)
    assert result.rows == [] and result.config is None
    assert [f.id for f in result.findings] == ["configUnparseable"]
    r = run("offsets", store, "--format", "jsonl")
    assert r.exit_code == 3 and r.stdout == "" and "configUnparseable" in r.stderr


def test_store_without_commitlog_still_gives_queue_ranges(tmp_path):
    """A partial copy (consumequeue/ and config/ only): ranges and lag, no store times."""
    store = _store_with_config(tmp_path, {"consumerOffset.json": dumps_fastjson({"offsetTable": {
        "CrashTopic@g": {0: 240}}})})
    (store / "commitlog").unlink()
    [row] = consumer_offsets(store).rows
    q = truth_queue("CrashTopic", 0)
    assert (row.min_offset, row.max_offset) == (q["apiMinOffsetInQueue"], q["apiMaxOffsetInQueue"])
    assert row.lag_messages == q["apiMaxOffsetInQueue"] - 240 and row.pull_status == FOUND
    assert (row.next_store_timestamp, row.newest_store_timestamp, row.lag_ms) == (None, None, None)


def test_store_without_config_has_no_offsets():
    result = consumer_offsets(FIXTURES / "rocketmq-4.9.8" / "basic" / "store")
    assert result.rows == [] and result.findings == [] and result.source_path is None


# --- the command ---------------------------------------------------------------------------

@pytest.mark.parametrize("variant,code", [("consumers", 0), ("bak-fallback", 3), ("null-table", 3),
                                          ("out-of-range", 3), ("removed-topic", 0)])
def test_cli_rows_and_exit_codes(variant, code):
    r = run("offsets", store_of(variant), "--format", "jsonl")
    assert r.exit_code == code, r.stderr
    rows = jsonl(r.stdout)
    assert rows == [row.record() for row in consumer_offsets(store_of(variant)).rows]
    findings = consumer_offsets(store_of(variant)).findings
    assert r.stderr.splitlines() == [f.one_line() for f in findings]  # findings only on stderr
    for row in rows:
        assert list(row)[:11] == ["group", "topic", "queue_id", "committed_offset", "min_offset", "max_offset",
                                  "lag_messages", "lag_ms", "next_store_timestamp", "newest_store_timestamp",
                                  "status"]


def test_cli_json_table_and_filters():
    store = store_of("out-of-range")
    as_json = json.loads(run("offsets", store, "--format", "json", "-g", "order_group", "-t", "CrashTopic").stdout)
    assert [(r["queue_id"], r["pull_status"]) for r in as_json] == [(0, OFFSET_TOO_SMALL), (1, OFFSET_OVERFLOW_BADLY)]
    r = run("offsets", store, "--group", "audit_group", "--topic", "OtherTopic", "--format", "jsonl")
    assert r.exit_code == 0 and [row["pull_status"] for row in jsonl(r.stdout)] == [OFFSET_OVERFLOW_ONE]
    r = run("offsets", store, "--wide")  # every column: at 80 the status is cut
    assert r.exit_code == 3
    assert "OFFSET_TOO_SMALL" in r.stdout and "2026-" in r.stdout  # store times in human time
    assert "consumerOffsetAboveMax" in r.stderr and "consumerOffsetAboveMax" not in r.stdout


@pytest.mark.parametrize("columns", ["80", "120"])
def test_the_status_column_keeps_each_pull_status_whole(columns):
    """The table's status (README: at 80 columns too) cuts only the words after the
    GetMessageStatus: OFFSET_OVERFLOW_ONE (caught up) and OFFSET_OVERFLOW_BADLY (an error) never
    print alike, nor NO_MESSAGE_IN_QUEUE and OFFSET_TOO_SMALL cut."""
    store = store_of("out-of-range")
    rows = jsonl(run("offsets", store, "--format", "jsonl").stdout)
    assert {OFFSET_OVERFLOW_ONE, OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL, NO_MESSAGE_IN_QUEUE} <= {
        r["pull_status"] for r in rows}
    lines = CliRunner().invoke(app, ["offsets", str(store)], env={"COLUMNS": columns}).stdout.splitlines()
    shown = [line[lines[0].index("status"):] for line in lines[2:]]  # the last column, left-aligned
    assert len(shown) == len(rows)
    for row, cell in zip(rows, shown):
        assert cell == row["status"] or cell[:len(row["pull_status"]) + 1] in (row["pull_status"] + ":",
                                                                               row["pull_status"] + "…"), cell


def test_cli_errors():
    r = run("offsets", FIXTURES / "rocketmq-4.9.8" / "basic" / "store", "--format", "jsonl")
    assert r.exit_code == 0 and r.stdout == "" and "no consumerOffset.json" in r.stderr
    r = run("offsets", CONFIG_FIXTURES)
    assert r.exit_code == 4 and r.stdout == "" and r.stderr.startswith("rmqtool: error: ")
    r = run("offsets", CONFIG_FIXTURES / "no-such-store")
    assert r.exit_code == 8 and r.stderr.count("\n") == 1


def test_jsonl_through_a_pipe():
    """As a script reads it: `rmqtool offsets STORE --format jsonl | jq ...`."""
    out = subprocess.run([sys.executable, "-m", "rmqtool", "offsets", str(store_of("out-of-range")),
                          "--format", "jsonl"], capture_output=True, text=True, check=False)
    assert out.returncode == 3
    behind = [row for row in map(json.loads, out.stdout.splitlines()) if row["pull_status"] == OFFSET_TOO_SMALL]
    assert [(row["topic"], row["queue_id"], row["next_pull_offset"]) for row in behind] == [
        ("CrashTopic", 0, truth_queue("CrashTopic", 0)["apiMinOffsetInQueue"])]


def test_offsets_rows_name_the_queue_range_as_info_does():
    import json

    from typer.testing import CliRunner

    from rmqtool.cli.app import app

    store = FIXTURES / "config" / "consumers" / "store"
    rows = [json.loads(line) for line in CliRunner().invoke(app, ["offsets", str(store), "-f", "jsonl"]).stdout.splitlines()]
    info = json.loads(CliRunner().invoke(app, ["info", str(store), "-f", "json"]).stdout)
    ranges = {(q["topic"], q["queue_id"]): (q["min_queue_offset"], q["max_queue_offset"]) for q in info["consume_queues"]}
    assert rows
    for r in rows:
        assert (r["min_offset"], r["max_offset"]) == (r["min_queue_offset"], r["max_queue_offset"])  # old names kept
        if (r["topic"], r["queue_id"]) in ranges:
            assert (r["min_queue_offset"], r["max_queue_offset"]) == ranges[(r["topic"], r["queue_id"])]


def test_offsets_and_a_reset_take_the_queues_as_the_next_start_cuts_them(tmp_path):
    """A body CRC that fails after the recovery's start file: the broker's recovery cuts the
    log there and its load cuts the queues (info shows them so). offsets showed them uncut, and
    `offsets reset --to-latest` set offsets past what the broker would hold."""
    from helpers import writable_copy
    store = writable_copy(store_of("consumers"), tmp_path / "store")  # the links followed: files of its own
    messages = sorted(truth()["truth"]["messages"], key=lambda m: m["physicalOffset"])
    victim = messages[-30]  # in the last file: the recovery walks it
    base = max(int(p.name) for p in (store / "commitlog").iterdir() if int(p.name) <= victim["physicalOffset"])
    with open(store / "commitlog" / f"{base:020d}", "r+b") as f:
        f.seek(victim["physicalOffset"] - base + 8)  # totalSize, magicCode, then bodyCRC
        crc = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([crc[0] ^ 0xFF]))
    (store / "abort").touch()  # a crash: the start is simulated (info's reason), its walk checks CRCs
    cut = victim["physicalOffset"]
    expected = {}
    for m in messages:
        key = (m["topic"], m["queueId"])
        if m["physicalOffset"] >= cut and key not in expected:
            expected[key] = m["queueOffset"]
    info = {(q["topic"], q["queue_id"]): q["max_queue_offset"]
            for q in json.loads(run("info", store, "-f", "json").stdout)["consume_queues"]}
    rows = [r for r in jsonl(run("offsets", store, "-f", "jsonl").stdout) if r["max_queue_offset"] is not None]
    assert rows and any((r["topic"], r["queue_id"]) in expected for r in rows)
    for r in rows:
        key = (r["topic"], r["queue_id"])
        assert r["max_queue_offset"] == info[key] == expected.get(key, info[key]), key
    # verify says of the committed offsets what offsets says (it read them against uncut queues)
    said = [line for line in run("offsets", store).stderr.splitlines() if "consumerOffsetAboveMax" in line]
    found = [f for f in jsonl(run("verify", store, "-f", "jsonl").stdout) if f["finding"] == "consumerOffsetAboveMax"]
    assert said and len(said) == len(found) and all(any(f["message"] in line for line in said) for f in found)
    group, topic = next((r["group"], r["topic"]) for r in rows if (r["topic"], r["queue_id"]) in expected)
    plan = jsonl(run("offsets", "reset", store, "-g", group, "-t", topic, "--to-latest", "-f", "jsonl").stdout)
    assert plan and all(p["new_offset"] == expected.get((p["topic"], p["queue_id"]), info[(p["topic"], p["queue_id"])])
                        for p in plan)


def test_a_partial_copy_without_commitlog_gives_its_queues_uncut(tmp_path):
    """No commitlog/ at all (config and queues copied for a look): the queues as their files
    give them, where a commitlog/ holding no file is one the start destroys them in."""
    from helpers import writable_copy
    store = writable_copy(store_of("consumers"), tmp_path / "store")
    shutil.rmtree(store / "commitlog")
    rows = [r for r in jsonl(run("offsets", store, "-f", "jsonl").stdout) if r["max_queue_offset"] is not None]
    assert rows and all(r["max_queue_offset"] == truth_queue(r["topic"], r["queue_id"])["maxOffset"] for r in rows)
    (store / "commitlog").mkdir()
    rows = [r for r in jsonl(run("offsets", store, "-f", "jsonl").stdout) if r["max_queue_offset"] is not None]
    assert rows and all(r["max_queue_offset"] == r["min_queue_offset"] for r in rows)  # every queue empty


@pytest.mark.parametrize("scenario, queue_id", REDISPATCHED)
def test_verify_judges_committed_offsets_against_the_queue_the_next_start_leaves(tmp_path, scenario, queue_id):
    """The crash fixtures whose next start dispatches a lost queue file (c2) or directory (c1)
    back, with an offset inside what the engine's start serves again: verify gave
    consumerOffsetAboveMax (an error, exit 3) for c2 and consumerOffsetForMissingQueue for c1."""
    high = crash_queue(scenario, queue_id)["apiMaxOffsetInQueue"]
    store = crash_store_with_offsets(tmp_path, scenario, queue_id, high - 5)
    found = jsonl(run("verify", store, "-f", "jsonl").stdout)
    assert found and not [f for f in found if f["finding"] in (CONSUMER_OFFSET_ABOVE_MAX,
                                                               CONSUMER_OFFSET_FOR_MISSING_QUEUE)]


def crash_queue(scenario: str, queue_id: int) -> dict:
    """CrashTopic's queue as the engine's start left it (its API's min and max, its units)."""
    truth = load_truth(FIXTURES / "rocketmq-4.9.8" / "crash" / scenario / "truth.json")["truth"]
    return truth["consumeQueues"]["CrashTopic"][str(queue_id)]


@pytest.mark.parametrize("scenario, queue_id", REDISPATCHED)
def test_offsets_show_the_queue_the_next_start_leaves(tmp_path, scenario, queue_id):
    """The same stores: offsets shows the queue's range as recover plans it and the engine's
    API answered, the lag to it and a pull that finds messages (it showed c2's queue ending at
    300, OFFSET_OVERFLOW_BADLY and exit 3, and c1's as none); `offsets reset --to-latest`
    moves to the engine's max (it moved c2's group to 300 and c1's to 0, as on an empty queue)."""
    q = crash_queue(scenario, queue_id)
    low, high = q["apiMinOffsetInQueue"], q["apiMaxOffsetInQueue"]
    store = crash_store_with_offsets(tmp_path, scenario, queue_id, high - 5)
    r = run("offsets", store, "-f", "jsonl")
    (row,) = jsonl(r.stdout)
    planned = json.loads(run("recover", store, "-f", "json").stdout)["queues"][f"CrashTopic/{queue_id}"]
    assert (row["min_queue_offset"], row["max_queue_offset"]) == (planned["min_offset"], planned["max_offset"]) \
        == (low, high)
    assert (r.exit_code, row["lag_messages"], row["pull_status"]) == (0, 5, FOUND)
    (reset,) = jsonl(run("offsets", "reset", store, "-g", "g1", "-t", "CrashTopic", "--to-latest", "-f", "jsonl").stdout)
    assert (reset["new_offset"], reset["max_queue_offset"]) == (high, high)
