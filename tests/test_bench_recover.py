"""bench_recover runs end to end on a small store: the plan of the crashed view finds the
store whole, redispatch dispatches every message, both stand beside the Java loop."""
from __future__ import annotations

from benchmarks import bench_recover


def test_bench_recover_runs_on_a_small_store(tmp_path, capsys):
    out = bench_recover.run(tmp_path, messages=2000, commitlog_size=1 << 20, rounds=1, java_rounds=1)
    printed = capsys.readouterr().out
    assert out["plan"] > 0 and out["redispatch"] > 0 and out["java"] > 0
    assert printed.count("Java loop") >= 3 and ("PASS" in printed or "MISS" in printed)
    assert (tmp_path / "big-store-crashed" / "abort").exists()
