"""The CRC implementation crc.py picks is RocketMQ's CRC; crc_scan (the integrity check's scan) reports
what the full scan reports but the good messages, on the broker's damaged stores and on random damage; the
properties fast path reads strings as the broker does."""
from __future__ import annotations

import os
import subprocess
import sys
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import V4, V5, load_truth
from helpers import canonical, damaged_commitlog, examples
from rmqtool.formats.properties import string_to_properties
from rmqtool.store import commitlog as commitlog_module
from rmqtool.store import crc
from rmqtool.store.commitlog import Blank, CrcTally, Message, crc_scan
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.formats.properties import bytes_to_properties as parse_properties

from benchmarks import bench_read
from benchmarks.gen import GenSpec, build_commitlog

E_VARIANTS = ("e1-corrupt-body-in-last-commitlog-file", "e2-corrupt-body-in-first-commitlog-file",
              "e3-corrupt-body-in-second-to-last-commitlog-file")


# --- the CRC implementation ----------------------------------------------------------------

def test_isal_is_chosen_without_the_kernel():
    """Without the native kernel (RMQTOOL_NATIVE=0, or no compiler at install) ISA-L is the
    choice; zlib's only when isal cannot be imported either."""
    code = ("from rmqtool.store import crc; from isal import isal_zlib; "
            "print(crc.fast_crc32 is isal_zlib.crc32, crc.IMPLEMENTATION.startswith('ISA-L'))")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "RMQTOOL_NATIVE": "0"},
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True"]


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=3000), st.integers(0, 40))
def test_fast_crc_is_rocketmqs_crc(data, cut):
    """The choice (the kernel's), ISA-L, zlib and crcmod agree, on bytes and on memoryview slices
    (what the hot loops pass)."""
    from isal import isal_zlib  # a dev dependency: installed wherever the tests run
    expected = crc.crc32_reference(data)
    assert crc.crc32(data) == expected == zlib.crc32(data) & crc.JAVA_CRC_MASK == \
        isal_zlib.crc32(data) & crc.JAVA_CRC_MASK
    assert crc.fast_crc32(data) & crc.JAVA_CRC_MASK == expected
    view = memoryview(data)[cut:]
    assert crc.fast_crc32(view) & crc.JAVA_CRC_MASK == crc.crc32_reference(data[cut:])


def test_hot_paths_call_the_crc_that_crc_py_chose(monkeypatch):
    """One place decides: replace crc.fast_crc32 and every scan calls the replacement."""
    calls = []

    def counting(data):
        calls.append(len(data))
        return zlib.crc32(data)

    monkeypatch.setattr(crc, "fast_crc32", counting)
    log = CommitLog(V5 / "v2-and-crc" / "store" / "commitlog")
    messages = [r for r in log.scan() if isinstance(r, Message)]
    bodies = sum(1 for m in messages if m.body)
    # each body, and each record's __CRC32# span (an empty body's CRC is 0, called or not)
    assert sum(1 for n in calls if n) == bodies + len(messages)
    calls.clear()
    tally = CrcTally()
    assert not [r for r in log.crc_scan(tally=tally) if not isinstance(r, Blank)]
    assert sum(1 for n in calls if n) == bodies + len(messages) and tally.messages == len(messages)
    calls.clear()
    assert crc.crc32(b"abc") == zlib.crc32(b"abc") & crc.JAVA_CRC_MASK and calls == [3]


# --- crc_scan == the full scan, less the good messages ---------------------------------------

def expected_crc_scan(log: CommitLog, **kw) -> tuple[list, list, int, int]:
    """What crc_scan must give, from the full scan: everything but the messages whose CRCs hold."""
    findings: list = []
    results = list(log.scan(check_crc=True, findings=findings, **kw))
    messages = [r for r in results if isinstance(r, Message)]
    wanted = [canonical(r) for r in results
              if not isinstance(r, Message) or r.body_crc_ok is False or r.property_crc_ok is False]
    return wanted, [f.to_json() for f in findings], len(messages), sum(m.store_size for m in messages)


def actual_crc_scan(log: CommitLog, **kw) -> tuple[list, list, int, int]:
    findings: list = []
    tally = CrcTally()
    got = [canonical(r) for r in log.crc_scan(findings=findings, tally=tally, **kw)]
    return got, [f.to_json() for f in findings], tally.messages, tally.message_bytes


@pytest.mark.parametrize("variant", E_VARIANTS)
def test_crc_scan_finds_the_flipped_body_byte(variant):
    """The broker's stores with one body byte XOR 0xFF: the one failing record, as the full scan reports it."""
    log = CommitLog(V4 / "crash" / variant / "input" / "store" / "commitlog")
    expected = expected_crc_scan(log)
    assert actual_crc_scan(log) == expected
    failing = [r for r in expected[0] if r[0] == "message"]
    assert len(failing) == 1
    bad = [r for r in log.crc_scan() if isinstance(r, Message)]
    assert len(bad) == 1 and bad[0].body_crc_ok is False and bad[0].property_crc_ok is None
    # the record holding the flipped byte, as the variant's truth.json says
    mutation = load_truth(V4 / "crash" / variant / "truth.json")["mutation"]
    assert bad[0].path.endswith(mutation["file"].split("/")[-1])
    assert bad[0].commit_log_offset == mutation["messagePhysicalOffset"]
    assert bad[0].position < mutation["flippedByteAtFilePosition"] < bad[0].position + bad[0].store_size


