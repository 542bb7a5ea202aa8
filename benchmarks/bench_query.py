"""Key lookup through a full-size index file against a full commit log scan for the same key.

The store (built once under the work directory, then reused): one index file of the
broker's default geometry, 5,000,000 slots and 20,000,000 entries (about 420 MB, full,
plus the next file holding what did not fit), over a commit log of 200,000 messages with
100 keys each. It is written by rmqtool.engine.store (append, dispatched inline as the broker's
ReputMessageService would), or by the encoder and index writer when the engine is absent.

Printed: the median time of a key lookup (rmqtool query --key, index path), the median
time of the same lookup with --no-index (a scan of the whole commit log), their ratio,
and how many pages of the index files one lookup touches (the pages its preads span,
counted in a pass of its own: the lookup reads slots and entries at computed positions).
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import os
import pathlib
import random
import resource
import shutil
import statistics
import time

from benchmarks import runs
from benchmarks.verdict import report, verdict
from rmqtool.formats.indexfile import DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, index_file_size
from rmqtool.query.by_key import query_by_key

MESSAGES = 200_000
KEYS_PER_MESSAGE = 100  # with UNIQ_KEY off: 100 index entries per message, 20,000,000 in all
TOPIC = "BenchTopic"
T0 = 1_700_000_000_000
COMMITLOG_FILE_SIZE = 1 << 30  # the broker's default mappedFileSizeCommitLog
TARGET_RATIO = 100  # a lookup must beat the scan by at least this much
TARGET_PAGES = 64  # and touch no more pages of the index file than this
LOOKUPS = 15
LOOKUP_ROUNDS = 3
SCAN_ROUNDS = 3
BUILD_MARK = "bench-query-store.json"
BUILD_VERSION = 2


def _key(i: int, j: int) -> str:
    return f"order-{i}-{j}"


@dataclasses.dataclass(frozen=True)
class Shape:
    """The bench store's size: messages, KEYS a message, and the index file's geometry."""
    messages: int = MESSAGES
    keys: int = KEYS_PER_MESSAGE
    slots: int = DEFAULT_MAX_HASH_SLOT_NUM
    entries: int = DEFAULT_MAX_INDEX_NUM


def _params(shape: Shape) -> dict:
    return {"version": BUILD_VERSION, **dataclasses.asdict(shape)}


def _messages(shape: Shape):
    from rmqtool.engine.producer import producer_message

    body = b"x" * 48
    for i in range(shape.messages):
        keys = " ".join(_key(i, j) for j in range(shape.keys))
        yield i, keys, producer_message(TOPIC, body, keys=keys, queue_id=i % 8, born_timestamp=T0 + i,
                                        born_host="198.51.100.7:40000", generate_uniq_key=False)


def _build(store: pathlib.Path, shape: Shape) -> int:
    """A commit log of ``shape.messages`` records and the index the broker builds over it; returns the
    commit log's length. Written by the engine (append, inline dispatch)."""
    from rmqtool.engine.store import Store

    if store.exists():
        shutil.rmtree(store)
    clock = itertools.count(T0, 5)  # store timestamps 5 ms apart, the same every build
    with Store.open(store, writable=True, store_host="192.0.2.10:10911", clock=lambda: next(clock),
                    commitlog_size=COMMITLOG_FILE_SIZE, index_slots=shape.slots,
                    index_entries=shape.entries) as engine:
        batch = []
        for _, _, msg in _messages(shape):
            batch.append(msg)
            if len(batch) == 1000:
                engine.append_many(batch)
                batch.clear()
        if batch:
            engine.append_many(batch)
        return engine.max_offset


def _store(workdir: pathlib.Path, shape: Shape) -> pathlib.Path:
    store = workdir / "query-store"
    mark = store / BUILD_MARK
    built = json.loads(mark.read_text()) if mark.exists() else {}
    if {k: built.get(k) for k in _params(shape)} != _params(shape):
        started = time.perf_counter()
        print(f"query: building the bench store in {store} (once; about 2 minutes at the bench's size) ...",
              flush=True)
        length = _build(store, shape)
        (store / BUILD_MARK).write_text(json.dumps({**_params(shape), "commitlog_bytes": length}))
        print(f"query: built in {time.perf_counter() - started:.0f} s", flush=True)
    return store


