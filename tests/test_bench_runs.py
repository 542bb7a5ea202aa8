"""benchmarks/runs.py: each side of a comparison runs in turns, a figure is the median of its
runs with min and max beside it, and a ratio's verdict line carries each round's lowest and
highest ratio and the load average, read back as printed (verdict.check_printed)."""
from __future__ import annotations

import pytest

from benchmarks import runs
from benchmarks.verdict import check_printed, parse, verdict


def _sides(times: dict[str, list[float]], order: list[str]):
    def side(name):
        def measure():
            order.append(name)
            return times[name].pop(0)
        return measure
    return {name: side(name) for name in times}


def test_sides_take_turns_and_each_figure_is_its_runs_median():
    order: list[str] = []
    measured = runs.rounds(_sides({"java": [1.0, 3.0, 2.0], "verify": [1.5, 2.0, 9.0]}, order), 3)
    assert order == ["java", "verify"] * 3
    java, verify = measured["java"], measured["verify"]
    assert (java.seconds, java.median, java.min, java.max) == ((1.0, 3.0, 2.0), 2.0, 1.0, 3.0)
    assert verify.text() == "median 2.00 s (min 1.50, max 9.00; 3 runs)"
    with pytest.raises(ValueError):
        runs.rounds(_sides({"a": []}, []), 0)


def test_a_ratio_verdict_is_the_medians_ratio_with_each_rounds_ratio_and_the_load(capsys):
    measured = runs.Rounds({"verify": runs.Runs((3.0, 2.0, 4.5)), "java": runs.Runs((1.0, 2.0, 1.5))}, 1.25, 2.5)
    v = runs.ratio_verdict("qmq verify / Java loop", measured, "verify", "java", "<=", 2.0)
    assert v.value == 3.0 / 1.5 and v.passed  # medians 3.0 and 1.5; the rounds' ratios 3.0, 1.0, 3.0
    assert v.spread == ("medians of 3 rounds; a round's ratio min 1.00x, max 3.00x; "
                        "load 1.25 before, 2.50 after")
    print(v.line)
    check_printed([v], capsys.readouterr().out)
    got = parse(v.line)
    assert (got["value"], got["spread"], got["word"]) == (2.0, v.spread, "PASS")
    unknown = runs.Rounds(measured.runs, None, None)
    assert "load average unknown" in runs.ratio_verdict("r", unknown, "verify", "java", "<=", 1.0).line


def test_a_spread_cannot_break_its_line():
    with pytest.raises(ValueError):
        verdict("r", 1.0, "<=", 2.0, "x", spread="min [1]")
    assert parse(verdict("r", 1.0, "<=", 2.0, "x", spread="").line).get("spread") is None