def test_crc_scan_ranges_and_window_edges(monkeypatch):
    log = CommitLog(V5 / "v2-and-crc" / "store" / "commitlog")
    messages = [r for r in log.scan() if isinstance(r, Message)]
    lo, hi = messages[40].commit_log_offset, messages[250].commit_log_offset + 7
    for kw in ({}, {"from_offset": lo}, {"to_offset": hi}, {"from_offset": lo, "to_offset": hi}):
        expected = expected_crc_scan(log, **kw)
        assert actual_crc_scan(log, **kw) == expected
    # a scan counts the messages that start inside the range: 40 to 250, since 250 starts before hi
    truth = load_truth(V5 / "v2-and-crc" / "truth.json")["truth"]["messages"]
    assert actual_crc_scan(log, from_offset=lo, to_offset=hi)[2] == sum(
        1 for m in truth if lo <= m["physicalOffset"] < hi)
    monkeypatch.setattr(commitlog_module, "CRC_WINDOW", 5000)  # records straddle every window end crc_scan reads
    assert actual_crc_scan(log) == expected_crc_scan(log)


def test_crc_scan_of_one_segment_counts_into_the_tally():
    log = CommitLog(V4 / "basic" / "store" / "commitlog")
    seg = log.segments[3]
    tally = CrcTally()
    results = list(crc_scan(seg, is_last=False, tally=tally))
    full = [r for r in log.scan() if isinstance(r, Message) and r.path == str(seg.path)]
    assert tally.messages == len(full) and tally.message_bytes == sum(m.store_size for m in full)
    assert len(results) == 1 and isinstance(results[0], Blank) and results[0].valid


@settings(max_examples=examples(20), deadline=None)
@given(data=st.data())
def test_crc_scan_equals_full_scan_on_random_damage(tmp_path_factory, data):
    """Flipped bits (most land in a body: CRC failures), zeros, garbage, bad lengths, a truncated file."""
    directory = damaged_commitlog(tmp_path_factory, data, body_sizes=[0, 5, 300, 700], max_damages=5,
                                  kinds=("flip", "flip", "flip", "zero", "garbage", "int"))
    log = CommitLog(directory)
    expected = expected_crc_scan(log)
    assert actual_crc_scan(log) == expected


def test_property_crc_failure_alone_is_reported(tmp_path):
    """5.x __CRC32#: a header byte changed leaves the body CRC good, the record CRC bad."""
    spec = GenSpec(segment_size=32 << 10, segments=1, body_size=200, append_prop_crc=True)
    result = build_commitlog(tmp_path / "commitlog", spec)
    seg = tmp_path / "commitlog" / "00000000000000000000"
    raw = bytearray(seg.read_bytes())
    log = CommitLog(result.commitlog)
    third = [r for r in log.scan() if isinstance(r, Message)][2]
    raw[third.position + 16] ^= 0x40  # flag: read by nothing that checks lengths
    seg.write_bytes(bytes(raw))
    bad = [r for r in log.crc_scan() if isinstance(r, Message)]
    assert [(m.position, m.body_crc_ok, m.property_crc_ok) for m in bad] == [(third.position, True, False)]
    assert actual_crc_scan(log) == expected_crc_scan(log)


# --- properties: the broker's reading, fast path or careful ------------------------------------

_ALPHABET = st.sampled_from(["a", "bc", "é", "\x01", "\x02", "文", "\x01\x01", "\x02\x02", "=", "😀"])


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(_ALPHABET, max_size=30).map("".join), st.booleans())
def test_properties_fast_path_is_string2messageProperties(text, via_message):
    parsed, ok = parse_properties(text.encode("utf-8"))
    assert ok and parsed == string_to_properties(text)
    assert list(parsed.items()) == list(string_to_properties(text).items())  # same order: last duplicate wins
    if via_message:
        m = Message(0, 1, 0, 0, 0, 0, 0, 0, 0, 0, b"\0" * 4, 0, 0, b"\0" * 4, 0, 0, 0, b"", "T", text.encode())
        assert m.properties == parsed and m.properties_utf8_ok is True


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.sampled_from([b"k", b"v", b"\x01", b"\x02", b"\xff", b"\xc3", b"\xc3\xa9"]), max_size=20).map(
    b"".join))
def test_properties_of_invalid_utf8_are_read_as_java_does(raw):
    parsed, ok = parse_properties(raw)
    try:
        raw.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    assert ok == valid and parsed == string_to_properties(raw.decode("utf-8", "replace"))


def test_read_bench_full_decode_reads_every_field():
    """The bench's full decode is honest: decode_all names every field of a Message."""
    assert set(bench_read.FULL_DECODE_FIELDS) <= set(bench_read.decode_all.__code__.co_names)
    public = {name for name in Message.__slots__ if not name.startswith("_")} | {"properties"}
    located = {"path", "position", "body_crc_ok", "property_crc_ok", "topic_utf8_ok"}  # where and checks, not fields
    assert public - located == set(bench_read.FULL_DECODE_FIELDS)
