"""The native kernel's scan part (rmqtool/native/scan.c): the totalSize hop and the CRC of many
ranges give what the pure path gives, on the fixtures (against their truth) and on damaged bytes."""
from __future__ import annotations

import os
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CLEAN_SCENARIOS, load_truth
from helpers import canonical, damage, examples, kernel_and_pure
from rmqtool import native
from rmqtool.formats.commitlog import MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, MIN_MESSAGE_LENGTH
from rmqtool.formats.crc import JAVA_CRC_MASK
from rmqtool.store import commitlog, crc
from rmqtool.store.commitlog import Blank, CrcTally, header_hop
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.record_kernel import RECORD_LAYOUT, clean_records, crc_verdicts, good_crc_run
from rmqtool.store.record_rule import hop_chain

from rmqtool.native import _kernel as KERNEL  # built by the install (make native): its absence fails here

pytestmark = pytest.mark.usefixtures("native_built")
SCENARIOS = ("4.9.8/basic", "4.9.8/batch", "5.3.3/v2-and-crc", "5.3.3/batchcq")


def _segments(name: str) -> list:
    return sorted((CLEAN_SCENARIOS[name] / "store" / "commitlog").iterdir())


@pytest.fixture(scope="module")
def segments() -> dict:
    """Each scenario's commit log segments' bytes, read once for the module."""
    return {name: [p.read_bytes() for p in _segments(name)] for name in SCENARIOS}


@pytest.fixture(autouse=True)
def kernel_on(monkeypatch):
    """The kernel in use, even under RMQTOOL_NATIVE=0."""
    monkeypatch.setattr(native, "kernel", KERNEL)


def _good_run(buf, i, stop):
    """good_crc_run's answer from the numpy kernel: the clean records whose CRC verdicts hold, up
    to the first that does not (how many, where they end)."""
    records = clean_records(buf, i, stop)
    if not len(records):
        return 0, records.stop
    ok = crc_verdicts(buf, records).ok
    n = len(records) if ok.all() else int(ok.argmin())
    return n, records.stop if n == len(records) else int(records.position[n])


def _chain(buf, i=0, stop=None, limit=None):
    positions, end = hop_chain(buf, i, len(buf) if stop is None else stop, limit)
    return positions.tolist(), end


@pytest.mark.parametrize("name", SCENARIOS)
def test_hop_and_header_hop_count_the_broker_records(name, segments, monkeypatch):
    """Every segment's chain, kernel and pure alike; their records are truth's messages."""
    truth = load_truth(CLEAN_SCENARIOS[name] / "truth.json")["truth"]
    counted = hopped = 0
    for path, raw in zip(_segments(name), segments[name]):
        fast, pure = kernel_and_pure(lambda: _chain(raw))
        assert fast == pure
        counted += len(fast[0])
        fast, pure = kernel_and_pure(lambda: header_hop(str(path), len(raw)))
        assert fast == pure
        hopped += fast[0]
    assert counted == hopped == truth["commitlog"]["messageCount"] == len(truth["messages"])
    starts = sorted(m["physicalOffset"] for m in truth["messages"])
    base = int(_segments(name)[0].name)
    assert starts[0] == base and _chain(segments[name][0])[0][:3] == [s - base for s in starts[:3]]


def test_header_hop_over_map_seams(segments, monkeypatch):
    """A record header across the end of a mapped span is read from the next span."""
    path = _segments("4.9.8/basic")[0]
    want = kernel_and_pure(lambda: header_hop(str(path), path.stat().st_size))
    monkeypatch.setattr(commitlog, "HOP_MAP", 3 * 4096 + 5)
    assert want[0] == want[1] == header_hop(str(path), path.stat().st_size)


