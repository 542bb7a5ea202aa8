"""The record kernel's fast paths (issue 27) give the plain path's answers and truth.json's.

Each fast path is checked two ways: against the plain one it stands for (the hop for the
strided chain, the full scan for scan + CRC, zlib for ISA-L), on the fixtures' commit logs and
on runs of equal-size records built from them, damaged by hypothesis; and against the
fixtures' truth.json.
"""
from __future__ import annotations

import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CLEAN_SCENARIOS, V4, V5, load_truth
from helpers import canonical, damage, examples, fixture_commitlogs
from rmqtool.store import commitlog as commitlog_module
from rmqtool.store import crc as crc_module
from rmqtool.store.commitlog import CrcTally, scan_segment
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import Message, decode_message
from rmqtool.store.record_kernel import clean_records, strided_chain
from rmqtool.store.record_rule import hop_chain


def _records(buf: bytes) -> list[bytes]:
    """The bytes of each record the hop takes from the start of ``buf``."""
    positions, end = hop_chain(buf, 0, len(buf))
    starts = list(positions) + [end]
    return [buf[a:b] for a, b in zip(starts, starts[1:])]


@pytest.fixture(scope="module")
def buffers():
    """Every fixture commit log file's bytes, and buffers of runs of one record repeated (records
    of one size follow each other: the strided chain's case), each a record or two of another
    size between the runs, ending in zeros."""
    out, records = [], []
    for d in fixture_commitlogs():
        for seg in CommitLog(d).segments:
            buf = seg.path.read_bytes()
            out.append(buf)
            records += _records(buf)[:3]
    sizes = sorted({len(r) for r in records})
    by_size = {len(r): r for r in records}
    for k in range(0, len(sizes) - 2, 3):
        a, b, c = (by_size[s] for s in sizes[k:k + 3])
        out.append(a * 40 + b + c * 7 + b * 2 + a * 3 + c + bytes(64))
    return out


def test_runs_of_one_size_are_proven_by_stride(buffers, monkeypatch):
    """A run of equal records is taken without the hop stepping through it."""
    import rmqtool.store.record_kernel as kernel

    steps = []
    real = hop_chain

    def counted(buf, i, stop, limit=None):
        positions, end = real(buf, i, stop, limit)
        steps.append(len(positions))
        return positions, end

    monkeypatch.setattr(kernel, "hop_chain", counted)
    runs = buffers[-1]
    got, end = strided_chain(runs, 0, len(runs))
    monkeypatch.undo()
    positions, hopped_to = hop_chain(runs, 0, len(runs))
    assert (got.tolist(), end) == (list(positions), hopped_to)
    assert sum(steps) < len(positions) // 2


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_strided_chain_is_the_hop(buffers, data):
    buf = data.draw(st.sampled_from(buffers))
    if data.draw(st.booleans()):
        buf = bytes(damage(bytearray(buf), data, kinds=("flip", "zero", "garbage", "int", "truncate")))
    i = data.draw(st.sampled_from([0]) | st.integers(0, len(buf)))
    stop = data.draw(st.sampled_from([len(buf)]) | st.integers(0, len(buf) + 8))
    limit = data.draw(st.sampled_from([None, len(buf)]) | st.integers(0, len(buf)))
    positions, hopped_to = hop_chain(buf, i, stop, limit)
    got, got_to = strided_chain(buf, i, stop, limit)
    assert (got.tolist(), got_to) == (list(positions), hopped_to)
    records = clean_records(buf, i, stop, limit)
    assert records.position.tolist() == list(positions)[:len(records)]


# --- Messages built from the kernel's runs (over the strided chain) are truth's -------------------


@pytest.mark.parametrize("scenario", sorted(CLEAN_SCENARIOS))
def test_window_built_messages_are_truth_s(scenario):
    """Every field of every Message of a scan (the kernel's runs, built in batches) is truth.json's,
    and is what the one-record path (decode_message) reads at the same place."""
    import base64

    truth = {m["physicalOffset"]: m for m in load_truth(CLEAN_SCENARIOS[scenario] / "truth.json")["truth"]["messages"]}
    seen = []
    for seg in CommitLog(CLEAN_SCENARIOS[scenario] / "store" / "commitlog").segments:
        buf = seg.path.read_bytes()
        for m in scan_segment(seg, check_crc=True):
            if type(m) is not Message:
                continue
            t = truth[m.commit_log_offset]
            assert (m.store_size, m.topic, m.queue_id, m.queue_offset, m.sys_flag, m.store_timestamp,
                    m.born_timestamp, m.body_crc, m.physical_offset, m.msg_id, m.born_port, m.store_port) == (
                t["storeSize"], t["topic"], t["queueId"], t["queueOffset"], t["sysFlag"], t["storeTimestamp"],
                t["bornTimestamp"], t["bodyCRC"], t["commitLogOffsetField"], t["msgId"], t["bornPort"],
                t["storePort"])
            assert m.body == base64.b64decode(t["body"]) and m.properties_raw.decode() == t["propertiesString"]
            alone = decode_message(buf, m.position, m.commit_log_offset, len(buf), path=str(seg.path),
                                   file_position=m.position)
            assert canonical(m) == canonical(alone)
            seen.append(m.commit_log_offset)
    assert seen == sorted(truth)


