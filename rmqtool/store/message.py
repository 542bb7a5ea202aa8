"""A decoded commit log message (the broker's MessageExt) and the fast decoder.

The decoder reads with ``struct`` formats derived from ``formats/commitlog.py``
(MessagePrefix, MessageHosts, and the tail's TopicLength and PropertiesLength, with their
limits); tests assert it agrees with the construct schema on every fixture record and on
generated records at every length limit. The careful path reads the tail with
:func:`read_tail`; the two hot loops (:func:`decode_run` here and
``rmqtool.store.commitlog.crc_run``) inline the same reads as byte arithmetic, checked
against the derived structs below when this module loads.

Speed (issue 2): each header field is a slot of its own, filled from one
``unpack_from`` of a derived struct (prefix and hosts joined), so reading a field costs
a slot read, not a Python call. Properties are parsed into a dict on first access, most
strings in a few C-level calls. :func:`decode_run` decodes the clean records of a
buffer in one loop and leaves anything doubtful to :func:`decode_message`. CRCs are
computed by whatever :mod:`rmqtool.store.crc` chose (ISA-L when installed).
"""
from __future__ import annotations

import struct

import construct as cs

from rmqtool.findings import RECORD_LENGTH_MISMATCH, RECORD_MAGIC_INVALID
from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import (MAX_PROPERTIES_LENGTH, MAX_TOPIC_LENGTH, MAX_TOPIC_LENGTH_V1,
                                       MAX_TOPIC_LENGTH_V2, MESSAGE_MAGIC_CODE_V1,
                                       MESSAGE_MAGIC_CODE_V2, MIN_MESSAGE_LENGTH, SYS_FLAG_AT,
                                       MessageHosts, MessagePrefix, PropertiesLength, TopicLength)
from rmqtool.formats.crc import (CRC32_DIGITS, CRC32_ENTRY_HEAD, CRC32_RESERVED_LEN, crc32_from_digits,
                                 stored_record_crc)
from rmqtool.formats.derive import field_names, struct_format, struct_of
from rmqtool.formats.properties import bytes_to_properties
from rmqtool.formats.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, transaction_type
from rmqtool.store import compression
from rmqtool.store import crc as crc_module
from rmqtool.store.crc import JAVA_CRC_MASK
from rmqtool.store.hosts import format_host
from rmqtool.store.msgid import create_message_id

PREFIX = struct_of(MessagePrefix)
HOSTS = tuple(struct_of(h) for h in MessageHosts)
PREFIX_SIZE = PREFIX.size
# totalSize and magicCode: all a header-only hop needs, and what a writer puts last
RECORD_START = struct_of(cs.Struct(*MessagePrefix.subcons[:2]))
assert field_names(cs.Struct(*MessagePrefix.subcons[:2])) == ("total_size", "magic_code")
_SYS_FLAG_FIELD = struct_of(cs.Struct(MessagePrefix.subcons[field_names(MessagePrefix).index("sys_flag")]))

# The variable tail's length fields, by magic code
TOPIC_LENGTHS = {magic: struct_of(cs.Struct("topic_length" / field)) for magic, field in TopicLength.items()}
PROPERTIES_LENGTH = struct_of(cs.Struct("properties_length" / PropertiesLength))
# The hot loops read these fields as bytes (an unpack call costs more than the arithmetic):
# the V1 topic length as one byte, the V2 one and the properties length as two, big-endian,
# and refuse a value past the field's largest (its sign bit set). That is these formats.
assert TOPIC_LENGTHS[MESSAGE_MAGIC_CODE_V1].format == ">b" and TOPIC_LENGTHS[MESSAGE_MAGIC_CODE_V2].format == ">h"
assert PROPERTIES_LENGTH.format == ">h"


def sys_flag_of(head) -> int:
    """The sysFlag of the record whose first bytes are ``head``."""
    return _SYS_FLAG_FIELD.unpack_from(head, SYS_FLAG_AT)[0]


def _joined(prefix: struct.Struct, hosts: struct.Struct) -> struct.Struct:
    """Prefix and hosts as one struct: the same derived formats, one unpack instead of two."""
    if prefix.format[0] != hosts.format[0]:
        raise TypeError("prefix and hosts differ in byte order")
    joined = struct.Struct(prefix.format + hosts.format[1:])
    assert joined.size == prefix.size + hosts.size
    return joined


# Indexed by (sys_flag >> 4) & 3, as MessageHosts is.
HEADERS = tuple(_joined(PREFIX, h) for h in HOSTS)

