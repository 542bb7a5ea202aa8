"""A read-only command ends its process without the interpreter's teardown once its output is
flushed (cli/common.run, cli/app.READ_ONLY): its output is all there, through a pipe and into
a reader that stops early, and its exit code is the command's. No command that writes a file
is among them.
"""
from __future__ import annotations

import json
import subprocess
import sys

from conftest import V4, load_truth
from helpers import expand_store
from rmqtool.cli import app as app_module
from rmqtool.verify.run import Verify, VerifyOptions

WRITERS = {"recover", "redispatch", "salvage", "append", "undo", "offsets", "spark", "report"}


def _rmqtool(*args, **kw):
    return subprocess.run([sys.executable, "-m", "rmqtool", *args], capture_output=True, **kw)


def test_the_read_only_commands_write_nothing_but_their_output():
    assert app_module.READ_ONLY <= set(app_module.COMMANDS)
    assert not app_module.READ_ONLY & WRITERS
    assert set(app_module.COMMANDS) - app_module.READ_ONLY == WRITERS


def test_a_dumps_rows_all_come_out(tmp_path):
    store = expand_store(V4 / "basic" / "store", tmp_path / "store")
    messages = load_truth(V4 / "basic" / "truth.json")["truth"]["messages"]
    done = _rmqtool("dump", "commitlog", str(store), "--format", "jsonl", "--body", "none", "--no-progress")
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0
    assert [r["commit_log_offset"] for r in rows if r["record"] == "message"] == [m["physicalOffset"]
                                                                                 for m in messages]


def test_verifys_findings_and_exit_code(tmp_path):
    src = V4 / "crash" / "b2-garbage-tail-of-last-message" / "input" / "store"
    store = expand_store(src, tmp_path / "store")
    expected = [f.to_json() for f in Verify(store, VerifyOptions(jobs=1)).findings()]
    done = _rmqtool("verify", str(store), "--jobs", "1", "--format", "jsonl", "--no-progress")
    assert done.returncode == 3 and [json.loads(line) for line in done.stdout.splitlines()] == expected


def test_a_reader_that_stops_early(tmp_path):
    store = expand_store(V4 / "basic" / "store", tmp_path / "store")
    shell = (f"{sys.executable} -m rmqtool dump commitlog {store} --format jsonl --no-progress | head -1; "
             "echo ${PIPESTATUS[0]}")
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True)
    first, code = done.stdout.splitlines()
    assert json.loads(first)["commit_log_offset"] == 0 and code == "0" and "Traceback" not in done.stderr
