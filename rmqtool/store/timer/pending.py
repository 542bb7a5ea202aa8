"""Which timer messages the commit log says are still pending, from its records alone.

A timer message leaves records under one key, ``REAL_TOPIC + "+" + UNIQ_KEY``
(``TimerMessageStore.buildDeleteKey``):

* ``rmq_sys_wheel_timer`` records with TIMER_OUT_MS, REAL_TOPIC, REAL_QID: the message as
  stored, then once a roll (``convert(.., needRoll)``: the same record re-put with
  TIMER_ROLL_TIMES + 1). The newest one is the one the wheel holds; the earlier ones were
  rolled and are superseded;
* a delivery: a record in REAL_TOPIC (``convertMessage``) whose stored properties still hold
  TIMER_DEQUEUE_MS and the message's UNIQ_KEY;
* a recall: an ``rmq_sys_wheel_timer`` record with TIMER_DEL_UNIQKEY = the key (its unit is a
  MAGIC_DELETE unit; dequeue skips the original, whose key is in its delete list).

Pending: a key with a timer record, no delivery and no recall. The engine never delivers a
recalled message (the delete unit sits in the original's slot, ahead of it in the dequeue's
order), so a recalled message is not pending whether or not its recall was dequeued yet.

Overdue: with the read time timercheck gives (``read_time_ms``), a message whose deliver
time's slot lies before it was dequeued already (the read time only passes a slot once its
units were handed on); when its delivery is not in the commit log (lost with a truncated
log, or a unit lost), it is not pending either: delivering it again may deliver it twice.
"""
from __future__ import annotations

import dataclasses

from rmqtool.formats.properties import NAME_VALUE_SEPARATOR, PROPERTY_KEYS, PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC
from rmqtool.formats.properties import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX as PROPERTY_UNIQ_KEY
from rmqtool.formats.timerlog import (PROPERTY_TIMER_DEL_UNIQKEY, PROPERTY_TIMER_DEQUEUE_MS, PROPERTY_TIMER_OUT_MS,
                                      PROPERTY_TIMER_ROLL_TIMES, TIMER_TOPIC)
from rmqtool.formats.timerwheel import DEFAULT_TIMER_PRECISION_MS, slot_time_ms, time_value
from rmqtool.store.commitlog import scan_segment
from rmqtool.store.message import Message

DELETE_KEY_SEPARATOR = "+"  # TimerMessageStore.buildDeleteKey
# every record read here holds TIMER_OUT_MS: a timer record, its rolls and recalls (RecallMessageProcessor
# sets the original's), and a delivery (its stored properties keep it); the scan hops over the rest undecoded
_NEEDLE = (PROPERTY_TIMER_OUT_MS + NAME_VALUE_SEPARATOR).encode()


def delete_key(real_topic: str, uniq_key: str) -> str:
    """TimerMessageStore.buildDeleteKey: what a recall's TIMER_DEL_UNIQKEY names."""
    return f"{real_topic}{DELETE_KEY_SEPARATOR}{uniq_key}"


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class TimerRecord:
    """An ``rmq_sys_wheel_timer`` record: what a timer log unit points at."""
    commit_log_offset: int
    size: int
    queue_offset: int
    store_timestamp: int
    key: str  # buildDeleteKey(REAL_TOPIC, UNIQ_KEY); a recall: its TIMER_DEL_UNIQKEY
    real_topic: str
    real_queue_id: int | None
    uniq_key: str | None
    keys: str | None
    timer_out_ms: int | None  # TIMER_OUT_MS: the deliver time (None when unreadable)
    roll_times: int  # TIMER_ROLL_TIMES (0: as sent)
    recall: bool  # a TIMER_DEL_UNIQKEY record

    def to_json(self) -> dict:
        return {"commit_log_offset": self.commit_log_offset, "size": self.size, "queue_offset": self.queue_offset,
                "real_topic": self.real_topic, "real_queue_id": self.real_queue_id, "uniq_key": self.uniq_key,
                "keys": self.keys, "fire_timestamp": self.timer_out_ms, "roll_times": self.roll_times}


