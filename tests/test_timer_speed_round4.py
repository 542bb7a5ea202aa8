"""The fourth speed round of timer verify (benchmarks/bench_timer.py), each fast path against
the path it speeds up and the brokers' truth:

* the recovery walk's search for INNER_NUM's bytes (recovery/commitlog_walk.inner_hits): the
  native kernel's find_all against the loop of ``bytes.find``, on made bytes and on the stores'
  windows; where the walk ends, both ways, equals where the 5.3.3 broker ended the log;
* the walk giving back the pages behind it (MappedSegment.release_before): the bytes read
  after a release are the file's;
* the timer units' plain verdict (store/timer/records._plain_in): the kernel's plain_sure
  finds plain only units the record rule and the properties' reading find plain, on the
  timer fixture's records with bytes changed anywhere, and IPv6 hosts left to the rule.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import V5, load_truth
from helpers import examples, expand_store
from rmqtool import native
from rmqtool.recovery import commitlog_walk
from rmqtool.recovery.commitlog_walk import MappedSegment, inner_hits
from rmqtool.recovery.plan import plan_recovery
from rmqtool.store.segments import discover
from rmqtool.store.timer import records
from rmqtool.store.timer.timerlog import scan_timer_log

pytestmark = pytest.mark.usefixtures("native_built")
KERNEL = native.kernel
_INNER = commitlog_walk._INNER

# 5.3.3 stores the broker recovered (truth: maxPhyOffset): a batch topic's records hold INNER_NUM
WALKED = {"batchcq": V5 / "batchcq", **{v: V5 / "crash5" / v for v in (
    "a-as-is", "b-garbled-last-message", "d-abort-removed-garbled-last-message")}}


def _store(src):
    return src / "store" if (src / "store").is_dir() else src / "input" / "store"


def _finds(buf, needle: bytes, at: int, end: int) -> list:
    hits = []
    while (at := buf.find(needle, at, end)) >= 0:
        hits.append(at)
        at += 1
    return hits


@pytest.mark.parametrize("name", WALKED)
def test_walk_ends_where_the_broker_did_both_ways(name, monkeypatch):
    """Windows of 1000 bytes of record starts (many a file, their ends inside records, a page
    given back after each), with the kernel and without it."""
    src = WALKED[name]
    truth = load_truth(src / "truth.json")
    monkeypatch.setattr(commitlog_walk, "WINDOW", 1000)
    plans = []
    for kernel in (KERNEL, None):
        monkeypatch.setattr(native, "kernel", kernel)
        plans.append(plan_recovery(_store(src)))
    assert plans[0].commit_log_end == plans[1].commit_log_end == truth["truth"]["commitlog"]["maxPhyOffset"]
    assert plans[0].outcome.walk == plans[1].outcome.walk


def test_inner_hits_both_ways_on_the_stores(monkeypatch):
    """Every window's hits equal the loop of find's; on the batch store (INNER_NUM in its records'
    properties), with a kernel output of 2 hits a call (called again from the last hit)."""
    monkeypatch.setattr(commitlog_walk, "_HITS_ROOM", 2)
    seen = 0
    for src in WALKED.values():
        for seg in discover(_store(src) / "commitlog").segments:
            with MappedSegment(seg) as mapped:
                buf = mapped.buf
                for at in range(0, len(buf), 4096):
                    end = min(len(buf), at + 5000)
                    want = _finds(buf, _INNER, at, end)
                    seen += len(want)
                    assert inner_hits(buf, at, end).tolist() == want
                    monkeypatch.setattr(native, "kernel", None)
                    assert inner_hits(buf, at, end).tolist() == want
                    monkeypatch.setattr(native, "kernel", KERNEL)
    assert seen > 2


@settings(max_examples=examples(30), deadline=None)
@given(st.binary(max_size=300), st.sampled_from([_INNER, b"aa", b"a", b"aba"]),
       st.lists(st.integers(0, 300), max_size=6), st.integers(-5, 320), st.integers(-5, 320),
       st.integers(1, 4))
def test_find_all_as_the_loop_of_find(data, needle, places, at, end, room):
    """Made bytes with the needle put in (overlapping needles too), any range, outputs of any size."""
    buf = bytearray(data)
    for p in places:
        buf[p:p] = needle
    buf = bytes(buf)
    lo = max(at, 0)
    want = _finds(buf, needle, lo, end if end >= 0 else max(len(buf) + end, 0))
    got, start = [], lo
    stop = end if end >= 0 else max(len(buf) + end, 0)
    while True:
        out = np.empty(room, np.int64)
        n = KERNEL.find_all(buf, needle, start, stop, out)
        got += out[:n].tolist()
        if n < room:
            break
        start = int(out[n - 1]) + 1
    assert got == want


def test_released_pages_read_again_as_the_file():
    seg = discover(_store(WALKED["batchcq"]) / "commitlog").segments[0]
    raw = seg.path.read_bytes()
    with MappedSegment(seg) as mapped:
        assert bytes(mapped.buf[:len(raw)]) == raw  # every page mapped
        mapped.release_before(len(raw))
        mapped.release_before(100)  # behind what is given back already: nothing
        assert bytes(mapped.buf[:len(raw)]) == raw


@pytest.fixture(scope="module")
def timer_window(tmp_path_factory):
    """The timer fixture's commit log bytes its units point at, and the units' columns."""
    store = expand_store(V5 / "timer" / "store", tmp_path_factory.mktemp("round4") / "timer")
    cols = scan_timer_log(store / "timerlog").columns
    seg = discover(store / "commitlog").segments[0]
    end = int((cols["offset_py"] + cols["size_py"]).max())
    return seg.path.read_bytes()[:end], cols


def _verdicts(buf, cols):
    pos, size = cols["offset_py"].astype(np.int64), cols["size_py"].astype(np.int64)
    topic_hash = cols["hash_code_of_real_topic"]
    fast = records._plain_in(buf, pos, size, topic_hash, {})
    rule = records._plain_rule(buf, pos, size, topic_hash, {})
    return fast, rule


def test_plain_sure_finds_the_plain_units(timer_window):
    raw, cols = timer_window
    truth = load_truth(V5 / "timer" / "truth.json")["timer"]["timerLogUnits"]
    want = [u["commitLogRecord"]["topic"] == "rmq_sys_wheel_timer" and u["commitLogRecord"]["sizeMatches"]
            and u["commitLogRecord"]["realTopicHashMatches"] for u in truth]
    out = np.zeros(len(cols), bool)
    found = KERNEL.plain_sure(raw, cols["offset_py"].astype(np.int64), cols["size_py"].astype(np.int64),
                              cols["hash_code_of_real_topic"].astype(np.int64), records._PLAIN_LAYOUT,
                              records._TOPIC, records._REAL_TOPIC_ENTRY, 2, 1, out)
    # (the separators: 2 between entries, 1 in one) plain ones only; the rest left to the rule
    assert found == out.sum() > len(out) // 2 and not (out & ~np.array(want)).any()
    fast, rule = _verdicts(raw, cols)
    assert fast.tolist() == rule.tolist() == want
    sure = out.copy()
    buf = bytearray(raw)  # the first unit's record with IPv6 hosts: left to the rule, which reads it anew
    at = int(cols["offset_py"][0]) + records.HEADER_DTYPE.fields["sys_flag"][1] + 3
    buf[at] |= 1 << records.HOSTS_SHIFT
    out[:] = False
    KERNEL.plain_sure(bytes(buf), cols["offset_py"].astype(np.int64), cols["size_py"].astype(np.int64),
                      cols["hash_code_of_real_topic"].astype(np.int64), records._PLAIN_LAYOUT,
                      records._TOPIC, records._REAL_TOPIC_ENTRY, 2, 1, out)
    assert not out[0] and out[1:].tolist() == sure[1:].tolist()
    fast, rule = _verdicts(bytes(buf), cols)
    assert fast.tolist() == rule.tolist()


@settings(max_examples=examples(25), deadline=None)
@given(st.data())
def test_plain_verdict_both_ways_on_damaged_records(timer_window, data):
    raw, cols = timer_window
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 8))):
        k = data.draw(st.integers(0, len(cols) - 1))  # a byte of a unit's record: its header, lengths, properties
        at = int(cols["offset_py"][k]) + data.draw(st.integers(0, int(cols["size_py"][k]) - 1))
        buf[at] = data.draw(st.integers(0, 255))
    fast, rule = _verdicts(bytes(buf), cols)
    assert fast.tolist() == rule.tolist()


# --- the timer log's columns (store/timer/timerlog) ------------------------------------------

from rmqtool.formats.timerwheel import slot_index  # noqa: E402
from rmqtool.store.timer import timerlog  # noqa: E402


@settings(max_examples=examples(30), deadline=None)
@given(st.lists(st.integers(-(1 << 63) + 1, (1 << 63) - 1), max_size=8), st.integers(1, 5000), st.booleans())
def test_java_division_and_slots_as_java_has_them(values, precision, non_negative):
    """The non-negative fast path and the general one against Java's rounding toward zero."""
    a = np.array([abs(v) if non_negative else v for v in values], np.int64)
    java = [abs(v) // precision * (1 if v >= 0 else -1) for v in a.tolist()]  # rounds toward zero
    assert timerlog.java_div(a, precision).tolist() == java
    assert timerlog.slot_indexes_of(a, precision).tolist() == [slot_index(v, precision) for v in a.tolist()]


def test_deliver_times_past_a_long_as_python_ints():
    cols = np.zeros(3, timerlog.COLUMNS_DTYPE)
    cols["curr_write_time"] = [1 << 40, -(1 << 62) + 1, 5]
    cols["delayed_time"] = [7, -3, (1 << 31) - 1]
    assert timerlog.deliver_times(cols).dtype == np.int64
    assert timerlog.deliver_times(cols).tolist() == [(1 << 40) + 7, -(1 << 62) - 2, 5 + (1 << 31) - 1]
    for far in (1 << 62, -(1 << 62), -(1 << 63)):
        cols["curr_write_time"][1] = far
        assert timerlog.deliver_times(cols).dtype == object
        assert timerlog.deliver_times(cols).tolist()[1] == far - 3


def test_scan_into_one_array_and_a_file_that_grew(tmp_path):
    """The units land in one array; a file read longer than it was listed (more units than its
    size held) gets its own, joined after; both as leading_units reads each file."""
    store = expand_store(V5 / "timer" / "store", tmp_path / "timer")
    directory = store / "timerlog"
    raw = {p: timerlog.read_file(p) for p in sorted(directory.iterdir())}
    log = timerlog.scan_timer_log(directory)
    assert len(log.columns) and log.columns.base is not None  # a view of the one array
    first = next(iter(raw))
    units = raw[first][:len(timerlog.leading_units(raw[first], 0)) * timerlog.UNIT_SIZE]
    grown = {**raw, first: units * (len(raw[first]) // len(units) + 2)}
    for read in (raw, grown):
        got = timerlog.scan_timer_log(directory, read=lambda p: read[p])
        want = np.concatenate([timerlog.leading_units(read[seg.path], seg.base_offset) for seg in
                               discover(directory).segments])
        assert got.columns.tolist() == want.tolist()
    assert len(got.columns) > len(log.columns) == len(timerlog.scan_timer_log(directory, read=lambda p: raw[p]).columns)


# --- timermetrics against the units (verify/timer/check._metrics) -----------------------------

import json  # noqa: E402

from rmqtool.recovery.outcome import Settings, simulate  # noqa: E402
from rmqtool.verify.timer import check  # noqa: E402


def test_metrics_counted_by_topic_and_by_sort_alike(tmp_path, monkeypatch):
    """timer-crash a-as-is at its clock, timermetrics as written and with one count off by 100
    and a topic no unit has: the drift finding the same either way (each topic compared, or all
    hashes sorted), naming what the damage changed."""
    src = V5 / "timer-crash" / "a-as-is"
    truth = load_truth(src / "truth.json")
    clock = (truth["timerAfterLoad"]["state"] if "timerAfterLoad" in truth
             else truth["reload"]["timerAfterLoad"])["fakeNowMs"]
    store = expand_store(src / "input" / "store", tmp_path / "store")
    outcome = simulate(store, Settings())
    path = store / "config" / "timermetrics"
    document = json.loads(path.read_text())
    results = []
    for damaged in (False, True):
        if damaged:
            topic = sorted(document["timingCount"])[0]
            document["timingCount"][topic]["count"] += 100
            document["timingCount"]["NoSuchTopic"] = {"count": 3, "timeStamp": 0}
            path.write_text(json.dumps(document, separators=(",", ":")))
        for few in (check._FEW_TOPICS, 0):
            monkeypatch.setattr(check, "_FEW_TOPICS", few)
            results.append([(f.id, f.message) for f in check.check_timer(store, outcome, clock)])
    assert results[0] == results[1] and results[2] == results[3]
    drift = [m for k, m in results[2] if k == "timerMetricsDrift"]
    assert len(drift) == 1 and "NoSuchTopic 3 (units: 0)" in drift[0] and topic in drift[0]
    assert not [m for k, m in results[0] if k == "timerMetricsDrift"]
