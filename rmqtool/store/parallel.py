"""Scanning commit log segments in parallel processes, one segment (or byte range of one) per task.

A scan is CPU-bound Python, so threads do not help; processes do, and segments are
independent (each starts at a record and ends with a blank record or zeros). Each worker
runs the same :func:`rmqtool.store.commitlog.scan_segment` on its own segment through a
per-segment function of the caller's, and sends back only what that function returns,
so it should return something compact (counts, offsets), not every Message.

    results = parallel_scan(CommitLog(path), summarize_segment, workers=2)

Byte-range jobs (``split_size``) cut segments anywhere: the one scanner gives each range
its share of the whole scan (:func:`rmqtool.store.commitlog.scan_segment`).

Results come back in segment order. ``fn`` must be picklable: a module-level function,
or a ``functools.partial`` of one. An ``RmqError`` raised in a worker is raised again
here with its file and offset.
"""
from __future__ import annotations

import dataclasses
import multiprocessing
import queue
from typing import Callable, Iterator, TypeVar

from rmqtool.errors import StoreAccessError, UsageError
from rmqtool.store.cpus import default_workers
from rmqtool.findings import Finding
from rmqtool.store.commitlog import Blank, ColumnMode, Corrupt, ScanResult, column_scan, scan_segment
from rmqtool.store.commitlog_end import CommitLog, segment_ranges
from rmqtool.store.crc import kernel_crcs
from rmqtool.store.segments import Segment
from rmqtool.store.message import Message

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class SegmentJob:
    """One segment, or one byte range of it, to scan, with the arguments CommitLog.scan would give scan_segment."""

    segment: Segment
    index: int  # place of the segment in the commit log
    is_last: bool
    start: int = 0  # byte position to start at
    end_offset: int | None = None  # commit log offset to stop before
    check_crc: bool = True
    end: int | None = None  # byte position a split ends at (None: the file end)
    # commit log offsets where records are said to start (sorted, unique: the consume queues' units),
    # for the column scan's kernel (store/record_kernel.hinted_chain); they change only its speed
    hints: object = dataclasses.field(default=None, compare=False, repr=False)

    def scan(self, findings: list | None = None, rows=None) -> Iterator[ScanResult]:
        return scan_segment(self.segment, is_last=self.is_last, start=self.start, end=self.end,
                            end_offset=self.end_offset, check_crc=self.check_crc, findings=findings, rows=rows)

    def column_scan(self, mode: ColumnMode, findings: list | None = None) -> Iterator:
        """The same scan with clean records as RecordColumns blocks (always with CRCs)."""
        return column_scan(self.segment, mode, is_last=self.is_last, start=self.start, end=self.end,
                           end_offset=self.end_offset, findings=findings)


def segment_jobs(commitlog: CommitLog, from_offset: int | None = None, to_offset: int | None = None, *,
                 check_crc: bool = True, split_size: int | None = None) -> list[SegmentJob]:
    """The segments CommitLog.scan would read for the same range, as jobs.

    ``split_size`` cuts each segment into byte ranges of that many bytes: the scanner gives
    each range its share of the whole scan, so the jobs' results, in order, are the whole scan.
    """
    return jobs_of(commitlog.segments, from_offset, to_offset, check_crc=check_crc, split_size=split_size)


def jobs_of(segments: list[Segment], from_offset: int | None = None, to_offset: int | None = None, *,
            check_crc: bool = True, split_size: int | None = None, last: int | None = None) -> list[SegmentJob]:
    """:func:`segment_jobs` of a list of segments (a commit log directory, or segment files
    given one by one); ``last`` as for :func:`segment_ranges`."""
    if split_size is not None and split_size < 1:
        raise UsageError(f"split size must be 1 or more, not {split_size}")
    jobs = []
    for r in segment_ranges(segments, from_offset, to_offset, last=last):
        if split_size is None:
            jobs.append(SegmentJob(r.segment, r.index, r.is_last, r.start, to_offset, check_crc))
            continue
        stop = r.segment.size if r.end is None else r.end
        for lo in range(r.start, max(stop, r.start + 1), split_size):
            hi = lo + split_size
            jobs.append(SegmentJob(r.segment, r.index, r.is_last, lo, to_offset, check_crc,
                                   None if hi >= stop and r.end is None else min(hi, stop)))
    return jobs


