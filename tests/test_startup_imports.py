"""A run loads what it reads (issue 27, start-up): ``dump commitlog --format jsonl`` and
``verify`` of a plain store leave in ``sys.modules`` none of the readers of the kinds and side
stores it does not have (compaction, consume queues and index for a dump, RocksDB, DLedger's
reader without a dledger-* directory, the parallel scan's multiprocessing in one process).
Each name below is a module some file used to import eagerly; putting that import back fails here. The side stores' checks still load, and find,
for a store that has one.
"""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

import rmqtool
from conftest import V4, V5
from helpers import expand_store
from test_startup import DRIVER, ENV

# what a one-process JSON Lines dump of the commit log never reads
NOT_IN_DUMP = {
    "rmqtool.inspect.compaction_dumps", "rmqtool.inspect.dump_sources", "rmqtool.inspect.cqext_rows",
    "rmqtool.inspect.dledger", "rmqtool.inspect.stats", "rmqtool.inspect.rocksdb_dumps",
    "rmqtool.store.compaction", "rmqtool.store.consumequeue", "rmqtool.store.indexfile", "rmqtool.store.cqext",
    "rmqtool.store.checkpoint", "rmqtool.store.config", "rmqtool.store.rocksdb_cq", "rmqtool.formats.compaction",
    "rmqtool.store.parallel", "multiprocessing", "queue", "rmqtool.store.dledger",
}
# what verify of a store without a compaction store or a RocksDB consume queue never reads
NOT_IN_VERIFY = {"rmqtool.verify.compaction", "rmqtool.store.compaction", "rmqtool.verify.rocksdb_cq",
                 "rmqtool.inspect.compaction_dumps", "rmqtool.inspect.dump_sources"}
# nothing of the write side, the other commands or the optional renderers in either
NEVER = ("rmqtool.engine", "rmqtool.query", "rmqtool.spark", "rmqtool.salvage", "rich", "rmqtool.report.html_page")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """{run: (exit code, the modules loaded)}, each run a fresh rmqtool process forked from one
    that imported only cli/app.py (tests/test_startup.py's driver)."""
    tmp = tmp_path_factory.mktemp("startup-imports")
    v4 = expand_store(V4 / "basic" / "store", tmp / "v4")
    compaction = expand_store(V5 / "compaction" / "store", tmp / "compaction")
    runs = {"dump": ["dump", "commitlog", str(v4), "--format", "jsonl", "--body", "none", "--limit", "1",
                     "--no-progress"],
            "verify": ["verify", str(v4), "--jobs", "2"],
            "verify compaction": ["verify", str(compaction), "--only", "compaction"]}
    tree = str(pathlib.Path(rmqtool.__file__).parent.parent)  # the rmqtool under test, wherever it is installed
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(list(runs.values()))], capture_output=True,
                          text=True, timeout=120, cwd=tree, env={**ENV, "PATH": "/usr/bin:/bin", "PYTHONPATH": tree})
    assert done.returncode == 0, done.stderr
    return {name: (code, set(modules)) for name, (code, modules) in zip(runs, json.loads(done.stdout))}


def _never(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith(NEVER)}


def test_a_jsonl_dump_loads_no_other_kind(loaded):
    code, modules = loaded["dump"]
    assert code == 0
    assert "rmqtool.inspect.commitlog_dump" in modules  # the dump ran
    assert not NOT_IN_DUMP & modules, sorted(NOT_IN_DUMP & modules)
    assert not {m for m in modules if m.startswith(("rmqtool.verify", "rmqtool.recovery", "rmqtool.dispatch"))}
    assert not _never(modules)


def test_verify_of_a_plain_store_loads_no_side_store_check(loaded):
    code, modules = loaded["verify"]
    assert code == 0
    assert {"rmqtool.verify.run", "rmqtool.verify.commitlog"} <= modules  # the run ran
    assert not NOT_IN_VERIFY & modules
    assert not _never(modules)


def test_a_compaction_store_is_still_checked(loaded):
    """The guard that skips the compaction check's import lets a store with compaction/ through
    (tests/test_compaction.py checks its findings)."""
    code, modules = loaded["verify compaction"]
    assert code in (0, 3)
    assert {"rmqtool.verify.compaction", "rmqtool.store.compaction"} <= modules


