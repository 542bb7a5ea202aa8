"""redispatch's fast paths give what the plain ones give: the reput decoded in bands by two
processes (engine/redispatch.py) against one process, a queue's units written as one array
(ConsumeQueueWriter.put_unit_columns) against put_run, store/arrays.grouped_order against a
stable argsort, and last_file_end started at the clean chain's last record against the walk
from the file's start; on fixture stores, their damage included."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, V4, V5
from helpers import examples, file_fingerprint
from rmqtool.engine import redispatch
from rmqtool.store import commitlog_end
from rmqtool.store.arrays import grouped_order

CRASH = FIXTURES / "crash-made"
# a clean store of each version, a torn record and a zeroed file in the log, a record DELAY refuses
BAND_STORES = [V4 / "basic" / "store", V5 / "v2-and-crc" / "store",
               CRASH / "torn-middle-normal" / "input" / "store", CRASH / "roll-kill-next-zeroed" / "input" / "store"]


def _files(root: pathlib.Path) -> dict:
    return {str(p.relative_to(root)): file_fingerprint(p) for p in sorted(root.rglob("*")) if p.is_file()}


def _build(store, out: pathlib.Path, parallel: bool, monkeypatch, **kw) -> tuple:
    monkeypatch.setattr(redispatch, "PARALLEL_REPUT", parallel)
    try:
        built = redispatch.build(store, out, clock=lambda: 1_700_000_000_000, **kw)
    except Exception as exc:  # refused alike, with the same files written before it
        return "refused", type(exc).__name__, str(exc), _files(out) if out.is_dir() else None
    return built.records, built.queues, _files(built.staging)


def _delay_refused_store(root: pathlib.Path) -> pathlib.Path:
    """A log whose record 450 of 600 is a delayed message with a DELAY that is no number: dispatch stops there."""
    from rmqtool.dispatch.rules import RMQ_SYS_SCHEDULE_TOPIC
    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.store import Store

    store = root / "store"
    clock = iter(range(1_700_000_000_000, 1_700_000_100_000))
    with Store.open(store, writable=True, clock=lambda: next(clock)) as engine:
        for i in range(600):
            if i == 450:
                msg = producer_message(RMQ_SYS_SCHEDULE_TOPIC, b"x", user_properties={"DELAY": "7"}, keys=f"k{i}")
            else:
                msg = producer_message("T", b"%300d" % i, keys=f"k{i} o{i}", tags="a", queue_id=i % 3)
            last = engine.append(msg)
    (segment,) = (store / "commitlog").iterdir()
    with open(segment, "r+b") as f:
        raw = f.read(last.wrote_offset + last.wrote_bytes)
        f.seek(raw.index(b"DELAY\x017"))
        f.write(b"DELAY\x01x")
    return store


@pytest.mark.parametrize("whole_log_hints", [8 << 20, 0], ids=["whole-log-hints", "each-band-its-own"])
def test_bands_build_what_one_process_builds(tmp_path, monkeypatch, whole_log_hints):
    monkeypatch.setattr(redispatch, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(redispatch, "WHOLE_LOG_HINTS", whole_log_hints)
    monkeypatch.setattr(redispatch, "BAND_BYTES", 48 << 10)  # a few dozen records a band, cut anywhere
    monkeypatch.setattr("rmqtool.store.parallel.default_workers", lambda: 2)
    used = []
    real_bands = redispatch._bands
    monkeypatch.setattr(redispatch, "_bands", lambda *a: used.append(real_bands(*a)) or used[-1])
    for i, store in enumerate(BAND_STORES + [_delay_refused_store(tmp_path / "delay")]):
        bands = _build(store, tmp_path / f"bands-{i}", True, monkeypatch)
        assert len(used[-1]) > 2, store  # the bands were used
        assert bands == _build(store, tmp_path / f"one-{i}", False, monkeypatch), store
    assert bands[0] == "refused" and bands[3]  # the DELAY store: refused both ways, with the files before it
    chosen = {"selection": redispatch.Selection(topics=("OrderTopic",)), "from_offset": 300_000}
    bands = _build(BAND_STORES[0], tmp_path / "bands-chosen", True, monkeypatch, **chosen)
    assert len(used[-1]) > 2 and bands[0]
    assert bands == _build(BAND_STORES[0], tmp_path / "one-chosen", False, monkeypatch, **chosen)


@settings(max_examples=examples(6), deadline=None)
@given(first=st.integers(0, 9), runs=st.lists(st.integers(1, 12), min_size=1, max_size=5),
       built_already=st.integers(0, 3))
def test_put_unit_columns_writes_what_put_run_writes(tmp_path_factory, first, runs, built_already):
    from rmqtool.engine.cq_writer import ConsumeQueueWriter

    unit = 20
    offsets = np.cumsum(np.arange(100, 100 + sum(runs)) * 3)
    sizes = np.arange(100, 100 + sum(runs)) * 3
    tags = np.arange(len(offsets)) * -7919  # negative and positive tags codes
    out = {}
    for way in ("put_run", "put_unit_columns"):
        root = tmp_path_factory.mktemp(way)
        cq = ConsumeQueueWriter(root, "T", 0, 7 * unit)  # 7 units a file: runs cross files
        at, queue_offset = 0, first
        for n in runs:
            a, b = at, at + n
            if way == "put_run":
                flat = [v for u in zip(offsets[a:b].tolist(), sizes[a:b].tolist(), tags[a:b].tolist()) for v in u]
                assert cq.put_run(queue_offset, flat)
            else:
                assert cq.put_unit_columns(queue_offset, offsets[a:b], sizes[a:b], tags[a:b])
            if built_already and a == 0:  # a run dispatched again (built already: skipped both ways)
                again = slice(0, min(built_already, n))
                if way == "put_run":
                    flat = [v for u in zip(offsets[again].tolist(), sizes[again].tolist(), tags[again].tolist())
                            for v in u]
                    assert cq.put_run(queue_offset, flat)
                else:
                    assert cq.put_unit_columns(queue_offset, offsets[again], sizes[again], tags[again])
            at, queue_offset = b, queue_offset + n
        cq.close()
        out[way] = (_files(root), cq.max_physic_offset, cq.bytes_written, cq.min_logic_offset)
    assert out["put_run"] == out["put_unit_columns"]


@settings(max_examples=examples(10), deadline=None)
@given(keys=st.lists(st.integers(0, 2**40), max_size=300), small=st.booleans())
def test_grouped_order_is_a_stable_argsort(keys, small):
    a = np.array([k % 5 if small else k for k in keys], np.int64)
    assert grouped_order(a).tolist() == np.argsort(a, kind="stable").tolist()


END_STORES = [V4 / "basic" / "store", V4 / "txdelay" / "store", V5 / "v2-and-crc" / "store",
              V5 / "batchcq" / "store"] + sorted(p / "input" / "store" for p in CRASH.iterdir()
                                                 if (p / "input" / "store" / "commitlog").is_dir())


def _end_fields(end) -> tuple:
    last = end.last_message
    return (end.end, end.segment_base, end.wrote_position, end.damaged_at, end.extra_segments, end.store_host,
            end.last_written, last.commit_log_offset if last is not None else None, repr(end.stopped_by))


def test_last_file_end_from_the_clean_prefix_is_the_walk_from_the_start(monkeypatch):
    from rmqtool.store.segments import discover

    fast = {}
    for store in END_STORES:
        log = discover(store / "commitlog")
        fast[store] = _end_fields(commitlog_end.last_file_end(log.segments, log.mapped_file_size))
    monkeypatch.setattr(commitlog_end, "_clean_prefix_resume", lambda tail: 0)  # the walk from the start
    for store in END_STORES:
        log = discover(store / "commitlog")
        assert fast[store] == _end_fields(commitlog_end.last_file_end(log.segments, log.mapped_file_size)), store
