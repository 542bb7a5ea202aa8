"""Index file checks (``index/``): headers, hash chains and entries against the commit log.

Slots and entries are read as numpy arrays. What ``IndexFile.putKey`` writes is checked
whole, without walking chains one by one: each entry's prevIndex must be the newest
earlier entry of its slot, each slot must name the newest entry of its slot, the
header's counts and begin/end offsets and times must be those of the first and last
entries. Each entry must point at a message carrying a key (``topic#key``, or its
UNIQ_KEY) of that hash, stored at ``beginTimestamp + timeDiff`` seconds; and every key
of every message inside the range the index files claim must have its entry.

Entries are matched with the commit log band by band as it is checked
(:mod:`rmqtool.verify.lookups`: entries are written in commit log order); the chains
need no message, so they are checked first, while the workers scan the first bands, file
by file, holding one file's slots and links.
"""
from __future__ import annotations

import os
from typing import Callable, Iterator

import numpy as np

from rmqtool.findings import (INDEX_CHAIN_BROKEN, INDEX_ENTRY_MISMATCH, INDEX_ENTRY_NO_RECORD,
                              INDEX_HEADER_MISMATCH, INDEX_KEY_NOT_INDEXED, INDEX_MISSING,
                              INDEX_TIMESTAMP_BACKWARDS, INDEX_FILE_OUT_OF_ORDER, RECORD_TRUNCATED, Finding, finding)
from rmqtool.formats.indexfile import FIRST_INDEX, INDEX_HEADER_SIZE, IndexEntry, entry_position
from rmqtool.store.indexfile import IndexFile, list_index_files
from rmqtool.store.arrays import dtype_of, read_records
from rmqtool.verify.commitlog import BandConsumer, CommitLogCheck, SegmentCheck
from rmqtool.verify.lookups import OffsetLookups, late_offsets, subset

ENTRY_DTYPE = dtype_of(IndexEntry)
SLOT_DTYPE = np.dtype(">i4")
INT_MAX = (1 << 31) - 1
ITEM_DTYPE = np.dtype([("offset", np.int64), ("entry", np.int64), ("key_hash", np.int64), ("time_diff", np.int64)])


def expected_time_diff(store_timestamps: np.ndarray, begin_timestamp: int) -> np.ndarray:
    """IndexFile.putKey's timeDiff: whole seconds after beginTimestamp (Java's truncating
    division), 0 when the file has no begin time or the clock went back, capped at int max."""
    if begin_timestamp <= 0:
        return np.zeros(len(store_timestamps), np.int64)
    diff = store_timestamps - begin_timestamp
    np.maximum(diff, 0, out=diff)  # a clock gone back gives 0 either way
    seconds = diff // 1000
    return np.minimum(seconds, INT_MAX, out=seconds)


_CHUNK = 1 << 16  # entries read at once for the chains: temporaries of a few MiB, whatever the file's size
_SLOT_CHUNK = 1 << 18  # slots read at once when the chains are proven


def entry_count(f: IndexFile) -> tuple[int, list[Finding]]:
    """The entries the header's indexCount claims (1..indexCount-1), within what the file can hold."""
    h = f.header
    count = h.index_count - FIRST_INDEX
    found = []
    if h.index_count > f.index_num or h.index_count < 0:
        found.append(finding(INDEX_HEADER_MISMATCH, str(f.path), 0, f"indexCount {h.index_count} is outside "
                             f"0..{f.index_num} (maxIndexNum)"))
        count = max(0, min(count, f.index_num - FIRST_INDEX))
    return max(count, 0), found


