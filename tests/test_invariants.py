"""Invariants, checked with hypothesis on broker-written data and random damage to it.

* A segment scan tiles the file: every byte of [0, size) is covered by exactly one result
  (a message, the blank record and the rest of the file it claims, a corrupt region) or
  lies in the all-zero tail after the last one.
* Damage is local: after random damage inside one segment, every record the damage did
  not touch comes back identical.
* fastjson text round-trips: loads(dumps(x)) == x for documents like the broker's config
  files (unquoted integer keys, escapes, non-ASCII, nested maps and lists, longs).
"""
from __future__ import annotations

import pathlib
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import canonical, examples, fixture_commitlogs
from rmqtool.formats.config import dumps_fastjson, loads_fastjson
from rmqtool.store.commitlog import Blank, Corrupt, scan_segment
from rmqtool.store.message import Message
from rmqtool.store.segments import discover

# every commit log segment of the fixtures that holds records (the broker's preallocated
# next segment is all zeros: its scan is empty, which the tiling test covers once)
SEGMENTS = sorted({seg.path for d in fixture_commitlogs() for seg in discover(d).segments}, key=str)
WRITTEN = [p for p in SEGMENTS if p.read_bytes()[:8] != bytes(8)]


def _renamed(r, old: str, new: str) -> tuple:
    return tuple(new if x == old else x for x in canonical(r))


def _extent(r, size: int) -> tuple[int, int]:
    """The bytes of the file a result accounts for."""
    if isinstance(r, Message):
        return r.position, r.position + r.store_size
    if isinstance(r, Blank):
        return r.position, size  # the blank record claims the rest of the file
    assert isinstance(r, Corrupt)
    return r.position, r.position + r.size


def _assert_tiles(results: list, data: bytes, base_offset: int):
    pos = 0
    for r in results:
        start, end = _extent(r, len(data))
        assert start == pos, f"{r!r} starts at {start}, the previous result ended at {pos}"
        assert start < end <= len(data), f"{r!r} covers [{start}, {end}) of a {len(data)}-byte file"
        offset = r.commit_log_offset if isinstance(r, Message) else r.offset
        assert offset == base_offset + start
        pos = end
    assert not any(data[pos:]), f"non-zero bytes after the last result at {pos}"


def _segment_of(path: pathlib.Path):
    return next(s for s in discover(path.parent).segments if s.path == path)


@pytest.mark.parametrize("path", SEGMENTS, ids=lambda p: "/".join(p.parts[-6:]))
def test_fixture_scans_tile_their_segments(path):
    seg = _segment_of(path)
    results = list(scan_segment(seg))
    _assert_tiles(results, path.read_bytes(), seg.base_offset)


@st.composite
def damage(draw, size: int):
    """(kind, start, end, bytes or None): one damaged range of a file of `size` bytes."""
    kind = draw(st.sampled_from(("flip", "zero", "random", "truncate")))
    start = draw(st.integers(0, size - 1))
    if kind == "truncate":
        return kind, start, size, None
    if kind == "flip":
        return kind, start, start + 1, bytes([1 << draw(st.integers(0, 7))])
    end = min(size, start + draw(st.integers(1, 600)))
    fill = bytes(end - start) if kind == "zero" else draw(st.binary(min_size=end - start, max_size=end - start))
    return kind, start, end, fill


def _apply(data: bytes, hit: tuple) -> bytes:
    kind, start, end, fill = hit
    if kind == "truncate":
        return data[:start]
    if kind == "flip":
        return data[:start] + bytes([data[start] ^ fill[0]]) + data[end:]
    return data[:start] + fill + data[end:]


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damage_is_local_and_scans_still_tile(data):
    path = data.draw(st.sampled_from(WRITTEN))
    original = path.read_bytes()
    seg = _segment_of(path)
    before = [canonical(r) for r in scan_segment(seg)]
    hits = data.draw(st.lists(damage(len(original)), min_size=1, max_size=3))
    damaged = original
    for hit in sorted(hits, key=lambda h: h[0] == "truncate"):  # cut last, so positions stay put
        damaged = _apply(damaged, hit)
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp) / path.name
        copy.write_bytes(damaged)
        copy_seg = _segment_of(copy)
        results = list(scan_segment(copy_seg))
        _assert_tiles(results, damaged, copy_seg.base_offset)
        after = [_renamed(r, str(copy), str(path)) for r in results]
    # a record is touched when any of its bytes changed (a zeroed run of zeros changes nothing)
    for r in before:
        if r[0] != "message":
            continue
        position, store_size = r[3], r[4]
        if damaged[position:position + store_size] == original[position:position + store_size]:
            assert r in after, f"untouched record at {position} lost after {hits!r}"
    if damaged == original:
        assert after == before


# --- fastjson ------------------------------------------------------------------------------

LONGS = st.integers(-(1 << 63), (1 << 63) - 1)
STRINGS = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20) | st.sampled_from(
    ["", "\"", "\\", "a\\\"b", "\n\t\r\b\f", "\u0000\u001f\u007f\u0080\u009f", "城@group", "é", "😀", "%RETRY%g@g"])
SCALARS = st.none() | st.booleans() | LONGS | STRINGS | st.floats(allow_nan=False, allow_infinity=False)
KEYS = LONGS | STRINGS


def _no_none_in_maps(value):
    """fastjson's MapSerializer leaves out null values, so a map's None does not come back."""
    if isinstance(value, dict):
        return {k: _no_none_in_maps(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_none_in_maps(v) for v in value]
    return value


DOCUMENTS = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(KEYS, inner, max_size=5),
                         max_leaves=30).filter(lambda x: isinstance(x, (dict, list)))


@settings(max_examples=examples(300), deadline=None)
@given(DOCUMENTS, st.booleans())
def test_fastjson_round_trips(document, pretty):
    expected = _no_none_in_maps(document)
    assert loads_fastjson(dumps_fastjson(document, pretty)) == expected


@settings(max_examples=examples(100), deadline=None)
@given(st.dictionaries(st.integers(0, 2**31 - 1), LONGS, min_size=1, max_size=8))
def test_integer_keys_are_written_unquoted_and_read_as_ints(offsets):
    text = dumps_fastjson({"offsetTable": {"Topic@group": offsets}})
    assert all(f"{k}:{v}" in text for k, v in offsets.items())
    assert loads_fastjson(text)["offsetTable"]["Topic@group"] == offsets
