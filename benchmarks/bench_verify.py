"""``rmqtool verify`` on the 1,000,000-message store, beside a raw read and the Java anchor loop.

The store is benchmarks/big_store.py's (1,000,000 x 1 KB messages, default sizes, 8
queues, one key each, index built; about 1.2 GB of records). Printed, in one run:

* the time to read every file of the store raw (read once to warm the page cache, then timed);
* the Java loop (benchmarks/java_loop.py: the broker's per-record recovery work), and
  ``rmqtool verify`` (commit log with CRC, consume queues, index, checkpoint, config) with
  ``--jobs 1`` and ``--jobs 2``, each in its own process, the three in turns
  (benchmarks/runs.py: median of at least 3 runs, min and max, the load average), as MB/s of
  commit log and as ratios to the raw read and to the Java loop; verify's time is the
  command's, from its arguments to its last finding (the interpreter's start left out, as
  the JVM's is), its peak RSS the process's own (benchmarks/launch.py);
* the same verify on a store a quarter the size, to show whether memory is flat in size.

Targets (issue 27): verify --jobs 2 at most 1.0x the Java loop, --jobs 1 at most 2.0x; the
full store's peak RSS at most 1.5x the quarter store's.
"""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time
from typing import Callable

from benchmarks import big_store, java_loop, runs
from benchmarks.launch import MIB, launch
from benchmarks.verdict import report, verdict

TARGET_JOBS2 = 1.0  # x the Java loop
TARGET_JOBS1 = 2.0
FLAT_RSS_GROWTH = 1.5  # the full store's peak RSS over the quarter store's: more is memory growing with size
QUARTER = big_store.MESSAGES // 4
QUARTER_NAME = "big-store-quarter"


def _child(argv: list[str]) -> None:
    """Run the rmqtool CLI in this process; print its wall time (from its arguments to its end)."""
    from rmqtool.cli.app import app

    started = time.perf_counter()
    try:  # without standalone mode click returns the exit code a command raised
        code = app(argv, standalone_mode=False) or 0
    except SystemExit as exc:
        code = exc.code or 0
    wall = time.perf_counter() - started
    sys.stdout.flush()
    print(json.dumps({"code": code, "seconds": wall}), file=sys.stderr)


def run_verify(store: pathlib.Path, jobs: int, options: tuple[str, ...] = ()) -> dict:
    """One verify of ``store`` with ``jobs`` processes (and ``options``) in a fresh interpreter, through
    the launcher: its exit code, seconds, CPU seconds, peak RSS (bytes) and error findings."""
    done = launch([sys.executable, "-m", "benchmarks.bench_verify", "verify", str(store), "--jobs", str(jobs),
                   "--no-progress", "--format", "jsonl", *options], stdout=subprocess.PIPE, check=False)
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    try:
        result = json.loads(last)
    except ValueError:
        raise RuntimeError(f"verify failed: {done.stderr.strip()[-500:]}") from None
    result.update(cpu=done.cpu, rss=done.peak,
                  errors=sum(1 for line in done.stdout.splitlines() if '"severity":"error"' in line))
    return result


def timed_verify(store: pathlib.Path, jobs: int, results: list, options: tuple[str, ...] = (),
                 codes: tuple[int, ...] = (0, 3)) -> Callable[[], float]:
    """A side for :func:`runs.rounds`: one verify, its seconds; each run's result kept in ``results``.
    A run with an error finding, or an exit code not in ``codes``, is not a timing of a clean store."""
    def measure() -> float:
        r = run_verify(store, jobs, options)
        if r["code"] not in codes or r["errors"]:
            raise RuntimeError(f"verify --jobs {jobs} {' '.join(options)} of the clean bench store {store}: "
                               f"exit {r['code']}, {r['errors']} errors")
        results.append(r)
        return r["seconds"]
    return measure


