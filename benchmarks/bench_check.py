"""``rmqtool check`` on the 1,000,000-message bench store (benchmarks/big_store.py): the probe
reads tails and headers only, so its time does not grow with the store; and on the
1,000,000-message QMQ bench store (benchmarks/qmq_store.py), through QMQ's family tools.

Target (issues 24 and 27): under 0.2 s, the library call timed in process: the median of
``rounds`` runs (at least 3 in the bench), min and max and the load average beside it.
"""
from __future__ import annotations

import pathlib
import time

from benchmarks import big_store, qmq_store, runs
from benchmarks.verdict import report

TARGET_SECONDS = 0.2


def run(workdir: pathlib.Path, messages: int = big_store.MESSAGES, rounds: int = 5) -> dict:
    from rmqtool.inspect.check import run_check

    store = big_store.ensure(pathlib.Path(workdir), messages)
    results = []

    def check() -> float:
        started = time.perf_counter()
        results.append(run_check([store], now=big_store.T0))
        return time.perf_counter() - started

    measured = runs.rounds({"check": check}, rounds)
    result = results[-1]
    (checked,) = result.stores
    written = next(m.value for m in checked.measures if m.measure == "written_end")
    invalid = None if written == big_store.max_offset(store) else f"written end {written} is not the store's"
    print(f"check: {result.status_line()[:120]}")
    print(f"check ({messages:,} messages, {written / 1e6:,.0f} MB of commit log): {measured['check'].text()}")
    v = runs.median_verdict("check on the bench store", measured, "check", "<=", TARGET_SECONDS, digits=3,
                            invalid=invalid)
    qmq = _qmq(workdir, messages, rounds)
    return {"seconds": measured["check"].median, "runs": measured, "qmq_runs": qmq["runs"], "result": result,
            "qmq_result": qmq["result"], "verdicts": [report(v), qmq["verdict"]]}


def _qmq(workdir: pathlib.Path, messages: int, rounds: int) -> dict:
    """The same probe on the QMQ bench store (benchmarks/qmq_store.py), through QMQ's family tools
    as the command calls them; the same target."""
    from rmqtool.families import tools_at
    from rmqtool.inspect.check import run_check

    store = qmq_store.ensure(pathlib.Path(workdir), messages)
    results = []

    def check() -> float:
        started = time.perf_counter()
        results.append(run_check([store], now=0, check_one=lambda path, **kw: tools_at(path).check(path, **kw)))
        return time.perf_counter() - started

    measured = runs.rounds({"qmq check": check}, rounds)
    result = results[-1]
    (checked,) = result.stores
    written = next((m.value for m in checked.measures if m.measure == "written_end"), None)
    invalid = None if written == qmq_store.written_end(store) else f"written end {written} is not the store's"
    print(f"qmq check ({messages:,} messages, {written / 1e6:,.0f} MB of message log): {measured['qmq check'].text()}")
    v = runs.median_verdict("check on the QMQ bench store", measured, "qmq check", "<=", TARGET_SECONDS, digits=3,
                            invalid=invalid)
    return {"runs": measured, "result": result, "verdict": report(v)}