@dataclasses.dataclass
class TimerMessages:
    pending: list[TimerRecord]  # the newest record of each pending message, in commit log order
    delivered: list[TimerRecord]  # the newest record of each message with a delivery
    recalled: list[TimerRecord]  # the newest record of each recalled message without a delivery
    recalls: list[TimerRecord]  # the recall records (their delete units are not needed: nothing to skip)
    superseded: list[TimerRecord]  # records a newer roll of the same message replaced
    overdue: list[TimerRecord]  # no delivery in the log, but the read time passed its slot
    unreadable: list[TimerRecord]  # timer records without a usable TIMER_OUT_MS or UNIQ_KEY
    last_queue_record: TimerRecord | None  # the timer queue's last record (where recover revises the offset to)
    end: int  # the commit log offset the records were read up to
    newest_timestamp: int | None  # the newest store time of a timer record or a delivery


def _timer_record(m: Message) -> TimerRecord:
    p = m.properties
    uniq = p.get(PROPERTY_UNIQ_KEY)
    real_topic = p.get(PROPERTY_REAL_TOPIC) or ""
    recall = PROPERTY_TIMER_DEL_UNIQKEY in p
    key = p[PROPERTY_TIMER_DEL_UNIQKEY] if recall else delete_key(real_topic, uniq or "")
    return TimerRecord(m.commit_log_offset, m.store_size, m.queue_offset, m.store_timestamp, key, real_topic,
                       _int(p.get(PROPERTY_REAL_QUEUE_ID)), uniq, p.get(PROPERTY_KEYS),
                       _int(p.get(PROPERTY_TIMER_OUT_MS)), _int(p.get(PROPERTY_TIMER_ROLL_TIMES)) or 0, recall)


def timer_messages(view, read_time_ms: int | None = None, precision_ms: int = DEFAULT_TIMER_PRECISION_MS
                   ) -> TimerMessages:
    """Every timer message of the store ``view`` opened, by what its records show, read from
    the commit log up to its end (records past it are gone: their messages are lost).
    ``read_time_ms``: timercheck's lastReadTimeMs (None: unknown), for what is overdue."""
    queue = view.commit_log.queue
    end = view.commit_log_end.end
    newest: dict[str, TimerRecord] = {}  # key -> the newest timer record (a roll replaces the one before)
    superseded, recalls, unreadable = [], [], []
    delivered_keys, recalled_keys = set(), set()
    last = None
    newest_ts = None
    segments = [s for s in queue.segments if s.base_offset < end]
    for i, seg in enumerate(segments):
        for item in scan_segment(seg, is_last=i == len(segments) - 1, end_offset=end, check_crc=False,
                                 needle=_NEEDLE):
            if not isinstance(item, Message):
                continue
            if item.topic != TIMER_TOPIC:
                p = item.properties
                if PROPERTY_TIMER_DEQUEUE_MS in p and p.get(PROPERTY_UNIQ_KEY):
                    delivered_keys.add(delete_key(item.topic, p[PROPERTY_UNIQ_KEY]))
                    newest_ts = max(newest_ts or item.store_timestamp, item.store_timestamp)
                continue
            newest_ts = max(newest_ts or item.store_timestamp, item.store_timestamp)
            record = _timer_record(item)
            if last is None or record.queue_offset >= last.queue_offset:
                last = record
            if record.recall:
                recalls.append(record)
                recalled_keys.add(record.key)
            elif record.timer_out_ms is None or not record.uniq_key:
                unreadable.append(record)
            else:
                before = newest.get(record.key)
                if before is not None:
                    superseded.append(before)
                newest[record.key] = record
    pending, delivered, recalled, overdue = [], [], [], []
    for record in sorted(newest.values(), key=lambda r: r.commit_log_offset):
        if record.key in delivered_keys:
            delivered.append(record)
        elif record.key in recalled_keys:
            recalled.append(record)
        elif read_time_ms and slot_time_ms(time_value(record.timer_out_ms, precision_ms), precision_ms) < read_time_ms:
            overdue.append(record)
        else:
            pending.append(record)
    return TimerMessages(pending, delivered, recalled, recalls, superseded, overdue, unreadable, last, end, newest_ts)
