"""rmqtool diff on two DLedger stores (a leader and a follower): DLedger replicates entries byte
for byte at the same positions, so the data files are compared as bytes; a difference names
the entry it lies in (its header's fields as ``entry_*``, then its record's). Expected values
from the fixture's truth.json (DLedger's own read-back)."""
from __future__ import annotations

import json
import os

import pytest

from conftest import FIXTURES, load_truth
from helpers import cli_runner, copy_tree, expand_store
from rmqtool.cli.app import app

DLEDGER = FIXTURES / "rocketmq-5.3.3" / "dledger"
TERM_AT = 16  # the entry header's term field: magic, size, index (int32, int32, int64), then term


def _diff(a, b):
    out = cli_runner().invoke(app, ["diff", str(a), str(b), "-f", "jsonl"])
    return [json.loads(line) for line in out.stdout.splitlines()], out


@pytest.fixture(scope="module")
def leader(tmp_path_factory):
    work = tmp_path_factory.mktemp("dledger")
    return expand_store(DLEDGER / "store", work / "store"), load_truth(DLEDGER / "truth.json")["truth"]


def _data_file(store, entry):
    return store / "dledger-n0" / "data" / entry["dataFile"]


def test_a_replica_byte_for_byte_is_equal(leader, tmp_path):
    store, _ = leader
    rows, out = _diff(store, copy_tree(store, tmp_path / "follower"))
    assert out.exit_code == 0, out.stderr
    assert [r["record"] for r in rows] == ["summary"] and rows[0]["equal"] is True


def test_a_follower_behind_lacks_the_entries_past_its_end(leader, tmp_path):
    store, truth = leader
    entries = truth["entries"]
    cut = entries[-5]
    follower = copy_tree(store, tmp_path / "follower")
    path = _data_file(follower, cut)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:  # the follower's data file as far as it was written: zeros after
        f.truncate(cut["positionInDataFile"])
        f.truncate(size)
    rows, out = _diff(store, follower)
    assert out.exit_code == 3, out.stderr
    (tail,) = [r for r in rows if r["record"] == "commit_log_divergence"]
    assert (tail["side"], tail["reason"], tail["commit_log_offset"]) == ("a", "missing_tail", cut["pos"])
    assert tail["bytes_past"] == truth["dledger"]["writePos"] - cut["pos"]
    past = [e for e in entries if e["pos"] >= cut["pos"]]
    only = [r for r in rows if r["record"] == "message_only_in"]
    assert [(r["side"], r["commit_log_offset"]) for r in only] == [("a", e["recordOffset"]) for e in past]
    summary = rows[-1]
    assert (summary["written_end_a"], summary["written_end_b"]) == (truth["dledger"]["writePos"], cut["pos"])
    assert not [r for r in rows if r["record"] == "checkpoint_field"]  # the same checkpoint files


def test_a_follower_that_committed_less_says_so(leader, tmp_path):
    """DLedger's own checkpoint: the index each replica committed up to."""
    store, truth = leader
    committed = truth["dledger"]["committedIndex"]
    follower = copy_tree(store, tmp_path / "follower")
    checkpoint = follower / "dledger-n0" / "checkpoint"
    text = checkpoint.read_text()
    checkpoint.write_text(text.replace(f"committedIndex={committed}", f"committedIndex={committed - 5}"))
    (follower / "dledger-n0" / "checkpoint.bak").unlink(missing_ok=True)
    rows, out = _diff(store, follower)
    assert out.exit_code == 3
    (row,) = [r for r in rows if r["record"] != "summary"]
    assert (row["record"], row["file"], row["field"], row["a"], row["b"]) == (
        "checkpoint_field", "dledger-n0/checkpoint", "dledger_committed_index", committed, committed - 5)


def test_an_entry_of_another_term_is_a_different_record(leader, tmp_path):
    """Two replicas that hold an entry of another term at one index have parted (a leader
    change that the follower did not truncate): the row names the entry and its term."""
    store, truth = leader
    entry = truth["entries"][len(truth["entries"]) // 2]
    follower = copy_tree(store, tmp_path / "follower")
    with open(_data_file(follower, entry), "r+b") as f:
        f.seek(entry["positionInDataFile"] + TERM_AT)
        f.write((entry["term"] + 1).to_bytes(8, "big"))
    rows, out = _diff(store, follower)
    assert out.exit_code == 3, out.stderr
    (d,) = [r for r in rows if r["record"] == "commit_log_divergence"]
    assert (d["reason"], d["commit_log_offset"], d["fields"]) == ("different_record", entry["pos"], ["entry_term"])
    assert (d["a"]["entry_term"], d["b"]["entry_term"]) == (entry["term"], entry["term"] + 1)
    old, new = entry["term"].to_bytes(8, "big"), (entry["term"] + 1).to_bytes(8, "big")
    assert d["first_different_byte"] == entry["pos"] + TERM_AT + next(i for i in range(8) if old[i] != new[i])
    assert not [r for r in rows if r["record"].startswith("message")]  # the record inside is the same
