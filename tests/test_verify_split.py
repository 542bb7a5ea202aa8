"""verify checks a segment in byte ranges (two cores share one big segment, a job's memory
is bounded): the findings of ranges of any size are exactly those of whole segments."""
from __future__ import annotations

import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CLEAN_SCENARIOS, V4, V5
from helpers import damaged_commitlog, examples
from rmqtool.verify import commitlog as verify_commitlog
from rmqtool.verify.run import Verify, VerifyOptions

CRASH_INPUTS = sorted(p / "input" / "store" for root in (V4 / "crash", V4 / "crash-fast", V5 / "crash5")
                      for p in root.iterdir() if (p / "input" / "store").is_dir())


def findings(store: pathlib.Path, jobs: int = 1) -> list:
    return [(f.id, f.path, f.offset, f.message, f.details) for f in Verify(store, VerifyOptions(jobs=jobs)).findings()]


@pytest.mark.parametrize("store", [d / "store" for d in CLEAN_SCENARIOS.values()] + CRASH_INPUTS,
                         ids=lambda p: "/".join(p.parts[-5:-1]))
def test_ranges_give_the_findings_of_whole_segments(store, monkeypatch):
    monkeypatch.setattr(verify_commitlog, "VERIFY_SPLIT", 1 << 40)
    whole = findings(store)
    monkeypatch.setattr(verify_commitlog, "VERIFY_SPLIT", 4099)  # splits land inside records
    assert findings(store) == whole
    assert findings(store, jobs=2) == whole


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(data=st.data(), split=st.integers(min_value=64, max_value=50_000))
def test_ranges_of_damaged_segments(tmp_path_factory, data, split):
    commitlog = damaged_commitlog(tmp_path_factory, data, body_sizes=(0, 2000), max_damages=3)
    store = pathlib.Path(commitlog).parent
    verify_commitlog.VERIFY_SPLIT, saved = 1 << 40, verify_commitlog.VERIFY_SPLIT
    try:
        whole = findings(store)
        verify_commitlog.VERIFY_SPLIT = split
        assert findings(store) == whole
    finally:
        verify_commitlog.VERIFY_SPLIT = saved
