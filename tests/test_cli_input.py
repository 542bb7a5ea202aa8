"""Input checked, errors in one line: usage errors, times, ranges, broken pipes (issue 10)."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from rmqtool.errors import ExitCode

STORE = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "rocketmq-4.9.8" / "basic" / "store"
TRUTH = json.loads((STORE.parent / "truth.json").read_text())


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from rmqtool.cli.app import main; main()", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, names", [
    (["dump", "commitlog", "--limit", "x", str(STORE)], "--limit"),
    (["dump", "commitlog", "--bogus", str(STORE)], "--bogus"),
    (["query", str(STORE)], "--help"),
    (["info"], "'store"),
])
def test_usage_errors_are_one_line_exit_2(args, names):
    done = run(*args)
    assert done.returncode == ExitCode.USAGE
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("rmqtool ") and "error:" in lines[0]
    assert names.lower() in lines[0].lower() and "--help" in lines[0]  # an argument by its name or metavar
    assert "╭" not in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_epoch_seconds_refused_with_a_hint():
    done = run("dump", "commitlog", "--begin-time", "1700000000", str(STORE))
    assert done.returncode == ExitCode.USAGE
    assert "1700000000000" in done.stderr and "seconds" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [
    ["--from-offset", "10", "--to-offset", "5"],
    ["--begin-time", "2024-01-02T00:00:00", "--end-time", "2024-01-01T00:00:00"],
])
def test_reversed_ranges_are_usage_errors(args):
    done = run("dump", "commitlog", *args, str(STORE))
    assert done.returncode == ExitCode.USAGE
    assert "is after" in done.stderr and done.stdout == ""


def test_closed_pipe_is_not_an_error():
    assert TRUTH, "fixture truth must exist"
    cmd = (f"{sys.executable} -c 'from rmqtool.cli.app import main; main()' "
           f"dump commitlog --format jsonl {STORE} | head -1")
    done = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert len(done.stdout.splitlines()) == 1
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert done.returncode == ExitCode.OK


def test_permission_text_not_doubled():
    from rmqtool.store import commitlog, segments
    for module in (commitlog, segments):
        assert "permission denied ({exc.strerror})" not in pathlib.Path(module.__file__).read_text()


@pytest.mark.parametrize("args", [
    ["dump", "commitlog", "--queue", "-1", str(STORE)],
    ["dump", "commitlog", "-q", "-1", str(STORE)],
    ["query", str(STORE), "--key", "a", "--begin-time", "2024-01-02T00:00:00Z", "--end-time", "2024-01-01T00:00:00Z"],
])
def test_negative_queue_and_reversed_query_range_are_usage_errors(args):
    done = run(*args)
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "--help" in done.stderr
