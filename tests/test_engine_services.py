"""The engine's background services: group commit, async flush, background dispatch, the
segment allocator."""
from __future__ import annotations

import threading
import time

from rmqtool.engine.producer import producer_message
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.engine.store import Store
from rmqtool.store.message import Message

SMALL = dict(commitlog_size=64 * 1024, cq_size=20 * 20, index_slots=32, index_entries=120)


def _wait(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def test_sync_flush_returns_flushed_and_concurrent_appends_share_fsyncs(tmp_path):
    root = tmp_path / "store"
    results = []
    with Store.open(root, writable=True, flush="sync", **SMALL) as store:
        def writer(n):
            for i in range(40):
                r = store.append(producer_message("T", b"w%d-%d" % (n, i), queue_id=n))
                assert store.commit_log.flushed_where >= r.wrote_offset + r.wrote_bytes  # on disk when it returns
                results.append(r)
        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        fsyncs = store.flusher.flush_count
    assert len(results) == 160 and all(r.ok for r in results)
    assert 0 < fsyncs < 160  # waiters that came while a flush ran shared the next one
    messages = [m for m in CommitLog(root / "commitlog").scan() if isinstance(m, Message)]
    assert sorted(m.commit_log_offset for m in messages) == sorted(r.wrote_offset for r in results)
    for n in range(4):  # each queue's offsets follow the commit log order
        mine = [m for m in messages if m.queue_id == n]
        assert [m.queue_offset for m in mine] == list(range(40))


def test_async_flush_catches_up_in_the_background(tmp_path):
    root = tmp_path / "store"
    with Store.open(root, writable=True, flush="async", flush_interval_commit_log=10,
                    flush_commit_log_thorough_interval=20, **SMALL) as store:
        last = None
        for i in range(50):
            last = store.append(producer_message("T", b"x" * 100))
        end = last.wrote_offset + last.wrote_bytes
        assert _wait(lambda: store.commit_log.flushed_where >= end)
        assert _wait(lambda: store.checkpoint.physic_msg_timestamp == last.store_timestamp)


def test_async_flush_wakes_on_enough_dirty_pages(tmp_path):
    root = tmp_path / "store"
    with Store.open(root, writable=True, flush="async", flush_interval_commit_log=60_000,
                    flush_commit_log_thorough_interval=3_600_000, **SMALL) as store:
        time.sleep(0.05)  # the first, thorough, round is done
        store.append(producer_message("T", b"x" * 100))
        time.sleep(0.05)
        assert store.commit_log.flushed_where == 0  # less than 4 pages: waits for the interval
        for _ in range(20):
            r = store.append(producer_message("T", b"y" * 1000, compress=None))
        assert _wait(lambda: store.commit_log.flushed_where >= 4 * 4096)
    assert r.ok


def test_background_dispatch_is_observable_and_catches_up(tmp_path):
    root = tmp_path / "store"
    with Store.open(root, writable=True, dispatch="background", **SMALL) as store:
        with store.reput.lock:  # hold the dispatcher back
            rs = [store.append(producer_message("T", b"m%d" % i, keys=f"k{i}")) for i in range(30)]
            behind = store.dispatch_behind_bytes
            assert behind == rs[-1].wrote_offset + rs[-1].wrote_bytes - rs[0].wrote_offset > 0
        assert store.wait_dispatched()
        assert store.dispatch_behind_bytes == 0
        cq = store.consume_queues.find("T", 0)
        assert cq.max_offset_in_queue == 30


def test_inline_dispatch_is_never_behind(tmp_path):
    with Store.open(tmp_path / "store", writable=True, **SMALL) as store:
        for i in range(200):  # through several segment rolls
            store.append(producer_message("T", b"z" * 700, compress=None))
            assert store.dispatch_behind_bytes == 0


def test_next_segment_is_made_ahead_and_dropped_when_unused(tmp_path):
    root = tmp_path / "store"
    with Store.open(root, writable=True, **SMALL) as store:
        store.append(producer_message("T", b"x"))
        ahead = root / "commitlog" / f"{64 * 1024:020d}"
        assert _wait(lambda: ahead.exists())
        assert ahead.stat().st_size == 64 * 1024 and ahead.read_bytes() == bytes(64 * 1024)
    assert not ahead.exists()
    with Store.open(root, writable=True, **SMALL) as store:
        for _ in range(100):  # fill the first segment: the one made ahead is taken
            store.append(producer_message("T", b"x" * 1000, compress=None))
    names = sorted(p.name for p in (root / "commitlog").iterdir())
    assert names[:2] == [f"{0:020d}", f"{64 * 1024:020d}"]