# The header tuple's fields, in the schemas' order, named as Message names them.
_RENAMED = {"total_size": "store_size", "born_host": "born_ip", "store_host": "store_ip"}
assert len({field_names(h) for h in MessageHosts}) == 1
HEADER_FIELDS = tuple(_RENAMED.get(n, n) for n in field_names(MessagePrefix) + field_names(MessageHosts[0]))
# Message's header slots: every header field but bodyLength, which is len(body)
MESSAGE_HEADER_FIELDS = tuple(n for n in HEADER_FIELDS if n != "body_length")
# The hot loops fill the slots with one tuple assignment written out by hand (a loop of
# setattr costs 10x more); it must name the fields in the schema's order.
assert MESSAGE_HEADER_FIELDS + ("body_length",) == (
    "store_size", "magic_code", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset", "sys_flag",
    "born_timestamp", "born_ip", "born_port", "store_timestamp", "store_ip", "store_port", "reconsume_times",
    "prepared_transaction_offset", "body_length"), "formats/commitlog.py changed: update the tuple assignments"


def _field_codes(schema: cs.Struct) -> list[str]:
    """The struct code of each field of a fixed-size schema, derived field by field."""
    return [struct_format(cs.Struct(sub))[1:] for sub in schema.subcons]


def _checked(header: struct.Struct, codes: list[str], wanted: tuple[str, ...]) -> struct.Struct:
    """The header struct with every field not in ``wanted`` turned into pad bytes."""
    fmt = header.format[0] + "".join(
        code if name in wanted else f"{struct.calcsize('>' + code)}x" for name, code in zip(HEADER_FIELDS, codes))
    checked = struct.Struct(fmt)
    assert checked.size == header.size
    return checked


# What a CRC check reads of every header (rmqtool.store.commitlog.crc_run): lengths and CRC.
CHECKED_FIELDS = ("store_size", "magic_code", "body_crc", "sys_flag", "body_length")
CHECKED = tuple(_checked(hd, _field_codes(MessagePrefix) + _field_codes(h), CHECKED_FIELDS)
                for hd, h in zip(HEADERS, MessageHosts))
# the byte of sysFlag that holds the host-size bits (big-endian: its last byte)
_SYS_FLAG_LOW_BYTE = cs.Struct(*MessagePrefix.subcons[:field_names(MessagePrefix).index("sys_flag") + 1]).sizeof() - 1
_BODY_LENGTH = HEADER_FIELDS.index("body_length")
_STORE_SIZE = HEADER_FIELDS.index("store_size")
_MAGIC_CODE = HEADER_FIELDS.index("magic_code")
_BODY_CRC = HEADER_FIELDS.index("body_crc")
_SYS_FLAG = HEADER_FIELDS.index("sys_flag")
# decode_run indexes the header tuple with literals (faster than names); they must be these.
assert (_STORE_SIZE, _MAGIC_CODE, _BODY_CRC, _SYS_FLAG, _BODY_LENGTH) == (0, 1, 2, 7, 16)
_HOSTS_V6 = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
_SEPARATOR = ord(props.PROPERTY_SEPARATOR)
# crc_run indexes the CHECKED tuple with literals; they must be these.
assert CHECKED_FIELDS.index("store_size") == 0 and CHECKED_FIELDS.index("magic_code") == 1
assert CHECKED_FIELDS.index("body_crc") == 2 and CHECKED_FIELDS.index("sys_flag") == 3
assert CHECKED_FIELDS.index("body_length") == 4


