"""The properties string of a message: ``name \\u0001 value \\u0002 ...`` in UTF-8.

Mirrors ``MessageDecoder.messageProperties2String`` / ``string2messageProperties``
(``common/src/main/java/org/apache/rocketmq/common/message/MessageDecoder.java``)::

    +------+----+-------+----+------+----+-------+----+     +------------------------+
    | name | 01 | value | 02 | name | 01 | value | 02 | ... | __CRC32# 01 dddddddddd 02 |  (5.x, optional)
    +------+----+-------+----+------+----+-------+----+     +------------------------+

4.x drops the last ``\\u0002``; 5.x with ``enabledAppendPropCRC`` ends with the 20-byte
``__CRC32#`` entry (its rule is in crc.py).

Well-known names are in ``MessageConst.java``.
"""
from __future__ import annotations

import itertools

NAME_VALUE_SEPARATOR = "\u0001"
PROPERTY_SEPARATOR = "\u0002"

# MessageConst names rmqtool reads
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_INNER_NUM = "INNER_NUM"
PROPERTY_INNER_BASE = "INNER_BASE"
PROPERTY_CRC32 = "__CRC32#"
# multi-dispatch (light message queues): the queues a record is dispatched to besides its own,
# and its queue offset in each, at the same index (MessageConst.java; split at MixAll's ",")
PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
MULTI_DISPATCH_SEPARATOR = ","
LMQ_PREFIX = "%LMQ%"  # MixAll.LMQ_PREFIX: a light message queue, queue id 0 under enableLmq
LMQ_QUEUE_ID = 0
# not RocketMQ's: the property rmqtool recover --keep-past-damage gives a record it puts in place of a damaged one
PROPERTY_QUARANTINED = "RMQTOOL_QUARANTINED"
KEY_SEPARATOR = " "

# bytes_to_properties: map(str.split, entries, _NAME_VALUE_REPEAT) splits every entry in C
_STR_SPLIT = str.split
_NAME_VALUE_REPEAT = itertools.repeat(NAME_VALUE_SEPARATOR)


def string_to_properties(text: str) -> dict[str, str]:
    """MessageDecoder.string2messageProperties, the broker's reading: an entry is kept when
    its first ``\\u0001`` has a name before it and a value after it (the rest of the entry,
    further ``\\u0001`` included); other entries are skipped; the last duplicate wins."""
    result: dict[str, str] = {}
    length = len(text)
    index = 0
    while index < length:
        end = text.find(PROPERTY_SEPARATOR, index)
        if end < 0:
            end = length
        if end - index >= 3:
            kv = text.find(NAME_VALUE_SEPARATOR, index)
            if index < kv < end - 1:
                result[text[index:kv]] = text[kv + 1:end]
        index = end + 1
    return result


def bytes_to_properties(raw: bytes) -> tuple[dict[str, str], bool]:
    """MessageDecoder.string2messageProperties of stored properties bytes: (the broker's
    reading, whether the bytes were valid UTF-8). Invalid UTF-8 is decoded with replacement
    characters, as Java's ``new String(bytes, UTF_8)``.

    The common string is read in a few C-level calls: valid UTF-8, every entry exactly one
    ``name \\u0001 value`` with neither empty, at most one trailing separator (5.x); then
    the broker's reading is plain splitting (an entry with no ``\\u0001`` or two splits
    into 1 or 3 items, which dict() refuses). Any other string takes
    :func:`string_to_properties`, the broker's loop.
    """
    try:
        text = raw.decode("utf-8")
        if text[-1:] == PROPERTY_SEPARATOR:
            text = text[:-1]
        p = dict(map(_STR_SPLIT, text.split(PROPERTY_SEPARATOR), _NAME_VALUE_REPEAT))
        if "" not in p and "" not in p.values():
            return p, True
    except ValueError:  # not well-formed (UnicodeDecodeError too): the careful way
        pass
    if not raw:
        return {}, True
    try:
        return string_to_properties(raw.decode("utf-8")), True
    except UnicodeDecodeError:
        return string_to_properties(raw.decode("utf-8", "replace")), False


def properties_to_string(properties: dict[str, str], trailing_separator: bool = False) -> str:
    """As messageProperties2String: 4.x drops the last separator; values of None are skipped."""
    parts = [f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}"
             for k, v in properties.items() if v is not None]
    text = "".join(parts)
    if text and not trailing_separator:
        text = text[:-1]
    return text


def delete_property(text, name: str):
    """MessageUtils.deleteProperty (5.x): ``text`` (str or bytes) without any ``name``
    entry, where ``name`` starts the string or follows a separator and a name-value
    separator follows it; the entry goes with its closing separator (one with none is cut
    to the end)."""
    sep, nv = PROPERTY_SEPARATOR, NAME_VALUE_SEPARATOR
    if isinstance(text, (bytes, bytearray)):
        name, sep, nv = name.encode(), sep.encode(), nv.encode()
    out, kept_from, n = [], 0, len(name)
    while True:
        at, look = -1, kept_from
        while True:
            at = text.find(name, look)
            if at == -1:
                break
            look = at + n
            if (at == 0 or text[at - 1:at] == sep) and text[at + n:at + n + 1] == nv:
                break
        if at == -1:
            out.append(text[kept_from:])
            break
        out.append(text[kept_from:at])
        closing = text.find(sep, at + n + 1)
        if closing == -1:
            break
        kept_from = closing + 1
    return text[:0].join(out)


def split_keys(keys: str | None) -> list[str]:
    """KEYS holds several keys separated by spaces (MessageConst.KEY_SEPARATOR)."""
    if not keys:
        return []
    return [k for k in keys.split(KEY_SEPARATOR) if k]
