"""The index as the broker's next start changes it, in memory: IndexService.load and
buildIndex (4.9.8 and 5.3.3 alike), nothing written.

* load(lastExitOK=false), after an abnormal exit (or a forced abnormal recovery): every
  index file whose endTimestamp is after the checkpoint's indexMsgTimestamp is destroyed.
  That timestamp moves only when a file fills up, so the last file (not full) nearly always
  goes, at every abnormal start, clean store or not;
* buildIndex for each message dispatched again (the abnormal recovery walk, the reput):
  the keys (UNIQ_KEY, then each of KEYS) of every message at or past the last file's
  endPhyOffset are put, a full last file making a new one that starts at its end. The
  message *at* endPhyOffset (the last one indexed) passes that test, so its keys are put
  again: the rebuilt file repeats the keys a kept file holds for it. The broker does the
  same (rocketmq-4.9.8/crash/a-as-is: the rebuilt file holds one key of the message at
  183141 that the full file before it holds too);
* a destroyed file whose messages lie before where dispatch starts again is not rebuilt:
  its entries are lost.

``rebuilt_as_is`` says when the destroyed files come back entry for entry and header for
header (only their names, the wall clock's, differ): then the start changes nothing in the
index, and a plan need not delete them.
"""
from __future__ import annotations

import dataclasses
import pathlib
from typing import NamedTuple

from rmqtool.dispatch.dispatcher import index_keys
from rmqtool.errors import RmqError
from rmqtool.formats.indexfile import FIRST_INDEX, IndexEntry, build_key, entry_position, index_key_hash, slot_of
from rmqtool.formats.sysflag import TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE
from rmqtool.store.arrays import dtype_of, read_records
from rmqtool.store.indexfile import IndexFile, IndexFiles

ENTRY_DTYPE = dtype_of(IndexEntry)

_INT_MAX = 2**31 - 1



class IndexGeometry(NamedTuple):
    """(maxHashSlotNum, maxIndexNum) an index file was written with."""
    hash_slot_num: int
    index_num: int


@dataclasses.dataclass
class ModelFile:
    """One index file's header as putKey leaves it, and the entries the model put in it."""
    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    index_count: int = FIRST_INDEX
    entries: list = dataclasses.field(default_factory=list)  # (topic, key, phyOffset, timeDiff), put order
    path: str | None = None  # a kept file the model appends to; None: one the start makes

    def header(self) -> tuple:
        """The header fields putKey leaves, but hashSlotCount (the slots its entries land in)."""
        return self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset, self.index_count


