"""The column paths timer verify runs on (benchmarks/bench_timer.py): the recovery walk's
clean-record windows, checked against what the real brokers did (truth.json).

The recovery walk (recovery/commitlog_walk.walk) lets the clean-record kernel vouch for the
records no dispatch request is asked of and sends the rest through check_message; where it
ends must still be where the broker's recovery ended the log.
"""
from __future__ import annotations

import pytest

from conftest import V4, V5, load_truth
from rmqtool.recovery import commitlog_walk
from rmqtool.recovery.plan import plan_recovery

# crash fixtures the broker recovered (loadOk): clean, torn, zeroed, a corrupt body (the
# CRC check), a garbled last message; normal and abnormal recovery, 4.9.8 and 5.3.3
WALKED = [(V4 / "crash", v) for v in ("a-as-is", "b2-garbage-tail-of-last-message", "b3-zeroed-last-3-messages",
                                      "c1-delete-cq-queue-dir", "e1-corrupt-body-in-last-commitlog-file")] + \
         [(V5 / "crash5", v) for v in ("a-as-is", "b-garbled-last-message", "c-checkpoint-zeroed",
                                       "d-abort-removed-garbled-last-message")]


@pytest.mark.parametrize("window", [commitlog_walk.WINDOW, 1000], ids=["window", "small-windows"])
@pytest.mark.parametrize("base,variant", WALKED, ids=lambda x: x if isinstance(x, str) else x.name)
def test_the_walk_ends_where_the_broker_did_with_the_kernel_vouching(base, variant, window, monkeypatch):
    """(Windows of 1000 bytes of record starts: many a file, their ends inside records.)"""
    monkeypatch.setattr(commitlog_walk, "WINDOW", window)
    truth = load_truth(base / variant / "truth.json")
    calls, hints = [], []
    real_check, real_kernel = commitlog_walk.check_at, commitlog_walk.clean_records

    def counted(*args, **kwargs):
        calls.append(args[1])
        return real_check(*args, **kwargs)

    def kernel(*args, **kwargs):
        hints.append(kwargs.get("hints"))
        return real_kernel(*args, **kwargs)

    monkeypatch.setattr(commitlog_walk, "check_at", counted)
    monkeypatch.setattr(commitlog_walk, "clean_records", kernel)
    plan = plan_recovery(base / variant / "input" / "store")
    assert plan.commit_log_end == truth["truth"]["commitlog"]["maxPhyOffset"]
    walked = plan.outcome.walk.records
    # the kernel vouched for most records, given the units' positions: before the queues' reach,
    # and past it, where they are dispatched (abnormal: all), with their requests built from its
    # parts (test_walk_dispatch_fast: the requests check_message gives)
    assert any(h is not None and len(h) for h in hints)
    assert walked > 10 and len(calls) < walked / 2


# --- the timer log's units against their commit log records (store/timer/records) -------------

import numpy as np  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from helpers import examples, expand_store  # noqa: E402
from rmqtool.formats.indexfile import java_string_hash  # noqa: E402
from rmqtool.formats.properties import bytes_to_properties  # noqa: E402
from rmqtool.store.timer import records  # noqa: E402
from rmqtool.store.timer.records import _real_topic_hashes, plain_units  # noqa: E402
from rmqtool.store.timer.timerlog import scan_timer_log  # noqa: E402

TIMER_STORES = {"timer": (V5 / "timer", "store", ("timer",), ("commitLog", "minMax")),
                "e-commitlog-truncated": (V5 / "timer-crash" / "e-commitlog-truncated", "input/store",
                                          ("onDiskBeforeLoad", "timer"), ("commitLogAfterLoad",))}


def _at(truth: dict, path: tuple):
    for k in path:
        truth = truth[k]
    return truth


@pytest.fixture(scope="module")
def timer_stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("timer-columns")
    return {name: (load_truth(src / "truth.json"), expand_store(src / sub, root / name), units, ends)
            for name, (src, sub, units, ends) in TIMER_STORES.items()}


@pytest.mark.parametrize("batch", [records._BATCH, 7], ids=["batch", "small-batches"])
@pytest.mark.parametrize("name", sorted(TIMER_STORES))
def test_plain_units_are_the_units_whose_record_the_broker_finds(timer_stores, name, batch, monkeypatch):
    """A unit is plain where truth says its commit log record is a rmq_sys_wheel_timer record of
    exactly sizePy bytes whose REAL_TOPIC hashes to the unit's, inside the log the broker kept
    (matched in batches of 7 units too)."""
    monkeypatch.setattr(records, "_BATCH", batch)
    truth, store, units_at, ends_at = timer_stores[name]
    cols = scan_timer_log(store / "timerlog").columns
    units = {u["position"]: u for u in _at(truth, units_at)["timerLogUnits"]}
    ends = _at(truth, ends_at)
    low, end = ends["minPhyOffset"], ends["maxPhyOffset"]
    got = plain_units(store, cols["offset_py"], cols["size_py"], cols["hash_code_of_real_topic"], low, end)
    want = []
    for position, offset, size in zip(cols["position"].tolist(), cols["offset_py"].tolist(), cols["size_py"].tolist()):
        rec = units[position].get("commitLogRecord") or {}
        want.append(rec.get("topic") == "rmq_sys_wheel_timer" and bool(rec.get("sizeMatches"))
                    and bool(rec.get("realTopicHashMatches")) and low <= offset and offset + size <= end)
    assert got.tolist() == want and len(want) == len(units)
    if name == "e-commitlog-truncated":
        assert not all(want) and any(want)  # units past the truncated end are not plain


_VALUES = st.sampled_from([b"TopicA", b"TopicB", b"TopicC", b"Topi\xc3\xa9", b"Top\x01x", b""])
_PIECES = st.one_of(st.builds(lambda v: b"REAL_TOPIC\x01" + v, _VALUES),
                    st.sampled_from([b"UNIQ_KEY\x01AB", b"TIMER_OUT_MS\x011800000000000", b"REAL_TOPIC", b"X\x01Y"]))


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.tuples(st.lists(_PIECES, max_size=3), st.sampled_from([b"TopicA", b"TopicB", b"TopicC"])),
                min_size=1, max_size=8))
def test_real_topic_hashes_with_the_units_hashes_read_as_the_broker_reads(records):
    """Given each unit's hash (the values compared with the first of each hash's), a known
    code is String.hashCode of the REAL_TOPIC bytes_to_properties reads, whether or not it is
    the unit's."""
    buf, starts, ends, expected = b"", [], [], []
    for pieces, unit_topic in records:
        buf += b"\x00\x02"  # what lies between records (a header's bytes) ends a value
        starts.append(len(buf))
        buf += b"\x02".join(pieces)
        ends.append(len(buf))
        expected.append(java_string_hash(unit_topic.decode()))
    codes, known = _real_topic_hashes(buf, np.array(starts, np.int64), np.array(ends, np.int64), {},
                                      np.array(expected, np.int64))
    for s, e, code, ok in zip(starts, ends, codes.tolist(), known.tolist()):
        real = bytes_to_properties(buf[s:e])[0].get("REAL_TOPIC")
        if ok:
            assert real is not None and code == java_string_hash(real)
        pieces = buf[s:e].split(b"\x02")
        ones = [p for p in pieces if p.startswith(b"REAL_TOPIC\x01")]
        if len(ones) == 1 and ones[0][11:] in (b"TopicA", b"TopicB", b"TopicC") and all(
                p.count(b"\x01") == 1 and not p.startswith(b"REAL_TOPIC\x01\x01") for p in pieces):
            assert ok  # the common record is read in bulk
