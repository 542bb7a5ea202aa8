"""The record kernel's fast paths (issue 27) give the plain path's answers and truth.json's.

Each fast path is checked two ways: against the plain one it stands for (the hop for the
strided chain), on the fixtures' commit logs and on runs of equal-size records built from
them, damaged by hypothesis; and against the fixtures' truth.json.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import canonical, damage, examples, fixture_commitlogs
from rmqtool.store.commitlog_end import CommitLog
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


# --- Messages built a window at a time: header tuples, topics, properties read together -------------

from conftest import CLEAN_SCENARIOS, load_truth  # noqa: E402
from rmqtool.formats.properties import bytes_to_properties, string_to_properties  # noqa: E402
from rmqtool.store.commitlog import scan_segment  # noqa: E402
from rmqtool.store.message import Message, build_messages, decode_message, properties_of_many  # noqa: E402

_PIECE = st.sampled_from(["a", "b", "é", "文", "\x01", "\x02", "k\x01v", "\x02n\x01w", "\x00"])
_NAME = st.text(st.sampled_from("abé文 _#"), min_size=1, max_size=4)


@st.composite
def _properties_strings(draw):
    """Well-formed properties (the common shape) mostly, sometimes anything; all with one trailing
    separator, none, or a mix."""
    if draw(st.booleans()):
        text = draw(st.lists(_PIECE, max_size=10).map("".join))
    else:
        entries = draw(st.lists(st.tuples(_NAME, _NAME), min_size=1, max_size=4))
        text = "\x02".join(f"{k}\x01{v}" for k, v in entries)
    return text.encode("utf-8") + (b"\x02" if draw(st.booleans()) else b"")


@settings(max_examples=examples(80), deadline=None)
@given(st.lists(_properties_strings(), min_size=1, max_size=5), st.booleans())
def test_properties_read_together_are_each_read_alone(raws, bad_utf8):
    """properties_of_many gives bytes_to_properties' dicts (the broker's reading), names in the
    same order, or declines; declining, each Message reads its own."""
    if bad_utf8:
        raws[-1] += b"\xff"
    got = properties_of_many(raws)
    alone = [bytes_to_properties(r) for r in raws]
    if got is not None:
        assert all(ok for _, ok in alone)
        assert [list(d.items()) for d in got] == [list(d.items()) for d, _ in alone]
        assert got == [string_to_properties(r.decode()) for r in raws]
    messages = [Message(0, 1, 0, 0, 0, 0, 0, 0, 0, 0, b"\0" * 4, 0, 0, b"\0" * 4, 0, 0, 0, b"", "T", r) for r in raws]
    assert [m.properties for m in messages] == [d for d, _ in alone]
    assert [m.properties_utf8_ok for m in messages] == [ok for _, ok in alone]


def test_common_shape_is_read_together():
    """The usual strings (4.x without the trailing separator, 5.x with it) take the batch path."""
    four = [b"UNIQ_KEY\x01AB\x02TAGS\x01t\x02KEYS\x01a b", b"TAGS\x01x\xc3\xa9"]
    five = [r + b"\x02" for r in four]
    for raws in (four, five):
        assert properties_of_many(raws) == [bytes_to_properties(r)[0] for r in raws]
    assert properties_of_many(four[:1] + five[1:]) is None  # mixed: each alone


@pytest.mark.parametrize("scenario", sorted(CLEAN_SCENARIOS))
def test_window_built_messages_are_truth_s(scenario):
    """Every field of every Message of a scan (built a window at a time) is truth.json's, and is
    what the one-record path (decode_message) reads at the same place."""
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


def test_many_topics_in_one_window_and_a_changed_properties_string():
    """Past the topics sorted out with numpy, the rest one by one; a Message whose properties string
    was replaced before it was read reads the new one, not its batch's."""
    import rmqtool.store.message as message_module

    seg = CommitLog(CLEAN_SCENARIOS["4.9.8/basic"] / "store" / "commitlog").segments[0]
    buf = seg.path.read_bytes()
    records = clean_records(buf, 0, len(buf))
    plain = build_messages(buf, records, seg.base_offset, 0, str(seg.path), True)
    old = message_module._DISTINCT_TOPICS
    message_module._DISTINCT_TOPICS = 1
    try:
        few = build_messages(buf, records, seg.base_offset, 0, str(seg.path), True)
    finally:
        message_module._DISTINCT_TOPICS = old
    assert len({m.topic for m in plain}) > 1
    assert [canonical(m) for m in few] == [canonical(m) for m in plain]
    m = build_messages(buf, records, seg.base_offset, 0, str(seg.path), False)[0]
    m.properties_raw = b"A\x01b"
    assert m.properties == {"A": "b"}


def test_a_pickled_message_carries_its_own_properties():
    import pickle

    seg = CommitLog(CLEAN_SCENARIOS["5.3.3/v2-and-crc"] / "store" / "commitlog").segments[0]
    first = next(r for r in scan_segment(seg) if type(r) is Message)
    copy = pickle.loads(pickle.dumps(first))
    assert canonical(copy) == canonical(first) and copy.properties == bytes_to_properties(first.properties_raw)[0]


# --- scan + CRC: its own reused read window, and the zlib path where isal is missing ---------------

import zlib  # noqa: E402

from conftest import V4, V5  # noqa: E402
from rmqtool.store import commitlog as commitlog_module  # noqa: E402
from rmqtool.store import crc as crc_module  # noqa: E402
from rmqtool.store.commitlog import CrcTally  # noqa: E402


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
