"""A fleet job's unit of work: a byte range of one commit log segment of one store.

Each segment is cut into ranges of ``split_size`` bytes, so that one 1 GiB segment keeps
many cores busy: the byte-range jobs of store/parallel.py (``segment_jobs``), which the
one scanner reads so that ranges cut anywhere give every record once (a record belongs to
the range its start falls in; a range starting inside a record begins at the first record
that proves itself). Plans are made on the driver from names and sizes only; executors
open the files themselves (behind a URI: they stage their range first, remote.py).
"""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Iterator

from rmqtool.errors import StoreNotFound
from rmqtool.spark import remote
from rmqtool.spark.stores import StoreSpec
from rmqtool.store.commitlog import ScanResult
from rmqtool.store.live import LiveStore
from rmqtool.store.parallel import SegmentJob, jobs_of, segment_jobs
from rmqtool.store.paths import COMMITLOG_DIR, is_segment_name
from rmqtool.store.segments import Segment
from rmqtool.store.view import StoreView

DEFAULT_SPLIT_SIZE = 256 << 20


@dataclasses.dataclass(frozen=True)
class SegmentTask:
    store: str  # the store's name
    store_path: str
    job: SegmentJob  # behind a URI: its segment's path is only the file name until staged
    remote: remote.RemoteFile | None = None  # the segment behind a URI
    live: LiveStore | None = None  # a running broker's store: the job ends at its written end, the tail moves

    @property
    def name(self) -> str:
        """Unique within a store: names the task's output files."""
        return f"{self.job.segment.base_offset:020d}-{self.job.start:012d}"

    @property
    def bytes(self) -> int:
        end = self.job.segment.size if self.job.end is None else self.job.end
        return max(end - self.job.start, 0)


def segment_tasks(spec: StoreSpec, split_size: int = DEFAULT_SPLIT_SIZE, view: StoreView | None = None) -> list[SegmentTask]:
    """A local store's tasks from its commit log listing: ``view``'s, the store the driver
    opened, when given (not listed again). The view lists the log wherever it lies (one log
    over several disks, as its config/broker.properties names them): each task's segment
    carries its file's own path, so the executor reads it where it is."""
    if remote.is_uri(spec.path):
        return _remote_tasks(spec, split_size)
    if view is None:
        if not pathlib.Path(spec.path).is_dir():
            raise StoreNotFound("no such store directory", pathlib.Path(spec.path))
        view = StoreView(spec.path)
    if not view.has_commit_log:
        return []
    live = view.live  # a running broker's store: read to its written end now, as dump reads it
    return [SegmentTask(spec.name, str(view.root), job, live=live) for job in segment_jobs(
        view.commit_log, to_offset=None if live is None else live.commit_log_end, split_size=split_size)]


def _remote_tasks(spec: StoreSpec, split_size: int) -> list[SegmentTask]:
    """The same jobs for a store behind a URI, from its listing and each segment's first bytes."""
    remote.require_store(spec.path)
    files = [f for f in remote.list_dir(remote.child(spec.path, COMMITLOG_DIR)) if is_segment_name(f.name)]
    by_name = {f.name: f for f in files}
    segments = [Segment(pathlib.Path(f.name), int(f.name), f.size) for f in files]
    jobs = jobs_of(segments, split_size=split_size, last=remote.last_written(files))
    return [SegmentTask(spec.name, spec.path, job, by_name[job.segment.path.name]) for job in jobs]


def plan_tasks(specs: list[StoreSpec], split_size: int = DEFAULT_SPLIT_SIZE,
               views: dict[str, StoreView] | None = None) -> list[SegmentTask]:
    """Every store's tasks (``views``: {name: the store opened on the driver})."""
    views = views or {}
    return [t for spec in specs for t in segment_tasks(spec, split_size, views.get(spec.name))]


def scan_task(task: SegmentTask, *, findings: list | None = None) -> Iterator[ScanResult]:
    """The scan results of the task's range, exactly its share of a whole-segment scan."""
    return task.job.scan(findings)
