"""The full decode's and crc_scan's native paths (issue 27, third round): mapped windows, the
properties' name and value cache, the Message builder's shared objects. Each gives the pure
path's answer (native.kernel None), on the fixtures against their truth.json and on damaged bytes."""
from __future__ import annotations

import mmap
import sys
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import CLEAN_SCENARIOS, load_truth
from helpers import canonical, examples, kernel_and_pure
from rmqtool import native
from rmqtool.formats.properties import bytes_to_properties
from rmqtool.store import commitlog
from rmqtool.store.commitlog import CrcTally
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import build_messages
from rmqtool.store.record_kernel import clean_records

KERNEL = native.kernel
pytestmark = pytest.mark.usefixtures("native_built")
V2 = CLEAN_SCENARIOS["5.3.3/v2-and-crc"]


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
    with_kernel, pure = kernel_and_pure(lambda: scans(directory))
    assert with_kernel == pure
    decoded, _, crc_results, tally, _ = with_kernel
    assert sum(r[0] == "message" for r in decoded) == tally.messages == whole
    assert [r[5] for r in decoded if r[0] == "corrupt"] == ["recordTruncated"]
    assert [r[0] for r in crc_results] == ["corrupt"]


# --- the properties' cache of names and values (properties.c) ---

_ENTRIES = st.sampled_from([b"KEYS\x01k1 k2", b"KEYS\x01k1 k3", b"TAGS\x01a", b"TAGS\x01b", b"TAGS\x01ab", b"UNIQ_KEY\x01A",
                            b"UNIQ_KEY\x01B", "城市\x01杭州".encode(), b"CLUSTER\x01DefaultCluster", b"a\x01b\x01c",
                            b"\x01v", b"n\x01", b"", b"bad\xff\x01v", b"K" * 17 + b"\x01" + b"v" * 30])


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.tuples(st.lists(_ENTRIES, max_size=6), st.booleans()), min_size=1, max_size=8))
def test_strings_in_turn_read_as_the_broker_reads_them(strings):
    """Strings one after the other (the cache holding the last ones' names and values at each
    entry): every dict the kernel gives is bytes_to_properties', in order; it declines only the
    uncommon ones; the names of an ASCII string come interned."""
    for entries, trailing in strings:
        raw = b"\x02".join(entries) + (b"\x02" if trailing and entries else b"")
        got = KERNEL.properties_dict(raw)
        want, utf8_ok = bytes_to_properties(raw)
        if got is not None:
            assert got == want and list(got) == list(want) and utf8_ok
            assert not raw.isascii() or all(sys.intern(name) is name for name in got)


@settings(max_examples=examples(30), deadline=None)
@given(st.binary(min_size=0, max_size=80), st.integers(0, 40))
def test_separators_found_at_every_place_of_a_block(noise, at):
    """Separators before, on and after the 16-byte steps' seams, among any bytes."""
    raw = noise[:at] + b"\x01" + noise[at:] + b"\x02K\x01" + noise[:at % 7 + 1]
    got = KERNEL.properties_dict(raw)
    want, utf8_ok = bytes_to_properties(raw)
    assert got is None or (got == want and list(got) == list(want) and utf8_ok)


# --- Messages sharing the commit log offset's int (messages.c) ---

def test_offsets_shared_only_where_equal(monkeypatch):
    """A window built at several file and commit log offsets: every Message is the pure path's,
    position and physicalOffset the commit log offset only where the bytes say so (truth)."""
    path = sorted((V2 / "store" / "commitlog").iterdir())[0]
    raw = path.read_bytes()
    records = clean_records(raw, 0, len(raw))
    truth = {m["physicalOffset"]: m["commitLogOffsetField"] for m in load_truth(V2 / "truth.json")["truth"]["messages"]}
    base = int(path.name)

    def built():
        out = []
        for offset0, position0 in ((base, 0), (base + 4096, 0), (0, 0), (base, 4096)):
            out += [canonical(m) + (m.physical_offset == m.commit_log_offset, m.position - m.commit_log_offset)
                    for m in build_messages(raw, records, offset0, position0, str(path), False)]
        return out

    with_kernel, pure = kernel_and_pure(built)
    assert with_kernel == pure
    n = len(records)
    assert [same for *_, same, _ in with_kernel[:n]] == [truth[base + p] == base + p for p in records.position.tolist()]
    assert {d for *_, d in with_kernel} == {-base, -base - 4096, 0, 4096 - base}