def test_hop_fills_out_in_chunks(segments, monkeypatch):
    """An out buffer smaller than the chain: the hop stops there and goes on from where it said."""
    raw = segments["5.3.3/v2-and-crc"][0]
    args = (len(raw), len(raw), MIN_MESSAGE_LENGTH, MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2)
    one = np.zeros(1, np.int64)
    got, i = [], 0
    while True:
        n, i = KERNEL.hop(raw, i, *args, one)
        if not n:
            break
        got.append(int(one[0]))
    assert (got, i) == _chain(raw) and len(got) > 10
    assert KERNEL.hop(raw, 0, *args, None) == (len(got), i)
    monkeypatch.setattr("rmqtool.store.record_rule._HOP_CHUNK", bytes(8 * 7))  # several pieces joined
    assert _chain(raw) == (got, i)
    with pytest.raises(ValueError):
        KERNEL.hop(raw, 0, len(raw), len(raw), 0, 1, 2, None)  # min_length 0 would never move on
    with pytest.raises(TypeError):
        KERNEL.hop(raw, 0, len(raw), len(raw), 1, 1, 2, np.zeros(4, np.int32))


@pytest.mark.parametrize("name", ("4.9.8/basic", "5.3.3/v2-and-crc"))
def test_crcs_of_bodies_match_truth(name, segments, monkeypatch):
    """Body CRCs through the kernel's one call and the Python loop, equal to the broker's bodyCRC."""
    truth = load_truth(CLEAN_SCENARIOS[name] / "truth.json")["truth"]["messages"]
    body_crc = {m["physicalOffset"]: m["bodyCRC"] for m in truth}
    base = int(_segments(name)[0].name)
    raw = segments[name][0]
    records = clean_records(raw, 0, len(raw))
    fast, pure = kernel_and_pure(lambda: crc.crcs_of(raw, records.body_at, records.body_end))
    assert fast.dtype == pure.dtype == np.int64 and fast.tolist() == pure.tolist()
    assert [c & JAVA_CRC_MASK for c in fast.tolist()] == [body_crc[base + p] for p in records.position.tolist()]


@pytest.mark.parametrize("name", SCENARIOS)
def test_good_crc_run_takes_every_record(name, segments):
    """Every fixture record is clean and its CRCs hold: crc_run takes each segment's whole chain."""
    for raw in segments[name]:
        got = good_crc_run(raw, 0, len(raw))
        assert got == _good_run(raw, 0, len(raw)) == (len(_chain(raw)[0]), _chain(raw)[1])
    with pytest.raises(ValueError):
        KERNEL.crc_run(raw, 0, len(raw), len(raw), RECORD_LAYOUT[:-1])


@pytest.mark.parametrize("name", ("4.9.8/batch", "5.3.3/v2-and-crc"))
def test_crc_scan_both_ways(name, monkeypatch):
    """The integrity check's scan: the same results and tally with the kernel and without."""
    log = CommitLog(CLEAN_SCENARIOS[name] / "store" / "commitlog")

    def run():
        tally = CrcTally()
        results = [r for r in log.crc_scan(tally=tally) if type(r) is not Blank]
        return results, tally

    (fast, fast_tally), (pure, pure_tally) = kernel_and_pure(run)
    assert fast == pure == [] and fast_tally == pure_tally
    assert fast_tally.messages == load_truth(CLEAN_SCENARIOS[name] / "truth.json")["truth"]["commitlog"]["messageCount"]


