"""Index file checks (``index/``): headers, hash chains and entries against the commit log.

Slots and entries are read as numpy arrays. What ``IndexFile.putKey`` writes is checked
whole, without walking chains one by one: each entry's prevIndex must be the newest
earlier entry of its slot, each slot must name the newest entry of its slot, the
header's counts and begin/end offsets and times must be those of the first and last
entries. Each entry must point at a message carrying a key (``topic#key``, or its
UNIQ_KEY) of that hash, stored at ``beginTimestamp + timeDiff`` seconds; and every key
of every message inside the range the index files claim must have its entry.
"""
from __future__ import annotations

import os
from typing import Callable, Iterator

import numpy as np

from rmqtool.findings import (INDEX_CHAIN_BROKEN, INDEX_ENTRY_MISMATCH, INDEX_ENTRY_NO_RECORD,
                              INDEX_HEADER_MISMATCH, INDEX_KEY_NOT_INDEXED, INDEX_MISSING,
                              INDEX_TIMESTAMP_BACKWARDS, RECORD_TRUNCATED, Finding, finding)
from rmqtool.formats.indexfile import FIRST_INDEX, INDEX_HEADER_SIZE, IndexEntry, entry_position
from rmqtool.store.indexfile import IndexFile, list_index_files
from rmqtool.store.arrays import dtype_of, read_records, runs
from rmqtool.verify.commitlog import CommitLogData

ENTRY_DTYPE = dtype_of(IndexEntry)
SLOT_DTYPE = np.dtype(">i4")
INT_MAX = (1 << 31) - 1


def expected_time_diff(store_timestamps: np.ndarray, begin_timestamp: int) -> np.ndarray:
    """IndexFile.putKey's timeDiff: whole seconds after beginTimestamp (Java's truncating
    division), 0 when the file has no begin time or the clock went back, capped at int max."""
    if begin_timestamp <= 0:
        return np.zeros(len(store_timestamps), np.int64)
    diff = store_timestamps - begin_timestamp
    np.maximum(diff, 0, out=diff)  # a clock gone back gives 0 either way
    seconds = diff // 1000
    return np.minimum(seconds, INT_MAX, out=seconds)


_CHUNK = 1 << 16  # entries mapped to records at once: temporaries of a few MiB, reused, whatever the file's size


