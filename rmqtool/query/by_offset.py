"""Lookups that name where a message lies: a commit log offset, an offset msgId, or a
topic/queue/queue offset read through the consume queue.

The broker's answers: ``DefaultMessageStore.lookMessageByOffset`` (read the record at a
commit log offset; null past the end), the client's ``viewMessage`` (decode the offset
msgId into store host + offset, then the same), and ``getMessage`` for one queue offset
(the consume queue unit names the commit log offset and size). Unlike the broker,
rmqtool checks what it finds: a msgId whose store host differs from the record's is not
that message, and a unit that names a record of another queue is reported.

Every lookup reads through :class:`rmqtool.store.commitlog_reader.CommitLogReader`: one
``pread`` of a small head per record, never a scan, so it touches only the pages it needs.
"""
from __future__ import annotations

import dataclasses
import os

from rmqtool.errors import CorruptData, NothingFound
from rmqtool.query.explain import Notes, Trace, trace_or_none
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.compaction import compaction_served
from rmqtool.store.consumequeue import BatchConsumeQueue, ConsumeQueue
from rmqtool.store.message import Message
from rmqtool.store.msgid import decode_message_id
from rmqtool.store.paths import StorePaths
from rmqtool.store.view import StoreView, as_view

@dataclasses.dataclass
class OffsetLookup:
    """One message found by where it lies, with what the lookup noticed on the way."""
    messages: list[Message]
    notes: Notes


def message_at_offset(store: str | os.PathLike | StoreView, commit_log_offset: int, *,
                      trace: Trace | None = None) -> OffsetLookup:
    """lookMessageByOffset: the message whose record starts at a commit log offset."""
    trace = trace_or_none(trace)
    with CommitLogReader(as_view(store).commit_log) as reader:
        return OffsetLookup([_read_traced(reader, commit_log_offset, trace)], Notes())


def _read_traced(reader: CommitLogReader, offset: int, trace: Trace) -> Message:
    try:
        seg, position = reader.locate(offset)
        if trace.enabled:
            trace(f"commit log offset {offset}: file {seg.name}, position {position}")
        message = reader.read(offset)
    except (NothingFound, CorruptData) as exc:
        if trace.enabled:
            trace(f"no message: {exc.message}")
        raise
    if trace.enabled:
        crc = {True: "body CRC ok", False: "body CRC MISMATCH", None: "body CRC not checked"}[message.body_crc_ok]
        trace(f"record: {message.store_size} bytes, topic {message.topic!r} queue {message.queue_id} "
              f"queue offset {message.queue_offset}, stored at {message.store_timestamp}; {crc}")
    return message


def message_by_msg_id(store: str | os.PathLike | StoreView, msg_id: str, *, trace: Trace | None = None) -> OffsetLookup:
    """The offset msgId: decode store host and commit log offset, read the record there,
    and keep it only if its own store host and offset give back the same msgId."""
    trace = trace_or_none(trace)
    decoded = decode_message_id(msg_id)
    if trace.enabled:
        trace(f"msgId {msg_id}: store host {decoded.store_host}, commit log offset {decoded.commit_log_offset}")
    with CommitLogReader(as_view(store).commit_log) as reader:
        message = _read_traced(reader, decoded.commit_log_offset, trace)
    if message.msg_id.upper() != msg_id.strip().upper():
        reason = (f"the record at offset {decoded.commit_log_offset} was stored by {message.store_host}, "
                  f"not {decoded.store_host}: this msgId belongs to another broker or store")
        if trace.enabled:
            trace(f"dropped: {reason}")
        raise NothingFound(reason, message.path, message.position)
    if trace.enabled:
        trace("kept: the record's store host and offset give back this msgId")
    return OffsetLookup([message], Notes())


