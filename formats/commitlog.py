"""Commit log records: the message record (V1 and V2) and the end-of-file blank record.

Mirrors ``store/src/main/java/org/apache/rocketmq/store/CommitLog.java``
(``DefaultAppendMessageCallback.doAppend``, ``checkMessageAndReturnSize``) at 4.9.8, and
``MessageExtEncoder.java`` / ``common/.../message/MessageVersion.java`` at 5.3.3.
All integers big-endian. A commit log segment is a run of these records; the segment
file name is the commit log offset of its first byte (20 digits).

Message record::

     0 +------------+------------+------------+------------+------------+
       | totalSize  | magicCode  |  bodyCRC   |  queueId   |    flag    |   int32 x5
    20 +------------+------------+------------+------------+------------+
       |      queueOffset        |     physicalOffset      |  sysFlag   |   int64 int64 int32
    44 +-------------------------+-------------------------+------------+
       |     bornTimestamp       | bornHost: ip 4|16, port int32        |   sysFlag bit 4: IPv6
       +-------------------------+--------------------------------------+
       |     storeTimestamp      | storeHost: ip 4|16, port int32       |   sysFlag bit 5: IPv6
       +------------+------------+------------+-------------------------+
       | reconsume  | preparedTransactionOffset| bodyLength | body ...   |
       +------------+------------+------------+-------------------------+
       | topicLength: int8 (V1) or int16 (V2) | topic (UTF-8) ...       |
       +------------+------------------------+-------------------------+
       | propertiesLength int16 | properties (UTF-8, see properties.py) |
       +------------------------+---------------------------------------+

    magicCode 0xDAA320A7: V1 (1-byte topic length); 0xDAA320AB: V2 (2-byte topic length,
    chosen by 5.x for topics longer than 127 bytes).
    bodyCRC: CRC-32 of the body masked to 31 bits (UtilAll.crc32); 0 for an empty body.

End-of-file blank record: when a message does not fit in the rest of a segment, the
broker writes only these 8 bytes and moves to the next segment::

       +---------------------------+--------------------+
       | totalSize = bytes left    | magic 0xCBD43194   |   (the rest is left as it was)
       +---------------------------+--------------------+
"""
from __future__ import annotations

from construct import (Bytes, Const, IfThenElse, Int8ub, Int16sb, Int16ub, Int32sb,
                       Int32ub, Int64sb, Rebuild, Struct, len_, this)

from .sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

MESSAGE_MAGIC_CODE_V1 = 0xDAA320A7  # -626843481 as a Java int
MESSAGE_MAGIC_CODE_V2 = 0xDAA320AB  # -626843477
BLANK_MAGIC_CODE = 0xCBD43194  # -875286124
MESSAGE_MAGIC_CODES = (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2)

IPV4_LENGTH = 4
IPV6_LENGTH = 16
# The broker leaves at least this many bytes for the blank record (CommitLog.END_FILE_MIN_BLANK_LENGTH).
END_FILE_MIN_BLANK_LENGTH = 4 + 4
# Java's Short.MAX_VALUE bounds the properties length; topics are bounded by the length field.
MAX_PROPERTIES_LENGTH = 32767

# The fixed 48 bytes every message record starts with.
MessagePrefix = Struct(
    "total_size" / Int32sb,
    "magic_code" / Int32ub,
    "body_crc" / Int32sb,
    "queue_id" / Int32sb,
    "flag" / Int32sb,
    "queue_offset" / Int64sb,
    "physical_offset" / Int64sb,
    "sys_flag" / Int32sb,
    "born_timestamp" / Int64sb,
)
assert MessagePrefix.sizeof() == 48


def _hosts(born_ip: int, store_ip: int) -> Struct:
    """The fixed middle of a record, after the prefix and up to the body, for one host-size pair."""
    return Struct(
        "born_host" / Bytes(born_ip),
        "born_port" / Int32sb,
        "store_timestamp" / Int64sb,
        "store_host" / Bytes(store_ip),
        "store_port" / Int32sb,
        "reconsume_times" / Int32sb,
        "prepared_transaction_offset" / Int64sb,
        "body_length" / Int32sb,
    )


# Indexed by (sys_flag >> 4) & 3: bit 0 = born host IPv6, bit 1 = store host IPv6.
MessageHosts = (
    _hosts(IPV4_LENGTH, IPV4_LENGTH),
    _hosts(IPV6_LENGTH, IPV4_LENGTH),
    _hosts(IPV4_LENGTH, IPV6_LENGTH),
    _hosts(IPV6_LENGTH, IPV6_LENGTH),
)
assert [h.sizeof() for h in MessageHosts] == [40, 52, 52, 64]

_born_ip_length = IfThenElse((this.sys_flag & BORNHOST_V6_FLAG) != 0, Bytes(IPV6_LENGTH), Bytes(IPV4_LENGTH))
_store_ip_length = IfThenElse((this.sys_flag & STOREHOSTADDRESS_V6_FLAG) != 0, Bytes(IPV6_LENGTH), Bytes(IPV4_LENGTH))

# The whole message record. Lengths are rebuilt from the data, so build() of a record
# without them is right by construction; body_crc and total_size are given by the encoder
# (rmqtool.store), which knows the CRC rule and the record's place.
MessageRecord = Struct(
    *MessagePrefix.subcons,
    "born_host" / _born_ip_length,
    "born_port" / Int32sb,
    "store_timestamp" / Int64sb,
    "store_host" / _store_ip_length,
    "store_port" / Int32sb,
    "reconsume_times" / Int32sb,
    "prepared_transaction_offset" / Int64sb,
    "body_length" / Rebuild(Int32sb, len_(this.body)),
    "body" / Bytes(this.body_length),
    "topic_length" / Rebuild(
        IfThenElse(this.magic_code == MESSAGE_MAGIC_CODE_V2, Int16ub, Int8ub), len_(this.topic)),
    "topic" / Bytes(this.topic_length),
    "properties_length" / Rebuild(Int16sb, len_(this.properties)),
    "properties" / Bytes(this.properties_length),
)

# The blank record's 8 written bytes. total_size is the number of bytes left in the file.
BlankRecord = Struct(
    "total_size" / Int32sb,
    "magic_code" / Const(BLANK_MAGIC_CODE, Int32ub),
)
assert BlankRecord.sizeof() == END_FILE_MIN_BLANK_LENGTH


def topic_length_size(magic_code: int) -> int:
    """MessageVersion.getTopicLengthSize: 2 bytes for V2, 1 for V1."""
    return 2 if magic_code == MESSAGE_MAGIC_CODE_V2 else 1


def message_length(sys_flag: int, body_length: int, topic_length: int, properties_length: int,
                   magic_code: int = MESSAGE_MAGIC_CODE_V1) -> int:
    """CommitLog.calMsgLength / MessageExtEncoder.calMsgLength: the record's totalSize."""
    hosts = MessageHosts[(sys_flag >> 4) & 3].sizeof()
    return (MessagePrefix.sizeof() + hosts + max(body_length, 0)
            + topic_length_size(magic_code) + topic_length + 2 + max(properties_length, 0))


# The smallest record: empty body, topic and properties, IPv4 hosts.
MIN_MESSAGE_LENGTH = message_length(0, 0, 0, 0)
assert MIN_MESSAGE_LENGTH == 48 + 40 + 1 + 2
