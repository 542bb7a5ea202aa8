"""``rmqtool verify``: every check over a store, with git-fsck-style severity overrides.

Findings come in this order: commit log, checkpoint and markers, consume queues, index
files, config, the 5.x timer store (its next start at ``now_ms``, the clock when not given),
controller mode's epoch file and broker identity. The commit log is scanned whenever an area that needs its messages is
asked for, a band at a time, the other areas matching each band as it passes; ``only``
chooses whose findings are reported. The commit log's findings stream out as each band is
checked, the other areas' once it is done, with their severity as overridden;
``max_errors`` stops the run after that many error-severity findings. Nothing here writes.
"""
from __future__ import annotations

import os
import pathlib
import time
from typing import Callable, Iterator

from rmqtool.errors import NotAStore, StoreNotFound
from rmqtool.findings import Finding
from rmqtool.formats.compaction import COMPACTION_DIR
from rmqtool.store.consumequeue import UnitFiles
from rmqtool.store.rocksdb_cq import rocksdb_cq_dir
from rmqtool.store.segments import one_listing
from rmqtool.store.view import StoreView
from rmqtool.verify.base import VerifyOptions, VerifyRun
from rmqtool.verify.checkpoint import CheckpointWindows, check_checkpoint
from rmqtool.verify.commitlog import CommitLogCheck
from rmqtool.verify.config import check_config
from rmqtool.verify.controller import check_controller
from rmqtool.verify.consumequeue import ConsumeQueueCheck
from rmqtool.verify.index import IndexCheck
from rmqtool.store.timer.files import find_timer_store
from rmqtool.store.tree import walk
from rmqtool.verify.next_start import NextStart, changes_the_start, simulate_next_start, worth_simulating_now

NEEDS_COMMIT_LOG = {"commitlog", "consumequeue", "index", "checkpoint", "rocksdbcq"}


