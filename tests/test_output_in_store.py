"""A command never writes its output inside a store it reads (store/output_path.py).

``report --html`` and ``check --prometheus`` named a commit log segment or the checkpoint
and replaced it (262144 bytes of a segment became a page of HTML), on a store a running
broker held too; ``salvage --out``/``--to-store`` and ``recover --to`` wrote among the
store's files. Each output path is compared by its real path (a relative path, a symbolic
link, ``..``, a file not there yet) with the store's root, its entries and its commit log
directories, and refused before anything is written: a usage error (2) in one line, and for
check (Nagios's codes) its status line, UNKNOWN, and the reason on stderr.
"""
from __future__ import annotations

import json
import os

import pytest

from conftest import FIXTURES, V4
from helpers import cli_runner, expand_store, lock_held_elsewhere, tree_fingerprint, writable_copy
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode
from rmqtool.inspect.check import State

BASIC = V4 / "basic"
TRUTH = json.loads((BASIC / "truth.json").read_text())
# the store's files as the broker left them: the last commit log segment and the checkpoint
FILES = [f["path"] for f in TRUTH["onDiskAfterShutdown"]["files"]]
LAST_SEGMENT = max(p for p in FILES if p.startswith("commitlog/"))
CHECKPOINT = next(p for p in FILES if p == "checkpoint")
NOW = max(m["storeTimestamp"] for m in TRUTH["truth"]["messages"]) + 1000


def run(*args):
    return cli_runner().invoke(app, list(map(str, args)))


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative paths below are from here
    return writable_copy(BASIC / "store", tmp_path / "store")


def inside(store, tmp_path, name: str) -> list:
    """Ways to name a place inside ``store``: an existing segment, the checkpoint, a new file in
    commitlog/, the root itself, a relative path, one through a symbolic link outside the
    store, one with ``..`` that comes back into it."""
    link = tmp_path / "elsewhere"
    if not link.is_symlink():
        link.symlink_to(store / "commitlog")
    return [store / LAST_SEGMENT, store / CHECKPOINT, store / "commitlog" / name, store,
            os.path.relpath(store / "index" / name), link / name, store / "consumequeue" / ".." / name]


def test_report_html_inside_the_store_is_refused_and_nothing_is_written(store, tmp_path):
    before = tree_fingerprint(store)
    with lock_held_elsewhere(store / "lock"):  # as on a store a running broker holds
        for out in inside(store, tmp_path, "page.html"):
            r = run("report", store, "--html", out)
            assert r.exit_code == ExitCode.USAGE, (out, r.output)
            assert len(r.stderr.splitlines()) == 1 and "--html lies inside the store" in r.stderr, r.stderr
            assert r.stdout == ""
    assert tree_fingerprint(store) == before


def test_report_html_beside_the_store_is_written(store, tmp_path):
    """A name that only starts as the store's does is outside it."""
    r = run("report", store, "--html", tmp_path / "store.html")
    assert r.exit_code in (ExitCode.OK, ExitCode.CORRUPT), r.output
    assert (tmp_path / "store.html").read_text().startswith("<!DOCTYPE html>")


def test_check_prometheus_inside_the_store_is_not_written_and_the_status_still_said(store, tmp_path):
    before = tree_fingerprint(store)
    with lock_held_elsewhere(store / "lock"):
        for out in inside(store, tmp_path, "rmqtool.prom"):
            r = run("check", store, "--prometheus", out, "--now", NOW)
            assert r.exit_code == State.UNKNOWN, (out, r.output)
            assert r.stdout.startswith("RMQTOOL CHECK UNKNOWN - ") and len(r.stdout.splitlines()) == 1, r.stdout
            assert len(r.stderr.splitlines()) == 1 and "--prometheus lies inside the store" in r.stderr, r.stderr
    assert tree_fingerprint(store) == before


def test_salvage_into_its_own_store_is_refused(store, tmp_path):
    before = tree_fingerprint(store)
    for option, name in (("--out", "salvaged.jsonl"), ("--to-store", "salvaged")):
        for out in inside(store, tmp_path, name):
            r = run("salvage", store, option, out)
            assert r.exit_code == ExitCode.USAGE, (option, out, r.output)
            assert len(r.stderr.splitlines()) == 1 and f"{option} lies inside the store" in r.stderr, r.stderr
    assert tree_fingerprint(store) == before


def test_recover_to_a_copy_inside_the_store_is_refused(store, tmp_path):
    before = tree_fingerprint(store)
    for out in (store / "repaired", store / "commitlog" / "repaired", tmp_path / "elsewhere-repaired"):
        if out.name == "elsewhere-repaired":  # through a link into the store
            (tmp_path / "link").symlink_to(store)
            out = tmp_path / "link" / "repaired"
        r = run("recover", store, "--apply", "--to", out)
        assert r.exit_code == ExitCode.USAGE, (out, r.output)
        assert "--to lies inside the store" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert tree_fingerprint(store) == before


def test_a_commit_log_on_another_disk_is_the_store_too(tmp_path):
    """storePathCommitLog elsewhere (the store's config/broker.properties names the disks): a
    page or a Prometheus file among those files is refused."""
    from helpers import split_commit_log
    size = TRUTH["messageStoreConfig"]["effectiveGetterValues"]["mappedFileSizeCommitLog"]
    store, disks = split_commit_log(BASIC / "store", tmp_path / "split", size)
    (store / "config").mkdir(exist_ok=True)
    (store / "config" / "broker.properties").write_text(f"storePathCommitLog={disks[0]},{disks[1]}\n")
    before = {d: tree_fingerprint(d) for d in disks}
    segment = min(disks[1].iterdir())
    for command, option in (("report", "--html"), ("check", "--prometheus")):
        r = run(command, store, option, segment)
        assert f"{option} lies inside the store" in r.stderr, r.output
    assert {d: tree_fingerprint(d) for d in disks} == before


def test_a_qmq_store_is_refused_alike(tmp_path):
    store = expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "qmq")
    before = tree_fingerprint(store)
    for args in (("report", store, "--html", store / "messagelog" / "page.html"),
                 ("salvage", store, "--out", store / "salvaged.jsonl")):
        r = run(*args)
        assert r.exit_code == ExitCode.USAGE and "lies inside the store" in r.stderr, r.output
    assert tree_fingerprint(store) == before