def test_crc_ranges_declines_ranges_outside(segments, monkeypatch):
    raw = segments["5.3.3/v2-and-crc"][0]
    out = np.zeros(1, np.int64)
    for a, b in ((-1, 4), (5, 4), (0, len(raw) + 1)):
        assert KERNEL.crc_ranges(raw, np.array([a]), np.array([b]), out) is None
    fast, pure = kernel_and_pure(lambda: crc.crcs_of(raw, np.array([3, 8]), np.array([len(raw) + 9, 2])).tolist())
    assert fast == pure
    monkeypatch.setattr(crc, "fast_crc32", lambda data: zlib.crc32(data))  # replaced: the kernel is not used
    assert crc.kernel_crcs() is None


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_windows_both_ways(data, segments, monkeypatch, tmp_path_factory):
    """Truncated, garbage, zeroed bytes, a totalSize past the end: hop, header_hop and the CRC of
    ranges (some outside the window) give the pure path's answers."""
    raw = bytearray(segments[data.draw(st.sampled_from(SCENARIOS))][0][:data.draw(st.integers(0, 40000))])
    if raw:
        raw = damage(raw, data, kinds=("flip", "zero", "garbage", "int", "truncate"))
    raw = bytes(raw)
    i = data.draw(st.integers(0, len(raw) + 16))
    stop = data.draw(st.integers(0, len(raw) + 16))
    limit = data.draw(st.one_of(st.none(), st.integers(0, len(raw) + 2000)))
    fast, pure = kernel_and_pure(lambda: _chain(raw, i, stop, limit))
    assert fast == pure
    path = tmp_path_factory.mktemp("hop") / "00000000000000000000"
    path.write_bytes(raw)
    size = len(raw)  # as the bench calls it (the pure window reads past a smaller size; the map does not)
    fast, pure = kernel_and_pure(lambda: header_hop(str(path), size))
    assert fast == pure
    n = data.draw(st.integers(0, 6))
    start = np.array(data.draw(st.lists(st.integers(-4, len(raw) + 4), min_size=n, max_size=n)), np.int64)
    end = np.array(data.draw(st.lists(st.integers(-4, len(raw) + 4), min_size=n, max_size=n)), np.int64)
    fast, pure = kernel_and_pure(lambda: crc.crcs_of(raw, start, end).tolist())
    assert fast == pure
    assert good_crc_run(raw, i, stop) == _good_run(raw, i, stop)
    os.unlink(path)


@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_crc_scan_both_ways(data, segments, monkeypatch, tmp_path_factory):
    """crc_scan of a damaged commit log (bodies, CRC entries, lengths hit): the kernel's mapped
    windows and crc_run give the pure path's results, findings and tally."""
    directory = tmp_path_factory.mktemp("crc") / "commitlog"
    directory.mkdir()
    for path, raw in zip(_segments("5.3.3/v2-and-crc"), segments["5.3.3/v2-and-crc"]):
        raw = bytearray(raw)
        (directory / path.name).write_bytes(bytes(damage(raw, data, span=40000, max_damages=3)
                                                  if path.name.endswith("00000") else raw))
    log = CommitLog(directory)

    def run():
        tally, findings = CrcTally(), []
        results = [canonical(r) for r in log.crc_scan(tally=tally, findings=findings)]
        return results, findings, tally

    fast, pure = kernel_and_pure(run)
    assert fast == pure


def test_a_file_that_cannot_be_mapped_is_read(monkeypatch):
    """A file system without mmap: header_hop and crc_scan read the file instead, same answers."""
    import mmap
    import types

    def refuse(*args, **kwargs):
        raise OSError(19, "No such device")

    path = _segments("5.3.3/v2-and-crc")[0]
    log = CommitLog(CLEAN_SCENARIOS["5.3.3/v2-and-crc"] / "store" / "commitlog")
    want = header_hop(str(path), path.stat().st_size)
    monkeypatch.setattr(commitlog, "mmap", types.SimpleNamespace(mmap=refuse, ACCESS_READ=mmap.ACCESS_READ,
                                                                 ALLOCATIONGRANULARITY=mmap.ALLOCATIONGRANULARITY))
    assert header_hop(str(path), path.stat().st_size) == want and want[0] > 10
    tally = CrcTally()
    assert [r for r in log.crc_scan(tally=tally) if type(r) is not Blank] == []
    assert tally.messages == load_truth(CLEAN_SCENARIOS["5.3.3/v2-and-crc"] / "truth.json")["truth"]["commitlog"][
        "messageCount"]