def _has_key(band: SegmentCheck, rows: np.ndarray, hashes: np.ndarray, covered: np.ndarray) -> np.ndarray:
    """For each entry (message row, key hash): whether the message has a key of that hash;
    every such key is marked in ``covered`` (a key given twice is indexed twice)."""
    n, keys = len(rows), len(band.key_rows)
    tail = keys - n  # the common case: the entries are the band's last keys one for one (all of them,
    # or those after an index file filled up), from a message's first key: each entry has its key
    if n and tail >= 0 and band.key_rows[tail] == rows[0] and (tail == 0 or band.key_rows[tail - 1] != rows[0]) \
            and (band.key_rows[tail:] == rows).all() and (band.key_hashes[tail:] == hashes).all():
        covered[tail:] = True
        return np.ones(n, bool)
    # the keys of row r are key_rows' entries first[r]..first[r + 1] - 1 (key_rows is sorted)
    first = np.zeros(band.messages + 1, np.int64)
    np.cumsum(np.bincount(band.key_rows, minlength=band.messages), out=first[1:])
    start = first[rows]
    count = first[rows + 1] - start
    has = np.zeros(len(rows), bool)
    for j in range(int(count.max(initial=0))):  # a message's keys: usually one or two
        at = np.flatnonzero(j < count)
        k = start[at] + j
        eq = band.key_hashes[k] == hashes[at]
        has[at[eq]] = True
        covered[k[eq]] = True
    return has


