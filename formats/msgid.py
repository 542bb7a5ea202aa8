"""Message ids: the offset msgId the broker hands out, and the client's UNIQ_KEY.

Both are bytes printed as upper-case hex (``UtilAll.bytes2string``); the address is 4 bytes
(IPv4) or 16 (IPv6), which the id's length tells apart. All integers big-endian.

Offset msgId: ``MessageDecoder.createMessageId`` / ``decodeMessageId``
(``common/src/main/java/org/apache/rocketmq/common/message/MessageDecoder.java``, 4.9.8
and 5.3.3): where the message lies, so lookMessageByOffset can find it::

     0 +-------------------+------------+-----------------------------+
       | store host ip     | store port |      commit log offset      |   16 B (32 hex) for IPv4
       | 4 or 16 bytes     |   int32    |           int64             |   28 B (56 hex) for IPv6
       +-------------------+------------+-----------------------------+

UNIQ_KEY: ``MessageClientIDSetter.createUniqID`` (same file's package), the producer's id
in the ``UNIQ_KEY`` property. The first three fields are fixed per producer process
(``FIX_STRING``); the last two are per message::

     0 +-------------------+--------+-------------------+-------------------------+---------+
       | producer ip       |  pid   | class loader hash | ms since the start of    | counter |
       | 4 or 16 bytes     | int16  |      int32        | the producer's month     | int16   |
       |                   |        |                   |   int32                  |         |
       +-------------------+--------+-------------------+-------------------------+---------+

    pid: ``(short) UtilAll.getPid()``, read back unsigned (getPidFromID masks it with 0xFFFF).
    The time is ``(int) (now - startTime)``, startTime the first of the month, local time;
    the month itself is not in the id. ``getNearlyTimeFromID`` reads those 4 bytes back as the
    low half of a long, so they are an unsigned count: past day 24.86 of a month the int the
    client wrote is negative, and read signed it would land about 49.7 days early. The
    counter's low 16 bits (writeShort).
"""
from __future__ import annotations

from construct import Bytes, Int16ub, Int32sb, Int32ub, Int64sb, Struct

from .commitlog import IPV4_LENGTH, IPV6_LENGTH

# --- offset msgId ---------------------------------------------------------------------------

# What follows the address: where in the commit log
MessageIdPlace = Struct(
    "store_port" / Int32sb,
    "commit_log_offset" / Int64sb,
)


def _offset_message_id(ip_length: int) -> Struct:
    return Struct("store_ip" / Bytes(ip_length), *MessageIdPlace.subcons)


# By address length
OffsetMessageId = {IPV4_LENGTH: _offset_message_id(IPV4_LENGTH), IPV6_LENGTH: _offset_message_id(IPV6_LENGTH)}
assert [s.sizeof() for s in OffsetMessageId.values()] == [16, 28]

# --- UNIQ_KEY -------------------------------------------------------------------------------


def _uniq_key_fixed(ip_length: int) -> Struct:
    return Struct(
        "ip" / Bytes(ip_length),
        "pid" / Int16ub,
        "class_loader_hash" / Int32sb,
    )


# FIX_STRING: the part made once per producer process, by address length
UniqKeyFixed = {IPV4_LENGTH: _uniq_key_fixed(IPV4_LENGTH), IPV6_LENGTH: _uniq_key_fixed(IPV6_LENGTH)}

# The part createUniqID writes per message
UniqKeyPerMessage = Struct(
    "time_since_month_start" / Int32ub,  # unsigned: getNearlyTimeFromID's reading
    "counter" / Int16ub,
)

UniqKey = {n: Struct(*fixed.subcons, *UniqKeyPerMessage.subcons) for n, fixed in UniqKeyFixed.items()}
assert [s.sizeof() for s in UniqKey.values()] == [16, 28]

# Hex characters of an id -> its address length (the same for both ids)
HEX_LENGTHS = {2 * s.sizeof(): n for n, s in OffsetMessageId.items()}
assert HEX_LENGTHS == {2 * s.sizeof(): n for n, s in UniqKey.items()} == {32: 4, 56: 16}
