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
import shutil

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, V4, V5, load_truth
from rmqtool.cli.app import app
from rmqtool.store.indexfile import IndexFile, index_file_paths

MADE = FIXTURES / "crash-made"


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def copy(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    return dst


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
    assert r.exit_code == 0, r.stdout
    assert doc["needs_recovery"] is False and doc["actions"] == []
    assert doc["mode"] == "abnormal"
    assert doc["index_files_destroyed"] and doc["index_rebuild"]["rebuilt_as_is"] is True


@pytest.mark.parametrize("variant", [V4 / "crash" / "a-as-is", V5 / "crash5" / "a-as-is"],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_from_checkpoint_apply_twice_changes_no_byte(variant, tmp_path):
    store = copy(variant / "input" / "store", tmp_path / "store")
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
    assert "repeat keys" in run("recover", variant / "input" / "store").stdout
