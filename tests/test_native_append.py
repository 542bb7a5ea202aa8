"""The native kernel's append functions (rmqtool/native/append.c) against the pure-Python put
paths, byte for byte: stores written with the kernel and with ``native.kernel`` set to None
hold the same files (commit log, consume queues, index, checkpoint) and give the same
PutResults, for append() a message at a time and append_many of one shape and of several;
with keys, tags, Unicode (past the BMP too) properties, delayed and transaction messages,
IPv6 hosts, stored properties as bytes, commit log, consume queue and index files rolling,
and an existing store (the 4.9.8 fixture). What was appended reads back as it was given."""
from __future__ import annotations

import itertools
import random

import pytest

from conftest import V4, load_truth
from helpers import KernelSpy, copy_tree
from rmqtool import native
from rmqtool.engine.message_inner import MessageInner
from rmqtool.engine.producer import producer_message
from rmqtool.engine.store import Store
from rmqtool.engine.uniq_key import UniqIdGenerator
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import Message

pytestmark = pytest.mark.usefixtures("native_built")

SIZES = dict(commitlog_size=32 * 1024, cq_size=30 * 20, index_slots=64, index_entries=100)
STAMP = 1_700_000_000_000


def _batches() -> list[list[MessageInner]]:
    """Batches of messages of many kinds (each kind its own batch, so append_many takes its column
    path for some and its one-by-one path for others)."""
    rnd = random.Random(2027)
    uniq = UniqIdGenerator(ip=bytes([198, 51, 100, 7]), pid=4242, loader_hash=0x1234567, clock=lambda: STAMP)
    out = []
    for k in range(24):
        kind = k % 12
        batch = []
        for i in range(rnd.choice([1, 3, 12, 30])):
            kw = dict(queue_id=rnd.randrange(3), born_timestamp=STAMP + i, born_host="198.51.100.7:40000",
                      uniq_ids=uniq)
            if kind == 1:
                kw["keys"] = f"k{i}  shared k{i % 3} "
            if kind == 2:
                kw["tags"] = f"tag{i % 3}"
            if kind == 3:
                kw.update(keys=["ключ", "\U0001F600emoji", "日本"], tags="étiquette",
                          user_properties={"note": "naïve \U0001F680"})
            if kind == 4:
                kw.update(transaction=("prepared", "commit", "rollback")[i % 3], producer_group="PG",
                          prepared_transaction_offset=0 if i % 3 == 0 else 64)
            if kind == 5:
                kw["born_host"] = "[2001:db8::7]:40000"
            if kind == 6:
                kw["generate_uniq_key"] = i % 2 == 0
            if kind == 8 and i % 4 == 1:
                kw["delay_level"] = 2
            topic = "Other" if kind == 9 and i % 2 else "Fast"
            msg = producer_message(topic, bytes([i % 251]) * rnd.randint(0, 1200), compress=None, **kw)
            if kind == 7:
                msg.store_timestamp = STAMP + 7 * i
            if kind == 9 and i == 0:
                msg.properties_string = msg.properties_string.encode()  # stored bytes: as they are
            if kind == 10:
                msg.properties_string = None  # made from the map
                msg.flag = -5
                msg.reconsume_times = 3
            if kind == 11 and i == 0:
                msg.properties = {}
                msg.properties_string = None
                msg.body = None
            batch.append(msg)
        out.append(batch)
    return out


