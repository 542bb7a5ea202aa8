"""``rmqtool verify --only timer`` on a 5.x store with 1,000,000 timer units, beside a Java loop
doing the broker's own per-unit work over the same files (benchmarks/java/TimerValidate.java:
recover's walk of the timer log with each unit's chain link, then every used wheel slot's chain
walked as dequeue walks it), timed in the same run.

The store is benchmarks/timer_store.py's (1,000,000 pending timer messages in
``rmq_sys_wheel_timer``, their units in a 16 MiB-file timer log, about 100,000 used slots).
verify's next start is put after the last write and before the first deliver time (``--now``),
so nothing is due: what is timed is the timer store's load and recover simulated, the run's
chain walks, and every unit checked against its commit log record.

Target (issue 22): the timer verify within 2x that loop.
"""
from __future__ import annotations

import pathlib

from benchmarks import java_loop, timer_store
from benchmarks.bench_verify import best_verify
from benchmarks.verdict import report, verdict

TARGET_JAVA_RATIO = 2.0
SOURCE = pathlib.Path(__file__).resolve().parent / "java" / "TimerValidate.java"


def run(workdir: pathlib.Path, messages: int = timer_store.MESSAGES, rounds: int = 1, java_rounds: int = 3) -> dict:
    workdir = pathlib.Path(workdir)
    store = timer_store.ensure(workdir, messages)
    facts = timer_store.facts(store)
    classes = java_loop.compile_loop(workdir, SOURCE)
    java = java_loop.best_of(classes, store, java_rounds, main="TimerValidate")
    if java.messages != messages:
        raise RuntimeError(f"the Java loop read {java.messages} timer units of {messages}")
    print(f"timer verify: Java loop (timer log units and chain links as recover reads them, every used slot's "
          f"chain as dequeue walks it) over {messages:,} units, {facts['used_slots']:,} slots: {java.seconds:.2f} s")
    r = best_verify(store, 1, rounds, ("--only", "timer", "--now", str(facts["now_ms"])))
    if r["code"] != 0 or r["errors"]:
        raise RuntimeError(f"timer verify on the clean bench store: exit {r['code']}, {r['errors']} errors")
    print(f"timer verify: {r['seconds']:.2f} s ({messages / r['seconds']:,.0f} units/s), "
          f"{r['seconds'] / java.seconds:.1f}x the Java loop; peak RSS {r['rss'] / 2**20:,.0f} MiB")
    return {"java": java.seconds, "verify": r, "facts": facts, "verdicts": [report(verdict(
        "timer verify / Java loop", r["seconds"] / java.seconds, "<=", TARGET_JAVA_RATIO, "x"))]}
