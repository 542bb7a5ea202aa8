"""Writing consume queues: ConsumeQueue.putMessagePositionInfo (where a queue ends is the read side's find_queue_end).

One 20-byte unit (commitLogOffset, size, tagsCode; ``formats/consumequeue.py``) per
dispatched message at byte ``queueOffset * 20`` of ``consumequeue/<topic>/<queueId>/``,
whose files are named by their first byte and roll with no padding (the file size is a
multiple of 20). A queue created for an offset other than 0 starts with fill units up to
it (fillPreBlank), which is how the broker marks the queue's minimum offset.

On a store whose broker runs with enableConsumeQueueExt (``store/cqext.ext_writing``), each
unit written gets an ext unit first (putMessagePositionInfoWrapper: the tags hash, the store
timestamp and a bit map, through ``engine/cqext_writer.py``) and holds its address in the
tagsCode field. The broker puts the ext unit before its "built already" checks, so a dispatch
it skips still takes ext room (apache/rocketmq #10756); here only a unit written gets one.
"""
from __future__ import annotations

import os
import pathlib
import struct

from rmqtool.errors import CorruptData
from rmqtool.formats.consumequeue import (BATCH_CQ_STORE_UNIT_SIZE, COMPACTED_OFFSET_NONE, CQ_FILL_UNIT_BYTES,
                                          CQ_STORE_UNIT_SIZE, BatchCqUnit, CqUnit)
from rmqtool.formats.derive import struct_format, struct_of
from rmqtool.store.consumequeue import BATCH_CQ_LAYOUT, batch_unit_before, find_queue_end, queue_directories
from rmqtool.store.paths import first_file_unnameable, queue_directory
from rmqtool.store.segments import discover
from rmqtool.engine.cqext_writer import ConsumeQueueExtWriter
from rmqtool.engine.mapped_file import WritableFileQueue
from rmqtool.formats.cqext import is_ext_addr

CQ_UNIT = struct_of(CqUnit)
assert CQ_UNIT.size == CQ_STORE_UNIT_SIZE
BATCH_CQ_UNIT = struct_of(BatchCqUnit)
assert BATCH_CQ_UNIT.size == BATCH_CQ_STORE_UNIT_SIZE
_CQ_UNIT_CODES = struct_format(CqUnit)[1:]
_CQ_RUNS: dict[int, struct.Struct] = {}


def _cq_units(n: int) -> struct.Struct:
    """``n`` consecutive units as one struct (the unit's derived format, repeated)."""
    st = _CQ_RUNS.get(n)
    if st is None:
        st = struct.Struct(">" + _CQ_UNIT_CODES * n)
        if len(_CQ_RUNS) < 4096:
            _CQ_RUNS[n] = st
    return st


_CQ_DTYPE = None  # CqUnit as a numpy dtype (numpy is imported only by the bulk dispatch)


def _cq_unit_array(offsets, sizes, tags_codes):
    """Units (CqUnit) of numpy columns as one array, its bytes the packed units'."""
    global _CQ_DTYPE
    import numpy as np

    if _CQ_DTYPE is None:
        from rmqtool.store.arrays import dtype_of
        _CQ_DTYPE = dtype_of(CqUnit)
    units = np.empty(len(offsets), _CQ_DTYPE)
    units["commit_log_offset"], units["size"], units["tags_code"] = offsets, sizes, tags_codes
    return units


