"""Consume queue checks (``consumequeue/`` and 5.x ``batchconsumequeue/``) against the commit log.

Each queue's units are read in order, a chunk at a time, as the commit log's bands pass
(:mod:`rmqtool.verify.lookups`), and matched with the band's messages by offset (a
sorted search, no per-unit Python): every unit must point at the start of a message
whose topic, queue id, queue offset, size and tags code (and, in a batch queue, base
offset, batch size and store timestamp) agree. Then the other way: every message the
broker dispatches must have its unit; those past the queue's end are not dispatched yet,
the others are lost from the queue. Holes, invalid and fill units are reported as runs,
one finding a run. Findings come out queue by queue once the commit log is checked.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from rmqtool.dispatch.multi_dispatch import is_target
from rmqtool.errors import RmqError
from rmqtool.findings import (Consequence, CONSUME_QUEUE_FILL_UNITS, CONSUME_QUEUE_HOLE, CONSUME_QUEUE_MISSING,
                              CONSUME_QUEUE_UNIT_INVALID, CONSUME_QUEUE_UNIT_MISMATCH,
                              CONSUME_QUEUE_UNIT_NO_RECORD, MESSAGE_NOT_DISPATCHED, MESSAGE_UNREACHABLE,
                              MESSAGE_NOT_IN_CONSUME_QUEUE, Finding, finding)
from rmqtool.formats.consumequeue import is_fill_unit, is_written_batch_unit, is_written_unit
from rmqtool.store.arrays import read_records, runs
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.consumequeue import BATCH_CQ_LAYOUT, CQ_LAYOUT, AnyConsumeQueue, ConsumeQueues
from rmqtool.store.rocksdb_cq import rocksdb_only
from rmqtool.verify.commitlog import BandConsumer, CommitLogCheck, SegmentCheck, tq_order
from rmqtool.verify.cqext import EXT_NONE, QueueExtCheck, orphan_findings
from rmqtool.verify.lookups import OffsetLookups, late_offsets, subset

_RUN_KINDS = ((CONSUME_QUEUE_HOLE, "unwritten (all-zero) units"),
              (CONSUME_QUEUE_UNIT_INVALID, "units the broker skips (commitLogOffset < 0 or size <= 0)"),
              (CONSUME_QUEUE_FILL_UNITS, "fill units"))
_UNIT_FIELDS = (("seq", np.int64), ("index", np.int64), ("file", np.int32), ("size", np.int64),
                ("tags_code", np.int64), ("queue_offset", np.int64), ("batch_size", np.int64),
                ("store_timestamp", np.int64), ("ext", np.int8), ("ext_offset", np.int64))
ITEM_DTYPE = np.dtype([("offset", np.int64), *_UNIT_FIELDS])  # a unit waiting for its band


def _label(queue: AnyConsumeQueue) -> str:
    return f"{'batch consume queue' if queue.is_batch else 'consume queue'} {queue.topic}/{queue.queue_id}"


class QueueCheck:
    """One queue: its units read in order (runs of unwritten, invalid and fill units found on
    the way), and those pointing into the commit log matched band by band."""

    def __init__(self, queue: AnyConsumeQueue, log: CommitLogCheck):
        self.queue = queue
        self.log = log
        self.here = {"topic": queue.topic, "queue_id": queue.queue_id}
        self.dtype = (BATCH_CQ_LAYOUT if queue.is_batch else CQ_LAYOUT).dtype
        self.files = [seg for seg in queue.segments if seg.base_offset < queue.end]
        self.bytes_read = sum(seg.size for seg in self.files)
        self._file = 0
        self._read_in_file = 0  # units of the current file read
        self._seq = 0  # units read so far: each unit's place in read order
        # per run kind, the run going on: [first seq, last seq, first index, last index, path, position]
        self._open: list = [None, None, None]
        self.run_findings: list = [[], [], []]
        self.no_record: list = []  # (seq, finding)
        self.mismatch: list = []
        self.lookups = OffsetLookups(self._read)
        self.tq: int | None = None  # its topic-queue id in the commit log's table, once a message of it is seen
        self.unpointed: list = []  # (offset, queue offset, batch) of its messages no unit of it points at
        self.pointed_late: list = []  # offsets its late units point at
        self.ext = None if queue.is_batch else QueueExtCheck(queue)  # ext addresses followed (enableConsumeQueueExt)

    def where(self, file: int, index: int) -> tuple[str, int]:
        seg = self.files[file]
        return str(seg.path), index * self.queue.unit_size - seg.base_offset

    def _read(self, n: int) -> np.ndarray | None:
        """The next units (at most n) that point into the commit log, as ITEM_DTYPE; units
        that point nowhere become findings here."""
        queue = self.queue
        while self._file < len(self.files):
            seg = self.files[self._file]
            count = min(seg.size, queue.end - seg.base_offset) // queue.unit_size
            if self._read_in_file < count:
                break
            self._file += 1
            self._read_in_file = 0
        else:
            return None
        units = read_records(seg.path, self.dtype, self._read_in_file * queue.unit_size,
                             min(n, count - self._read_in_file))
        if len(units) < min(n, count - self._read_in_file):  # a file shorter than its count: nothing more there
            self._read_in_file = count
        else:
            self._read_in_file += len(units)
        if not len(units):
            return np.zeros(0, ITEM_DTYPE)
        first = seg.base_offset // queue.unit_size + (self._read_in_file - len(units))
        index = np.arange(first, first + len(units), dtype=np.int64)
        seq = np.arange(self._seq, self._seq + len(units), dtype=np.int64)
        self._seq += len(units)
        return self._classify(units, index, seq)

    def _classify(self, u: np.ndarray, index: np.ndarray, seq: np.ndarray) -> np.ndarray:
        # the big-endian fields once in this machine's order: every test below reads them
        clo, size, tags = (u[name].astype(np.int64) for name in ("commit_log_offset", "size", "tags_code"))
        if self.queue.is_batch:
            written = is_written_batch_unit(clo, size, u["msg_base_offset"], u["batch_size"])
            zero = (clo == 0) & (size == 0) & (u["msg_base_offset"] == 0) & (u["batch_size"] == 0)
            fill = np.zeros(len(u), bool)
        else:
            written = is_written_unit(clo, size)
            zero = (clo == 0) & (size == 0) & (tags == 0)
            fill = is_fill_unit(clo, size, tags)
        for kind, mask in enumerate((~written & zero, ~written & ~zero, fill)):
            self._runs(kind, mask, index, seq)
        # units below the commit log's first file point at deleted data, as the broker's min offset says
        real = np.flatnonzero(written & ~fill & (clo >= self.log.min_offset))
        items = np.zeros(len(real), ITEM_DTYPE)  # batch size, store timestamp, ext offset: 0 unless set
        if len(real) == len(u):  # every unit (the common case): slices, not gathers
            real = slice(None)
        items["offset"] = clo[real]
        items["seq"], items["index"], items["file"] = seq[real], index[real], self._file
        items["size"], items["tags_code"] = size[real], tags[real]
        if self.queue.is_batch:
            items["queue_offset"], items["batch_size"] = u["msg_base_offset"][real], u["batch_size"][real]
            items["store_timestamp"] = u["store_timestamp"][real]
        else:
            items["queue_offset"] = index[real]
        if EXT_NONE:
            items["ext"] = EXT_NONE
        if self.ext is not None:
            self.ext.resolve(items, self.where)
        past = clo[real] >= self.log.written_end
        if past.any():
            self.not_found(subset(items, past))
            items = subset(items, ~past)
        return items

    def _runs(self, kind: int, mask: np.ndarray, index: np.ndarray, seq: np.ndarray) -> None:
        """Runs of a kind of unit, in read order, carried over chunk and file boundaries."""
        for start, stop in runs(mask):
            run = self._open[kind]
            if run is not None and run[1] == seq[start] - 1:  # goes on from the chunk before
                run[1], run[3] = int(seq[stop - 1]), int(index[stop - 1])
                continue
            self._close(kind)
            path, position = self.where(self._file, int(index[start]))
            self._open[kind] = [int(seq[start]), int(seq[stop - 1]), int(index[start]), int(index[stop - 1]),
                                path, position]
        run = self._open[kind]
        if run is not None and len(seq) and run[1] != seq[-1]:
            self._close(kind)

    def _close(self, kind: int) -> None:
        run = self._open[kind]
        if run is None:
            return
        first_seq, last_seq, first, last, path, position = run
        finding_id, what = _RUN_KINDS[kind]
        units = last_seq - first_seq + 1
        self.run_findings[kind].append(finding(finding_id, path, position,
                                               f"{_label(self.queue)}: {units} {what} at queue offsets {first}..{last}",
                                               queue_offset=first, units=units, **self.here))
        self._open[kind] = None

    def not_found(self, items: np.ndarray) -> None:
        for item in items:
            path, position = self.where(int(item["file"]), int(item["index"]))
            offset = int(item["offset"])
            self.no_record.append((int(item["seq"]), finding(
                CONSUME_QUEUE_UNIT_NO_RECORD, path, position,
                f"{_label(self.queue)}: unit {int(item['index'])} points at commit log offset {offset}, "
                + ("at or past the commit log's written end" if offset >= self.log.written_end
                   else "where no message starts"),
                queue_offset=int(item["queue_offset"]), commit_log_offset=offset, **self.here)))

    def match(self, band: SegmentCheck, items: np.ndarray, likely: np.ndarray | None = None) -> np.ndarray:
        """Units pointing into a band against its messages; the rows of its own messages they point at.
        ``likely``: its topic-queue's dispatched rows, which a healthy queue's units point at, in order
        (returned as they are when they are the rows)."""
        rows, hit = band.locate(items["offset"], likely)
        if not hit.all():
            self.not_found(subset(items, ~hit))
            items, rows = subset(items, hit), rows[hit]
        self._mismatches(band, items, rows)
        if rows is likely:  # its own messages, all of them
            return rows
        return rows[band["tq"][rows] == (-1 if self.tq is None else self.tq)]

    def _mismatches(self, band: SegmentCheck, items: np.ndarray, rows: np.ndarray) -> None:
        # units whose tags code went through the ext are checked there (and a dangling one is its own finding)
        followed = self.ext.check(band, items, rows) if self.ext is not None else np.zeros(len(items), bool)
        checks = [("topic and queue", band["tq"][rows] != (-1 if self.tq is None else self.tq), None, None)]
        fields = [("queue offset", "queue_offset", "queue_offset"), ("size", "size", "size"),
                  ("tags code", "tags_code", "tags_code")]
        if self.queue.is_batch:
            fields += [("batch size", "batch_size", "batch"), ("store timestamp", "store_timestamp", "store_timestamp")]
        for name, unit_field, record_field in fields:  # each column gathered once
            unit_value, record_value = items[unit_field], band[record_field][rows]
            mask = record_value != unit_value
            checks.append((name, mask & ~followed if name == "tags code" else mask, unit_value, record_value))
        bad = np.zeros(len(items), bool)
        for _, mask, _, _ in checks[2:]:  # size, tags code (and a batch unit's fields)
            bad |= mask
        elsewhere = (checks[0][1] | checks[1][1]) & ~bad  # the record is another queue's, or at another offset
        if elsewhere.any():
            bad |= self._not_multi_dispatched(items, elsewhere)
        for j in np.flatnonzero(bad).tolist():
            row = int(rows[j])
            what = []
            for name, mask, unit_value, record_value in checks:
                if mask[j]:
                    if unit_value is None:
                        topic, queue_id = self.log.topic_queues[int(band["tq"][row])]
                        what.append(f"the record is in {topic}/{queue_id}")
                    else:
                        what.append(f"{name} {int(unit_value[j])} (record: {int(record_value[j])})")
            item = items[j]
            path, position = self.where(int(item["file"]), int(item["index"]))
            self.mismatch.append((int(item["seq"]), finding(
                CONSUME_QUEUE_UNIT_MISMATCH, path, position,
                f"{_label(self.queue)}: unit {int(item['index'])} disagrees with the record at commit log "
                f"offset {int(band['offset'][row])}: " + "; ".join(what),
                queue_offset=int(item["queue_offset"]), commit_log_offset=int(band["offset"][row]), **self.here)))

    def _not_multi_dispatched(self, items: np.ndarray, which: np.ndarray) -> np.ndarray:
        """Of the units at ``which`` (a record of another queue, or at another queue offset, whose
        size and tags code agree), those the record's multi-dispatch does not put here: a
        light message queue's unit is another queue's record at the queue offset its
        INNER_MULTI_QUEUE_OFFSET names (dispatch/multi_dispatch.py). Each such record is read."""
        out = which.copy()
        if self.queue.is_batch:  # multi-dispatch writes plain consume queues only
            return out
        with CommitLogReader(self.log.commit_log) as reader:
            for j in np.flatnonzero(which).tolist():
                try:
                    record = reader.read(int(items["offset"][j]), check_crc=False)
                except RmqError:
                    continue
                if is_target(self.queue.topic, self.queue.queue_id, int(items["queue_offset"][j]), record.queue_id,
                             record.properties):
                    out[j] = False
        return out

    def unit_findings(self) -> list[Finding]:
        """Runs, then units pointing at no record, then units disagreeing with theirs (each in unit order)."""
        for kind in range(len(self._open)):
            self._close(kind)
        found = [f for fs in self.run_findings for f in fs]
        found += [f for _, f in sorted(self.no_record, key=lambda t: t[0])]
        found += [f for _, f in sorted(self.mismatch, key=lambda t: t[0])]
        if self.ext is not None:
            found += self.ext.findings()
        return found


def _by_topic_queue(tq: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(order, bounds): the rows of topic-queue i, in their order, are order[bounds[i]:bounds[i + 1]]."""
    order = tq_order(tq, count)
    return order, np.searchsorted(tq[order], np.arange(count + 1))


