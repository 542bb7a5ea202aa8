"""append_many's fast paths against the plain ones, byte for byte: messages prepared and placed
as columns (Encoder.prepare_columns, Store._put_columns), records placed in one buffer and
written with one pwrite (Store._put_run), and one append() a message (Store._put_locked). Every file each writes (commit log, consume queues, index, checkpoint)
and every PutResult must be the same; the ASCII form of index_key_hashes must give the
scalar hash."""
from __future__ import annotations

import itertools
import random

import pytest

from conftest import V4, load_truth
from helpers import copy_tree
from rmqtool.engine import store as engine_store
from rmqtool.engine.message_inner import MessageInner
from rmqtool.engine.producer import producer_message
from rmqtool.engine.store import Store
from rmqtool.engine.uniq_key import UniqIdGenerator
from rmqtool.formats.indexfile import index_key_hash, index_key_hashes

SIZES = dict(commitlog_size=48 * 1024, cq_size=40 * 20, index_slots=64, index_entries=300)
PATHS = {"columns": True, "run": False, "append": None}  # COLUMN_PUT for append_many
STAMP = 1_700_000_000_000


def _batches() -> list[list[MessageInner]]:
    """Batches of one shape (what prepare_columns takes: with and without tags, keys, UNIQ_KEY,
    given store timestamps, a selector's queue ids, transactions, an IPv6 born host) and of
    several (topics, hosts, a delayed message, properties as bytes): the latter go the plain way."""
    rnd = random.Random(27)
    uniq = UniqIdGenerator(ip=bytes([198, 51, 100, 7]), pid=4242, loader_hash=0x1234567, clock=lambda: STAMP)
    out = []
    for k in range(20):
        n = rnd.choice([1, 2, 37, 90, 160])
        kind = k % 10
        batch = []
        for i in range(n):
            kw = dict(queue_id=rnd.randrange(4), born_timestamp=STAMP + i, born_host="198.51.100.7:40000",
                      uniq_ids=uniq)
            if kind == 1:
                kw["keys"] = f"k{i}  shared k{i % 3}"
            if kind in (2, 3):
                kw["tags"] = f"tag{i % 3}"
            if kind == 4:
                kw.update(transaction=("prepared", "commit", "rollback")[k % 3], producer_group="PG",
                          prepared_transaction_offset=0 if k % 3 == 0 else 64)
            if kind == 5:
                kw["born_host"] = "[2001:db8::7]:40000"
            if kind == 6:
                kw["generate_uniq_key"] = i % 2 == 0  # some without UNIQ_KEY
            if kind == 8 and i == n // 2:
                kw["delay_level"] = 3  # one delayed message: the batch goes one by one
            topic = "Mixed" if kind == 9 and i % 2 else "Fast"
            msg = producer_message(topic, bytes([i % 251]) * rnd.randint(0, 1500), compress=None, **kw)
            if kind == 7:
                msg.store_timestamp = STAMP + 5 * i
            if kind == 9 and i == 0:
                msg.properties_string = msg.properties_string.encode()  # stored bytes: as they are
            batch.append(msg)
        out.append(batch)
    return out


def _write(root, batches, path: str, sizes=None, selector: bool = False) -> list:
    """Append ``batches`` the ``path`` way (append_many, with ``selector`` for every tenth
    batch from the fourth; or append() a message); returns the results."""
    clock = itertools.repeat(STAMP + 1000).__next__
    results = []
    with Store.open(root, writable=True, store_host="192.0.2.10:10911", clock=clock, **(sizes or {})) as store:
        for k, batch in enumerate(batches):
            if path == "append":
                results += [store.append(m) for m in batch]
            elif selector and k % 10 == 3:
                results += store.append_many(batch, selector=lambda m: (m.queue_id + 1) % 4)
            else:
                results += store.append_many(batch)
    return results


def _tree(root) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Each path's files and results: a new store, and appends to a copy of the 4.9.8 fixture.
    append() takes no selector: it writes the batches without the selector's."""
    out = {}
    base = tmp_path_factory.mktemp("paths")
    for name, flags in PATHS.items():
        batches = _batches()  # new messages for each path: no path sees objects another one wrote
        no_selector = [b for k, b in enumerate(batches) if k % 10 != 3]
        with pytest.MonkeyPatch.context() as mp:
            if flags is not None:
                mp.setattr(engine_store, "COLUMN_PUT", flags)
            got = {}
            if name != "append":
                got["results"] = _write(base / f"new-{name}", batches, name, SIZES, selector=True)
                got["new"] = _tree(base / f"new-{name}")
            _write(base / f"plain-{name}", no_selector, name, SIZES)
            got["plain"] = _tree(base / f"plain-{name}")
            existing = base / f"v4-{name}"
            copy_tree(V4 / "basic" / "store", existing)
            for p in [existing, *existing.rglob("*")]:  # fixture files may be read-only on disk
                p.chmod(p.stat().st_mode | 0o200)
            got["existing_results"] = _write(existing, no_selector[:5], name)
            got["existing"] = _tree(existing)
            out[name] = got
    return out


def test_every_path_writes_the_same_files_and_results(written):
    columns = written["columns"]
    assert sum(k.startswith("commitlog/") for k in columns["new"]) > 3  # the commit log rolled
    assert sum(k.startswith("index/") for k in columns["new"]) > 3  # so did the index
    assert sum(k.startswith("consumequeue/Fast/") for k in columns["new"]) > 8  # and the queues
    for name in ("run", "append"):
        for kind in ("new", "results", "plain", "existing", "existing_results"):
            if kind in written[name]:
                assert written[name][kind] == columns[kind], (name, kind)
    assert [r.to_json() for r in written["run"]["results"]] == [r.to_json() for r in columns["results"]]
    # appended where the broker's commit log ends
    end = load_truth(V4 / "basic" / "truth.json")["truth"]["commitlog"]["maxPhyOffset"]
    assert columns["existing_results"][0].wrote_offset == end


def test_the_ascii_key_hash_is_the_scalar_hash():
    rnd = random.Random(5)
    same = [f"Topic#{rnd.getrandbits(128):032X}" for _ in range(300)]
    mixed = same[:50] + ["a", "\0lead", "polygenelubricants", "T#" + "k" * 700, "x#\x7f"]
    for keys in (same, mixed, mixed + ["T#é", "T#\ud800"]):  # the last: not ASCII, the UTF-16 way
        assert index_key_hashes(keys).tolist() == [index_key_hash(k) for k in keys]


def test_a_selector_is_asked_once_a_message(tmp_path):
    """A round-robin selector (state of its own) picks each queue once, whichever way the batch
    goes: as columns (one shape) or one by one (a delayed message among them)."""
    asked = itertools.count()
    uniq = UniqIdGenerator(ip=bytes([198, 51, 100, 7]), pid=1, loader_hash=2, clock=lambda: STAMP)
    plain = [producer_message("Sel", b"x" * 10, uniq_ids=uniq) for _ in range(8)]
    delayed = [producer_message("Sel", b"y", uniq_ids=uniq, delay_level=2 if i == 3 else 0) for i in range(8)]
    with Store.open(tmp_path / "s", writable=True, **SIZES) as store:
        for batch in (plain, delayed):
            results = store.append_many(batch, selector=lambda m: next(asked) % 4)
            assert [r.queue_id for r in results if r.topic == "Sel"] == [i % 4 for i in range(8) if i != 3
                                                                         or batch is plain]
    assert next(asked) == 16
