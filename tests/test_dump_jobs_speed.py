"""The parallel JSON Lines dump after its speed work (the row writer made once, before the
workers fork; freed memory kept in the heap between jobs) writes what one process writes: the
same bytes, findings and damage count, with the kernel and without, with several workers, jobs
cut inside records, and --limit cut inside a job."""
from __future__ import annotations

import io
import pathlib

import pytest

from conftest import CLEAN_SCENARIOS, V4
from helpers import expand_store
from rmqtool import native
from rmqtool.inspect.commitlog_dump import CommitLogDump
from rmqtool.inspect import commitlog_dumps as commitlog_dumps_module
from rmqtool.inspect.commitlog_dumps import chained, commitlog_dumps, parallel_jsonl
from rmqtool.inspect.selection import MessageSelection
from rmqtool.report.sink import Sink
from rmqtool.store import heap

DAMAGED = V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file" / "input"
SPLIT = 48_000  # bytes a job: many jobs a segment, cut inside records


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> list[pathlib.Path]:
    damaged = expand_store(DAMAGED, tmp_path_factory.mktemp("damaged") / "input") / "store"
    return [CLEAN_SCENARIOS["5.3.3/v2-and-crc"] / "store", CLEAN_SCENARIOS["4.9.8/batch"] / "store", damaged]


def _one_process(store, limit, body) -> tuple[bytes, list, int]:
    dumps, _ = commitlog_dumps([store], MessageSelection(), None, None, limit, body=body)
    out = io.StringIO()
    sink = Sink("jsonl", out)
    sink.rows(chained(dumps, limit, None, encoded=True))
    sink.close()
    return out.getvalue().encode(), [f for d in dumps for f in d.findings], sum(d.damaged for d in dumps)


def _workers(store, limit, body, workers, tmp_path, monkeypatch) -> tuple[bytes, list, int]:
    """parallel_jsonl as the CLI runs it, into a real file (the sink copies the workers' spool files)."""
    monkeypatch.setattr("rmqtool.inspect.commitlog_dump.PARALLEL_SPLIT", SPLIT)
    monkeypatch.setattr("rmqtool.inspect.commitlog_dump.LIMITED_SPLIT", SPLIT)
    dumps, _ = commitlog_dumps([store], MessageSelection(), None, None, limit, body=body)
    path = tmp_path / f"out-{workers}-{limit}-{body}.jsonl"
    with open(path, "w") as out:
        sink = Sink("jsonl", out)
        parallel_jsonl(sink, dumps, limit, workers, None)
        sink.close()
    return path.read_bytes(), [f for d in dumps for f in d.findings], sum(d.damaged for d in dumps)


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "pure"])
def test_workers_write_the_one_process_bytes(stores, tmp_path, monkeypatch, kernel):
    if not kernel:
        monkeypatch.setattr(native, "kernel", None)
    for store in stores if kernel else stores[::2]:
        for body, limit in (("base64", None), ("none", 333)):
            one = _one_process(store, limit, body)
            assert one[0].count(b"\n") > 20
            assert _workers(store, limit, body, 3, tmp_path, monkeypatch) == one, (store, body, limit)
            if store == stores[-1] and limit is None:  # the damaged record's row and finding
                assert b'"body_crc_ok":false' in one[0] and one[1] and one[2] >= 1


def test_the_row_writer_is_made_once_for_all_jobs(monkeypatch):
    """Made in the parent before the workers fork (the import of numpy and the kernel's row
    layout once, not in every worker's first job): one row_run a dump, however many jobs."""
    made = []
    row_run = CommitLogDump.row_run

    def counted(self):
        made.append(1)
        return row_run(self)
    monkeypatch.setattr(CommitLogDump, "row_run", counted)
    d = CommitLogDump(CLEAN_SCENARIOS["5.3.3/v2-and-crc"] / "store", body="none")
    files = list(d.jsonl_files(1, split_size=SPLIT))
    assert len(files) > 3 and made == [1]


def test_keeping_freed_memory_is_said_and_idempotent():
    kept = heap.keep_freed_memory()
    assert isinstance(kept, bool) and heap.keep_freed_memory() == kept


def test_the_default_jobs(monkeypatch):
    """By default a large dump runs in every core, but not one whose rows the kernel writes with
    base64 bodies (their spool copies cost more than the second process gives); -j as given."""
    monkeypatch.setattr(commitlog_dumps_module, "default_workers", lambda: 2)
    monkeypatch.setattr(commitlog_dumps_module, "PARALLEL_FROM_BYTES", 1)
    store = CLEAN_SCENARIOS["5.3.3/v2-and-crc"] / "store"

    def dumps(body):
        return commitlog_dumps([store], MessageSelection(), None, None, None, body=body)[0]
    assert commitlog_dumps_module.in_parallel(None, dumps("none"), None)
    assert commitlog_dumps_module.in_parallel(None, dumps("base64"), None) is (native.kernel is None)
    assert commitlog_dumps_module.in_parallel(2, dumps("base64"), None)
    assert not commitlog_dumps_module.in_parallel(1, dumps("none"), None)
    assert not commitlog_dumps_module.in_parallel(None, dumps("none"), 10)  # a small --limit
    monkeypatch.setattr(native, "kernel", None)  # the Python rows: every core
    assert commitlog_dumps_module.in_parallel(None, dumps("base64"), None)
