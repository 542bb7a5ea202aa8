"""Scanning segments in worker processes gives what one serial scan gives, in order."""
from __future__ import annotations

import functools
import pathlib

import pytest

from conftest import V4, load_truth
from rmqtool.errors import StoreAccessError, UsageError
from rmqtool.store.commitlog import Blank, Corrupt
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import Message
from rmqtool.store.parallel import (SegmentJob, SegmentSummary, iter_parallel, parallel_scan, segment_jobs,
                                    summarize_segment)
from benchmarks.gen import GenSpec, build_commitlog
from helpers import canonical, copy_tree


def all_results(job: SegmentJob) -> tuple[list, list]:
    """Every result of one segment, canonical, and its findings: what the tests compare."""
    findings: list = []
    results = [canonical(r) for r in job.scan(findings)]
    return results, [f.to_json() for f in findings]


def first_message_offset(job: SegmentJob, add: int = 0):
    for r in job.scan():
        if isinstance(r, Message):
            return r.commit_log_offset + add
    return None


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    spec = GenSpec(segment_size=48 << 10, segments=5, body_size=700, queues=3, ipv6_queues=(2,))
    return build_commitlog(tmp_path_factory.mktemp("parallel") / "commitlog", spec)


def _serial(log: CommitLog, **kw) -> tuple[list, list]:
    findings: list = []
    return [canonical(r) for r in log.scan(findings=findings, **kw)], [f.to_json() for f in findings]


def _joined(parts: list[tuple[list, list]]) -> tuple[list, list]:
    return [r for p in parts for r in p[0]], [f for p in parts for f in p[1]]


@pytest.mark.parametrize("workers", [1, 2, 3, None])
def test_parallel_scan_equals_serial_scan(store, workers):
    log = CommitLog(store.commitlog)
    parts = parallel_scan(log, all_results, workers=workers)
    assert len(parts) == len(log.segments) == 5
    assert _joined(parts) == _serial(log)
    assert sum(1 for p in parts for r in p[0] if r[0] == "message") == store.message_count


def test_summaries_in_segment_order(store):
    log = CommitLog(store.commitlog)
    summaries = parallel_scan(log, summarize_segment, workers=2)
    assert [s.base_offset for s in summaries] == [seg.base_offset for seg in log.segments]
    assert all(isinstance(s, SegmentSummary) and s.clean for s in summaries)
    assert [s.messages for s in summaries] == [s.messages for s in store.segments]
    assert [s.message_bytes for s in summaries] == [s.record_bytes for s in store.segments]
    assert [s.first_offset for s in summaries] == [s.base_offset for s in store.segments]
    assert [s.end_offset for s in summaries] == [s.base_offset + s.record_bytes for s in store.segments]
    assert [s.blank.position for s in summaries] == [s.blank_position for s in store.segments]
    spec = store.spec
    assert [s.first_store_timestamp for s in summaries] == [spec.store_timestamp(s.first_message)
                                                            for s in store.segments]
    assert [s.last_store_timestamp for s in summaries] == [
        spec.store_timestamp(s.first_message + s.messages - 1) for s in store.segments]
    assert summaries == parallel_scan(log, summarize_segment, workers=1)


def test_parallel_scan_of_damaged_broker_stores():
    """Truncated, garbled and zeroed commit logs written by the real broker: the same regions, findings."""
    for variant in ("b1-truncate-last-commitlog-mid-message", "b2-garbage-tail-of-last-message",
                    "b3-zeroed-last-3-messages", "e2-corrupt-body-in-first-commitlog-file"):
        matches = list((V4 / "crash").glob(f"{variant}*/input/store/commitlog"))
        assert matches, variant
        log = CommitLog(matches[0])
        parts = parallel_scan(log, all_results, workers=2)
        assert _joined(parts) == _serial(log)
        summaries = parallel_scan(log, summarize_segment, workers=2)
        damaged = [s for s in summaries if not s.clean]
        if variant.startswith("b3"):
            # zeros at the end of the last written segment look like space not yet written: the
            # commit log alone cannot tell (the consume queues can); it ends where the zeros begin
            assert not damaged
            mutation = load_truth(matches[0].parent.parent.parent / "truth.json")["mutation"]
            assert max(s.end_offset for s in summaries if s.end_offset) == mutation["zeroedFromPhysicalOffset"]
        else:
            assert damaged, variant
        serial = list(log.scan())
        assert [c for s in summaries for c in s.corrupt] == [r for r in serial if isinstance(r, Corrupt)]
        assert sum(s.body_crc_failures for s in summaries) == sum(
            1 for r in serial if isinstance(r, Message) and r.body_crc_ok is False)


