"""The native kernel's clean_run (rmqtool/native/scan.c) under record_kernel.clean_records: with
the kernel and on the numpy path, the same CleanRecords (every array, its dtype, stop and
refusal), on every fixture commit log (whose records are truth's messages) and on damaged
windows, with hints and limits as the callers pass them."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CLEAN_SCENARIOS, load_truth
from helpers import LONG_TOPIC, damage, examples, fixture_commitlogs, kernel_and_pure
from rmqtool import native
from rmqtool.store import record_kernel
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.record_kernel import RECORD_LAYOUT, clean_records

from rmqtool.native import _kernel as KERNEL  # built by the install (make native): its absence fails here


@pytest.fixture(scope="module")
def buffers(tmp_path_factory):
    """Every fixture commit log file's bytes (with its clean scenario, if one), and a generated
    log's whose records have IPv6 hosts and __CRC32# entries."""
    from benchmarks.gen import GenSpec, build_commitlog

    scenario = {CLEAN_SCENARIOS[name] / "store" / "commitlog": name for name in CLEAN_SCENARIOS}
    out = [(seg.path.read_bytes(), scenario.get(d)) for d in fixture_commitlogs() for seg in CommitLog(d).segments]
    directory = tmp_path_factory.mktemp("ipv6") / "commitlog"
    build_commitlog(directory, GenSpec(segment_size=24 << 10, segments=1, body_size=100, topics=("T", LONG_TOPIC),
                                       queues=2, ipv6_queues=(1,), append_prop_crc=True))
    out.append(((directory / "00000000000000000000").read_bytes(), None))
    return out


@pytest.fixture(autouse=True)
def kernel_on(monkeypatch):
    """The kernel in use, even under RMQTOOL_NATIVE=0."""
    monkeypatch.setattr(native, "kernel", KERNEL)


def both(monkeypatch, *args, **kwargs):
    """clean_records with the kernel and on the numpy path."""
    return kernel_and_pure(lambda: clean_records(*args, **kwargs))


def assert_same(fast, pure):
    assert (fast.stop, fast.refusal) == (pure.stop, pure.refusal)
    for f in record_kernel._ARRAYS:
        a, b = getattr(fast, f), getattr(pure, f)
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), f


def test_fixture_logs_both_ways(buffers, monkeypatch):
    """Each fixture file whole, and windows of it (a record's start to mid-record, a limit):
    the same records; a clean scenario's are its truth's messages, its hosts the ones it wrote."""
    counted = {}
    ipv6 = 0
    for raw, name in buffers:
        fast, pure = both(monkeypatch, raw, 0, len(raw))
        assert_same(fast, pure)
        ipv6 += int(np.count_nonzero(fast.hosts))
        if name is not None:
            counted[name] = counted.get(name, 0) + len(fast)
        if len(fast) > 2:
            i, stop, limit = int(fast.position[1]), int(fast.end[-2]) + 1, int(fast.end[-2])
            assert_same(*both(monkeypatch, raw, i, stop, limit))
            assert_same(*both(monkeypatch, raw, i, stop, limit, hints=fast.position[::2].copy()))
            assert_same(*both(monkeypatch, raw, i + 1, stop))
    for name, n in counted.items():
        truth = load_truth(CLEAN_SCENARIOS[name] / "truth.json")["truth"]
        assert n == truth["commitlog"]["messageCount"] == len(truth["messages"])
    assert ipv6 > 0  # the generated log's IPv6 records went through clean_run's other header sizes


def test_runs_longer_than_a_call_are_joined(buffers, monkeypatch):
    """Arrays filled several calls over (a window of records smaller than its first): joined."""
    raw = max((raw for raw, _ in buffers), key=lambda b: len(clean_records(b, 0, len(b))))
    want = both(monkeypatch, raw, 0, len(raw))[1]
    monkeypatch.setattr(record_kernel, "_RUN_CHUNK", 3)
    got = clean_records(raw, 0, len(raw))
    assert_same(got, want)
    assert len(got) > 10


def test_clean_run_refuses_what_it_cannot_fill(buffers):
    raw = buffers[0][0]
    columns, header = np.zeros((9, 4), np.int64), np.zeros(4 * 88, np.uint8)
    assert KERNEL.clean_run(raw, 0, len(raw), len(raw), RECORD_LAYOUT, columns, header)[0] == 4
    assert columns[0, 0] == 0 and columns[1, 0] == columns[0, 1]  # one record ends where the next starts
    wild = (RECORD_LAYOUT[0], RECORD_LAYOUT[1], RECORD_LAYOUT[2], -1 << 62, *RECORD_LAYOUT[4:])  # bodyCRC's place
    for bad in ((RECORD_LAYOUT[:-1], columns, header), (wild, columns, header),
                (RECORD_LAYOUT, np.zeros(10, np.int64), header),
                (RECORD_LAYOUT, columns, np.zeros(4, np.uint8))):
        with pytest.raises(ValueError):
            KERNEL.clean_run(raw, 0, len(raw), len(raw), *bad)
    with pytest.raises(TypeError):
        KERNEL.clean_run(raw, 0, len(raw), len(raw), RECORD_LAYOUT, columns.astype(np.int32), header)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_windows_both_ways(buffers, data, monkeypatch):
    """Flipped, zeroed, garbage, wrong length fields, cut off: the numpy path decides the first
    record C does not take, so both give the same records, stop and refusal."""
    raw, _ = data.draw(st.sampled_from(buffers))
    truth = clean_records(raw, 0, len(raw)).position
    buf = bytes(damage(bytearray(raw[:data.draw(st.integers(1, 40000))]), data,
                       kinds=("flip", "zero", "garbage", "int", "truncate")))
    i = data.draw(st.sampled_from([0, *truth.tolist()[:4]]) | st.integers(0, len(buf) + 8))
    stop = data.draw(st.sampled_from([len(buf)]) | st.integers(0, len(buf) + 8))
    limit = data.draw(st.sampled_from([None, len(buf)]) | st.integers(0, len(buf)))
    hints = None
    if data.draw(st.booleans()):
        hints = np.unique(np.array(data.draw(st.lists(st.sampled_from(truth.tolist()) | st.integers(0, len(buf)),
                                                       max_size=12)) if len(truth) else [], np.int64))
    assert_same(*both(monkeypatch, buf, i, stop, limit, hints=hints))


def test_a_record_past_the_buffer_is_left_to_numpy(buffers, monkeypatch):
    """A limit past the buffer's end (no caller passes one): C reads nothing past the buffer and
    stops at the record that runs on; the numpy path decides it and the two runs are joined."""
    raw = buffers[0][0]
    whole = clean_records(raw, 0, len(raw))
    k = len(whole) // 2
    cut = int(whole.end[k]) - 1  # the k-th record's last property byte is gone
    fast, pure = both(monkeypatch, raw[:cut], 0, len(raw), len(raw))
    assert_same(fast, pure)
    assert len(fast) == k + 1 and int(fast.end[-1]) == cut + 1  # taken by the numpy path, after C's k records
