"""The one damage-tolerant scanner over a byte range: cut anywhere, the ranges add up to the whole scan."""
from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from conftest import V4, load_truth
from helpers import canonical, damaged_commitlog, examples, fixture_commitlogs
from rmqtool.store.commitlog import Blank, Corrupt, CrcTally, crc_scan, find_record, scan_segment
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import Message
from rmqtool.store.parallel import parallel_scan, segment_jobs

FIXTURE_COMMITLOGS = fixture_commitlogs()


def _extent(r) -> tuple[int, int]:
    """(file position, bytes) a scan result covers."""
    if isinstance(r, Message):
        return r.position, r.store_size
    return r.position, r.size


def _interesting(results, size: int) -> list[tuple[int, int]]:
    """Closed position ranges worth cutting in: inside each record, blank tail and damaged
    region, and the unwritten tail after the last one."""
    spans = []
    covered = 0
    for r in results:
        pos, n = _extent(r)
        if n > 1:
            spans.append((pos + 1, min(pos + n, size) - 1))
        covered = max(covered, pos + n)
    if covered < size - 1:
        spans.append((covered, size - 1))
    return spans


def _whole_and_split(seg, is_last: bool, cuts: list[int]):
    whole_findings: list = []
    whole = [canonical(r) for r in scan_segment(seg, is_last=is_last, findings=whole_findings)]
    split_findings: list = []
    split = []
    bounds = [0, *cuts, None]
    for lo, hi in zip(bounds, bounds[1:]):
        split += [canonical(r) for r in scan_segment(seg, is_last=is_last, start=lo, end=hi,
                                                     findings=split_findings)]
    return (whole, whole_findings), (split, split_findings)


def _draw_cuts(data, results, size: int) -> list[int]:
    if size < 2:
        return []
    spans = _interesting(results, size)
    cuts = set()
    for _ in range(data.draw(st.integers(1, 8))):
        if spans and data.draw(st.booleans()):
            lo, hi = data.draw(st.sampled_from(spans))
            cuts.add(data.draw(st.integers(lo, hi)))
        else:
            cuts.add(data.draw(st.integers(1, size - 1)))
    return sorted(cuts)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_ranges_cut_anywhere_add_up_to_the_whole_scan_of_fixtures(data):
    log = CommitLog(data.draw(st.sampled_from(FIXTURE_COMMITLOGS)))
    n = data.draw(st.integers(0, len(log.segments) - 1))
    seg = log.segments[n]
    is_last = data.draw(st.booleans())
    results = list(scan_segment(seg, is_last=is_last))
    cuts = _draw_cuts(data, results, seg.size)
    whole, split = _whole_and_split(seg, is_last, cuts)
    assert split == whole


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_ranges_cut_anywhere_add_up_to_the_whole_scan_of_damaged_copies(tmp_path_factory, data):
    directory = damaged_commitlog(tmp_path_factory, data, body_sizes=[0, 40, 300, 2000], max_damages=6)
    log = CommitLog(directory)
    for seg in log.segments:
        results = list(scan_segment(seg, is_last=False))
        cuts = _draw_cuts(data, results, seg.size)
        whole, split = _whole_and_split(seg, False, cuts)
        assert split == whole
        # the integrity check's scan splits the same way
        whole_tally, split_tally = CrcTally(), CrcTally()
        expected = [canonical(r) for r in crc_scan(seg, is_last=False, tally=whole_tally)]
        bounds = [0, *cuts, None]
        got = [canonical(r) for lo, hi in zip(bounds, bounds[1:])
               for r in crc_scan(seg, is_last=False, start=lo, end=hi, tally=split_tally)]
        assert got == expected and split_tally == whole_tally


def test_a_range_starting_inside_a_record_reports_no_corruption():
    """The bytes before the first record that proves itself belong to the range before."""
    log = CommitLog(V4 / "basic" / "store" / "commitlog")
    seg = log.segments[0]
    messages = [r for r in scan_segment(seg, is_last=False) if isinstance(r, Message)]
    m = messages[10]
    got = list(scan_segment(seg, is_last=False, start=m.position + 3, end=messages[20].position + 1))
    assert all(isinstance(r, Message) for r in got)
    assert [r.commit_log_offset for r in got] == [x.commit_log_offset for x in messages[11:21]]


def test_find_record_is_the_next_record_start():
    truth = load_truth(V4 / "basic" / "truth.json")
    log = CommitLog(V4 / "basic" / "store" / "commitlog")
    seg = log.segments[1]
    starts = [m["physicalOffset"] - seg.base_offset for m in truth["truth"]["messages"]
              if seg.base_offset <= m["physicalOffset"] < seg.base_offset + seg.size]
    blank = next(b["positionInFile"] for b in truth["truth"]["commitlog"]["blankMarkers"]
                 if b["fileStartOffset"] == seg.base_offset)
    for here, nxt in zip(starts, starts[1:] + [blank]):
        assert find_record(seg, here) == here
        assert find_record(seg, here + 1) == nxt
    assert find_record(seg, blank + 1) is None


