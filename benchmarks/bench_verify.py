"""``rmqtool verify`` on the 1,000,000-message store, beside a raw read and the Java anchor loop.

The store is benchmarks/big_store.py's (1,000,000 x 1 KB messages, default sizes, 8
queues, one key each, index built; about 1.2 GB of records). Printed, in one run:

* the time to read every file of the store raw (read once to warm the page cache, then timed);
* the Java loop (benchmarks/java_loop.py: the broker's per-record recovery work, best of 3);
* ``rmqtool verify`` (commit log with CRC, consume queues, index, checkpoint, config) with
  ``--jobs 1`` and ``--jobs 2``, each in its own process (best of 2), as MB/s of commit log
  and as ratios to the raw read and to the Java loop, with the peak RSS of the verify
  process and of its largest worker;
* the same verify on a store a quarter the size, to show whether memory is flat in size.

Target (issue 8): verify with 2 jobs no slower than 2x the Java loop (the real 4.9.8
broker's abnormal recovery of such a store, consume queues and index rebuilt, takes
about 2x that loop), and memory flat in store size.
"""
from __future__ import annotations

import json
import pathlib
import resource
import subprocess
import sys
import time

from benchmarks import big_store, java_loop
from benchmarks.verdict import report, verdict

TARGET_JAVA_RATIO = 2.0
FLAT_RSS_GROWTH = 1.5  # the full store's peak RSS over the quarter store's: more is memory growing with size
QUARTER = big_store.MESSAGES // 4
QUARTER_NAME = "big-store-quarter"


def _child(argv: list[str]) -> None:
    """Run the rmqtool CLI in this process; print its wall time and peak RSS (own and workers')."""
    from rmqtool.cli.app import app

    started = time.perf_counter()
    try:  # without standalone mode click returns the exit code a command raised
        code = app(argv, standalone_mode=False) or 0
    except SystemExit as exc:
        code = exc.code or 0
    wall = time.perf_counter() - started
    hwm = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) * 1024
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps({"code": code, "seconds": wall, "rss": hwm, "worker_rss": workers}), file=sys.stderr)


def run_verify(store: pathlib.Path, jobs: int, options: tuple[str, ...] = ()) -> dict:
    """One verify of ``store`` with ``jobs`` processes (and ``options``) in a fresh interpreter; its timing line."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_verify", "verify", str(store),
                           "--jobs", str(jobs), "--no-progress", "--format", "jsonl", *options],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    try:
        result = json.loads(last)
    except ValueError:
        raise RuntimeError(f"verify failed: {done.stderr.strip()[-500:]}") from None
    result["errors"] = sum(1 for line in done.stdout.splitlines() if '"severity":"error"' in line)
    return result


def best_verify(store: pathlib.Path, jobs: int, rounds: int = 2, options: tuple[str, ...] = ()) -> dict:
    return min((run_verify(store, jobs, options) for _ in range(rounds)), key=lambda r: r["seconds"])


def time_raw_read(store: pathlib.Path) -> tuple[int, float]:
    files = big_store.data_files(store)
    big_store.raw_read(files)  # warm the page cache
    started = time.perf_counter()
    size = big_store.raw_read(files)
    return size, time.perf_counter() - started


def peak_rss(result: dict) -> int:
    """The larger of the verify process's peak RSS and its largest worker's."""
    return max(result["rss"], result["worker_rss"])


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def run(workdir: pathlib.Path, messages: int = big_store.MESSAGES, commitlog_size: int | None = None,
        quarter: int | None = QUARTER, rounds: int = 2, java_rounds: int = 3) -> dict:
    workdir = pathlib.Path(workdir)
    store = big_store.ensure(workdir, messages, commitlog_size)
    log_bytes = big_store.max_offset(store)
    size, raw = time_raw_read(store)
    print(f"verify: store {store}: {messages:,} messages, {log_bytes / 1e6:,.0f} MB of records, "
          f"{size / 1e6:,.0f} MB of files; raw read {raw:.2f} s ({size / 1e6 / raw:,.0f} MB/s)")
    classes = java_loop.compile_loop(workdir)
    java = java_loop.best_of(classes, store / "commitlog", java_rounds)
    if java.messages != messages:
        raise RuntimeError(f"the Java loop read {java.messages} messages of {messages}")
    print(f"verify: Java loop (hop, field checks, properties map, body CRC) {java.seconds:.2f} s "
          f"({log_bytes / 1e6 / java.seconds:,.0f} MB/s)")
    out = {"raw": raw, "java": java.seconds}
    for jobs in (1, 2):
        r = best_verify(store, jobs, rounds)
        if r["code"] not in (0, 3) or r["errors"]:
            raise RuntimeError(f"verify --jobs {jobs} on the clean bench store: exit {r['code']}, "
                               f"{r['errors']} errors")
        out[f"jobs{jobs}"] = r
        print(f"verify --jobs {jobs}: {r['seconds']:.2f} s ({log_bytes / 1e6 / r['seconds']:,.0f} MB/s), "
              f"{r['seconds'] / raw:.1f}x the raw read, {r['seconds'] / java.seconds:.1f}x the Java loop; "
              f"peak RSS {_mib(r['rss'])} (largest worker {_mib(r['worker_rss'])})")
    out["verdicts"] = [report(verdict("verify --jobs 2 / Java loop", out["jobs2"]["seconds"] / java.seconds, "<=",
                                      TARGET_JAVA_RATIO, "x"))]
    if quarter:
        small = big_store.ensure(workdir, quarter, commitlog_size, name=QUARTER_NAME)
        r = best_verify(small, 2, 1)
        out["quarter"] = r
        print(f"verify --jobs 2 on {quarter:,} messages: peak RSS {_mib(r['rss'])} (largest worker "
              f"{_mib(r['worker_rss'])})")
        out["verdicts"].append(report(verdict(
            f"verify --jobs 2 peak RSS, {messages:,} messages over {quarter:,} (memory flat in store size)",
            peak_rss(out["jobs2"]) / peak_rss(r), "<=", FLAT_RSS_GROWTH, "x")))
    return out


if __name__ == "__main__":
    _child(sys.argv[1:])
