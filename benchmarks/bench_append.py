"""Append throughput of the store engine, against raw sequential writes in the same run.

1 KB bodies to one topic over 8 queues, each message with a UNIQ_KEY (so each is indexed,
as a producer's would be), written by rmqtool.engine.store with the broker's default sizes
(1 GiB commit log files, 6 MB consume queue files, 5,000,000-slot index files) and inline
dispatch (consume queue unit + index entry per message). The messages are built before the
clock starts, as MessageExtBrokerInner objects reach the broker's store (properties string
made by SendMessageProcessor): the anchor measures the store, not the producer or broker.

Printed, for async flush (flushCommitLogLeastPages 4, as the broker) and sync flush (group
commit: 16 threads appending one message at a time, and a bulk loader with batches of 100):
messages/s and MB/s of records, the ratio to a raw sequential write of the same bytes (1 MiB
writes + fsync) measured in the same run, and the async rates' ratios to the anchor: the
real RocketMQ 4.9.8 broker put 379,000 msg/s (async flush, 1 KB) on this kind of machine.
Every mode runs in turns with the others, at least 3 times (benchmarks/runs.py): a rate is
over the median run, with the slowest and fastest run's and the load average beside it.

Targets (issue 27): ``append_many`` at least 1.0x the broker's rate; ``append()`` (one
message a call, one process) at least 0.5x.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import threading
import time

from benchmarks import runs
from benchmarks.verdict import report

ANCHOR_MSG_PER_S = 379_000  # the real 4.9.8 broker, async flush, 1 KB bodies
TARGET_APPEND_MANY = 1.0  # x the broker's rate
TARGET_APPEND = 0.5
BODY_SIZE = 1024
QUEUES = 8
TOPIC = "BenchTopic"
ASYNC_MESSAGES = 200_000
SYNC_THREADS = 16
SYNC_SECONDS = 2.0
SYNC_THREAD_MESSAGES = 20_000  # built for each thread: more than it appends in SYNC_SECONDS
SYNC_BULK_BATCH = 100
SYNC_BULK_MESSAGES = 50_000


def _messages(n: int, body: bytes):
    """Messages as the broker's SendMessageProcessor hands them to the store: property map and
    stored properties string (UNIQ_KEY, CLUSTER) already made, as a MessageExtBrokerInner has."""
    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.uniq_key import UniqIdGenerator

    uniq = UniqIdGenerator(ip=bytes([198, 51, 100, 7]), pid=4242, loader_hash=0x1234567)
    born = int(time.time() * 1000)
    return [producer_message(TOPIC, body, queue_id=i % QUEUES, born_timestamp=born, born_host="198.51.100.7:40000",
                             uniq_ids=uniq) for i in range(n)]


def _fresh(path: pathlib.Path) -> pathlib.Path:
    if path.exists():
        shutil.rmtree(path)
    return path


def _raw_sequential(path: pathlib.Path, total: int) -> float:
    """MB/s of writing ``total`` bytes in 1 MiB writes to a new file, then fsync."""
    chunk = os.urandom(1 << 20)
    started = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        left = total
        while left > 0:
            left -= os.write(fd, chunk[:min(left, len(chunk))])
        os.fsync(fd)
    finally:
        os.close(fd)
    seconds = time.perf_counter() - started
    os.unlink(path)
    return total / seconds / 1e6


def _async(root: pathlib.Path, messages, bulk: bool) -> tuple[float, float, int, float, float]:
    """msg/s and MB/s by the wall clock, bytes written, and msg/s by the CPU time of this
    process (all its threads: flusher and warmer included) and of the appending thread alone;
    CPU time is what another job on the machine cannot inflate."""
    from rmqtool.engine.store import Store

    with Store.open(_fresh(root), writable=True, flush="async", store_host="192.0.2.10:10911") as store:
        cpu, thread_cpu = time.process_time(), time.thread_time()
        started = time.perf_counter()
        if bulk:
            for i in range(0, len(messages), 1000):
                store.append_many(messages[i:i + 1000])
        else:
            append = store.append
            for m in messages:
                append(m)
        seconds = time.perf_counter() - started
        cpu, thread_cpu = time.process_time() - cpu, time.thread_time() - thread_cpu
        written = store.max_offset
    shutil.rmtree(root)
    n = len(messages)
    return n / seconds, written / seconds / 1e6, written, n / cpu, n / thread_cpu


def _sync_threads(root: pathlib.Path, body: bytes, per_thread_messages: int, seconds: float
                  ) -> tuple[float, float, float]:
    from rmqtool.engine.store import Store

    per_thread = [_messages(per_thread_messages, body) for _ in range(SYNC_THREADS)]
    counts = [0] * SYNC_THREADS
    stop = threading.Event()
    with Store.open(_fresh(root), writable=True, flush="sync", store_host="192.0.2.10:10911") as store:
        def writer(n: int) -> None:
            for m in per_thread[n]:
                if stop.is_set():
                    return
                store.append(m)
                counts[n] += 1
        threads = [threading.Thread(target=writer, args=(n,)) for n in range(SYNC_THREADS)]
        fsyncs = store.flusher.flush_count
        started = time.perf_counter()
        for t in threads:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - started
        fsyncs = store.flusher.flush_count - fsyncs
        written = store.max_offset
    shutil.rmtree(root)
    n = sum(counts)
    return n / seconds, written / seconds / 1e6, n / max(fsyncs, 1)


def _sync_bulk(root: pathlib.Path, messages) -> tuple[float, float]:
    from rmqtool.engine.store import Store

    with Store.open(_fresh(root), writable=True, flush="sync", store_host="192.0.2.10:10911") as store:
        started = time.perf_counter()
        for i in range(0, len(messages), SYNC_BULK_BATCH):
            store.append_many(messages[i:i + SYNC_BULK_BATCH])
        seconds = time.perf_counter() - started
        written = store.max_offset
    shutil.rmtree(root)
    return len(messages) / seconds, written / seconds / 1e6


def _rate_text(measured: runs.Rounds, side: str, amount: float, scale: float = 1.0, unit: str = "msg/s") -> str:
    r = measured[side]
    return (f"{amount / r.median / scale:>10,.0f} {unit} (min {amount / r.max / scale:,.0f}, "
            f"max {amount / r.min / scale:,.0f})")


def run(workdir: pathlib.Path, count: int = ASYNC_MESSAGES, sync_seconds: float = SYNC_SECONDS,
        sync_thread_messages: int = SYNC_THREAD_MESSAGES, sync_bulk_messages: int = SYNC_BULK_MESSAGES,
        rounds: int = runs.MIN_ROUNDS) -> dict:
    """Rates and the verdicts. The sizes are the bench's unless a test asks for a small run."""
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    root = workdir / "append-store"
    body = os.urandom(BODY_SIZE)
    started = time.perf_counter()
    messages = _messages(count, body)
    build = time.perf_counter() - started
    print(f"append: {count:,} messages of {BODY_SIZE} B built in {build:.2f} s "
          f"({count / build:,.0f}/s, not counted below)")
    kept: dict[str, list] = {"append": [], "append_many": [], "sync_threads": []}

    def async_side(bulk: bool):
        def measure() -> float:
            got = _async(root, messages, bulk=bulk)
            kept["append_many" if bulk else "append"].append(got)
            return count / got[0]
        return measure

    written = []

    def raw_side() -> float:  # seconds a MB: the same bytes the engine wrote
        total = written[0] if written else count * 1200
        return 1 / _raw_sequential(workdir / "append-raw.bin", total)

    def sync_threads_side() -> float:  # seconds a message
        got = _sync_threads(root, body, sync_thread_messages, sync_seconds)
        kept["sync_threads"].append(got)
        return 1 / got[0]

    def sync_bulk_side() -> float:
        rate, _ = _sync_bulk(root, messages[:sync_bulk_messages])
        return sync_bulk_messages / rate

    first = _async(root, messages, bulk=False)  # untimed: warms the page cache; the bytes a run writes
    written.append(first[2])
    measured = runs.rounds({"append": async_side(False), "append_many": async_side(True), "raw": raw_side,
                            "sync_threads": sync_threads_side, "sync_bulk": sync_bulk_side}, rounds)
    record = written[0] / count
    raw = 1 / measured["raw"].median
    print(f"append: raw sequential write of the same {written[0] / 1e6:.0f} MB: {raw:,.0f} MB/s "
          f"({raw * 1e6 / record:,.0f} records/s of {record:.0f} B; median of {len(measured['raw'].seconds)})")
    rate, bulk_rate = count / measured["append"].median, count / measured["append_many"].median
    for name, side in (("append():     ", "append"), ("append_many():", "append_many")):
        got = kept[side]
        cpu = sorted(g[3] for g in got)[len(got) // 2]
        thread = sorted(g[4] for g in got)[len(got) // 2]
        mbs = written[0] / measured[side].median / 1e6
        print(f"append: async flush, {name} {_rate_text(measured, side, count)}  {mbs:7.1f} MB/s  "
              f"ratio to raw {mbs / raw:.3f}  (by CPU time, medians: process {cpu:,.0f}, thread {thread:,.0f} msg/s)")
    sync_rate = 1 / measured["sync_threads"].median
    shared = sorted(g[2] for g in kept["sync_threads"])[len(kept["sync_threads"]) // 2]
    print(f"append: sync flush, {SYNC_THREADS} threads x append(): {_rate_text(measured, 'sync_threads', 1)}  "
          f"{sync_rate * record / 1e6:7.1f} MB/s  ratio to raw {sync_rate * record / 1e6 / raw:.3f}  "
          f"({shared:.1f} appends per fsync)")
    bulk_sync_rate = sync_bulk_messages / measured["sync_bulk"].median
    print(f"append: sync flush, append_many({SYNC_BULK_BATCH}): "
          f"{_rate_text(measured, 'sync_bulk', sync_bulk_messages)}  {bulk_sync_rate * record / 1e6:7.1f} MB/s  "
          f"ratio to raw {bulk_sync_rate * record / 1e6 / raw:.3f}")
    print(f"append: {measured.load_text}")
    verdicts = [
        report(runs.rate_verdict(f"append_many() / the real 4.9.8 broker's {ANCHOR_MSG_PER_S:,} msg/s",
                                 measured, "append_many", count, ">=", TARGET_APPEND_MANY, "x", digits=2,
                                 scale=ANCHOR_MSG_PER_S)),
        report(runs.rate_verdict(f"append(), one message a call / the real 4.9.8 broker's {ANCHOR_MSG_PER_S:,} "
                                 f"msg/s", measured, "append", count, ">=", TARGET_APPEND, "x", digits=2,
                                 scale=ANCHOR_MSG_PER_S))]
    return {"append": rate, "append_many": bulk_rate, "sync_threads": sync_rate, "sync_bulk": bulk_sync_rate,
            "runs": measured, "verdicts": verdicts}
