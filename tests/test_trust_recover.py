"""recover is idempotent and loads what the broker loads (issue 20, items 6 and 9).

Item 6: ``--from-checkpoint`` is the broker's abnormal start: IndexService.load destroys the
index files past the checkpoint's indexMsgTimestamp and dispatch builds them again from the
checkpoint's file. A start that changes nothing plans nothing (exit 0), and a second apply
changes no byte. Item 9: a store with a missing middle commit log file is recovered into a
new directory as the broker would load it; in place only with --force.
"""
from __future__ import annotations

import hashlib
import json
import pathlib

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, V4, V5, load_truth
from helpers import writable_copy
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode
from rmqtool.store.indexfile import IndexFile, index_file_paths

MADE = FIXTURES / "crash-made"


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def tree(root: pathlib.Path) -> dict:
    """Every file's relative name and sha256: the whole listing, not only some files."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def index_counts(store: pathlib.Path) -> list[int]:
    out = []
    for path in index_file_paths(store / "index"):
        with IndexFile(path) as f:
            out.append(f.header.index_count)
    return out


def truth_index_counts(variant: pathlib.Path) -> list[int]:
    """The index files' indexCount the real engine left after its recovery and clean shutdown."""
    return [f["indexCount"] for f in load_truth(variant / "truth.json")["onDiskAfterShutdown"]["indexFiles"]]


BROKER_RECOVERED = [V4 / "crash" / "a-as-is", V4 / "crash" / "c1-delete-cq-queue-dir", V5 / "crash5" / "a-as-is"]


