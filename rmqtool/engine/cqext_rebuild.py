"""Rebuilding ConsumeQueueExt with the consume queues it serves (redispatch on a store with
``consumequeue_ext/``, i.e. one whose broker runs with enableConsumeQueueExt).

What ``ConsumeQueue.putMessagePositionInfoWrapper`` does for each dispatched message, after
the fact over the staged queues: an ext unit (the tags hash, the record's store timestamp,
the filter bit map) appended to the queue's ext files as ``ConsumeQueueExt.put`` appends it
(a unit that does not fit before the file's last 4 bytes ends the file with the -1 marker and
goes to the next file), and its address (``realOffset + Long.MIN_VALUE``) written into the
unit's tagsCode field. The bit map is the broker's SQL92 evaluation at dispatch time, which
rmqtool does not redo: a unit keeps the bit map the store's own ext unit for that message
has (same commit log offset, tags hash and store time), and gets none otherwise, which the
broker's ExpressionMessageFilter reads as "match" (the commit log check then decides).
"""
from __future__ import annotations

import pathlib

from rmqtool.errors import UsageError
from rmqtool.formats.cqext import (CQ_EXT_END_MARK, CQ_EXT_MIN_UNIT_SIZE, DEFAULT_CQ_EXT_FILE_SIZE,
                                   END_BLANK_DATA_LENGTH, CqExtUnitHeader, ext_offset_to_addr)
from rmqtool.formats.derive import struct_of
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.consumequeue import ConsumeQueue
from rmqtool.store.cqext import queue_ext
from rmqtool.store.paths import CONSUMEQUEUE_DIR, CONSUMEQUEUE_EXT_DIR, StorePaths, segment_name
from rmqtool.store.segments import SegmentQueue

EXT_HEADER = struct_of(CqExtUnitHeader)
TAGS_CODE_AT = 12  # the consume queue unit's tagsCode field: after commitLogOffset 8 and size 4


def uses_ext(store_root) -> bool:
    return (pathlib.Path(store_root) / CONSUMEQUEUE_EXT_DIR).is_dir()


class ExtFilesWriter:
    """One queue's ext files being written from nothing: the bytes each file holds (its tail
    is zeros), written out at the mapped file size (sparse) on close."""

    def __init__(self, directory: pathlib.Path, file_size: int):
        self.directory = directory
        self.file_size = file_size
        self.files: list[list] = []  # [base, bytearray]

    def put(self, tags_code: int, store_timestamp: int, bit_map: bytes | None) -> int:
        """ConsumeQueueExt.put: the unit's address."""
        body = bit_map or b""
        size = CQ_EXT_MIN_UNIT_SIZE + len(body)
        for _ in range(2):  # a full file, then the next one
            if not self.files or len(self.files[-1][1]) >= self.file_size:
                base = self.files[-1][0] + self.file_size if self.files else 0
                self.files.append([base, bytearray()])
            base, data = self.files[-1]
            if size > self.file_size - len(data) - END_BLANK_DATA_LENGTH:
                data += CQ_EXT_END_MARK.to_bytes(2, "big", signed=True)  # fullFillToEnd
                data += bytes(self.file_size - len(data))
                continue
            address = ext_offset_to_addr(base + len(data))
            data += EXT_HEADER.pack(size, tags_code, store_timestamp, len(body)) + body
            return address
        raise UsageError(f"an ext unit of {size} bytes does not fit in an ext file of {self.file_size} bytes",
                         self.directory)

    def close(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for base, data in self.files:
            with open(self.directory / segment_name(base), "wb") as f:
                f.write(bytes(data).rstrip(b"\0"))
                f.truncate(self.file_size)


def ext_file_size(store_root) -> int:
    """mappedFileSizeConsumeQueueExt as the store's ext files show it (else the default)."""
    from rmqtool.store.cqext import open_exts
    sizes = [e.mapped_file_size for e in open_exts(store_root) if e.segments]
    return sizes[0] if sizes else DEFAULT_CQ_EXT_FILE_SIZE


def rebuild_exts(store_root, staging: pathlib.Path, queues: list[tuple[str, int]], log: SegmentQueue,
                 cq_size: int) -> None:
    """Give each staged plain queue its ext files (``staging/consumequeue_ext/``) and its units
    their ext addresses, as the broker's dispatch with enableConsumeQueueExt writes them."""
    paths = StorePaths(store_root)
    file_size = ext_file_size(store_root)
    reader = CommitLogReader(CommitLog.of_queue(log))
    try:
        for topic, queue_id in queues:
            _rebuild_queue(paths, staging, topic, queue_id, reader, cq_size, file_size)
    finally:
        reader.close()


def _carried_bit_maps(paths: StorePaths, topic: str, queue_id: int) -> dict[int, tuple]:
    """queue offset -> (commit log offset, tags hash, store time, bit map) of the store's own
    ext units that a lookup finds."""
    directory = paths.consumequeue / topic / str(queue_id)
    if not directory.is_dir():
        return {}
    queue = ConsumeQueue(directory, topic, queue_id)
    ext = queue_ext(queue)
    out = {}
    for u in queue.iter_units():
        found = ext.lookup(u.tags_code)
        if found is not None and found.ok:
            out[u.queue_offset] = (u.commit_log_offset, found.unit.tags_code, found.unit.msg_store_time,
                                   found.unit.filter_bit_map)
    return out


def _rebuild_queue(paths: StorePaths, staging: pathlib.Path, topic: str, queue_id: int, reader: CommitLogReader,
                   cq_size: int, file_size: int) -> None:
    staged_dir = staging / CONSUMEQUEUE_DIR / topic / str(queue_id)
    staged = ConsumeQueue(staged_dir, topic, queue_id, mapped_file_size=cq_size)
    carried = _carried_bit_maps(paths, topic, queue_id)
    writer = ExtFilesWriter(staging / CONSUMEQUEUE_EXT_DIR / topic / str(queue_id), file_size)
    patches: dict[str, list] = {}
    for u in staged.iter_units():
        if u.is_fill:
            continue  # fillPreBlank writes its units without the ext
        store_timestamp, _why = reader.store_timestamp(u.commit_log_offset, u.size)
        own = carried.get(u.queue_offset)
        bit_map = own[3] if own is not None and own[:3] == (u.commit_log_offset, u.tags_code, store_timestamp) \
            else None
        address = writer.put(u.tags_code, store_timestamp, bit_map)
        patches.setdefault(u.path, []).append((u.position + TAGS_CODE_AT, address))
    writer.close()
    for path, items in patches.items():
        with open(path, "r+b") as f:
            for position, address in items:
                f.seek(position)
                f.write(address.to_bytes(8, "big", signed=True))


def refuse_from_offset(store_root, from_offset) -> None:
    if from_offset is not None and uses_ext(store_root):
        raise UsageError("--from-offset: this store has consumequeue_ext/, whose units rmqtool rebuilds only "
                         "with their whole queues; leave --from-offset out", pathlib.Path(store_root))
