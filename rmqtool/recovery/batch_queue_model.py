"""One 5.x batch consume queue as the 5.3.3 broker's load, recovery and dispatch change it, in memory.

A literal model of 5.3.3 BatchConsumeQueue, the counterpart of ``queue_model`` for
``batchconsumequeue/``. Where it differs from ConsumeQueue:

* a unit is written when commitLogOffset >= 0, size > 0, msgBaseOffset >= 0 and
  batchSize > 0; maxMsgPhyOffsetInCommitLog is the last unit's commitLogOffset (its
  start, not its end);
* the queue's offsets are kept, not computed from bytes: min is the msgBaseOffset of the
  first file's first unit (-1 when there is none), max the msgBaseOffset + batchSize of
  the last file's last unit (else the second-last file's, else 0);
* putBatchMessagePositionInfo appends at the queue's end whatever the record's queue
  offset (no fill units, no offset check); a new queue's first file is named 0;
* truncateDirtyLogicFiles keeps the last file's first unit unless it points at or past
  the end (it is not tested for being written), and correctMinOffset walks the first
  file's units up to the first one at or past the commit log's min offset.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from rmqtool.formats.consumequeue import (BATCH_CQ_STORE_UNIT_SIZE, COMPACTED_OFFSET_NONE, BatchCqUnit,
                                          is_written_batch_unit)
from rmqtool.formats.derive import field_names
from rmqtool.recovery.queue_model import QueueFile, QueueFiles
from rmqtool.store.consumequeue import BATCH_CQ_LAYOUT, BATCH_CQ_UNIT
from rmqtool.store.segments import Segment

UNIT = BATCH_CQ_STORE_UNIT_SIZE


class BatchQueueFile(QueueFile):
    unit_size = UNIT
    unit_struct = BATCH_CQ_UNIT
    unit_fields = namedtuple("BatchCqUnitFields", field_names(BatchCqUnit))

    def batch_columns(self):
        data = self.data
        return np.frombuffer(data, BATCH_CQ_LAYOUT.dtype, count=len(data) // UNIT)


class BatchQueueModel(QueueFiles):
    batch = True
    file_type = BatchQueueFile
    unit_size = UNIT

    def __init__(self, topic: str, queue_id: int, segments: list[Segment], file_size: int):
        super().__init__(topic, queue_id, segments, file_size)  # max_physic_offset: maxMsgPhyOffsetInCommitLog
        self.min_offset = -1  # minOffsetInQueue
        self.max_offset = 0  # maxOffsetInQueue

    def _written(self, f: BatchQueueFile) -> np.ndarray:
        u = f.batch_columns()
        return is_written_batch_unit(u["commit_log_offset"], u["size"], u["msg_base_offset"], u["batch_size"])

    def _reach(self, f: BatchQueueFile, n: int) -> int:
        return f.unit((n - 1) * UNIT).commit_log_offset  # where the last unit's record starts

    def _recovered(self) -> None:
        self._revise_min_max()

    def _revise_min(self) -> None:
        if not self.files:
            self.max_offset, self.min_offset = 0, -1
            return
        first = self.files[0]
        self.min_offset = first.unit(0).msg_base_offset if first.wrote >= UNIT else -1

    def _revise_max(self) -> None:
        last = self.files[-1] if self.files else None
        for f in ([last] if last is not None else []) + (self.files[-2:-1] if len(self.files) >= 2 else []):
            if f.wrote >= UNIT:
                u = f.unit(f.wrote - UNIT)
                self.max_offset = u.msg_base_offset + u.batch_size
                return
        self.max_offset = 0

    def _revise_min_max(self) -> None:
        self._revise_min()
        self._revise_max()

    # ---- BatchConsumeQueue.truncateDirtyLogicFiles --------------------------------------------
    def _truncate_dirty_logic_files(self, phy_offset: int) -> None:
        self.max_physic_offset = phy_offset - 1
        while self.files:
            f = self.files[-1]
            f.wrote = 0
            u = f.batch_columns()
            if not len(u):
                break
            offsets = u["commit_log_offset"]
            if offsets[0] >= phy_offset:
                self.files.pop()  # deleteLastMappedFile
                continue
            f.wrote = UNIT
            self.max_physic_offset = int(offsets[0])
            # from the second unit on: one not written, or one at or past the end, stops it
            rest = ~self._written(f)[1:] | (offsets[1:] >= phy_offset)
            stop = np.flatnonzero(rest)
            n = int(stop[0]) + 1 if stop.size else len(offsets)
            f.wrote = n * UNIT
            self.max_physic_offset = int(offsets[n - 1])
            break  # the broker's loop would spin on a file of one unit; it stops here
        self._revise_min_max()

    # ---- putMessagePositionInfoWrapper / putBatchMessagePositionInfo --------------------------
    def put(self, offset: int, size: int, tags_code: int, store_timestamp: int, msg_base_offset: int,
            batch_size: int) -> bool:
        """False when the unit is not written (skipped as built, or an unusable request)."""
        if msg_base_offset < 0 or batch_size < 0:
            return False  # '[NOTIFYME]unexpected dispatch request'
        if offset <= self.max_physic_offset:
            return False  # 'Build batch consume queue repeatedly'
        f = self._last_file()
        if f.wrote + UNIT > self.file_size:
            return False  # appendMessage fails: the broker retries, then marks the logics queue in error
        BATCH_CQ_UNIT.pack_into(f.writable(f.wrote + UNIT), f.wrote, offset, size, tags_code, store_timestamp, msg_base_offset,
                                batch_size, COMPACTED_OFFSET_NONE, bytes(4))
        f.wrote += UNIT
        self.units_added += 1
        self.max_physic_offset = offset
        self.max_offset = msg_base_offset + batch_size
        if f.first_create and self.min_offset == -1:
            self._revise_min()
        return True

    def _last_file(self) -> BatchQueueFile:
        """getLastMappedFile(getMaxOffset()): the last file unless full; the first one is 0."""
        if self.files and self.files[-1].wrote < self.file_size:
            return self.files[-1]
        base = self.files[-1].base + self.file_size if self.files else 0
        f = BatchQueueFile(base, self.file_size, None)
        f.first_create = not self.files
        self.files.append(f)
        return f

    # ---- recoverOffsetTable's correctMinOffset ------------------------------------------------
    def _correct_min_offset(self, min_phy_offset: int, semantics: str) -> None:
        self._revise_min()
        if not self.files:
            return
        first = self.files[0]
        u = first.batch_columns()[:first.wrote // UNIT]
        below = np.flatnonzero(u["commit_log_offset"] >= min_phy_offset)
        n = int(below[0]) if below.size else len(u)
        if n:
            self.min_offset = int(u["msg_base_offset"][n - 1]) + int(u["batch_size"][n - 1])

