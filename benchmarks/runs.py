"""A timed figure that says something (issue 27): the median of at least 3 runs, with min and
max beside it and the machine's load average around them.

:func:`rounds` times each side of a comparison (the code measured and its baseline) in
turns, A B A B ..., so a change in the machine's load falls on both; :class:`Runs` is one
side's timings; :func:`ratio_verdict` judges the ratio of two sides' medians and prints,
beside it, the lowest and highest ratio of a round and the load average before and after.
A bench line adopts this by timing its sides through :func:`rounds` and judging through
:func:`ratio_verdict` (or :meth:`Runs.text` beside a :func:`verdict.verdict` of its own).
"""
from __future__ import annotations

import dataclasses
import os
import statistics
from typing import Callable

from benchmarks.verdict import Verdict, verdict

MIN_ROUNDS = 3


@dataclasses.dataclass(frozen=True)
class Runs:
    """One figure's timings, a run each, in the order they ran (seconds)."""
    seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def min(self) -> float:
        return min(self.seconds)

    @property
    def max(self) -> float:
        return max(self.seconds)

    def text(self, unit: str = " s", digits: int = 2) -> str:
        return (f"median {self.median:.{digits}f}{unit} (min {self.min:.{digits}f}, max {self.max:.{digits}f}; "
                f"{len(self.seconds)} runs)")


def load_average() -> float | None:
    """The 1-minute load average (None where the system has none)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


@dataclasses.dataclass(frozen=True)
class Rounds:
    """Each side's runs, timed in turns, and the load average before the first and after the last."""
    runs: dict[str, Runs]
    load_before: float | None
    load_after: float | None

    def __getitem__(self, side: str) -> Runs:
        return self.runs[side]

    @property
    def load_text(self) -> str:
        if self.load_before is None or self.load_after is None:
            return "load average unknown"
        return f"load {self.load_before:.2f} before, {self.load_after:.2f} after"


def rounds(sides: dict[str, Callable[[], float]], count: int = MIN_ROUNDS) -> Rounds:
    """Run each side ``count`` times, in turns: a round runs every side once, in the order given.
    A side returns the seconds it measured (its own clock: a process's wall time, a loop timed
    inside the JVM). Benches take :data:`MIN_ROUNDS` (their tests fewer, on tiny inputs); the
    printed figures say how many runs they are of."""
    if count < 1:
        raise ValueError(f"a figure needs at least one run, not {count}")
    before = load_average()
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(count):
        for name, measure in sides.items():
            times[name].append(float(measure()))
    return Rounds({name: Runs(tuple(t)) for name, t in times.items()}, before, load_average())


def ratio_verdict(label: str, measured: Rounds, numerator: str, denominator: str, comparison: str,
                  target: float, unit: str = "x", digits: int = 2, invalid: str | None = None) -> Verdict:
    """The verdict on ``median(numerator) / median(denominator)``, with beside it the lowest and
    highest ratio of one round's two runs and the load average around the rounds."""
    top, bottom = measured[numerator], measured[denominator]
    per_round = [a / b for a, b in zip(top.seconds, bottom.seconds)]
    spread = (f"medians of {len(per_round)} rounds; a round's ratio min {min(per_round):.{digits}f}{unit}, "
              f"max {max(per_round):.{digits}f}{unit}; {measured.load_text}")
    return verdict(label, top.median / bottom.median, comparison, target, unit, digits, invalid=invalid,
                   spread=spread)


def _spread(measured: Rounds, side: str, low: float, high: float, unit: str, digits: int) -> str:
    return (f"median of {len(measured[side].seconds)} runs; min {low:,.{digits}f}{unit}, max {high:,.{digits}f}{unit}; "
            f"{measured.load_text}")


def median_verdict(label: str, measured: Rounds, side: str, comparison: str, target: float, unit: str = " s",
                   digits: int = 2, invalid: str | None = None) -> Verdict:
    """The verdict on one side's median (seconds, or whatever its runs returned), its min and max
    and the load average beside it."""
    runs = measured[side]
    return verdict(label, runs.median, comparison, target, unit, digits, invalid=invalid,
                   spread=_spread(measured, side, runs.min, runs.max, unit, digits))


def rate_verdict(label: str, measured: Rounds, side: str, amount: float, comparison: str, target: float,
                 unit: str, digits: int = 0, scale: float = 1.0, invalid: str | None = None) -> Verdict:
    """The verdict on a rate: ``amount / median(side) / scale`` (rows over seconds, in millions when
    ``scale`` is 1e6), with the slowest and fastest run's rate and the load average beside it."""
    runs = measured[side]
    low, high = amount / runs.max / scale, amount / runs.min / scale
    return verdict(label, amount / runs.median / scale, comparison, target, unit, digits, invalid=invalid,
                   spread=_spread(measured, side, low, high, unit, digits))