@pytest.mark.parametrize("split_size", [4096, 50_000])
def test_byte_range_jobs_give_the_whole_scan(split_size):
    log = CommitLog(V4 / "crash" / "b2-garbage-tail-of-last-message" / "input" / "store" / "commitlog")
    jobs = segment_jobs(log, split_size=split_size)
    assert len(jobs) > len(log.segments)
    parts = parallel_scan(log, _canonical_results, workers=2, split_size=split_size)
    assert [r for part in parts for r in part] == [canonical(r) for r in log.scan()]
    assert any(r[0] == "corrupt" for part in parts for r in part)


def _canonical_results(job) -> list:
    return [canonical(r) for r in job.scan()]


def test_needle_prefilter_yields_the_full_scans_messages_holding_it():
    truth = load_truth(V4 / "basic" / "truth.json")
    log = CommitLog(V4 / "basic" / "store" / "commitlog")
    key = "hot-key-3"
    expected = [m["physicalOffset"] for m in truth["truth"]["messages"] if key in (m["keys"] or "").split(" ")]
    full = {r.commit_log_offset: canonical(r) for r in log.scan() if isinstance(r, Message)}
    got = [r for r in log.scan(needle=key.encode()) if isinstance(r, Message)]
    assert [canonical(r) for r in got] == [full[r.commit_log_offset] for r in got]
    assert [r.commit_log_offset for r in got if key in r.keys] == expected
    assert len(got) < len(full) // 10  # the rest were hopped over, not decoded


def test_blank_and_corrupt_are_located():
    log = CommitLog(V4 / "crash" / "b2-garbage-tail-of-last-message" / "input" / "store" / "commitlog")
    results = list(log.scan())
    assert any(isinstance(r, Blank) for r in results) and any(isinstance(r, Corrupt) for r in results)


def _write(path, data: bytes, *, sparse: bool, page: int = 4096) -> None:
    """The same bytes, with every all-zero page left a hole when ``sparse``."""
    with open(path, "wb") as f:
        for at in range(0, len(data), page):
            chunk = data[at:at + page]
            if sparse and chunk == bytes(len(chunk)):
                continue
            f.seek(at)
            f.write(chunk)
        f.truncate(len(data))


def test_holes_in_a_segment_are_skipped_with_the_same_results(tmp_path):
    """Zeroed pages inside a segment, as holes or as written zeros: the same scan, the same splits."""
    src = V4 / "basic" / "store" / "commitlog" / "00000000000000000000"
    data = bytearray(src.read_bytes())
    data[8192:8192 * 4] = bytes(8192 * 3)  # three pages zeroed inside the records
    data[200_000:] = bytes(len(data) - 200_000)  # and the end, as if never written
    scans = []
    for sparse in (False, True):
        d = tmp_path / ("sparse" if sparse else "dense")
        d.mkdir()
        _write(d / src.name, bytes(data), sparse=sparse)
        seg = CommitLog(d).segments[0]

        def pathless(r, path=str(seg.path)):
            return tuple("" if x == path else x for x in canonical(r))

        whole = [pathless(r) for r in scan_segment(seg, is_last=True)]
        parts = [pathless(r) for lo, hi in ((0, 9000), (9000, 30000), (30000, 150_000), (150_000, None))
                 for r in scan_segment(seg, is_last=True, start=lo, end=hi)]
        assert parts == whole
        scans.append(whole)
    assert scans[0] == scans[1]
    corrupt = [r for r in scans[0] if r[0] == "corrupt"]
    # the record cut by the zeroed pages, up to the next whole record; the one cut at 200,000
    assert [(r[1] < 8192 < 8192 * 4 < r[1] + r[2]) for r in corrupt] == [True, False]
    assert corrupt[1][1] < 200_000 == corrupt[1][1] + corrupt[1][2]
    assert scans[0][-1] == corrupt[1]


def test_an_empty_range_holds_no_record_and_no_finding():
    # found by hypothesis: a cut at 0 made the range [0, 0) scan the whole segment, so a
    # never-written segment's blankRecordMissing came twice (once from [0, 0), once from [0, end))
    from conftest import V4

    log = CommitLog(V4 / "crash" / "a-as-is" / "input" / "store" / "commitlog")  # its last files were never written
    for seg in log.segments:
        for start in (0, seg.size // 2):
            findings: list = []
            assert list(scan_segment(seg, is_last=False, start=start, end=start, findings=findings)) == []
            assert findings == []
        whole, split = _whole_and_split(seg, False, [0])
        assert split == whole
