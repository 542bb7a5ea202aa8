"""bench_query runs end to end on a small store with a full index file of its own geometry:
every lookup finds its message through the index, the printed target lines say what the
run measured, and a lookup touches no more pages than its target."""
from __future__ import annotations

from benchmarks import bench_query
from benchmarks.verdict import check_printed

# 100,000 entries fill an index file of 2.1 MB (513 pages): a lookup that read the file
# whole, or a slot's chain far beyond its own, would touch more than the 64-page target
SHAPE = bench_query.Shape(messages=1000, keys=100, slots=25_000, entries=100_000)


def test_bench_query_runs_on_a_small_store(tmp_path, capsys):
    out = bench_query.run(tmp_path, SHAPE)
    printed = capsys.readouterr().out
    ratio, pages = out["verdicts"]
    assert (ratio.value, ratio.comparison, ratio.target) == (out["scan"] / out["lookup"], ">=",
                                                             bench_query.TARGET_RATIO)
    assert (pages.value, pages.comparison, pages.target) == (out["pages"], "<=", bench_query.TARGET_PAGES)
    assert out["index_pages"] > 4 * bench_query.TARGET_PAGES  # the bound is not met by a small file alone
    check_printed(out["verdicts"], printed)
    # Pages touched are counted (the index file pages the lookup's reads span), not timed:
    # the count holds under any load, so it is held to its target here (0 is INVALID, not a pass).
    assert pages.passed
    # Not asserted: scan / lookup against its target. The scan of a 1,000-message commit
    # log and the lookup both take milliseconds; the other test workers decide the ratio.
