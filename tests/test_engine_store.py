"""The engine's stores read back through the readers, and the engine on existing stores."""
from __future__ import annotations

import base64
import calendar
import datetime
import hashlib
import ipaddress
import os
import pathlib
import time

import pytest

from conftest import V4, V5, load_truth
from helpers import copy_tree, read_at
from rmqtool.errors import CorruptData, StoreLocked, UsageError
from rmqtool.formats import properties as props
from rmqtool.formats import sysflag
from rmqtool.formats.commitlog import MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2
from rmqtool.query.by_key import query_by_key
from rmqtool.dispatch.rules import DelayLevels, RMQ_SYS_SCHEDULE_TOPIC, tags_code
from rmqtool.engine.batch_body import decode_batch_body
from rmqtool.engine.mapped_file import WARM_AHEAD
from rmqtool.engine.encoder import Encoder
from rmqtool.engine.message_inner import MessageInner
from rmqtool.engine.producer import batch_item, broker_inner, producer_batch, producer_message, producer_properties
from rmqtool.engine.property_map import PropertyMap, java_order, properties_string
from rmqtool.engine.uniq_key import UniqIdGenerator
from rmqtool.formats.indexfile import java_string_hash
from rmqtool.store.commitlog import Blank, Corrupt
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.consumequeue import open_consume_queues
from rmqtool.engine.store import Store
from rmqtool.recovery.commitlog_walk import V5 as RULES_5_3
from rmqtool.recovery.outcome import Settings as RecoverySettings
from rmqtool.store.indexfile import list_index_files
from rmqtool.store.message import Message
from rmqtool.store.msgid import decode_uniq_key

SMALL = dict(commitlog_size=32 * 1024, cq_size=20 * 20, index_slots=32, index_entries=120)
V6_BORN = "[2001:db8:0:1::7]:40000"
V6_STORE = "[2001:db8::10]:10911"
LONG_TOPIC = "LongTopic-" + "x" * 190


def _varied_messages(n: int = 400) -> list[MessageInner]:
    """Everything the encoder has a branch for: hosts, bodies, tags, delays, transactions."""
    out = []
    for i in range(n):
        topic = (LONG_TOPIC if i % 23 == 5 else ("OrderTopic", "PayTopic", "LogTopic")[i % 3])
        body = (bytes(range(256)) * 30 if i % 41 == 3 else f"body {i} ünïcødé 🚀".encode() * (i % 9))
        transaction = {7: "prepared", 8: "commit", 9: "rollback"}.get(i % 31)
        out.append(producer_message(
            topic, body, tags=("TagA", "TagA||TagB", "标签", None)[i % 4],
            keys=(f"k-{i}", [f"k-{i}", "shared", f"订单{i}"], None)[i % 3],
            user_properties={"城市": "杭州", "emoji": "😀"} if i % 5 == 0 else None,
            queue_id=i % 4, flag=i * 7919, born_timestamp=1_700_000_000_000 + i,
            born_host=V6_BORN if i % 11 == 0 else f"198.51.100.{i % 250}:{40000 + i}",
            store_host=V6_STORE if i % 13 == 0 else None, reconsume_times=i % 3,
            delay_level=(0, 0, 0, 2, 99)[i % 5] if i % 17 == 4 else 0, transaction=transaction,
            producer_group="pg" if transaction else None,
            prepared_transaction_offset=i if transaction in ("commit", "rollback") else 0,
            generate_uniq_key=i % 50 != 1, compress=("zlib", "lz4", "zstd")[i % 3]))
    return out


def _expected_string(msg: MessageInner) -> str:
    return msg.properties_string if msg.properties_string is not None else properties_string(msg.properties)


@pytest.fixture
def written(tmp_path):
    """A store of varied messages and batches; (root, [(input, result)], batches)."""
    root = tmp_path / "store"
    pairs = []
    batches = []
    # a 5.x store: the varied messages have a topic of 200 characters (a V2 record)
    with Store.open(root, writable=True, store_host="192.0.2.10:10911", recovery=RecoverySettings(semantics=RULES_5_3),
                    **SMALL) as store:
        for i, msg in enumerate(_varied_messages()):
            before = Encoder(store.store_host).prepare(MessageInner(**{
                f: getattr(msg, f) for f in MessageInner.__dataclass_fields__}))
            pairs.append((msg, store.append(msg), before))
            if i % 100 == 50:
                items = [batch_item(f"batch {i} {j}".encode(), tags="BT" if j % 2 else None,
                                        keys=f"bk-{i}-{j}", user_properties={"seq": str(j)}) for j in range(6)]
                batch = producer_batch("BatchTopic", items, queue_id=1, born_host=V6_BORN)
                batches.append((batch, store.put_messages(batch)))
        assert store.dispatch_behind_bytes == 0
    return root, pairs, batches