def test_offset_range_matches_commitlog_scan(store):
    log = CommitLog(store.commitlog)
    jobs = segment_jobs(log)
    lo = first_message_offset(jobs[1])  # a record start inside the range
    hi = store.segments[3].base_offset + 10_000
    parts = parallel_scan(log, all_results, workers=2, from_offset=lo, to_offset=hi)
    assert len(parts) == 3
    assert _joined(parts) == _serial(log, from_offset=lo, to_offset=hi)
    check = segment_jobs(log, lo, hi, check_crc=False)
    assert [(j.index, j.start, j.end_offset, j.check_crc, j.is_last) for j in check] == [
        (1, 0, hi, False, False), (2, 0, hi, False, False), (3, 0, hi, False, False)]
    assert segment_jobs(log)[-1].is_last and not segment_jobs(log)[0].is_last


def test_per_segment_function_with_arguments(store):
    log = CommitLog(store.commitlog)
    offsets = parallel_scan(log, functools.partial(first_message_offset, add=1), workers=2)
    assert offsets == [s.base_offset + 1 for s in store.segments]
    assert list(iter_parallel(segment_jobs(log)[:2], first_message_offset, workers=2)) == [
        s.base_offset for s in store.segments[:2]]


def test_worker_errors_come_back_with_file(tmp_path, store):
    copy = tmp_path / "commitlog"
    copy_tree(store.commitlog, copy)
    log = CommitLog(copy)
    gone = log.segments[2].path
    gone.unlink()  # vanished between listing and reading
    with pytest.raises(StoreAccessError) as info:
        parallel_scan(log, summarize_segment, workers=2)
    assert info.value.path == str(gone) and str(gone) in info.value.one_line()
    with pytest.raises(UsageError):
        parallel_scan(log, summarize_segment, workers=0)


def test_no_segments_no_work(tmp_path):
    (tmp_path / "commitlog").mkdir()
    assert parallel_scan(CommitLog(tmp_path / "commitlog"), summarize_segment, workers=2) == []


def test_blank_and_corrupt_results_survive_pickling(store):
    log = CommitLog(store.commitlog)
    summaries = parallel_scan(log, summarize_segment, workers=2)
    assert all(isinstance(s.blank, Blank) and s.blank.valid for s in summaries)


def _die_in_a_child(parent_pid: int, marker: str, job: SegmentJob) -> int:
    import os
    import pathlib
    import time
    if os.getpid() != parent_pid:
        pathlib.Path(marker).touch()
        os._exit(3)  # a worker killed mid-job (OOM killer, SIGKILL)
    deadline = time.monotonic() + 30
    while not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.01)  # this process works too: leave the child a job to die in
    return job.index


def test_a_dead_worker_is_an_error_not_a_hang(store, tmp_path):
    import os
    log = CommitLog(store.commitlog)
    fn = functools.partial(_die_in_a_child, os.getpid(), str(tmp_path / "child-took-a-job"))
    with pytest.raises(StoreAccessError, match="worker process died"):
        parallel_scan(log, fn, workers=2)


def _mark_job(directory, job):
    pathlib.Path(directory, f"{job}").write_text("taken")
    return job


def test_ahead_holds_workers_back_while_the_reader_is_slow(tmp_path):
    """With ``ahead`` N, no more than N jobs are taken beyond what the reader has been given."""
    import functools
    import time

    from rmqtool.store.parallel import iter_parallel
    results = iter_parallel(list(range(40)), functools.partial(_mark_job, tmp_path), workers=2, ahead=3)
    assert next(results) == 0
    time.sleep(1.0)  # the reader is slow: the child must stop taking jobs
    assert len(list(tmp_path.iterdir())) <= 3
    assert list(results) == list(range(1, 40))
    assert len(list(tmp_path.iterdir())) == 40


@pytest.mark.parametrize("workers", [1, 2])
def test_before_runs_while_children_work_and_cuts_the_jobs(tmp_path, workers):
    """``before`` runs here once the children have started; the jobs after the count it
    returns are given to nobody, even those a child took while it ran."""
    import time

    def before() -> int:
        time.sleep(0.5)  # a child takes jobs meanwhile, some past the cut
        return 2

    results = list(iter_parallel(list(range(40)), functools.partial(_mark_job, tmp_path), workers=workers,
                                 ahead=4, before=before))
    assert results == [0, 1]
    if workers == 2:
        assert len(list(tmp_path.iterdir())) >= 1  # the child worked while before() ran
