"""The record recover --keep-past-damage writes over a damaged one (recovery/quarantine.py
decides where and with which fields): encoded by the engine's encoder as a message of the
damaged record's topic, queue and queue offset (and its TAGS, KEYS and UNIQ_KEY when it
shows them, which its consume queue unit and index entries were made of), of exactly its size, that
checkMessageAndReturnSize accepts with its CRC checks (the body CRC, and a 5.x ``__CRC32#``
entry when the store's records carry one)."""
from __future__ import annotations

import dataclasses

from rmqtool.engine.encoder import Encoder
from rmqtool.errors import UsageError
from rmqtool.engine.message_inner import MessageInner
from rmqtool.formats import sysflag
from rmqtool.recovery.quarantine import QUARANTINE_BODY, QUARANTINE_PROPERTY, Quarantine

_KEPT_REASON = 120  # characters of the reason the property keeps, when the record has room for them


def quarantine_record(q: Quarantine) -> bytes | str:
    """The replacement record's bytes (len == q.size), or why there is none: a topic the
    encoder refuses, or a damaged record too small for even the shortest property."""
    try:
        return _encoded(q)
    except UsageError as exc:  # what the broker would refuse to store
        return f"no record can take its place: {exc}"


def _encoded(q: Quarantine) -> bytes | str:
    encoder = Encoder(q.store_host)
    encoder.append_prop_crc = q.prop_crc
    msg = MessageInner(topic=q.topic, queue_id=q.queue_id, born_timestamp=q.born_timestamp, born_host=q.born_host,
                       store_host=q.store_host, store_timestamp=q.store_timestamp, prop_crc=q.prop_crc,
                       # a half or rollback record stays one: it gets no queue unit, as the damaged one did not
                       sys_flag=q.sys_flag & sysflag.TRANSACTION_MASK)
    kept = dict(q.properties)
    # the shorter reason when the record is small; the kept properties last (the units and entries made of them
    # then disagree with the record, which verify says)
    for reason, properties in ((_value(q.reason)[:_KEPT_REASON], kept), ("damaged", kept), ("damaged", {})):
        msg = dataclasses.replace(msg, properties={**properties, QUARANTINE_PROPERTY: reason}, body=b"")
        room = q.size - encoder.prepare(msg).total_size
        if room >= 0:
            break
    else:
        return f"a record of {q.size} bytes has no room for topic {q.topic!r} and the property"
    body = QUARANTINE_BODY.encode()[:room].ljust(room, b" ")
    record = encoder.prepare(dataclasses.replace(msg, body=body))
    assert record.total_size == q.size
    return record.to_bytes(q.queue_offset, q.offset, q.store_timestamp)


def _value(text: str) -> str:
    """A property value: without the separators of the stored properties string."""
    return text.replace("\x01", " ").replace("\x02", " ")
