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
       | topicLength: int8 (V1) or int16 (V2) | topic (UTF-8) ...       |   the variable tail
       +------------+------------------------+-------------------------+
       | propertiesLength int16 | properties (UTF-8, see properties.py) |
       +------------------------+---------------------------------------+

    magicCode 0xDAA320A7: V1 (1-byte topic length); 0xDAA320AB: V2 (2-byte topic length,
    chosen by 5.x for topics longer than 127 bytes).
    bodyCRC: CRC-32 of the body masked to 31 bits (UtilAll.crc32); see crc.py.

The tail's lengths are signed, as the broker reads them: V1's topic length is
``buffer.get()`` (a byte: at most 127), V2's ``buffer.getShort()`` (at most 32767), the
properties length ``short propertiesLength`` (at most 32767: Short.MAX_VALUE). A length
with its sign bit set is not a record: for a topic checkMessageAndReturnSize throws; for
properties it reads a negative length and the lengths no longer add up to totalSize (a
negative bodyLength or propertiesLength with nothing after it, which the broker's reader
would let pass, its writer never writes; rmqtool calls it damage).

End-of-file blank record: when a message does not fit in the rest of a segment, the
broker writes only these 8 bytes and moves to the next segment::

       +---------------------------+--------------------+
       | totalSize = bytes left    | magic 0xCBD43194   |   (the rest is left as it was)
       +---------------------------+--------------------+
"""
from __future__ import annotations

from construct import (Bytes, Const, IfThenElse, Int8sb, Int16sb, Int32sb, Int32ub, Int64sb,
                       Rebuild, Struct, len_, this)

from .derive import field_names, struct_format
from .sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

MESSAGE_MAGIC_CODE_V1 = 0xDAA320A7  # -626843481 as a Java int
MESSAGE_MAGIC_CODE_V2 = 0xDAA320AB  # -626843477
BLANK_MAGIC_CODE = 0xCBD43194  # -875286124
MESSAGE_MAGIC_CODES = (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2)

IPV4_LENGTH = 4
IPV6_LENGTH = 16
# The broker leaves at least this many bytes for the blank record (CommitLog.END_FILE_MIN_BLANK_LENGTH).
END_FILE_MIN_BLANK_LENGTH = 4 + 4

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


def _largest(field) -> int:
    """The largest value an integer field holds, its sign bit taken into account."""
    bits = 8 * field.sizeof()
    signed = struct_format(Struct("v" / field))[-1].islower()
    return (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1


# --- the variable tail, after the body ------------------------------------------------------
# MessageVersion.getTopicLength: V1 buffer.get(), V2 buffer.getShort(); both signed.
TopicLength = {MESSAGE_MAGIC_CODE_V1: Int8sb, MESSAGE_MAGIC_CODE_V2: Int16sb}
PropertiesLength = Int16sb  # short propertiesLength = byteBuffer.getShort()

# By magic code, as MessageVersion.getTopicLengthSize
TOPIC_LENGTH_SIZE = {magic: field.sizeof() for magic, field in TopicLength.items()}
MAX_TOPIC_LENGTH = {magic: _largest(field) for magic, field in TopicLength.items()}
MAX_TOPIC_LENGTH_V1 = MAX_TOPIC_LENGTH[MESSAGE_MAGIC_CODE_V1]  # Byte.MAX_VALUE: longer topics need V2
MAX_TOPIC_LENGTH_V2 = MAX_TOPIC_LENGTH[MESSAGE_MAGIC_CODE_V2]
PROPERTIES_LENGTH_SIZE = PropertiesLength.sizeof()
MAX_PROPERTIES_LENGTH = _largest(PropertiesLength)  # Short.MAX_VALUE
assert (MAX_TOPIC_LENGTH_V1, MAX_TOPIC_LENGTH_V2, MAX_PROPERTIES_LENGTH) == (127, 32767, 32767)


def _topic(magic_code: int) -> Struct:
    return Struct(
        "topic_length" / Rebuild(TopicLength[magic_code], len_(this.topic)),
        "topic" / Bytes(this.topic_length),
    )


# The topic part of a record (length field + UTF-8 bytes), by magic code; build() refuses a
# topic longer than its length field holds.
MessageTopic = {magic: _topic(magic) for magic in TopicLength}

# The last part of every record; build() refuses more than MAX_PROPERTIES_LENGTH bytes.
MessageProperties = Struct(
    "properties_length" / Rebuild(PropertiesLength, len_(this.properties)),
    "properties" / Bytes(this.properties_length),
)

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
    "topic_length" / Rebuild(IfThenElse(this.magic_code == MESSAGE_MAGIC_CODE_V2, TopicLength[MESSAGE_MAGIC_CODE_V2],
                                        TopicLength[MESSAGE_MAGIC_CODE_V1]), len_(this.topic)),
    "topic" / Bytes(this.topic_length),
    *MessageProperties.subcons,
)

# The blank record's 8 written bytes. total_size is the number of bytes left in the file.
BlankRecord = Struct(
    "total_size" / Int32sb,
    "magic_code" / Const(BLANK_MAGIC_CODE, Int32ub),
)
assert BlankRecord.sizeof() == END_FILE_MIN_BLANK_LENGTH


def topic_length_size(magic_code: int) -> int:
    """MessageVersion.getTopicLengthSize: 2 bytes for V2, 1 for V1."""
    return TOPIC_LENGTH_SIZE[MESSAGE_MAGIC_CODE_V2 if magic_code == MESSAGE_MAGIC_CODE_V2 else MESSAGE_MAGIC_CODE_V1]


def message_length(sys_flag: int, body_length: int, topic_length: int, properties_length: int,
                   magic_code: int = MESSAGE_MAGIC_CODE_V1) -> int:
    """CommitLog.calMsgLength / MessageExtEncoder.calMsgLength: the record's totalSize."""
    hosts = MessageHosts[(sys_flag >> 4) & 3].sizeof()
    return (MessagePrefix.sizeof() + hosts + max(body_length, 0)
            + topic_length_size(magic_code) + topic_length + PROPERTIES_LENGTH_SIZE + max(properties_length, 0))


# The smallest record: empty body, topic and properties, IPv4 hosts.
MIN_MESSAGE_LENGTH = message_length(0, 0, 0, 0)
assert MIN_MESSAGE_LENGTH == 48 + 40 + 1 + 2


# --- where header fields lie -----------------------------------------------------------------

def _field_positions(schema: Struct) -> dict[str, int]:
    """Byte position of each field of a fixed-size schema."""
    out, at = {}, 0
    for sub in schema.subcons:
        out[sub.name] = at
        at += sub.sizeof()
    return out


# The fields up to bodyLength, by (sys_flag >> 4) & 3 as MessageHosts
HEADER_FIELD_AT = tuple(_field_positions(Struct(*MessagePrefix.subcons, *h.subcons)) for h in MessageHosts)
# The prefix's fields lie where they lie whatever the hosts
PREFIX_FIELD_AT = _field_positions(MessagePrefix)
assert all(at[n] == PREFIX_FIELD_AT[n] for at in HEADER_FIELD_AT for n in field_names(MessagePrefix))
SYS_FLAG_AT = PREFIX_FIELD_AT["sys_flag"]
QUEUE_OFFSET_AT = PREFIX_FIELD_AT["queue_offset"]
PHYSICAL_OFFSET_AT = PREFIX_FIELD_AT["physical_offset"]
STORE_TIMESTAMP_AT = tuple(at["store_timestamp"] for at in HEADER_FIELD_AT)  # by (sysFlag >> 4) & 3
