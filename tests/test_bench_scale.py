"""bench_scale runs end to end on two small stores (the second 4x the first): verify and dump run
on both, the ratio lines are the medians' ratios, and the peak RSS lines are each command's own
peak (the launcher's), under the target on stores this small whatever the load."""
from __future__ import annotations

from benchmarks import bench_scale
from benchmarks.launch import MIB
from benchmarks.verdict import check_printed


def test_bench_scale_runs_on_two_small_stores(tmp_path, capsys):
    out = bench_scale.run(tmp_path, small=500, big=2000, commitlog_size=1 << 20, rounds=1, big_name="big-4x")
    printed = capsys.readouterr().out
    measured, kept = out["runs"], out["kept"]
    verify_growth, dump_growth, *peaks = out["verdicts"]
    assert verify_growth.value == measured["verify big"].median / measured["verify small"].median
    assert dump_growth.value == measured["dump big"].median / measured["dump small"].median
    assert {v.target for v in (verify_growth, dump_growth)} == {bench_scale.TARGET_GROWTH}
    assert [v.value for v in peaks] == [
        max(r["rss"] for r in kept["verify small"]) / MIB, max(r["rss"] for r in kept["verify big"]) / MIB,
        max(r.peak for r in kept["dump small"]) / MIB, max(r.peak for r in kept["dump big"]) / MIB]
    assert all(v.passed and v.value > 10 for v in peaks), peaks  # the commands' own: some MiB, never this process's
    assert [(r["code"], r["errors"]) for side in ("verify small", "verify big") for r in kept[side]] == [(0, 0)] * 2
    check_printed(out["verdicts"], printed)
