"""Consume queue checks (``consumequeue/`` and 5.x ``batchconsumequeue/``) against the commit log.

Each queue's units are read as numpy arrays and matched with the commit log's messages
by offset (a sorted search, no per-unit Python): every unit must point at the start of
a message whose topic, queue id, queue offset, size and tags code (and, in a batch
queue, base offset, batch size and store timestamp) agree. Then the other way: every
message the broker dispatches must have its unit; those past the queue's end are not
dispatched yet, the others are lost from the queue. Holes, invalid and fill units are
reported as runs, one finding a run.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterator

import numpy as np

from rmqtool.findings import (CONSUME_QUEUE_FILL_UNITS, CONSUME_QUEUE_HOLE, CONSUME_QUEUE_MISSING,
                              CONSUME_QUEUE_UNIT_INVALID, CONSUME_QUEUE_UNIT_MISMATCH,
                              CONSUME_QUEUE_UNIT_NO_RECORD, MESSAGE_NOT_DISPATCHED,
                              MESSAGE_NOT_IN_CONSUME_QUEUE, Finding, finding)
from rmqtool.formats.consumequeue import FILL_COMMIT_LOG_OFFSET, FILL_SIZE, FILL_TAGS_CODE
from rmqtool.store.consumequeue import BATCH_CQ_LAYOUT, CQ_LAYOUT, AnyConsumeQueue, ConsumeQueues
from rmqtool.store.arrays import read_records, runs
from rmqtool.verify.commitlog import CommitLogData


@dataclasses.dataclass
class QueueUnits:
    """A queue's units up to its end, with where each lies."""
    queue: AnyConsumeQueue
    units: np.ndarray  # records of the queue layout's dtype
    index: np.ndarray  # unit number in the queue (byte offset / unit size)
    file: np.ndarray  # index into queue.segments
    bytes_read: int

    def where(self, k: int) -> tuple[str, int]:
        seg = self.queue.segments[int(self.file[k])]
        return str(seg.path), int(self.index[k]) * self.queue.unit_size - seg.base_offset


def read_units(queue: AnyConsumeQueue) -> QueueUnits:
    """The whole units of every file of the queue, up to the end the broker's load finds."""
    dtype = (BATCH_CQ_LAYOUT if queue.is_batch else CQ_LAYOUT).dtype
    parts, index, files = [], [], []
    total = 0
    for n, seg in enumerate(queue.segments):
        if seg.base_offset >= queue.end:
            break
        count = (min(seg.size, queue.end - seg.base_offset)) // queue.unit_size
        units = read_records(seg.path, dtype, 0, count)
        total += seg.size
        parts.append(units)
        first = seg.base_offset // queue.unit_size
        index.append(np.arange(first, first + len(units), dtype=np.int64))
        files.append(np.full(len(units), n, dtype=np.int32))
    if not parts:
        return QueueUnits(queue, np.zeros(0, dtype), np.zeros(0, np.int64), np.zeros(0, np.int32), total)
    return QueueUnits(queue, np.concatenate(parts), np.concatenate(index), np.concatenate(files), total)


def _label(queue: AnyConsumeQueue) -> str:
    return f"{'batch consume queue' if queue.is_batch else 'consume queue'} {queue.topic}/{queue.queue_id}"


