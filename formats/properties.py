"""The properties string of a message: ``name \\u0001 value \\u0002 ...`` in UTF-8.

Mirrors ``MessageDecoder.messageProperties2String`` / ``string2messageProperties``
(``common/src/main/java/org/apache/rocketmq/common/message/MessageDecoder.java``)::

    +------+----+-------+----+------+----+-------+----+     +------------------------+
    | name | 01 | value | 02 | name | 01 | value | 02 | ... | __CRC32# 01 dddddddddd 02 |  (5.x, optional)
    +------+----+-------+----+------+----+-------+----+     +------------------------+

4.x drops the last ``\\u0002``; 5.x with ``enabledAppendPropCRC`` ends with the 20-byte
``__CRC32#`` entry, whose 10 digits are the record CRC written least-significant digit
first (``MessageDecoder.createCrc32``).

Well-known names are in ``MessageConst.java``.
"""
from __future__ import annotations

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
KEY_SEPARATOR = " "

CRC32_DIGITS = 10
# "__CRC32#" + \u0001 + 10 digits + \u0002 (CommitLog.CRC32_RESERVED_LEN)
CRC32_RESERVED_LEN = len(PROPERTY_CRC32) + 1 + CRC32_DIGITS + 1
assert CRC32_RESERVED_LEN == 20


def string_to_properties(text: str) -> dict[str, str]:
    """The broker's reading: entries without a name or value are skipped; the last duplicate wins."""
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


def properties_to_string(properties: dict[str, str], trailing_separator: bool = False) -> str:
    """As messageProperties2String: 4.x drops the last separator; values of None are skipped."""
    parts = [f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}"
             for k, v in properties.items() if v is not None]
    text = "".join(parts)
    if text and not trailing_separator:
        text = text[:-1]
    return text


def crc32_property_digits(crc: int) -> str:
    """The 10 digits of the ``__CRC32#`` value: lowest decimal digit first, padded with '0'."""
    return str(crc)[::-1].ljust(CRC32_DIGITS, "0")


def crc32_from_digits(digits: str) -> int | None:
    """Read the digits back to front, as the engine does; None when they are not 10 digits."""
    if len(digits) != CRC32_DIGITS or not digits.isdigit():
        return None
    return int(digits[::-1])


def split_keys(keys: str | None) -> list[str]:
    """KEYS holds several keys separated by spaces (MessageConst.KEY_SEPARATOR)."""
    if not keys:
        return []
    return [k for k in keys.split(KEY_SEPARATOR) if k]
