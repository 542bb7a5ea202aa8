"""benchmarks/verdict.py: PASS exactly when the value meets the target, and a printed
output that says something else than the verdicts (PASS for a miss, a number the bench did
not measure, a PASS judged elsewhere, a line missing) fails check_printed."""
from __future__ import annotations

import dataclasses

import pytest

from benchmarks.verdict import check_printed, parse, verdict


def test_passed_is_the_comparison_of_value_and_target():
    assert verdict("a", 2.0, ">=", 2.0).passed and not verdict("a", 1.99, ">=", 2.0).passed
    assert verdict("a", 2.0, "<=", 2.0).passed and not verdict("a", 2.01, "<=", 2.0).passed
    assert not verdict("a", 5.0, ">=", 2.0, invalid="read the wrong records").passed
    with pytest.raises(ValueError):
        verdict("a", 1.0, ">", 2.0)


def test_a_line_reads_back_as_it_was_judged():
    v = verdict("  4 segments, scan + CRC (crc_scan), speed-up", 241_234.4, ">=", 300_000, " rows/s", digits=0)
    assert v.line == "  4 segments, scan + CRC (crc_scan), speed-up: 241,234 rows/s (target >= 300,000 rows/s): MISS"
    assert parse(v.line) == {"label": v.label, "value": 241_234.0, "unit": " rows/s", "comparison": ">=",
                             "target": 300_000.0, "word": "MISS"}
    check_printed([v], f"some other line\n{v.line}\n")
    assert parse("header-only scan  2.351 M msgs/s") is None


@pytest.mark.parametrize("printed", [
    "ratio: 2.50x (target <= 2x): PASS",  # PASS for a miss
    "ratio: 1.20x (target <= 2x): MISS",  # MISS for a pass
    "ratio: 1.90x (target <= 2x): PASS",  # not the number measured
    "ratio: 2.50x (target <= 3x): MISS",  # not the target
    "ratio: 2.50x (target >= 2x): MISS",  # not the comparison
    "",  # not printed
    "ratio: 2.50x (target <= 2x): MISS\nspeed-up 1.9x: PASS",  # a PASS judged outside a verdict
])
def test_check_printed_catches_a_line_that_says_something_else(printed):
    v = verdict("ratio", 2.5, "<=", 2.0, "x")
    check_printed([v], v.line)
    with pytest.raises(AssertionError):
        check_printed([v], printed)


def test_check_printed_catches_a_verdict_not_made_by_verdict():
    v = dataclasses.replace(verdict("ratio", 2.5, "<=", 2.0, "x"), passed=True)  # a miss called a pass
    with pytest.raises(AssertionError):
        check_printed([v], v.line)