def timed_java(classes: pathlib.Path, directory: pathlib.Path, messages: int, main: str = "RecoveryScan",
               args: tuple[str, ...] = ()) -> Callable[[], float]:
    """A side for :func:`runs.rounds`: one run of a Java loop, its seconds inside the JVM."""
    def measure() -> float:
        scan = java_loop.run_loop(classes, directory, main, args)
        if scan.messages != messages:
            raise RuntimeError(f"the Java loop {main} read {scan.messages} records of {messages}")
        return scan.seconds
    return measure


def time_raw_read(store: pathlib.Path) -> tuple[int, float]:
    files = big_store.data_files(store)
    big_store.raw_read(files)  # warm the page cache
    started = time.perf_counter()
    size = big_store.raw_read(files)
    return size, time.perf_counter() - started


def peak_rss(results: list[dict]) -> int:
    """The highest peak RSS of some runs (bytes): the largest process, verify's or a worker's."""
    return max(r["rss"] for r in results)


def _mib(n: int) -> str:
    return f"{n / MIB:,.0f} MiB"


def run(workdir: pathlib.Path, messages: int = big_store.MESSAGES, commitlog_size: int | None = None,
        quarter: int | None = QUARTER, rounds: int = runs.MIN_ROUNDS) -> dict:
    workdir = pathlib.Path(workdir)
    store = big_store.ensure(workdir, messages, commitlog_size)
    log_bytes = big_store.max_offset(store)
    size, raw = time_raw_read(store)
    print(f"verify: store {store}: {messages:,} messages, {log_bytes / 1e6:,.0f} MB of records, "
          f"{size / 1e6:,.0f} MB of files; raw read {raw:.2f} s ({size / 1e6 / raw:,.0f} MB/s)")
    classes = java_loop.compile_loop(workdir)
    results: dict[str, list] = {"jobs1": [], "jobs2": []}
    measured = runs.rounds({"java": timed_java(classes, store / "commitlog", messages),
                            "jobs1": timed_verify(store, 1, results["jobs1"]),
                            "jobs2": timed_verify(store, 2, results["jobs2"])}, rounds)
    java = measured["java"]
    print(f"verify: Java loop (hop, field checks, properties map, body CRC) {java.text()} "
          f"({log_bytes / 1e6 / java.median:,.0f} MB/s)")
    out = {"raw": raw, "java": java, "runs": results, "load": (measured.load_before, measured.load_after)}
    for jobs in (1, 2):
        r = measured[f"jobs{jobs}"]
        out[f"jobs{jobs}"] = r
        cpu = sorted(x["cpu"] for x in results[f"jobs{jobs}"])
        print(f"verify --jobs {jobs}: {r.text()} ({log_bytes / 1e6 / r.median:,.0f} MB/s), "
              f"{r.median / raw:.1f}x the raw read; CPU {cpu[len(cpu) // 2]:.2f} s (median); "
              f"peak RSS {_mib(peak_rss(results[f'jobs{jobs}']))} (largest process)")
    out["verdicts"] = [
        report(runs.ratio_verdict("verify --jobs 2 / Java loop", measured, "jobs2", "java", "<=",
                                  TARGET_JOBS2)),
        report(runs.ratio_verdict("verify --jobs 1 / Java loop", measured, "jobs1", "java", "<=",
                                  TARGET_JOBS1))]
    if quarter:
        small = big_store.ensure(workdir, quarter, commitlog_size, name=QUARTER_NAME)
        quarter_runs: list = []
        timed_verify(small, 2, quarter_runs)()
        out["quarter"] = quarter_runs
        print(f"verify --jobs 2 on {quarter:,} messages: peak RSS {_mib(peak_rss(quarter_runs))} (largest process)")
        out["verdicts"].append(report(verdict(
            f"verify --jobs 2 peak RSS, {messages:,} messages over {quarter:,} (memory flat in store size)",
            peak_rss(results["jobs2"]) / peak_rss(quarter_runs), "<=", FLAT_RSS_GROWTH, "x")))
    return out


if __name__ == "__main__":
    _child(sys.argv[1:])
