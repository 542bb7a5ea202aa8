"""``rmqtool verify`` on a 1,000,000-message QMQ store, beside a Java loop doing QMQ's own
per-record check (benchmarks/java/QmqValidate.java: magic, lengths, payload CRC, as
MessageLogSegmentValidator does), timed in the same run.

Target (issue 23): QMQ verify within 2x that loop.
"""
from __future__ import annotations

import pathlib

from benchmarks import java_loop, qmq_store
from benchmarks.bench_verify import best_verify
from benchmarks.verdict import report, verdict

TARGET_JAVA_RATIO = 2.0
SOURCE = pathlib.Path(__file__).resolve().parent / "java" / "QmqValidate.java"


def run(workdir: pathlib.Path, messages: int = qmq_store.MESSAGES, rounds: int = 2, java_rounds: int = 3) -> dict:
    workdir = pathlib.Path(workdir)
    store = qmq_store.ensure(workdir, messages)
    log_bytes = qmq_store.written_end(store)
    classes = java_loop.compile_loop(workdir, SOURCE)
    java = java_loop.best_of(classes, store / "messagelog", java_rounds, main="QmqValidate")
    if java.messages != messages:
        raise RuntimeError(f"the Java loop read {java.messages} records of {messages}")
    print(f"qmq verify: Java loop (magic, lengths, payload CRC) over {messages:,} records, "
          f"{log_bytes / 1e6:,.0f} MB: {java.seconds:.2f} s")
    r = best_verify(store, 1, rounds)
    if r["code"] != 0 or r["errors"]:
        raise RuntimeError(f"qmq verify on the clean bench store: exit {r['code']}, {r['errors']} errors")
    print(f"qmq verify: {r['seconds']:.2f} s ({log_bytes / 1e6 / r['seconds']:,.0f} MB/s), "
          f"{r['seconds'] / java.seconds:.1f}x the Java loop")
    return {"java": java.seconds, "verify": r, "verdicts": [report(verdict(
        "qmq verify / Java loop", r["seconds"] / java.seconds, "<=", TARGET_JAVA_RATIO, "x"))]}
