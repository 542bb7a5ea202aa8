"""verify holds one band of the commit log at a time: units and index entries are matched
as their bands pass, those out of order at the end against their bands checked again, and
what is held ahead stays a chunk whatever the number of items."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import V4
from rmqtool.findings import CONSUME_QUEUE_UNIT_MISMATCH, INDEX_ENTRY_MISMATCH
from rmqtool.formats.indexfile import FIRST_INDEX, entry_position
from rmqtool.store.consumequeue import open_consume_queues
from rmqtool.store.indexfile import list_index_files
from rmqtool.verify import commitlog as verify_commitlog
from rmqtool.verify.lookups import MAX_CHUNK, OffsetLookups
from rmqtool.verify.run import Verify, VerifyOptions

CQ_UNIT = 20
PHY_OFFSET_AT = 4  # keyHash, then phyOffset
# small bands over basic's 3 MB log: 49 of them, the swapped items' far apart (test_verify_split
# cuts at 4,099 bytes, inside and across records, for every fixture)
SMALL_BANDS = 65537


def _findings(store, jobs: int = 1) -> list:
    return [(f.id, f.path, f.offset, f.message, f.details) for f in Verify(store, VerifyOptions(jobs=jobs)).findings()]


def _swap(path, a: int, b: int, width: int) -> tuple[bytes, bytes]:
    data = bytearray(path.read_bytes())
    x, y = bytes(data[a:a + width]), bytes(data[b:b + width])
    data[a:a + width], data[b:b + width] = y, x
    path.write_bytes(bytes(data))
    return x, y


@pytest.mark.parametrize("split", [1 << 40, SMALL_BANDS])
def test_units_out_of_order_are_matched_late(store_copy, monkeypatch, split):
    """Two units of a queue swapped far apart: with small bands the one pointing back is late,
    and is matched against its band checked again; each unit disagrees on its queue offset,
    every message is still pointed at, as with the whole log in one band."""
    store = store_copy(V4 / "basic" / "store")
    queue = max(open_consume_queues(store).queues, key=lambda q: q.max_offset)
    seg = queue.segments[0]
    units = seg.size // CQ_UNIT
    assert units > 10
    first, last = 1, units - 2
    _swap(seg.path, first * CQ_UNIT, last * CQ_UNIT, CQ_UNIT)
    monkeypatch.setattr(verify_commitlog, "VERIFY_SPLIT", 1 << 40)
    whole = _findings(store)
    monkeypatch.setattr(verify_commitlog, "VERIFY_SPLIT", split)
    assert _findings(store) == whole
    assert _findings(store, jobs=2) == whole
    mismatches = [f for f in whole if f[0] == CONSUME_QUEUE_UNIT_MISMATCH]
    assert [(f[1], f[2]) for f in mismatches] == [(str(seg.path), first * CQ_UNIT), (str(seg.path), last * CQ_UNIT)]
    assert f"queue offset {first} (record: {last})" in mismatches[0][3]
    assert f"queue offset {last} (record: {first})" in mismatches[1][3]
    assert not [f for f in whole if f[0] in ("messageNotInConsumeQueue", "consumeQueueUnitNoRecord")]


def test_index_entries_out_of_order_are_matched_late(store_copy, monkeypatch):
    """Two entries' phyOffsets swapped: each now points at the other's message, one of them
    behind the bands passed; both are found and judged (keys) as with one band."""
    store = store_copy(V4 / "basic" / "store")
    listing = list_index_files(store)
    files = listing.open_all()
    try:
        f = max(files, key=lambda x: x.header.index_count)
        path, slots, count = f.path, f.hash_slot_num, f.header.index_count - FIRST_INDEX
    finally:
        for x in files:
            x.close()
    assert count > 10
    a, b = entry_position(slots, FIRST_INDEX + 1), entry_position(slots, FIRST_INDEX + count - 2)
    _swap(path, a + PHY_OFFSET_AT, b + PHY_OFFSET_AT, 8)
    monkeypatch.setattr(verify_commitlog, "VERIFY_SPLIT", 1 << 40)
    whole = _findings(store)
    monkeypatch.setattr(verify_commitlog, "VERIFY_SPLIT", SMALL_BANDS)
    assert _findings(store) == whole
    assert sorted(f[2] for f in whole if f[0] == INDEX_ENTRY_MISMATCH and f[1] == str(path)) == [a, b]


def test_lookups_hold_a_chunk_ahead_and_keep_the_order():
    """Items read as bands pass: each band gets exactly its items in order, an item behind
    the band goes to the late ones, and what is held ahead stays within a chunk or two."""
    rng = np.random.default_rng(7)
    offsets = np.cumsum(rng.integers(1, 2000, 300_000)).astype(np.int64)
    offsets[5000], offsets[200_000] = offsets[200_000], offsets[5000]  # one far ahead, one far behind
    items = np.zeros(len(offsets), np.dtype([("offset", np.int64), ("n", np.int64)]))
    items["offset"], items["n"] = offsets, np.arange(len(offsets))
    at = [0]

    def read(n):
        if at[0] >= len(items):
            return None
        got = items[at[0]:at[0] + n]
        at[0] += len(got)
        return got

    lookups = OffsetLookups(read)
    edges = np.linspace(0, offsets.max() + 1, 200).astype(np.int64)
    taken, held = [], 0
    for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist()):
        got = lookups.take(lo, hi)
        if got is not None:
            assert ((got["offset"] >= lo) & (got["offset"] < hi)).all()
            assert (np.diff(got["n"]) > 0).all()
            taken.append(got["n"])
        held = max(held, 0 if lookups.items is None else len(lookups.items))
    lookups.finish()
    late = lookups.late_items()
    assert late is not None and late["n"].tolist() == [200_000]  # the one behind the bands that had passed
    assert sorted(np.concatenate(taken).tolist() + late["n"].tolist()) == list(range(len(offsets)))
    assert held <= 2 * MAX_CHUNK


def test_raw_row_copies_equal_numpy_record_copies():
    """subset and joined (rows copied as raw bytes) give exactly what numpy's own record
    indexing and concatenation give, for masks, indices and the unaligned unit dtype."""
    from rmqtool.verify.consumequeue import ITEM_DTYPE
    from rmqtool.verify.lookups import joined, subset
    rng = np.random.default_rng(7)
    items = np.zeros(1000, ITEM_DTYPE)
    for name in ITEM_DTYPE.names:
        items[name] = rng.integers(-2**31, 2**31, len(items))
    mask = rng.random(len(items)) < 0.3
    picks = rng.integers(0, len(items), 50)
    assert subset(items, mask).tobytes() == items[mask].tobytes()
    assert subset(items, picks).tobytes() == items[picks].tobytes()
    assert subset(items, mask).dtype == ITEM_DTYPE
    parts = [items[:10], items[500:], items[10:500:3]]
    assert joined(parts).tobytes() == np.concatenate(parts).tobytes()


def test_records_missing_their_crc_entry_across_bands(store_copy, monkeypatch):
    """Records whose __CRC32# entry is gone wait as (band, row) until a later record carries one;
    then their bands are checked again and each is reported, as with one band. Those after the
    last carrying record are never reported (the setting may have been turned off)."""
    from conftest import V5, load_truth
    crc = V5 / "v2-and-crc"
    store, truth = store_copy(crc / "store"), load_truth(crc / "truth.json")
    carrying = [m for m in truth["truth"]["messages"] if "propertyCrc32OffsetInRecord" in m]
    carrying.sort(key=lambda m: m["physicalOffset"])
    lost = [carrying[28]] + carrying[30:90] + carrying[-3:]  # one, a run, and the last three
    for m in lost:  # a damaged separator leaves no entry at all
        commit_log = sorted((store / "commitlog").iterdir())
        seg = [p for p in commit_log if int(p.name) <= m["physicalOffset"]][-1]
        data = bytearray(seg.read_bytes())
        data[m["physicalOffset"] - int(seg.name) + m["propertyCrc32OffsetInRecord"] + 8] = ord("x")
        seg.write_bytes(bytes(data))
    monkeypatch.setattr(verify_commitlog, "VERIFY_SPLIT", 1 << 40)
    whole = _findings(store)
    missing = [f[4]["commit_log_offset"] for f in whole if f[0] == "propertyCrcMissing"]
    assert missing == [m["physicalOffset"] for m in [carrying[28]] + carrying[30:90]]
    again = []
    band_again = verify_commitlog.CommitLogCheck.band_again
    monkeypatch.setattr(verify_commitlog.CommitLogCheck, "band_again",
                        lambda self, k: again.append(k) or band_again(self, k))
    monkeypatch.setattr(verify_commitlog, "VERIFY_SPLIT", 4099)
    assert _findings(store) == whole
    assert len(again) > 1  # the run spanned bands that were checked again
    assert _findings(store, jobs=2) == whole