class Message:
    """One message record, located: where it lies, its fields, and what checks said.

    Header fields (store_size ... prepared_transaction_offset) are plain attributes;
    ``properties`` is the broker's dict view of ``properties_raw``, parsed on first
    access. Every attribute can be set. Equality is identity.
    """

    __slots__ = ("commit_log_offset", *MESSAGE_HEADER_FIELDS, "body", "topic", "properties_raw", "_properties",
                 "_properties_utf8_ok", "path", "position", "body_crc_ok", "property_crc_ok", "topic_utf8_ok")

    def __init__(self, commit_log_offset: int, store_size: int, magic_code: int, body_crc: int, queue_id: int,
                 flag: int, queue_offset: int, physical_offset: int, sys_flag: int, born_timestamp: int,
                 born_ip: bytes, born_port: int, store_timestamp: int, store_ip: bytes, store_port: int,
                 reconsume_times: int, prepared_transaction_offset: int, body: bytes, topic: str,
                 properties_raw: bytes, properties: dict | None = None, path: str | None = None,
                 position: int | None = None, body_crc_ok: bool | None = None,
                 property_crc_ok: bool | None = None, topic_utf8_ok: bool = True,
                 properties_utf8_ok: bool | None = None):
        self.commit_log_offset = commit_log_offset
        (self.store_size, self.magic_code, self.body_crc, self.queue_id, self.flag, self.queue_offset,
         self.physical_offset, self.sys_flag, self.born_timestamp, self.born_ip, self.born_port,
         self.store_timestamp, self.store_ip, self.store_port, self.reconsume_times,
         self.prepared_transaction_offset) = (
            store_size, magic_code, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
            born_timestamp, born_ip, born_port, store_timestamp, store_ip, store_port, reconsume_times,
            prepared_transaction_offset)
        self.body = body
        self.topic = topic
        self.properties_raw = properties_raw
        self._properties = properties  # None: parse from properties_raw when first asked
        if properties_utf8_ok is None and properties is not None:
            properties_utf8_ok = True
        self._properties_utf8_ok = properties_utf8_ok  # None: not known yet
        self.path = path
        self.position = position  # byte position inside the segment file
        self.body_crc_ok = body_crc_ok  # None: not checked
        self.property_crc_ok = property_crc_ok  # None: no __CRC32# property, or not checked
        self.topic_utf8_ok = topic_utf8_ok

    # --- properties, parsed on first access ---
    @property
    def properties(self) -> dict:
        p = self._properties
        if p is None:
            p, self._properties_utf8_ok = bytes_to_properties(self.properties_raw)
            self._properties = p
        return p

    @properties.setter
    def properties(self, value: dict | None) -> None:
        self._properties = value

    @property
    def properties_utf8_ok(self) -> bool:
        ok = self._properties_utf8_ok
        if ok is None:
            raw = self.properties_raw
            if raw.isascii():
                ok = True
            else:
                try:
                    raw.decode("utf-8")
                    ok = True
                except UnicodeDecodeError:
                    ok = False
            self._properties_utf8_ok = ok
        return ok

    @properties_utf8_ok.setter
    def properties_utf8_ok(self, value: bool) -> None:
        self._properties_utf8_ok = value

    def __repr__(self) -> str:
        return (f"Message(commit_log_offset={self.commit_log_offset}, store_size={self.store_size}, "
                f"topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
                f"path={self.path!r}, position={self.position})")

    # --- derived values, in RocketMQ's names ---
    @property
    def born_host(self) -> str:
        return format_host(self.born_ip, self.born_port)

    @property
    def store_host(self) -> str:
        return format_host(self.store_ip, self.store_port)

    @property
    def msg_id(self) -> str:
        """The offset msgId: store host + the commit log offset the record lies at."""
        return create_message_id(self.store_ip, self.store_port, self.commit_log_offset)

    @property
    def tags(self) -> str | None:
        return self.properties.get(props.PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        return props.split_keys(self.properties.get(props.PROPERTY_KEYS))

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def message_version(self) -> int:
        return 2 if self.magic_code == MESSAGE_MAGIC_CODE_V2 else 1

    @property
    def transaction_type(self) -> int:
        return transaction_type(self.sys_flag)

    @property
    def compression(self) -> str | None:
        return compression.codec_of(self.sys_flag)

    def decompressed_body(self) -> bytes:
        codec = self.compression
        return self.body if codec is None else compression.decompress(self.body, codec)


class RecordError(Exception):
    """Why bytes at a position are not a message record (id from rmqtool.findings)."""

    def __init__(self, finding_id: str, message: str):
        super().__init__(message)
        self.finding_id = finding_id
        self.message = message


# Decoded topic names by their bytes: a store has few topics, so most records skip the decode.
_TOPICS: dict[bytes, str] = {}
_TOPICS_MAX = 4096


def _decode_topic(raw: bytes) -> tuple[str, bool]:
    try:
        topic = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace"), False
    if len(_TOPICS) >= _TOPICS_MAX:
        _TOPICS.clear()
    _TOPICS[raw] = topic
    return topic, True


def read_tail(buf, pos: int, body_end: int, end: int, magic: int) -> tuple[int, int, int]:
    """Where the variable tail of the record at ``buf[pos:end]`` lies, its body ending at
    ``body_end``: (topic start, topic end, properties start); RecordError when its lengths
    are not the schema's (a sign bit set) or do not add up to the record's size.

    The careful paths' one reading of the tail (:func:`decode_message`, and dispatch's
    check_message); the hot loops inline it.
    """
    topic_length = TOPIC_LENGTHS.get(magic)
    if topic_length is None:
        raise RecordError(RECORD_MAGIC_INVALID, f"magic code 0x{magic:08X} is not a message record's")
    t = body_end + topic_length.size
    if t > end:
        raise RecordError(RECORD_LENGTH_MISMATCH, f"the body leaves no room for the topic length in totalSize "
                                                  f"{end - pos}")
    (topic_len,) = topic_length.unpack_from(buf, body_end)
    if topic_len < 0:
        raise RecordError(RECORD_LENGTH_MISMATCH, f"topic length field reads {topic_len}: a V"
                          f"{2 if magic == MESSAGE_MAGIC_CODE_V2 else 1} record's topic has at most "
                          f"{MAX_TOPIC_LENGTH[magic]} bytes")
    t_end = t + topic_len
    props_at = t_end + PROPERTIES_LENGTH.size
    if props_at > end:
        raise RecordError(RECORD_LENGTH_MISMATCH, f"topic length {topic_len} does not fit in totalSize {end - pos}")
    (props_len,) = PROPERTIES_LENGTH.unpack_from(buf, t_end)
    if props_len < 0:
        raise RecordError(RECORD_LENGTH_MISMATCH, f"properties length field reads {props_len}: a record's "
                          f"properties have at most {MAX_PROPERTIES_LENGTH} bytes")
    if props_at + props_len != end:
        raise RecordError(RECORD_LENGTH_MISMATCH,
                          f"field lengths add up to {props_at + props_len - pos} bytes, totalSize says {end - pos}")
    return t, t_end, props_at


def decode_message(buf, pos: int, commit_log_offset: int, limit: int, *, check_crc: bool = True,
                   path: str | None = None, file_position: int | None = None) -> Message:
    """Decode the message record at ``buf[pos:]``; raise RecordError when it is not one.

    ``limit`` is where the readable bytes end (the end of the file in ``buf``). The caller
    has checked the magic code and that totalSize fits.
    """
    prefix = PREFIX.unpack_from(buf, pos)  # the header's first fields: HEADER_FIELDS' indices hold
    total_size = prefix[_STORE_SIZE]
    sys_flag = prefix[_SYS_FLAG]
    k = (sys_flag >> 4) & 3
    end = pos + total_size
    p = pos + HEADERS[k].size
    if p > end:
        raise RecordError(RECORD_LENGTH_MISMATCH, f"totalSize {total_size} is too small for the record header")
    h = HEADERS[k].unpack_from(buf, pos)
    body_len = h[_BODY_LENGTH]
    if body_len < 0 or p + body_len > end:
        raise RecordError(RECORD_LENGTH_MISMATCH, f"bodyLength {body_len} does not fit in totalSize {total_size}")
    body = bytes(buf[p:p + body_len])
    t, t_end, props_at = read_tail(buf, pos, p + body_len, end, h[_MAGIC_CODE])
    topic_raw = bytes(buf[t:t_end])
    props_raw = bytes(buf[props_at:end])
    topic = _TOPICS.get(topic_raw)
    topic_ok = True
    if topic is None:
        topic, topic_ok = _decode_topic(topic_raw)
    msg = Message.__new__(Message)
    (msg.store_size, msg.magic_code, msg.body_crc, msg.queue_id, msg.flag, msg.queue_offset,
     msg.physical_offset, msg.sys_flag, msg.born_timestamp, msg.born_ip, msg.born_port, msg.store_timestamp,
     msg.store_ip, msg.store_port, msg.reconsume_times, msg.prepared_transaction_offset, _) = h
    msg.commit_log_offset = commit_log_offset
    msg.body = body
    msg.topic = topic
    msg.topic_utf8_ok = topic_ok
    msg.properties_raw = props_raw
    msg._properties = None
    msg._properties_utf8_ok = None
    msg.path = path
    msg.position = file_position
    msg.body_crc_ok = None
    msg.property_crc_ok = None
    if check_crc:
        crc32 = crc_module.fast_crc32
        msg.body_crc_ok = (crc32(body) & JAVA_CRC_MASK) == h[_BODY_CRC] if body_len else h[_BODY_CRC] == 0
        stored = stored_record_crc(props_raw)
        if stored is not None:
            msg.property_crc_ok = (crc32(memoryview(buf)[pos:end - CRC32_RESERVED_LEN]) & JAVA_CRC_MASK) == stored
    return msg


def decode_run(buf: bytes, i: int, stop: int, offset0: int, position0: int, path: str | None,
               check_crc: bool, out: list, count: int) -> int:
    """Append to ``out`` up to ``count`` messages of ``buf`` from index ``i`` on; return where it stopped.

    Takes only records that are whole in ``buf``, start before index ``stop`` and whose
    lengths add up; at anything else it stops and leaves that record to the caller's
    careful path (:func:`decode_message` and the scanner's damage handling), so what it
    takes is exactly what decode_message would give. The index returned is that of the
    first record not taken. ``offset0`` and ``position0`` are the commit log offset and
    the file position of ``buf[0]``. ``buf`` must be bytes (slices of it are the
    Message's bytes). Filling a list, not yielding, saves a generator switch per message.
    """
    unpack_v4 = HEADERS[0].unpack_from
    header_v4 = HEADERS[0].size
    headers = HEADERS
    new = object.__new__
    message = Message
    topics = _TOPICS
    crc32 = crc_module.fast_crc32
    mask = JAVA_CRC_MASK
    v1, v2 = MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2
    min_length = MIN_MESSAGE_LENGTH
    hosts_v6 = _HOSTS_V6
    limit = len(buf)
    max_v1, max_v2, max_props = MAX_TOPIC_LENGTH_V1, MAX_TOPIC_LENGTH_V2, MAX_PROPERTIES_LENGTH
    reserved = CRC32_RESERVED_LEN
    separator = _SEPARATOR
    crc_head = CRC32_ENTRY_HEAD
    from_digits = crc32_from_digits
    digits_back = CRC32_DIGITS + 1  # the digits, then the closing separator
    view = None
    append = out.append
    try:
        while i < stop and count > 0:
            h = unpack_v4(buf, i)  # HEADER_FIELDS: totalSize 0, magic 1, bodyCRC 2, sysFlag 7, bodyLength 16
            total = h[0]
            end = i + total
            if total < min_length or end > limit:
                return i
            if h[7] & hosts_v6:
                k = (h[7] >> 4) & 3
                h = headers[k].unpack_from(buf, i)
                p = i + headers[k].size
            else:
                p = i + header_v4
            body_end = p + h[16]
            if body_end < p:
                return i
            magic = h[1]
            # the tail as read_tail reads it: TOPIC_LENGTHS and PROPERTIES_LENGTH, as bytes
            if magic == v1:
                t = body_end + 1
                topic_len = buf[body_end]
                if topic_len > max_v1:
                    return i
            elif magic == v2:
                t = body_end + 2
                topic_len = (buf[body_end] << 8) | buf[body_end + 1]
                if topic_len > max_v2:
                    return i
            else:
                return i
            t_end = t + topic_len
            props_at = t_end + 2
            # the lengths must add up exactly: then every field lies inside the record
            props_len = end - props_at
            if props_len > max_props or ((buf[t_end] << 8) | buf[t_end + 1]) != props_len:
                return i
            m = new(message)
            (m.store_size, m.magic_code, m.body_crc, m.queue_id, m.flag, m.queue_offset, m.physical_offset,
             m.sys_flag, m.born_timestamp, m.born_ip, m.born_port, m.store_timestamp, m.store_ip, m.store_port,
             m.reconsume_times, m.prepared_transaction_offset, _) = h
            m.body = body = buf[p:body_end]
            raw = buf[t:t_end]
            topic = topics.get(raw)
            if topic is None:
                topic, m.topic_utf8_ok = _decode_topic(raw)
            else:
                m.topic_utf8_ok = True
            m.topic = topic
            m.properties_raw = praw = buf[props_at:end]
            m._properties = None
            m._properties_utf8_ok = None
            m.commit_log_offset = offset0 + i
            m.position = position0 + i
            m.path = path
            if check_crc:
                m.body_crc_ok = (crc32(body) & mask) == h[2] if body_end > p else h[2] == 0
                if props_len >= reserved and praw[-1] == separator and praw.startswith(
                        crc_head, props_len - reserved):
                    # stored_record_crc's reading, its head and separator checked just above
                    stored = from_digits(praw[-digits_back:-1].decode("ascii", "replace"))
                    if stored is None:
                        m.property_crc_ok = None
                    else:
                        if view is None:
                            view = memoryview(buf)
                        m.property_crc_ok = (crc32(view[i:end - reserved]) & mask) == stored
                else:
                    m.property_crc_ok = None
            else:
                m.body_crc_ok = None
                m.property_crc_ok = None
            append(m)
            count -= 1
            i = end
    except (struct.error, IndexError):
        pass
    return i
