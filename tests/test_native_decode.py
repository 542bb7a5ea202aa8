"""The full decode's and crc_scan's native paths (issue 27, third round): mapped windows, the
properties' name and value cache, the Message builder's shared objects. Each gives the pure
path's answer (native.kernel None), on the fixtures against their truth.json and on damaged bytes."""
from __future__ import annotations

import mmap
import types

import pytest

from conftest import CLEAN_SCENARIOS, load_truth
from helpers import canonical
from rmqtool import native
from rmqtool.store import commitlog
from rmqtool.store.commitlog import CrcTally
from rmqtool.store.commitlog_end import CommitLog

KERNEL = native.kernel
pytestmark = pytest.mark.usefixtures("native_built")
V2 = CLEAN_SCENARIOS["5.3.3/v2-and-crc"]


def both_ways(monkeypatch, fn):
    """fn() with the kernel, then with native.kernel None (the pure path)."""
    with_kernel = fn()
    with monkeypatch.context() as m:
        m.setattr(native, "kernel", None)
        pure = fn()
    return with_kernel, pure


def scans(directory) -> list:
    """Everything the plain scan (with and without CRCs) and crc_scan say, properties read."""
    log = CommitLog(directory)
    out = [[canonical(r) for r in log.scan(check_crc=check)] for check in (False, True)]
    tally, findings = CrcTally(), []
    out.append([canonical(r) for r in log.crc_scan(tally=tally, findings=findings)])
    return out + [tally, findings]


@pytest.fixture(scope="module")
def cut_at_a_page(tmp_path_factory):
    """The 5.x segment cut at a page boundary inside a record: its last window is mapped up to
    the file's end, where the search for the next record then runs (mmap.find would read a byte
    past the mapping there)."""
    src = sorted((V2 / "store" / "commitlog").iterdir())[0]
    raw = src.read_bytes()
    directory = tmp_path_factory.mktemp("cut") / "commitlog"
    directory.mkdir()
    truth = load_truth(V2 / "truth.json")["truth"]["messages"]
    ends = sorted(m["physicalOffset"] + m["storeSize"] for m in truth if m["physicalOffset"] < len(raw))
    cut = (ends[len(ends) // 2] // mmap.PAGESIZE + 1) * mmap.PAGESIZE  # inside the record after the middle one
    assert cut not in ends
    (directory / src.name).write_bytes(raw[:cut])
    return directory, sum(1 for e in ends if e <= cut)


class _NoFind(mmap.mmap):
    """A mapping whose find fails the test: CPython 3.11's reads a byte past the mapping, a
    SIGSEGV where no page follows it (whether one does is the address space's luck)."""

    def find(self, *args):
        raise AssertionError("mmap.find on a mapped window")


def test_a_segment_cut_at_a_page_scans_both_ways(cut_at_a_page, monkeypatch):
    directory, whole = cut_at_a_page
    monkeypatch.setattr(commitlog, "mmap", types.SimpleNamespace(
        mmap=_NoFind, ACCESS_READ=mmap.ACCESS_READ, ALLOCATIONGRANULARITY=mmap.ALLOCATIONGRANULARITY))
    with_kernel, pure = both_ways(monkeypatch, lambda: scans(directory))
    assert with_kernel == pure
    decoded, _, crc_results, tally, _ = with_kernel
    assert sum(r[0] == "message" for r in decoded) == tally.messages == whole
    assert [r[5] for r in decoded if r[0] == "corrupt"] == ["recordTruncated"]
    assert [r[0] for r in crc_results] == ["corrupt"]
