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
in a named queue shows it did (verify), and the queue directories a store holds show which.
"""
from __future__ import annotations

from typing import NamedTuple

from rmqtool.formats import properties as props


class Target(NamedTuple):
    """A queue a record is dispatched to by name, and its queue offset there."""
    topic: str
    queue_id: int
    queue_offset: int


def targets(queue_id: int, properties: dict | None, *, lmq: bool = True) -> list[Target]:
    """The queues a record of queue id ``queue_id`` with ``properties`` is dispatched to besides
    its own, as a broker with enableMultiDispatch (and with ``lmq``, enableLmq) dispatches it."""
    names, offsets = (properties or {}).get(props.PROPERTY_INNER_MULTI_DISPATCH), \
        (properties or {}).get(props.PROPERTY_INNER_MULTI_QUEUE_OFFSET)
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
            names.update(t.topic for lmq in (True, False) for t in targets(r.queue_id, r.properties, lmq=lmq))
    return frozenset(names)
