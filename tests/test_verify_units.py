"""verify's building blocks: the numpy unit dtypes agree with the derived structs (the key
hash's two forms are tested in test_answers.py)."""
from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
from hypothesis import given

from rmqtool.formats.consumequeue import BatchCqUnit, CqUnit
from rmqtool.formats.derive import struct_of
from rmqtool.formats.indexfile import IndexEntry
from rmqtool.store.arrays import dtype_of, runs


def test_unit_dtypes_read_what_the_structs_read():
    for schema in (CqUnit, BatchCqUnit, IndexEntry):
        s = struct_of(schema)
        raw = bytes(range(256))[:s.size * 3] if s.size * 3 <= 256 else bytes(i % 251 for i in range(s.size * 3))
        arr = np.frombuffer(raw, dtype=dtype_of(schema))
        for row, fields in zip(arr, s.iter_unpack(raw)):
            assert tuple(bytes(v) if isinstance(v, (np.void, bytes)) else int(v) for v in row.tolist()) == fields


def test_runs():
    assert runs(np.array([0, 1, 1, 0, 1], bool)) == [(1, 3), (4, 5)]
    assert runs(np.array([], bool)) == []


@given(st.lists(st.lists(st.integers(0, 3), max_size=3), min_size=1, max_size=12), st.data())
def test_index_entries_against_keys(key_hashes_by_row, data):
    """_has_key (with its one-for-one shortcut) says, for each entry, whether its message has a
    key of its hash, and marks every such key covered: as a plain search over the keys says."""
    import types
    from rmqtool.verify.index import _has_key
    key_rows = [r for r, hs in enumerate(key_hashes_by_row) for _ in hs]
    key_hashes = [h for hs in key_hashes_by_row for h in hs]
    band = types.SimpleNamespace(messages=len(key_hashes_by_row), key_rows=np.array(key_rows, np.int32),
                                 key_hashes=np.array(key_hashes, np.int32))
    pairs = list(zip(key_rows, key_hashes))
    kind = data.draw(st.sampled_from(["tail", "any"]))
    if kind == "tail" and pairs:
        entries = pairs[data.draw(st.integers(0, len(pairs) - 1)):]
    else:
        entries = data.draw(st.lists(st.tuples(st.integers(0, len(key_hashes_by_row) - 1), st.integers(0, 3)),
                                     max_size=8))
    rows = np.array([r for r, _ in entries], np.int64)
    hashes = np.array([h for _, h in entries], np.int64)
    covered = np.zeros(len(pairs), bool)
    has = _has_key(band, rows, hashes, covered)
    assert has.tolist() == [(r, h) in pairs for r, h in entries]
    assert covered.tolist() == [(r, h) in entries for r, h in pairs]
