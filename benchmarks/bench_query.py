"""Key lookup through a full-size index file against a full commit log scan for the same key.

The store (built once under the work directory, then reused): one index file of the
broker's default geometry, 5,000,000 slots and 20,000,000 entries (about 420 MB, full,
plus the next file holding what did not fit), over a commit log of 200,000 messages with
100 keys each. It is written by rmqtool.engine.store (append, dispatched inline as the broker's
ReputMessageService would), or by the encoder and index writer when the engine is absent.

Printed: the median time of a key lookup (rmqtool query --key, index path), the median
time of the same lookup with --no-index (a scan of the whole commit log), their ratio,
and how many pages of the index file one lookup touches (minor page faults of its fresh
mappings: the lookup maps the files and reads slots and entries at computed positions).
"""
from __future__ import annotations

import itertools
import json
import pathlib
import random
import resource
import shutil
import statistics
import time

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


def _params() -> dict:
    return {"version": BUILD_VERSION, "messages": MESSAGES, "keys": KEYS_PER_MESSAGE,
            "slots": DEFAULT_MAX_HASH_SLOT_NUM, "entries": DEFAULT_MAX_INDEX_NUM}


def _messages():
    from rmqtool.engine.producer import producer_message

    body = b"x" * 48
    for i in range(MESSAGES):
        keys = " ".join(_key(i, j) for j in range(KEYS_PER_MESSAGE))
        yield i, keys, producer_message(TOPIC, body, keys=keys, queue_id=i % 8, born_timestamp=T0 + i,
                                        born_host="198.51.100.7:40000", generate_uniq_key=False)


def _build(store: pathlib.Path) -> int:
    """A commit log of MESSAGES records and the index the broker builds over it; returns the
    commit log's length. Written by the engine (append, inline dispatch)."""
    from rmqtool.engine.store import Store

    if store.exists():
        shutil.rmtree(store)
    clock = itertools.count(T0, 5)  # store timestamps 5 ms apart, the same every build
    with Store.open(store, writable=True, store_host="192.0.2.10:10911", clock=lambda: next(clock),
                    commitlog_size=COMMITLOG_FILE_SIZE, index_slots=DEFAULT_MAX_HASH_SLOT_NUM,
                    index_entries=DEFAULT_MAX_INDEX_NUM) as engine:
        batch = []
        for _, _, msg in _messages():
            batch.append(msg)
            if len(batch) == 1000:
                engine.append_many(batch)
                batch.clear()
        if batch:
            engine.append_many(batch)
        return engine.max_offset


def _store(workdir: pathlib.Path) -> pathlib.Path:
    store = workdir / "query-store"
    mark = store / BUILD_MARK
    built = json.loads(mark.read_text()) if mark.exists() else {}
    if {k: built.get(k) for k in _params()} != _params():
        started = time.perf_counter()
        print(f"query: building the bench store in {store} (once; about 2 minutes) ...", flush=True)
        length = _build(store)
        (store / BUILD_MARK).write_text(json.dumps({**_params(), "commitlog_bytes": length}))
        print(f"query: built in {time.perf_counter() - started:.0f} s", flush=True)
    return store


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def run(workdir: pathlib.Path) -> None:
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    store = _store(workdir)
    index_files = sorted((store / "index").iterdir())
    full = index_files[0]
    assert full.stat().st_size == index_file_size(DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM)
    commitlog_bytes = json.loads((store / BUILD_MARK).read_text())["commitlog_bytes"]
    print(f"query: index file {full.name}: {DEFAULT_MAX_HASH_SLOT_NUM:,} slots, {DEFAULT_MAX_INDEX_NUM:,} "
          f"entries, {full.stat().st_size / 1e6:.0f} MB (+{len(index_files) - 1} more file); commit log "
          f"{MESSAGES:,} messages, {commitlog_bytes / 1e6:.0f} MB")

    rng = random.Random(4)
    keys = [(_key(i, rng.randrange(KEYS_PER_MESSAGE)), i) for i in rng.sample(range(MESSAGES), LOOKUPS)]
    lookup_times, faults = [], []
    for _ in range(LOOKUP_ROUNDS):
        for key, i in keys:
            before = _minor_faults()
            started = time.perf_counter()
            result = query_by_key(store, key, topic=TOPIC)
            lookup_times.append(time.perf_counter() - started)
            faults.append(_minor_faults() - before)
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
    lookup = statistics.median(lookup_times)
    scan = statistics.median(scan_times)
    pages = full.stat().st_size // resource.getpagesize()
    ratio = scan / lookup
    touched = statistics.median(faults)
    print(f"query: key lookup (index) median {lookup * 1e3:.2f} ms over {len(lookup_times)} lookups; "
          f"full commit log scan median {scan * 1e3:.0f} ms over {SCAN_ROUNDS}; scan/lookup = {ratio:,.0f}x "
          f"(target >= {TARGET_RATIO}x: {'PASS' if ratio >= TARGET_RATIO else 'MISS'})")
    print(f"query: pages touched per lookup (minor faults, median) {touched:.0f} of the index file's "
          f"{pages:,} (target <= {TARGET_PAGES}: {'PASS' if touched <= TARGET_PAGES else 'MISS'})")