class ConsumeQueueCheck(BandConsumer):
    """Every queue of the store against the commit log's bands. Messages no unit of their own
    queue points at are kept (offset, queue offset, batch) for the runs reported at the end:
    a store's worth only when its queues are that damaged."""

    def __init__(self, queues: ConsumeQueues, log: CommitLogCheck,
                 on_bytes: Callable[[int], None] | None = None, root=None):
        self.queues = queues
        self.root = root  # the store's: its consumequeue_ext/ directories against its queues
        self.log = log
        self.on_bytes = on_bytes
        self.checks = [QueueCheck(q, log) for q in queues.queues]
        self.keys = {(q.topic, q.queue_id) for q in queues.queues}
        self.reported: list = []  # commit log offsets of the messages a finding of this check names
        self.queueless = np.zeros(0, bool)  # by tq id: the topic-queue has no queue directory
        self.no_queue: list = []  # (offset, tq, queue offset, batch) of messages of topic-queues without a queue

    def band(self, band: SegmentCheck) -> None:
        tq = band["tq"]
        order, bounds = band.by_topic_queue(len(self.log.topic_queues))
        dispatched = band["batch"] > 0
        if self.log.recovered_end is not None:  # past it the next start drops them: recoveryCutsCommitLog counts them
            dispatched &= band["offset"] < self.log.recovered_end
        pointed = np.zeros(band.messages, bool)  # reused: set for one queue, then cleared
        for q in self.checks:
            if q.tq is None:  # its id, once a message of its topic-queue has been seen
                q.tq = self.log.tq_id(q.queue.topic, q.queue.queue_id)
            rows = None
            if q.tq is not None:
                rows = order[bounds[q.tq]:bounds[q.tq + 1]]
                rows = rows[dispatched[rows]]
            items = q.lookups.take(band.lo, band.hi)
            mine = q.match(band, items, rows) if items is not None else None
            if q.tq is None:
                continue
            if mine is rows or not len(rows):  # each of them pointed at (the common case), or none here
                continue
            if mine is not None:
                pointed[mine] = True
                rows = rows[~pointed[rows]]
                pointed[mine] = False
            if len(rows):
                q.unpointed.append((band["offset"][rows], band["queue_offset"][rows], band["batch"][rows]))
        known = len(self.queueless)  # topic-queues first seen in this band: whether each has a queue
        self.queueless = np.concatenate((self.queueless, np.array(
            [key not in self.keys for key in self.log.topic_queues[known:]], bool)))
        rows = np.flatnonzero(self.queueless[tq] & dispatched)
        if len(rows):
            self.no_queue.append(tuple(band[name][rows] for name in ("offset", "tq", "queue_offset", "batch")))

    def late_offsets(self) -> np.ndarray:
        return late_offsets(q.lookups for q in self.checks)

    def late_band(self, band: SegmentCheck) -> None:
        for q in self.checks:
            items = q.lookups.take_late(band.lo, band.hi)
            if items is not None:
                q.pointed_late.append(band["offset"][q.match(band, items)])

    def findings(self) -> Iterator[Finding]:
        """Queue by queue, then the topic-queues the commit log has messages for and no queue holds."""
        yield from self.queues.all_findings()  # what opening them found: file sizes, names, the load's cut
        if self.root is not None:
            yield from orphan_findings(self.root, self.queues)
        for q in self.checks:
            items = q.lookups.leftover()
            if items is not None:  # late units in no band point where no message starts
                q.not_found(items)
            yield from q.unit_findings()
            if q.tq is not None and q.unpointed:
                offset, qo, batch = (np.concatenate(cols) for cols in zip(*q.unpointed))
                q.unpointed = []
                if q.pointed_late:
                    keep = ~np.isin(offset, np.concatenate(q.pointed_late))
                    offset, qo, batch = offset[keep], qo[keep], batch[keep]
                yield from self._coverage(q.queue, q.tq, offset, qo, batch)
            if self.on_bytes is not None:
                self.on_bytes(q.bytes_read)
        yield from self._queueless()
        yield from self._lost_at_the_start()

    def _queueless(self) -> Iterator[Finding]:
        """The messages of topic-queues that have no queue directory."""
        if not self.no_queue or (self.root is not None and rocksdb_only(self.root, self.queues.queues)):
            return  # storeType=defaultRocksDB: no file queue is written (verify's rocksdbcq area checks the queues)
        offset, tq, qo, batch = (np.concatenate(cols) for cols in zip(*self.no_queue))
        self.no_queue = []
        order, bounds = _by_topic_queue(tq, len(self.log.topic_queues))
        for i in np.unique(tq).tolist():
            rows = order[bounds[i]:bounds[i + 1]]
            topic, queue_id = self.log.topic_queues[i]
            yield from self._unless_served(i, topic, queue_id, offset[rows], qo[rows], batch[rows],
                                           CONSUME_QUEUE_MISSING, f"no consume queue directory {topic}/{queue_id}")

    def _lost_at_the_start(self) -> list[Finding]:
        """The messages the simulated start leaves no unit of their queue for and does not
        dispatch again (recover's "unit lost"), where this check's own findings do not name
        them: a queue the start cuts at a damaged unit of its last file once the commit log is
        cut, found after the queues here were opened at the end known then. Only a start
        already simulated is asked: a clean store's is not."""
        next_start = self.log.next_start_seen
        if next_start is None or not next_start.loadable:
            return []
        from rmqtool.recovery.lost import UNIT_LOST
        named = set(np.concatenate(self.reported).tolist()) if self.reported else set()
        lost = [m for m in next_start.outcome.lost_messages if m["reason"] == UNIT_LOST
                and m["commit_log_offset"] not in named]
        by_queue: dict = {}
        for m in lost:
            by_queue.setdefault((m["topic"], m["queue_id"]), []).append(m)
        found = []
        for (topic, queue_id), ms in sorted(by_queue.items()):
            tq = self.log.tq_id(topic, queue_id)
            if tq is None:
                continue
            offset = np.array([m["commit_log_offset"] for m in ms], np.int64)
            qo = np.array([m["queue_offset"] for m in ms], np.int64)
            command = next_start.redispatch_command(topic, queue_id)
            found += self._message_runs(tq, offset, qo, np.ones(len(ms), np.int64), MESSAGE_UNREACHABLE,
                                        "the broker's next start leaves no unit of the queue pointing at them and "
                                        "does not dispatch them again (rmqtool recover lists them, unit lost): no "
                                        f"consumer reaches them; rebuild the queue: {command}",
                                        redispatch_command=command)
        return found

    def _coverage(self, queue: AnyConsumeQueue, tq: int, offset, qo, batch) -> list[Finding]:
        """Messages of this topic-queue that no unit points at, as runs of queue offsets."""
        if not len(offset):
            return []
        queue_max = queue.max_offset
        ahead = qo >= queue_max
        queue_min = queue.min_offset(self.log.min_offset)
        below = ~ahead & (qo < queue_min)  # before the queue's first unit: no range of its holds them
        found = self._unless_served(tq, queue.topic, queue.queue_id, offset[below], qo[below], batch[below],
                                    MESSAGE_NOT_IN_CONSUME_QUEUE,
                                    f"below the queue's min offset {queue_min} (it holds no unit before it), so no "
                                    f"unit points at them: lost from the queue")
        inside = ~ahead & ~below
        found += self._unless_served(tq, queue.topic, queue.queue_id, offset[inside], qo[inside], batch[inside],
                                     MESSAGE_NOT_IN_CONSUME_QUEUE,
                                     "inside the queue's range, but no unit points at them: lost from the queue")
        if not ahead.any():
            return found
        offset, qo, batch = offset[ahead], qo[ahead], batch[ahead]
        next_start = self._next_start()
        served = next_start.served(queue.topic, queue.queue_id, offset) if next_start is not None else None
        if served is None:  # not simulated: what the queue files say
            return self._message_runs(tq, offset, qo, batch, MESSAGE_NOT_DISPATCHED,
                                      f"past the queue's end ({queue_max}): not dispatched yet") + found
        command = next_start.redispatch_command(queue.topic, queue.queue_id)
        return (self._message_runs(tq, offset[served], qo[served], batch[served], MESSAGE_NOT_DISPATCHED,
                                   f"past the queue's end ({queue_max}): not dispatched yet; the broker's next "
                                   f"start dispatches them")
                + self._message_runs(tq, offset[~served], qo[~served], batch[~served], MESSAGE_UNREACHABLE,
                                     f"past the queue's end ({queue_max}), and the broker's next start does not "
                                     f"dispatch them again (their units are lost): no consumer reaches them; "
                                     f"rebuild the queue: {command}", redispatch_command=command)
                + found)

    def _next_start(self):
        """The simulated next start (simulated on first need), or None."""
        return self.log.next_start() if self.log.next_start is not None else None

    def _unless_served(self, tq: int, topic: str, queue_id: int, offset, qo, batch, finding_id: str,
                       why: str) -> list[Finding]:
        """Messages no unit points at today: those the next start dispatches again (its queue
        serves them afterwards, ``Outcome.served``: what recover's plan asks too) are rebuilt;
        the others stay unreachable."""
        if not len(offset):
            return []
        next_start = self._next_start()
        served = next_start.served(topic, queue_id, offset) if next_start is not None else None
        if served is None or not served.any():
            return self._message_runs(tq, offset, qo, batch, finding_id, why)
        command = next_start.redispatch_command(topic, queue_id)
        return (self._message_runs(tq, offset[served], qo[served], batch[served], finding_id,
                                   f"{why}; the broker's next start dispatches them again",
                                   consequence=Consequence.REBUILT)
                + self._message_runs(tq, offset[~served], qo[~served], batch[~served], finding_id,
                                     f"{why}; the broker's next start does not dispatch them again: no consumer "
                                     f"reaches them; rebuild the queue: {command}", redispatch_command=command))

    def _message_runs(self, tq: int, offset, qo, batch, finding_id: str, why: str, **extra) -> list[Finding]:
        """One finding per run of consecutive queue offsets (a batch's next is its offset plus its size)."""
        if not len(offset):
            return []
        order = np.argsort(qo, kind="stable")
        offset, qo, batch = offset[order], qo[order], batch[order]
        step = np.maximum(batch[:-1], 1)
        breaks = np.flatnonzero(qo[1:] != qo[:-1] + step) + 1
        topic, queue_id = self.log.topic_queues[tq]
        self.reported.append(offset)
        found = []
        for first, stop in zip([0, *breaks.tolist()], [*breaks.tolist(), len(offset)]):
            start_offset = int(offset[first])
            path, position = self.log.where(start_offset)
            found.append(finding(finding_id, path, position,
                                 f"{stop - first} message(s) of {topic}/{queue_id}, queue offsets {int(qo[first])}.."
                                 f"{int(qo[stop - 1])} (commit log offsets {start_offset}..{int(offset[stop - 1])}): "
                                 f"{why}", topic=topic, queue_id=queue_id, queue_offset=int(qo[first]),
                                 commit_log_offset=start_offset, messages=stop - first, **extra))
        return found
