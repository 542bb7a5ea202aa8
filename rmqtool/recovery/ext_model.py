"""One queue's ConsumeQueueExt as the broker's load, recovery and dispatch change it, in memory.

A literal model of 5.3.3's ``ConsumeQueueExt`` inside ``ConsumeQueue``: ``load`` (every file
full, as MappedFileQueue.load leaves it), ``recover`` then ``truncateByMaxAddress`` with the
maxExtAddr the consume queue's recover walk found (both inside ``ConsumeQueue.recover``: the
ext's own walk ends the last file at its first size <= 0; the unit at the max address, when
``get`` finds one, ends it again one past that unit; when ``get`` finds none the broker logs
"[BUG] address ... not found" and cuts nothing), and ``put`` (an ext unit for every dispatch
of a plain queue, before the consume queue's own "built already" check, which is why a
skipped dispatch still takes ext room: apache/rocketmq #10756). ``truncateDirtyLogicFiles``
reaches its ``truncateByMaxAddress`` only when every file of the queue went, and then with no
address (#10755): the ext is left as it is, and so is it here.

Positions only: the model says where each file's write position lands and which files go; it
reads through ``store/cqext.py`` and never writes.
"""
from __future__ import annotations

import dataclasses
import pathlib

from rmqtool.formats.cqext import CQ_EXT_MIN_UNIT_SIZE, END_BLANK_DATA_LENGTH, ext_offset_to_addr, is_ext_addr
from rmqtool.recovery.queue_model import truncate_dirty_files
from rmqtool.store.cqext import ConsumeQueueExt

PUT_RETRIES = 3  # ConsumeQueueExt.put's retryTimes


@dataclasses.dataclass
class ExtFile:
    base: int
    wrote: int
    on_disk: bool  # False: made by a put in the model


class ExtModel:
    """The ext of one queue: its files' write positions through the start."""

    def __init__(self, topic: str, queue_id: int, directory: pathlib.Path, file_size: int | None = None,
                 bit_map_size: int | None = None):
        self.topic, self.queue_id = topic, queue_id
        self.reader = ConsumeQueueExt(directory, topic, queue_id, file_size)
        self.file_size = self.reader.mapped_file_size
        self.files = [ExtFile(s.base_offset, self.file_size, True) for s in self.reader.segments]  # load: full
        self.loaded = [s.base_offset for s in self.reader.segments]
        self.bit_map_size = bit_map_size
        self.recover_end: int | None = None
        self.max_address: int = 1  # what ConsumeQueue.recover hands truncateByMaxAddress
        self.max_address_found: bool | None = None  # whether get found a unit there (None: no address)
        self.units_put = 0

    # ---- ConsumeQueue.recover's tail ------------------------------------------------------------
    def recover(self, max_ext_address: int) -> None:
        """ConsumeQueueExt.recover, then truncateByMaxAddress(max_ext_address)."""
        if not self.files:
            return
        self.recover_end = self.reader.recovered_end
        self._truncate_dirty_files(self.recover_end)
        self.max_address = max_ext_address
        if is_ext_addr(max_ext_address):
            found = self.reader.get(max_ext_address, self.recover_end)
            self.max_address_found = found.ok
            if found.ok:
                self._truncate_dirty_files(found.real_offset + found.unit.size)

    def _truncate_dirty_files(self, offset: int) -> None:
        self.files = truncate_dirty_files(self.files, self.file_size, offset)

    # ---- ConsumeQueue.putMessagePositionInfoWrapper's ext put ------------------------------------
    def put(self) -> int:
        """ConsumeQueueExt.put of one unit (the bit map's size as the queue's units show it):
        its address, or 1 when it fails (the consume queue then keeps the tags hash)."""
        size = CQ_EXT_MIN_UNIT_SIZE + (self.bit_map_size or 0)
        for _ in range(PUT_RETRIES):
            if not self.files or self.files[-1].wrote >= self.file_size:
                base = self.files[-1].base + self.file_size if self.files else 0
                self.files.append(ExtFile(base, 0, False))
            f = self.files[-1]
            if size > self.file_size - f.wrote - END_BLANK_DATA_LENGTH:
                f.wrote = self.file_size  # fullFillToEnd: the -1 marker, the file is full
                continue
            address = ext_offset_to_addr(f.base + f.wrote)
            f.wrote += size
            self.units_put += 1
            return address
        return 1

    # ---- what the plan shows ----------------------------------------------------------------------
    def positions(self) -> list[tuple[str, int]]:
        """(file name, write position) of every file after the start."""
        return [(f"{f.base:020d}", f.wrote) for f in self.files]

    def deleted_files(self) -> list[pathlib.Path]:
        now = {f.base for f in self.files}
        return [self.reader.directory / f"{b:020d}" for b in self.loaded if b not in now]

    @property
    def end(self) -> int:
        """The write position after the start, as a real offset (getMaxAddress undecorated)."""
        return self.files[-1].base + self.files[-1].wrote if self.files else 0


def bit_map_size_of(reader: ConsumeQueueExt) -> int | None:
    """The bit map size the queue's last ext unit has (a topic's units share one: the broker's
    bitMapLengthConsumeQueueExt when a SQL92 filter is registered on it, else none); None
    when the queue has no unit to tell."""
    last = None
    for entry in reader.walk():
        if entry.unit is not None:
            last = entry.unit
    return None if last is None else max(last.bit_map_size, 0)


