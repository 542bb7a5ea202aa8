"""rmqtool query through the CLI: modes, output rows, stderr notes and trace, exit codes."""
from __future__ import annotations

import datetime
import json
import shutil

import pytest
from typer.testing import CliRunner

from conftest import V4, V5, load_truth
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode

runner = CliRunner()
TIMEKEY = V4 / "timekey"
STORE = TIMEKEY / "store"


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def jsonl(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def no_traceback(result):
    assert "Traceback" not in result.stdout + result.stderr


def test_key_query_rows_are_dump_rows():
    truth = load_truth(TIMEKEY / "truth.json")
    q = next(q for q in truth["queryMessage"] if q["key"] == "Aa" and q["topic"] == "KeyTopic")
    r = run("query", STORE, "--key", "Aa", "--topic", "KeyTopic", "-f", "jsonl")
    assert r.exit_code == 0, r.stderr
    rows = jsonl(r.stdout)
    kept = [x["physicalOffset"] for x in q["queryMessageResults"] if x["keyOrUniqKeyActuallyEquals"]]
    assert [row["commit_log_offset"] for row in rows] == kept
    for row in rows:
        d = run("dump", "commitlog", STORE, "-f", "jsonl", "--from-offset", row["commit_log_offset"], "--limit", 1)
        assert jsonl(d.stdout) == [row]  # the same record, field for field
    assert r.stderr == ""


def _aa():
    truth = load_truth(TIMEKEY / "truth.json")
    return next(q for q in truth["queryMessage"] if q["key"] == "Aa" and q["topic"] == "KeyTopic")


def test_explain_goes_to_stderr_only():
    aa = _aa()
    collisions = sum(not r["keyOrUniqKeyActuallyEquals"] for r in aa["queryMessageResults"])
    plain = run("query", STORE, "--key", "Aa", "--topic", "KeyTopic", "-f", "json")
    explained = run("query", STORE, "--key", "Aa", "--topic", "KeyTopic", "-f", "json", "--explain")
    assert explained.exit_code == 0
    assert explained.stdout == plain.stdout
    assert "index file 20261122024332752" in explained.stderr
    assert explained.stderr.count("dropped: hash collision") == collisions > 0
    assert json.loads(explained.stdout)[0]["record"] == "message"


def test_nothing_found_exit_code_and_empty_output():
    r = run("query", STORE, "--key", "does-not-exist", "--topic", "KeyTopic", "-f", "json")
    assert r.exit_code == ExitCode.NOT_FOUND == 1
    assert json.loads(r.stdout) == []
    assert "not found" in r.stderr
    end = load_truth(TIMEKEY / "truth.json")["truth"]["commitlog"]["maxPhyOffset"]
    r = run("query", STORE, "--offset", end, "-f", "jsonl")  # the end of the data
    assert r.exit_code == 1 and r.stdout == "" and "past the end" in r.stderr
    no_traceback(r)


def test_an_offset_in_an_earlier_files_unused_end_is_not_called_past_the_data():
    """The first file's end-of-file blank: the log goes on in the next file (it was "past the
    end of the written data")."""
    doc = load_truth(V4 / "basic" / "truth.json")
    truth, size = doc["truth"], doc["messageStoreConfig"]["effectiveGetterValues"]["mappedFileSizeCommitLog"]
    first = next(m for m in truth["messages"] if m["physicalOffset"] > 0 and m["physicalOffset"] % size == 0)
    last_before = max(m["physicalOffset"] + m["storeSize"] for m in truth["messages"]
                      if m["physicalOffset"] < first["physicalOffset"])
    r = run("query", V4 / "basic" / "store", "--offset", last_before + 10, "-f", "jsonl")
    assert r.exit_code == 1 and "past the end" not in r.stderr, r.stderr
    assert f"the log goes on in {first['physicalOffset']:020d}" in r.stderr


def test_msg_id_offset_and_queue_offset():
    truth = load_truth(TIMEKEY / "truth.json")
    tm = truth["truth"]["messages"][42]
    for args in (("--msg-id", tm["msgId"]), ("--offset", tm["physicalOffset"]),
                 ("--topic", tm["topic"], "--queue", tm["queueId"], "--queue-offset", tm["queueOffset"])):
        r = run("query", STORE, *args, "-f", "json", "--body", "none")
        assert r.exit_code == 0, r.stderr
        (row,) = json.loads(r.stdout)
        assert row["commit_log_offset"] == tm["physicalOffset"] and row["msg_id"] == tm["msgId"]
        assert row["body"] is None


def test_time_lookup_prints_one_object():
    truth = load_truth(TIMEKEY / "truth.json")
    case = next(c for c in truth["getOffsetInQueueByTime"] if c["topic"] == "TimeTopic" and c["queueId"] == 0
                and c["label"] == "batch 1 +1ms")
    ts = case["timestamp"]
    r = run("query", STORE, "--topic", "TimeTopic", "--queue", 0, "--time", ts, "-f", "json")
    assert r.exit_code == 0
    assert json.loads(r.stdout) == {"topic": "TimeTopic", "queue_id": 0, "time": ts,
                                    "queue_offset": case["getOffsetInQueueByTime"], "store_timestamp": ts}
    stored = {m["physicalOffset"]: m["storeTimestamp"] for m in truth["truth"]["messages"]}
    units = [e[0] for e in truth["truth"]["consumeQueues"]["TimeTopic"]["0"]["entries"]
             if stored[e[1]] >= ts]
    iso = datetime.datetime.fromtimestamp(ts / 1000, datetime.timezone.utc).isoformat(timespec="milliseconds")
    r = run("query", STORE, "--topic", "TimeTopic", "--queue", 0, "--time", iso, "--exact", "-f", "jsonl")
    assert jsonl(r.stdout)[0]["queue_offset"] == units[0] != case["getOffsetInQueueByTime"]
    r = run("query", STORE, "--topic", "TimeTopic", "--queue", 0, "--time", max(stored.values()) + 1, "--exact",
            "-f", "jsonl")
    assert r.exit_code == 1 and jsonl(r.stdout)[0]["store_timestamp"] is None
    r = run("query", STORE, "--topic", "NoSuchTopic", "--queue", 0, "--time", 1, "-f", "jsonl")
    assert r.exit_code == 1 and jsonl(r.stdout)[0]["queue_offset"] == 0 and "broker answers 0" in r.stderr


@pytest.mark.parametrize("time", [str(1 << 63), str(-(1 << 63) - 1), "99999999999999999999"])
def test_a_time_past_a_java_long_is_a_usage_error_naming_its_option(time):
    """Every store time is a Java long: one past it names nothing stored (it was answered, exit 0)."""
    for args in (["query", STORE, "--topic", "TimeTopic", "--queue", 0, "--time", time],
                 ["dump", "commitlog", STORE, "--begin-time", time]):
        r = run(*args)
        option = "--time" if args[0] == "query" else "--begin-time"
        assert r.exit_code == 2 and f"{option}: {time!r}" in r.stderr, (args, r.stderr)


def test_table_output():
    r = run("query", STORE, "--key", "hot", "--topic", "OtherTopic")
    assert r.exit_code == 0
    assert "store_time" in r.stdout and "OtherTopic" in r.stdout


@pytest.mark.parametrize("args", [
    (),
    ("--key", "a", "--offset", 1),
    ("--queue-offset", 1),
    ("--time", 1, "--topic", "TimeTopic"),
    ("--key", "a", "--queue", 1),
    ("--key", "a", "--exact"),
    ("--offset", 1, "--max", 3),
    ("--msg-id", "C000020A00002A9F0000000000000000", "--topic", "T"),
    ("--key", "a", "--no-index", "--index-only"),
    ("--msg-id", "zz"),
    ("--key", "a", "--begin-time", "yesterday"),
])
def test_usage_errors_exit_2(args):
    r = run("query", STORE, *args)
    assert r.exit_code == ExitCode.USAGE == 2, (args, r.stdout, r.stderr)
    assert r.stderr.startswith("rmqtool") and ": error: " in r.stderr and len(r.stderr.splitlines()) == 1
    no_traceback(r)


def test_not_a_store():
    r = run("query", TIMEKEY / "store" / "commitlog", "--key", "a")
    assert r.exit_code == ExitCode.BAD_INPUT
    r = run("query", TIMEKEY / "nope", "--key", "a")
    assert r.exit_code == ExitCode.OPERATIONAL
    no_traceback(r)


def test_index_removed_fallback_says_so(store_copy):
    store = store_copy(STORE)
    shutil.rmtree(store / "index")
    r = run("query", store, "--key", "Aa", "--topic", "KeyTopic", "-f", "jsonl")
    assert r.exit_code == 0
    kept = [x["physicalOffset"] for x in _aa()["queryMessageResults"] if x["keyOrUniqKeyActuallyEquals"]]
    assert [row["commit_log_offset"] for row in jsonl(r.stdout)] == kept
    assert "no readable index files" in r.stderr and "scanning the whole commit log" in r.stderr
    r = run("query", store, "--key", "Aa", "--topic", "KeyTopic", "-f", "jsonl", "--index-only")
    assert r.exit_code == 1


def test_no_index_flag_and_begin_end_window():
    r = run("query", STORE, "--key", "hot", "--topic", "KeyTopic", "-f", "jsonl", "--no-index",
            "--begin-time", 1700000403000, "--end-time", 1700000406000)
    assert r.exit_code == 0 and "--no-index" in r.stderr
    rows = jsonl(r.stdout)
    assert rows and all(1700000403000 <= row["store_timestamp"] <= 1700000406000 for row in rows)


def test_crash_store_without_index_dir():
    """crash/d input: the index directory is gone; the query still finds every message."""
    variant = V4 / "crash" / "d-remove-index-dir"
    truth = load_truth(variant / "truth.json")
    q = truth["queryMessage"][0]
    r = run("query", variant / "input" / "store", "--key", q["key"], "--topic", q["topic"], "-f", "jsonl",
            "--max", 1000)
    assert r.exit_code == 0
    expected = [m["physicalOffset"] for m in truth["truth"]["messages"]
                if m["topic"] == q["topic"] and q["key"] in (m.get("keys") or "").split(" ")]
    assert [row["commit_log_offset"] for row in jsonl(r.stdout)] == expected
    assert len(expected) > q["maxNum"]
    assert "scanning the whole commit log" in r.stderr


def test_uniq_key_mode_v5_long_topic():
    truth = load_truth(V5 / "v2-and-crc" / "truth.json")
    tm = next(m for m in truth["truth"]["messages"] if m["topic"] == truth["longTopic"] and m.get("uniqKey"))
    r = run("query", V5 / "v2-and-crc" / "store", "--uniq-key", tm["uniqKey"], "-f", "jsonl")
    assert r.exit_code == 0, r.stderr
    assert [row["commit_log_offset"] for row in jsonl(r.stdout)] == [tm["physicalOffset"]]