def iter_parallel(jobs: list[SegmentJob], fn: Callable[[SegmentJob], T], *,
                  workers: int | None = None, ahead: int | None = None,
                  before: Callable[[], int] | None = None) -> Iterator[T]:
    """``fn(job)`` for every job, in job order, over ``workers`` processes.

    This process is one of the workers: it forks ``workers - 1`` children, and all of them
    take the next job from a shared counter until none are left (one fork and no pool
    threads for two workers, which matters when a whole scan takes a tenth of a second).
    With one worker, or one job, everything runs here. ``ahead``: at most that many jobs
    taken and not yet given to the caller (a slow reader of the results holds the workers
    back instead of letting results pile up). ``before``: work for this process once the
    children have started (they scan meanwhile); it returns how many of the jobs, from the
    first, to run after all.
    """
    if workers is None:
        workers = default_workers()
    if workers < 1:
        raise UsageError(f"workers must be 1 or more, not {workers}")
    workers = min(workers, len(jobs))
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for job in jobs[:before() if before is not None else len(jobs)]:
            yield fn(job)
        return
    context = multiprocessing.get_context("fork")  # children inherit jobs, fn and the imports
    if any(getattr(job, "check_crc", False) for job in jobs):
        kernel_crcs()  # the kernel handed its CRC-32 function here, once, not again in every worker
    counter = context.Value("i", 0)
    limit = context.Value("i", len(jobs))  # jobs to run: before() may cut the list
    done = context.Queue()
    permits = context.Semaphore(max(ahead, workers)) if ahead else None
    children = [context.Process(target=_work, args=(jobs, fn, counter, done, permits, limit), daemon=True)
                for _ in range(workers - 1)]
    for child in children:
        child.start()
    results: dict[int, tuple[bool, object]] = {}
    try:
        count = len(jobs)
        if before is not None:
            count = before()
            with limit.get_lock():
                limit.value = count
        next_out = 0
        while next_out < count:
            if next_out not in results:
                i = _take(counter) if permits is None or permits.acquire(block=False) else None
                if i is not None and i < count:
                    results[i] = _run(fn, jobs[i])
                else:  # nothing left to take (or no permit): wait for what the children are doing
                    if i is not None and permits is not None:
                        permits.release()
                    i, ok, value = _wait(done, children)
                    results[i] = (ok, value)
            while True:
                try:
                    i, ok, value = done.get_nowait()
                except queue.Empty:
                    break
                results[i] = (ok, value)
            while next_out < count and next_out in results:
                ok, value = results.pop(next_out)
                if not ok:
                    raise value
                yield value
                next_out += 1
                if permits is not None:
                    permits.release()
    finally:
        for child in children:
            if child.is_alive():
                child.terminate()
            child.join()


def _take(counter) -> int:
    with counter.get_lock():
        i = counter.value
        counter.value = i + 1
    return i


def _wait(done, children) -> tuple:
    """The next result a child sends; an error instead of waiting forever if they all died."""
    while True:
        try:
            return done.get(timeout=1.0)
        except queue.Empty:
            if not any(child.is_alive() for child in children):
                try:
                    return done.get(timeout=0.2)  # a child that exited has flushed what it sent
                except queue.Empty:
                    codes = [child.exitcode for child in children]
                    raise StoreAccessError(f"a scan worker process died (exit codes {codes})") from None


def _run(fn, job) -> tuple[bool, object]:
    try:
        return True, fn(job)
    except Exception as exc:  # sent back and raised in job order, with its file and offset
        return False, exc


def _work(jobs, fn, counter, done, permits=None, limit=None) -> None:
    """A child: take jobs until none are left, sending each result back."""
    while True:
        if permits is not None:
            permits.acquire()
        i = _take(counter)
        if i >= (len(jobs) if limit is None else limit.value):
            if permits is not None:
                permits.release()
            return
        done.put((i, *_run(fn, jobs[i])))


def parallel_scan(commitlog: CommitLog, fn: Callable[[SegmentJob], T], *, workers: int | None = None,
                  from_offset: int | None = None, to_offset: int | None = None,
                  check_crc: bool = True, split_size: int | None = None) -> list[T]:
    """``fn`` mapped over the segments of ``commitlog`` (as CommitLog.scan would read them), in order."""
    jobs = segment_jobs(commitlog, from_offset, to_offset, check_crc=check_crc, split_size=split_size)
    return list(iter_parallel(jobs, fn, workers=workers))


@dataclasses.dataclass
class SegmentSummary:
    """What a scan of one segment found, small enough to send between processes."""

    path: str
    base_offset: int
    messages: int = 0
    message_bytes: int = 0  # bytes of message records
    first_offset: int | None = None  # commit log offset of the first message
    end_offset: int | None = None  # one past the last message
    first_store_timestamp: int | None = None  # of the first message (what recovery looks at)
    last_store_timestamp: int | None = None
    body_crc_failures: int = 0
    property_crc_failures: int = 0
    blank: Blank | None = None
    corrupt: list[Corrupt] = dataclasses.field(default_factory=list)
    findings: list[Finding] = dataclasses.field(default_factory=list)

    @property
    def clean(self) -> bool:
        return (not self.corrupt and not self.findings and not self.body_crc_failures
                and not self.property_crc_failures and (self.blank is None or self.blank.valid))


def summarize_segment(job: SegmentJob) -> SegmentSummary:
    """Counts, offset range, first and last store time, CRC failures and damage of one segment."""
    summary = SegmentSummary(str(job.segment.path), job.segment.base_offset)
    messages = 0
    size = 0
    first = last = None
    body_failures = property_failures = 0
    message = Message
    for r in job.scan(summary.findings):
        if type(r) is message:
            if first is None:
                first = r
            last = r
            messages += 1
            size += r.store_size
            if r.body_crc_ok is False:
                body_failures += 1
            if r.property_crc_ok is False:
                property_failures += 1
        elif isinstance(r, Blank):
            summary.blank = r
        elif isinstance(r, Corrupt):
            summary.corrupt.append(r)
    summary.messages, summary.message_bytes = messages, size
    if first is not None:
        summary.first_offset = first.commit_log_offset
        summary.end_offset = last.commit_log_offset + last.store_size
        summary.first_store_timestamp = first.store_timestamp
        summary.last_store_timestamp = last.store_timestamp
    summary.body_crc_failures, summary.property_crc_failures = body_failures, property_failures
    return summary
