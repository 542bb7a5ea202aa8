"""``rmqtool spark export`` on one generated multi-segment store: one plain process
running the same export tasks in turn, then Spark local[1] and local[2], messages/s each.

Targets (issue 11): local[2] >= 1.8x local[1] (the second core is used), and local[2] >=
1.5x the single process (Spark's overhead does not eat the second core). A fresh Spark
session per mode, each in its own interpreter and JVM (its start is timed apart, not in
the rates), running the export ``rounds`` times (at least 3 in the bench); a rate is over
the median run, and a ratio's verdict is the ratio of the medians, with the lowest and
highest ratio of the n-th runs of the two modes and the load average beside it
(benchmarks/runs.py). Every mode must export every message of the store.
"""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

from benchmarks import big_store, runs
from benchmarks.verdict import report

MESSAGES = 400_000
SEGMENT = 64 << 20  # several segments, several tasks each
SPLIT = 32 << 20
MODES = ("process", "local[1]", "local[2]")
TARGET_CORES = 1.8
TARGET_PROCESS = 1.5

# One interpreter runs the modes it is given in turn and prints a JSON line for each. A
# Spark session is stopped before the next mode's starts: later sessions reuse the JVM
# the first one launched (pyspark keeps its gateway), so only the first pays its start.
_CHILD = r"""
import json, shutil, sys, time
store, out, split, rounds, modes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
from rmqtool.spark.stores import StoreSpec
from rmqtool.spark.export import export, export_queues_task, export_segment_task, check_out_dir
from rmqtool.spark.splits import plan_tasks
specs = [StoreSpec("bench", store)]
for mode in modes:
    times, started = [], time.perf_counter()
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
        times.append(time.perf_counter() - t)
    if session is not None:
        session.stop()
    shutil.rmtree(out, ignore_errors=True)
    print(json.dumps({"mode": mode, "seconds": times, "messages": messages, "session": session_s}), flush=True)
"""


def _run(modes: tuple[str, ...], store: pathlib.Path, out: pathlib.Path, rounds: int) -> list[dict]:
    """The modes run in turn in one fresh interpreter; one result a mode."""
    p = subprocess.run([sys.executable, "-c", _CHILD, str(store), str(out), str(SPLIT), str(rounds), *modes],
                       capture_output=True, text=True, timeout=1800)
    if p.returncode:
        raise RuntimeError(f"{', '.join(modes)}: "
                           f"{p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def run(workdir: pathlib.Path, messages: int = MESSAGES, commitlog_size: int = SEGMENT, rounds: int = runs.MIN_ROUNDS,
        one_interpreter: bool = False) -> dict:
    """Rates, exported message counts and verdicts. ``one_interpreter`` runs every mode in one
    process and JVM (cheaper, for tests); the bench gives each mode a fresh one."""
    store = big_store.ensure(workdir, messages, commitlog_size, name="spark-store")
    out = pathlib.Path(workdir) / "spark-export"
    shutil.rmtree(out, ignore_errors=True)
    results = []
    load_before = runs.load_average()
    for modes in ([MODES] if one_interpreter else [(mode,) for mode in MODES]):
        for r in _run(modes, store, out, rounds):
            results.append(r)
            took = runs.Runs(tuple(r["seconds"]))
            extra = f" (session start {r['session']:.1f} s, not counted)" if r["mode"] != "process" else ""
            print(f"spark export {r['mode']:<9} {r['messages']:,} messages in {took.text()}: "
                  f"{r['messages'] / took.median:,.0f} messages/s{extra}", flush=True)
    exported = {r["mode"]: r["messages"] for r in results}
    if exported != {mode: messages for mode in MODES}:  # a rate of the wrong export means nothing
        raise RuntimeError(f"spark export of the {messages:,}-message bench store exported {exported}")
    measured = runs.Rounds({r["mode"]: runs.Runs(tuple(r["seconds"])) for r in results}, load_before,
                           runs.load_average())
    rates = {mode: messages / measured[mode].median for mode in MODES}
    # the same messages each: a rate's ratio is the inverse ratio of the times
    verdicts = [report(runs.ratio_verdict("local[2] / local[1]", measured, "local[1]", "local[2]", ">=",
                                          TARGET_CORES)),
                report(runs.ratio_verdict("local[2] / one process", measured, "process", "local[2]", ">=",
                                          TARGET_PROCESS))]
    return {"rates": rates, "runs": measured, "exported": exported, "verdicts": verdicts}