def max_ext_address(queue, walked_files: int = 3) -> int:
    """maxExtAddr as ConsumeQueue.recover leaves it: the tagsCode of the last written unit its
    walk passed (the queue's last three files) that is an ext address; 1 (no address) else."""
    import numpy as np

    from rmqtool.formats.consumequeue import is_written_unit
    from rmqtool.store.consumequeue import CQ_LAYOUT
    from rmqtool.formats.cqext import CQ_EXT_MAX_ADDR
    for f in reversed(queue.files[-walked_files:]):
        units = np.frombuffer(f.data, CQ_LAYOUT.dtype, count=min(len(f.data), f.wrote) // CQ_LAYOUT.unit_size)
        hits = np.flatnonzero(is_written_unit(units["commit_log_offset"], units["size"])
                              & (units["tags_code"] <= CQ_EXT_MAX_ADDR))
        f.release()
        if hits.size:
            return int(units["tags_code"][hits[-1]])
    return 1


class StoreExts:
    """The exts of a store's plain queues through one start (only when the store has
    ``consumequeue_ext/``, i.e. runs with enableConsumeQueueExt)."""

    def __init__(self, root: pathlib.Path):
        from rmqtool.store.cqext import ext_writing
        from rmqtool.store.paths import CONSUMEQUEUE_EXT_DIR
        self.base = pathlib.Path(root) / CONSUMEQUEUE_EXT_DIR
        writing = ext_writing(root)  # the one answer the writers take too
        self.enabled = writing.enabled
        self.models: dict[tuple[str, int], ExtModel] = {}
        # mappedFileSizeConsumeQueueExt as every queue's ext files show it together: the first
        # queue loaded set it, and one file of it cut short made every other file the odd one
        self.file_size: int | None = writing.file_size if writing.enabled else None
        self.topic_bit_map: dict[str, int] = {}

    def load(self, topic: str, queue_id: int) -> ExtModel:
        """ConsumeQueue's constructor and load: the queue's ext (its directory may not exist)."""
        model = ExtModel(topic, queue_id, self.base / topic / str(queue_id), self.file_size)
        if model.reader.segments:
            self.file_size = self.file_size or model.file_size
            size = bit_map_size_of(model.reader)
            if size is not None:
                self.topic_bit_map.setdefault(topic, size)
        self.models[(topic, queue_id)] = model
        return model

    def of(self, topic: str, queue_id: int) -> ExtModel:
        model = self.models.get((topic, queue_id)) or self.load(topic, queue_id)
        if model.bit_map_size is None:
            model.bit_map_size = self.topic_bit_map.get(topic, 0)
        return model

    def positions(self) -> dict[str, list[tuple[str, int]]]:
        return {f"{t}/{q}": m.positions() for (t, q), m in sorted(self.models.items()) if m.files}


@dataclasses.dataclass(frozen=True)
class ExtCut:
    """Where recover --apply ends one queue's ext: the write position the start after the
    broker's leaves (ConsumeQueue.recover's truncateByMaxAddress with the last address the
    queue keeps once its units past the commit log are cut; the broker's own start still
    keeps the cut units' ext units, apache/rocketmq #10755), the files past it, and the
    non-zero bytes after it in its file (ext units nothing points at)."""
    topic: str
    queue_id: int
    end: int  # a real offset: the ext's write position
    files_after: tuple[pathlib.Path, ...]  # truncateDirtyFiles deletes them
    file: pathlib.Path | None  # the file ``end`` lies in (None: the last file is full)
    zero_from: int = 0  # [zero_from, zero_to) of ``file``: not all zeros
    zero_to: int = 0
    units_after: int = 0  # units recover's walk finds from ``end`` in ``file``

    def to_json(self) -> dict:
        return {"queue": f"{self.topic}/{self.queue_id}", "write_position": self.end,
                "file": None if self.file is None else self.file.name,
                "units_zeroed": self.units_after if self.zero_to > self.zero_from else 0,
                "bytes_zeroed": self.zero_to - self.zero_from,
                "files_deleted": [str(p) for p in self.files_after]}


def plan_ext_cuts(root: pathlib.Path, commit_log_end: int, cq_file_size: int | None) -> list[ExtCut]:
    """Each queue's ExtCut (only queues whose ext has something past its end)."""
    from rmqtool.store.commitlog_end import last_nonzero_from
    from rmqtool.store.consumequeue import ConsumeQueue
    from rmqtool.store.cqext import cq_directory, open_exts, queue_max_ext_address
    cuts = []
    for ext in open_exts(root):
        directory = cq_directory(ext.directory)
        if not ext.segments or not directory.is_dir():  # an orphaned ext: no ConsumeQueue loads it
            continue
        queue = ConsumeQueue(directory, ext.topic, ext.queue_id, cq_file_size, commit_log_end)
        end = ext.truncated_end(queue_max_ext_address(queue))
        after = tuple(s.path for s in ext.segments if s.base_offset > end)
        cut = ExtCut(ext.topic, ext.queue_id, end, after, None)
        garbage = ext.garbage_after_end(end)  # past the -1 marker of a full file, which is the broker's
        if garbage is not None:
            seg, pos = garbage
            cut = dataclasses.replace(cut, file=seg.path, zero_from=pos, zero_to=last_nonzero_from(seg.path, pos),
                                      units_after=ext.skip_walk(seg, end - seg.base_offset)[1])
        if cut.files_after or cut.zero_to > cut.zero_from:
            cuts.append(cut)
    return cuts