def consume_queue_file_size(configured: int) -> int:
    """MessageStoreConfig.getMappedFileSizeConsumeQueue: rounded up to whole units."""
    units = -(-configured // CQ_STORE_UNIT_SIZE)
    return units * CQ_STORE_UNIT_SIZE


class ConsumeQueueWriter:
    """The write side of one consume queue (topic, queue id)."""

    def __init__(self, root: str | os.PathLike, topic: str, queue_id: int, mapped_file_size: int,
                 ext_file_size: int | None = None):
        self.topic = topic
        self.queue_id = queue_id
        self.root = pathlib.Path(root)
        self.directory = queue_directory(root, topic, queue_id)
        self.mapped_file_size = mapped_file_size
        self.files = WritableFileQueue(self.directory, mapped_file_size)
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self.out_of_order = 0  # units written where the queue offset did not match (the broker's [BUG] log)
        self.bytes_written = 0  # units and pre-blank fill since the load (recover --apply's bar counts them)
        self.ext_file_size = ext_file_size  # enableConsumeQueueExt: the ext's file size (None: no ext)
        self.ext: ConsumeQueueExtWriter | None = None

    def load(self, walk_from: int | None = None) -> None:
        """Find where the queue ends (ConsumeQueue.recover, the read side's find_queue_end).
        A store that needs recovery was recovered before this (rmqtool.recovery); ``walk_from``:
        the file that recovery's walk started at (the third-last of the files it found): the
        third-last of those it left may hold zeroed units the broker's walk never read."""
        queue = discover(self.directory, required=False, mapped_file_size=self.mapped_file_size)
        segments = queue.segments
        if not segments:
            self._load_ext()
            return
        end = find_queue_end(segments, self.mapped_file_size, walk_from=walk_from)
        if end.segments_after:
            raise CorruptData("a consume queue file after the end of the queue; recover the store first",
                              end.segments_after[0].path)
        self.files.load(last_wrote_position=end.end - segments[-1].base_offset)
        self.max_physic_offset = end.max_physic_offset
        # correctMinOffset with the commit log starting at 0: the first unit, fill or not
        self.min_logic_offset = segments[0].base_offset
        self._load_ext()

    def _load_ext(self) -> None:
        """The ext, where ConsumeQueue.recover's tail leaves it: truncateByMaxAddress with the
        tagsCode field of the last unit (1, cutting nothing, when that is no address)."""
        if self.ext_file_size is None:
            return
        end = self.files.max_offset
        max_address = 1
        last = self.files.read(end - CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE) if end >= CQ_STORE_UNIT_SIZE else b""
        if len(last) == CQ_STORE_UNIT_SIZE:  # the last unit, in the last file or (that one empty) the one before
            max_address = CQ_UNIT.unpack(last)[2]
        self.ext = ConsumeQueueExtWriter.of_queue(self.root.parent, self.topic, self.queue_id, self.ext_file_size,
                                                  max_address)

    @property
    def max_offset_in_queue(self) -> int:
        return self.files.max_offset // CQ_STORE_UNIT_SIZE

    def put(self, offset: int, size: int, tags_code: int, cq_offset: int, store_timestamp: int = 0, *,
            with_ext: bool = True) -> bool:
        """putMessagePositionInfoWrapper: True when written, or when already there (a re-dispatch).
        ``store_timestamp``: the record's, for its ext unit (a store with the ext); ``with_ext``
        False: putMessagePositionInfo alone (a multi-dispatched unit: no ext unit)."""
        if offset + size <= self.max_physic_offset:
            return True  # built already
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        mf = self.files.last
        if mf is None and first_file_unnameable(expect):  # the plan refuses such a store first
            raise CorruptData(f"a record at commit log offset {offset} has queue offset {cq_offset} (damaged): the "
                              f"broker would name this queue's first file by a negative offset; not written",
                              self.directory)
        if mf is None or mf.wrote_position >= mf.file_size:
            mf = self.files.last_mapped_file(expect)
        if mf.first_create_in_queue and cq_offset != 0 and mf.wrote_position == 0:
            self.min_logic_offset = expect
            self.files.flushed_where = expect
            self._fill_pre_blank(mf, expect)
        if cq_offset != 0:
            current = mf.wrote_position + mf.file_from_offset
            if expect < current:
                return True  # built already
            if expect != current:
                self.out_of_order += 1  # the broker logs and writes it where it is anyway
        pos = mf.wrote_position
        if pos + CQ_STORE_UNIT_SIZE > mf.file_size:
            return False
        if self.ext is not None and with_ext:  # the ext unit first; a failed put leaves the tags hash in the unit
            address = self.ext.put(tags_code, store_timestamp)
            if is_ext_addr(address):
                tags_code = address
        if pos + CQ_STORE_UNIT_SIZE > mf.backed:
            mf.back(pos + CQ_STORE_UNIT_SIZE)
        CQ_UNIT.pack_into(mf.mm, pos, offset, size, tags_code)
        mf.wrote_position = pos + CQ_STORE_UNIT_SIZE
        self.bytes_written += CQ_STORE_UNIT_SIZE
        self.max_physic_offset = offset + size
        return True

    def put_run(self, first_cq_offset: int, units: list, store_timestamps: list | None = None) -> bool:
        """putMessagePositionInfo for consecutive queue offsets from ``first_cq_offset``;
        ``units`` holds commitLogOffset, size, tagsCode of each, flat. Written with one pack
        when the run goes right after the queue's end in its current file; otherwise unit by unit
        (always with the ext: each unit's ext unit first, from ``store_timestamps``)."""
        n = len(units) // 3
        mf = self.files.last
        expect = first_cq_offset * CQ_STORE_UNIT_SIZE
        if self.ext is not None:
            stamps = store_timestamps or [0] * n
            for i in range(n):
                if not self.put(units[3 * i], units[3 * i + 1], units[3 * i + 2], first_cq_offset + i, stamps[i]):
                    return False
            return True
        if (mf is not None and units[0] + units[1] > self.max_physic_offset
                and expect == mf.file_from_offset + mf.wrote_position
                and mf.wrote_position + n * CQ_STORE_UNIT_SIZE <= mf.file_size
                and not (mf.first_create_in_queue and mf.wrote_position == 0 and first_cq_offset != 0)):
            pos = mf.wrote_position
            mf.back(pos + n * CQ_STORE_UNIT_SIZE)
            _cq_units(n).pack_into(mf.mm, pos, *units)
            mf.wrote_position = pos + n * CQ_STORE_UNIT_SIZE
            self.max_physic_offset = units[-3] + units[-2]
            self.bytes_written += n * CQ_STORE_UNIT_SIZE
            return True
        for i in range(n):
            if not self.put(units[3 * i], units[3 * i + 1], units[3 * i + 2], first_cq_offset + i):
                return False
        return True

    def put_unit_columns(self, first_cq_offset: int, offsets, sizes, tags_codes, store_timestamps=None) -> bool:
        """:meth:`put_run` for numpy columns of consecutive queue offsets (the bulk dispatch):
        the units that go right after the queue's end in its current file written as one
        array, the others one by one with :meth:`put` (a queue's first unit and its fill, the
        first unit of a new file, one built already); with the ext, :meth:`put_run`."""
        n = len(offsets)
        if self.ext is not None:
            units = [v for unit in zip(offsets.tolist(), sizes.tolist(), tags_codes.tolist()) for v in unit]
            return self.put_run(first_cq_offset, units, store_timestamps.tolist())
        i = 0
        while i < n:
            mf = self.files.last
            cq_offset = first_cq_offset + i
            if (mf is not None and int(offsets[i]) + int(sizes[i]) > self.max_physic_offset
                    and cq_offset * CQ_STORE_UNIT_SIZE == mf.file_from_offset + mf.wrote_position
                    and not (mf.first_create_in_queue and mf.wrote_position == 0 and cq_offset != 0)):
                k = min(n - i, (mf.file_size - mf.wrote_position) // CQ_STORE_UNIT_SIZE)
                if k > 0:  # offsets only grow along a run: every unit after the first is past the end too
                    pos = mf.wrote_position
                    mf.back(pos + k * CQ_STORE_UNIT_SIZE)
                    mf.mm[pos:pos + k * CQ_STORE_UNIT_SIZE] = _cq_unit_array(offsets[i:i + k], sizes[i:i + k],
                                                                            tags_codes[i:i + k])
                    mf.wrote_position = pos + k * CQ_STORE_UNIT_SIZE
                    self.max_physic_offset = int(offsets[i + k - 1]) + int(sizes[i + k - 1])
                    self.bytes_written += k * CQ_STORE_UNIT_SIZE
                    i += k
                    continue
            if not self.put(int(offsets[i]), int(sizes[i]), int(tags_codes[i]), cq_offset):
                return False
            i += 1
        return True

    def _fill_pre_blank(self, mf, until_where: int) -> None:
        until = until_where % self.mapped_file_size
        self.bytes_written += until - until % CQ_STORE_UNIT_SIZE
        for _ in range(0, until, CQ_STORE_UNIT_SIZE):
            mf.append(CQ_FILL_UNIT_BYTES)

    def flush(self, least_pages: int = 0) -> bool:
        result = self.files.flush(least_pages)
        if self.ext is not None:
            result = self.ext.flush(least_pages) and result
        return result

    def close(self) -> None:
        self.files.close()
        if self.ext is not None:
            self.ext.close()


class ConsumeQueueTable:
    """Every consume queue of a store (DefaultMessageStore.consumeQueueTable), opened lazily;
    with ``batch_queues``, a 5.x store's batch consume queues are flushed and closed with
    them (ConsumeQueueStore holds both kinds)."""

    def __init__(self, root: str | os.PathLike, mapped_file_size: int, batch_queues=None,
                 ext_file_size: int | None = None):
        self.root = pathlib.Path(root)
        self.mapped_file_size = mapped_file_size
        self.queues: dict[tuple[str, int], ConsumeQueueWriter] = {}
        self.batch_queues = batch_queues
        self.ext_file_size = ext_file_size  # enableConsumeQueueExt: every queue writes ext units (None: none)
        self.topic_bit_maps: dict[str, bytes] = {}  # a topic's unevaluated bit map, as its loaded queues show

    @property
    def ext_enabled(self) -> bool:
        return self.ext_file_size is not None

    def load(self, walked_from: dict | None = None) -> None:
        """loadConsumeQueue + recover: every consumequeue/<topic>/<queueId> directory;
        ``walked_from``: (topic, queue id) -> where the recovery just applied walked from."""
        for topic, queue_id, _directory in queue_directories(self.root):
            cq = ConsumeQueueWriter(self.root, topic, queue_id, self.mapped_file_size, self.ext_file_size)
            cq.load((walked_from or {}).get((topic, queue_id)))
            self.queues[(topic, queue_id)] = cq
            if cq.ext is not None and cq.ext.bit_map is not None:
                self.topic_bit_maps.setdefault(topic, cq.ext.bit_map)
        for (topic, _queue_id), cq in self.queues.items():  # a queue whose last unit's ext unit is lost
            if cq.ext is not None and cq.ext.bit_map is None:
                cq.ext.bit_map = self.topic_bit_maps.get(topic)

    def find(self, topic: str, queue_id: int) -> ConsumeQueueWriter:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            cq = ConsumeQueueWriter(self.root, topic, queue_id, self.mapped_file_size, self.ext_file_size)
            cq._load_ext()  # a new queue: its ext too (it may have ext files of its own already)
            if cq.ext is not None and cq.ext.bit_map is None:  # the bit map size its topic's other queues show
                cq.ext.bit_map = self.topic_bit_maps.get(topic)
            self.queues[(topic, queue_id)] = cq
        return cq

    def queue_offsets(self) -> dict[tuple[str, int], int]:
        """recoverTopicQueueTable: the next queue offset of every queue (batch queues too)."""
        offsets = {key: cq.max_offset_in_queue for key, cq in self.queues.items()}
        if self.batch_queues is not None:
            offsets.update(self.batch_queues.queue_offsets())
        return offsets

    def flush(self, least_pages: int = 0) -> None:
        for cq in list(self.queues.values()):
            cq.flush(least_pages)
        if self.batch_queues is not None:
            self.batch_queues.flush(least_pages)

    def close(self) -> None:
        for cq in self.queues.values():
            cq.close()
        if self.batch_queues is not None:
            self.batch_queues.close()



class BatchConsumeQueueWriter:
    """The write side of one 5.x batch consume queue (BatchConsumeQueue.putBatchMessagePositionInfo).

    One 46-byte unit (commitLogOffset, size, tagsCode, storeTime, msgBaseOffset, batchSize,
    compactedOffset -1, 4 reserved bytes) per dispatched record, appended to
    ``batchconsumequeue/<topic>/<queueId>/``: files are named by their first byte and created
    at the queue's end, with no fill units, whatever the first record's queue offset.
    """

    def __init__(self, root: str | os.PathLike, topic: str, queue_id: int, mapped_file_size: int):
        self.topic = topic
        self.queue_id = queue_id
        self.directory = queue_directory(root, topic, queue_id)
        self.mapped_file_size = mapped_file_size
        self.files = WritableFileQueue(self.directory, mapped_file_size)
        self.max_msg_phy_offset = -1  # maxMsgPhyOffsetInCommitLog: the last unit's start
        self.max_offset_in_queue = 0  # the last unit's msgBaseOffset + batchSize

    def load(self) -> None:
        """BatchConsumeQueue.recover on a store recovered before this (rmqtool.recovery):
        where the units end, and the last one's commit log offset and batch end."""
        segments = discover(self.directory, required=False, mapped_file_size=self.mapped_file_size).segments
        if not segments:
            return
        end = find_queue_end(segments, self.mapped_file_size, layout=BATCH_CQ_LAYOUT)
        if end.segments_after:
            raise CorruptData("a batch consume queue file after the end of the queue; recover the store first",
                              end.segments_after[0].path)
        self.files.load(last_wrote_position=end.end - segments[-1].base_offset)
        unit = batch_unit_before(segments, end.end)
        if unit is not None:  # BatchCqUnit's fields, in order
            commit_log_offset, _size, _tags_code, _store_timestamp, msg_base_offset, batch_size, *_rest = unit
            self.max_msg_phy_offset = commit_log_offset
            self.max_offset_in_queue = msg_base_offset + batch_size

    def put(self, offset: int, size: int, tags_code: int, store_timestamp: int, msg_base_offset: int,
            batch_size: int) -> bool:
        """putMessagePositionInfoWrapper: True when written, or skipped as the broker skips it."""
        if msg_base_offset < 0 or batch_size < 0:
            return True  # "[NOTIFYME]unexpected dispatch request": logged, not written
        if offset <= self.max_msg_phy_offset:
            return True  # built already
        unit = BATCH_CQ_UNIT.pack(offset, size, tags_code, store_timestamp, msg_base_offset, batch_size,
                                  COMPACTED_OFFSET_NONE, bytes(4))
        mf = self.files.last_mapped_file(self.files.max_offset)
        if not mf.append(unit):
            return False
        self.max_msg_phy_offset = offset
        self.max_offset_in_queue = msg_base_offset + batch_size
        return True

    def flush(self, least_pages: int = 0) -> bool:
        return self.files.flush(least_pages)

    def close(self) -> None:
        self.files.close()


class BatchConsumeQueueTable:
    """The batch consume queues of the topics given (``batchconsumequeue/``), opened as written."""

    def __init__(self, root: str | os.PathLike, mapped_file_size: int, topics: frozenset):
        self.root = pathlib.Path(root)
        self.mapped_file_size = mapped_file_size
        self.topics = topics
        self.queues: dict[tuple[str, int], BatchConsumeQueueWriter] = {}

    def load(self) -> None:
        """loadConsumeQueues(BatchCQ) + recover: every batchconsumequeue/<topic>/<queueId> directory."""
        for topic, queue_id, _directory in queue_directories(self.root):
            bcq = BatchConsumeQueueWriter(self.root, topic, queue_id, self.mapped_file_size)
            bcq.load()
            self.queues[(topic, queue_id)] = bcq

    def find(self, topic: str, queue_id: int) -> BatchConsumeQueueWriter:
        bcq = self.queues.get((topic, queue_id))
        if bcq is None:
            bcq = self.queues[(topic, queue_id)] = BatchConsumeQueueWriter(self.root, topic, queue_id,
                                                                           self.mapped_file_size)
        return bcq

    def queue_offsets(self) -> dict[tuple[str, int], int]:
        return {key: bcq.max_offset_in_queue for key, bcq in self.queues.items()}

    def flush(self, least_pages: int = 0) -> None:
        for bcq in list(self.queues.values()):
            bcq.flush(least_pages)

    def close(self) -> None:
        for bcq in self.queues.values():
            bcq.close()