class IndexModel:
    """IndexService over index/'s files (``index_files``, oldest first, as the store's view lists
    them) at the next start (``abnormal``: lastExitOK false)."""

    def __init__(self, index_files: list[pathlib.Path], index_msg_timestamp: int, abnormal: bool):
        self.destroyed: list[tuple[str, int]] = []  # (path, endTimestamp)
        self._destroyed_files: list[IndexFile] = []
        self.geometry: IndexGeometry | None = None  # what the files show
        self.put_entries = 0  # keys put by the start
        self.repeated = 0  # of those, keys a kept file holds already (the message at its endPhyOffset)
        self.kept_appended: str | None = None  # a kept, not full, file the start appends to
        self._repeat_left = 0
        files = IndexFiles(list(index_files), []).open_all()  # index/'s files, oldest first
        for f in files:
            if self.geometry is None and f.hash_slot_num is not None:
                self.geometry = IndexGeometry(f.hash_slot_num, f.index_num)
        kept: list[IndexFile] = []
        for f in files:
            if abnormal and f.header.end_timestamp > index_msg_timestamp:
                self.destroyed.append((str(f.path), f.header.end_timestamp))
                self._destroyed_files.append(f)
            else:
                kept.append(f)
        self.files: list[ModelFile] = []  # what buildIndex writes into, oldest first
        last = kept[-1] if kept else None
        if last is not None:
            h = last.header
            self._repeat_left = _entries_at_end(last)
            current = ModelFile(h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset,
                                h.loaded_index_count, path=str(last.path))
            if self.geometry is not None and current.index_count >= self.geometry.index_num:
                current = self._after(current)
            self.files.append(current)
        for f in kept:
            f.close()

    @staticmethod
    def _after(full: ModelFile) -> ModelFile:
        """getAndCreateLastIndexFile after a full file: the new file's header starts at its end."""
        return ModelFile(full.end_timestamp, full.end_timestamp, full.end_phy_offset, full.end_phy_offset)

    def _current(self) -> ModelFile:
        if not self.files:
            self.files.append(ModelFile())
        f = self.files[-1]
        if self.geometry is not None and f.index_count >= self.geometry.index_num:
            f = self._after(f)
            self.files.append(f)
        return f

    def put(self, request) -> None:
        """buildIndex(request)."""
        f = self._current()
        offset = request.commit_log_offset
        if offset < f.end_phy_offset or request.sys_flag & TRANSACTION_MASK == TRANSACTION_ROLLBACK_TYPE:
            return
        repeat = offset == f.end_phy_offset and self._repeat_left > 0
        for key in index_keys(request):
            f = self._current()
            begin = f.begin_timestamp
            diff = 0 if begin <= 0 else min(max(request.store_timestamp - begin, 0) // 1000, _INT_MAX)
            if f.path is not None:
                self.kept_appended = f.path
            elif self._destroyed_files:  # kept to compare with them (hashed only then)
                f.entries.append((request.topic, key, offset, diff))
            if f.index_count <= FIRST_INDEX:
                f.begin_phy_offset, f.begin_timestamp = offset, request.store_timestamp
            f.end_phy_offset, f.end_timestamp = offset, request.store_timestamp
            f.index_count += 1
            self.put_entries += 1
            if repeat and self._repeat_left > 0:
                self._repeat_left -= 1
                self.repeated += 1

    def rebuilt_as_is(self) -> bool:
        """The destroyed files come back as they are (names aside), and no kept file changes."""
        if not self.destroyed or self.kept_appended is not None or self.geometry is None:
            return False
        made = [f for f in self.files if f.path is None]
        if len(made) != len(self._destroyed_files):
            return False
        slot_num = self.geometry.hash_slot_num
        for old, new in zip(self._destroyed_files, made):
            h = old.header
            if (old.hash_slot_num, old.index_num) != self.geometry or new.header() != (
                    h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset, h.index_count):
                return False  # the cheap test first: the keys are hashed only when all else agrees
            slots = set()
            for e, (topic, key, offset, diff) in zip(old.iter_entries(), new.entries):
                key_hash = index_key_hash(build_key(topic, key))
                if (e.phy_offset, e.time_diff, e.key_hash) != (offset, diff, key_hash):
                    return False
                slots.add(slot_of(key_hash, slot_num))
            if len(slots) != h.hash_slot_count:  # putKey counts each slot it finds empty
                return False
        return True

    def lost_entries(self) -> int:
        """Entries of the destroyed files whose message the start does not index again: each
        phyOffset counted as often as the destroyed files hold it, less as often as the start
        puts it again (arrays: a full file holds millions)."""
        import numpy as np  # the commands that plan load numpy; the CLI's start does not

        again = np.fromiter((offset for f in self.files if f.path is None for _t, _k, offset, _d in f.entries),
                            np.int64)
        held = []
        for old in self._destroyed_files:
            if old.hash_slot_num is None:
                continue
            try:
                rows = read_records(old.path, ENTRY_DTYPE, entry_position(old.hash_slot_num, FIRST_INDEX),
                                    max(old.header.loaded_index_count - FIRST_INDEX, 0))
            except (RmqError, OSError):
                continue
            held.append(rows["phy_offset"].astype(np.int64))
        if not held:
            return 0
        offsets, counts = np.unique(np.concatenate(held), return_counts=True)
        put, put_counts = np.unique(again, return_counts=True)
        covered = np.zeros(len(offsets), np.int64)
        _, in_held, in_put = np.intersect1d(offsets, put, assume_unique=True, return_indices=True)
        covered[in_held] = put_counts[in_put]
        return int(np.maximum(counts - covered, 0).sum())

    def close(self) -> None:
        for f in self._destroyed_files:
            f.close()


def _entries_at_end(f: IndexFile) -> int:
    """How many of a file's last entries are the message at its endPhyOffset (read from the end)."""
    n = 0
    for number in range(f.header.loaded_index_count - 1, FIRST_INDEX - 1, -1):
        e = f.entry(number)
        if e is None or e.phy_offset != f.header.end_phy_offset:
            break
        n += 1
    return n
