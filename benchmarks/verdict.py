"""A bench's target line: the measured value, its target, the comparison, PASS or MISS.

Every ``bench_*.py`` prints its targets through :func:`verdict` (one function decides
PASS and formats the line) and returns the verdicts from ``run()``, so a test can hold
each printed line against the number the bench measured (:func:`check_printed`).
"""
from __future__ import annotations

import dataclasses
import math
import operator
import re

COMPARISONS = {">=": operator.ge, "<=": operator.le}
PASS, MISS, INVALID = "PASS", "MISS", "INVALID"


@dataclasses.dataclass(frozen=True)
class Verdict:
    label: str
    value: float  # in the unit printed, e.g. 1.9 for "1.9x" or 0.46 for "0.46 M msgs/s"
    unit: str  # printed right after the value and the target ("x", " M msgs/s", " MiB"; may be empty)
    target: float
    comparison: str  # ">=" or "<=": value comparison target passes
    passed: bool
    digits: int = 2  # decimals of the printed value
    invalid: str | None = None  # why the measurement does not count (it read the wrong data)
    spread: str | None = None  # printed in brackets after the value: its runs' median, min, max, the load

    @property
    def line(self) -> str:
        word = f"{INVALID} ({self.invalid})" if self.invalid else (PASS if self.passed else MISS)
        spread = f" [{self.spread}]" if self.spread else ""
        return (f"{self.label}: {self.value:,.{self.digits}f}{self.unit}{spread} "
                f"(target {self.comparison} {self.target:,g}{self.unit}): {word}")


def verdict(label: str, value: float, comparison: str, target: float, unit: str = "", digits: int = 2,
            invalid: str | None = None, spread: str | None = None) -> Verdict:
    """The one place a target is judged: passed is ``value comparison target`` (and the run valid)."""
    if comparison not in COMPARISONS:
        raise ValueError(f"comparison must be one of {sorted(COMPARISONS)}, not {comparison!r}")
    spread = spread or None
    if spread is not None and ("[" in spread or "]" in spread):
        raise ValueError(f"a spread is printed in brackets and holds none: {spread!r}")
    passed = invalid is None and COMPARISONS[comparison](value, target)
    return Verdict(label, value, unit, target, comparison, passed, digits, invalid, spread)


def report(v: Verdict) -> Verdict:
    """Print the verdict's line; returns it, for ``run()`` to collect."""
    print(v.line, flush=True)
    return v


_LINE = re.compile(r"^(?P<label>.*): (?P<value>-?[\d,]+(?:\.\d+)?)(?P<unit>[^()\[\]]*?)(?: \[(?P<spread>[^\]]*)\])? "
                   r"\(target (?P<comparison>>=|<=) (?P<target>[\d,.e+-]+)(?P=unit)\): "
                   r"(?P<word>PASS|MISS|INVALID \(.*\))$")


def parse(line: str) -> dict | None:
    """A printed verdict line read back: label, value, unit, comparison, target, word (and spread,
    when the line has one); None if it is not one."""
    m = _LINE.match(line)
    if m is None:
        return None
    got = m.groupdict()
    if got["spread"] is None:
        del got["spread"]
    got["value"] = float(got["value"].replace(",", ""))
    got["target"] = float(got["target"].replace(",", ""))
    return got


def check_printed(verdicts: list[Verdict], printed: str) -> None:
    """Each verdict's line was printed and says what was measured: its value (to the printed
    decimals) and target, and PASS exactly when the value meets the target. AssertionError if not."""
    lines = {}
    for text in printed.splitlines():
        got = parse(text)
        if got is not None:
            lines[got["label"]] = got
        else:  # a PASS or MISS outside a verdict line was judged by some other code
            assert not re.search(rf"\b({PASS}|{MISS}|{INVALID})\b", text), f"not a verdict line: {text!r}"
    assert sorted(lines) == sorted(v.label for v in verdicts), (sorted(lines), [v.label for v in verdicts])
    for v in verdicts:
        assert v.comparison in COMPARISONS, v
        assert v.passed == (v.invalid is None and COMPARISONS[v.comparison](v.value, v.target)), v
        got = lines.get(v.label)
        assert got is not None, f"no printed line for {v.label!r} in:\n{printed}"
        assert math.isclose(got["value"], v.value, abs_tol=0.5 * 10 ** -v.digits + 1e-9), (got, v)
        assert math.isclose(got["target"], v.target, rel_tol=1e-5), (got, v)
        assert (got["comparison"], got["unit"], got.get("spread")) == (v.comparison, v.unit, v.spread), (got, v)
        word = (PASS if v.passed else MISS) if v.invalid is None else f"{INVALID} ({v.invalid})"
        assert got["word"] == word, (got, v)
