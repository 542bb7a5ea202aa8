"""Writing index files: IndexService.buildIndex and IndexFile.putKey.

Every dispatched message that is not a rollback record puts ``topic#UNIQ_KEY`` (when it has
one) and ``topic#key`` for each space-separated key of KEYS (prepared records included, at
4.9.8). Layout and hashing are in ``formats/indexfile.py``. A file takes maxIndexNum - 1
entries (indexCount starts at 1); the next one is named by the wall clock
(yyyyMMddHHmmssSSS, local time) and starts with the previous file's end offset and end
timestamp in its header, which the first entry's timeDiff is taken against before the first
entry overwrites the begin fields. The full file is flushed in the background and its end
timestamp becomes the checkpoint's indexMsgTimestamp.
"""
from __future__ import annotations

import mmap
import os
import pathlib
import threading
import time

from rmqtool.errors import StoreAccessError, UsageError
from rmqtool.formats.indexfile import (FIRST_INDEX, HASH_SLOT_SIZE, INDEX_HEADER_SIZE, INDEX_SIZE,
                                       INVALID_INDEX, build_key, entry_position, index_file_size,
                                       index_key_hash, index_key_hashes, slot_position)
from rmqtool.formats.sysflag import TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE
from rmqtool.store.indexfile import (INDEX_ENTRY, INDEX_HEADER, INDEX_SLOT, index_file_paths,
                                     infer_index_geometry)
from rmqtool.engine.mapped_file import allocate, allocated_to, create_segment_file

# the read side's structs, derived from formats/indexfile.py once
HEADER, ENTRY, SLOT = INDEX_HEADER, INDEX_ENTRY, INDEX_SLOT
assert (HEADER.size, ENTRY.size, SLOT.size) == (INDEX_HEADER_SIZE, INDEX_SIZE, HASH_SLOT_SIZE)
SLOT_SPAN = 64 * 1024  # the hash slots' bytes allocated at a time (IndexFileWriter.back_slot_pages)
_SLOT_UNPACK, _SLOT_PACK, _ENTRY_PACK = SLOT.unpack_from, SLOT.pack_into, ENTRY.pack_into
_INT_MAX = 2**31 - 1
# the same layouts as numpy dtypes, for put_entry_arrays (numpy is imported only when used)
_ENTRY_DTYPE = None
_SLOT_DTYPE = None


def _dtypes() -> None:
    global _ENTRY_DTYPE, _SLOT_DTYPE
    if _ENTRY_DTYPE is None:
        import numpy as np

        from rmqtool.formats.indexfile import IndexEntry
        from rmqtool.store.arrays import dtype_of
        assert SLOT.format in (">i", ">l") and SLOT.size == 4
        _ENTRY_DTYPE, _SLOT_DTYPE = dtype_of(IndexEntry), np.dtype(">i4")


def index_keys_of(topic: str, uniq_key: str | None, keys: str | None) -> list[str]:
    """The keys IndexService.buildIndex puts for a record that is not a rollback: topic#UNIQ_KEY,
    then topic#key for each of KEYS (split on spaces, empty ones skipped), as build_key joins them."""
    out = [] if uniq_key is None else [build_key(topic, uniq_key)]
    if keys:
        out += [build_key(topic, k) for k in keys.split(" ") if k]
    return out


