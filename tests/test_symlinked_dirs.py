"""A store whose commitlog/, consumequeue/ and index/ (QMQ: messagelog/, consumerlog/,
actionlog/) are symlinks to another disk, as operators move them: the broker lists through
the links, and so must a repair's backup. Each repair of such a store leaves the store's
files as the same repair of the plain store does, and undo gives back every byte and name,
the links still links. Before, the backup's listing stopped at the links, so undo left the
index files and queue directories the repair made behind them; a QMQ recover and a redispatch
stopped with a traceback naming a file outside the store."""
from __future__ import annotations

import json
import os
import pathlib
import shutil

import pytest

from conftest import FIXTURES
from helpers import cli_runner, expand_store, file_fingerprint
from rmqtool.cli.app import app
from rmqtool.recovery.manifest import MANIFEST_NAME
from rmqtool.store.tree import files_and_directories

ROCKETMQ_DIRS = ("commitlog", "consumequeue", "index")
QMQ_DIRS = ("messagelog", "consumerlog", "actionlog")
CRASH = FIXTURES / "rocketmq-4.9.8" / "crash"


def _run(*argv, codes=(0,)):
    r = cli_runner().invoke(app, [str(a) for a in argv])
    assert r.exit_code in codes, (argv, r.exit_code, r.stdout, r.stderr)
    return r


def _linked(src: pathlib.Path, base: pathlib.Path, dirs) -> pathlib.Path:
    """The store expanded at base/store, each of ``dirs`` moved to base/disk2 with a symlink left."""
    store = expand_store(src, base / "store")
    (base / "disk2").mkdir()
    for d in dirs:
        if (store / d).is_dir():
            shutil.move(str(store / d), str(base / "disk2" / d))
            os.symlink(base / "disk2" / d, store / d)
    return store


def _through(root: pathlib.Path) -> dict:
    """Every file (fingerprinted) and directory under ``root``, through its symlinks."""
    out = {}
    for top, dirs, files in os.walk(root, followlinks=True):
        rel = pathlib.Path(top).relative_to(root)
        out.update({str(rel / d): "dir" for d in dirs})
        out.update({str(rel / f): file_fingerprint(pathlib.Path(top, f)) for f in files})
    return out


def _without_index_names(tree: dict) -> dict:
    """Index files are named by the time they are made: compared by their contents only."""
    kept = {k: v for k, v in tree.items() if not k.startswith("index/")}
    kept["index/*"] = sorted(v for k, v in tree.items() if k.startswith("index/"))
    return kept


@pytest.mark.parametrize("case", ["a-as-is", "c1-delete-cq-queue-dir", "c2-delete-last-cq-file"])
def test_recover_and_undo_through_symlinked_directories(tmp_path, case):
    src = CRASH / case / "input" / "store"
    plain = expand_store(src, tmp_path / "plain")
    store = _linked(src, tmp_path / "linked", ROCKETMQ_DIRS)
    before = _through(store)
    assert before == _through(plain)
    _run("recover", plain, "--apply", "--backup-dir", tmp_path / "plain-backup", "--semantics", "4.9")
    _run("recover", store, "--apply", "--backup-dir", tmp_path / "backup", "--semantics", "4.9")
    after = _through(store)
    assert _without_index_names(after) == _without_index_names(_through(plain))
    assert set(after) - set(before), "the repair made no file behind the links: the case tests nothing"
    manifest = json.loads((tmp_path / "backup" / MANIFEST_NAME).read_text())
    assert manifest["listing_through_links"] is True
    _run("undo", tmp_path / "backup")
    assert _through(store) == before
    assert all((store / d).is_symlink() for d in ROCKETMQ_DIRS)


def test_redispatch_and_undo_through_symlinked_directories(tmp_path):
    store = _linked(CRASH / "c3-truncate-cq-file" / "input" / "store", tmp_path, ROCKETMQ_DIRS)
    before = _through(store)
    r = _run("redispatch", store, "--apply", "--backup-dir", tmp_path / "backup", "--semantics", "4.9",
             "--assume-defaults")
    assert "Traceback" not in r.stderr
    assert _through(store) != before
    _run("undo", tmp_path / "backup")
    assert _through(store) == before
    assert all((store / d).is_symlink() for d in ROCKETMQ_DIRS)


