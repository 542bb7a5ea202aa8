"""A FIFO (or a socket, a device) where a store file belongs: every command says so or reads
past it, never waits on it for ever (an open for reading of a FIFO blocks until a writer comes).

Each case runs the command in its own process with a timeout: a hang fails the test."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import FIXTURES, REPO, V4
from helpers import expand_store, writable_copy

DOCUMENTED = {0, 1, 2, 3, 4, 5, 8}
CHECK_CODES = {0, 1, 2, 3}  # Nagios's


def _rmqtool(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqtool", *map(str, args)], capture_output=True, text=True,
                          timeout=60, cwd=REPO)


def _fifo_at(store, name: str) -> None:
    path = store / name
    if path.exists():
        path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize("name", ["lock", "checkpoint", "abort", "config/consumerOffset.json",
                                  "commitlog/00000000000099999999"])
def test_a_fifo_in_a_rocketmq_store(tmp_path, name):
    store = writable_copy(V4 / "basic" / "store", tmp_path / "store")
    (store / "config").mkdir(exist_ok=True)
    _fifo_at(store, name)
    for command in (("info",), ("verify",), ("recover",), ("offsets",), ("report",), ("query", "--key", "k"),
                    ("check",)):
        r = _rmqtool(*command, store)
        assert r.returncode in (CHECK_CODES if command == ("check",) else DOCUMENTED), (command, r.stderr)
        assert "Traceback" not in r.stderr, (command, r.stderr)
        errors = [line for line in r.stderr.splitlines() if line.startswith("rmqtool: error")]
        assert len(errors) <= 1 and all("FIFO" in line for line in errors), (command, r.stderr)
    writer = _rmqtool("append", store, "--topic", "T", "--body", "x")
    assert writer.returncode in DOCUMENTED - {0} or name != "lock", writer.stderr
    if name == "lock":
        assert "FIFO where the lock file should be" in writer.stderr


def test_a_fifo_for_a_qmq_checkpoint(tmp_path):
    store = expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "store")
    newest = sorted(p.name for p in (store / "checkpoint").iterdir() if p.name.startswith("message-checkpoint"))[-1]
    _fifo_at(store, f"checkpoint/{newest}")
    for command in ("info", "verify", "recover", "report"):
        r = _rmqtool(command, store)
        assert r.returncode in DOCUMENTED and "Traceback" not in r.stderr, (command, r.stderr)


@pytest.mark.parametrize("kind", ["commitlog", "checkpoint", "consumequeue", "index", "config", "timerlog",
                                  "timercheck"])
def test_a_fifo_given_as_the_path(tmp_path, kind):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = _rmqtool("dump", kind, fifo)
    assert r.returncode == 4 and r.stderr.count("\n") == 1 and "a FIFO" in r.stderr, r.stderr
