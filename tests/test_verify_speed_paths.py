"""verify's speed paths (issue 27) against the fixtures' truth.json.

Each band of the commit log check reads its own share of the consume queue units as the
kernel's hints (store/consumequeue.UnitFiles.between: a binary search in each queue file),
instead of every unit of the store being read and held before the scan.
"""
from __future__ import annotations


import numpy as np
import pytest

from conftest import CLEAN_SCENARIOS, load_truth
from helpers import copy_tree
from rmqtool.findings import COMMIT_LOG_END
from rmqtool.store.consumequeue import UnitFiles
from rmqtool.store.paths import StorePaths


def _truth_units(scenario) -> list[int]:
    truth = load_truth(CLEAN_SCENARIOS[scenario] / "truth.json")["truth"]
    return sorted({e[1] for queues in truth["consumeQueues"].values() for q in queues.values() for e in q["entries"]})


@pytest.mark.parametrize("scenario", ["4.9.8/basic", "5.3.3/batchcq"])
def test_a_band_reads_the_units_naming_its_range(scenario):
    """Every range's hints are truth's units inside it, sorted and unique; the whole range's all of them."""
    units = _truth_units(scenario)
    files = UnitFiles.of(StorePaths(CLEAN_SCENARIOS[scenario] / "store"))
    assert files.between(0, (1 << 63) - 1).tolist() == units
    cuts = [0, units[len(units) // 3], units[len(units) // 3] + 1, units[-1], units[-1] + 1, units[-1] + 10]
    for lo, hi in zip(cuts, cuts[1:]):
        assert files.between(lo, hi).tolist() == [u for u in units if lo <= u < hi]


def test_units_out_of_order_give_only_the_range(tmp_path):
    """A queue file whose units are not in commit log order (damage) gives fewer hints, never
    one outside the range asked for (a hint costs only speed; one outside would be misread)."""
    scenario = "4.9.8/basic"
    store = copy_tree(CLEAN_SCENARIOS[scenario] / "store", tmp_path / "store")
    units = _truth_units(scenario)
    files = UnitFiles.of(StorePaths(store))
    path, unit_size, count = files.files[0]
    data = bytearray(open(path, "rb").read())
    n = min(count, len(data) // unit_size)
    order = np.arange(n)[::-1]  # every unit of the file reversed
    rows = np.frombuffer(bytes(data[:n * unit_size]), np.uint8).reshape(n, unit_size)[order]
    data[:n * unit_size] = rows.tobytes()
    open(path, "wb").write(data)
    lo, hi = units[len(units) // 4], units[3 * len(units) // 4]
    got = files.between(lo, hi).tolist()
    assert got == sorted(set(got)) and all(lo <= u < hi for u in got) and set(got) <= set(units)


def test_verify_counts_truths_messages_with_band_hints():
    """The whole verify, each band reading its hints where it is checked: truth's message count."""
    from rmqtool.verify.run import Verify, VerifyOptions

    scenario = CLEAN_SCENARIOS["5.3.3/batchcq"]
    findings = list(Verify(scenario / "store", VerifyOptions(jobs=1)).findings())
    end = next(f for f in findings if f.id == COMMIT_LOG_END)
    assert end.details["messages"] == len(load_truth(scenario / "truth.json")["truth"]["messages"])