@pytest.mark.parametrize("case", ["d-flipped-payload-byte-mid-log", "j-torn-last-record", "e-deleted-consumerlog-file"])
def test_qmq_recover_and_undo_through_symlinked_directories(tmp_path, case):
    src = FIXTURES / "qmq" / "crash" / case / "input"
    plain = expand_store(src, tmp_path / "plain")
    store = _linked(src, tmp_path / "linked", QMQ_DIRS)
    before = _through(store)
    codes = (0, 3)  # 3: applied, and records are lost (the plan says which)
    p = _run("recover", plain, "--apply", "--backup-dir", tmp_path / "plain-backup", codes=codes)
    r = _run("recover", store, "--apply", "--backup-dir", tmp_path / "backup", codes=codes)
    assert r.exit_code == p.exit_code
    assert _through(store) == _through(plain)
    assert _through(store) != before
    _run("undo", tmp_path / "backup")
    assert _through(store) == before
    assert all((store / d).is_symlink() for d in QMQ_DIRS if (tmp_path / "linked" / "disk2" / d).exists())


def test_a_backup_listed_before_links_were_followed_keeps_what_it_never_listed(tmp_path):
    """A backup from before (no ``listing_through_links``) named none of the files behind the
    links: undo lists the store as it did then, and removes none of them as made since (the
    commit log's files were among them)."""
    store = _linked(CRASH / "a-as-is" / "input" / "store", tmp_path, ROCKETMQ_DIRS)
    segments = sorted(p.name for p in (store / "commitlog").iterdir())
    _run("recover", store, "--apply", "--backup-dir", tmp_path / "backup", "--semantics", "4.9")
    path = tmp_path / "backup" / MANIFEST_NAME
    doc = json.loads(path.read_text())
    del doc["listing_through_links"]
    behind = tuple(d + "/" for d in ROCKETMQ_DIRS)
    doc["listing"] = [n for n in doc["listing"] if not n.startswith(behind)]
    doc["directories"] = [n for n in doc["directories"] if not n.startswith(behind)]
    doc["after"]["listing"] = [n for n in doc["after"]["listing"] if not n.startswith(behind)]
    doc["after"]["directories"] = [n for n in doc["after"]["directories"] if not n.startswith(behind)]
    doc["after"]["files"] = {k: v for k, v in doc["after"]["files"].items() if not k.startswith(behind)}
    path.write_text(json.dumps(doc))
    _run("undo", tmp_path / "backup")
    assert sorted(p.name for p in (store / "commitlog").iterdir()) == segments
    assert any((store / "consumequeue").rglob("0*"))


def test_check_counts_the_files_behind_links_once(tmp_path):
    src = CRASH / "a-as-is" / "input" / "store"
    plain = expand_store(src, tmp_path / "plain")
    store = _linked(src, tmp_path / "linked", ROCKETMQ_DIRS)
    os.symlink(store / "commitlog", store / "commitlog-again")  # a second name for the same files

    def allocated(root):
        r = _run("check", root, "-f", "json", codes=(0, 1, 2, 3))
        return next(m["value"] for m in json.loads(r.stdout) if m.get("measure") == "store_allocated_bytes")

    assert allocated(store) == allocated(plain) > 0


def test_the_walk_ends_on_a_link_to_a_directory_above(tmp_path):
    root = tmp_path / "store"
    (root / "commitlog").mkdir(parents=True)
    (root / "commitlog" / "00000000000000000000").write_bytes(b"x")
    os.symlink(root, root / "commitlog" / "up")
    os.symlink(root / "commitlog", root / "also")
    files, dirs = files_and_directories(root)
    assert files == ["also/00000000000000000000"] or files == ["commitlog/00000000000000000000"]
    assert dirs == ["commitlog"]