@pytest.mark.parametrize("variant", BROKER_RECOVERED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_forced_abnormal_start_of_a_store_the_broker_recovered_plans_nothing(variant):
    # the broker's own result of an abnormal start: its next abnormal start destroys the last
    # index file and builds it again as it is, so nothing changes
    store = variant / "expected" / "store"
    r = run("recover", store, "--from-checkpoint", "-f", "json")
    doc = json.loads(r.stdout)
    # messages the broker's own start already lost (c1's deleted queue) stay listed: damage
    # found is exit 3, though the start changes nothing
    assert all(m["reason"] == "unit lost" for m in doc["lost_messages"])
    assert r.exit_code == (ExitCode.CORRUPT if doc["lost_messages"] else ExitCode.OK), r.stdout
    assert doc["needs_recovery"] is False and doc["actions"] == []
    assert doc["mode"] == "abnormal"
    assert doc["index_files_destroyed"] and doc["index_rebuild"]["rebuilt_as_is"] is True


@pytest.mark.parametrize("variant", [V4 / "crash" / "a-as-is", V5 / "crash5" / "a-as-is"],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_from_checkpoint_apply_twice_changes_no_byte(variant, tmp_path):
    store = writable_copy(variant / "input" / "store", tmp_path / "store")
    first = run("recover", store, "--from-checkpoint", "--apply", "--backup-dir", tmp_path / "b1")
    assert first.exit_code == 0, first.stdout
    assert index_counts(store) == truth_index_counts(variant)  # what the broker holds after its recovery
    after_first = tree(store)
    plan = run("recover", store, "--from-checkpoint")
    assert plan.exit_code == 0, plan.stdout
    second = run("recover", store, "--from-checkpoint", "--apply", "--backup-dir", tmp_path / "b2")
    assert second.exit_code == 0, second.stdout
    assert tree(store) == after_first
    assert index_counts(store) == truth_index_counts(variant)


def test_from_checkpoint_apply_with_nothing_to_change_writes_nothing(tmp_path):
    # not even a lock file the store did not have, an abort marker, or a checkpoint rewrite
    store = writable_copy(V4 / "crash" / "a-as-is" / "expected" / "store", tmp_path / "store")
    (store / "lock").unlink()
    before = tree(store)
    r = run("recover", store, "--from-checkpoint", "--apply", "--backup-dir", tmp_path / "b")
    assert r.exit_code == 0, r.stdout
    assert tree(store) == before and not (tmp_path / "b").exists()
    assert "nothing written" in r.stdout


def test_plan_says_the_rebuilt_index_file_repeats_keys_as_the_brokers_does():
    # the real broker's rebuilt file holds again the keys of the message at the full file's
    # endPhyOffset that the full file holds (buildIndex skips only offsets below it)
    variant = V4 / "crash" / "a-as-is"
    r = run("recover", variant / "input" / "store", "-f", "json")
    doc = json.loads(r.stdout)
    full, rebuilt = index_file_paths(variant / "expected" / "store" / "index")
    with IndexFile(full) as f, IndexFile(rebuilt) as g:
        held = {(e.key_hash, e.phy_offset) for e in f.iter_entries()}
        again = [e for e in g.iter_entries() if (e.key_hash, e.phy_offset) in held]
        assert doc["index_rebuild"]["entries_put"] == g.header.index_count - 1
    assert again and doc["index_rebuild"]["entries_repeated"] == len(again)
    assert doc["index_rebuild"]["entries_lost"] == 0
    assert "repeat keys" in " ".join(run("recover", variant / "input" / "store").stdout.split())


def test_plan_says_when_the_start_repeats_keys_in_a_kept_index_file():
    # a checkpoint a day ahead: the broker destroys no index file (crash-made truth: nothing destroyed), and the
    # walk puts the keys of the last indexed message into the kept last file once more, at every abnormal start
    store = MADE / "checkpoint-newer-than-data" / "input" / "store"
    doc = json.loads(run("recover", store, "-f", "json").stdout)
    last = index_file_paths(store / "index")[-1]
    with IndexFile(last) as f:
        at_end = [e for e in f.iter_entries() if e.phy_offset == f.header.end_phy_offset]
    assert doc["index_files_destroyed"] == [] and doc["index_rebuild"]["appended_to"] == str(last)
    assert doc["index_rebuild"]["entries_repeated"] == len(at_end) > 0
    assert "the broker does the same" in " ".join(run("recover", store).stdout.split())


# --- item 9: a missing middle commit log file -------------------------------------------------

def queue_offsets(store: pathlib.Path) -> dict:
    """Each queue's [min, max] as the read side finds it in the files (not the plan's model)."""
    r = run("info", store, "-f", "json")
    return {f"{q['topic']}/{q['queue_id']}": [q["min_offset"], q["max_offset"]]
            for q in json.loads(r.stdout)["consume_queues"]}


def engine_truth(shape: str, engine: str) -> dict:
    return load_truth(MADE / shape / "truth.json")["engines"][engine]


@pytest.mark.parametrize("shape,args,engine", [
    ("missing-middle-abnormal", (), "4.9.8"),
    ("missing-middle-no-queues", ("--semantics", "5.3"), "5.3.3"),
])
def test_missing_middle_file_recovered_into_a_new_directory_as_the_broker_loads_it(shape, args, engine, tmp_path):
    store = writable_copy(MADE / shape / "input" / "store", tmp_path / "store")
    before = tree(store)
    new = tmp_path / "new"
    # the sizes the engines ran with (commit log, consume queue, hash slots, index entries):
    # with every queue deleted, nothing in the store shows the queue file size
    _, cq_size, slots, entries = load_truth(MADE / shape / "truth.json")["sizes"]
    sizes = ("--cq-size", cq_size, "--index-slots", slots, "--index-entries", entries)
    r = run("recover", store, *args, *sizes, "--apply", "--to", new)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert tree(store) == before  # the input untouched, byte for byte and name for name
    truth = engine_truth(shape, engine)
    # startable: a clean shutdown's marks, the gap kept as the broker keeps it, every queue as the engine left it
    assert not (new / "abort").exists()
    # the files that hold data stay (the made-ahead all-zero one goes, as truncateDirtyFiles drops it)
    assert sorted(p.name for p in (new / "commitlog").iterdir()) == sorted(
        p.name for p in (store / "commitlog").iterdir() if any(p.read_bytes()))
    assert queue_offsets(new) == truth["queues"]
    again = json.loads(run("recover", new, *args, "-f", "json").stdout)
    assert again["mode"] == "normal" and again["actions"] == []
    assert again["commit_log"]["max_offset_after"] == truth["maxPhyOffset"]
    # recovering it again changes no byte: the gap is no change of recovery's, every start leaves it
    recovered = tree(new)
    r = run("recover", new, *args, "--apply", "--force", "--backup-dir", tmp_path / "b0")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert tree(new) == recovered
    # an abnormal start may change the index (the destroyed file's entries in the missing file are not put
    # back), once: the second one changes nothing
    run("recover", new, *args, "--from-checkpoint", "--apply", "--force", "--backup-dir", tmp_path / "b1")
    once = tree(new)
    r = run("recover", new, *args, "--from-checkpoint", "--apply", "--force", "--backup-dir", tmp_path / "b2")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert tree(new) == once


def test_missing_middle_file_in_place_only_with_force(tmp_path):
    store = writable_copy(MADE / "missing-middle-abnormal" / "input" / "store", tmp_path / "store")
    before = tree(store)
    refused = run("recover", store, "--apply", "--backup-dir", tmp_path / "b0")
    assert refused.exit_code == 3
    assert "--to NEWDIR" in refused.stderr and "--force" in refused.stderr
    assert tree(store) == before and not (tmp_path / "b0").exists()
    forced = run("recover", store, "--apply", "--force", "--backup-dir", tmp_path / "b1")
    assert forced.exit_code == 0, forced.stdout + forced.stderr
    assert not (store / "abort").exists()
    assert queue_offsets(store) == engine_truth("missing-middle-abnormal", "4.9.8")["queues"]


def test_a_store_the_broker_never_finishes_starting_is_refused_even_into_a_new_directory(tmp_path):
    # 4.9.8 start() waits forever at the gap (startReturned false): nothing to give the operator
    assert engine_truth("missing-middle-no-queues", "4.9.8")["startReturned"] is False
    store = MADE / "missing-middle-no-queues" / "input" / "store"
    r = run("recover", store, "--semantics", "4.9", "--apply", "--to", tmp_path / "new")
    assert r.exit_code == 3 and not (tmp_path / "new").exists()
