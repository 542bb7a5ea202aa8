"""The append hot paths against the plain ones they replace: runs of
consume queue units and index entries dispatched at once, and the warm-ahead of the commit log."""
from __future__ import annotations

import itertools
import os
import random
import time

import pytest

from rmqtool.formats.indexfile import HASH_SLOT_SIZE, INDEX_HEADER_SIZE, INDEX_SIZE, build_key, index_key_hash
from rmqtool.formats.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from rmqtool.dispatch.rules import RMQ_SYS_SCHEDULE_TOPIC
from rmqtool.engine.encoder import Encoder
from rmqtool.engine.message_inner import MessageInner
from rmqtool.engine.producer import producer_message
from rmqtool.engine.property_map import PropertyMap, properties_string
from rmqtool.engine.cq_writer import ConsumeQueueTable
from rmqtool.dispatch.dispatcher import CommitLogDispatcher
from rmqtool.engine.mapped_file import MADV_POPULATE_READ, MADV_POPULATE_WRITE
from rmqtool.engine.store import Store
from rmqtool.engine.index_writer import ENTRY, IndexServiceWriter


def _requests():
    """Dispatch requests in commit log order: three queues, one of them starting at queue
    offset 7 (fill units first), a gap in another (the broker writes it where it is), prepared
    and rollback records (no unit), keys and UNIQ_KEYs enough to fill several index files."""
    rnd = random.Random(11)
    next_offset = {("A", 0): 0, ("A", 1): 7, ("B", 0): 0}
    out = []
    offset = 0
    for i in range(600):
        topic, queue_id = rnd.choice(list(next_offset))
        tran = rnd.choice([0] * 8 + [TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE])
        size = rnd.randint(100, 400)
        if tran in (0, TRANSACTION_COMMIT_TYPE):
            queue_offset = next_offset[(topic, queue_id)]
            next_offset[(topic, queue_id)] += 1 if i != 300 else 3  # one gap
        else:
            queue_offset = 0
        keys = rnd.choice([None, f"k{i}", f"k{i} shared  k{i % 7}"])
        uniq = None if i % 9 == 0 else f"C6336407000010{i:018X}"
        out.append((topic, queue_id, offset, size, rnd.randint(-5, 5), 1_700_000_000_000 + 37 * i, queue_offset,
                    keys, uniq, tran))
        offset += size
    return out


