"""verify's ``rocksdbcq`` area: a store's RocksDB consume queue (``consumequeue/`` holding a
RocksDB database) against the commit log, against its own offset table, and side by side
with the file consume queue of the same queue when both are written (rocksdbCQDoubleWriteEnable).

Each unit must name a message of its topic, queue id, queue offset and size (what
``RocksDBConsumeQueue``'s reads hand ``getMessage``); a queue's units must follow one another
(``RocksDBConsumeQueueTable.rangeQuery`` stops at the first key missing, lines 154-163); the
"max" entry must name the last unit (its commit log and queue offsets), a "min" entry a
unit there is; the dispatch checkpoint must not lie past the commit log. Side by side, the
fields the broker's own ``checkRocksdbCqWriteProgress`` compares (AdminBrokerProcessor.java
3379-3447, checkCqUnitEqual at 3433: queue offset, size, commit log offset, tags code) from
the RocksDB queue's first unit on (before it, the double write had not started); and the
commit log's messages past a queue's last RocksDB unit, from verify's commit log scan.
"""
from __future__ import annotations

import itertools
from typing import Callable, Iterator

from rmqtool.dispatch.multi_dispatch import is_target
from rmqtool.errors import CorruptData, NothingFound
from rmqtool.findings import (ROCKSDB_CQ_FILE_QUEUE_DIFFERS, ROCKSDB_CQ_OFFSET_MISMATCH, ROCKSDB_CQ_UNIT_MISMATCH,
                              ROCKSDB_CQ_UNIT_MISSING, Consequence, Finding, finding)
from rmqtool.formats.rocksdb_cq import MAX_MARKER, MIN_MARKER
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.rocksdb_cq import RocksDBConsumeQueue, RocksUnit, rocksdb_cq_dir
from rmqtool.store.view import StoreView

FLOOD = 20  # differences told one by one a queue; the rest counted in one finding


def check_rocksdb_cq(view: StoreView, queue_ends: Callable[[], dict] | None = None) -> Iterator[Finding]:
    """Every finding about a store's RocksDB consume queue (nothing when it has none).
    ``queue_ends()``: per topic-queue of the commit log, one past its last queue offset and
    that record's commit log offset (verify's commit log scan): the units must reach it.
    One pass over the units, a queue at a time, holding no queue's units in memory."""
    path = rocksdb_cq_dir(view.root)
    if path is None:
        return
    where = str(path)
    files = {(q.topic, q.queue_id): q for q in view.consume_queues().queues if not q.is_batch}
    with RocksDBConsumeQueue(path) as rq:
        reader = CommitLogReader(view.commit_log) if view.has_commit_log else None
        queues: dict = {}  # (topic, queue id) -> _Queue, once its units are read
        try:
            for (topic, queue_id), group in itertools.groupby(rq.units(), key=lambda u: (u.topic, u.queue_id)):
                q = queues[(topic, queue_id)] = _Queue(where, reader, files.get((topic, queue_id)))
                for u in group:
                    yield from q.unit(u)
                yield from q.done()
                yield from _offsets(rq, where, topic, queue_id, q.first, q.last)
        finally:
            if reader is not None:
                reader.close()
        for topic, queue_id in rq.queues():
            if (topic, queue_id) not in queues:
                yield finding(ROCKSDB_CQ_OFFSET_MISMATCH, where, None, f"{topic}/{queue_id}: the offset table names "
                              f"the queue (max offset {rq.max_offset(topic, queue_id)}) but it has no unit",
                              topic=topic, queue_id=queue_id)
        for (topic, queue_id), fq in sorted(files.items()):
            if (topic, queue_id) not in queues and fq.max_offset > fq.min_offset():
                yield finding(ROCKSDB_CQ_FILE_QUEUE_DIFFERS, where, None, f"{topic}/{queue_id}: the file queue holds "
                              f"queue offsets {fq.min_offset()}..{fq.max_offset - 1}, the RocksDB queue none",
                              topic=topic, queue_id=queue_id)
        if queue_ends is not None:
            yield from _coverage(rq, where, queue_ends(), {k: q.last.queue_offset for k, q in queues.items()})
        yield from _checkpoint(rq, view, where, max((q.end for q in queues.values()), default=0))
        yield from rq.findings