def index_file_name(now_ms: int) -> str:
    """UtilAll.timeMillisToHumanString: yyyyMMddHHmmssSSS in local time."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(now_ms / 1000)) + f"{now_ms % 1000:03d}"


def index_file_name_after(now_ms: int, newest: str | None, taken=lambda name: False) -> str:
    """A new index file's name at the clock ``now_ms`` that sorts after ``newest`` (the newest
    file's name; None: none) and is not ``taken``: IndexService.load orders the files by name,
    so a clock behind the newest name (moved back, or another host's, in a zone ahead) names
    the file just after it, and two files of one millisecond would be one to the broker."""
    name = index_file_name(now_ms)
    if newest is not None and name <= newest:
        after = index_name_time(newest)
        now_ms = max(now_ms, after + 1) if after is not None else now_ms
        name = index_file_name(now_ms)
    while taken(name) or (newest is not None and name <= newest):
        now_ms += 1
        name = index_file_name(now_ms)
    return name


def index_name_time(name: str) -> int | None:
    """The epoch ms an index file's name says (local time, as it was written), None if it says none."""
    try:
        return int(time.mktime(time.strptime(name[:14], "%Y%m%d%H%M%S"))) * 1000 + int(name[14:17])
    except (ValueError, OverflowError):
        return None


class IndexFileWriter:
    """One index file (IndexFile + IndexHeader)."""

    def __init__(self, path: str | os.PathLike, hash_slot_num: int, index_num: int, *,
                 end_phy_offset: int = 0, end_timestamp: int = 0, create: bool = True):
        self.path = pathlib.Path(path)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.size = index_file_size(hash_slot_num, index_num)
        if create:
            create_segment_file(self.path, self.size)
        try:
            self.fd = os.open(self.path, os.O_RDWR)
            actual = os.fstat(self.fd).st_size
            if actual < self.size and not create:  # the broker's MappedFile maps it whole: a file cut short grows
                os.ftruncate(self.fd, self.size)
                actual = self.size
            if actual != self.size:
                os.close(self.fd)
                raise StoreAccessError(f"index file is {actual} bytes, {hash_slot_num} slots and "
                                       f"{index_num} entries make {self.size}", self.path)
            self.mm = mmap.mmap(self.fd, self.size)
        except OSError as exc:
            raise StoreAccessError(f"cannot map ({exc.strerror})", self.path) from None
        # blocks allocated before the map writes them (mapped_file.allocate): the header and the
        # hash slots a SLOT_SPAN at a time as they are written (all at once would make the file
        # dense; a page at a time costs a syscall each, 6 us apiece in a fragmented extent tree),
        # the entries, one after another, ahead of them
        slots_end = slot_position(hash_slot_num)
        self.slot_span = SLOT_SPAN
        self.slot_pages = bytearray(-(-slots_end // SLOT_SPAN))  # a byte a span: 1 once allocated
        self.backed = entry_position(hash_slot_num, 0)
        try:
            self.back_slot_pages((0,))
        except StoreAccessError:
            self.mm.close()
            os.close(self.fd)
            raise
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, self.index_count) = HEADER.unpack_from(self.mm, 0)
        if self.index_count <= 0:
            self.index_count = FIRST_INDEX
        if create:
            # the constructor's setters write only these fields; indexCount stays 0 on disk
            if end_phy_offset > 0:
                self.begin_phy_offset = self.end_phy_offset = end_phy_offset
            if end_timestamp > 0:
                self.begin_timestamp = self.end_timestamp = end_timestamp
            HEADER.pack_into(self.mm, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                             self.end_phy_offset, 0, 0)

    @property
    def name(self) -> str:
        return self.path.name

    def back(self, end: int) -> None:
        if end > self.backed:
            self.backed = allocated_to(self.fd, self.path, self.backed, end, self.size)

    def back_slot_pages(self, pages) -> None:
        """The spans (SLOT_SPAN bytes of the header and hash slots) about to be written, allocated
        once each."""
        done = self.slot_pages
        for page in pages:
            if not done[page]:
                allocate(self.fd, self.path, page * SLOT_SPAN, min((page + 1) * SLOT_SPAN, self.size))
                done[page] = 1

    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    def put_entries(self, entries, start: int = 0) -> int:
        """IndexFile.putKey for ``entries[start:]`` ((keyHash, phyOffset, storeTimestamp) each), in order,
        as many as the file takes; returns the index of the first one not written. One loop
        with locals: the hot path of dispatch."""
        count = self.index_count
        stop = min(len(entries), start + self.index_num - count)
        if stop <= start:
            return start
        mm = self.mm
        slots = self.hash_slot_num
        self.back(entry_position(slots, stop - start + count))
        slot_table = slot_position(0)
        self.back_slot_pages({(slot_table + entries[i][0] % slots * HASH_SLOT_SIZE) // SLOT_SPAN
                               for i in range(start, stop)})
        entry_at = entry_position(slots, count)
        begin = self.begin_timestamp
        new_slots = 0
        unpack_slot = _SLOT_UNPACK
        pack_slot = _SLOT_PACK
        pack_entry = _ENTRY_PACK
        for i in range(start, stop):
            h, offset, ts = entries[i]
            abs_slot = slot_table + h % slots * HASH_SLOT_SIZE  # slot_position(slot_of(h, slots)), inlined
            slot_value = unpack_slot(mm, abs_slot)[0]
            if slot_value <= INVALID_INDEX or slot_value > count:
                slot_value = INVALID_INDEX
                new_slots += 1
            if begin <= 0:
                time_diff = 0
            else:
                # whole seconds; Java truncates toward zero, and anything negative becomes 0 anyway
                time_diff = (ts - begin) // 1000
                if time_diff > _INT_MAX:
                    time_diff = _INT_MAX
                elif time_diff < 0:
                    time_diff = 0
            pack_entry(mm, entry_at, h, offset, time_diff, slot_value)
            pack_slot(mm, abs_slot, count)
            if count <= 1:
                self.begin_phy_offset = offset
                begin = ts
            count += 1
            entry_at += INDEX_SIZE
        self.begin_timestamp = begin
        self.hash_slot_count += new_slots
        self.index_count = count
        self.end_phy_offset = offset
        self.end_timestamp = ts
        return stop

    def put_entry(self, h: int, offset: int, ts: int) -> None:
        """:meth:`put_entries` of one entry, in a file with room for it (append()'s message with
        only a UNIQ_KEY: the loop's set-up cost more than its one pass)."""
        mm = self.mm
        count = self.index_count
        abs_slot = slot_position(0) + h % self.hash_slot_num * HASH_SLOT_SIZE
        slot_value = _SLOT_UNPACK(mm, abs_slot)[0]
        if slot_value <= INVALID_INDEX or slot_value > count:
            slot_value = INVALID_INDEX
            self.hash_slot_count += 1
        begin = self.begin_timestamp
        if begin <= 0:
            time_diff = 0
        else:  # as put_entries
            time_diff = (ts - begin) // 1000
            if time_diff > _INT_MAX:
                time_diff = _INT_MAX
            elif time_diff < 0:
                time_diff = 0
        self.back(entry_position(self.hash_slot_num, count + 1))
        self.back_slot_pages((abs_slot // SLOT_SPAN,))
        _ENTRY_PACK(mm, entry_position(self.hash_slot_num, count), h, offset, time_diff, slot_value)
        _SLOT_PACK(mm, abs_slot, count)
        if count <= 1:
            self.begin_phy_offset = offset
            self.begin_timestamp = ts
        self.index_count = count + 1
        self.end_phy_offset = offset
        self.end_timestamp = ts

    def put_entry_arrays(self, hashes, offsets, timestamps, start: int = 0) -> int:
        """:meth:`put_entries` for numpy arrays of keyHash, phyOffset and storeTimestamp, all
        at once: each slot's chain is linked by sorting the entries by slot (the first of a
        slot names what the table held, if valid then, the others the one before), and each
        used slot gets its newest entry. Writes the bytes put_entries would write."""
        import numpy as np

        from rmqtool.store.arrays import grouped_order
        _dtypes()
        count = self.index_count
        stop = min(len(hashes), start + self.index_num - count)
        if stop <= start:
            return start
        h = np.asarray(hashes[start:stop], np.int64)
        off = np.asarray(offsets[start:stop], np.int64)
        ts = np.asarray(timestamps[start:stop], np.int64)
        k = len(h)
        slots = self.hash_slot_num
        numbers = count + np.arange(k, dtype=np.int64)
        slot = h % slots
        table = np.frombuffer(self.mm, _SLOT_DTYPE, count=slots, offset=slot_position(0))
        order = grouped_order(slot)  # by slot, each slot's entries in order
        s_sorted = slot[order]
        first = np.ones(k, bool)
        first[1:] = s_sorted[1:] != s_sorted[:-1]
        prev = np.empty(k, np.int64)
        prev[order[1:]] = numbers[order[:-1]]
        heads = order[first]
        held = table[slot[heads]].astype(np.int64)
        valid = (held > INVALID_INDEX) & (held <= numbers[heads])
        prev[heads] = np.where(valid, held, INVALID_INDEX)
        begin = self.begin_timestamp
        begins = np.full(k, begin, np.int64)
        if count <= 1:  # the file's first entry sets the begin fields for the ones after it
            begins[1:] = ts[0]
            self.begin_phy_offset = int(off[0])
            self.begin_timestamp = int(ts[0])
        time_diff = np.where(begins <= 0, 0, np.clip((ts - begins) // 1000, 0, _INT_MAX))
        entries = np.empty(k, _ENTRY_DTYPE)
        entries["key_hash"], entries["phy_offset"] = h, off
        entries["time_diff"], entries["prev_index"] = time_diff, prev
        at = entry_position(slots, count)
        self.back(at + k * INDEX_SIZE)
        self.mm[at:at + k * INDEX_SIZE] = entries.tobytes()
        last = np.ones(k, bool)
        last[:-1] = s_sorted[1:] != s_sorted[:-1]
        written = s_sorted[last]
        self.back_slot_pages(np.unique((slot_position(0) + written * HASH_SLOT_SIZE) // SLOT_SPAN).tolist())
        table[written] = numbers[order[last]]
        self.hash_slot_count += int(np.count_nonzero(~valid))
        self.index_count = count + k
        self.end_phy_offset = int(off[-1])
        self.end_timestamp = int(ts[-1])
        return stop

    def write_header(self) -> None:
        """IndexHeader's fields into the file (the writer calls it after each message's keys)."""
        HEADER.pack_into(self.mm, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                         self.end_phy_offset, self.hash_slot_count, self.index_count)

    def flush(self) -> None:
        if self.mm.closed:
            return
        try:
            self.mm.flush()
        except OSError as exc:
            raise StoreAccessError(f"cannot flush ({exc.strerror})", self.path) from None

    def close(self) -> None:
        if not self.mm.closed:
            self.mm.close()
            os.close(self.fd)


class IndexServiceWriter:
    """The write side of IndexService over the store's ``index`` directory."""

    def __init__(self, directory: str | os.PathLike, hash_slot_num: int, index_num: int,
                 checkpoint=None, clock=None):
        self.directory = pathlib.Path(directory)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.checkpoint = checkpoint
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.names: list[str] = []  # every index file, oldest first
        self.last: IndexFileWriter | None = None
        self._flushers: list[threading.Thread] = []
        self.entries_written = 0  # index entries put since the load (recover --apply's bar counts them)

    def load(self) -> None:
        """Open the newest index file for writing (the older ones are full)."""
        if not self.directory.is_dir():
            return
        names = [p.name for p in index_file_paths(self.directory)]
        self.names = names
        if names:
            newest = self.directory / names[-1]
            # the same size fits other slot/entry splits: appending with the wrong one would
            # write entries over the slot table, so the file's own contents must agree
            found = infer_index_geometry(newest)
            if found is not None and found != (self.hash_slot_num, self.index_num):
                raise UsageError(f"written with {found[0]} slots and {found[1]} entries, not "
                                 f"{self.hash_slot_num} and {self.index_num}", newest)
            self.last = IndexFileWriter(newest, self.hash_slot_num, self.index_num, create=False)

    @property
    def end_phy_offset(self) -> int:
        return self.last.end_phy_offset if self.last else 0

    def _last_file(self) -> IndexFileWriter:
        """getAndCreateLastIndexFile."""
        last = self.last
        if last is not None and not last.is_write_full():
            return last
        end_phy = end_ts = 0
        if last is not None:
            last.write_header()
            end_phy, end_ts = last.end_phy_offset, last.end_timestamp
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreAccessError(f"cannot create ({exc.strerror})", self.directory) from None
        name = index_file_name_after(self.clock(), self.names[-1] if self.names else None,
                                     lambda n: (self.directory / n).exists())
        f = IndexFileWriter(self.directory / name, self.hash_slot_num, self.index_num,
                            end_phy_offset=end_phy, end_timestamp=end_ts)
        self.names.append(name)
        self.last = f
        if last is not None:
            t = threading.Thread(target=self._flush_full, args=(last,), name="FlushIndexFileThread", daemon=True)
            self._flushers.append(t)
            t.start()
        return f

    def _flush_full(self, f: IndexFileWriter) -> None:
        """IndexService.flush of a full file: force it, then its end timestamp goes to the
        checkpoint, which is flushed."""
        f.flush()
        if f.is_write_full() and self.checkpoint is not None:
            self.checkpoint.index_msg_timestamp = f.end_timestamp
            self.checkpoint.flush()
        f.close()

    def build_index(self, topic: str, commit_log_offset: int, store_timestamp: int, sys_flag: int,
                    keys: str | None, uniq_key: str | None, write_header: bool = True) -> None:
        """IndexService.buildIndex. ``write_header`` False leaves the current file's header to
        the caller (one write after a batch of messages)."""
        f = self.last
        if f is None or f.index_count >= f.index_num:
            f = self._last_file()
        if commit_log_offset < f.end_phy_offset:
            return  # indexed already
        if sys_flag & TRANSACTION_MASK == TRANSACTION_ROLLBACK_TYPE:
            return
        if not keys and uniq_key is not None:  # one entry, and the file has room (a full one was rolled above)
            f.put_entry(index_key_hash(f"{topic}#{uniq_key}"), commit_log_offset, store_timestamp)  # build_key's
            self.entries_written += 1
            if write_header:
                f.write_header()
            return
        entries = [(index_key_hash(key), commit_log_offset, store_timestamp)
                   for key in index_keys_of(topic, uniq_key, keys)]
        if entries:
            f = self._put_all(f, entries, commit_log_offset)
        if write_header:
            f.write_header()

    def build_index_many(self, requests) -> None:
        """buildIndex for many dispatch requests in commit log order ((topic, queue id, offset,
        size, tagsCode, store timestamp, queue offset, keys, uniq key, sysFlag) each): all their
        keys hashed first, then written in one loop; the header once at the end. Files roll
        where per-message buildIndex rolls them: when a key finds the file full, or when a
        message comes after the one that filled it."""
        if not requests:
            return
        f = self.last
        if f is None or f.index_count >= f.index_num:
            f = self._last_file()
        end = f.end_phy_offset  # offsets only grow: a message before it was indexed already
        entries = []
        add = entries.append
        for topic, _q, offset, _size, _code, ts, _qo, keys, uniq, sys_flag, *_ in requests:
            if offset < end or sys_flag & TRANSACTION_MASK == TRANSACTION_ROLLBACK_TYPE:
                continue
            for key in index_keys_of(topic, uniq, keys):
                add((index_key_hash(key), offset, ts))
        if entries:
            f = self._put_all(f, entries, requests[-1][2])
        f.write_header()

    def build_index_columns(self, cols) -> None:
        """:meth:`build_index_many` for requests as arrays (dispatcher.DispatchColumns, whose
        keys are hashed already and leave rollback records out): entries written with
        put_entry_arrays, files rolling where build_index_many rolls them."""
        if not len(cols):
            return
        f = self.last
        if f is None or f.index_count >= f.index_num:
            f = self._last_file()
        end = f.end_phy_offset  # offsets only grow: a message before it was indexed already
        offsets = cols.commit_log_offset[cols.key_record]
        keep = offsets >= end
        hashes, offsets = cols.key_hash[keep], offsets[keep]
        timestamps = cols.store_timestamp[cols.key_record[keep]]
        self._put_arrays(f, hashes, offsets, timestamps, int(cols.commit_log_offset[-1]))

    def build_index_keys(self, keys: list, offsets: list, timestamps: list, last_offset: int) -> None:
        """:meth:`build_index_many` for keys gathered already (topic#key, in the order buildIndex
        puts them, with each record's commit log offset and store timestamp; rollback records
        left out) for records up to the one at ``last_offset``: hashed at once
        (index_key_hashes) and written with put_entry_arrays."""
        import numpy as np

        f = self.last
        if f is None or f.index_count >= f.index_num:
            f = self._last_file()
        offsets = np.array(offsets, np.int64)
        timestamps = np.array(timestamps, np.int64)
        hashes = index_key_hashes(keys) if keys else np.zeros(0, np.int64)
        if len(offsets) and offsets[0] < f.end_phy_offset:  # offsets only grow: some indexed already
            keep = offsets >= f.end_phy_offset
            hashes, offsets, timestamps = hashes[keep], offsets[keep], timestamps[keep]
        self._put_arrays(f, hashes, offsets, timestamps, last_offset)

    def _put_arrays(self, f: IndexFileWriter, hashes, offsets, timestamps, last_offset: int) -> None:
        """:meth:`_put_all` for arrays, then the header (written even when there was no entry)."""
        if len(hashes):
            done = f.put_entry_arrays(hashes, offsets, timestamps)
            while f.index_count >= f.index_num and (done < len(hashes) or last_offset > offsets[done - 1]):
                f = self._last_file()
                done = f.put_entry_arrays(hashes, offsets, timestamps, done)
            self.entries_written += done
        f.write_header()

    def _put_all(self, f: IndexFileWriter, entries: list, last_offset: int) -> IndexFileWriter:
        """Write ``entries``, rolling to a new file when one fills up and more is to come (a
        key left, or a later message, at ``last_offset``, which buildIndex would start with)."""
        done = f.put_entries(entries)
        while f.index_count >= f.index_num and (done < len(entries) or last_offset > entries[done - 1][1]):
            f = self._last_file()
            done = f.put_entries(entries, done)
        self.entries_written += done
        return f

    def flush(self) -> None:
        if self.last is not None:
            self.last.flush()

    def join(self) -> None:
        for t in self._flushers:
            t.join()
        self._flushers.clear()

    def close(self) -> None:
        self.join()
        if self.last is not None:
            self.last.close()
