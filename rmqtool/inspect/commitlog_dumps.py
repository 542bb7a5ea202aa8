"""dump commitlog as the command asks it: a CommitLogDump a path (checked before the first row),
each within what a running broker has written and, with ``served_only``, what the broker
serves after recovery; their rows in turn, or JSON Lines built in worker processes."""
from __future__ import annotations

import pathlib

from rmqtool.errors import UsageError
from rmqtool.inspect.commitlog_dump import CommitLogDump
from rmqtool.report.sink import Run
from rmqtool.store.live import store_root_of
from rmqtool.store.cpus import default_workers
from rmqtool.store.view import StoreView


def commitlog_dumps(paths, selection, from_offset: int | None, to_offset: int | None, limit: int | None, *,
                    served_only: bool = False, **options) -> tuple[list, list]:
    """(a CommitLogDump a path, the running brokers' stores among them); ``options`` go to
    each CommitLogDump (body, preview, decompress, check_crc, show_blank). The store a path
    lies in is opened once (a view): its listing, its end, its lock and the simulation of its
    next start are read from it."""
    dumps, lives = [], []
    for path in paths:  # every path checked before the first row
        view = view_of(path)
        low, high = served(path, view, from_offset, to_offset) if served_only else (from_offset, to_offset)
        live = view.live if view is not None else None
        if live is not None:
            lives.append(live)
            high = live.commit_log_end if high is None else min(high, live.commit_log_end)
        dumps.append(CommitLogDump(path, selection, low, high, limit, view=view, **options))
    return dumps, lives


def settled_findings(dumps: list, lives: list) -> list:
    """The dumps' findings, less what a running broker is writing past its written end."""
    findings = [f for d in dumps for f in d.findings]
    for live in lives:
        findings = live.settled(findings)
    return findings


PARALLEL_FROM_BYTES = 64 << 20  # smaller dumps: forking costs more than it gives
PARALLEL_FROM_ROWS = 100_000  # a --limit below this is reached sooner in one process


def in_parallel(jobs: int | None, dumps: list, limit: int | None) -> bool:
    """-j as given; by default every core for a dump of much data (on disk: not a sparse file's
    holes), unless its rows are ones one process writes faster (:attr:`CommitLogDump.copy_bound`)."""
    if jobs is not None:
        return jobs > 1
    stored = sum(d.stored_bytes for d in dumps)
    return (default_workers() > 1 and stored >= PARALLEL_FROM_BYTES and (limit is None or limit >= PARALLEL_FROM_ROWS)
            and not any(d.copy_bound for d in dumps))


def parallel_jsonl(sink, dumps: list, limit: int | None, workers: int, bar) -> None:
    """JSON Lines built in worker processes, written here in commit log order."""
    for d in dumps:
        if limit is not None:
            if limit <= 0:
                return
            d.limit = limit
        for path, size, count in d.jsonl_files(workers, progress=bar):
            sink.encoded_file(path, size, count)
            if limit is not None:
                limit -= count


def chained(dumps: list, limit: int | None, bar, encoded: bool | str = False):
    """The rows of several dumps in turn, ``limit`` rows in all; ``encoded``: the sink's format,
    whose runs of rows may come whole (CommitLogDump.rows)."""
    for d in dumps:
        if limit is not None:
            if limit <= 0:
                return
            d.limit = limit
        for row in d.rows(bar, encoded):
            yield row
            if limit is not None:
                limit -= row.count if isinstance(row, Run) else 1


def view_of(path) -> StoreView | None:
    """The view of the store a path lies in (the store, its commitlog/ directory or a segment
    in it), or None when it lies in none (a segment file on its own)."""
    root = store_root_of(path)
    return StoreView(root) if root is not None else None


def served(path: pathlib.Path, view: StoreView | None, from_offset: int | None,
           to_offset: int | None) -> tuple[int, int]:
    """--served-only: the offsets asked for, within what the broker serves after recovery."""
    from rmqtool.recovery.outcome import served_range
    from rmqtool.store.detect import is_store_dir, require_store

    if path.is_dir():
        require_store(path)  # a directory that is no store: said as for every command (exit 4)
    if not is_store_dir(path):
        raise UsageError("--served-only takes a store directory (recovery is a whole-store matter)", path)
    low, high = served_range(view)
    from_offset = low if from_offset is None else max(from_offset, low)
    to_offset = high if to_offset is None else min(to_offset, high)
    return from_offset, max(to_offset, from_offset)