def open_queue(store: str | os.PathLike, topic: str, queue_id: int,
               commit_log_max_offset: int | None = None) -> ConsumeQueue | BatchConsumeQueue | None:
    """The consume queue of topic/queueId (a 5.x batch queue when only that exists), or None;
    cut where the broker's load cuts it at ``commit_log_max_offset`` when given."""
    paths = StorePaths(store)
    plain = paths.consumequeue / topic / str(queue_id)
    if plain.is_dir():
        return ConsumeQueue(plain, topic, queue_id, commit_log_max_offset=commit_log_max_offset)
    batch = paths.batch_consumequeue / topic / str(queue_id)
    if batch.is_dir():
        return BatchConsumeQueue(batch, topic, queue_id, commit_log_max_offset=commit_log_max_offset)
    return None


def message_by_queue_offset(store: str | os.PathLike | StoreView, topic: str, queue_id: int, queue_offset: int, *,
                            trace: Trace | None = None) -> OffsetLookup:
    """The message at a queue offset: the consume queue unit names its commit log offset."""
    trace = trace_or_none(trace)
    view = as_view(store)
    root = view.root
    notes = Notes()
    queue = open_queue(root, topic, queue_id)
    if queue is None:
        raise NothingFound(f"no consume queue for topic {topic!r} queue {queue_id}",
                           StorePaths(root).consumequeue / topic / str(queue_id))
    if (topic, queue_id) in compaction_served(root):  # getMessage reads compaction/, not this consume queue
        notes.add(f"{topic}/{queue_id} is a COMPACTION topic's queue: the broker serves it from the compaction "
                  f"store (rmqtool dump compactioncq), not from this consume queue, which it still writes", trace)
    with CommitLogReader(view.commit_log) as reader:
        low, high = queue.min_offset(reader.min_offset), queue.max_offset
        if trace.enabled:
            kind = "batch consume queue" if queue.is_batch else "consume queue"
            trace(f"{kind} {topic}/{queue_id}: {len(queue.segments)} file(s), queue offsets [{low}, {high})")
        unit = queue.get(queue_offset) if low <= queue_offset < high else None
        if unit is None:
            where = (f"queue offset {queue_offset} is outside [{low}, {high})"
                     if not low <= queue_offset < high else f"no readable unit at queue offset {queue_offset}")
            if trace.enabled:
                trace(f"no message: {where}")
            raise NothingFound(where, queue.directory)
        if trace.enabled:
            trace(f"unit at {unit.path} position {unit.position}: commit log offset {unit.commit_log_offset}, "
                  f"size {unit.size}, tagsCode {unit.tags_code}"
                  + (f", batch [{unit.msg_base_offset}, {unit.msg_base_offset + unit.batch_size})"
                     if queue.is_batch else ""))
        if unit.is_fill:
            raise NothingFound(f"queue offset {queue_offset} is a fill unit written when the queue was "
                               f"rebuilt: no message", unit.path, unit.position)
        try:
            message = _read_traced(reader, unit.commit_log_offset, trace)
        except NothingFound as exc:  # the unit exists: what it points at being gone is damage, not absence
            raise CorruptData(f"the consume queue unit for queue offset {queue_offset} points at commit log "
                              f"offset {unit.commit_log_offset}: {exc.message}", unit.path, unit.position) from None
    expected_offset = unit.msg_base_offset if queue.is_batch else queue_offset
    mismatch = []
    if message.topic != topic or message.queue_id != queue_id:
        mismatch.append(f"it belongs to {message.topic}/{message.queue_id}")
    if message.queue_offset != expected_offset:
        mismatch.append(f"its queueOffset field is {message.queue_offset}, not {expected_offset}")
    if message.store_size != unit.size:
        mismatch.append(f"it is {message.store_size} bytes, the unit says {unit.size}")
    if mismatch:
        notes.add(f"the unit for {topic}/{queue_id} offset {queue_offset} points at commit log offset "
                  f"{unit.commit_log_offset}, but " + "; ".join(mismatch), trace)
    if queue.is_batch and trace.enabled:
        trace(f"the record is the whole batch; offset {queue_offset} is its message "
              f"{queue_offset - unit.msg_base_offset} of {unit.batch_size}")
    return OffsetLookup([message], notes)
