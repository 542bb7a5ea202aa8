"""Cost grows with the data, not the file sizes: ``verify`` and ``dump`` on a 4,000,000-message
store against the 1,000,000-message one (issue 27).

Both stores are benchmarks/big_store.py's (1 KB messages, the broker's default sizes, 8
queues, index built): ``big-store`` and ``big-store-4m`` (about 4.8 GB, built once under the
work directory; the first run takes a while). Timed, each as its own process started
through benchmarks/launch.py (its own peak RSS), in turns, at least 3 times each
(benchmarks/runs.py): ``verify --jobs 2`` (the command's time, from its arguments to its
last finding) and ``dump commitlog --format jsonl --body none`` of every row to /dev/null
(the whole process).

Targets: each command's median on the big store at most 4.4x its median on the small one
(10% over the data's 4x); each command's peak RSS under 128 MiB on both stores.
"""
from __future__ import annotations

import pathlib

from benchmarks import big_store, runs
from benchmarks.bench_output import timed_dump
from benchmarks.bench_verify import peak_rss, timed_verify
from benchmarks.launch import MIB
from benchmarks.verdict import report, verdict

BIG = 4 * big_store.MESSAGES
BIG_NAME = "big-store-4m"
TARGET_GROWTH = 4.4  # x the small store's time, for 4x the messages
TARGET_RSS_MIB = 128
JOBS = 2


def run(workdir: pathlib.Path, small: int = big_store.MESSAGES, big: int = BIG, commitlog_size: int | None = None,
        rounds: int = runs.MIN_ROUNDS, big_name: str = BIG_NAME) -> dict:
    workdir = pathlib.Path(workdir)
    stores = {"small": big_store.ensure(workdir, small, commitlog_size),
              "big": big_store.ensure(workdir, big, commitlog_size, name=big_name)}
    for store in stores.values():  # the page cache warm for the first timed run as for the others
        big_store.raw_read(big_store.data_files(store))
    counts = {"small": small, "big": big}
    kept: dict[str, list] = {}
    sides = {}
    for size, store in stores.items():
        kept[f"verify {size}"] = []
        kept[f"dump {size}"] = []
        sides[f"verify {size}"] = timed_verify(store, JOBS, kept[f"verify {size}"])
        sides[f"dump {size}"] = timed_dump(store, "jsonl", None, "none", kept[f"dump {size}"])
    measured = runs.rounds(sides, rounds)
    verdicts = []
    for command in ("verify", "dump"):
        for size in ("small", "big"):
            print(f"{command} on {counts[size]:,} messages: {measured[f'{command} {size}'].text()}", flush=True)
        label = (f"verify --jobs {JOBS}" if command == "verify" else "dump commitlog --format jsonl --body none")
        verdicts.append(report(runs.ratio_verdict(
            f"{label}, {big:,} messages / {small:,}", measured, f"{command} big", f"{command} small",
            "<=", TARGET_GROWTH)))
    for command in ("verify", "dump"):
        for size in ("small", "big"):
            results = kept[f"{command} {size}"]
            peak = peak_rss(results) if command == "verify" else max(r.peak for r in results)
            verdicts.append(report(verdict(f"{command} peak RSS on {counts[size]:,} messages",
                                           peak / MIB, "<=", TARGET_RSS_MIB, " MiB", digits=1)))
    return {"runs": measured, "kept": kept, "verdicts": verdicts}
