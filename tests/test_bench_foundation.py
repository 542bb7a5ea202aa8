"""The pieces every store-level benchmark stands on: the Java anchor loop counts exactly the
records the broker read back, and the big store builder writes a store rmqtool reads whole."""
from __future__ import annotations

import pytest

from conftest import CLEAN_SCENARIOS, load_truth
from rmqtool.store.commitlog_end import CommitLog

from benchmarks import big_store, java_loop


@pytest.fixture(scope="module")
def java_classes(recovery_scan_classes):
    # javac is part of the machine's JDK here and in CI: a missing one fails, it does not skip
    return recovery_scan_classes


@pytest.mark.parametrize("scenario", ["4.9.8/basic", "4.9.8/txdelay", "5.3.3/v2-and-crc"])
def test_java_loop_counts_the_brokers_records(java_classes, scenario):
    directory = CLEAN_SCENARIOS[scenario]
    truth = load_truth(directory / "truth.json")["truth"]
    scan = java_loop.run_loop(java_classes, directory / "store" / "commitlog")
    assert scan.messages == len(truth["messages"])
    assert scan.bytes == sum(m["storeSize"] for m in truth["messages"])


def test_big_store_small_build_reads_whole(tmp_path, java_classes):
    store = big_store.ensure(tmp_path, messages=3000, commitlog_size=1 << 20)
    records = [r for r in CommitLog(store / "commitlog").scan() if hasattr(r, "topic")]
    assert len(records) == 3000
    assert [r.keys for r in records[:3]] == [[big_store.key_of(i)] for i in range(3)]
    assert records[-1].physical_offset + records[-1].store_size <= big_store.max_offset(store)
    assert java_loop.run_loop(java_classes, store / "commitlog").messages == 3000
    assert big_store.raw_read(big_store.data_files(store)) == sum(p.stat().st_size for p in big_store.data_files(store))
