"""The payload of a message log record: the client's encoding of one message.

Mirrors the client's ``MessagesPayloadHolder.serializeMessage`` and the broker's
``QMQSerializer`` (``deserializeMessageHeader``, ``deserializeMap``), with ``Flags`` and
``PayloadHolderUtils``. The wire CRC that precedes a message in a send request is not part
of the payload: the broker stores it as the record's ``payloadCrc``.

::

       | flag int8 | createdTime int64 | expireTime int64 |
       | subject: int16 len + UTF-8 | messageId: int16 len + UTF-8 |
       | if flag bit 2: tag count int8, each tag int16 len + UTF-8    |
       | bodyLength int32 | body = attributes, each key int16 len + UTF-8 and
       |                    value int16 len + UTF-8 (a negative value length + 65,536) |

    flag bit 0: low reliability; bit 1: delay (expireTime holds the schedule time);
    bit 2: has tags.
"""
from __future__ import annotations

import struct

from construct import (Bytes, GreedyRange, If, Int8sb, Int32sb, Int64sb, PrefixedArray, Struct,
                       this)

from .strings import SHORT_RANGE, ShortString, ValueString

FLAG_LOW_RELIABILITY = 1 << 0
FLAG_DELAY = 1 << 1
FLAG_HAS_TAGS = 1 << 2

Attribute = Struct(
    "key" / ShortString,
    "value" / ValueString,
)

# The body as QMQSerializer.deserializeMap reads it: pairs until the body's bytes run out.
Attributes = GreedyRange(Attribute)

PayloadHeader = Struct(
    "flag" / Int8sb,
    "created_time" / Int64sb,
    "expire_time" / Int64sb,
    "subject" / ShortString,
    "message_id" / ShortString,
    "tags" / If(this.flag & FLAG_HAS_TAGS, PrefixedArray(Int8sb, ShortString)),
    "body_length" / Int32sb,
)

Payload = Struct(
    "header" / PayloadHeader,
    "body" / Bytes(this.header.body_length),
)


# --- the schema's clean case in plain reads --------------------------------------------------

_FIXED = struct.Struct(">bqq")  # flag, created_time, expire_time
_LENGTH = struct.Struct(">h")
_COUNT = struct.Struct(">b")
_BODY_LENGTH = struct.Struct(">i")


def _short_string(raw: bytes, at: int) -> tuple[str, int]:
    """A ShortString at ``at`` and where it ends; struct.error, UnicodeDecodeError or
    IndexError where the schema would refuse it too."""
    (n,) = _LENGTH.unpack_from(raw, at)
    end = at + 2 + n
    if n < 0 or end > len(raw):
        raise IndexError(at)
    return raw[at + 2:end].decode("utf-8"), end


def read_payload(raw: bytes) -> tuple[tuple, bytes, dict] | None:
    """What ``Payload.parse`` and ``Attributes.parse`` of its body give, read with plain
    struct reads: ((flag, created_time, expire_time, subject, message_id, tags or None,
    body_length), body, the attributes as a dict of the schema's list). None when anything
    is not the clean case (a negative length, a string past the end, bytes that are not
    UTF-8, attributes that do not end with the body): the schema then reads it and says what
    it says (tests/test_qmq_payload_read.py holds the two together)."""
    try:
        flag, created, expire = _FIXED.unpack_from(raw, 0)
        subject, at = _short_string(raw, _FIXED.size)
        message_id, at = _short_string(raw, at)
        tags = None
        if flag & FLAG_HAS_TAGS:
            (count,) = _COUNT.unpack_from(raw, at)
            if count < 0:
                return None
            at += 1
            tags = []
            for _ in range(count):
                tag, at = _short_string(raw, at)
                tags.append(tag)
        (body_length,) = _BODY_LENGTH.unpack_from(raw, at)
        at += 4
        if body_length < 0 or at + body_length > len(raw):
            return None
        body = raw[at:at + body_length]
        attrs = {}
        at, end = 0, len(body)
        while at < end:  # GreedyRange: pairs until the body's bytes run out
            key, at = _short_string(body, at)
            (n,) = _LENGTH.unpack_from(body, at)
            n += SHORT_RANGE if n < 0 else 0
            if at + 2 + n > end:
                return None
            value = body[at + 2:at + 2 + n].decode("utf-8")
            at += 2 + n
            attrs[key] = value  # a key twice: the last, as a dict made of the schema's list has it
    except (struct.error, ValueError, IndexError):  # short bytes, not UTF-8 (a ValueError), past the end
        return None
    return (flag, created, expire, subject, message_id, tags, body_length), body, attrs
