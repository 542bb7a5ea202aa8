"""The commit log walk proven from consume queue units (store/record_kernel.hinted_chain).

Candidate record positions (the units' commit log offsets) are an optimisation input only:
whatever they are (a random subset, shifted, garbage) and whatever the bytes (damaged), the
clean records are the hop's. This is the one test that compares two paths; the walks that
use the hints are checked against the fixtures' truth.json (where recovery ended the log).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CLEAN_SCENARIOS, load_truth
from helpers import damage, examples, fixture_commitlogs
from rmqtool.findings import COMMIT_LOG_END
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.consumequeue import unit_offsets
from rmqtool.store.paths import StorePaths
from rmqtool.store.record_kernel import clean_records, hinted_chain
from rmqtool.store.record_rule import hop_chain


@pytest.fixture(scope="module")
def buffers():
    """Every fixture commit log file's bytes, with the positions the hop takes from its start."""
    out = []
    for d in fixture_commitlogs():
        for seg in CommitLog(d).segments:
            buf = seg.path.read_bytes()
            out.append((buf, np.frombuffer(hop_chain(buf, 0, len(buf))[0], np.int64)))
    return out


def _same(a, b):
    assert (a.position.tolist(), a.end.tolist(), a.stop, a.refusal) == \
        (b.position.tolist(), b.end.tolist(), b.stop, b.refusal)
    assert a.header.tobytes() == b.header.tobytes()
    for f in ("hosts", "store_timestamp", "body_at", "body_end", "topic_at", "topic_end", "properties_at"):
        assert getattr(a, f).tolist() == getattr(b, f).tolist()


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_hints_give_the_hop_s_records(buffers, data):
    buf, truth = data.draw(st.sampled_from(buffers))
    raw = bytearray(buf)
    if data.draw(st.booleans()):
        raw = damage(raw, data, kinds=("flip", "zero", "garbage", "int", "truncate"))
    buf = bytes(raw)
    n = len(truth)
    keep = data.draw(st.lists(st.booleans(), min_size=n, max_size=n)) if n else []
    hints = [int(p) for p, k in zip(truth.tolist(), keep) if k]
    hints += data.draw(st.lists(st.integers(-8, len(buf) + 8), max_size=8))  # garbage
    hints += [h + data.draw(st.integers(-3, 3)) for h in data.draw(st.lists(st.sampled_from(truth.tolist()),
                                                                            max_size=4))] if n else []  # shifted
    hints = np.sort(np.array(hints, np.int64))  # repeats kept or not: sorted is all the kernel needs
    if data.draw(st.booleans()):
        hints = np.unique(hints)
    i = data.draw(st.sampled_from([0, *truth.tolist()[:3]]) | st.integers(0, len(buf)))
    stop = data.draw(st.sampled_from([len(buf)]) | st.integers(0, len(buf) + 8))
    limit = data.draw(st.sampled_from([None, len(buf)]) | st.integers(0, len(buf)))
    positions, hopped_to = hop_chain(buf, i, stop, limit)
    got, got_to = hinted_chain(buf, i, stop, limit, hints)
    assert (got.tolist(), got_to) == (list(positions), hopped_to)
    _same(clean_records(buf, i, stop, limit, hints), clean_records(buf, i, stop, limit))


def test_exact_hints_prove_the_whole_chain(buffers, monkeypatch):
    """Every record named: the hop runs only past the last candidate (one call a window)."""
    calls = []
    real = hop_chain

    def counted(*args):
        calls.append(args[1])
        return real(*args)

    import rmqtool.store.record_kernel as kernel
    monkeypatch.setattr(kernel, "hop_chain", counted)
    for buf, truth in buffers:
        if len(truth) < 3:
            continue
        calls.clear()
        got, _ = hinted_chain(buf, 0, len(buf), None, truth)
        assert got.tolist() == truth.tolist()
        assert calls == [int(truth[-1])]
        got, _ = hinted_chain(buf, 0, len(buf), None, np.repeat(truth, 2))  # every candidate twice
        assert got.tolist() == truth.tolist()


@pytest.mark.parametrize("scenario", sorted(CLEAN_SCENARIOS))
def test_the_hints_are_the_units_commit_log_offsets(scenario):
    """store/consumequeue.unit_offsets: every queue's units (batch consume queues too), as truth
    lists them, sorted and unique; and with them the kernel takes the messages truth lists."""
    truth = load_truth(CLEAN_SCENARIOS[scenario] / "truth.json")["truth"]
    units = {e[1] for queues in truth["consumeQueues"].values() for q in queues.values() for e in q["entries"]}
    store = CLEAN_SCENARIOS[scenario] / "store"
    hints = unit_offsets(StorePaths(store))
    assert hints.tolist() == sorted(units)
    taken = []
    for seg in CommitLog(store / "commitlog").segments:
        buf = seg.path.read_bytes()
        lo, hi = np.searchsorted(hints, (seg.base_offset, seg.base_offset + len(buf)))
        taken += (clean_records(buf, 0, len(buf), hints=hints[lo:hi] - seg.base_offset).position
                  + seg.base_offset).tolist()
    assert taken == sorted(m["physicalOffset"] for m in truth["messages"])


@pytest.mark.parametrize("kernel", [False, True])
def test_verify_gives_each_band_its_units_as_hints(monkeypatch, kernel):
    """verify's column scan: without the native kernel every window's numpy chain has the units'
    offsets of its bytes; with it (whose C hop reads none) no band reads them; the messages it
    counts are truth's either way."""
    from rmqtool import native
    from rmqtool.store import record_columns
    from rmqtool.verify.run import Verify, VerifyOptions

    if not kernel:
        monkeypatch.setattr(native, "kernel", None)
    kernel = native.kernel is not None  # (a tree without it built runs the numpy path both times)
    scenario = CLEAN_SCENARIOS["4.9.8/basic"]
    seen = []
    real = record_columns.column_run

    def spy(buf, i, stop, *args, hints=None, **kwargs):
        seen.append(hints)
        return real(buf, i, stop, *args, hints=hints, **kwargs)

    monkeypatch.setattr(record_columns, "column_run", spy)
    findings = list(Verify(scenario / "store", VerifyOptions(jobs=1)).findings())
    if kernel:
        assert seen and all(h is None for h in seen)
    else:
        assert seen and all(h is not None for h in seen) and len(seen[0])
    end = next(f for f in findings if f.id == COMMIT_LOG_END)
    assert end.details["messages"] == len(load_truth(scenario / "truth.json")["truth"]["messages"])