class IndexFileCheck:
    """One index file: its entries read in order and matched band by band."""

    def __init__(self, f: IndexFile, log: CommitLogCheck, inherited: int | None = None):
        self.f = f
        self.log = log
        # the begin time the file had when its first entry was put: the file before it's end time
        # (IndexFile's constructor takes it; putKey sets the entry's own time only after that
        # entry); None when no file before it is left, and that entry's timeDiff is not known
        self.inherited = inherited
        self.path = str(f.path)
        self.count, self.count_findings = entry_count(f) if f.hash_slot_num is not None else (0, [])
        self.first_at = entry_position(f.hash_slot_num, FIRST_INDEX) if f.hash_slot_num is not None else 0
        self._read_entries = 0
        self.no_record: list = []  # (entry, finding)
        self.mismatch: list = []
        self.lookups = OffsetLookups(self._read)
        self._chains: tuple | None = None  # check_chains' results

    def position(self, entry: int) -> int:
        return self.first_at + (entry - FIRST_INDEX) * ENTRY_DTYPE.itemsize

    def _read(self, n: int) -> np.ndarray | None:
        """The next entries (at most n) that point into the commit log (entries before its first
        file point at deleted data)."""
        if self._read_entries >= self.count:
            return None
        entries = read_records(self.path, ENTRY_DTYPE, self.position(FIRST_INDEX + self._read_entries),
                               min(n, self.count - self._read_entries))
        first = FIRST_INDEX + self._read_entries
        self._read_entries = self._read_entries + len(entries) if len(entries) else self.count
        phy = entries["phy_offset"].astype(np.int64)
        live = np.flatnonzero(phy >= self.log.min_offset)
        items = np.empty(len(live), ITEM_DTYPE)
        numbers = live + first
        if len(live) == len(entries):  # every entry (the common case): slices, not gathers
            live = slice(None)
        items["offset"], items["entry"] = phy[live], numbers
        items["key_hash"], items["time_diff"] = entries["key_hash"][live], entries["time_diff"][live]
        past = items["offset"] >= self.log.written_end
        if past.any():
            self.not_found(subset(items, past))
            items = subset(items, ~past)
        return items

    def not_found(self, items: np.ndarray) -> None:
        for entry, phy in zip(items["entry"].tolist(), items["offset"].tolist()):
            self.no_record.append((entry, finding(
                INDEX_ENTRY_NO_RECORD, self.path, self.position(entry),
                f"entry {entry} points at commit log offset {phy}, "
                + ("at or past the commit log's written end" if phy >= self.log.written_end
                   else "where no message starts"),
                commit_log_offset=phy, entry=entry)))

    def match(self, band: SegmentCheck, items: np.ndarray, covered: np.ndarray) -> None:
        """Entries pointing into a band against the messages there: a message starts there,
        carries a key of that hash, and timeDiff is its store time."""
        n = len(items)  # the common case: the entries are the band's last keys one for one
        rows, hit = band.locate(items["offset"], band.key_rows[len(band.key_rows) - n:] if n <= len(band.key_rows)
                                else None)
        if not hit.all():
            self.not_found(subset(items, ~hit))
            items, rows = subset(items, hit), rows[hit]
        has_key = _has_key(band, rows, items["key_hash"], covered)
        want = expected_time_diff(band["store_timestamp"][rows], self.f.header.begin_timestamp)
        first = items["entry"] == FIRST_INDEX
        if first.any():
            if self.inherited is None:
                want[first] = items["time_diff"][first]
            else:
                want[first] = expected_time_diff(band["store_timestamp"][rows][first], self.inherited)
        time_ok = items["time_diff"] == want
        for j in np.flatnonzero(~has_key | ~time_ok).tolist():
            entry, phy = int(items["entry"][j]), int(items["offset"][j])
            why = []
            if not has_key[j]:
                why.append(f"the message there has no key (topic#key or UNIQ_KEY) of hash {int(items['key_hash'][j])}")
            if not time_ok[j]:
                why.append(f"timeDiff {int(items['time_diff'][j])} s, the message's store time gives {int(want[j])} s")
            self.mismatch.append((entry, finding(INDEX_ENTRY_MISMATCH, self.path, self.position(entry),
                                                 f"entry {entry} (commit log offset {phy}): " + "; ".join(why),
                                                 commit_log_offset=phy, entry=entry)))

    def _links(self, proof: "_ChainProof | None" = None) -> tuple:
        """(slots, each entry's slot (-1: a negative keyHash), each entry's prevIndex, phyOffsets
        of the first and last entry), for the entries the file holds of those indexCount claims.
        With a ``proof``, each chunk of entries goes to it as it is read, and neither the slot
        table nor the prevIndex column is kept (None): the proof reads the table a chunk at a
        time, and verify's peak memory is 24 MiB and 4 bytes an entry lower."""
        f = self.f
        slots = None if proof is not None else read_records(self.path, SLOT_DTYPE, INDEX_HEADER_SIZE,
                                                            f.hash_slot_num, native=True)
        slot = np.empty(self.count, np.int32)
        prev = np.empty(self.count, np.int32) if proof is None else None
        ends: list = []
        # int32 arithmetic where the slot count allows (a file's size keeps it far below): 4x faster modulo
        slot_num = np.int32(f.hash_slot_num) if f.hash_slot_num <= INT_MAX else np.int64(f.hash_slot_num)
        read = 0
        size = ENTRY_DTYPE.itemsize
        while read < self.count:
            entries = read_records(self.path, ENTRY_DTYPE, self.first_at + read * size,
                                   min(_CHUNK, self.count - read))
            if not len(entries):
                break
            n = len(entries)
            key_hash = entries["key_hash"].astype(np.int32)
            slot[read:read + n] = np.where(key_hash >= 0, key_hash % slot_num, -1)
            if proof is None:
                prev[read:read + n] = entries["prev_index"]
            else:
                proof.chunk(read, slot, entries["prev_index"].astype(np.int32))
            ends = [int(entries["phy_offset"][0])] if not ends else ends[:1]
            ends.append(int(entries["phy_offset"][-1]))
            read += n
        return slots, slot[:read], None if prev is None else prev[:read], ends

    def check_chains(self) -> None:
        """What the file holds on its own, no message needed: entries indexCount claims past the
        file's end, the slots in use, the first and last entries' phyOffsets, and whether the
        chains are whole. Done once: while the workers scan the first bands, or else at the end.
        Broken chains are described at the end (findings), so their findings are never all
        held at once."""
        f = self.f
        if self._chains is not None or f.hash_slot_num is None:
            return
        proof = _ChainProof(self.count, FIRST_INDEX)
        _, slot, _, ends = self._links(proof)  # the chains proven as the entries are read
        truncated = []
        if len(slot) < self.count:
            truncated.append(finding(RECORD_TRUNCATED, self.path, self.position(FIRST_INDEX + len(slot)),
                                     f"indexCount {f.header.index_count} runs past the file end"))
        used, whole = proof.whole(self.path, f.hash_slot_num, slot)  # the common case proven on int32 arrays
        self._chains = (truncated, used, np.array(ends[:1] + ends[-1:], np.int64), whole)

    def findings(self, header_times: dict) -> list[Finding]:
        """The header's count, the entries the file lacks, the header against the entries (and,
        in ``header_times``, the store times at begin/endPhyOffset), the chains, then entries
        pointing at no record and entries disagreeing with theirs."""
        if self.f.hash_slot_num is None:
            return []
        self.check_chains()
        truncated, used, phy, whole = self._chains
        found = list(self.count_findings) + truncated + self._header_findings(used, phy, header_times)
        if not whole:  # damage: the file's links read again, each broken one described
            slots, slot, prev, _ = self._links()
            numbers = np.arange(FIRST_INDEX, FIRST_INDEX + len(slot), dtype=np.int64)
            found += _chain_findings(self.f, slots, numbers, self.position(numbers), slot.astype(np.int64),
                                     prev.astype(np.int64))
        found += [x for _, x in sorted(self.no_record, key=lambda t: t[0])]
        found += [x for _, x in sorted(self.mismatch, key=lambda t: t[0])]
        return found

    def _header_findings(self, used: int, phy: np.ndarray, times: dict) -> list[Finding]:
        f = self.f
        h = f.header
        path = self.path
        found = []
        if used != h.hash_slot_count:
            found.append(finding(INDEX_HEADER_MISMATCH, path, 0, f"hashSlotCount {h.hash_slot_count}, but "
                                 f"{used} slots are in use"))
        if not len(phy):
            return found
        if h.begin_phy_offset != phy[0] or h.end_phy_offset != phy[-1]:
            found.append(finding(INDEX_HEADER_MISMATCH, path, 0, f"beginPhyOffset {h.begin_phy_offset} and "
                                 f"endPhyOffset {h.end_phy_offset}, but the entries run from {int(phy[0])} "
                                 f"to {int(phy[-1])}"))
        if h.begin_phy_offset in times and h.end_phy_offset in times:
            begin_ts, end_ts = times[h.begin_phy_offset], times[h.end_phy_offset]
            if (begin_ts, end_ts) != (h.begin_timestamp, h.end_timestamp):
                found.append(finding(INDEX_HEADER_MISMATCH, path, 0, f"beginTimestamp {h.begin_timestamp} and "
                                     f"endTimestamp {h.end_timestamp}, but the messages at begin/endPhyOffset were "
                                     f"stored at {begin_ts} and {end_ts}"))
            elif end_ts < begin_ts:
                found.append(finding(INDEX_TIMESTAMP_BACKWARDS, path, 0, f"endTimestamp {end_ts} is before "
                                     f"beginTimestamp {begin_ts}: the store clock went back while this file filled"))
        return found