def _tree(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_dispatching_runs_writes_what_one_by_one_writes(tmp_path):
    requests = _requests()
    trees = []
    for name, chunk in (("one", 1), ("runs", 50), ("all", len(requests))):
        root = tmp_path / name
        cqs = ConsumeQueueTable(root / "consumequeue", 20 * 16)  # files of 16 units: runs cross them
        ticks = itertools.count(1_700_000_000_000, 1000)
        index = IndexServiceWriter(root / "index", 8, 60, clock=lambda: next(ticks))
        dispatcher = CommitLogDispatcher(cqs, index)
        if chunk == 1:
            for r in requests:
                dispatcher.dispatch_one(*r)
        else:
            for i in range(0, len(requests), chunk):
                dispatcher.dispatch(requests[i:i + chunk])
        index.close()
        cqs.close()
        trees.append(_tree(root))
    one, runs, whole = trees
    assert len([n for n in one if n.startswith("index")]) >= 5  # several index files filled
    assert one == runs == whole


@pytest.mark.parametrize("flush", ["async", "sync"])
def test_warm_ahead_faults_in_without_writing(tmp_path, flush):
    """The window ahead of the writer is faulted in and no byte is written there. With sync
    flush it stays a hole (MADV_POPULATE_READ: every group commit's fdatasync would write what
    is dirty); with async flush its pages are made writable ahead (MADV_POPULATE_WRITE), as the
    broker's warming writes zeros, and may hold blocks."""
    root = tmp_path / "store"
    with Store.open(root, writable=True, commitlog_size=64 << 20, flush=flush) as store:
        for i in range(200):
            store.append(producer_message("T", os.urandom(1000), compress=None))
        end = store.max_offset
        deadline = time.monotonic() + 10
        while store.warmer.warmed_to < end + (2 << 20) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.warmer.warmed_to >= end + (2 << 20)
        assert store.warmer.advice == (MADV_POPULATE_WRITE if flush == "async" else MADV_POPULATE_READ)
        segment = store.commit_log.last.path
    data = segment.read_bytes()
    assert data[end:] == bytes(len(data) - end)
    if flush == "sync":
        assert os.stat(segment).st_blocks * 512 < end + (1 << 20)  # the warmed window holds no blocks


def test_a_message_after_a_full_index_file_rolls_it_in_a_run_too(tmp_path):
    """buildIndex makes the next file at the start of the message after the one that filled
    the last, keys or not; a run must too (the store's last file then is a new, empty one)."""
    requests = [("T", 0, 0, 100, 0, 1_700_000_000_000, 0, "a b c", "U1", 0),  # 4 entries: full
                ("T", 0, 100, 100, 0, 1_700_000_001_000, 1, None, None, 0)]
    trees = []
    for name in ("one", "run"):
        ticks = itertools.count(1_700_000_000_000, 1000)
        index = IndexServiceWriter(tmp_path / name, 4, 5, clock=lambda: next(ticks))
        if name == "one":
            for r in requests:
                index.build_index(r[0], r[2], r[5], r[9], r[7], r[8])
        else:
            index.build_index_many(requests)
        index.close()
        trees.append(_tree(tmp_path / name))
    assert len(trees[0]) == 2 and trees[0] == trees[1]


def test_a_run_hashes_every_kind_of_uniq_key_as_the_reference(tmp_path):
    """build_index_many hashes UNIQ_KEYs inline (the head of the previous key reused): short,
    non-ASCII, topic changes and keys sharing heads must all land in the slots
    indexKeyHashMethod picks."""
    rnd = random.Random(5)
    uniqs = ["", "a", "abcd", "订单订单订单", "AC1F000400002A9F0000000000000000"]
    uniqs += [f"C63364070000{rnd.randrange(3):04X}{i:016X}" for i in range(300)]
    requests = [(rnd.choice(["A", "订单", "A"]), 0, 100 * i, 100, 0, 1_700_000_000_000 + i, i, None, u, 0)
                for i, u in enumerate(uniqs)]
    index = IndexServiceWriter(tmp_path / "run", 64, 1000, clock=lambda: 1_700_000_000_000)
    index.build_index_many(requests)
    f = index.last
    slots = {}
    for n in range(1, f.index_count):
        h = ENTRY.unpack_from(f.mm, INDEX_HEADER_SIZE + 64 * HASH_SLOT_SIZE + n * INDEX_SIZE)[0]
        slots[n] = h
    index.close()
    assert len(slots) == len(requests)
    for n, r in enumerate(requests, start=1):
        assert slots[n] == index_key_hash(build_key(r[0], r[8])), r


def test_a_flush_timeout_is_in_every_result_and_the_records_stay(tmp_path, monkeypatch):
    """Sync flush that does not finish in time: PutMessageStatus FLUSH_DISK_TIMEOUT for the one
    message and for every message of a run, each result otherwise as written."""
    with Store.open(tmp_path / "s", writable=True, flush="sync", commitlog_size=1 << 20) as store:
        monkeypatch.setattr(store.flusher, "wait_flushed", lambda offset, *a, **k: False)
        one = store.append(producer_message("T", b"x" * 10, compress=None))
        many = store.append_many([producer_message("T", b"y" * 10, compress=None) for _ in range(5)])
        monkeypatch.undo()
        fine = store.append(producer_message("T", b"z", compress=None))
    assert one.status == "FLUSH_DISK_TIMEOUT" and not one.ok and one.queue_offset == 0
    assert [r.status for r in many] == ["FLUSH_DISK_TIMEOUT"] * 5
    assert [r.queue_offset for r in many] == [1, 2, 3, 4, 5]
    assert [r.wrote_offset for r in many] == [one.wrote_offset + one.wrote_bytes * (i + 1) for i in range(5)]
    assert fine.ok and fine.queue_offset == 6


# --- Encoder.prepare's per-shape cache ---------------------------------------------------------

_V4 = (bytes([198, 51, 100, 7]), 40000)
_V4_OTHER = (bytes([10, 0, 0, 1]), 5)
_V6 = (bytes(range(16)), 10911)
_STORE = (bytes([192, 0, 2, 10]), 10911)


def _shape_changing_messages():
    """Messages whose topic, hosts, sysFlag and property key set change from one to the next
    (and sometimes stay, so the cache is hit): short, non-ASCII and >127-byte (V2) topics,
    IPv4/IPv6 born and store hosts, hosts as lists, transaction and compression bits, maps
    with and without TAGS/KEYS/UNIQ_KEY, strings given and made, empty bodies and maps,
    delayed messages (redirected, and already on SCHEDULE_TOPIC_XXXX), unpaired surrogates."""
    rnd = random.Random(23)
    topics = ["T", "订单Topic", "x" * 128, "BenchTopic", RMQ_SYS_SCHEDULE_TOPIC]
    borns = [_V4, _V4_OTHER, _V6, [bytes([1, 2, 3, 4]), 7]]
    stores = [None, None, _STORE, _V6]
    flags = [0, 0, 1, TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE,
             0x1 << 4 | 0x1 << 5]  # stale V6 bits are recomputed from the hosts
    out = []
    for i in range(400):
        m = PropertyMap()
        if rnd.random() < 0.5:
            m["TAGS"] = rnd.choice(["a", "TagA", "订单"])
        if rnd.random() < 0.4:
            m["KEYS"] = f"k{i} k{i % 5}"
        if rnd.random() < 0.8:
            m["UNIQ_KEY"] = f"C6336407000010{i:018X}"
        if rnd.random() < 0.05:
            m["lone"] = "half \ud800 a pair"  # Java's encoder writes '?'
        if rnd.random() < 0.15:
            m["DELAY"] = str(rnd.choice([1, 3, 18, 40]))
        m["CLUSTER"] = "DefaultCluster"
        if rnd.random() < 0.1:
            m = {}
        text = None if rnd.random() < 0.5 or not m else properties_string(m)
        out.append(MessageInner(
            topic=rnd.choice(topics), body=rnd.choice([b"", os.urandom(rnd.randint(1, 300))]),
            queue_id=rnd.randrange(8), flag=rnd.randint(-3, 3), properties=m, properties_string=text,
            born_timestamp=1_700_000_000_000 + i, born_host=rnd.choice(borns), store_host=rnd.choice(stores),
            reconsume_times=rnd.randrange(3), sys_flag=rnd.choice(flags),
            prepared_transaction_offset=rnd.choice([0, 123456789]), store_timestamp=rnd.choice([None, 5])))
    return out


def test_a_long_lived_encoder_prepares_what_a_fresh_one_prepares():
    """The cache carries nothing from one message to the next: every prepared record (bytes
    and dispatch values) equals what a new Encoder, with empty caches, makes of it, also
    after the store host changes."""
    messages = _shape_changing_messages()
    cached = Encoder(_STORE)
    for n, msg in enumerate(messages):
        if n == 200:
            cached.store_host = _V6
        fresh = Encoder(cached.store_host)
        assert cached.prepare(msg) == fresh.prepare(msg), n
        assert cached.prepare(msg, 5) == fresh.prepare(msg, 5), n
        p = cached.prepare_fields(msg)
        assert type(p) is tuple and p == tuple(fresh.prepare(msg)), n
    assert 1 < len(cached._shapes) < len(messages)  # the cache was used, and hit


def test_prepared_records_are_the_schemas_records():
    """Each record as the construct schema builds it from the message's own fields (V6 bits
    from the hosts, V2 for long topics, the body CRC), whatever came before it."""
    from rmqtool.formats.commitlog import MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, MessageRecord
    from rmqtool.store.crc import crc32_reference

    encoder = Encoder(_STORE)
    checked = 0
    for n, msg in enumerate(_shape_changing_messages()):
        if "DELAY" in msg.properties:
            continue  # redirected: the other test compares them
        p = encoder.prepare(msg)
        store = msg.store_host or _STORE
        sys_flag = msg.sys_flag & ~0x30 | (0x10 if len(msg.born_host[0]) == 16 else 0) | (
            0x20 if len(store[0]) == 16 else 0)
        topic = msg.topic.encode()
        text = msg.properties_string if msg.properties_string is not None else properties_string(msg.properties)
        expected = MessageRecord.build(dict(
            total_size=p.total_size, magic_code=MESSAGE_MAGIC_CODE_V2 if len(topic) > 127 else MESSAGE_MAGIC_CODE_V1,
            body_crc=crc32_reference(msg.body) if msg.body else 0, queue_id=msg.queue_id, flag=msg.flag,
            queue_offset=7 + n, physical_offset=1000 * n, sys_flag=sys_flag, born_timestamp=msg.born_timestamp,
            born_host=bytes(msg.born_host[0]), born_port=msg.born_host[1], store_timestamp=99 + n,
            store_host=store[0], store_port=store[1], reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=msg.prepared_transaction_offset, body=msg.body, topic=topic,
            properties=text.encode("utf-8", "replace")))
        assert p.to_bytes(7 + n, 1000 * n, 99 + n) == expected, n
        assert (p.sys_flag, p.store_ip, p.store_port) == (sys_flag, store[0], store[1])
        checked += 1
    assert checked > 300


def test_a_clock_behind_the_newest_index_file_names_the_next_one_right_after_it(tmp_path):
    """A store written under a clock ahead of ours (or a clock moved back): the next index
    file is named one millisecond after the newest, at once, so the files still sort in write
    order (stepping the clock one millisecond at a time would take days to get there)."""
    from rmqtool.engine.index_writer import index_file_name, index_name_time
    ahead = 1_800_000_000_000  # the newest file's name is 3 weeks past the clock below
    first = IndexServiceWriter(tmp_path, 4, 5, clock=lambda: ahead)
    first.build_index("T", 0, ahead, 0, "a b c", "U1")  # 4 entries: the file is full
    first.close()
    behind = IndexServiceWriter(tmp_path, 4, 5, clock=lambda: ahead - 21 * 86_400_000)
    behind.load()
    behind.build_index("T", 100, ahead, 0, None, "U2")
    behind.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [index_file_name(ahead), index_file_name(ahead + 1)]
    assert index_name_time(names[-1]) == ahead + 1
