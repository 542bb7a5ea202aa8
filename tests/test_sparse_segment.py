"""A store holding one message in a sparse 1 GiB segment (what the engine and the broker make)
is read to its written end, not to the file's size: info, dump and verify read a few
bytes of it, not a gigabyte of zeros."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rmqtool.cli.app import app


def _bytes_read() -> int:
    with open("/proc/self/io") as f:  # rchar: every byte this process read through read/pread
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


@pytest.fixture(scope="module")
def sparse_store(tmp_path_factory):
    store = tmp_path_factory.mktemp("sparse") / "store"
    r = CliRunner().invoke(app, ["append", str(store), "--create", "-t", "T", "--body", "one"])
    assert r.exit_code == 0, r.stderr
    segment = next((store / "commitlog").iterdir())
    assert segment.stat().st_size == 1 << 30 and segment.stat().st_blocks * 512 < 16 << 20  # sparse
    return store


@pytest.mark.parametrize("command", [["info"], ["dump", "commitlog"], ["verify", "--no-progress", "--jobs", "1"]],
                         ids=" ".join)
def test_one_message_in_a_sparse_segment_reads_little(sparse_store, command):
    runner = CliRunner()
    runner.invoke(app, [*command, str(sparse_store)])  # warm: imports and caches out of the count
    before = _bytes_read()
    r = runner.invoke(app, [*command, str(sparse_store), "-f", "jsonl"])
    read = _bytes_read() - before
    assert r.exit_code == 0, r.stderr
    assert read < 64 << 20, f"{read:,} bytes read for one message"