def check_queue(q: QueueUnits, data: CommitLogData, tq: int | None, mine: np.ndarray) -> list[Finding]:
    """One queue against the commit log; ``tq`` is its topic-queue id in ``data`` (None:
    no message of the commit log is in it), ``mine`` the rows of its messages (in order)."""
    queue, u = q.queue, q.units
    found: list = []
    here = {"topic": queue.topic, "queue_id": queue.queue_id}
    clo = u["commit_log_offset"]
    size = u["size"]
    if queue.is_batch:
        written = (clo >= 0) & (size > 0) & (u["msg_base_offset"] >= 0) & (u["batch_size"] > 0)
        zero = (clo == 0) & (size == 0) & (u["msg_base_offset"] == 0) & (u["batch_size"] == 0)
        fill = np.zeros(len(u), bool)
    else:
        written = (clo >= 0) & (size > 0)
        zero = (clo == 0) & (size == 0) & (u["tags_code"] == 0)
        fill = (clo == FILL_COMMIT_LOG_OFFSET) & (size == FILL_SIZE) & (u["tags_code"] == FILL_TAGS_CODE)
    for mask, finding_id, what in ((~written & zero, CONSUME_QUEUE_HOLE, "unwritten (all-zero) units"),
                                   (~written & ~zero, CONSUME_QUEUE_UNIT_INVALID, "units the broker skips "
                                    "(commitLogOffset < 0 or size <= 0)"),
                                   (fill, CONSUME_QUEUE_FILL_UNITS, "fill units")):
        for start, stop in runs(mask):
            path, position = q.where(start)
            found.append(finding(finding_id, path, position,
                                 f"{_label(queue)}: {stop - start} {what} at queue offsets "
                                 f"{int(q.index[start])}..{int(q.index[stop - 1])}",
                                 queue_offset=int(q.index[start]), units=stop - start, **here))
    # units below the commit log's first file point at deleted data, as the broker's min offset says
    real = np.flatnonzero(written & ~fill & (clo >= data.min_offset))
    rows, hit = data.locate(clo[real])
    for k in real[~hit]:
        path, position = q.where(int(k))
        past = int(clo[k]) >= data.end
        found.append(finding(CONSUME_QUEUE_UNIT_NO_RECORD, path, position,
                             f"{_label(queue)}: unit {int(q.index[k])} points at commit log offset {int(clo[k])}, "
                             + ("at or past the commit log's end" if past else "where no message starts"),
                             queue_offset=int(_unit_queue_offset(q, k)), commit_log_offset=int(clo[k]), **here))
    ok_units, ok_rows = real[hit], rows[hit]
    found += _mismatches(q, data, tq, ok_units, ok_rows)
    found += _coverage(q, data, tq, ok_rows, mine)
    return found


def _unit_queue_offset(q: QueueUnits, k) -> np.ndarray:
    return q.units["msg_base_offset"][k] if q.queue.is_batch else q.index[k]


def _mismatches(q: QueueUnits, data: CommitLogData, tq: int | None, units: np.ndarray, rows: np.ndarray):
    u = q.units
    checks = [("topic and queue", data["tq"][rows] != (-1 if tq is None else tq), None, None),
              ("queue offset", data["queue_offset"][rows] != _unit_queue_offset(q, units),
               _unit_queue_offset(q, units), data["queue_offset"][rows]),
              ("size", data["size"][rows] != u["size"][units], u["size"][units], data["size"][rows]),
              ("tags code", data["tags_code"][rows] != u["tags_code"][units], u["tags_code"][units],
               data["tags_code"][rows])]
    if q.queue.is_batch:
        checks += [("batch size", data["batch"][rows] != u["batch_size"][units], u["batch_size"][units],
                    data["batch"][rows]),
                   ("store timestamp", data["store_timestamp"][rows] != u["store_timestamp"][units],
                    u["store_timestamp"][units], data["store_timestamp"][rows])]
    bad = np.zeros(len(units), bool)
    for _, mask, _, _ in checks:
        bad |= mask
    found = []
    for j in np.flatnonzero(bad):
        k, row = int(units[j]), int(rows[j])
        what = []
        for name, mask, unit_value, record_value in checks:
            if mask[j]:
                if unit_value is None:
                    topic, queue_id = data.topic_queues[int(data["tq"][row])]
                    what.append(f"the record is in {topic}/{queue_id}")
                else:
                    what.append(f"{name} {int(unit_value[j])} (record: {int(record_value[j])})")
        path, position = q.where(k)
        found.append(finding(CONSUME_QUEUE_UNIT_MISMATCH, path, position,
                             f"{_label(q.queue)}: unit {int(q.index[k])} disagrees with the record at commit log "
                             f"offset {int(data['offset'][row])}: " + "; ".join(what),
                             topic=q.queue.topic, queue_id=q.queue.queue_id,
                             queue_offset=int(_unit_queue_offset(q, k)), commit_log_offset=int(data["offset"][row])))
    return found