class _ChainProof:
    """Whether every chain is what putKey writes, proven without sorting (the common case), a
    chunk of entries at a time as they are read: each entry's prevIndex names an earlier
    entry, whose slot is known by then, so the prevIndex column need not be kept.

    If each entry's prevIndex is 0 or an earlier entry of the same slot, and no two entries
    name the same one, the entries form chains, each from an entry naming 0 (its start) to
    one nobody names (its head). If moreover each head is what its slot names, and as many
    slots are in use as there are heads and starts, each slot holds one chain, and each
    entry names the entry of its slot just before it: the first can only name 0, the
    second only the first, and so on. Arrays stay small (bools, int32: an index file's
    entry numbers fit) so the random reads stay in cache and memory in bounds.
    """

    def __init__(self, count: int, first: int):
        self.first = first  # the number of the first entry
        self.named = np.zeros(count, bool)  # entries some later entry names
        self.linked = 0  # entries naming an earlier one
        self.holds = count + first < INT_MAX  # False once something is not what putKey writes

    def chunk(self, a: int, slot: np.ndarray, prev: np.ndarray) -> None:
        """Entries a.. (their prevIndex, int32): ``slot`` holds the slots of every entry up to theirs."""
        if not self.holds:
            return
        b = a + len(prev)
        first = np.int32(self.first)
        # each named entry is an earlier one: prev - first (its index) below the entry's own index
        if (slot[a:b] < 0).any() or (prev - first >= np.arange(a, b, dtype=np.int32)).any():
            self.holds = False
            return
        linked = prev > 0
        before = prev[linked] - first  # index of the named entry
        if (before < 0).any() or (slot[before] != slot[a:b][linked]).any():
            self.holds = False
            return
        self.named[before] = True
        self.linked += len(before)

    def whole(self, path: str, slot_num: int, slot: np.ndarray) -> tuple[int, bool]:
        """After the last chunk (``slot``: of the entries read): (slots in use, whether the chains
        are whole), the file's slot table read a chunk at a time. Each head must be what its
        slot names and as many slots be in use as there are heads: the same as each slot in use
        naming a head of that slot (each way a one-to-one map between sets of one size)."""
        n = len(slot)
        named = self.named[:n]
        heads = n - self.linked
        holds = bool(n) and self.holds and n + self.first < INT_MAX and np.count_nonzero(named) == self.linked
        used = nonzero = 0
        for a in range(0, slot_num, _SLOT_CHUNK):  # temporaries of a chunk, not of the table
            slots = read_records(path, SLOT_DTYPE, INDEX_HEADER_SIZE + a * SLOT_DTYPE.itemsize,
                                 min(_SLOT_CHUNK, slot_num - a), native=True)
            used += int(np.count_nonzero(slots > 0))
            at = np.flatnonzero(slots)
            nonzero += len(at)
            if holds:
                e = slots[at].astype(np.int64) - self.first  # the entry each slot in use names
                inside = (e >= 0) & (e < n)
                holds = bool(inside.all()) and not named[e].any() and bool((slot[e] == at + a).all())
            if len(slots) < min(_SLOT_CHUNK, slot_num - a):
                holds = False  # a table the file does not hold whole: its links are described
                break
        if not n:
            return used, not nonzero
        return used, holds and heads == nonzero


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


