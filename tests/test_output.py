"""The output sink and the summaries: JSON Lines and a streamed JSON array agree with the
broker's truth, pipes and broken pipes, dump --stats, rmqtool findings, progress by bytes."""
from __future__ import annotations

import collections
import io
import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import REPO, V4, V5, load_truth
from rmqtool.cli.app import app
from rmqtool.findings import OPERATOR_ACTIONS, REGISTRY
from rmqtool.inspect import commitlog_dump
from rmqtool.inspect.commitlog_dump import CommitLogDump
from rmqtool.report.sink import Sink

STORE = V4 / "basic" / "store"
TRUTH = V4 / "basic" / "truth.json"
E1 = V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file"


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def subprocess_env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="120")


# ---- JSON Lines and JSON ----

def test_jsonl_and_json_give_the_same_rows_as_the_broker_stored():
    messages = load_truth(TRUTH)["truth"]["messages"]
    r = run("dump", "commitlog", STORE, "-f", "jsonl", "--body", "none")
    assert r.exit_code == 0, r.stderr
    rows = jsonl(r.stdout)
    assert [(x["commit_log_offset"], x["store_size"], x["topic"], x["queue_id"], x["queue_offset"],
             x["store_timestamp"], x["msg_id"], x["keys"], x["tags"]) for x in rows] == [
        (m["physicalOffset"], m["storeSize"], m["topic"], m["queueId"], m["queueOffset"], m["storeTimestamp"],
         m["msgId"], m["keys"].split() if m["keys"] else [], m["tags"]) for m in messages]
    r = run("dump", "commitlog", STORE, "-f", "json", "--body", "none")
    assert r.exit_code == 0 and json.loads(r.stdout) == rows


def test_json_is_streamed_not_held():
    """Each row goes out before the next is asked for: the stream holds the first row
    while the source has not been read to its end."""
    out = io.StringIO()
    sink = Sink("json", out)
    seen = []

    def source():
        for i in range(3):
            yield {"n": i}
            seen.append(out.getvalue())

    for row in source():
        sink.row(row)
        sink._bytes.flush()
    sink.close()
    assert '{"n":0}' in seen[0] and '{"n":1}' not in seen[0]
    assert json.loads(out.getvalue()) == [{"n": 0}, {"n": 1}, {"n": 2}]
    empty = io.StringIO()
    Sink("json", empty).close()
    assert json.loads(empty.getvalue()) == []


def test_a_value_orjson_refuses_still_goes_out():
    out = io.StringIO()
    with Sink("jsonl", out) as sink:
        sink.rows([{"big": 1 << 70, "k": "\ud800"}, {1: "non-string key"}])
    lines = out.getvalue().splitlines()
    assert json.loads(lines[0])["big"] == 1 << 70 and "\\ud800" in lines[0]
    assert json.loads(lines[1]) == {"1": "non-string key"}


