"""dump commitlog --format jsonl over worker processes (-j 2) prints exactly what one
process prints: rows in commit log order, the same findings on stderr, the same exit
code, --limit cut at the same row; also through a real pipe (the kernel copies the
workers' rows) that the reader closes early."""
from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import CLEAN_SCENARIOS, V4
from rmqtool.cli.app import app
from rmqtool.inspect import commitlog_dump

CRASHED = [V4 / "crash" / name / "input" / "store" for name in (
    "b2-garbage-tail-of-last-message", "e3-corrupt-body-in-second-to-last-commitlog-file")]
STORES = [d / "store" for d in CLEAN_SCENARIOS.values()] + CRASHED
runner = CliRunner()


@pytest.fixture(autouse=True)
def small_jobs(monkeypatch):
    monkeypatch.setattr(commitlog_dump, "PARALLEL_SPLIT", 40_000)  # many jobs a segment, cut inside records


def _dump(*args: str):
    r = runner.invoke(app, ["dump", "commitlog", *args, "-f", "jsonl"])
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.parametrize("store", STORES, ids=lambda p: "/".join(p.parts[-4:]))
def test_workers_print_what_one_process_prints(store):
    one = _dump(str(store), "-j", "1")
    two = _dump(str(store), "-j", "2")
    assert two == one
    assert one[1].count("\n") > 10


@pytest.mark.parametrize("limit", [1, 7, 400, 100_000])
def test_a_limit_cuts_at_the_same_row(limit):
    store = str(V4 / "basic" / "store")
    assert _dump(store, "-j", "2", "-n", str(limit)) == _dump(store, "-j", "1", "-n", str(limit))


def test_a_selection_and_several_paths():
    store = V4 / "basic" / "store"
    segments = sorted(str(p) for p in (store / "commitlog").iterdir())
    args = ["-t", "OrderTopic", "--body", "none", *segments]
    assert _dump(*args, "-j", "2") == _dump(*args, "-j", "1")


def test_through_a_pipe_closed_early():
    store = str(V4 / "basic" / "store")
    whole = subprocess.run([sys.executable, "-m", "rmqtool", "dump", "commitlog", store, "-f", "jsonl", "-j", "2"],
                           capture_output=True, timeout=120)
    one = subprocess.run([sys.executable, "-m", "rmqtool", "dump", "commitlog", store, "-f", "jsonl", "-j", "1"],
                         capture_output=True, timeout=120)
    assert whole.returncode == one.returncode == 0 and whole.stdout == one.stdout
    head = subprocess.run(f"{sys.executable} -m rmqtool dump commitlog {store} -f jsonl -j 2 | head -3",
                          shell=True, capture_output=True, timeout=120)
    assert head.stdout.splitlines() == one.stdout.splitlines()[:3]
    assert b"Traceback" not in head.stderr