def _coverage(q: QueueUnits, data: CommitLogData, tq: int | None, pointed_rows: np.ndarray,
              mine: np.ndarray) -> list[Finding]:
    """Messages of this topic-queue (rows ``mine``) that no unit points at, as runs of queue offsets."""
    if tq is None:
        return []
    mine = mine[data["batch"][mine] > 0]
    missing = mine[~np.isin(mine, pointed_rows)]
    if not len(missing):
        return []
    queue_max = q.queue.max_offset
    found = []
    qo = data["queue_offset"][missing]
    for finding_id, mask, why in ((MESSAGE_NOT_DISPATCHED, qo >= queue_max,
                                   f"past the queue's end ({queue_max}): not dispatched yet"),
                                  (MESSAGE_NOT_IN_CONSUME_QUEUE, qo < queue_max,
                                   "inside the queue's range, but no unit points at them: lost from the queue")):
        found += _message_runs(data, missing[mask], finding_id, why, q.queue)
    return found


def _message_runs(data: CommitLogData, rows: np.ndarray, finding_id: str, why: str, queue) -> list[Finding]:
    """One finding per run of consecutive queue offsets (a batch's next is its offset plus its size)."""
    if not len(rows):
        return []
    qo = data["queue_offset"][rows]
    order = np.argsort(qo, kind="stable")
    rows, qo = rows[order], qo[order]
    step = np.maximum(data["batch"][rows][:-1], 1)
    breaks = np.flatnonzero(qo[1:] != qo[:-1] + step) + 1
    found = []
    for part in np.split(np.arange(len(rows)), breaks):
        first, last = int(rows[part[0]]), int(rows[part[-1]])
        offset = int(data["offset"][first])
        topic, queue_id = data.topic_queues[int(data["tq"][first])]
        path, position = data.where(offset)
        found.append(finding(finding_id, path, position,
                             f"{len(part)} message(s) of {topic}/{queue_id}, queue offsets {int(qo[part[0]])}.."
                             f"{int(qo[part[-1]])} (commit log offsets {offset}..{int(data['offset'][last])}): {why}",
                             topic=topic, queue_id=queue_id, queue_offset=int(qo[part[0]]), commit_log_offset=offset,
                             messages=len(part)))
    return found


def check_consume_queues(queues: ConsumeQueues, data: CommitLogData,
                         on_bytes: Callable[[int], None] | None = None) -> Iterator[Finding]:
    """Every queue of the store against the commit log, then the topic-queues the commit
    log has messages for and no queue holds."""
    yield from queues.all_findings()  # what opening them found: file sizes, names, the load's cut
    tq_of = {tq: i for i, tq in enumerate(data.topic_queues)}
    # each topic-queue's rows, found once (not a pass over every message for each of thousands of queues)
    tq_col = data["tq"]
    order = np.argsort(tq_col, kind="stable").astype(np.int32 if len(tq_col) < 1 << 31 else np.int64)
    bounds = np.concatenate(([0], np.cumsum(np.bincount(tq_col, minlength=len(data.topic_queues)))))

    def rows_of(i: int) -> np.ndarray:
        return order[bounds[i]:bounds[i + 1]]

    seen = set()
    for queue in queues.queues:
        q = read_units(queue)
        tq = tq_of.get((queue.topic, queue.queue_id))
        seen.add((queue.topic, queue.queue_id))
        yield from check_queue(q, data, tq, order[:0] if tq is None else rows_of(tq))
        if on_bytes is not None:
            on_bytes(q.bytes_read)
    for i, (topic, queue_id) in enumerate(data.topic_queues):
        if (topic, queue_id) in seen:
            continue
        rows = rows_of(i)
        rows = rows[data["batch"][rows] > 0]
        yield from _message_runs(data, rows, CONSUME_QUEUE_MISSING,
                                 f"no consume queue directory {topic}/{queue_id}", None)
