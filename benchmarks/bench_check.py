"""``rmqtool check`` on the 1,000,000-message bench store (benchmarks/big_store.py): the probe
reads tails and headers only, so its time does not grow with the store.

Target (issue 24): under 0.2 s, the library call timed in process (best of ``rounds``).
"""
from __future__ import annotations

import pathlib
import time

from benchmarks import big_store
from benchmarks.verdict import report, verdict

TARGET_SECONDS = 0.2


def best_check(store: pathlib.Path, rounds: int) -> tuple[float, object]:
    from rmqtool.inspect.check import run_check

    times, result = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        result = run_check([store], now=big_store.T0)
        times.append(time.perf_counter() - started)
    return min(times), result


def run(workdir: pathlib.Path, messages: int = big_store.MESSAGES, rounds: int = 5) -> dict:
    store = big_store.ensure(pathlib.Path(workdir), messages)
    seconds, result = best_check(store, rounds)
    (checked,) = result.stores
    written = next(m.value for m in checked.measures if m.measure == "written_end")
    invalid = None if written == big_store.max_offset(store) else f"written end {written} is not the store's"
    print(f"check: {result.status_line()[:120]}")
    print(f"check ({messages:,} messages, {written / 1e6:,.0f} MB of commit log): {seconds * 1000:.0f} ms")
    return {"seconds": seconds, "result": result, "verdicts": [report(verdict(
        "check on the bench store", seconds, "<=", TARGET_SECONDS, " s", digits=3, invalid=invalid))]}
