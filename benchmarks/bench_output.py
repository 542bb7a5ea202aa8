"""Output speed: ``dump commitlog`` as JSON Lines (``--body none`` and ``--body base64``), a table
and JSON.

Input: the 1,000,000-message store of 1 KB bodies (``benchmarks/big_store.py``, built once
under the work directory). Each format runs as its own ``rmqtool`` process (the real CLI,
interpreter start included) writing ROWS rows to /dev/null, started through
benchmarks/launch.py, which gives the process's own peak RSS and CPU time. The formats run
in turns, at least 3 times each (benchmarks/runs.py); a rate is rows over the median wall
time, with the slowest and fastest run's rate and the load average beside it; the rate over
CPU time (user + system: what the process itself spent, whatever else runs on the machine)
is printed too. Peak RSS is also taken at a third of the rows: the same peak at both counts
shows memory flat in rows.

Targets: JSON Lines with ``--body none`` at least 500,000 rows/s wall, with ``--body base64``
at least 250,000 (issue 27); a table at least a third of JSON Lines' rate; the peaks at
ROWS/3 and ROWS rows within 8 MiB in every format.
"""
from __future__ import annotations

import os
import pathlib
import statistics
import sys

from benchmarks import big_store, runs
from benchmarks.launch import MIB, Launched, launch
from benchmarks.verdict import report, verdict

ROWS = 500_000
TARGET_JSONL = 500_000  # rows/s, --body none
TARGET_BASE64 = 250_000  # rows/s, --body base64
TABLE_SHARE = 1 / 3  # of JSON Lines' rate
RSS_SLACK_MIB = 8  # peaks within 8 MiB count as flat
TABLE_WIDTH = "120"
# name: (--format, --body)
FORMATS = {"jsonl": ("jsonl", "none"), "jsonl base64": ("jsonl", "base64"), "table": ("table", "none"),
           "json": ("json", "none")}


def dump(store: pathlib.Path, fmt: str, rows: int | None, body: str = "none") -> Launched:
    """One ``rmqtool dump commitlog`` process writing to /dev/null (every row when ``rows`` is None)."""
    env = dict(os.environ, COLUMNS=TABLE_WIDTH)
    limit = () if rows is None else ("--limit", str(rows))
    return launch([sys.executable, "-m", "rmqtool", "dump", "commitlog", str(store), "--format", fmt, "--body", body,
                   *limit, "--no-progress"], env=env)


def timed_dump(store: pathlib.Path, fmt: str, rows: int | None, body: str, results: list):
    """A side for :func:`runs.rounds`: one dump's wall seconds; each run kept in ``results``."""
    def measure() -> float:
        results.append(dump(store, fmt, rows, body))
        return results[-1].wall
    return measure


def run(workdir: pathlib.Path, messages: int = big_store.MESSAGES, commitlog_size: int | None = None,
        rows: int = ROWS, warm: bool = True, rounds: int = runs.MIN_ROUNDS) -> dict:
    """Each format's rates and peak RSS, and the verdicts. ``warm`` first runs each format
    once on a few rows (page cache, imports): the timings need it, a test of the lines not."""
    store = big_store.ensure(workdir, messages, commitlog_size)
    print(f"dump commitlog, {rows:,} rows of 1 KB messages from {store}")
    if warm:
        for fmt, body in FORMATS.values():
            dump(store, fmt, 1000, body)
    launched: dict[str, list[Launched]] = {name: [] for name in FORMATS}
    measured = runs.rounds({name: timed_dump(store, fmt, rows, body, launched[name])
                            for name, (fmt, body) in FORMATS.items()}, rounds)
    results = {}
    for name, (fmt, body) in FORMATS.items():
        third = dump(store, fmt, rows // 3, body)
        cpu = statistics.median(r.cpu for r in launched[name])
        peak = max(r.peak for r in launched[name])
        results[name] = {"wall_rate": rows / measured[name].median, "cpu_rate": rows / cpu, "rss": peak,
                         "rss_third": third.peak}
        print(f"  {name:<12} {rows / measured[name].median:>10,.0f} rows/s wall (min {rows / measured[name].max:,.0f}, "
              f"max {rows / measured[name].min:,.0f})  {rows / cpu:>10,.0f} rows/s CPU  "
              f"peak RSS {peak / MIB:6.1f} MiB ({rows // 3:,} rows: {third.peak / MIB:.1f} MiB)", flush=True)
    print(f"  {len(measured['jsonl'].seconds)} runs each, in turns; {measured.load_text}")
    growth = max(abs(r["rss"] - r["rss_third"]) for r in results.values()) / MIB
    results["runs"] = measured
    results["verdicts"] = [
        report(runs.rate_verdict("JSON Lines", measured, "jsonl", rows, ">=",
                                 TARGET_JSONL, " rows/s")),
        report(runs.rate_verdict("JSON Lines, --body base64", measured, "jsonl base64", rows,
                                 ">=", TARGET_BASE64, " rows/s")),
        report(runs.ratio_verdict("table / JSON Lines", measured, "jsonl", "table", ">=", TABLE_SHARE)),
        report(verdict(f"peak RSS, {rows:,} rows against {rows // 3:,} (largest difference of the formats)",
                       growth, "<=", RSS_SLACK_MIB, " MiB", digits=1)),
    ]
    return results