def _tree(root) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _write(root, batches, many: bool, sizes=None) -> list:
    clock = itertools.count(STAMP + 1000, 3).__next__
    results = []
    with Store.open(root, writable=True, store_host="192.0.2.10:10911", clock=clock, **(sizes or {})) as store:
        for batch in batches:
            if many:
                results += store.append_many(batch)
            else:
                results += [store.append(m) for m in batch]
    return results


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Each way's files and results, with the kernel and without, and how many messages the
    kernel put itself."""
    base = tmp_path_factory.mktemp("native-append")
    out = {}
    kernel = native.kernel
    for use in (True, False):
        for name, many in (("one", False), ("many", True)):
            took = []  # whether the kernel put each message (put_many: each it put, and each call it declined)
            with pytest.MonkeyPatch.context() as mp:
                if use:
                    def counted(*args):
                        return _Counted(kernel.appender(*args), took)
                    mp.setattr(native, "kernel", KernelSpy(kernel, appender=counted))
                else:
                    mp.setattr(native, "kernel", None)
                root = base / f"{name}-{use}"
                results = _write(root, _batches(), many, SIZES)
                existing = base / f"v4-{name}-{use}"
                copy_tree(V4 / "basic" / "store", existing)
                for p in [existing, *existing.rglob("*")]:
                    p.chmod(p.stat().st_mode | 0o200)
                existing_results = _write(existing, _batches()[:6], many)
            out[(name, use)] = dict(tree=_tree(root), results=[r.to_json() for r in results],
                                    existing=_tree(existing), existing_results=existing_results, root=root,
                                    took=took)
    return out


class _Counted:
    """An appender whose puts are counted in ``took``: each message it put (True) or declined (False)
    one at a time, each it put in a row and each call of those it declined."""

    def __init__(self, appender, took):
        self._appender, self._took = appender, took

    def __call__(self, msg):
        r = self._appender(msg)
        self._took.append(r is not None)
        return r

    def put_many(self, *args):
        before = len(args[-1])  # the results list
        r = self._appender.put_many(*args)
        self._took.extend([True] * (len(args[-1]) - before) + ([False] if r is None else []))
        return r




@pytest.mark.parametrize("name", ["one", "many"])
def test_the_kernel_writes_the_bytes_the_python_path_writes(written, name):
    fast, pure = written[(name, True)], written[(name, False)]
    assert sum(k.startswith("commitlog/") for k in fast["tree"]) > 3  # the commit log rolled
    assert sum(k.startswith("index/") for k in fast["tree"]) > 3  # so did the index
    assert sum(k.startswith("consumequeue/Fast/") for k in fast["tree"]) > 6  # and the queues
    assert fast["tree"].keys() == pure["tree"].keys()
    for path in fast["tree"]:
        assert fast["tree"][path] == pure["tree"][path], path
    assert fast["results"] == pure["results"]
    assert fast["existing"] == pure["existing"]
    assert [r.to_json() for r in fast["existing_results"]] == [r.to_json() for r in pure["existing_results"]]
    end = load_truth(V4 / "basic" / "truth.json")["truth"]["commitlog"]["maxPhyOffset"]
    assert fast["existing_results"][0].wrote_offset == end


@pytest.mark.parametrize("name", ["one", "many"])
def test_the_kernel_puts_the_common_case_and_declines_the_rest(written, name):
    took = written[(name, True)]["took"]
    assert sum(took) > 100 and not all(took)  # most messages in C; delayed, rolls and the like in Python
    assert written[(name, False)]["took"] == []


def test_what_was_appended_reads_back(written):
    root = written[("one", True)]["root"]
    sent = [m for b in _batches() for m in b]
    stored = [r for r in CommitLog(root / "commitlog", SIZES["commitlog_size"]).scan() if isinstance(r, Message)]
    assert len(stored) == len(sent)
    for m, got in zip(sent, stored):
        assert got.body_crc_ok is not False
        assert (got.body or b"") == (m.body or b"")
        assert (got.queue_id, got.flag, got.born_timestamp) == (m.queue_id, m.flag, m.born_timestamp) \
            or got.topic != m.topic
        assert got.topic in (m.topic, "SCHEDULE_TOPIC_XXXX")
        if m.properties and got.topic == m.topic:
            assert got.properties.get("KEYS") == m.properties.get("KEYS")
            assert got.properties.get("UNIQ_KEY") == m.properties.get("UNIQ_KEY")


def _refusals(root) -> list:
    """What each odd message does (its exception's type and text, or its result) in a store."""
    uniq = UniqIdGenerator(ip=bytes([198, 51, 100, 7]), pid=1, loader_hash=2, clock=lambda: STAMP)

    def message(**changes):
        m = producer_message("Odd", b"body", keys="a b", tags="t", uniq_ids=uniq, born_timestamp=STAMP,
                             compress=None)
        for name, value in changes.items():
            setattr(m, name, value)
        return m
    odd = [dict(flag=2**31), dict(queue_id=-1), dict(born_timestamp=2**63), dict(body=b"x" * (4 * 1024 * 1024 + 1)),
           dict(properties_string="KEYS\x01a\ud800b\x02"), dict(topic=""), dict(reconsume_times="3")]
    out = []
    clock = itertools.count(STAMP, 5).__next__
    with Store.open(root, writable=True, clock=clock, **SIZES) as store:
        store.append(message())  # the queue and files exist: the kernel's common case from here
        for changes in odd:
            for put in (store.append, lambda m: store.append_many([message(), m])):
                try:
                    got = put(message(**changes))
                    out.append(repr(got))
                except Exception as exc:  # noqa: BLE001 - the same refusal either way is the point
                    out.append(f"{type(exc).__name__}: {exc}")
    return out


def test_odd_messages_are_refused_or_put_as_the_python_path_does(tmp_path, monkeypatch):
    fast = _refusals(tmp_path / "fast")
    monkeypatch.setattr(native, "kernel", None)
    assert _refusals(tmp_path / "pure") == fast
    assert _tree(tmp_path / "fast") == _tree(tmp_path / "pure")
