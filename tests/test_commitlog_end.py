"""Where the written commit log ends, and which segment is the last written: one answer for every reader."""
from __future__ import annotations

import json
import pathlib
import random

import pytest
from typer.testing import CliRunner

from conftest import V4, V5, load_truth
from rmqtool.cli.app import app
from rmqtool.engine.producer import producer_message
from rmqtool.engine.store import Store
from rmqtool.findings import BLANK_RECORD_MISSING
from rmqtool.inspect.inventory import store_info
from rmqtool.store.commitlog_end import CommitLog, last_file_end, last_written
from rmqtool.store.message import Message
from rmqtool.store.msgid import decode_message_id

runner = CliRunner()


def _add_preallocated_segment(commitlog: pathlib.Path, size: int) -> pathlib.Path:
    """What AllocateMappedFileService leaves: the next segment made ahead, all zero (sparse)."""
    last = max(commitlog.iterdir())
    nxt = commitlog / f"{int(last.name) + size:020d}"
    with open(nxt, "wb") as f:
        f.truncate(size)
    return nxt


def test_a_preallocated_next_segment_is_not_a_missing_blank(store_copy):
    """Failed before: CommitLog.scan took the all-zero segment for the last one and reported
    blankRecordMissing on the real last segment, while dump said the store was clean."""
    truth = load_truth(V4 / "basic" / "truth.json")
    root = store_copy(V4 / "basic" / "store")
    _add_preallocated_segment(root / "commitlog", 262144)
    cl = CommitLog(root / "commitlog")
    findings: list = []
    messages = [r for r in cl.scan(findings=findings) if isinstance(r, Message)]
    assert len(messages) == truth["truth"]["commitlog"]["messageCount"]
    assert [f.id for f in findings] == []
    assert sum(1 for _ in cl.crc_scan(findings=findings)) == len(truth["truth"]["commitlog"]["blankMarkers"])
    assert findings == []
    r = runner.invoke(app, ["dump", "commitlog", str(root), "-f", "jsonl", "--body", "none"])
    assert r.exit_code == 0, r.stderr
    r = runner.invoke(app, ["info", str(root), "-f", "json"])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["commitlog"]["max_offset"] == truth["truth"]["commitlog"]["maxPhyOffset"]
    assert doc["commitlog"]["segments"][-1]["preallocated"] is True


@pytest.mark.parametrize("variant", ["a-as-is", "b-garbled-last-message"])
def test_every_reader_agrees_on_the_end(variant):
    """The broker's crash5 stores end with a made-ahead segment; the end is the one the broker found."""
    root = V5 / "crash5" / variant / "input" / "store"
    truth = load_truth(V5 / "crash5" / variant / "truth.json")
    expected = truth["truth"]["commitlog"]["maxPhyOffset"]  # after the broker's recovery
    cl = CommitLog(root / "commitlog")
    end = last_file_end(cl.segments)
    assert end.end == expected == cl.max_offset()
    assert end.last_written == last_written(cl.segments) == len(cl.segments) - 2
    assert store_info(root)[0]["commitlog"]["max_offset"] == expected
    findings: list = []
    list(cl.scan(findings=findings))
    assert BLANK_RECORD_MISSING not in [f.id for f in findings]


def test_the_end_of_every_clean_fixture_is_the_brokers(clean_scenario):
    root, truth = clean_scenario
    cl = CommitLog(root / "store" / "commitlog")
    end = last_file_end(cl.segments)
    assert end.end == truth["truth"]["commitlog"]["maxPhyOffset"] == cl.max_offset()
    assert end.damaged_at is None and end.stopped_by is None
    last = truth["truth"]["messages"][-1] if truth["truth"].get("messages") else None
    if last is not None:
        assert end.last_message.commit_log_offset == last["physicalOffset"]
        assert end.store_host == (end.last_message.store_ip, last["storePort"])


@pytest.fixture(params=["4.9.8/basic", "4.9.8/batch", "5.3.3/v2-and-crc"])
def clean_scenario(request):
    from conftest import CLEAN_SCENARIOS
    directory = CLEAN_SCENARIOS[request.param]
    return directory, load_truth(directory / "truth.json")


def test_reopening_after_a_record_over_64_kib_keeps_the_store_host(tmp_path):
    """Failed before: the store host was looked for in the last 64 KiB only, so a larger last
    record lost it and later msgIds named the default host."""
    root = tmp_path / "store"
    host = "192.0.2.77:10977"
    big = random.Random(7).randbytes(100 * 1024)  # incompressible, and over 64 KiB stored
    with Store.open(root, writable=True, store_host=host, commitlog_size=1 << 20) as store:
        first = store.append(producer_message("T", b"small", compress=None))
        second = store.append(producer_message("T", big, compress=None))
    assert second.wrote_bytes > 64 * 1024
    with Store.open(root, writable=True) as store:
        third = store.append(producer_message("T", b"after", compress=None))
    for result in (first, second, third):
        assert decode_message_id(result.msg_id).store_host == host


def _sparse_store(tmp_path) -> tuple[pathlib.Path, str]:
    """One message in a 1 GiB commit log segment that is a hole after its first page."""
    root = tmp_path / "store"
    size = 1 << 30
    with Store.open(root, writable=True, store_host="192.0.2.10:10911", commitlog_size=size, cq_size=20 * 100,
                    index_slots=64, index_entries=256) as store:  # only the commit log is large
        store.append(producer_message("SparseTopic", b"the only message", keys="only-key"))
    for seg in (root / "commitlog").iterdir():  # rewrite as a sparse file, whatever the engine touched
        with open(seg, "rb") as f:
            data = f.read(4096) if int(seg.name) == 0 else b""  # not the whole 1 GiB read first
        seg.unlink()
        with open(seg, "wb") as f:
            f.write(data)
            f.truncate(size)
    return root, "only-key"


def _bytes_read() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


def test_time_follows_the_written_data_not_the_file_size(tmp_path):
    """A sparse 1 GiB last segment holding one message: info, dump and query read kilobytes."""
    root, key = _sparse_store(tmp_path)
    budget = 4 << 20  # a few read windows; the segment is 1 GiB
    for args in (["info", root, "-f", "json"],
                 ["dump", "commitlog", root, "-f", "jsonl"],
                 ["query", root, "--key", key, "-f", "jsonl"],
                 ["query", root, "--key", key, "--no-index", "-f", "jsonl"]):
        runner.invoke(app, [str(a) for a in args])  # imports done, caches warm: what is left is the store
        before = _bytes_read()
        r = runner.invoke(app, [str(a) for a in args])
        read = _bytes_read() - before
        assert r.exit_code == 0, (args, r.stderr)
        assert read < budget, (args, read)
    before = _bytes_read()
    end = last_file_end(CommitLog(root / "commitlog").segments)
    assert _bytes_read() - before < budget
    assert end.end == end.last_message.commit_log_offset + end.last_message.store_size
