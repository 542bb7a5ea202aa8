"""bench_append runs end to end on a few messages: every mode appends, and the printed
target line says what the run measured."""
from __future__ import annotations

import pytest

from benchmarks import bench_append
from benchmarks.verdict import check_printed


def test_bench_append_runs_on_a_few_messages(tmp_path, capsys):
    out = bench_append.run(tmp_path, count=2000, sync_seconds=0.2, sync_thread_messages=50, sync_bulk_messages=500,
                           rounds=1)
    printed = capsys.readouterr().out
    assert min(out["append"], out["append_many"], out["sync_threads"], out["sync_bulk"]) > 0
    many, one = out["verdicts"]
    assert (many.value, many.comparison, many.target) == pytest.approx(
        (out["append_many"] / bench_append.ANCHOR_MSG_PER_S, ">=", bench_append.TARGET_APPEND_MANY))
    assert (one.value, one.target) == pytest.approx(
        (out["append"] / bench_append.ANCHOR_MSG_PER_S, bench_append.TARGET_APPEND))
    check_printed(out["verdicts"], printed)
    # Not asserted: the rate against the broker's. 2,000 appends take milliseconds, and the
    # other test workers on the two cores decide how many.
