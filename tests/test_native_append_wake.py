"""append() through the native kernel's appender (rmqtool/native/append.c) wakes the async flusher as
the Python path does: Store._wake_flusher after a put whose offset reaches what it last returned (a
page more written), so FlushRealTimeService.maybe_wakeup is asked at the same offsets with the kernel
and with ``native.kernel`` None. The appender keeps the last message's shape between calls: a change of
the store's own host (which the encoder's cache follows) and messages of other born hosts and topics
still write the Python path's bytes."""
from __future__ import annotations

import itertools

import pytest

from rmqtool import native
from rmqtool.engine.producer import producer_message
from rmqtool.engine.store import Store
from rmqtool.engine.uniq_key import UniqIdGenerator

pytestmark = pytest.mark.usefixtures("native_built")

SIZES = dict(commitlog_size=64 * 1024, cq_size=40 * 20, index_slots=64, index_entries=400)
STAMP = 1_700_000_000_000
HOSTS = ("198.51.100.7:40000", "[2001:db8::7]:40001", "198.51.100.8:40000")


def _messages(n: int) -> list:
    uniq = UniqIdGenerator(ip=bytes([198, 51, 100, 7]), pid=7, loader_hash=0x1234567, clock=lambda: STAMP)
    return [producer_message("Wake" if i % 7 else "Woken", bytes([i % 251]) * (300 + 37 * i % 900), queue_id=i % 2,
                             born_timestamp=STAMP + i, born_host=HOSTS[(i // 5) % len(HOSTS)], uniq_ids=uniq,
                             compress=None)
            for i in range(n)]


def _write(root, kernel) -> dict:
    """120 messages one a call; the store's host changes half way. Returns the offsets the flusher was
    asked at, the offsets the appender called the store's wake with, the results and the files."""
    clock = itertools.count(STAMP + 1000, 3).__next__
    asked, woke = [], []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(native, "kernel", kernel)
        with Store.open(root, writable=True, flush="async", store_host="192.0.2.10:10911", clock=clock,
                        **SIZES) as store:
            wake = store._wake_flusher

            def counted(offset):
                woke.append(offset)
                return wake(offset)

            store._wake_flusher = counted  # what the appender is given (its first put makes it)
            maybe = store.flusher.maybe_wakeup
            store.flusher.maybe_wakeup = lambda: (asked.append(store.commit_log.max_offset), maybe())[1]
            results = []
            for i, m in enumerate(_messages(120)):
                if i == 61:  # the same shape key as the message before
                    store.encoder.store_host = "192.0.2.99:10912"  # the shapes cached hold the old one
                results.append(tuple(store.append(m)))
            appended = store._put_one is not None
    tree = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    return dict(asked=asked, woke=woke, results=results, tree=tree, appended=appended)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    base = tmp_path_factory.mktemp("append-wake")
    return {use: _write(base / str(use), native.kernel if use else None) for use in (True, False)}


def _rule(results) -> list:
    """The puts after which the flusher is asked (the first put a page past the last ask), as
    (record offset, commit log end)."""
    out, at = [], 0
    for r in results:  # PutResult: wrote_offset, wrote_bytes
        if r[1] >= at:
            out.append((r[1], r[1] + r[2]))
            at = r[1] + 4096
    return out


def test_the_flusher_is_asked_at_the_python_paths_offsets(written):
    fast, pure = written[True], written[False]
    assert fast["appended"] and not pure["appended"]
    assert fast["asked"] == pure["asked"] == [end for _, end in _rule(fast["results"])]
    assert 10 < len(fast["asked"]) < 120


def test_the_appender_calls_the_wake_only_once_the_offset_reaches_what_it_returned(written):
    # the calls the rule makes; besides them only the appender's first (before it knows the offset) and
    # one after a put the Python path made (a new segment, queue file or index file), which ask nothing
    fast = written[True]
    woke, rule = fast["woke"], [offset for offset, _ in _rule(fast["results"])]
    extra = [o for o in woke if o not in rule]
    assert [o for o in woke if o in rule] == rule
    rolled = sum(p.startswith(("commitlog/", "consumequeue/", "index/")) for p in fast["tree"])
    assert len(extra) <= 1 + rolled < len(rule)


def test_a_new_store_host_and_other_born_hosts_write_the_python_paths_bytes(written):
    fast, pure = written[True], written[False]
    assert fast["results"] == pure["results"]
    assert fast["tree"].keys() == pure["tree"].keys()
    for path in fast["tree"]:
        assert fast["tree"][path] == pure["tree"][path], path
    stores = [r[10] for r in fast["results"]]  # PutResult.store_ip
    assert set(stores[:61]) == {bytes([192, 0, 2, 10])} and set(stores[61:]) == {bytes([192, 0, 2, 99])}
