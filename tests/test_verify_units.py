"""verify's building blocks: the vectorised key hash and the numpy unit dtypes agree with
the one reading of each (formats.indexfile.index_key_hash, the derived structs)."""
from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
from hypothesis import given

from rmqtool.formats.consumequeue import BatchCqUnit, CqUnit
from rmqtool.formats.derive import struct_of
from rmqtool.formats.indexfile import IndexEntry, index_key_hash
from rmqtool.store.arrays import dtype_of, runs
from rmqtool.verify.keyhash import index_key_hashes


@given(st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=30))
def test_vectorised_key_hash_is_index_key_hash(keys):
    assert index_key_hashes(keys).tolist() == [index_key_hash(k) for k in keys]


def test_key_hash_of_integer_min_is_zero():
    # "polygenelubricants" hashes to Integer.MIN_VALUE: indexKeyHashMethod gives 0
    assert index_key_hashes(["polygenelubricants"]).tolist() == [index_key_hash("polygenelubricants")] == [0]


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


def test_key_hashes_in_chunks_are_the_hashes_of_all_at_once(monkeypatch):
    import rmqtool.verify.keyhash as keyhash

    keys = [f"BenchTopic#order-{i}" for i in range(1000)] + ["polygenelubricants"]
    whole = keyhash.index_key_hashes(keys).tolist()
    monkeypatch.setattr(keyhash, "_CHUNK", 7)  # chunk edges land inside the list, and on its last key
    assert keyhash.index_key_hashes(keys).tolist() == whole == [index_key_hash(k) for k in keys]
