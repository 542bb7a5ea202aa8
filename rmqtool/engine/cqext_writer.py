"""Writing ConsumeQueueExt: ConsumeQueueExt.put, the one writer of ext units (append, recover
--apply's dispatch and redispatch all write through it).

A unit (``formats/cqext.py``: size, the tags hash, the record's store timestamp, the filter
bit map) goes at the ext's write position; a unit that does not fit before the file's last
END_BLANK_DATA_LENGTH bytes ends the file with the -1 marker (fullFillToEnd) and goes to the
next file, named by its first byte. Its address (``realOffset + Long.MIN_VALUE``) is what
ConsumeQueue.putMessagePositionInfoWrapper then writes into the consume queue unit's tagsCode
field. An existing ext is opened where the broker's start leaves its write position
(ConsumeQueueExt.recover, then truncateByMaxAddress with the queue's last ext address:
``store/cqext.py``).

The bit map is the broker's SQL92 evaluation at dispatch (CommitLogDispatcherCalcBitMap),
which rmqtool does not do: a unit rmqtool cannot take from the store's own ext unit gets the
bit map size the topic's units show with every bit set (:func:`unevaluated_bit_map`). The
broker's ExpressionMessageFilter reads that as a bloom hit for every SQL92 group, the same as
no bit map, so the commit log check decides (no message is filtered out by it), and the unit
takes the room the broker's would.
"""
from __future__ import annotations

import pathlib

from rmqtool.errors import CorruptData
from rmqtool.formats.cqext import (CQ_EXT_END_MARK, CQ_EXT_MAX_UNIT_SIZE, CQ_EXT_MIN_UNIT_SIZE,
                                   END_BLANK_DATA_LENGTH, CqExtUnitHeader, ext_offset_to_addr, is_ext_addr)
from rmqtool.formats.derive import struct_of
from rmqtool.engine.mapped_file import WritableFileQueue
from rmqtool.store.cqext import ConsumeQueueExt
from rmqtool.store.paths import CONSUMEQUEUE_EXT_DIR

EXT_HEADER = struct_of(CqExtUnitHeader)
PUT_RETRIES = 3  # ConsumeQueueExt.put's retryTimes
PUT_FAILED = 1  # what put returns when it fails: not an address (the unit keeps the tags hash)


def unevaluated_bit_map(size: int) -> bytes | None:
    """The bit map of a unit whose SQL92 filters rmqtool did not evaluate: ``size`` bytes
    (the topic's bit map size) with every bit set; None (no bit map) for a topic without."""
    return b"\xff" * size if size > 0 else None


class ConsumeQueueExtWriter:
    """The write side of one queue's ConsumeQueueExt (``consumequeue_ext/<topic>/<queueId>/``)."""

    def __init__(self, directory: str | pathlib.Path, file_size: int, bit_map_size: int = 0):
        self.directory = pathlib.Path(directory)
        self.file_size = file_size
        self.files = WritableFileQueue(self.directory, file_size)
        self.bit_map = unevaluated_bit_map(bit_map_size)  # what a unit without its own bit map gets
        self.units_put = 0

    @classmethod
    def of_queue(cls, store_root, topic: str, queue_id: int, file_size: int,
                 max_address: int) -> "ConsumeQueueExtWriter":
        """The queue's ext, opened where the broker's start leaves its write position (its
        ``max_address``: the tagsCode field of the consume queue's last unit); the bit map size
        its unit at that address shows (a topic's units share one), else none."""
        directory = pathlib.Path(store_root) / CONSUMEQUEUE_EXT_DIR / topic / str(queue_id)
        reader = ConsumeQueueExt(directory, topic, queue_id)  # existing files keep the size they show
        found = reader.get(max_address) if reader.segments and is_ext_addr(max_address) else None
        writer = cls(directory, reader.mapped_file_size if reader.segments else file_size,
                     max(found.unit.bit_map_size, 0) if found is not None and found.ok else 0)
        if reader.segments:
            writer._load(reader, reader.truncated_end(max_address))
        return writer

    def _load(self, reader: ConsumeQueueExt, end: int) -> None:
        last = reader.segments[-1]
        if end < last.base_offset:  # truncateDirtyFiles would delete the files past it: recovery's to do
            raise CorruptData(f"an ext file after the ext's write position {end}; recover the store first",
                              last.path)
        self.files.load(last_wrote_position=end - last.base_offset)

    def put(self, tags_code: int, store_timestamp: int, bit_map: bytes | None = None) -> int:
        """ConsumeQueueExt.put: the unit's address, or PUT_FAILED. ``bit_map``: the unit's own
        (default: this queue's unevaluated one)."""
        body = self.bit_map if bit_map is None else bit_map
        body = body or b""
        size = CQ_EXT_MIN_UNIT_SIZE + len(body)
        if size > CQ_EXT_MAX_UNIT_SIZE:
            return PUT_FAILED
        for _ in range(PUT_RETRIES):
            mf = self.files.last_mapped_file(0)
            wrote = mf.wrote_position
            if size > self.file_size - wrote - END_BLANK_DATA_LENGTH:  # fullFillToEnd
                mf.back(wrote + 2)
                mf.mm[wrote:wrote + 2] = CQ_EXT_END_MARK.to_bytes(2, "big", signed=True)
                mf.wrote_position = self.file_size
                continue
            mf.back(wrote + size)
            EXT_HEADER.pack_into(mf.mm, wrote, size, tags_code, store_timestamp, len(body))
            mf.mm[wrote + CQ_EXT_MIN_UNIT_SIZE:wrote + size] = body
            mf.wrote_position = wrote + size
            self.units_put += 1
            return ext_offset_to_addr(mf.file_from_offset + wrote)
        return PUT_FAILED

    def flush(self, least_pages: int = 0) -> bool:
        return self.files.flush(least_pages)

    def close(self) -> None:
        self.files.close()
