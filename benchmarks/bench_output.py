"""Output speed (issue 10): ``dump commitlog --body none`` as a table, JSON Lines and JSON.

Input: the 1,000,000-message store of 1 KB bodies (``benchmarks/big_store.py``, built once
under the work directory). Each format runs as its own ``rmqtool`` process (the real CLI,
interpreter start included) writing ROWS rows to /dev/null; its peak RSS comes from
``os.wait4``. Rates are rows over the process's wall time, and over its CPU time (user +
system: what the process itself spent, whatever else runs on the machine). Peak RSS is
also taken at a third of the rows: the same peak at both counts shows memory flat in rows.

Targets: JSON Lines at least 300,000 rows/s; a table at least a third of that; JSON (one
array, streamed) with the same peak RSS at ROWS/3 and ROWS rows.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

from benchmarks import big_store
from benchmarks.verdict import report, verdict

ROWS = 300_000
TARGET_JSONL = 300_000  # rows/s
TABLE_SHARE = 1 / 3  # of JSON Lines' rate
RSS_SLACK_KIB = 8 << 10  # peaks within 8 MiB count as flat
TABLE_WIDTH = "120"


def dump(store: pathlib.Path, fmt: str, rows: int) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS KiB) of one ``rmqtool dump commitlog`` process."""
    env = dict(os.environ, COLUMNS=TABLE_WIDTH)
    cmd = [sys.executable, "-m", "rmqtool", "dump", "commitlog", str(store), "--format", fmt, "--body", "none",
           "--limit", str(rows), "--no-progress"]
    with open(os.devnull, "wb") as sink:
        started = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - started
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def run(workdir: pathlib.Path, messages: int = big_store.MESSAGES, commitlog_size: int | None = None,
        rows: int = ROWS, warm: bool = True) -> dict:
    """Each format's rates and peak RSS, and the verdicts. ``warm`` first runs each format
    once on a few rows (page cache, imports): the timings need it, a test of the lines not."""
    store = big_store.ensure(workdir, messages, commitlog_size)
    print(f"dump commitlog --body none, {rows:,} rows of 1 KB messages from {store}")
    results = {}
    for fmt in ("jsonl", "table", "json"):
        if warm:
            dump(store, fmt, 1000)  # page cache and imports warm
        wall, cpu, rss = dump(store, fmt, rows)
        _, _, rss_small = dump(store, fmt, rows // 3)
        results[fmt] = {"wall_rate": rows / wall, "cpu_rate": rows / cpu, "rss_kib": rss, "rss_third_kib": rss_small}
        print(f"  {fmt:<6} {rows / wall:>10,.0f} rows/s wall  {rows / cpu:>10,.0f} rows/s CPU  "
              f"peak RSS {rss / 1024:6.1f} MiB ({rows // 3:,} rows: {rss_small / 1024:.1f} MiB)", flush=True)
    jsonl_rate = results["jsonl"]["wall_rate"]
    print(f"  JSON Lines by CPU time: {results['jsonl']['cpu_rate']:,.0f} rows/s")
    growth = max(abs(r["rss_kib"] - r["rss_third_kib"]) for r in results.values()) / 1024
    results["verdicts"] = [
        report(verdict("JSON Lines", jsonl_rate, ">=", TARGET_JSONL, " rows/s", digits=0)),
        report(verdict("table / JSON Lines", results["table"]["wall_rate"] / jsonl_rate, ">=", TABLE_SHARE, "x")),
        report(verdict(f"peak RSS, {rows:,} rows against {rows // 3:,} (largest difference of the three formats)",
                       growth, "<=", RSS_SLACK_KIB / 1024, " MiB", digits=1)),
    ]
    return results
