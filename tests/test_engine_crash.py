"""Unclean ends: SIGKILL at random points, and the broker's own crash fixtures.

A child process appends with sync flush and prints each acknowledged offset; the parent
kills it (SIGKILL) after a random while, several times over the same store (each new child
recovers the torn tail first). Then every acknowledged message must be there, byte for byte,
and the consume queues and index must hold them after a clean close. And the engine's
recover mode, run on the 4.9.8 crash inputs, must give what the broker's recovery gave.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import V4
from helpers import copy_tree, read_at
from rmqtool.query.by_key import query_by_key
from rmqtool.store.commitlog import Corrupt
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.consumequeue import open_consume_queues
from rmqtool.engine.store import Store
from rmqtool.store.message import Message

SIZES = dict(commitlog_size=64 * 1024, cq_size=40 * 20, index_slots=64, index_entries=300)

CHILD = """
import json, sys
from rmqtool.engine.store import Store
from rmqtool.engine.producer import producer_message
root, rnd = sys.argv[1], int(sys.argv[2])
store = Store.open(root, writable=True, flush="sync", recover=True, **json.loads(sys.argv[3]))
print("ready", flush=True)
i = 0
while True:
    body = f"round {rnd} message {i} ".encode() * (1 + i % 25)
    r = store.append(producer_message("CrashTopic", body, keys=f"r{rnd}-{i}", queue_id=i % 3))
    if r.ok:
        print(json.dumps([r.wrote_offset, r.wrote_bytes, r.queue_id, r.queue_offset, rnd, i]), flush=True)
    i += 1
"""


def _body(rnd: int, i: int) -> bytes:
    return f"round {rnd} message {i} ".encode() * (1 + i % 25)


def _run_and_kill(root, rnd: int, seconds: float) -> list:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(rnd), json.dumps(SIZES)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(child.stdout), daemon=True)
    assert child.stdout.readline().strip() == "ready", child.stderr.read()
    reader.start()
    # the kill must land in the middle of the stream: wait for the first acknowledgement
    # (a loaded machine may take a while to get there), then a random while longer
    deadline = time.monotonic() + 60
    while not lines and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(seconds)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=10)
    reader.join(timeout=10)
    acked = []
    for line in lines:
        try:
            acked.append(json.loads(line))
        except ValueError:
            pass  # the line being printed when the kill came
    return acked


def test_sigkill_loses_no_acknowledged_message(tmp_path):
    root = tmp_path / "store"
    rng = random.Random(20240601)
    acked = []
    for rnd in range(4):
        got = _run_and_kill(root, rnd, rng.uniform(0.15, 0.7))
        assert got, "the child acknowledged nothing"
        acked.extend(got)
        assert (root / "abort").exists()  # killed: no clean close
    offsets = [a[0] for a in acked]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    # straight from the files, as left by the last kill
    cl = CommitLog(root / "commitlog")
    for offset, size, _q, _qo, rnd, i in acked:
        m = read_at(cl, offset)
        assert (m.store_size, m.body, m.keys) == (size, _body(rnd, i), [f"r{rnd}-{i}"])
        assert m.body_crc_ok
    # a last writer recovers it and closes cleanly: queues and index hold everything acknowledged
    with Store.open(root, writable=True, recover=True) as store:
        assert store.max_offset >= offsets[-1]
    assert not (root / "abort").exists()
    results = list(CommitLog(root / "commitlog").scan())
    assert not [r for r in results if isinstance(r, Corrupt)]
    queues = open_consume_queues(root)
    for offset, size, queue_id, queue_offset, _rnd, _i in acked:
        u = queues.find("CrashTopic", queue_id).get(queue_offset)
        assert (u.commit_log_offset, u.size) == (offset, size)
    for queue_id in range(3):
        cq = queues.find("CrashTopic", queue_id)
        kept = [r for r in results if isinstance(r, Message) and r.queue_id == queue_id]
        assert [u.commit_log_offset for u in cq.iter_units()] == [m.commit_log_offset for m in kept]
    for offset, _s, _q, _qo, rnd, i in rng.sample(acked, 10):
        found = query_by_key(root, f"r{rnd}-{i}", topic="CrashTopic", index_only=True)
        assert [m.commit_log_offset for m in found.messages] == [offset]


# Variants of the 4.9.8 crash fixtures that the engine's recover mode repairs the way the
# broker's abnormal recovery did: a torn or damaged tail of the last segment, lost consume
# queue files, a lost index. (Damage further back, e2/e3, is the recovery tool's business:
# the broker then drops everything after it.)
RECOVERABLE = [("crash", v) for v in ("a-as-is", "b2-garbage-tail-of-last-message", "b3-zeroed-last-3-messages",
                                      "c1-delete-cq-queue-dir", "c2-delete-last-cq-file", "c4-delete-first-cq-file",
                                      "d-remove-index-dir", "e1-corrupt-body-in-last-commitlog-file")] + [
    ("crash-fast", v) for v in ("a-as-is", "c1-delete-cq-queue-dir", "d-remove-index-dir")]


@pytest.mark.parametrize("kind,variant", RECOVERABLE)
def test_recover_gives_what_the_brokers_recovery_gave(kind, variant, tmp_path):
    """Commit log and every consume queue file come out as the broker left them after its
    recovery and clean shutdown, except that what the broker leaves stale after the end
    (it only moves its write positions back) is zero here."""
    base = V4 / kind / variant
    root = tmp_path / "store"
    copy_tree(base / "input" / "store", root)
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    config = json.loads((base / "truth.json").read_text())["messageStoreConfig"]["effectiveGetterValues"]
    # the broker's index geometry: d-remove-index-dir has no index file left to show it
    with Store.open(root, writable=True, recover=True, index_slots=config["maxHashSlotNum"],
                    index_entries=config["maxIndexNum"]) as store:
        end = store.max_offset
    summary = json.loads((V4 / kind / "summary.json").read_text())[variant]
    assert end == summary["maxPhyOffset"]
    expected = base / "expected" / "store"
    for sub in ("commitlog", "consumequeue"):
        theirs = {p.relative_to(expected): p.read_bytes() for p in expected.joinpath(sub).rglob("*") if p.is_file()}
        ours = {p.relative_to(root): p.read_bytes() for p in root.joinpath(sub).rglob("*") if p.is_file()}
        assert sorted(ours) == sorted(theirs)
        for name, data in theirs.items():
            mine = ours[name]
            if mine != data:
                k = next(i for i in range(len(data)) if mine[i] != data[i])
                assert mine[k:] == bytes(len(mine) - k), name  # only stale bytes past the end differ
    queues = {f"{q.topic}/{q.queue_id}": [q.min_offset(), q.max_offset] for q in open_consume_queues(root).queues}
    assert queues == {k: v[:2] for k, v in summary["queues"].items()}
    assert {p.stat().st_size for p in (root / "index").iterdir()} == \
        {p.stat().st_size for p in (expected / "index").iterdir()}
    assert not (root / "abort").exists()
