"""A store a writer holds: info, dump and verify read up to the written end taken when they
begin, say so on stderr, and do not report the moving tail (a half-written record, consume
queue units dispatched past that end, the running writer's abort file) as damage; the same
bytes in a store nobody holds are damage. ``dump commitlog --follow`` prints records as they
are appended, across a segment roll, and stops cleanly; several paths in one dump."""
from __future__ import annotations

import json
import os
import pathlib
import selectors
import signal
import struct
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from rmqtool.cli.app import app
from rmqtool.engine.producer import producer_message
from rmqtool.engine.store import Store
from tests.conftest import V4, load_truth

SMALL = dict(commitlog_size=32 * 1024, cq_size=400, index_slots=32, index_entries=120)
RMQTOOL = [sys.executable, "-m", "rmqtool"]
runner = CliRunner()


def _rmqtool(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*RMQTOOL, *args], capture_output=True, text=True, timeout=timeout)


def _jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _tear_tail(root: pathlib.Path, results) -> int:
    """Half of a copy of the last record written after it (a put caught mid-copy), and a
    consume queue unit pointing there; returns the written end."""
    last = results[-1]
    end = last.wrote_offset + last.wrote_bytes
    size = SMALL["commitlog_size"]
    segment = root / "commitlog" / f"{end - end % size:020d}"
    with open(root / "commitlog" / f"{last.wrote_offset - last.wrote_offset % size:020d}", "rb") as f:
        f.seek(last.wrote_offset % size)
        record = f.read(last.wrote_bytes)
    with open(segment, "r+b") as f:
        f.seek(end % size)
        f.write(record[:len(record) // 2])
    queue = root / "consumequeue" / last.topic / str(last.queue_id)
    unit = (last.queue_offset + 1) * 20
    cq = queue / f"{unit - unit % SMALL['cq_size']:020d}"
    with open(cq, "r+b") as f:
        f.seek(unit % SMALL["cq_size"])
        f.write(struct.pack(">qiq", end, last.wrote_bytes, 0))
    return end


@pytest.fixture
def held_store(tmp_path):
    root = tmp_path / "store"
    store = Store.open(root, writable=True, **SMALL)
    results = [store.append(producer_message("LiveTopic", b"m%03d" % i * 20, keys=f"k{i}")) for i in range(30)]
    end = _tear_tail(root, results)
    yield root, store, results, end
    store.close()


def test_a_held_store_reads_to_its_written_end_and_reports_no_moving_tail(held_store):
    root, _store, results, end = held_store
    for args in (["info", str(root), "-f", "json"], ["dump", "commitlog", str(root), "-f", "jsonl"],
                 ["verify", str(root), "-f", "jsonl", "--only", "commitlog", "--only", "consumequeue"]):
        p = _rmqtool(*args)
        assert p.returncode == 0, (args, p.stderr)
        assert f"PID {os.getpid()} holds its lock" in p.stderr and f"commit log offset {end}" in p.stderr
        if args[0] == "info":
            doc = json.loads(p.stdout)
            assert doc["store"]["live"] is True and doc["store"]["consistent_commit_log_end"] == end
            assert doc["commitlog"]["max_commit_log_offset"] == end
            queue = next(q for q in doc["consume_queues"] if q["topic"] == "LiveTopic")
            assert queue["max_queue_offset"] == results[-1].queue_offset + 1  # the unit past the end left out
            assert doc["findings"] == []
        elif args[0] == "dump":
            rows = _jsonl(p.stdout)
            assert [r["commit_log_offset"] for r in rows] == [r.wrote_offset for r in results]
            assert all(r["record"] == "message" for r in rows)
        else:
            assert not [f for f in _jsonl(p.stdout) if f["severity"] == "error"]


def test_the_same_tail_in_a_store_nobody_holds_is_damage(held_store):
    root, store, _results, end = held_store
    store.close()
    (root / "abort").write_bytes(b"")  # closed cleanly, the tail torn after: not live
    _tear_again = _rmqtool("dump", "commitlog", str(root), "-f", "jsonl")
    assert _tear_again.returncode == 3 and "live" not in _tear_again.stderr
    assert any(r["record"] == "corrupt" and r["commit_log_offset"] == end for r in _jsonl(_tear_again.stdout))


def _read_lines(proc: subprocess.Popen, want: int, timeout: float = 30) -> list[dict]:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    rows, buf = [], b""
    deadline = time.monotonic() + timeout
    while len(rows) < want and time.monotonic() < deadline:
        if not sel.select(timeout=0.5):
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        rows += [json.loads(line) for line in lines if line.strip()]
    return rows


def test_follow_prints_appended_records_across_a_roll_and_stops_on_ctrl_c(tmp_path):
    root = tmp_path / "store"
    with Store.open(root, writable=True, **SMALL) as store:
        first = [store.append(producer_message("F", b"a" * 300, keys=f"a{i}")) for i in range(10)]
        # SIGINT as a terminal gives it: a suite started in the background (``make test &``) runs
        # with SIGINT ignored, which the child would inherit, and Python then never raises KeyboardInterrupt
        proc = subprocess.Popen([*RMQTOOL, "dump", "commitlog", str(root), "--follow", "-f", "jsonl", "--body", "none"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            rows = _read_lines(proc, len(first))
            assert [r["commit_log_offset"] for r in rows] == [r.wrote_offset for r in first]
            # enough to roll the 32 KiB segment: the follower goes on in the next one
            more = [store.append(producer_message("F", b"b" * 300, keys=f"b{i}")) for i in range(150)]
            assert len({r.wrote_offset // SMALL["commitlog_size"] for r in more}) > 1
            rows = _read_lines(proc, len(more))
            assert [r["commit_log_offset"] for r in rows] == [r.wrote_offset for r in more]
            assert [r["keys"] for r in rows] == [[f"b{i}"] for i in range(150)]
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err and not out.strip()  # nothing more came, nothing was cut


def test_follow_with_a_limit_stops_by_itself(tmp_path):
    root = tmp_path / "store"
    with Store.open(root, writable=True, **SMALL) as store:
        results = [store.append(producer_message("F", b"x" * 50)) for i in range(5)]
        p = _rmqtool("dump", "commitlog", str(root), "--follow", "-n", "3", "-f", "jsonl", timeout=30)
    assert p.returncode == 0
    assert [r["commit_log_offset"] for r in _jsonl(p.stdout)] == [r.wrote_offset for r in results[:3]]


@pytest.mark.parametrize("args, says", [
    (["--follow", "--to-offset", "100"], "--to-offset"),
    (["--follow", "--stats"], "--stats"),
])
def test_follow_refuses_what_has_an_end(args, says):
    store = V4 / "basic" / "store"
    result = runner.invoke(app, ["dump", "commitlog", str(store), *args])
    assert result.exit_code == 2 and says in result.stderr


def test_several_paths_give_the_rows_of_each_in_turn():
    store = V4 / "basic" / "store"
    segments = sorted((store / "commitlog").iterdir())
    whole = runner.invoke(app, ["dump", "commitlog", str(store), "-f", "jsonl", "--body", "none"])
    parts = runner.invoke(app, ["dump", "commitlog", *map(str, segments), "-f", "jsonl", "--body", "none"])
    assert whole.exit_code == parts.exit_code == 0
    assert _jsonl(parts.stdout) == _jsonl(whole.stdout)
    truth = load_truth(V4 / "basic" / "truth.json")["truth"]
    messages = truth["messages"]
    assert len(_jsonl(whole.stdout)) == len(messages)
    limited = runner.invoke(app, ["dump", "commitlog", *map(str, segments), "-f", "jsonl", "-n", "7"])
    assert [r["commit_log_offset"] for r in _jsonl(limited.stdout)] == \
        [r["commit_log_offset"] for r in _jsonl(whole.stdout)[:7]]
    stats = runner.invoke(app, ["dump", "commitlog", *map(str, segments), "-f", "jsonl", "--stats"])
    counted = sum(r["messages"] for r in _jsonl(stats.stdout) if r["record"] == "queue_stats")
    assert counted == len(messages)


def test_follow_takes_one_path():
    store = V4 / "basic" / "store"
    result = runner.invoke(app, ["dump", "commitlog", str(store), str(store), "--follow"])
    assert result.exit_code == 2 and "one path" in result.stderr


def test_query_on_a_held_store_reads_to_its_written_end(held_store):
    root, _store, results, end = held_store
    p = _rmqtool("query", str(root), "--offset", str(end), "-f", "jsonl")
    assert p.returncode == 1 and "not written yet" in p.stderr and "Traceback" not in p.stderr
    p = _rmqtool("query", str(root), "--key", "k3", "-f", "jsonl", "--no-index")
    assert p.returncode == 0 and "is live" in p.stderr
    assert [r["commit_log_offset"] for r in _jsonl(p.stdout)] == [results[3].wrote_offset]


@pytest.mark.parametrize("what", [(), ("--timer",)])
def test_a_writer_refuses_a_held_store_for_the_lock_before_its_tail(held_store, what):
    """A running broker's store with a record half copied at its end: redispatch --apply is
    refused for the lock (exit 5), not told to recover first (3), and nothing is written."""
    root, _store, _results, _end = held_store

    def files():  # not the lock file: closing a descriptor of it would drop the lock this process holds
        return {p.relative_to(root.parent): p.read_bytes() if p.is_file() else None
                for p in sorted(root.parent.rglob("*")) if p.name != "lock"}
    before = files()
    r = _rmqtool("redispatch", str(root), *what, "--apply")
    assert r.returncode == 5 and "locked by" in r.stderr and "recovery" not in r.stderr, r.stderr
    after = files()
    assert {p: after[p] for p in before} == before  # nothing written, no backup or staging beside the store
    # what else there is, the holder made: its allocator's next commit log file, all zeros
    assert all(p.parent.name == "commitlog" and not any(after[p]) for p in set(after) - set(before)), \
        sorted(set(after) - set(before))
