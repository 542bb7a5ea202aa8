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


def _mark(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def run(workdir: pathlib.Path) -> None:
    store = big_store.ensure(workdir)
    print(f"dump commitlog --body none, {ROWS:,} rows of 1 KB messages from {store}")
    results = {}
    for fmt in ("jsonl", "table", "json"):
        dump(store, fmt, 1000)  # page cache and imports warm
        wall, cpu, rss = dump(store, fmt, ROWS)
        _, _, rss_small = dump(store, fmt, ROWS // 3)
        results[fmt] = (ROWS / wall, ROWS / cpu, rss, rss_small)
        print(f"  {fmt:<6} {ROWS / wall:>10,.0f} rows/s wall  {ROWS / cpu:>10,.0f} rows/s CPU  "
              f"peak RSS {rss / 1024:6.1f} MiB ({ROWS // 3:,} rows: {rss_small / 1024:.1f} MiB)", flush=True)
    jsonl_rate = results["jsonl"][0]
    print(f"  JSON Lines >= {TARGET_JSONL:,} rows/s: {_mark(jsonl_rate >= TARGET_JSONL)} "
          f"({jsonl_rate:,.0f}; CPU {results['jsonl'][1]:,.0f})")
    share = results["table"][0] / jsonl_rate
    print(f"  table >= 1/3 of JSON Lines: {_mark(share >= TABLE_SHARE)} ({share:.2f})")
    flat = all(abs(r[2] - r[3]) <= RSS_SLACK_KIB for r in results.values())
    print(f"  peak RSS flat in rows (within {RSS_SLACK_KIB >> 10} MiB): {_mark(flat)}")
