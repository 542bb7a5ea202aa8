"""bench_spark runs end to end on a small multi-segment store: each mode exports every message."""
from __future__ import annotations

from benchmarks import bench_spark


def test_bench_spark_runs_on_a_small_store(tmp_path, capsys):
    rates = bench_spark.run(tmp_path, messages=3000, commitlog_size=1 << 20, rounds=1)
    printed = capsys.readouterr().out
    assert set(rates) == {"process", "local[1]", "local[2]"} and all(r > 0 for r in rates.values())
    assert printed.count("3,000 messages") == 3 and printed.count("target >=") == 2