class Verify(VerifyRun):
    """One verify run of a RocketMQ store."""

    def __init__(self, store: str | os.PathLike | StoreView, options: VerifyOptions | None = None,
                 progress: Callable[[int], None] | None = None):
        super().__init__(options, progress)
        self.view = store if isinstance(store, StoreView) else open_verifiable(store)
        self.root = self.view.root
        self.live = self.view.live  # a running broker's store: its moving tail is not damage
        self.next_start: NextStart | None = None  # the broker's next start, once simulated (_next_start)
        self._log: CommitLogCheck | None = None

    @property
    def total_bytes(self) -> int:
        """What progress counts: the commit log, consume queue and index files read."""
        total = 0
        paths = self.view.paths
        for directory in (*self.view.commit_log_directories, paths.consumequeue, paths.batch_consumequeue, paths.index):
            if directory.is_dir():
                for dirpath, _dirs, files in walk(directory):
                    for name in files:
                        try:
                            total += os.stat(os.path.join(dirpath, name)).st_size
                        except OSError:
                            pass
        return total

    def _next_start(self) -> NextStart:
        """The broker's next start, simulated once (on first need)."""
        if self.next_start is None:
            self.next_start = NextStart.of(self.view)
            if self._log is not None:
                self._log.next_start_seen = self.next_start
        return self.next_start

    @property
    def next_start_drops(self) -> int:
        """Messages the broker's next start drops (its recovery's log cut); 0 when not simulated."""
        return len(self.next_start.dropped) if self.next_start is not None else 0

    def _advance(self, n: int) -> None:
        if self.progress is not None:
            self.progress(n)

    def _consume_queues(self, cut: int):
        """The view's consume queues as the broker's load cuts them at ``cut``; one with a file
        the load refuses (its size, say) makes the next start worth simulating: does the
        broker start at all?"""
        queues = self.view.consume_queues(cut)
        if self.next_start is None and self.live is None and any(changes_the_start(f)
                                                                  for f in queues.all_findings()):
            self._next_start()
        return queues

    def _started_queues(self):
        """The queues as the simulated start leaves them (committed offsets are judged against
        them: its dispatch puts back what a file lost); None when the start was not simulated."""
        return self.next_start.queues() if self.next_start is not None else None

    def _raw(self) -> Iterator[tuple[str, Finding]]:
        """(area, finding) for every check asked for, in the documented order.

        The commit log is checked a band at a time, and the consume queue, index and
        checkpoint checks take each band as it passes (memory stays that of a band); their
        findings come after the commit log's."""
        only = set(self.options.only)
        log = None
        parts: dict = {}

        def consumers() -> list:  # made once the commit log's end is known: the consume queues' load cut needs it
            if self.live is None:  # a running broker's store has no next start to predict yet
                self.view.found_written_end(log.written_end)  # report asks the view for it: not read again
                log.next_start = self._next_start  # asked for later when a queue's messages need it
                if worth_simulating_now(self.view, log.commit_log.findings, log.prepared_checks()):
                    self._next_start()
            if "checkpoint" in only:
                parts["checkpoint"] = CheckpointWindows(self.root)
            if only & {"consumequeue", "config"}:  # the broker cuts them at the recovered end
                cut = log.written_end if log.recovered_end is None else log.recovered_end
                parts["queues"] = self._consume_queues(cut)
            if "consumequeue" in only:
                parts["consumequeue"] = ConsumeQueueCheck(parts["queues"], log, on_bytes=self._advance,
                                                         root=self.root)
            if "index" in only:
                parts["index"] = IndexCheck(self.root, log, on_bytes=self._advance)
            return [parts[k] for k in ("checkpoint", "consumequeue", "index") if k in parts]

        try:
            if only & NEEDS_COMMIT_LOG:
                log = self._log = CommitLogCheck(self.view.commit_log,
                                                 workers=self.options.jobs, delay_spec=self.options.delay_spec,
                                                 on_segment=lambda c: self._advance(c.hi - c.lo),
                                                 hints=UnitFiles.of(self.view.paths))
                for f in log.findings(consumers):
                    if self.next_start is None and self.live is None and changes_the_start(f):
                        self._next_start()  # damage met on the way: what does the start do about it?
                    yield "commitlog", self.next_start.note(f) if self.next_start is not None else f
                if self.next_start is not None:
                    for f in self.next_start.findings():
                        yield "commitlog", f
                log.recheck([parts[k] for k in ("consumequeue", "index") if k in parts])
            if "checkpoint" in only:
                for f in check_checkpoint(self.root, log, parts["checkpoint"]):
                    yield "checkpoint", f
            if "consumequeue" in only:
                for f in parts["consumequeue"].findings():
                    yield "consumequeue", f
            if "index" in only:
                for f in parts["index"].findings():
                    yield "index", f
        finally:
            if "index" in parts:
                parts["index"].close()
        if "config" in only:
            queues = parts["queues"] if "queues" in parts else self.view.consume_queues()
            for f in check_config(self.view, queues, log.min_offset if log else 0, self.options.delay_spec,
                                  started=self._started_queues()):
                yield "config", f
        # the side stores' checks load only for a store that has one (nothing is found without it)
        if "compaction" in only and (self.root / COMPACTION_DIR).is_dir():  # CompactionStore.present
            from rmqtool.verify.compaction import check_compaction
            for f in check_compaction(self.root):
                yield "compaction", f
        if "rocksdbcq" in only and rocksdb_cq_dir(self.root) is not None:  # a RocksDB consume queue in consumequeue/
            from rmqtool.verify.rocksdb_cq import check_rocksdb_cq
            for f in check_rocksdb_cq(self.view, log.queue_ends if log is not None else None):
                yield "rocksdbcq", f
        if "timer" in only and self.live is None and find_timer_store(self.root).exists:
            from rmqtool.recovery.timer.start import plain_units_beside
            from rmqtool.verify.timer.check import check_timer  # its models load only for a store with a timer
            now = self.options.now_ms if self.options.now_ms is not None else int(time.time() * 1000)
            plain = None
            if self.next_start is None:  # the recovery walk still to do: a worker reads the units' records meanwhile
                plain = plain_units_beside(self.root, self._next_start, self.options.jobs)
            for f in check_timer(self.root, self._next_start().outcome, now, plain=plain):
                yield "timer", f
        if "controller" in only:
            for f in check_controller(self.view):
                yield "controller", f


def open_verifiable(path: str | os.PathLike) -> StoreView:
    """The view of a store verify can check: its root, holding a commit log, consume queues or
    a checkpoint (a missing path exit 8, anything else exit 4)."""
    root = pathlib.Path(path)
    if not root.exists():
        raise StoreNotFound("no such directory", root)
    if not root.is_dir():
        raise NotAStore("not a store directory (verify takes the store root)", root)
    view = StoreView(root, simulate=simulate_next_start)  # another family's store: exit 4, said so
    paths = view.paths
    if not (view.has_commit_log or paths.consumequeue.is_dir() or paths.checkpoint.exists()
            or view.dledger is not None):
        raise NotAStore("not a store: no commitlog/, consumequeue/ or checkpoint", root)
    return view


def verify_run(view: StoreView, options: VerifyOptions | None = None, progress=None) -> VerifyRun:
    """The verify a RocketMQ store's view gets: DLedger's entry log checks when its records are
    there (enableDLegerCommitLog), else the plain commit log's (families/rocketmq.py, spark)."""
    if view.records_in_dledger:
        from rmqtool.verify.dledger import DLedgerVerify
        return DLedgerVerify(view, options, progress)
    return Verify(view, options, progress)


@one_listing()
def verify_store(store: str | os.PathLike | StoreView, options: VerifyOptions | None = None) -> list[Finding]:
    """Every finding of a RocketMQ store (a DLedger one's too: :func:`verify_run`), as a list
    (for scripts and tests)."""
    view = store if isinstance(store, StoreView) else open_verifiable(store)
    return list(verify_run(view, options).findings())
