"""What a record of one of the broker's own topics means (names and properties:
``formats/system_topics.py``): a transaction's half and op records, a delayed message, a
5.x timer message or recall, a POP check point or ack; with the real topic and queue.

One record says most of it (:func:`describe`). Whether a half message was committed,
rolled back or is still open is told by other records: its op record (tag ``d``, naming
its queue offset) and, for a commit, the copy in the real topic whose
preparedTransactionOffset is the half record's commit log offset. :class:`Transactions`
gathers those in one pass over the log; without it a half message's state is not given.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Iterable

from rmqtool.formats import properties as props
from rmqtool.formats import system_topics as st
from rmqtool.formats.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK
from rmqtool.store.message import Message

COMMITTED, ROLLED_BACK, OPEN = "committed", "rolledBack", "open"


def is_system_topic(topic: str) -> bool:
    return (topic in (st.TRANS_HALF_TOPIC, st.TRANS_OP_HALF_TOPIC, st.SCHEDULE_TOPIC)
            or topic.startswith(st.SYSTEM_TOPIC_PREFIX))


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def op_offsets(message: Message) -> list[int] | None:
    """The half queue offsets an op record's body names; None when the body is not such a list."""
    try:
        text = message.body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    parts = [p for p in text.split(st.OP_OFFSET_SEPARATOR) if p.strip()]
    offsets = [_int(p.strip()) for p in parts]
    return None if not offsets or None in offsets else offsets


@dataclasses.dataclass
class Transactions:
    """What the log says about half messages: (half queue id, queue offset) -> the op record's
    commit log offset, half commit log offset -> the committed copy's commit log offset, and each
    half record's (queue id, queue offset) -> its real topic and queue."""
    removed: dict = dataclasses.field(default_factory=dict)
    committed: dict = dataclasses.field(default_factory=dict)
    halves: dict = dataclasses.field(default_factory=dict)

    def add(self, m: Message) -> None:
        topic = m.topic
        if topic == st.TRANS_OP_HALF_TOPIC:
            if m.properties.get(props.PROPERTY_TAGS) == st.OP_REMOVE_TAG:
                for offset in op_offsets(m) or ():
                    self.removed.setdefault((m.queue_id, offset), m.commit_log_offset)
        elif topic == st.TRANS_HALF_TOPIC:
            p = m.properties
            self.halves[(m.queue_id, m.queue_offset)] = (m.commit_log_offset, p.get(props.PROPERTY_REAL_TOPIC),
                                                         _int(p.get(props.PROPERTY_REAL_QUEUE_ID)))
        elif m.sys_flag & TRANSACTION_MASK == TRANSACTION_COMMIT_TYPE and m.prepared_transaction_offset:
            self.committed.setdefault(m.prepared_transaction_offset, m.commit_log_offset)

    @classmethod
    def of(cls, messages: Iterable) -> "Transactions":
        t = cls()
        for m in messages:
            if isinstance(m, Message):
                t.add(m)
        return t

    def state(self, half_queue_id: int, half_queue_offset: int, half_commit_log_offset: int | None) -> str:
        if (half_queue_id, half_queue_offset) not in self.removed:
            return OPEN  # the check service will ask the producer again
        if half_commit_log_offset is not None and half_commit_log_offset in self.committed:
            return COMMITTED
        return ROLLED_BACK  # removed, and no copy in the real topic