def index_pages_read(store: pathlib.Path, key: str) -> int:
    """The pages of the store's index files that one lookup of ``key`` reads.

    The index reader never maps a file: it reads with ``os.pread`` (store/indexfile.py), so
    each pread on a file under index/ is counted by the pages it spans. Were the reader to
    read another way, the count would be 0, and the bench calls that INVALID, not a pass.
    """
    index_dir = os.path.realpath(store / "index")
    page = resource.getpagesize()
    touched: set[tuple[str, int]] = set()
    pread = os.pread

    def counting(fd: int, length: int, offset: int) -> bytes:
        data = pread(fd, length, offset)
        path = os.readlink(f"/proc/self/fd/{fd}")
        if data and os.path.dirname(path) == index_dir:
            touched.update((path, p) for p in range(offset // page, (offset + len(data) - 1) // page + 1))
        return data

    os.pread = counting
    try:
        query_by_key(store, key, topic=TOPIC)
    finally:
        os.pread = pread
    return len(touched)


def run(workdir: pathlib.Path, shape: Shape = Shape()) -> dict:
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    store = _store(workdir, shape)
    index_files = sorted((store / "index").iterdir())
    full = index_files[0]
    assert full.stat().st_size == index_file_size(shape.slots, shape.entries)
    commitlog_bytes = json.loads((store / BUILD_MARK).read_text())["commitlog_bytes"]
    print(f"query: index file {full.name}: {shape.slots:,} slots, {shape.entries:,} "
          f"entries, {full.stat().st_size / 1e6:.0f} MB (+{len(index_files) - 1} more file); commit log "
          f"{shape.messages:,} messages, {commitlog_bytes / 1e6:.0f} MB")

    rng = random.Random(4)
    keys = [(_key(i, rng.randrange(shape.keys)), i) for i in rng.sample(range(shape.messages), LOOKUPS)]
    lookup_times = []
    load_before = runs.load_average()
    for _ in range(LOOKUP_ROUNDS):
        for key, i in keys:
            started = time.perf_counter()
            result = query_by_key(store, key, topic=TOPIC)
            lookup_times.append(time.perf_counter() - started)
            assert len(result.messages) == 1 and result.sources[result.messages[0].commit_log_offset] == "index"
            assert not result.notes, result.notes
    key, i = keys[0]
    scan_times = []
    for _ in range(SCAN_ROUNDS):
        started = time.perf_counter()
        scanned = query_by_key(store, key, topic=TOPIC, use_index=False)
        scan_times.append(time.perf_counter() - started)
    assert [m.commit_log_offset for m in scanned.messages] == [
        m.commit_log_offset for m in query_by_key(store, key, topic=TOPIC).messages]
    load = runs.Rounds({}, load_before, runs.load_average()).load_text
    lookups, scans = runs.Runs(tuple(lookup_times)), runs.Runs(tuple(scan_times))
    lookup, scan = lookups.median, scans.median
    pages = full.stat().st_size // resource.getpagesize()
    ratio = scan / lookup
    touched = statistics.median(index_pages_read(store, key) for key, _ in keys)  # untimed: the count slows it
    print(f"query: key lookup (index) median {lookup * 1e3:.2f} ms over {len(lookup_times)} lookups; "
          f"full commit log scan median {scan * 1e3:.0f} ms over {SCAN_ROUNDS}")
    print(f"query: the index file has {pages:,} pages; a lookup's pages touched are the index file pages "
          f"its reads span (median)")
    spread = (f"medians: scan of {len(scan_times)} runs, min {scans.min * 1e3:.0f} ms, max {scans.max * 1e3:.0f} ms; "
              f"lookup of {len(lookup_times)}, min {lookups.min * 1e3:.2f} ms, max {lookups.max * 1e3:.2f} ms; {load}")
    verdicts = [report(verdict("query: scan / lookup", ratio, ">=", TARGET_RATIO, "x", digits=0, spread=spread)),
                report(verdict("query: pages touched per lookup", touched, "<=", TARGET_PAGES, digits=0,
                               invalid=None if touched else "no read of an index file seen"))]
    return {"lookup": lookup, "scan": scan, "pages": touched, "index_pages": pages, "verdicts": verdicts}
