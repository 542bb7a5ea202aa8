"""``rmqtool check`` on the 1,000,000-message bench store (benchmarks/big_store.py): the probe
reads tails and headers only, so its time does not grow with the store.

Target (issues 24 and 27): under 0.2 s, the library call timed in process: the median of
``rounds`` runs (at least 3 in the bench), min and max and the load average beside it.
"""
from __future__ import annotations

import pathlib
import time

from benchmarks import big_store, runs
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
    return {"seconds": measured["check"].median, "runs": measured, "result": result, "verdicts": [report(v)]}
