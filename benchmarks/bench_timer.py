"""``rmqtool verify --only timer`` on a 5.x store with 1,000,000 timer units, beside a Java loop
doing the broker's own per-unit work over the same files (benchmarks/java/TimerValidate.java),
timed in the same run.

The judged loop is ``TimerValidate --dequeue-reads``: recover's walk of the timer log with each
unit's chain link, every used wheel slot's chain walked as dequeue walks it, and each unit's
message read as dequeue's get service reads it (getMessageByCommitOffset: getData and
MessageDecoder.decode), checked against its unit. That last part is the engine's per-unit check
of a unit against its record, which verify does too (every unit's offsetPy/sizePy a
rmq_sys_wheel_timer record of the real topic's hash). The same loop without the reads (the
baseline of the fourth round and before) is timed beside it and its ratio printed, not judged;
so is RecoveryScan over the store's commit log (verify also simulates the message store's
recovery walk).

The store is benchmarks/timer_store.py's (1,000,000 pending timer messages in
``rmq_sys_wheel_timer``, their units in a 16 MiB-file timer log, about 100,000 used slots).
verify's next start is put after the last write and before the first deliver time (``--now``),
so nothing is due: what is timed is the timer store's load and recover simulated, the run's
chain walks, and every unit checked against its commit log record. verify runs with
``--jobs 2``, its default on this machine kind (every CPU): a worker reads the units' records
while the recovery walk runs.

The loops and verify run in turns, at least 3 times each (benchmarks/runs.py: the ratio of
the medians, each round's lowest and highest ratio, the load average).

Targets: the timer verify at most 1.0x that loop (issue 27), and within 2x (issue 22's own line).
"""
from __future__ import annotations

import pathlib
import statistics

from benchmarks import runs, timer_store
from benchmarks.bench_verify import peak_rss, timed_java, timed_verify
from benchmarks.launch import MIB
from benchmarks.java_loop import compile_loop
from benchmarks.verdict import report

TARGET_JAVA_RATIO = 1.0  # issue 27
TARGET_ISSUE22 = 2.0
SOURCE = pathlib.Path(__file__).resolve().parent / "java" / "TimerValidate.java"


JOBS = 2  # verify's default on this machine kind: every CPU


def run(workdir: pathlib.Path, messages: int = timer_store.MESSAGES, rounds: int = runs.MIN_ROUNDS) -> dict:
    workdir = pathlib.Path(workdir)
    store = timer_store.ensure(workdir, messages)
    facts = timer_store.facts(store)
    classes = compile_loop(workdir, SOURCE)
    scan_classes = compile_loop(workdir)  # RecoveryScan, for the line not judged below
    results: list = []
    measured = runs.rounds({
        "java": timed_java(classes, store, messages, main="TimerValidate", args=("--dequeue-reads",)),
        "java_units": timed_java(classes, store, messages, main="TimerValidate"),
        "store_scan": timed_java(scan_classes, store / "commitlog", facts["written_end"] // facts["record_size"]),
        "verify": timed_verify(store, JOBS, results, ("--only", "timer", "--now", str(facts["now_ms"])), codes=(0,))},
        rounds)
    print(f"timer verify: Java loop (timer log units and chain links as recover reads them, every used slot's "
          f"chain as dequeue walks it, each unit's message as dequeue reads and decodes it) over {messages:,} "
          f"units, {facts['used_slots']:,} slots: {measured['java'].text()}")
    verify = measured["verify"]
    print(f"timer verify --jobs {JOBS}: {verify.text()} ({messages / verify.median:,.0f} units/s); "
          f"peak RSS {peak_rss(results) / MIB:,.0f} MiB")
    # Not judged: the loop without the messages read (the fourth round's baseline), and with
    # RecoveryScan over the store's commit log beside it (verify also simulates its recovery walk)
    units = measured["java_units"]
    both = [a + b for a, b in zip(units.seconds, measured["store_scan"].seconds)]
    print(f"timer verify: the same loop without the messages read {units.text()}; verify / it, not judged: "
          f"{_ratio_text(verify.seconds, units.seconds)}")
    print(f"timer verify: RecoveryScan over the store's commit log {measured['store_scan'].text()}; "
          f"verify / (the loop without the reads + RecoveryScan), not judged: {_ratio_text(verify.seconds, both)}")
    verdicts = [report(runs.ratio_verdict("timer verify / Java loop (issue 27)", measured, "verify", "java", "<=",
                                          TARGET_JAVA_RATIO)),
                report(runs.ratio_verdict("timer verify / Java loop (issue 22)", measured, "verify", "java", "<=",
                                          TARGET_ISSUE22))]
    return {"java": measured["java"], "verify": verify, "runs": results, "facts": facts, "verdicts": verdicts}


def _ratio_text(top: list[float], bottom: list[float]) -> str:
    per_round = [a / b for a, b in zip(top, bottom)]
    return (f"{statistics.median(top) / statistics.median(bottom):.2f}x (a round's ratio min {min(per_round):.2f}x, "
            f"max {max(per_round):.2f}x)")