class _Runs:
    """Queue offsets met in order, kept as runs (the first ten told, all counted)."""

    def __init__(self):
        self.runs: list[list[int]] = []
        self.count = 0

    def add(self, offset: int) -> None:
        self.count += 1
        if self.runs and self.runs[-1][1] == offset - 1:
            self.runs[-1][1] = offset
        elif len(self.runs) <= 10:
            self.runs.append([offset, offset])

    def text(self) -> str:
        out = [str(a) if a == b else f"{a}..{b}" for a, b in self.runs[:10]]
        return ", ".join(out) + (", ..." if len(self.runs) > 10 else "")


class _Queue:
    """One RocksDB queue's units checked as they come: against the commit log, one after
    another, and merged with the file queue's units (both in queue offset order)."""

    def __init__(self, where: str, reader: CommitLogReader | None, file_queue):
        self.where, self.reader, self.file_queue = where, reader, file_queue
        self.first: RocksUnit | None = None
        self.last: RocksUnit | None = None
        self.end = 0  # one past the furthest record a unit names
        self._file = None  # the file queue's units from the first RocksDB unit on
        self._fu = None  # the next file unit not yet matched
        self.differ = 0
        self.file_only, self.kv_only = _Runs(), _Runs()

    def unit(self, u: RocksUnit) -> Iterator[Finding]:
        if self.first is None:
            self.first = u
            if self.file_queue is not None:
                self._file = self.file_queue.iter_units(max(u.queue_offset, self.file_queue.min_offset()))
                self._fu = next(self._file, None)
        elif u.queue_offset != self.last.queue_offset + 1:
            a, b = self.last.queue_offset + 1, u.queue_offset - 1
            yield finding(ROCKSDB_CQ_UNIT_MISSING, self.where, None, f"{u.topic}/{u.queue_id}: no unit for queue "
                          f"offset{'s ' + str(a) + '..' + str(b) if b > a else ' ' + str(a)} (between two units)",
                          topic=u.topic, queue_id=u.queue_id, queue_offset=a)
        self.last = u
        self.end = max(self.end, u.commit_log_offset + u.size)
        if self.reader is not None:
            yield from _against_commit_log(self.reader, self.where, u)
        if self._file is not None:
            yield from self._merge(u)

    def _merge(self, u: RocksUnit) -> Iterator[Finding]:
        while self._fu is not None and self._fu.queue_offset < u.queue_offset:
            self.file_only.add(self._fu.queue_offset)
            self._fu = next(self._file, None)
        fu = self._fu
        if fu is None or fu.queue_offset != u.queue_offset:
            self.kv_only.add(u.queue_offset)
            return
        self._fu = next(self._file, None)
        fields = [n for n in ("commit_log_offset", "size", "tags_code") if getattr(fu, n) != getattr(u, n)]
        if fields:
            self.differ += 1
            if self.differ <= FLOOD:
                yield finding(ROCKSDB_CQ_FILE_QUEUE_DIFFERS, self.where, None,
                              f"{u.topic}/{u.queue_id} queue offset {u.queue_offset}: "
                              + ", ".join(f"{n} file {getattr(fu, n)} RocksDB {getattr(u, n)}" for n in fields)
                              + f" (file unit at {fu.path}:{fu.position})", topic=u.topic, queue_id=u.queue_id,
                              queue_offset=u.queue_offset)

    def done(self) -> Iterator[Finding]:
        if self._file is None:
            return
        while self._fu is not None:
            self.file_only.add(self._fu.queue_offset)
            self._fu = next(self._file, None)
        topic, queue_id = self.first.topic, self.first.queue_id
        if self.differ > FLOOD:
            yield finding(ROCKSDB_CQ_FILE_QUEUE_DIFFERS, self.where, None, f"{topic}/{queue_id}: "
                          f"{self.differ - FLOOD} more units differ", topic=topic, queue_id=queue_id)
        for side, runs in (("the file queue only", self.file_only), ("the RocksDB queue only", self.kv_only)):
            if runs.count:
                yield finding(ROCKSDB_CQ_FILE_QUEUE_DIFFERS, self.where, None, f"{topic}/{queue_id}: {runs.count} "
                              f"queue offset(s) in {side}: {runs.text()}", topic=topic, queue_id=queue_id,
                              queue_offset=runs.runs[0][0])


