"""QMQ's length-prefixed strings: an int16 length, then UTF-8.

``PayloadHolderUtils.writeString`` casts the length to a short, so a string of
32,768-65,535 bytes is written with a negative length; ``QMQSerializer.deserializeMap``
adds 65,536 to a negative *value* length (never to a key's). Everywhere else a negative
length makes ``new byte[len]`` throw: the string is unreadable.
"""
from __future__ import annotations

from construct import ExprAdapter, Int16sb, PascalString

SHORT_RANGE = 1 << 16

# subject, message id, tags, group, consumer id, attribute keys
ShortString = PascalString(Int16sb, "utf8")

# An attribute value's length as the client wrote it (int16) and as QMQSerializer reads it.
ValueLength = ExprAdapter(
    Int16sb,
    lambda raw, ctx: raw + SHORT_RANGE if raw < 0 else raw,
    lambda length, ctx: length - SHORT_RANGE if length >= SHORT_RANGE // 2 else length,
)
ValueString = PascalString(ValueLength, "utf8")
