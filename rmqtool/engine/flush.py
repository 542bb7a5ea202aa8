"""Flushing: when appended bytes reach the disk, as the broker's flush services decide.

* sync (GroupCommitService): an append returns only once the commit log is flushed past it.
  Waiters queue up; one flusher thread msyncs everything written so far and wakes every
  waiter that flush covers, so concurrent appends share one fsync.
* async (FlushRealTimeService): a thread flushes the commit log every ``interval_ms`` when
  at least ``least_pages`` 4 KB pages are dirty (sooner when woken), and everything on the
  thorough interval; the checkpoint's physicMsgTimestamp follows those thorough flushes.
* FlushConsumeQueueService: consume queues every second (2 pages at least), everything and
  the checkpoint file on its thorough interval (60 s).

Each service flushes everything when shut down.
"""
from __future__ import annotations

import threading
import time

RETRY_TIMES_OVER = 10  # CommitLog.FlushCommitLogService.RETRY_TIMES_OVER
_OS_PAGE = 4096


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class _Service:
    """A ServiceThread: run() loops until shutdown(); wakeup() cuts a wait short."""

    name = "Service"

    def __init__(self):
        self._event = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.on_error = None  # called (in the service's thread) after a failure

    def start(self) -> None:
        self._thread = threading.Thread(target=self._guarded, name=self.name, daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        self._event.set()

    def wait_for_running(self, seconds: float) -> None:
        self._event.wait(seconds)
        self._event.clear()

    def _guarded(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # kept for the engine to raise
            self.error = exc
            if self.on_error is not None:
                self.on_error()

    def run(self) -> None:
        raise NotImplementedError

    def shutdown(self) -> None:
        self._stopped = True
        self._event.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class FlushRealTimeService(_Service):
    """Asynchronous commit log flushing."""

    name = "FlushRealTimeService"

    def __init__(self, commit_log, checkpoint=None, *, interval_ms: int = 500, least_pages: int = 4,
                 thorough_interval_ms: int = 10_000):
        super().__init__()
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        self.interval_ms = interval_ms
        self.least_pages = least_pages
        self.thorough_interval_ms = thorough_interval_ms
        self._last_thorough = 0
        self._wake_at = least_pages * _OS_PAGE

    def maybe_wakeup(self) -> None:
        """After an append: wake the flusher once enough is waiting (cheap when not). Woken already
        is asked first: an appender outruns the flusher, which waits for the GIL, so it mostly is."""
        if not self._event.is_set() and self.commit_log.max_offset - self.commit_log.flushed_where >= self._wake_at:
            self._event.set()  # Event.set takes a lock and notifies: only when not set already

    def run(self) -> None:
        while not self._stopped:
            least = self.least_pages
            now = _now_ms()
            if now >= self._last_thorough + self.thorough_interval_ms:
                self._last_thorough = now
                least = 0
            self.wait_for_running(self.interval_ms / 1000)
            self.commit_log.flush(least)
            self._note_timestamp()

    def _note_timestamp(self) -> None:
        stamp = self.commit_log.store_timestamp
        if stamp > 0 and self.checkpoint is not None:
            self.checkpoint.physic_msg_timestamp = stamp

    def shutdown(self) -> None:
        super().shutdown()
        self.commit_log.flush_all()
        self._note_timestamp()


class GroupCommitService(_Service):
    """Synchronous commit log flushing: append waits in :meth:`wait_flushed`."""

    name = "GroupCommitService"

    def __init__(self, commit_log, checkpoint=None, *, timeout_ms: int = 5000):
        super().__init__()
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        self.timeout_ms = timeout_ms
        self._cond = threading.Condition()
        self._requested = 0  # the largest offset a waiter needs flushed
        self.flush_count = 0  # how many fsyncs served the waiters (they share them)

    def wait_flushed(self, next_offset: int) -> bool:
        """Block until the commit log is flushed up to ``next_offset``; False on timeout
        (the broker's FLUSH_DISK_TIMEOUT)."""
        deadline = time.monotonic() + self.timeout_ms / 1000
        with self._cond:
            if next_offset > self._requested:
                self._requested = next_offset
            self._event.set()
            while self.commit_log.flushed_where < next_offset:
                left = deadline - time.monotonic()
                if left <= 0 or self.error is not None or self._stopped:
                    return self.commit_log.flushed_where >= next_offset
                self._cond.wait(left)
        return True

    def run(self) -> None:
        while not self._stopped:
            self.wait_for_running(0.010)
            self._do_commit()
        self._do_commit()

    def _do_commit(self) -> None:
        with self._cond:
            target = self._requested
        cl = self.commit_log
        if target > cl.flushed_where:
            # one flush serves every waiter so far; a second reaches into the next segment
            for _ in range(2):
                cl.flush(0)
                if cl.flushed_where >= target:
                    break
            self.flush_count += 1
            stamp = cl.store_timestamp
            if stamp > 0 and self.checkpoint is not None:
                self.checkpoint.physic_msg_timestamp = stamp
            with self._cond:
                self._cond.notify_all()
        else:
            cl.flush(0)  # messages appended without waiting

    def shutdown(self) -> None:
        super().shutdown()
        self.commit_log.flush_all()
        with self._cond:
            self._cond.notify_all()


class FlushConsumeQueueService(_Service):
    """Periodic consume queue (and checkpoint) flushing."""

    name = "FlushConsumeQueueService"

    def __init__(self, consume_queues, checkpoint=None, index_service=None, *, interval_ms: int = 1000,
                 least_pages: int = 2, thorough_interval_ms: int = 60_000):
        super().__init__()
        self.consume_queues = consume_queues
        self.checkpoint = checkpoint
        self.index_service = index_service
        self.interval_ms = interval_ms
        self.least_pages = least_pages
        self.thorough_interval_ms = thorough_interval_ms
        self._last_thorough = _now_ms()

    def run(self) -> None:
        while not self._stopped:
            self.wait_for_running(self.interval_ms / 1000)
            if self._stopped:
                break
            self.do_flush(thorough=False)

    def do_flush(self, thorough: bool) -> None:
        least = self.least_pages
        now = _now_ms()
        if thorough or now >= self._last_thorough + self.thorough_interval_ms:
            self._last_thorough = now
            least = 0
        self.consume_queues.flush(least)
        if least == 0 and self.checkpoint is not None:
            self.checkpoint.flush()

    def shutdown(self) -> None:
        super().shutdown()
        self.do_flush(thorough=True)
