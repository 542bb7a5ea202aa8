"""bench_verify's pieces run end to end on a small store: the verify child reports its
time and memory, finds the store clean, and the Java loop reads the same messages; the
printed target lines say what the run measured."""
from __future__ import annotations


from benchmarks import bench_verify, big_store
from benchmarks.verdict import check_printed
from helpers import copy_tree


def test_bench_verify_runs_on_a_small_store(tmp_path, capsys, recovery_scan_classes):
    copy_tree(recovery_scan_classes, tmp_path / "java")  # compiled once a worker: no javac here
    out = bench_verify.run(tmp_path, messages=2000, commitlog_size=1 << 20, quarter=500, rounds=1)
    printed = capsys.readouterr().out
    kept = out["runs"]
    assert [(r["code"], r["errors"]) for r in kept["jobs1"] + kept["jobs2"] + out["quarter"]] == [(0, 0)] * 3
    # each peak is the verify process's own (the launcher's), not this test process's pages
    assert all(10 << 20 < r["rss"] < 200 << 20 for r in kept["jobs2"] + out["quarter"])
    jobs2, jobs1, flat = out["verdicts"]
    assert (jobs2.value, jobs2.comparison, jobs2.target) == (
        out["jobs2"].median / out["java"].median, "<=", bench_verify.TARGET_JOBS2)
    assert (jobs1.value, jobs1.target) == (out["jobs1"].median / out["java"].median, bench_verify.TARGET_JOBS1)
    assert out["jobs2"].seconds == tuple(r["seconds"] for r in kept["jobs2"])
    assert (flat.value, flat.comparison, flat.target) == (
        bench_verify.peak_rss(kept["jobs2"]) / bench_verify.peak_rss(out["quarter"]), "<=",
        bench_verify.FLAT_RSS_GROWTH)
    check_printed(out["verdicts"], printed)
    # Memory flat in store size is a peak RSS, not a time: it holds on a small store under
    # any load, so it is held to its target here.
    assert flat.passed
    # Not asserted: --jobs 2 against the Java loop. On 2,000 messages both take milliseconds
    # and the other test workers on the two cores decide the ratio.


def test_verify_child_reports_damage(tmp_path):
    store = big_store.ensure(tmp_path, messages=300, commitlog_size=1 << 20)
    segment = sorted((store / "commitlog").iterdir())[0]
    with open(segment, "r+b") as f:  # one body byte of the tenth record flipped: a CRC error
        f.seek(9 * 1200 + 300)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    result = bench_verify.run_verify(store, 1)
    assert result["code"] == 3 and result["errors"] >= 1