def test_every_field_reads_back(written):
    root, pairs, batches = written
    cl = CommitLog(root / "commitlog")
    results = list(cl.scan())
    assert not [r for r in results if isinstance(r, Corrupt)] and not cl.findings
    blanks = [r for r in results if isinstance(r, Blank)]
    assert len(blanks) == len(cl.segments) - 1 >= 3 and all(b.valid for b in blanks)
    by_offset = {r.commit_log_offset: r for r in results if isinstance(r, Message)}
    assert len(by_offset) == len(pairs) + sum(r.msg_num for _, r in batches)
    for msg, r, before in pairs:
        m = by_offset[r.wrote_offset]
        assert m.store_size == r.wrote_bytes and m.body_crc_ok
        assert (m.topic, m.queue_id, m.queue_offset) == (r.topic, r.queue_id, r.queue_offset)
        assert m.physical_offset == r.wrote_offset and m.store_timestamp == r.store_timestamp
        assert m.body == msg.body and m.flag == msg.flag and m.reconsume_times == msg.reconsume_times
        assert (m.born_timestamp, (m.born_ip, m.born_port)) == (msg.born_timestamp, msg.born_host)
        store_host = msg.store_host or (ipaddress.ip_address("192.0.2.10").packed, 10911)
        assert (m.store_ip, m.store_port) == store_host
        assert m.prepared_transaction_offset == msg.prepared_transaction_offset
        v6 = (sysflag.BORNHOST_V6_FLAG if len(msg.born_host[0]) == 16 else 0) | (
            sysflag.STOREHOSTADDRESS_V6_FLAG if len(store_host[0]) == 16 else 0)
        assert m.sys_flag == (msg.sys_flag & ~0x30) | v6
        level = before.delay_level
        if level:  # redirected: the map with REAL_TOPIC/REAL_QID (and the clamped DELAY) added
            assert m.topic == RMQ_SYS_SCHEDULE_TOPIC and m.queue_id == level - 1 <= 17
            assert m.properties == {**msg.properties, "DELAY": str(level), "REAL_TOPIC": msg.topic,
                                    "REAL_QID": str(msg.queue_id)}
        else:
            assert m.properties_raw.decode() == _expected_string(msg)
        assert m.magic_code == (MESSAGE_MAGIC_CODE_V2 if msg.topic == LONG_TOPIC or m.topic == LONG_TOPIC
                                else MESSAGE_MAGIC_CODE_V1)
        assert m.msg_id == r.msg_id and m.uniq_key == r.uniq_key
        if m.compression:
            assert m.decompressed_body()  # the codecs read what the client-style compressor wrote
        if m.transaction_type in (1, 3):  # prepared and rollback records: queue offset 0
            assert m.queue_offset == 0
    for batch, r in batches:
        inner = decode_batch_body(batch.body)
        batch_string = properties_string(batch.properties).encode()
        for i, offset in enumerate(r.offsets):
            m = by_offset[offset]
            flag, body, raw = inner[i]
            assert (m.topic, m.queue_id, m.queue_offset) == ("BatchTopic", 1, r.queue_offset + i)
            assert m.body == body and m.flag == flag and m.store_timestamp == r.store_timestamp
            assert m.properties_raw == raw + b"\x02" + batch_string
            assert m.sys_flag & sysflag.BORNHOST_V6_FLAG


