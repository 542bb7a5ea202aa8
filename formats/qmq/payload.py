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

from construct import (Bytes, GreedyRange, If, Int8sb, Int32sb, Int64sb, PrefixedArray, Struct,
                       this)

from .strings import ShortString, ValueString

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