class IndexCheck(BandConsumer):
    """Every index file against the commit log's bands, then the keys of the messages inside
    the range they claim. Keys no entry covers are kept (message, hash) for the runs at the
    end: a store's worth only when its index is that damaged."""

    def __init__(self, store_root: str | os.PathLike, log: CommitLogCheck,
                 on_bytes: Callable[[int], None] | None = None):
        self.root = store_root
        self.log = log
        self.on_bytes = on_bytes
        self.listing = list_index_files(store_root)
        self.files = self.listing.open_all()
        self.checks = [IndexFileCheck(f, log, self.files[k - 1].header.end_timestamp if k else None)
                       for k, f in enumerate(self.files)]
        claimed = [(f.header.begin_phy_offset, f.header.end_phy_offset) for f in self.files
                   if f.header.index_count > FIRST_INDEX]
        self.claimed = (min(c[0] for c in claimed), max(c[1] for c in claimed)) if claimed else None
        wanted = {o for f in self.files for o in (f.header.begin_phy_offset, f.header.end_phy_offset)}
        self.header_offsets = np.array(sorted(wanted), np.int64)
        self.header_times: dict = {}  # begin/endPhyOffset -> store time of the message there
        self.keyed = 0  # messages with keys
        self.keyed_inside = 0  # of them inside the claimed range: each one's number among them
        self.uncovered: list = []  # (number, offset, tq, queue offset, key hash) of keys no entry covers
        self.covered_late: list = []  # (offset, hash) of keys late entries cover

    def band(self, band: SegmentCheck) -> None:
        at = self.header_offsets[(self.header_offsets >= band.lo) & (self.header_offsets < band.hi)]
        if len(at):
            rows, hit = band.locate(at)
            self.header_times.update(zip(at[hit].tolist(), band["store_timestamp"][rows[hit]].tolist()))
        self.keyed += int(np.count_nonzero(band["has_keys"]))
        covered = np.zeros(len(band.key_rows), bool)
        for c in self.checks:
            items = c.lookups.take(band.lo, band.hi)
            if items is not None:
                c.match(band, items, covered)
        if self.claimed is None or not band.messages:
            return
        lo, hi = self.claimed
        offset = band["offset"]
        inside = band["has_keys"] & (offset >= lo) & (offset <= hi)
        number = np.cumsum(inside) - 1 + self.keyed_inside  # each keyed message's number inside the range
        self.keyed_inside += int(np.count_nonzero(inside))
        keys = np.flatnonzero(~covered)
        rows = band.key_rows[keys].astype(np.int64)
        keep = inside[rows]
        keys, rows = keys[keep], rows[keep]
        if len(keys):
            self.uncovered.append((number[rows], offset[rows], band["tq"][rows], band["queue_offset"][rows],
                                   band.key_hashes[keys].astype(np.int64)))

    def before_bands(self) -> None:
        for c in self.checks:
            c.check_chains()

    def close(self) -> None:
        for f in self.files:
            f.close()

    def late_offsets(self) -> np.ndarray:
        return late_offsets(c.lookups for c in self.checks)

    def late_band(self, band: SegmentCheck) -> None:
        for c in self.checks:
            items = c.lookups.take_late(band.lo, band.hi)
            if items is not None:
                covered = np.zeros(len(band.key_rows), bool)
                c.match(band, items, covered)
                keys = np.flatnonzero(covered)
                self.covered_late.append((band["offset"][band.key_rows[keys]], band.key_hashes[keys].astype(np.int64)))

    def findings(self) -> Iterator[Finding]:
        """Every index file, then the keys of the messages inside the range they claim."""
        yield from self.listing.findings
        yield from self._out_of_order()
        for c in self.checks:
            items = c.lookups.leftover()
            if items is not None:  # late entries in no band point where no message starts
                c.not_found(items)
            yield from c.f.findings
            yield from c.findings(self.header_times)
            if self.on_bytes is not None:
                self.on_bytes(c.f.file_size)
        if not self.files:
            if self.keyed:
                root = os.path.join(os.fspath(self.root), "index")
                yield finding(INDEX_MISSING, root, None, f"{self.keyed} messages carry keys or a "
                              f"UNIQ_KEY, but there is no index file: key queries must scan the commit log",
                              messages=self.keyed)
            return
        if self.claimed is not None and self.uncovered:
            yield from self._not_indexed()

    def _out_of_order(self) -> Iterator[Finding]:
        """IndexService.load orders the files by name (their creation times), and queryOffset
        walks them from the last, stopping at the first that begins before the time asked: a
        file whose entries begin before those of the file it sorts after is out of place (one
        that only overlaps its end is a re-dispatch's, after a recovery kept the older file)."""
        used = [f for f in self.files if f.header.index_count > FIRST_INDEX]
        for a, b in zip(used, used[1:]):
            if b.header.begin_phy_offset < a.header.begin_phy_offset:
                yield finding(INDEX_FILE_OUT_OF_ORDER, b.path, 0,
                              f"{b.path.name} sorts after {a.path.name}, but its entries begin at commit log offset "
                              f"{b.header.begin_phy_offset}, before {a.path.name}'s at {a.header.begin_phy_offset}")

    def _not_indexed(self) -> Iterator[Finding]:
        """Messages in the claimed range with a key that has no entry, as runs of consecutive keyed messages."""
        number, offset, tq, qo, key_hash = (np.concatenate(cols) for cols in zip(*self.uncovered))
        self.uncovered = []
        if self.covered_late:
            late_offset, late_hash = (np.concatenate(cols) for cols in zip(*self.covered_late))
            late = set(zip(late_offset.tolist(), late_hash.tolist()))  # damage only: a few
            keep = np.array([pair not in late for pair in zip(offset.tolist(), key_hash.tolist())], bool)
            number, offset, tq, qo = number[keep], offset[keep], tq[keep], qo[keep]
        if not len(number):
            return
        number, first = np.unique(number, return_index=True)  # a message once, however many keys it lacks
        offset, tq, qo = offset[first], tq[first], qo[first]
        breaks = np.flatnonzero(np.diff(number) != 1) + 1
        lo, hi = self.claimed
        for start, stop in zip([0, *breaks.tolist()], [*breaks.tolist(), len(number)]):
            here = self.log.record(offset[start], tq[start], qo[start])
            path, position = self.log.where(here["commit_log_offset"])
            yield finding(INDEX_KEY_NOT_INDEXED, path, position,
                          f"{stop - start} message(s) with keys at commit log offsets {here['commit_log_offset']}.."
                          f"{int(offset[stop - 1])} have keys no index entry covers, inside the indexed range "
                          f"{lo}..{hi}", messages=stop - start, **here)