def test_consume_queues_and_index_read_back(written):
    root, pairs, batches = written
    queues = open_consume_queues(root)
    assert not queues.all_findings()
    expected: dict[tuple[str, int], list] = {}
    for r in [r for _, r, _b in pairs] + [r for _, r in batches]:
        for i, offset in enumerate(r.offsets):
            expected.setdefault((r.topic, r.queue_id), []).append((r.queue_offset + i, offset))
    cl = CommitLog(root / "commitlog")
    for (topic, queue_id), units in expected.items():
        cq = queues.find(topic, queue_id)
        got = {u.queue_offset: u for u in cq.iter_units()}
        for queue_offset, offset in units:
            m = read_at(cl, offset)
            if m.transaction_type in (1, 3):
                assert got.get(queue_offset) is None or got[queue_offset].commit_log_offset != offset
                continue
            u = got[queue_offset]
            assert (u.commit_log_offset, u.size) == (offset, m.store_size)
            if topic == RMQ_SYS_SCHEDULE_TOPIC:
                level = int(m.properties[props.PROPERTY_DELAY_TIME_LEVEL])
                assert u.tags_code == m.store_timestamp + DelayLevels().table[level]
            else:
                assert u.tags_code == tags_code(m.tags)
        assert cq.max_offset == max((q for q, o in units if read_at(cl, o).transaction_type not in (1, 3)),
                                    default=-1) + 1
    files = list_index_files(root).open_all()
    assert len(files) >= 3 and [f.name for f in files] == sorted(f.name for f in files)
    assert all(f.header.index_count == 120 for f in files[:-1])  # full: maxIndexNum - 1 entries each
    for key, topic in (("k-10", "PayTopic"), ("shared", "PayTopic"), ("订单43", "PayTopic"), ("k-12", "OrderTopic"),
                       ("bk-50-3", "BatchTopic")):
        found = query_by_key(root, key, topic=topic, index_only=True, max_num=1000)
        offsets = {m.commit_log_offset for m in found.messages}
        truth = {o for (_, r, _b) in pairs for o in r.offsets
                 if r.topic == topic and key in read_at(cl, o).keys and read_at(cl, o).transaction_type != 3}
        truth |= {o for _, r in batches for o in r.offsets if r.topic == topic and key in read_at(cl, o).keys}
        assert offsets == truth and truth, key
    uniq = pairs[3][1].uniq_key
    assert [m.commit_log_offset for m in query_by_key(root, uniq, topic=pairs[3][1].topic, uniq_key=True,
                                                      index_only=True).messages] == [pairs[3][1].wrote_offset]