class RecordKeys:
    """Every index key of every message (row order), and which of them an entry covers."""

    def __init__(self, data: CommitLogData):
        # every key offset is its message's; ascending
        self.rows = data.key_rows
        self.hashes = data.key_hashes
        self.covered = np.zeros(len(self.rows), bool)

    def cover(self, rows: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """For each entry (message row, key hash): whether the message has a key of that hash;
        every such key is marked covered (a key given twice is indexed twice)."""
        rows = rows.astype(self.rows.dtype)  # else searchsorted copies the whole key table to the rows' type
        start = np.searchsorted(self.rows, rows, side="left")
        count = np.searchsorted(self.rows, rows, side="right") - start
        has = np.zeros(len(rows), bool)
        for j in range(int(count.max(initial=0))):  # a message's keys: usually one or two
            at = np.flatnonzero(j < count)
            k = start[at] + j
            eq = self.hashes[k] == hashes[at]
            has[at[eq]] = True
            self.covered[k[eq]] = True
        return has


def check_index_file(f: IndexFile, data: CommitLogData, keys: RecordKeys) -> list[Finding]:
    """Findings of one index file; marks in ``keys`` the message keys its entries cover.

    Entries are read and matched with the commit log a chunk at a time; only each entry's
    slot and prevIndex are kept whole, for the chains."""
    path = str(f.path)
    h = f.header
    found: list = []
    if f.hash_slot_num is None:
        return found
    count = h.index_count - FIRST_INDEX  # entries 1..indexCount-1
    if h.index_count > f.index_num or h.index_count < 0:
        found.append(finding(INDEX_HEADER_MISMATCH, path, 0, f"indexCount {h.index_count} is outside "
                             f"0..{f.index_num} (maxIndexNum)"))
        count = max(0, min(count, f.index_num - FIRST_INDEX))
    count = max(count, 0)
    slots = read_records(path, SLOT_DTYPE, INDEX_HEADER_SIZE, f.hash_slot_num, native=True)
    first_at = entry_position(f.hash_slot_num, FIRST_INDEX)
    size = ENTRY_DTYPE.itemsize
    slot = np.empty(count, np.int32)
    prev = np.empty(count, np.int32)
    ends: list = []  # phy offsets of the first and last entry
    no_record: list = []
    mismatch: list = []
    read = 0
    while read < count:
        entries = read_records(path, ENTRY_DTYPE, first_at + read * size, min(_CHUNK, count - read))
        if not len(entries):
            break
        numbers = np.arange(FIRST_INDEX + read, FIRST_INDEX + read + len(entries), dtype=np.int64)
        key_hash = entries["key_hash"].astype(np.int64)
        phy = entries["phy_offset"].astype(np.int64)
        slot[read:read + len(entries)] = np.where(key_hash >= 0, key_hash % f.hash_slot_num, -1)
        prev[read:read + len(entries)] = entries["prev_index"]
        ends = [int(phy[0])] if not ends else ends[:1]
        ends.append(int(phy[-1]))
        _match_entries(path, first_at, data, keys, h.begin_timestamp, entries, numbers, key_hash, phy,
                       no_record, mismatch)
        read += len(entries)
    slot, prev = slot[:read], prev[:read]
    if read < count:
        found.append(finding(RECORD_TRUNCATED, path, first_at + read * size,
                             f"indexCount {h.index_count} runs past the file end"))
    found += _header_findings(f, data, slots, np.array(ends[:1] + ends[-1:], np.int64))
    if not _chains_whole(slots, FIRST_INDEX, slot, prev):  # the common case proven on int32 arrays
        numbers = np.arange(FIRST_INDEX, FIRST_INDEX + read, dtype=np.int64)
        found += _chain_findings(f, slots, numbers, first_at + (numbers - FIRST_INDEX) * size,
                                 slot.astype(np.int64), prev.astype(np.int64))
    return found + no_record + mismatch


def _match_entries(path: str, first_at: int, data: CommitLogData, keys: RecordKeys, begin_timestamp: int,
                   entries: np.ndarray, numbers: np.ndarray, key_hash: np.ndarray, phy: np.ndarray,
                   no_record: list, mismatch: list) -> None:
    """Entries against the records they point at (entries before the commit log's first file
    point at deleted data): a message starts there, carries a key of that hash, and timeDiff
    is its store time."""
    def position(k: int) -> int:
        return first_at + (int(numbers[k]) - FIRST_INDEX) * ENTRY_DTYPE.itemsize

    live = np.flatnonzero(phy >= data.min_offset)
    rows, hit = data.locate(phy[live])
    for k in live[~hit]:
        no_record.append(finding(INDEX_ENTRY_NO_RECORD, path, position(int(k)),
                                 f"entry {int(numbers[k])} points at commit log offset {int(phy[k])}, "
                                 + ("at or past the commit log's end" if phy[k] >= data.end
                                    else "where no message starts"),
                                 commit_log_offset=int(phy[k]), entry=int(numbers[k])))
    ok, ok_rows = live[hit], rows[hit]
    has_key = keys.cover(ok_rows, key_hash[ok])
    want = expected_time_diff(data["store_timestamp"][ok_rows], begin_timestamp)
    time_ok = entries["time_diff"][ok].astype(np.int64) == want
    for j in np.flatnonzero(~has_key | ~time_ok):
        k = int(ok[j])
        why = []
        if not has_key[j]:
            why.append(f"the message there has no key (topic#key or UNIQ_KEY) of hash {int(key_hash[k])}")
        if not time_ok[j]:
            why.append(f"timeDiff {int(entries['time_diff'][k])} s, the message's store time gives {int(want[j])} s")
        mismatch.append(finding(INDEX_ENTRY_MISMATCH, path, position(k),
                                f"entry {int(numbers[k])} (commit log offset {int(phy[k])}): " + "; ".join(why),
                                commit_log_offset=int(phy[k]), entry=int(numbers[k])))


def _header_findings(f: IndexFile, data: CommitLogData, slots: np.ndarray, phy: np.ndarray) -> list[Finding]:
    h = f.header
    path = str(f.path)
    found = []
    used = int(np.count_nonzero(slots > 0))
    if used != h.hash_slot_count:
        found.append(finding(INDEX_HEADER_MISMATCH, path, 0, f"hashSlotCount {h.hash_slot_count}, but "
                             f"{used} slots are in use"))
    if not len(phy):
        return found
    if h.begin_phy_offset != phy[0] or h.end_phy_offset != phy[-1]:
        found.append(finding(INDEX_HEADER_MISMATCH, path, 0, f"beginPhyOffset {h.begin_phy_offset} and "
                             f"endPhyOffset {h.end_phy_offset}, but the entries run from {int(phy[0])} "
                             f"to {int(phy[-1])}"))
    rows, hit = data.locate(np.array([h.begin_phy_offset, h.end_phy_offset], np.int64))
    if hit.all():
        begin_ts, end_ts = (int(x) for x in data["store_timestamp"][rows])
        if (begin_ts, end_ts) != (h.begin_timestamp, h.end_timestamp):
            found.append(finding(INDEX_HEADER_MISMATCH, path, 0, f"beginTimestamp {h.begin_timestamp} and "
                                 f"endTimestamp {h.end_timestamp}, but the messages at begin/endPhyOffset were "
                                 f"stored at {begin_ts} and {end_ts}"))
        elif end_ts < begin_ts:
            found.append(finding(INDEX_TIMESTAMP_BACKWARDS, path, 0, f"endTimestamp {end_ts} is before "
                                 f"beginTimestamp {begin_ts}: the store clock went back while this file filled"))
    return found


def _chains_whole(slots: np.ndarray, first: int, slot: np.ndarray, prev: np.ndarray) -> bool:
    """Whether every chain is what putKey writes, proven without sorting (the common case);
    ``slot`` and ``prev`` (int32) are those of entries ``first``, ``first + 1``...

    If each entry's prevIndex is 0 or an earlier entry of the same slot, and no two entries
    name the same one, the entries form chains, each from an entry naming 0 (its start) to
    one nobody names (its head). If moreover each head is what its slot names, and as many
    slots are in use as there are heads and starts, each slot holds one chain, and each
    entry names the entry of its slot just before it: the first can only name 0, the
    second only the first, and so on. Arrays stay small (bools, int32: an index file's
    entry numbers fit) so the random reads stay in cache and memory in bounds.
    """
    n = len(slot)
    if not n:
        return not slots.any()
    if (slot < 0).any() or n + first >= INT_MAX:
        return False
    named = np.zeros(n, bool)
    linked_count = 0
    for a in range(0, n, _CHUNK):  # temporaries of a chunk, not of the file
        b = min(a + _CHUNK, n)
        p = prev[a:b]
        # each named entry is an earlier one: prev - first (its index) below the entry's own index
        if (p - np.int32(first) >= np.arange(a, b, dtype=np.int32)).any():
            return False
        linked = p > 0
        before = p[linked] - np.int32(first)  # index of the named entry
        if (before < 0).any() or (slot[before] != slot[a:b][linked]).any():
            return False
        named[before] = True
        linked_count += len(before)
    if np.count_nonzero(named) != linked_count:  # an entry named twice
        return False
    named = ~named  # now: the heads
    heads = int(np.count_nonzero(named))
    if heads != n - linked_count or heads != np.count_nonzero(slots):
        return False
    for a in range(0, n, _CHUNK):
        at = np.flatnonzero(named[a:a + _CHUNK]) + a
        if not (slots[slot[at]] == at + first).all():
            return False
    return True


def _chain_findings(f: IndexFile, slots: np.ndarray, numbers: np.ndarray, position: np.ndarray,
                    slot: np.ndarray, prev: np.ndarray) -> list[Finding]:
    """putKey links each entry to the slot's newest earlier entry and points the slot at it."""
    path = str(f.path)
    n = len(numbers)
    expected_prev = np.zeros(n, np.int64)
    newest = np.zeros(len(slots), np.int64)  # each slot's newest entry, 0: none
    if n:
        order = np.argsort(slot, kind="stable")  # by slot, then write order (numbers increase)
        s, num = slot[order], numbers[order]
        same = np.concatenate(([False], s[1:] == s[:-1]))
        expected_prev[order] = np.where(same, np.concatenate(([0], num[:-1])), 0)
        last_of_slot = np.concatenate((s[1:] != s[:-1], [True])) & (s >= 0)
        newest[s[last_of_slot]] = num[last_of_slot]
    found = []
    bad = np.flatnonzero((prev != expected_prev) | (slot < 0))
    for k in bad:
        p = int(prev[k])
        if slot[k] < 0:
            why = f"a negative keyHash {int(slot[k])}"
        elif p >= numbers[k] and p > 0:
            why = f"prevIndex {p} is not an earlier entry: the chain loops or runs forward"
        elif p < 0 or p > f.header.index_count:
            why = f"prevIndex {p} is outside the entries"
        else:
            why = f"prevIndex {p}, but the slot's previous entry is {int(expected_prev[k])}"
        found.append(finding(INDEX_CHAIN_BROKEN, path, int(position[k]), f"entry {int(numbers[k])}: {why}",
                             entry=int(numbers[k])))
    for s_ in np.flatnonzero((slots != 0) & (slots != newest)).tolist():
        value, want = int(slots[s_]), int(newest[s_])
        found.append(finding(INDEX_CHAIN_BROKEN, path, INDEX_HEADER_SIZE + 4 * s_,
                             f"slot {s_} names entry {value}, but its newest entry is {want}", slot=s_))
    for s_ in np.flatnonzero((slots == 0) & (newest != 0)).tolist():
        found.append(finding(INDEX_CHAIN_BROKEN, path, INDEX_HEADER_SIZE + 4 * s_,
                             f"slot {s_} is empty, but entry {int(newest[s_])} hashes to it", slot=s_))
    return found


def check_index(store_root: str | os.PathLike, data: CommitLogData,
                on_bytes: Callable[[int], None] | None = None) -> Iterator[Finding]:
    """Every index file, then the keys of the messages inside the range they claim."""
    listing = list_index_files(store_root)
    files = listing.open_all()
    yield from listing.findings
    keys = RecordKeys(data)
    claimed = []
    try:
        for f in files:
            yield from f.findings
            yield from check_index_file(f, data, keys)
            if f.header.index_count > FIRST_INDEX:
                claimed.append((f.header.begin_phy_offset, f.header.end_phy_offset))
            if on_bytes is not None:
                on_bytes(f.file_size)
    finally:
        for f in files:
            f.close()
    keyed = data["has_keys"]
    if not files:
        if keyed.any():
            root = os.path.join(os.fspath(store_root), "index")
            yield finding(INDEX_MISSING, root, None, f"{int(np.count_nonzero(keyed))} messages carry keys or a "
                          f"UNIQ_KEY, but there is no index file: key queries must scan the commit log",
                          messages=int(np.count_nonzero(keyed)))
        return
    if not claimed:
        return
    yield from _not_indexed(data, keys, min(c[0] for c in claimed), max(c[1] for c in claimed))


def _not_indexed(data: CommitLogData, keys: RecordKeys, lo: int, hi: int) -> Iterator[Finding]:
    """Messages in [lo, hi] with a key that has no entry, as runs of consecutive keyed messages."""
    key_offsets = data["offset"][keys.rows]
    inside = (key_offsets >= lo) & (key_offsets <= hi)
    offsets = key_offsets[inside]
    missing_keys = ~keys.covered[inside]
    if not missing_keys.any():
        return
    missing_offsets = np.unique(offsets[missing_keys])
    keyed_rows = np.flatnonzero(data["has_keys"] & (data["offset"] >= lo) & (data["offset"] <= hi))
    flags = np.isin(data["offset"][keyed_rows], missing_offsets)
    for start, stop in runs(flags):
        first, last = int(keyed_rows[start]), int(keyed_rows[stop - 1])
        offset = int(data["offset"][first])
        path, position = data.where(offset)
        topic, queue_id = data.topic_queues[int(data["tq"][first])]
        yield finding(INDEX_KEY_NOT_INDEXED, path, position,
                      f"{stop - start} message(s) with keys at commit log offsets {offset}..{int(data['offset'][last])} "
                      f"have keys no index entry covers, inside the indexed range {lo}..{hi}",
                      commit_log_offset=offset, topic=topic, queue_id=queue_id,
                      queue_offset=int(data["queue_offset"][first]), messages=stop - start)
