"""The QMQ verify's fast paths against the general ones they stand for (issue 27), on every
QMQ fixture: the message log read a small window at a time against one window a segment, and
the consumer-log check's lookups in turn (``_find``, ``_by_offset``'s rising offsets, every
record reached) against the sorted search and the set lookups; both give the records the
fixture's truth.json lists and the same findings."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import FIXTURES, load_truth
from helpers import expand_store
from rmqtool import findings as ids
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.store.qmq import messagelog
from rmqtool.store.qmq.segments import list_log
from rmqtool.verify.qmq import checks
from rmqtool.verify.qmq.checks import check_store

QMQ = FIXTURES / "qmq"
SOURCES = sorted(p.parent for p in QMQ.rglob("sizes.json") if p.parent.name in ("store", "input"))
TINY = 700  # bytes: windows shorter than most records, so runs end and start again mid-log


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    base = tmp_path_factory.mktemp("qmq")
    return {src: expand_store(src, base / "-".join(src.relative_to(QMQ).parts)) for src in SOURCES}


def _rows(found):
    return [(f.id, f.path, f.offset, f.message, sorted((f.details or {}).items())) for f in found]


def _general(monkeypatch):
    """The consumer-log check without its fast paths."""
    monkeypatch.setattr(checks, "_find", lambda offsets, mine, mine_offsets, wanted:
                        np.minimum(np.searchsorted(offsets, wanted), len(offsets) - 1))
    monkeypatch.setattr(checks, "_each_reached", lambda reached, mine: False)
    rising = checks._by_offset

    def by_offset(records):  # the sorting path, also for rising offsets
        if len(records) < 2:
            return rising(records)
        order = np.argsort(records.offset, kind="stable")
        offsets = records.offset[order]
        last, first = np.r_[offsets[1:] != offsets[:-1], True], np.r_[True, offsets[1:] != offsets[:-1]]
        return offsets[last], order[last], np.argsort(order[first], kind="stable")
    monkeypatch.setattr(checks, "_by_offset", by_offset)


def test_every_path_gives_the_same_findings(stores, monkeypatch):
    fast = {src: _rows(check_store(store)) for src, store in stores.items()}
    monkeypatch.setattr(messagelog, "WINDOW", TINY)
    _general(monkeypatch)
    assert {src: _rows(check_store(store)) for src, store in stores.items()} == fast
    # and they are the fixtures' truth: the flipped payload byte and the deleted consumer log
    d = QMQ / "crash" / "d-flipped-payload-byte-mid-log"
    record = load_truth(d / "truth.json")["mutation"]["record"]
    assert [(r[2], dict(r[4])["sequence"]) for r in fast[d / "input"] if r[0] == ids.PAYLOAD_CRC_MISMATCH] == \
        [(record["offset"], record["sequence"])]
    e = QMQ / "crash" / "e-deleted-consumerlog-file"
    (subject, ranges), = load_truth(e / "truth.json")["summary"]["servedSuccessWithoutMessage"].items()
    assert [dict(r[4])["sequences"] for r in fast[e / "input"] if r[0] == ids.MESSAGE_NOT_IN_CONSUMER_LOG] == \
        [sum(b - a + 1 for a, b in ranges)]


@pytest.mark.parametrize("window", [TINY, messagelog.WINDOW])
def test_the_windowed_scan_reads_the_records_truth_lists(stores, monkeypatch, window):
    monkeypatch.setattr(messagelog, "WINDOW", window)
    truth = load_truth(QMQ / "basic" / "truth.json")["readBack"]["messageLog"]["records"]
    got = []
    for seg in list_log(stores[QMQ / "basic" / "store"] / "messagelog", PER_SEGMENT_FILE_SIZE).segments:
        got += [(r.offset, r.size, r.header_size, r.subject, r.sequence, r.payload_crc_ok)
                for r in messagelog.scan_segment(seg) if isinstance(r, messagelog.MessageRecord)]
    assert got == [(r["offset"], r["size"], r["headerSize"], r["subject"], r["sequence"], r["payloadCrcOk"])
                   for r in truth]


def test_find_is_a_sorted_search():
    rng = np.random.default_rng(27)
    offsets = np.unique(rng.integers(0, 1 << 40, 5000))
    mine = np.sort(rng.choice(len(offsets), 1200, replace=False))
    mine_offsets = offsets[mine]
    runs = [mine_offsets[100:400], mine_offsets[:0], mine_offsets[-50:], mine_offsets[1100:1300],
            np.r_[mine_offsets[10:20], offsets[0]], rng.integers(0, 1 << 41, 300), mine_offsets[5:9] + 1]
    for wanted in runs:
        expected = np.minimum(np.searchsorted(offsets, wanted), len(offsets) - 1)
        assert checks._find(offsets, mine, mine_offsets, wanted).tolist() == expected.tolist()
