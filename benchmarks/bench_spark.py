"""``rmqtool spark export`` on one generated multi-segment store: one plain process
running the same export tasks in turn, then Spark local[1] and local[2], messages/s each.

Targets (issue 11): local[2] >= 1.8x local[1] (the second core is used), and local[2] >=
1.5x the single process (Spark's overhead does not eat the second core). A fresh Spark
session per mode (its start is timed apart, not in the rates); best of ``rounds``.
"""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

from benchmarks import big_store

MESSAGES = 400_000
SEGMENT = 64 << 20  # several segments, several tasks each
SPLIT = 32 << 20
TARGET_CORES = 1.8
TARGET_PROCESS = 1.5

_CHILD = r"""
import json, shutil, sys, time
mode, store, out, split, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
from rmqtool.spark.stores import StoreSpec
from rmqtool.spark.export import export, export_queues_task, export_segment_task, check_out_dir
from rmqtool.spark.splits import plan_tasks
specs = [StoreSpec("bench", store)]
best, started = None, time.perf_counter()
session = None
if mode != "process":
    from rmqtool.spark.session import spark_session
    session = spark_session(mode, {"spark.driver.memory": "1g"})
session_s = time.perf_counter() - started
for _ in range(rounds):
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    if session is None:
        check_out_dir(out)
        messages = sum(export_segment_task(task, out).messages for task in plan_tasks(specs, split))
        export_queues_task(specs[0], out)
    else:
        messages = export(session, specs, out, split_size=split).messages
    took = time.perf_counter() - t
    best = took if best is None else min(best, took)
shutil.rmtree(out, ignore_errors=True)
print(json.dumps({"seconds": best, "messages": messages, "session": session_s}))
"""


def _run(mode: str, store: pathlib.Path, out: pathlib.Path, rounds: int) -> dict:
    import json
    p = subprocess.run([sys.executable, "-c", _CHILD, mode, str(store), str(out), str(SPLIT), str(rounds)],
                       capture_output=True, text=True, timeout=1800)
    if p.returncode:
        raise RuntimeError(f"{mode}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def run(workdir: pathlib.Path, messages: int = MESSAGES, commitlog_size: int = SEGMENT, rounds: int = 2) -> dict:
    store = big_store.ensure(workdir, messages, commitlog_size, name="spark-store")
    out = pathlib.Path(workdir) / "spark-export"
    shutil.rmtree(out, ignore_errors=True)
    rates = {}
    for mode in ("process", "local[1]", "local[2]"):
        r = _run(mode, store, out, rounds)
        rates[mode] = r["messages"] / r["seconds"]
        extra = f" (session start {r['session']:.1f} s, not counted)" if mode != "process" else ""
        print(f"spark export {mode:<9} {r['messages']:,} messages in {r['seconds']:.2f} s: "
              f"{rates[mode]:,.0f} messages/s{extra}", flush=True)
    cores = rates["local[2]"] / rates["local[1]"]
    process = rates["local[2]"] / rates["process"]
    print(f"local[2] / local[1]: {cores:.2f}x (target >= {TARGET_CORES}x: {'PASS' if cores >= TARGET_CORES else 'MISS'})")
    print(f"local[2] / one process: {process:.2f}x (target >= {TARGET_PROCESS}x: "
          f"{'PASS' if process >= TARGET_PROCESS else 'MISS'})")
    return rates
