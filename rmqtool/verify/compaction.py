"""The compaction store checked: its log records, its queue units against them, the twin
files ``TopicPartitionLog.sanityCheck`` asks for, and ``position-checkpoint`` against the data.

Facts from rocketmq-all-5.3.3 (``store/kv``): ``CompactionStore.load`` loads a queue only
when both its log and queue directories exist (else it logs and skips it); ``CompactionLog``'s
load recovers the queue, truncates the log to the queue's last unit and runs ``sanityCheck``,
whose RuntimeException fails ``DefaultMessageStore.load``. ``getMessage`` serves a unit's
record from the log by the unit's offset and size.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Iterator

from rmqtool.findings import (COMPACTION_CHECKPOINT_MISMATCH, COMPACTION_CQ_FILE_MISSING, COMPACTION_CQ_UNIT_MISMATCH,
                              COMPACTION_RECORD_NOT_IN_CQ, Consequence, Finding, finding)
from rmqtool.formats.compaction import checkpoint_key
from rmqtool.store.commitlog import findings_of
from rmqtool.store.compaction import CompactionQueue, open_compaction_store
from rmqtool.store.message import Message


def check_compaction(store_root: str | os.PathLike) -> Iterator[Finding]:
    """Every finding about a store's compaction store (nothing when it has none)."""
    store = open_compaction_store(store_root)
    yield from store.findings
    if not store.present:
        return
    for queue in store.queues:
        yield from _check_queue(queue)
    for cq_dir in store.orphan_cq_dirs:
        yield finding(COMPACTION_CQ_FILE_MISSING, cq_dir, None, "a compaction queue directory with no compaction "
                      "log directory: the load never reads it", consequence=Consequence.NONE)
    yield from _check_checkpoint(store)


def _check_queue(queue: CompactionQueue) -> Iterator[Finding]:
    where = {"topic": queue.topic, "queue_id": queue.queue_id}
    unreadable = Consequence.UNREACHABLE  # a damaged record here is lost to the compacted view, not to the log
    messages: list[Message] = []
    scan_findings: list = []
    for result in queue.scan(findings=scan_findings):
        if isinstance(result, Message):
            messages.append(result)
        for f in findings_of(result):
            yield dataclasses.replace(f, consequence=unreadable)
    for f in scan_findings:
        yield dataclasses.replace(f, consequence=unreadable)
    yield from _twins(queue, where)
    by_offset = {m.commit_log_offset: m for m in messages}
    named = set()
    for u in queue.units():
        if u.is_end_position:
            continue
        named.add(u.log_offset)
        m = by_offset.get(u.log_offset)
        if m is None:
            why = f"no record starts at compaction log offset {u.log_offset}"
        elif (m.queue_offset, m.store_size) != (u.queue_offset, u.size):
            why = (f"the record at compaction log offset {u.log_offset} has queue offset {m.queue_offset} and "
                   f"size {m.store_size}, the unit says {u.queue_offset} and {u.size}")
        else:
            continue
        yield finding(COMPACTION_CQ_UNIT_MISMATCH, u.path, u.position, f"queue offset {u.queue_offset}: {why}",
                      queue_offset=u.queue_offset, compaction_log_offset=u.log_offset, **where)
    for m in messages:
        if m.commit_log_offset not in named:
            yield finding(COMPACTION_RECORD_NOT_IN_CQ, m.path, m.position,
                          f"the record of queue offset {m.queue_offset} at compaction log offset "
                          f"{m.commit_log_offset} is named by no compaction queue unit",
                          queue_offset=m.queue_offset, compaction_log_offset=m.commit_log_offset, **where)


def _twins(queue: CompactionQueue, where: dict) -> Iterator[Finding]:
    logs = {s.name: s for s in queue.log.segments}
    cqs = {s.name: s for s in queue.cq.segments}
    no_dir = not queue.cq.directory.is_dir()
    for name in sorted(set(logs) - set(cqs)):
        if no_dir:  # CompactionStore.load skips the queue: nothing of it is served
            yield finding(COMPACTION_CQ_FILE_MISSING, logs[name].path, None,
                          f"no compaction queue directory {queue.cq.directory}: the load skips this queue and "
                          f"its compacted messages are not served", consequence=Consequence.UNREACHABLE, **where)
        else:
            yield finding(COMPACTION_CQ_FILE_MISSING, logs[name].path, None,
                          f"no compaction queue file {name} beside this log file: sanityCheck fails the load "
                          f"(log file mismatch with consumeQueue file)", **where)
    for name in sorted(set(cqs) - set(logs)):
        yield finding(COMPACTION_CQ_FILE_MISSING, cqs[name].path, None,
                      f"no compaction log file {name} beside this queue file: sanityCheck fails the load "
                      f"(consumeQueue file mismatch with log file)", **where)


def _check_checkpoint(store) -> Iterator[Finding]:
    if store.checkpoint_path is None:
        return
    queues = {checkpoint_key(q.topic, q.queue_id): q for q in store.queues}
    for key, offset in sorted(store.checkpoint_offsets.items()):
        queue = queues.get(key)
        if queue is None:
            yield finding(COMPACTION_CHECKPOINT_MISMATCH, store.checkpoint_path, None,
                          f"{key}: checkpoint offset {offset} for a queue with no compaction log",
                          checkpoint_offset=offset)
            continue
        last = max((m.queue_offset for m in queue.messages(check_crc=False)), default=None)
        if last is None or offset > last:
            yield finding(COMPACTION_CHECKPOINT_MISMATCH, store.checkpoint_path, None,
                          f"{key}: checkpoint offset {offset} is past the last queue offset in the compaction log "
                          f"({'none' if last is None else last})", topic=queue.topic, queue_id=queue.queue_id,
                          checkpoint_offset=offset)