def describe(m: Message, transactions: Transactions | None = None) -> dict | None:
    """What a record of a system topic means (None for any other topic): ``kind`` first, then
    ``real_topic`` and ``real_queue_id`` where the record has them, then what the kind adds."""
    topic = m.topic
    p = m.properties
    real = {"real_topic": p.get(props.PROPERTY_REAL_TOPIC), "real_queue_id": _int(p.get(props.PROPERTY_REAL_QUEUE_ID))}
    if topic == st.TRANS_HALF_TOPIC:
        known = transactions is not None  # the state second: what a table cell shows first
        out = {"kind": "transactionHalf",
               "state": transactions.state(m.queue_id, m.queue_offset, m.commit_log_offset) if known else None,
               **real, "producer_group": p.get(props.PROPERTY_PRODUCER_GROUP),
               "check_times": _int(p.get(st.PROPERTY_TRANSACTION_CHECK_TIMES)),
               "renewed_from_queue_offset": _int(p.get(st.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET))}
        if known:
            out["op_commit_log_offset"] = transactions.removed.get((m.queue_id, m.queue_offset))
            out["commit_commit_log_offset"] = transactions.committed.get(m.commit_log_offset)
        return _compact(out)
    if topic == st.TRANS_OP_HALF_TOPIC:
        offsets = op_offsets(m)
        out = {"kind": "transactionOp", "states": None, "removed": p.get(props.PROPERTY_TAGS) == st.OP_REMOVE_TAG,
               "half_queue_id": m.queue_id, "half_queue_offsets": offsets}
        if transactions is not None and offsets:
            halves = [transactions.halves.get((m.queue_id, o)) for o in offsets]
            topics = {h[1:] for h in halves if h is not None}
            if len(topics) == 1:
                out["real_topic"], out["real_queue_id"] = next(iter(topics))
            # a half record not in the log (cut, or never written): its state is not known
            out["states"] = [None if h is None else transactions.state(m.queue_id, o, h[0])
                             for o, h in zip(offsets, halves)]
        return _compact(out)
    if topic == st.SCHEDULE_TOPIC:
        return _compact({"kind": "delayed", **real, "delay_level": _int(p.get(props.PROPERTY_DELAY_TIME_LEVEL))})
    if topic == st.TIMER_TOPIC:
        delete_key = p.get(st.PROPERTY_TIMER_DEL_UNIQKEY)
        out = {"kind": "timerRecall" if delete_key else "timer", **real,
               "fire_timestamp": _int(p.get(st.PROPERTY_TIMER_OUT_MS)),
               "roll_times": _int(p.get(st.PROPERTY_TIMER_ROLL_TIMES))}
        if delete_key:
            recalled_topic, _, uniq = delete_key.rpartition(st.TIMER_DELETE_KEY_SEPARATOR)
            out.update(recalled_topic=recalled_topic or None, recalled_uniq_key=uniq)
        if (real["real_topic"] or "").startswith(st.REVIVE_TOPIC_PREFIX):  # a revive record waiting for its time
            out["pop"] = _pop(m)
        return _compact(out)
    if topic.startswith(st.REVIVE_TOPIC_PREFIX):
        return _pop(m)
    return None


def _pop(m: Message) -> dict:
    """A revive log record: a check point (``ck``) or an ack (``ack``, ``bAck``), from its JSON body."""
    tag = m.properties.get(props.PROPERTY_TAGS)
    kind = {st.POP_CK_TAG: "popCheckPoint", st.POP_ACK_TAG: "popAck", st.POP_BATCH_ACK_TAG: "popBatchAck"}.get(tag)
    try:
        body = json.loads(m.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        body = None
    if kind is None or not isinstance(body, dict):
        return {"kind": "popUnknown", "tags": tag}
    out = {"kind": kind, "real_topic": body.get(st.CK_TOPIC), "real_queue_id": _int(body.get(st.CK_QUEUE_ID)),
           "consumer_group": body.get(st.CK_GROUP), "start_offset": _int(body.get(st.CK_START_OFFSET)),
           "pop_timestamp": _int(body.get(st.CK_POP_TIME))}
    if kind == "popCheckPoint":
        start, diffs = out["start_offset"], body.get(st.CK_OFFSET_DIFFS)
        invisible = _int(body.get(st.CK_INVISIBLE_TIME))
        out["queue_offsets"] = [start + d for d in diffs] if isinstance(diffs, list) and start is not None and \
            all(isinstance(d, int) for d in diffs) else None
        out["revive_timestamp"] = None if invisible is None or out["pop_timestamp"] is None \
            else out["pop_timestamp"] + invisible  # PopCheckPoint.getReviveTime
    elif kind == "popAck":
        out["ack_offsets"] = [_int(body.get(st.ACK_OFFSET))]
    else:
        offsets = body.get(st.BATCH_ACK_OFFSETS)
        out["ack_offsets"] = [_int(o) for o in offsets] if isinstance(offsets, list) else None
    return _compact(out)


def _compact(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}