def _against_commit_log(reader: CommitLogReader, where: str, u: RocksUnit) -> Iterator[Finding]:
    try:
        m = reader.read(u.commit_log_offset, check_crc=False)
    except (NothingFound, CorruptData) as exc:
        yield _mismatch(where, u, f"no message at commit log offset {u.commit_log_offset} ({exc.message})")
        return
    if (m.topic, m.queue_id, m.queue_offset, m.store_size) == (u.topic, u.queue_id, u.queue_offset, u.size):
        return
    if m.store_size != u.size or not is_target(u.topic, u.queue_id, u.queue_offset, m.queue_id, m.properties):
        yield _mismatch(where, u, f"commit log offset {u.commit_log_offset} holds {m.topic}/{m.queue_id} "
                        f"queue offset {m.queue_offset}, {m.store_size} bytes")


def _coverage(rq: RocksDBConsumeQueue, where: str, queue_ends: dict, last_units: dict) -> Iterator[Finding]:
    """Messages of the commit log past their RocksDB queue's last unit: not dispatched to it.
    Those after the dispatch checkpoint are dispatched again at the next start."""
    for (topic, queue_id), (queue_end, last_offset) in sorted(queue_ends.items()):
        have = last_units.get((topic, queue_id), -1) + 1
        if have >= queue_end:
            continue
        again = rq.checkpoint is not None and last_offset >= rq.checkpoint
        yield finding(ROCKSDB_CQ_UNIT_MISSING, where, None, f"{topic}/{queue_id}: the commit log holds messages up to "
                      f"queue offset {queue_end - 1}, the RocksDB queue "
                      f"{'none' if have == 0 else f'units up to {have - 1}'}"
                      + (f" (past the dispatch checkpoint {rq.checkpoint}: the next start dispatches them)"
                         if again else ""),
                      consequence=Consequence.REBUILT if again else None, topic=topic, queue_id=queue_id,
                      queue_offset=have)


def _mismatch(where: str, u: RocksUnit, what: str) -> Finding:
    return finding(ROCKSDB_CQ_UNIT_MISMATCH, where, None, f"{u.topic}/{u.queue_id} queue offset {u.queue_offset} "
                   f"(commitLogOffset {u.commit_log_offset}, size {u.size}): {what}", topic=u.topic,
                   queue_id=u.queue_id, queue_offset=u.queue_offset, commit_log_offset=u.commit_log_offset)


def _offsets(rq: RocksDBConsumeQueue, where: str, topic: str, queue_id: int, first: RocksUnit, last: RocksUnit):
    entries = rq.offsets.get((topic, queue_id), {})
    high = entries.get(MAX_MARKER)
    if high is None:
        yield finding(ROCKSDB_CQ_OFFSET_MISMATCH, where, None, f"{topic}/{queue_id}: no max entry for a queue with "
                      f"units up to queue offset {last.queue_offset} (the broker's max offset starts from -1)",
                      topic=topic, queue_id=queue_id)
    elif (high.queue_offset, high.commit_log_offset) != (last.queue_offset, last.commit_log_offset):
        yield finding(ROCKSDB_CQ_OFFSET_MISMATCH, where, None, f"{topic}/{queue_id}: the max entry names queue offset "
                      f"{high.queue_offset} at commitLogOffset {high.commit_log_offset}; the last unit is "
                      f"{last.queue_offset} at {last.commit_log_offset}", topic=topic, queue_id=queue_id,
                      queue_offset=high.queue_offset)
    low = entries.get(MIN_MARKER)
    if low is not None and not first.queue_offset <= low.queue_offset <= last.queue_offset + 1:
        yield finding(ROCKSDB_CQ_OFFSET_MISMATCH, where, None, f"{topic}/{queue_id}: the min entry names queue offset "
                      f"{low.queue_offset}, outside the units' {first.queue_offset}..{last.queue_offset}",
                      topic=topic, queue_id=queue_id, queue_offset=low.queue_offset)


def _checkpoint(rq: RocksDBConsumeQueue, view: StoreView, where: str, units_end: int) -> Iterator[Finding]:
    if rq.checkpoint is None:
        return
    log_end = view.commit_log_end.end if view.has_commit_log and view.segments else 0
    if rq.checkpoint > log_end:
        yield finding(ROCKSDB_CQ_OFFSET_MISMATCH, where, None, f"the dispatch checkpoint (CHECKPOINT_TOPIC) says "
                      f"{rq.checkpoint}, past the commit log's end {log_end}")
    elif rq.checkpoint < units_end:
        yield finding(ROCKSDB_CQ_OFFSET_MISMATCH, where, None, f"the dispatch checkpoint (CHECKPOINT_TOPIC) says "
                      f"{rq.checkpoint}, before the end of the last unit's record {units_end}")