def _snapshot(root: pathlib.Path) -> dict:
    return {str(p.relative_to(root)): (hashlib.sha1(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_append_to_a_fixture_copy_continues_it(tmp_path):
    truth = load_truth(V4 / "basic" / "truth.json")
    root = tmp_path / "store"
    copy_tree(V4 / "basic" / "store", root)
    old = {p: p.read_bytes() for p in (root / "commitlog").iterdir()}
    old_max = truth["truth"]["commitlog"]["maxPhyOffset"]
    cq_truth = truth["truth"]["consumeQueues"]
    results = []
    with Store.open(root, writable=True) as store:
        c = store.config
        assert (c.mapped_file_size_commit_log, c.mapped_file_size_consume_queue, c.max_hash_slot_num,
                c.max_index_num) == (262144, 2000, 1000, 4000)
        assert store.max_offset == old_max
        assert store.store_host == (ipaddress.ip_address("192.0.2.10").packed, 10911)
        for i in range(300):
            topic = ("OrderTopic", "PaymentTopic", "AuditLogTopic", "NewTopic")[i % 4]
            results.append(store.append(producer_message(topic, b"new %d" % i * 20, keys=f"new-{i}",
                                                             tags="TagA", queue_id=i % 4)))
    assert results[0].wrote_offset == old_max
    nxt = {}
    for r in results:
        key = (r.topic, r.queue_id)
        first = cq_truth.get(r.topic, {}).get(str(r.queue_id), {}).get("maxOffset", 0)
        assert r.queue_offset == nxt.get(key, first)
        nxt[key] = r.queue_offset + 1
    # the old bytes are untouched up to the old end
    for p, data in old.items():
        now = p.read_bytes()
        end = min(len(data), max(0, old_max - int(p.name)))
        assert now[:end] == data[:end]
    cl = CommitLog(root / "commitlog")
    scanned = list(cl.scan())
    assert not [r for r in scanned if isinstance(r, Corrupt)]
    assert sum(isinstance(r, Message) for r in scanned) == 5000 + 300
    queues = open_consume_queues(root)
    for r in results:
        u = queues.find(r.topic, r.queue_id).get(r.queue_offset)
        assert (u.commit_log_offset, u.size) == (r.wrote_offset, r.wrote_bytes)
    for topic, per_queue in cq_truth.items():
        for qid, q in per_queue.items():
            cq = queues.find(topic, int(qid))
            if cq is None:
                continue
            for queue_offset, offset, size, tags in q["entries"][:50]:
                u = cq.get(queue_offset)
                assert (u.commit_log_offset, u.size, u.tags_code) == (offset, size, tags)
    found = query_by_key(root, "new-79", topic="NewTopic", index_only=True)
    assert [m.commit_log_offset for m in found.messages] == [results[79].wrote_offset]
    old_key = query_by_key(root, "order-10", topic="OrderTopic", index_only=True)
    assert [m.commit_log_offset for m in old_key.messages] == sorted(
        tm["physicalOffset"] for tm in truth["truth"]["messages"]
        if tm["topic"] == "OrderTopic" and "order-10" in (tm.get("keys") or "").split(" "))


def test_append_to_a_batch_topic_continues_its_batch_consume_queue(tmp_path):
    """A 5.x store's BatchCQ topic: an appended message gets the queue offset after the batch
    queue's last batch (5.3.3 BatchConsumeQueue.assignQueueOffset: the batch topic queue table)
    and one 46-byte unit of batch size 1 in batchconsumequeue/, none in consumequeue/ (the real
    5.3.3 engine read such a store back with the unit where it was written: tools/real-broker)."""
    truth = load_truth(V5 / "batchcq" / "truth.json")["truth"]["consumeQueues"]
    root = tmp_path / "store"
    copy_tree(V5 / "batchcq" / "store", root)
    (root / "lock").unlink()
    with Store.open(root, writable=True) as store:
        results = [store.append(producer_message("BatchCQTopic", b"after %d" % i, keys=f"after-{i}",
                                                     queue_id=i % 2)) for i in range(5)]
        plain = store.append(producer_message("PlainTopic", b"plain", queue_id=0))
    queues = open_consume_queues(root)
    for q in (0, 1):
        mine = [r for r in results if r.queue_id == q]
        first = truth["BatchCQTopic"][str(q)]["apiMaxOffsetInQueue"]
        assert [r.queue_offset for r in mine] == list(range(first, first + len(mine)))
        bcq = queues.find("BatchCQTopic", q)
        assert bcq.is_batch and bcq.max_offset == first + len(mine)
        for r in mine:
            u = bcq.get(r.queue_offset)
            assert (u.commit_log_offset, u.size, u.msg_base_offset, u.batch_size) == \
                (r.wrote_offset, r.wrote_bytes, r.queue_offset, 1)
    assert not (root / "consumequeue" / "BatchCQTopic").exists()
    assert plain.queue_offset == truth["PlainTopic"]["0"]["apiMaxOffsetInQueue"]


def test_read_only_open_takes_no_lock(tmp_path):
    root = tmp_path / "store"
    copy_tree(V4 / "txdelay" / "store", root)
    ro = Store.open(root)
    assert ro.max_offset == load_truth(V4 / "txdelay" / "truth.json")["truth"]["commitlog"]["maxPhyOffset"]
    assert ro.queue_offsets()[("TxTopic", 0)] == 11
    assert ro.locked_by() is None
    with pytest.raises(UsageError):
        ro.append(producer_message("T", b"x"))
    with Store.open(root, writable=True) as rw:  # a writer can open it meanwhile
        assert ro.locked_by() == os.getpid()
        assert rw.dispatch_behind_bytes == 0
    assert ro.locked_by() is None
    ro.close()
    # the fixture itself is read-only on disk: opening it read-only just works
    assert Store.open(V4 / "basic" / "store").max_offset == 2904272


def test_read_only_open_changes_no_byte(tmp_path):
    root = tmp_path / "store"
    copy_tree(V4 / "batch" / "store", root)
    before = _snapshot(root)
    s = Store.open(root)
    s.max_offset, s.min_offset, s.queue_offsets(), s.locked_by(), list(s.reader().scan(to_offset=5000))
    s.close()
    assert _snapshot(root) == before
    assert not (root / "abort").exists()


def test_abort_marker_while_open_and_after_unclean_exit(tmp_path):
    root = tmp_path / "store"
    store = Store.open(root, writable=True, **SMALL)
    store.append(producer_message("T", b"one"))
    assert (root / "abort").read_bytes() == b""
    store.close()
    assert not (root / "abort").exists() and (root / "lock").read_bytes() == b"lock"
    (root / "abort").write_bytes(b"")  # as a killed writer leaves it
    with pytest.raises(CorruptData):
        Store.open(root, writable=True)
    assert Store.open(root).locked_by() is None  # the failed open let go of the lock
    with Store.open(root, writable=True, recover=True) as store:
        r = store.append(producer_message("T", b"two"))
    assert r.queue_offset == 1 and not (root / "abort").exists()


def test_recover_zeroes_a_torn_tail_and_keeps_going(tmp_path):
    root = tmp_path / "store"
    with Store.open(root, writable=True, **SMALL) as store:
        rs = [store.append(producer_message("T", b"m%d" % i, keys=f"k{i}")) for i in range(10)]
    seg = root / "commitlog" / "00000000000000000000"
    data = bytearray(seg.read_bytes())
    end = rs[-1].wrote_offset + rs[-1].wrote_bytes
    data[end:end + 60] = b"\xee" * 60  # half a record after the last one
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptData):
        Store.open(root, writable=True)  # a clean store with garbage after its end: refused
    (root / "abort").write_bytes(b"")
    with Store.open(root, writable=True, recover=True) as store:
        assert store.max_offset == end
        r = store.append(producer_message("T", b"after"))
    assert r.wrote_offset == end and r.queue_offset == 10
    assert [m.body for m in CommitLog(root / "commitlog").scan() if isinstance(m, Message)][-1] == b"after"


def test_sizes_are_the_stores_own(tmp_path):
    root = tmp_path / "store"
    with Store.open(root, writable=True, **SMALL) as store:
        store.append(producer_message("T", b"x"))
    with pytest.raises(UsageError):
        Store.open(root, writable=True, commitlog_size=65536)
    with Store.open(root, writable=True) as store:
        assert store.config.mapped_file_size_commit_log == 32 * 1024
        assert (store.config.max_hash_slot_num, store.config.max_index_num) == (32, 120)
        assert store.config.mapped_file_size_consume_queue == 400


def test_new_store_gets_broker_default_sizes(tmp_path):
    root = tmp_path / "store"
    with Store.open(root, writable=True) as store:
        r = store.append(producer_message("T", b"x", keys="k"))
    seg = root / "commitlog" / "00000000000000000000"
    st = seg.stat()
    # sparse, as the broker's: no more blocks than the warm-ahead window made writable (async flush)
    assert st.st_size == 1 << 30 and st.st_blocks * 512 <= WARM_AHEAD + (1 << 20)
    assert sorted(p.name for p in (root / "commitlog").iterdir()) == [seg.name]  # the one made ahead is gone
    assert (root / "consumequeue" / "T" / "0" / "00000000000000000000").stat().st_size == 6_000_000
    (index,) = (root / "index").iterdir()
    assert index.stat().st_size == 40 + 5_000_000 * 4 + 20_000_000 * 20
    assert r.wrote_offset == 0


def test_lock_is_exclusive_within_the_process(tmp_path):
    root = tmp_path / "store"
    with Store.open(root, writable=True, **SMALL):
        with pytest.raises(StoreLocked) as err:
            Store.open(root, writable=True)
        assert err.value.exit_code == 5
    with Store.open(root, writable=True, **SMALL):  # no file shows the sizes yet: given again
        pass


def test_refusals(tmp_path):
    root = tmp_path / "store"
    with Store.open(root, writable=True, **SMALL) as store:
        with pytest.raises(UsageError):
            store.append(producer_message("T", b"x" * 40_000, compress=None))  # bigger than a segment
        with pytest.raises(UsageError):
            store.append(MessageInner("", b"x"))
        with pytest.raises(UsageError):
            store.put_messages(producer_batch("T", []))
        with pytest.raises(UsageError):
            store.append(producer_message("T", b"x", user_properties={"DELAY": "soon"}))
        ok = store.append(producer_message("T", b"x"))
    with pytest.raises(UsageError):
        store.append(producer_message("T", b"x"))
    assert ok.queue_offset == 0
    (tmp_path / "not-a-store").mkdir()
    (tmp_path / "not-a-store" / "notes.txt").write_text("mine")
    with pytest.raises(Exception) as err:
        Store.open(tmp_path / "not-a-store", writable=True)
    assert err.value.exit_code == 4 and not (tmp_path / "not-a-store" / "lock").exists()


def test_delay_levels_clamp_and_deliver_time(tmp_path):
    root = tmp_path / "store"
    with Store.open(root, writable=True, **SMALL) as store:
        r99 = store.append(producer_message("D", b"x", delay_level=99, queue_id=1))
        r3 = store.append(producer_message("D", b"y", delay_level=3, queue_id=0))
        rp = store.append(producer_message("D", b"z", delay_level=3, transaction="prepared"))
    cl = CommitLog(root / "commitlog")
    m = read_at(cl, r99.wrote_offset)
    assert (m.topic, m.queue_id, m.properties["DELAY"], m.properties["REAL_QID"]) == (
        RMQ_SYS_SCHEDULE_TOPIC, 17, "18", "1")
    assert (r3.topic, r3.queue_id) == (RMQ_SYS_SCHEDULE_TOPIC, 2)
    assert rp.topic == "D" and rp.queue_offset == 0  # a prepared message is not redirected
    queues = open_consume_queues(root)
    u = queues.find(RMQ_SYS_SCHEDULE_TOPIC, 17).get(0)
    assert u.tags_code == m.store_timestamp + 2 * 3600 * 1000
    assert queues.find("D", 0) is None


@pytest.fixture
def utc_clock(monkeypatch):
    """The producer's month starts at local midnight and the decoder assumes UTC: run in UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _utc_ms(*fields) -> int:
    return calendar.timegm(datetime.datetime(*fields[:6]).timetuple()) * 1000 + (fields[6] if len(fields) > 6 else 0)


# Times a UNIQ_KEY is made at: early in a month, past day 24.86 (the int the client writes is
# negative from there on), and a month's last millisecond (31, 30 and 28 days long)
_KEY_TIMES = {
    "day 2": _utc_ms(2026, 11, 2, 8, 30, 0),
    "day 28 12:00": _utc_ms(2026, 11, 28, 12, 0, 0),
    "last ms of a 31-day month": _utc_ms(2026, 12, 31, 23, 59, 59, 999),
    "last ms of a 30-day month": _utc_ms(2026, 11, 30, 23, 59, 59, 999),
    "last ms of February": _utc_ms(2027, 2, 28, 23, 59, 59, 999),
}


@pytest.mark.parametrize("made_at", _KEY_TIMES.values(), ids=_KEY_TIMES.keys())
def test_uniq_keys_look_like_the_java_clients(utc_clock, made_at):
    gen = UniqIdGenerator(ip=bytes([10, 1, 2, 3]), pid=70000, loader_hash=0x12345678, clock=lambda: made_at)
    a, b = gen.create(), gen.create()
    assert len(a) == 32 and a[:20] == "0A010203" + f"{70000 & 0xFFFF:04X}" + "12345678"
    ka, kb = decode_uniq_key(a, near_ms=made_at), decode_uniq_key(b)
    assert (ka.ip, ka.pid, ka.class_loader_hash) == ("10.1.2.3", 70000 & 0xFFFF, 0x12345678)
    assert kb.counter == ka.counter + 1
    month_start = _utc_ms(*time.gmtime(made_at / 1000)[:2], 1, 0, 0, 0)
    assert ka.time_since_month_start_ms == made_at - month_start  # the unsigned count Java reads
    assert ka.timestamp == made_at
    # a born time a little later (here in the next month) still finds the producer's month
    assert decode_uniq_key(a, near_ms=made_at + 1).timestamp == made_at
    assert decode_uniq_key(a, near_ms=made_at + 3_600_000).timestamp == made_at
    v6 = UniqIdGenerator(ip=ipaddress.ip_address("fd00::2").packed, clock=lambda: made_at).create()
    assert len(v6) == 56 and decode_uniq_key(v6).ip == "fd00::2"


def test_property_map_keeps_the_table_size_it_grew_to():
    m = PropertyMap({f"p{i}": str(i) for i in range(13)})
    assert m.capacity == 32
    for i in range(5):
        m.pop(f"p{i}")
    assert m.capacity == 32 and len(m) == 8  # a HashMap never shrinks its table
    fresh = dict(m)

    def joined(d, capacity):
        return "\x02".join(f"{k}\x01{d[k]}" for k in java_order(d, capacity))
    assert properties_string(m) == joined(m, 32) != joined(fresh, 16) == properties_string(fresh)


def test_java_hashmap_order_matches_every_fixture_properties_string():
    """messageProperties2String order: every single-put record of basic and timekey, built
    from the producer's insertion order, serialises to exactly the stored string."""
    for scenario in ("basic", "timekey"):
        for m in load_truth(V4 / scenario / "truth.json")["truth"]["messages"]:
            pairs = [tuple(p.split("\x01", 1)) for p in m["propertiesString"].split("\x02")]
            d = dict(pairs)
            pm = producer_properties(tags=d.get("TAGS"), keys=d.get("KEYS"), uniq_key=d.get("UNIQ_KEY"),
                                         generate_uniq_key=False,
                                         user_properties={k: v for k, v in pairs if k not in (
                                             "TAGS", "KEYS", "UNIQ_KEY", "CLUSTER")})
            inner = broker_inner(m["topic"], b"", pm, cluster=d.get("CLUSTER"))
            assert inner.properties_string == m["propertiesString"]


def test_body_crc_is_crcmods(written):
    from rmqtool.store.crc import crc32_reference
    root, pairs, _ = written
    cl = CommitLog(root / "commitlog")
    for _msg, r, _b in pairs[:60]:
        m = read_at(cl, r.wrote_offset)
        assert m.body_crc == (crc32_reference(m.body) if m.body else 0)


def test_dump_jsonl_reinjected_reproduces_the_store(tmp_path):
    """Every record dumped from txdelay, appended again as stored (with its store timestamp)
    to a new store of the same sizes, gives the same commit log, consume queues and index."""
    from typer.testing import CliRunner

    from rmqtool.cli.app import app
    runner = CliRunner()
    src = V4 / "txdelay" / "store"
    dumped = runner.invoke(app, ["dump", "commitlog", str(src), "-f", "jsonl"])
    assert dumped.exit_code == 0
    jsonl = tmp_path / "dump.jsonl"
    jsonl.write_text(dumped.stdout, encoding="utf-8")
    root = tmp_path / "store"
    cfg = load_truth(V4 / "txdelay" / "truth.json")["messageStoreConfig"]["effectiveGetterValues"]
    out = runner.invoke(app, ["append", str(root), "--create", "--from-jsonl", str(jsonl), "--keep-store-timestamp",
                              "--store-host", "192.0.2.10:10911", "--commitlog-size",
                              str(cfg["mappedFileSizeCommitLog"]), "--cq-size", str(cfg["mappedFileSizeConsumeQueue"]),
                              "--index-slots", str(cfg["maxHashSlotNum"]), "--index-entries", str(cfg["maxIndexNum"])])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert len(lines) == 82
    for sub in ("commitlog", "consumequeue"):
        a = {str(p.relative_to(src)): p.read_bytes() for p in (src / sub).rglob("*") if p.is_file()}
        b = {str(p.relative_to(root)): p.read_bytes() for p in (root / sub).rglob("*") if p.is_file()}
        assert a == b
    ours = sorted((root / "index").iterdir())
    theirs = sorted((src / "index").iterdir())
    assert [p.read_bytes() for p in ours] == [p.read_bytes() for p in theirs]


def test_cli_append_one_message_and_locked_store(tmp_path):
    import fcntl
    import json
    import subprocess
    import sys

    from typer.testing import CliRunner

    from rmqtool.cli.app import app
    root = tmp_path / "store"
    runner = CliRunner()
    res = runner.invoke(app, ["append", str(root), "--create", "--topic", "T", "--body", "héllo", "--tags", "TagA", "--keys",
                              "a b", "--property", "x=1", "--queue", "2", "--flush", "sync", "--commitlog-size",
                              "65536"])
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout)
    assert set(row) == {"topic", "queue_id", "commit_log_offset", "queue_offset", "msg_id", "uniq_key"}
    assert (row["topic"], row["queue_id"], row["queue_offset"]) == ("T", 2, 0)  # append names its topic and queue
    m = read_at(CommitLog(root / "commitlog"), row["commit_log_offset"])
    assert (m.body.decode(), m.tags, m.keys, m.properties["x"], m.queue_id, m.uniq_key) == (
        "héllo", "TagA", ["a", "b"], "1", 2, row["uniq_key"])
    assert runner.invoke(app, ["append", str(root), "--body", "x"]).exit_code == 2
    # a process holding the lock the way a broker does (fcntl, byte 0): exit code 5
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl,os,sys,time\n"
        f"fd=os.open({str(root / 'lock')!r}, os.O_RDWR)\n"
        "fcntl.lockf(fd, fcntl.LOCK_EX|fcntl.LOCK_NB, 1, 0)\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        res = runner.invoke(app, ["append", str(root), "--topic", "T", "--body", "x"])
        assert res.exit_code == 5
        with pytest.raises(StoreLocked) as err:
            Store.open(root, writable=True)
        assert str(holder.pid) in str(err.value)
        assert Store.open(root).locked_by() == holder.pid
        assert not (root / "abort").exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    fd = os.open(root / "lock", os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)  # free again
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
    finally:
        os.close(fd)


def test_v2_records_match_the_5_3_3_layout():
    """A topic longer than 127 gets the V2 record (2-byte topic length, magic 0xDAA320AB):
    each V2 record of the 5.3.3 fixture, encoded from its fields, is the bytes on disk."""
    from conftest import V5
    truth = load_truth(V5 / "v2-and-crc" / "truth.json")
    encoder = Encoder("192.0.2.10:10911")
    seen = 0
    for m in truth["truth"]["messages"]:
        if m["messageVersion"] != "MESSAGE_VERSION_V2":
            continue
        inner = MessageInner(
            m["topic"], base64.b64decode(m["body"]), m["queueId"], flag=m["flag"],
            properties=dict(m["properties"]), properties_string=m["propertiesString"],
            born_timestamp=m["bornTimestamp"], born_host=(ipaddress.ip_address(m["bornHost"]).packed, m["bornPort"]),
            store_host=(ipaddress.ip_address(m["storeHost"]).packed, m["storePort"]),
            reconsume_times=m["reconsumeTimes"], sys_flag=m["sysFlag"] & ~0x30)
        record = encoder.prepare(inner).to_bytes(m["queueOffset"], m["physicalOffset"], m["storeTimestamp"])
        seg = m["physicalOffset"] // 65536 * 65536
        raw = (V5 / "v2-and-crc" / "store" / "commitlog" / f"{seg:020d}").read_bytes()
        pos = m["physicalOffset"] - seg
        assert record == raw[pos:pos + m["storeSize"]]
        assert int.from_bytes(record[4:8], "big") == MESSAGE_MAGIC_CODE_V2
        seen += 1
    assert seen == 100


def test_a_selector_picks_the_queue(tmp_path):
    with Store.open(tmp_path / "store", writable=True, **SMALL) as store:
        by_key = lambda m: java_string_hash(m.keys) % 3  # noqa: E731  (an order-id selector)
        rs = [store.append(producer_message("T", b"x", keys=f"order-{i % 5}"), selector=by_key) for i in range(20)]
        rs += store.append_many([producer_message("T", b"y", keys="order-1")] * 3, selector=by_key)
        delayed = store.append(producer_message("T", b"z", keys="order-2", delay_level=1), selector=by_key)
    for r in rs:
        assert r.queue_id == java_string_hash(read_at(CommitLog(tmp_path / "store" / "commitlog"),
            r.wrote_offset).properties["KEYS"]) % 3
    m = read_at(CommitLog(tmp_path / "store" / "commitlog"), delayed.wrote_offset)
    assert m.properties["REAL_QID"] == str(java_string_hash("order-2") % 3)


@pytest.mark.parametrize("slot", [0, 5, 31])
def test_index_geometry_is_inferred_from_contents_not_guessed(tmp_path, slot):
    """32 slots + 120 entries and 37 slots + 119 entries make files of the same size: the
    contents must decide, whichever slot the one key lands in (slot 0 once fooled it)."""
    from rmqtool.formats.indexfile import index_key_hash
    from rmqtool.store.indexfile import infer_index_geometry

    uniq = next(u for u in (f"{n:032X}" for n in range(10**6)) if index_key_hash(f"T#{u}") % 32 == slot)
    root = tmp_path / "store"
    with Store.open(root, writable=True, **SMALL) as store:
        store.append(producer_message("T", b"x", uniq_key=uniq))
    (index_file,) = (root / "index").iterdir()
    assert infer_index_geometry(index_file) == (32, 120)
