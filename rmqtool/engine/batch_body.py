"""A batch's body: MessageDecoder.encodeMessages and decodeMessages (the layout is
formats/batch.py's)."""
from __future__ import annotations

from typing import Iterable

from rmqtool.engine.java_text import java_utf8
from rmqtool.engine.message_inner import BatchItem
from rmqtool.errors import UsageError
from rmqtool.formats.batch import (BATCH_MESSAGE_BODY_CRC, BATCH_MESSAGE_MAGIC_CODE, MAX_BATCH_PROPERTIES_LENGTH,
                                   BatchMessageHead, BatchPropertiesLength, batch_message_size)
from rmqtool.formats.derive import struct_of

_BATCH_HEAD = struct_of(BatchMessageHead)  # totalSize, magic (0), bodyCRC (0), flag, bodyLength
_BATCH_PROPS_LEN = struct_of(BatchPropertiesLength)


def encode_batch_body(items: Iterable[BatchItem]) -> bytes:
    """MessageDecoder.encodeMessages: each item as totalSize, 0, 0, flag, body, properties."""
    parts = []
    head = _BATCH_HEAD.pack
    props_len = _BATCH_PROPS_LEN.pack
    for item in items:
        prop = java_utf8(item.stored_properties_string())
        if len(prop) > MAX_BATCH_PROPERTIES_LENGTH:
            raise UsageError(f"properties of a batch message are {len(prop)} bytes, more than "
                             f"{MAX_BATCH_PROPERTIES_LENGTH}")
        body = item.body
        parts.append(head(batch_message_size(len(body), len(prop)), BATCH_MESSAGE_MAGIC_CODE,
                          BATCH_MESSAGE_BODY_CRC, item.flag, len(body)))
        parts.append(body)
        parts.append(props_len(len(prop)))
        parts.append(prop)
    return b"".join(parts)


def decode_batch_body(body: bytes) -> list[tuple[int, bytes, bytes]]:
    """MessageDecoder.decodeMessages as the broker's batch encoder walks it: the inner
    messages as (flag, body, raw properties bytes); totalSize, magic and CRC are skipped."""
    out = []
    pos = 0
    end = len(body)
    head = _BATCH_HEAD.unpack_from
    head_size = _BATCH_HEAD.size
    props_len = _BATCH_PROPS_LEN.unpack_from
    while pos < end:
        if pos + head_size > end:
            raise UsageError(f"batch body ends inside a message header at byte {pos}")
        _size, _magic, _crc, flag, body_len = head(body, pos)
        p = pos + head_size
        if body_len < 0 or p + body_len + 2 > end:
            raise UsageError(f"batch message at byte {pos}: body length {body_len} runs past the batch")
        inner = body[p:p + body_len]
        p += body_len
        (prop_len,) = props_len(body, p)
        p += 2
        if prop_len < 0 or p + prop_len > end:
            raise UsageError(f"batch message at byte {pos}: properties length {prop_len} runs past the batch")
        out.append((flag, inner, body[p:p + prop_len]))
        pos = p + prop_len
    return out