# --- scan + CRC: its own reused read window, and the zlib path where isal is missing ---------------


def _crc_scan(log: CommitLog) -> tuple:
    findings: list = []
    tally = CrcTally()
    got = [canonical(r) for r in log.crc_scan(findings=findings, tally=tally)]
    return got, [f.to_json() for f in findings], tally.messages, tally.message_bytes


def _full_scan(log: CommitLog) -> tuple:
    """What crc_scan must give: the full scan with CRCs, without the messages whose CRCs hold."""
    findings: list = []
    got, count, size = [], 0, 0
    for r in log.scan(findings=findings):
        if type(r) is Message:
            count += 1
            size += r.store_size
            if r.body_crc_ok is not False and r.property_crc_ok is not False:
                continue
        got.append(canonical(r))
    return got, [f.to_json() for f in findings], count, size


@pytest.mark.parametrize("isal", [True, False], ids=["isal", "zlib"])
def test_crc_scan_with_either_crc_finds_truth_s_flipped_byte(monkeypatch, isal):
    variant = V4 / "crash" / "e3-corrupt-body-in-second-to-last-commitlog-file"
    log = CommitLog(variant / "input" / "store" / "commitlog")
    if not isal:  # as where the optional extra is not installed
        monkeypatch.setattr(crc_module, "fast_crc32", zlib.crc32)
    got = _crc_scan(log)
    mutation = load_truth(variant / "truth.json")["mutation"]
    failing = [r for r in got[0] if r[0] == "message"]
    assert [r[1] for r in failing] == [mutation["messagePhysicalOffset"]]
    monkeypatch.setattr(commitlog_module, "CRC_WINDOW", 5000)  # records straddle every window end
    assert _crc_scan(log) == got == _full_scan(log)


def test_crc_scan_through_a_reused_buffer_is_the_full_scan(monkeypatch):
    """Windows larger than the scan's own are read into one reused buffer; a failing record's
    Message is copied out of it (the 4.x store with a flipped body byte), and a clean 5.x store
    (both CRCs checked) counts truth's messages."""
    damaged = CommitLog(V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file" / "input" / "store" / "commitlog")
    clean = CommitLog(V5 / "v2-and-crc" / "store" / "commitlog")
    expected = [_crc_scan(log) for log in (damaged, clean)]
    monkeypatch.setattr(commitlog_module, "WINDOW", 4096)
    monkeypatch.setattr(commitlog_module, "CRC_WINDOW", 3 * 4096)
    assert [_crc_scan(log) for log in (damaged, clean)] == expected == [_full_scan(log) for log in (damaged, clean)]
    assert len([r for r in expected[0][0] if r[0] == "message"]) == 1
    assert expected[1][2] == len(load_truth(V5 / "v2-and-crc" / "truth.json")["truth"]["messages"])


def test_crcs_of_is_the_reference_crc_with_isal_and_zlib(monkeypatch):
    seg = CommitLog(V5 / "v2-and-crc" / "store" / "commitlog").segments[0]
    buf = seg.path.read_bytes()
    records = clean_records(buf, 0, len(buf))
    want = [crc_module.crc32_reference(buf[a:b]) for a, b in zip(records.body_at.tolist(), records.body_end.tolist())]
    assert ((crc_module.crcs_of(buf, records.body_at, records.body_end) & crc_module.JAVA_CRC_MASK).tolist() == want)
    monkeypatch.setattr(crc_module, "fast_crc32", zlib.crc32)
    assert ((crc_module.crcs_of(buf, records.body_at, records.body_end) & crc_module.JAVA_CRC_MASK).tolist() == want)
    assert records.header["body_crc"].tolist() == [w if a < b else 0 for w, a, b in
                                                   zip(want, records.body_at.tolist(), records.body_end.tolist())]
