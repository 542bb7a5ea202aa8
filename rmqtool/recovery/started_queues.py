"""The consume queues as the broker's next start leaves them, read as the files' queues are
read (``store/consumequeue.ConsumeQueues``): each queue's range is the simulation's
(``Outcome.queues``, the ranges ``rmqtool recover`` plans with), its units those the start's
models hold (``Outcome.queue_models``: the files cut by recovery and what dispatch puts back,
a queue it makes from nothing too). Commands that judge committed offsets and lag against
the queues (report, offsets, offsets reset, verify's config check) read these, not the files
cut at the recovered end, which miss what the start's dispatch puts back.
"""
from __future__ import annotations

import dataclasses
from typing import Iterator

from rmqtool.errors import StoreAccessError
from rmqtool.formats.consumequeue import BATCH_CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE, is_fill_unit, is_written_unit
from rmqtool.store.consumequeue import BatchConsumeQueueUnit, ConsumeQueues, ConsumeQueueUnit, batch_holding
from rmqtool.store.rocksdb_cq import rocksdb_only
from rmqtool.store.segments import Segment
from rmqtool.store.view import StoreView


@dataclasses.dataclass
class StartedQueue:
    """One queue after the start: the read side's queue interface (``min_offset``,
    ``max_offset``, ``get``, ``segments``) over the simulation's range and model."""
    topic: str
    queue_id: int
    is_batch: bool
    directory: str
    low: int
    max_offset: int
    model: object = None  # recovery's QueueModel / BatchQueueModel (None: the start destroyed every queue)
    findings: list = dataclasses.field(default_factory=list)  # what the files say is verify's, not these

    @property
    def mapped_file_size(self) -> int | None:
        return self.model.file_size if self.model is not None else None

    @property
    def segments(self) -> list[Segment]:
        """The files the start leaves (one it makes named as the broker names it, not on disk yet)."""
        if self.model is None:
            return []
        return [f.segment if f.segment is not None else
                Segment(_path(self.directory, f.base), f.base, f.size) for f in self.model.files]

    @property
    def end(self) -> int:
        """A plain queue's byte offset one past its units (queue offset x 20): where
        query/by_time's search of its files stops."""
        return self.max_offset * CQ_STORE_UNIT_SIZE

    def iter_units(self) -> Iterator[BatchConsumeQueueUnit]:
        """A batch queue's units within [min, max), in order (query/by_time's batch lookup)."""
        if self.model is None:
            return
        unit = BATCH_CQ_STORE_UNIT_SIZE
        for f in self.model.files:
            for i in range(f.wrote // unit):
                u = f.unit(i * unit)
                if u.size > 0 and self.low <= u.msg_base_offset < self.max_offset:
                    yield self._batch_row(f, i * unit, u)
            f.release()

    def min_offset(self, commit_log_min_offset: int = 0) -> int:
        """getMinOffsetInQueue after the start (correctMinOffset ran in the simulation, at the
        start's min physic offset: the argument is the files' queues' and not needed here)."""
        return self.low

    def get(self, queue_offset: int) -> ConsumeQueueUnit | BatchConsumeQueueUnit | None:
        """The unit at a queue offset within [min, max) as the start leaves it, else None."""
        if self.model is None or not self.low <= queue_offset < self.max_offset:
            return None
        return self._batch_unit(queue_offset) if self.is_batch else self._unit(queue_offset)

    def _unit(self, queue_offset: int) -> ConsumeQueueUnit | None:
        at = queue_offset * CQ_STORE_UNIT_SIZE
        for f in self.model.files:
            if f.base <= at < f.base + f.wrote:
                u = _unit_at(f, at - f.base)
                if not is_written_unit(u.commit_log_offset, u.size):
                    return None
                return ConsumeQueueUnit(self.topic, self.queue_id, queue_offset, u.commit_log_offset, u.size,
                                        u.tags_code, bool(is_fill_unit(u.commit_log_offset, u.size, u.tags_code)),
                                        _path(self.directory, f.base), at - f.base)
        return None

    def _batch_unit(self, queue_offset: int) -> BatchConsumeQueueUnit | None:
        """BatchConsumeQueue.get: the file whose first batch starts at or before the offset,
        then a binary search of its units' msgBaseOffset."""
        unit = BATCH_CQ_STORE_UNIT_SIZE
        held = None
        for f in self.model.files:
            if f.wrote >= unit and _unit_at(f, 0).msg_base_offset <= queue_offset:
                held = f
        if held is None:
            return None
        found = batch_holding(queue_offset, 0, held.wrote // unit - 1, lambda i: _unit_at(held, i * unit))
        if found is None:
            return None
        i, u = found
        return self._batch_row(held, i * unit, u)

    def _batch_row(self, f, position: int, u) -> BatchConsumeQueueUnit:
        """The read side's unit for a model file's batch unit ``u`` at ``position``."""
        return BatchConsumeQueueUnit(self.topic, self.queue_id, u.msg_base_offset, u.commit_log_offset, u.size,
                                     u.tags_code, u.store_timestamp, u.msg_base_offset, u.batch_size,
                                     u.compacted_offset, _path(self.directory, f.base), position)


def _unit_at(f, position: int):
    """The unit at byte ``position`` of a model's file: from the model's bytes where the start
    wrote the file, else that unit alone read from disk (a file holds up to 6 MB, a row asks
    for two units)."""
    if f.dirty:
        return f.unit(position)
    try:
        with open(f.segment.path, "rb") as fh:
            fh.seek(position)
            raw = fh.read(f.unit_size)
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", f.segment.path) from None
    return f.unit_fields._make(f.unit_struct.unpack(raw.ljust(f.unit_size, b"\0")))


def _path(directory: str, base: int) -> str:
    return f"{directory}/{base:020d}"


def started_queues(view: StoreView, outcome) -> ConsumeQueues | None:
    """The queues as the simulated start ``outcome`` leaves them; None when it says nothing
    of them: no simulation, a store the broker would not load, no ``commitlog/`` (a partial
    copy: the queues as their files give them), or queues kept in RocksDB (the simulation's
    are file queues the broker does not keep)."""
    if outcome is None or not outcome.loadable or not view.has_commit_log or rocksdb_only(view.root):
        return None
    batch_topics = set(outcome.batch_topics)
    queues = []
    for name, rng in outcome.queues.items():
        topic, queue_id = name.rsplit("/", 1)
        model = outcome.queue_models.get((topic, int(queue_id)))
        is_batch = model.batch if model is not None else topic in batch_topics
        base = view.paths.batch_consumequeue if is_batch else view.paths.consumequeue
        # an empty batch queue's min is -1 (the broker's); the files' queues say max_offset then
        low = rng.min_offset if rng.min_offset >= 0 else rng.max_offset
        queues.append(StartedQueue(topic, int(queue_id), is_batch, str(base / topic / queue_id), low,
                                   rng.max_offset, model))
    queues.sort(key=lambda q: (q.is_batch, q.topic, q.queue_id))
    return ConsumeQueues(queues, [])