def test_pipe_to_head_is_not_an_error():
    p = subprocess.Popen([sys.executable, "-m", "rmqtool", "dump", "commitlog", str(STORE), "-f", "jsonl"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env())
    first = p.stdout.readline()
    p.stdout.close()  # as `| head -1` does
    err = p.stderr.read()
    p.wait(timeout=60)
    assert json.loads(first)["record"] == "message"
    assert p.returncode == 0 and b"Traceback" not in err


@pytest.mark.parametrize("fmt", ["jsonl", "json", "table"])
def test_each_format_through_a_pipe(fmt):
    p = subprocess.run([sys.executable, "-m", "rmqtool", "dump", "commitlog", str(STORE), "-f", fmt, "-n", "7"],
                       capture_output=True, text=True, env=subprocess_env(), timeout=60)
    assert p.returncode == 0 and p.stderr == ""
    if fmt == "jsonl":
        assert len(jsonl(p.stdout)) == 7
    elif fmt == "json":
        assert len(json.loads(p.stdout)) == 7
    else:
        assert len(p.stdout.splitlines()) == 7 + 2


# ---- dump commitlog --stats ----

def test_stats_per_topic_and_queue_match_the_truth():
    messages = load_truth(TRUTH)["truth"]["messages"]
    r = run("dump", "commitlog", STORE, "--stats", "-f", "jsonl")
    assert r.exit_code == 0, r.stderr
    rows = jsonl(r.stdout)
    by_queue = collections.defaultdict(list)
    for m in messages:
        by_queue[(m["topic"], m["queueId"])].append(m)
    assert [(x["topic"], x["queue_id"]) for x in rows] == sorted(by_queue)
    for x in rows:
        ms = by_queue[(x["topic"], x["queue_id"])]
        assert x["record"] == "queue_stats"
        assert (x["messages"], x["bytes"]) == (len(ms), sum(m["storeSize"] for m in ms))
        assert (x["first_store_timestamp"], x["last_store_timestamp"]) == (
            min(m["storeTimestamp"] for m in ms), max(m["storeTimestamp"] for m in ms))
        assert (x["min_queue_offset"], x["max_queue_offset"]) == (  # [min, max), as info's and the broker's
            min(m["queueOffset"] for m in ms), max(m["queueOffset"] for m in ms) + 1)


def test_stats_leave_out_the_transaction_records_no_queue_holds():
    """txdelay: a transaction's PREPARED and ROLLBACK records get queue offset 0 and no unit; the
    stats' messages and offsets of each queue are its consume queue's (truth), as info's. They
    counted TxTopic/0 as 19 messages over [0, 11)."""
    truth = load_truth(V4 / "txdelay" / "truth.json")["truth"]["consumeQueues"]
    rows = jsonl(run("dump", "commitlog", V4 / "txdelay" / "store", "--stats", "-f", "jsonl").stdout)
    assert {(x["topic"], x["queue_id"]): (x["messages"], x["min_queue_offset"], x["max_queue_offset"]) for x in rows} \
        == {(t, int(i)): (len(q["entries"]), q["minOffset"], q["maxOffset"]) for t, qs in truth.items()
            for i, q in qs.items() if q["entries"]}


def test_stats_count_an_inner_batchs_messages_and_offsets():
    """A 5.x BatchCQ topic's record holds INNER_NUM messages with as many queue offsets: the
    range and count are the queue's, as info and the broker give them (it was one a record)."""
    batchcq = V5 / "batchcq"
    queues = load_truth(batchcq / "truth.json")["truth"]["consumeQueues"]
    rows = jsonl(run("dump", "commitlog", batchcq / "store", "--stats", "-f", "jsonl").stdout)
    got = {(x["topic"], str(x["queue_id"])): (x["min_queue_offset"], x["max_queue_offset"], x["messages"])
           for x in rows if x["record"] == "queue_stats"}
    want = {(t, q): (v["minOffset"], v["maxOffset"], v["messageTotalInQueue"]) for t, qs in queues.items()
            for q, v in qs.items() if v["maxOffset"] > v["minOffset"]}
    assert any(v["cqType"] == "BatchCQ" for qs in queues.values() for v in qs.values())
    assert got == want


def test_stats_count_damage_by_finding_id():
    store = E1 / "input" / "store"
    r = run("dump", "commitlog", store, "--stats", "-f", "jsonl")
    assert r.exit_code == 3
    rows = jsonl(r.stdout)
    damage = {x["finding"]: x for x in rows if x["record"] == "damage_stats"}
    dumped = jsonl(run("dump", "commitlog", store, "-f", "jsonl", "--body", "none").stdout)
    bad = sum(1 for x in dumped if x.get("body_crc_ok") is False)
    assert bad and damage["bodyCrcMismatch"]["count"] == bad and damage["bodyCrcMismatch"]["severity"] == "error"
    queues = [x for x in rows if x["record"] == "queue_stats"]
    assert sum(x["messages"] for x in queues) == sum(1 for x in dumped if x["record"] == "message")
    table = run("dump", "commitlog", store, "--stats")
    assert "bodyCrcMismatch" in table.stdout and "queue_id" in table.stdout


def test_stats_take_the_selection():
    r = run("dump", "commitlog", STORE, "--stats", "--topic", "OrderTopic", "--queue", "2", "-f", "jsonl")
    rows = jsonl(r.stdout)
    assert [(x["topic"], x["queue_id"]) for x in rows] == [("OrderTopic", 2)]


# ---- rmqtool findings ----

def test_findings_lists_every_id_with_severity_and_action():
    r = run("findings", "-f", "jsonl")
    assert r.exit_code == 0 and r.stderr == ""
    rows = jsonl(r.stdout)
    assert [x["finding"] for x in rows] == list(REGISTRY)
    for x in rows:
        assert x["severity"] == REGISTRY[x["finding"]][0].value
        assert x["meaning"] == REGISTRY[x["finding"]][1] and x["action"] == OPERATOR_ACTIONS[x["finding"]]
    table = run("findings", "--wide").stdout
    assert all(finding_id in table for finding_id in REGISTRY)


# ---- progress ----

class Bar:
    def __init__(self):
        self.moves = []

    def advance(self, n):
        self.moves.append(n)


def test_progress_moves_by_bytes_within_a_segment(monkeypatch):
    monkeypatch.setattr(commitlog_dump, "PROGRESS_STEP", 16 << 10)
    dump = CommitLogDump(STORE, body="none")
    bar = Bar()
    rows = sum(1 for _ in dump.rows(bar))
    assert rows == len(load_truth(TRUTH)["truth"]["messages"])
    assert sum(bar.moves) == dump.total_bytes
    assert len(bar.moves) > 2 * len(dump.segments)  # several moves a segment, not one
    assert max(bar.moves) < dump.segments[0].size


@pytest.mark.parametrize("term", ["xterm", "dumb"])
def test_a_bar_on_a_terminal_leaves_no_line_behind(term):
    """stderr a terminal: a bar, erased before the table. A dumb terminal (TERM=dumb) cannot erase
    it: rich left a blank line there, above the table; it gets the plain lines instead."""
    import fcntl
    import pty
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # a terminal's size, as a shell's
    try:
        p = subprocess.run([sys.executable, "-m", "rmqtool", "dump", "commitlog", str(STORE), "-n", "2"],
                           stdin=slave, stdout=slave, stderr=slave, env={**subprocess_env(), "TERM": term},
                           timeout=60)
        os.close(slave)
        said = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other end closed: all read
                break
            if not chunk:
                break
            said += chunk
    finally:
        os.close(master)
    assert p.returncode == 0 and b"commit_log_offset" in said, said  # the table came
    lines = said.decode().replace("\r", "").split("\n")[:-1]  # after the last newline: nothing
    assert [line for line in lines if line.strip() == ""] == [], said
    if term == "dumb":
        assert b"\x1b" not in said, said  # no cursor movement sent to a terminal that has none


def test_progress_forced_onto_redirected_stderr():
    p = subprocess.run([sys.executable, "-m", "rmqtool", "dump", "commitlog", str(STORE), "-f", "jsonl",
                        "--body", "none", "--progress"], capture_output=True, text=True, env=subprocess_env(),
                       timeout=60)
    assert p.returncode == 0
    total = sum(s.stat().st_size for s in (STORE / "commitlog").iterdir())
    assert "scanning: " in p.stderr and "(100%)" in p.stderr and "MiB" in p.stderr
    assert f"{total / (1 << 20):.1f} MiB" in p.stderr
    assert "\x1b" not in p.stderr  # plain lines, not a terminal's bar
    p = subprocess.run([sys.executable, "-m", "rmqtool", "dump", "commitlog", str(STORE), "-f", "jsonl",
                        "--body", "none"], capture_output=True, text=True, env=subprocess_env(), timeout=60)
    assert p.stderr == ""  # by default only on a terminal
