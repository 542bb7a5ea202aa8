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

import atexit
import dataclasses
import os
import pickle
import queue
import select
import signal
import struct
import sys
import threading
from typing import Callable, Iterator, TypeVar

try:
    import fcntl
except ImportError:  # not on a Unix
    fcntl = None

from rmqtool.errors import StoreAccessError, UsageError
from rmqtool.store.cpus import default_workers
from rmqtool.findings import Finding
from rmqtool.store.commitlog import Blank, ColumnMode, Corrupt, ScanResult, column_scan, scan_segment
from rmqtool.store.commitlog_end import CommitLog, segment_ranges
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
    take the next job handed out until none are left (one fork, no pool, no shared-memory
    objects: what two workers cost beyond the work is what matters when a whole scan takes a
    tenth of a second). With one worker, or one job, everything runs here. ``ahead``: at most
    that many jobs taken and not yet given to the caller (a slow reader of the results holds
    the workers back instead of letting results pile up). ``before``: work for this process
    once the children have started (they scan meanwhile); it returns how many of the jobs,
    from the first, to run after all.
    """
    if workers is None:
        workers = default_workers()
    if workers < 1:
        raise UsageError(f"workers must be 1 or more, not {workers}")
    workers = min(workers, len(jobs))
    if workers <= 1 or not hasattr(os, "fork"):
        for job in jobs[:before() if before is not None else len(jobs)]:
            yield fn(job)
        return
    crew = _Children(jobs, fn, workers - 1, max(ahead, workers) if ahead else _IN_FLIGHT)
    done = False
    try:
        count = len(jobs)
        if before is not None:
            count = crew.count = before()
            crew.hand_out(0)
        results: dict = {}
        next_out = 0
        while next_out < count:
            if next_out not in results:
                results.update(crew.received(block=False))
            if next_out not in results:
                i = crew.take()
                if i is not None and i < count:
                    results[i] = _run(fn, jobs[i])
                elif i is None:  # nothing left to take: wait for what the children are doing
                    results.update(crew.received(block=True))
                continue
            ok, value = results.pop(next_out)
            if not ok:
                raise value
            yield value
            next_out += 1
            crew.hand_out(next_out)
        done = True
    finally:
        crew.close(done)


# Jobs are handed out as their indices through a pipe (the "tokens"): whoever reads one runs
# that job, so the jobs spread by who is free, as from a shared counter, without a lock; and
# the parent writes an index only while fewer than ``in_flight`` jobs are out and not given
# back, which is ``ahead`` without a semaphore. Each child sends its results back on a pipe
# of its own, pickled with their numpy arrays out of band (pickle protocol 5: the arrays'
# bytes go to the pipe and into the parent's arrays without another copy), what the pipe
# has no room for from a thread, so that it scans on while this process is busy.
_TOKEN = struct.Struct("<i")
_HEAD = struct.Struct("<qqq")  # a result's frame: bytes after the head, of them its pickle's, buffers
# where each buffer starts in a frame's body: a multiple of this, so the parent's arrays made on the
# body are aligned (unaligned, every numpy call on them took its slow path or copied them first)
_ALIGN = 64
_IN_FLIGHT = 4096  # jobs handed out at once without ``ahead``: 16 KiB of indices, a pipe holds 64
_PIPE_SIZE = 1 << 20  # a result pipe's capacity where Linux allows it: a band's arrays in a few reads
_unreaped: list = []  # children that were stopped and not yet waited for (reaped by the next call, or at exit)


def _reap(block: bool = False) -> None:
    """Wait for the stopped children that have exited (all of them if ``block``: at exit, so
    that their CPU time and memory count in this process's, as a waiting parent sees them)."""
    for pid in list(_unreaped):
        try:
            if os.waitpid(pid, 0 if block else os.WNOHANG)[0] == 0:
                continue
        except ChildProcessError:
            pass
        _unreaped.remove(pid)


atexit.register(_reap, True)


class _Children:
    """The forked workers of one :func:`iter_parallel` call, seen from the parent."""

    def __init__(self, jobs: list, fn: Callable, children: int, in_flight: int):
        _reap()
        self.count = len(jobs)  # jobs to run (before() may cut them)
        self.in_flight = in_flight
        self.handed = 0  # job indices written so far
        self.tokens_r, self.tokens_w = os.pipe()
        os.set_blocking(self.tokens_r, False)  # the parent never waits for a job: the children poll
        self.hand_out(0)
        self.pids: list = []
        self.inboxes: list = []
        self.poll = None
        for stream in (sys.stdout, sys.stderr):  # nothing buffered here is written twice
            try:
                stream.flush()
            except (AttributeError, ValueError, OSError):
                pass
        for _ in range(children):
            results_r, results_w = os.pipe()
            if fcntl is not None and hasattr(fcntl, "F_SETPIPE_SZ"):
                try:
                    fcntl.fcntl(results_w, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
                except OSError:  # above /proc/sys/fs/pipe-max-size: the default will do
                    pass
            pid = os.fork()
            if pid == 0:  # the child: never returns to the caller's frames
                code = 1
                try:
                    os.close(self.tokens_w)  # else the end of the jobs never comes
                    for inbox in self.inboxes:
                        os.close(inbox.fd)
                    os.close(results_r)
                    _child(jobs, fn, self.tokens_r, results_w)
                    code = 0
                finally:
                    os._exit(code)
            os.close(results_w)
            os.set_blocking(results_r, False)
            self.pids.append(pid)
            self.inboxes.append(_Inbox(results_r))

    def hand_out(self, given: int) -> None:
        """Job indices up to ``in_flight`` beyond the ``given`` results (never past count)."""
        stop = min(self.count, given + self.in_flight)
        if self.handed < stop:
            os.write(self.tokens_w, b"".join(_TOKEN.pack(i) for i in range(self.handed, stop)))
            self.handed = stop

    def take(self) -> int | None:
        """The next job's index for this process, or None when none is handed out."""
        try:
            token = os.read(self.tokens_r, _TOKEN.size)
        except BlockingIOError:
            return None
        return _TOKEN.unpack(token)[0] if len(token) == _TOKEN.size else None

    def received(self, block: bool) -> dict:
        """{job index: (ok, value)} of the results the children have sent; waits for one if ``block``."""
        got: dict = {}
        while True:
            for inbox in self.inboxes:
                if inbox.open:
                    got.update(inbox.read())
                    if not inbox.open:  # a child gone before the end of the jobs: it died
                        self._died()
            if got or not block:
                return got
            if self.poll is None:
                self.poll = select.poll()
                for inbox in self.inboxes:
                    self.poll.register(inbox.fd, select.POLLIN)
            self.poll.poll()

    def _died(self):
        """A child gone before the end of the jobs: an error, with the exit codes of those gone."""
        codes = []
        for pid, inbox in zip(self.pids, self.inboxes):
            if not inbox.open:
                try:
                    codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
                except ChildProcessError:
                    codes.append(None)
        raise StoreAccessError(f"a scan worker process died (exit codes {codes})")

    def close(self, done: bool) -> None:
        """Stop the children: the end of the jobs, and SIGTERM for any still at one (a job past
        the cut, or the caller stopped early); they are reaped when they have exited."""
        os.close(self.tokens_w)
        os.close(self.tokens_r)
        for inbox in self.inboxes:
            os.close(inbox.fd)
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            if done:
                _unreaped.append(pid)  # not waited for: its exit is the operating system's work, not ours
            else:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
        _reap()


class _Inbox:
    """What one child sends, read as it comes, a frame at a time, without waiting."""

    def __init__(self, fd: int):
        self.fd = fd
        self.open = True
        self.head = bytearray()
        self.body: bytearray | None = None
        self.filled = 0
        self.poll = None

    def read(self) -> list:
        """The (index, (ok, value)) of every result completed by what the pipe holds now."""
        got = []
        while True:
            try:
                if self.body is None:
                    chunk = os.read(self.fd, _HEAD.size - len(self.head))
                    if not chunk:
                        self.open = False
                        return got
                    self.head += chunk
                    if len(self.head) == _HEAD.size:
                        self.body = _body(_HEAD.unpack(self.head)[0])
                        self.filled = 0
                    continue
                if self.filled < len(self.body):
                    n = os.readv(self.fd, [memoryview(self.body)[self.filled:]])
                    if not n:
                        self.open = False
                        return got
                    self.filled += n
            except BlockingIOError:
                if self.body is None and not self.head:
                    return got
                # a frame begun: the child's thread is writing the rest, wait for it (else this
                # process would take a job of its own with that result almost here)
                if self.poll is None:
                    self.poll = select.poll()
                    self.poll.register(self.fd, select.POLLIN)
                self.poll.poll(1000)
                continue
            if self.filled == len(self.body):
                _, size, buffers = _HEAD.unpack(self.head)
                view = memoryview(self.body)
                lengths = struct.unpack_from(f"<{buffers}q", self.body)
                at = 8 * buffers + size
                parts = []
                for n in lengths:
                    at += -at % _ALIGN
                    parts.append(view[at:at + n])
                    at += n
                i, ok, value = pickle.loads(view[8 * buffers:8 * buffers + size], buffers=parts)
                got.append((i, (ok, value)))
                self.head = bytearray()
                self.body = None


def _body(size: int):
    """A frame's body to read into: where numpy is loaded (the results hold arrays), an array
    left unzeroed (a bytearray's memset of a band's 3 MiB is work the read repeats); aligned,
    as malloc's are."""
    numpy = sys.modules.get("numpy")
    return bytearray(size) if numpy is None else numpy.empty(size, numpy.uint8)


def _child(jobs: list, fn: Callable, tokens: int, results: int) -> None:
    """A child: run the jobs whose indices it reads until there are none, sending each result."""
    outbox = _Outbox(results)
    poll = select.poll()
    poll.register(tokens, select.POLLIN)
    try:
        while True:
            try:
                token = os.read(tokens, _TOKEN.size)
            except BlockingIOError:  # the pipe is non-blocking for the parent's sake: wait here
                poll.poll()
                continue
            if len(token) < _TOKEN.size:  # the parent closed the jobs: none left
                break
            i = _TOKEN.unpack(token)[0]
            outbox.send((i, *_run(fn, jobs[i])))
    finally:
        outbox.close()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, ValueError, OSError):
                pass


class _Outbox:
    """A child's results, pickled here and written straight to the pipe while it has room;
    what it has no room for is written by a thread (the pipe is drained only when the parent
    has a moment, and the child scans on meanwhile). A count or two never waits for a thread:
    starting one cost a child 0.6 ms of its 13 ms header hop, its first result's latency."""

    def __init__(self, fd: int):
        self.fd = fd
        os.set_blocking(fd, False)  # a full pipe hands the rest to the thread, never stops the scan
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        # frames handed to the thread, and of them written whole: each counter has one writer
        # (this thread, that thread), so no lock; equal, the thread holds nothing to write first
        self.handed = 0
        self.written = 0
        self.closed = False  # the parent stopped reading: nothing more is sent

    def send(self, result: tuple) -> None:
        buffers: list = []
        data = pickle.dumps(result, protocol=5, buffer_callback=buffers.append)
        raws = []
        for b in buffers:
            try:
                raws.append(b.raw())
            except BufferError:  # not contiguous: copied
                raws.append(memoryview(bytes(b)))
        lengths = [r.nbytes for r in raws]
        parts: list = []
        at = 8 * len(raws) + len(data)
        for raw, n in zip(raws, lengths):  # each buffer at the next multiple of _ALIGN (zeros before it)
            pad = -at % _ALIGN
            if pad:
                parts.append(bytes(pad))
            parts.append(raw)
            at += pad + n
        head = _HEAD.pack(at, len(data), len(raws))
        parts = [head + struct.pack(f"<{len(raws)}q", *lengths), data, *parts]
        if self.handed == self.written:  # frames stay in order: only when the thread has written its own
            parts = self._write_now(parts)
            if not parts:
                return
        self.handed += 1
        self.queue.put(parts)
        if self.thread is None:
            self.thread = threading.Thread(target=self._write, daemon=True)
            self.thread.start()

    def _write_now(self, parts: list) -> list:
        """What the pipe takes of ``parts`` without waiting; the parts left (the first maybe cut)."""
        for k, part in enumerate(parts):
            view = memoryview(part).cast("B")
            while len(view):
                if self.closed:
                    return []
                try:
                    view = view[os.write(self.fd, view):]
                except BlockingIOError:
                    return [view, *parts[k + 1:]]
                except OSError:  # the parent stopped reading: nothing to send to
                    self.closed = True
                    return []
        return []

    def _write(self) -> None:
        poll = select.poll()
        poll.register(self.fd, select.POLLOUT)
        while True:
            parts = self.queue.get()
            if parts is None:
                return
            while parts:
                parts = self._write_now(parts)
                if parts:
                    poll.poll()
            self.written += 1

    def close(self) -> None:
        if self.thread is not None:
            self.queue.put(None)
            self.thread.join()


def _run(fn, job) -> tuple[bool, object]:
    try:
        return True, fn(job)
    except Exception as exc:  # sent back and raised in job order, with its file and offset
        return False, exc


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
