"""Multi-dispatch (light message queues, LMQ): the queues a record is dispatched to besides its own.

With enableMultiDispatch, a record carrying INNER_MULTI_DISPATCH (queue names) and
INNER_MULTI_QUEUE_OFFSET (its queue offset in each, written at put) gets, after its own
queue's unit, a unit in each named queue: the same commit log offset, size and tags code, at
that queue offset (ConsumeQueue.multiDispatchLmqQueue, 4.9.8 and 5.3.3; the RocksDB consume
queue's dispatchLMQ). A name starting ``%LMQ%`` goes to queue id 0 under enableLmq, any other
to the record's own queue id. The two lists are split as Java's String.split does (trailing
empty names dropped); lists of different lengths dispatch nothing. 5.3.3's file queue skips a
name holding a path separator, and records of retry, ``rmq_sys_`` and the delay topic.

Nothing in a store says whether the broker had enableMultiDispatch or enableLmq: a unit found
in a named queue shows it did (verify), and a store's ``%LMQ%`` queue directories show which
(:func:`shown_by`): a store whose queue directories were all lost shows nothing.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

from rmqtool.formats import properties as props
from rmqtool.formats.system_topics import SCHEDULE_TOPIC


class Target(NamedTuple):
    """A queue a record is dispatched to by name, and its queue offset there."""
    topic: str
    queue_id: int
    queue_offset: int


def targets(queue_id: int, properties: dict | None, *, lmq: bool = True) -> list[Target]:
    """The queues a record of queue id ``queue_id`` with ``properties`` is dispatched to besides
    its own, as a broker with enableMultiDispatch (and with ``lmq``, enableLmq) dispatches it."""
    return targets_of(queue_id, *named(properties), lmq=lmq)


def named(properties: dict | None) -> tuple[str | None, str | None]:
    """(INNER_MULTI_DISPATCH, INNER_MULTI_QUEUE_OFFSET) of a record's properties."""
    return ((properties or {}).get(props.PROPERTY_INNER_MULTI_DISPATCH),
            (properties or {}).get(props.PROPERTY_INNER_MULTI_QUEUE_OFFSET))


def targets_of(queue_id: int, names: str | None, offsets: str | None, *, lmq: bool = True) -> list[Target]:
    """:func:`targets` from the two properties' values."""
    if _blank(names) or _blank(offsets):
        return []
    names, offsets = _java_split(names), _java_split(offsets)
    if len(names) != len(offsets):  # "[bug] queues.length!=queueOffsets.length": none of them
        return []
    out = []
    for name, offset in zip(names, offsets):
        queue_offset = _java_long(offset)
        if queue_offset is None or "/" in name:  # Long.parseLong throws; 5.3.3 skips a path in a name
            continue
        out.append(Target(name, props.LMQ_QUEUE_ID if lmq and name.startswith(props.LMQ_PREFIX) else queue_id,
                          queue_offset))
    return out


_RETRY_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX
_SYSTEM_PREFIX = "rmq_sys_"  # TopicValidator.SYSTEM_TOPIC_PREFIX


@dataclasses.dataclass(frozen=True)
class MultiDispatch:
    """A broker's multi-dispatch as dispatch does it: enableLmq (``lmq``), and 5.3.3's topics
    left out (``v5``: retry, ``rmq_sys_`` and the delay topic's records are not multi-dispatched)."""
    lmq: bool = True
    v5: bool = False

    def targets(self, topic: str, queue_id: int, names: str | None, offsets: str | None) -> list[Target]:
        if self.v5 and (topic.startswith(_RETRY_PREFIX) or topic.startswith(_SYSTEM_PREFIX)
                        or topic == SCHEDULE_TOPIC):
            return []
        return targets_of(queue_id, names, offsets, lmq=self.lmq)


def is_target(unit_topic: str, unit_queue_id: int, unit_queue_offset: int, record_queue_id: int,
              properties: dict | None) -> bool:
    """Whether a unit of ``unit_topic``/``unit_queue_id`` at ``unit_queue_offset`` is one the
    broker writes for a record of ``record_queue_id`` by its multi-dispatch, with enableLmq or
    without (the unit being there shows the broker dispatched it; not which setting it had)."""
    here = Target(unit_topic, unit_queue_id, unit_queue_offset)
    return any(here in targets(record_queue_id, properties, lmq=lmq) for lmq in (True, False))


def _blank(text: str | None) -> bool:
    """StringUtils.isBlank."""
    return text is None or not text.strip()


def _java_split(text: str) -> list[str]:
    """String.split(","): every piece, less the empty ones at the end."""
    pieces = text.split(props.MULTI_DISPATCH_SEPARATOR)
    while pieces and not pieces[-1]:
        pieces.pop()
    return pieces


def _java_long(text: str) -> int | None:
    """Long.parseLong: an optional sign and decimal digits in a Java long's range; None otherwise."""
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    value = int(text)
    return value if -(1 << 63) <= value < 1 << 63 else None


def named_queues(commit_log, from_offset: int, to_offset: int) -> frozenset[str]:
    """The queue names (topics) the records of ``commit_log`` (store/commitlog_end.CommitLog) in
    [from_offset, to_offset) multi-dispatch to: only records holding the property are decoded."""
    from rmqtool.store.message import Message

    names = set()
    needle = props.PROPERTY_INNER_MULTI_DISPATCH.encode()
    for r in commit_log.scan(from_offset, to_offset, check_crc=False, needle=needle):
        if type(r) is Message and needle in r.properties_raw:
            names.update(t.topic for t in targets(r.queue_id, r.properties))  # enableLmq moves the queue id only
    return frozenset(names)


def shown_by(view, from_offset: int, to_offset: int, v5: bool) -> tuple[frozenset, MultiDispatch | None]:
    """(the queues the records in [from_offset, to_offset) multi-dispatch to, how the broker
    dispatched them: None when it did not). The store shows whether it did: a light message
    queue's directory (``%LMQ%...``, enableMultiDispatch); with enableLmq those are queue id 0
    (without, each record's own id). Only then is the range read for the names (a log without
    them is not read again). ``view``: the store's (store/view.StoreView); ``v5``: 5.3 rules
    (the topics it leaves out)."""
    from rmqtool.store.consumequeue import queue_directories

    lmq_ids = [q for t, q, _d in queue_directories(view.paths.consumequeue) if t.startswith(props.LMQ_PREFIX)]
    if not lmq_ids:
        return frozenset(), None  # no light message queue: the broker multi-dispatched nothing here
    names = named_queues(view.commit_log, from_offset, to_offset)
    return names, MultiDispatch(lmq=all(q == props.LMQ_QUEUE_ID for q in lmq_ids), v5=v5)
