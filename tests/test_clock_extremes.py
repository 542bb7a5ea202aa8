"""Store clocks at the ends of a long: what verify says of them is what the data shows."""
from __future__ import annotations

import json

from helpers import cli_runner
from rmqtool.cli.app import app

runner = cli_runner()
LONG_MAX, LONG_MIN = (1 << 63) - 1, -(1 << 63)


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_a_timestamp_that_goes_back_by_more_than_a_long_holds_is_said_as_it_is(tmp_path):
    """The difference was taken in int64 and wrapped: "-1 ms before", and a RuntimeWarning."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"topic": "T", "queue_id": 0, "body": "aGk=", "properties": {},
                                        "store_timestamp": ts, "born_timestamp": 0}) + "\n"
                            for ts in (LONG_MAX, LONG_MIN)))
    store = tmp_path / "s"
    r = _run("append", store, "--create", "--commitlog-size", 65536, "--from-jsonl", rows, "--keep-store-timestamp")
    assert r.exit_code == 0, r.output
    v = _run("verify", store, "--only", "commitlog", "-f", "jsonl")
    (back,) = [json.loads(line) for line in v.stdout.splitlines() if '"storeTimestampBackwards"' in line]
    assert f"is {LONG_MAX - LONG_MIN} ms before" in back["message"] and "RuntimeWarning" not in v.stderr


def test_a_checkpoint_time_never_written_is_not_ahead_of_a_store_before_1970(tmp_path):
    """physicMsgTimestamp 0 means no flush was ever recorded, not a flush at 1970."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"topic": "T", "queue_id": 0, "body": "aGk=", "properties": {},
                                "store_timestamp": -144719998987, "born_timestamp": 0}) + "\n")
    store = tmp_path / "s"
    assert _run("append", store, "--create", "--commitlog-size", 65536, "--from-jsonl", rows,
                "--keep-store-timestamp").exit_code == 0
    cp = store / "checkpoint"
    cp.write_bytes(bytes(cp.stat().st_size))  # every time 0: nothing recorded
    v = _run("verify", store, "-f", "jsonl")
    assert '"checkpointAheadOfData"' not in v.stdout, v.stdout


def test_query_by_time_answers_a_message_stored_before_1970_as_readable(tmp_path):
    """A negative store timestamp is a readable message's (the broker answers queue offset 0 for
    a time below 0): query gave the offset with "holds no readable message" and exit 1."""
    stored = -5000
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"topic": "R", "queue_id": 0, "body": "eA==", "store_timestamp": stored}) + "\n")
    store = tmp_path / "s"
    assert _run("append", store, "--create", "--commitlog-size", 65536, "--cq-size", 200, "--index-slots", 10,
                "--index-entries", 40, "--from-jsonl", rows, "--keep-store-timestamp").exit_code == 0
    q = _run("query", store, "-t", "R", "-q", 0, f"--time={stored}", "-f", "json")
    assert q.exit_code == 0 and "no readable message" not in q.stderr, q.output
    assert json.loads(q.stdout)["store_timestamp"] == stored
