"""bench_check runs end to end on a small built store: the probe reads it whole (its written end
is the store's max offset), and the printed verdict is the one the numbers give. (The time
itself is timing: not asserted.)"""
from __future__ import annotations

from benchmarks import bench_check, big_store, qmq_store
from benchmarks.verdict import check_printed


def test_bench_check_runs_on_a_small_store(tmp_path, capsys):
    out = bench_check.run(tmp_path, messages=2000, rounds=1)
    printed = capsys.readouterr().out
    v, q = out["verdicts"]
    assert v.invalid is None and v.value == out["seconds"] == out["runs"]["check"].median
    assert q.invalid is None and q.value == out["qmq_runs"]["qmq check"].median
    (checked,) = out["result"].stores
    written = next(m.value for m in checked.measures if m.measure == "written_end")
    assert written == big_store.max_offset(tmp_path / big_store.DIRECTORY)
    (qmq,) = out["qmq_result"].stores
    assert next(m.value for m in qmq.measures if m.measure == "written_end") == \
        qmq_store.written_end(tmp_path / qmq_store.DIRECTORY)
    assert out["result"].exit_code == 0 and out["qmq_result"].exit_code == 0
    check_printed(out["verdicts"], printed)
