"""A decoded commit log message (the broker's MessageExt) and the fast decoder.

The decoder reads with ``struct`` formats derived from ``formats/commitlog.py``
(MessagePrefix and MessageHosts); tests assert it agrees with the construct schema on
every fixture record.

Speed (issue 2): each header field is a slot of its own, filled from one
``unpack_from`` of a derived struct (prefix and hosts joined), so reading a field costs
a slot read, not a Python call. Properties are parsed into a dict on first access, most
strings in a few C-level calls. :func:`decode_run` decodes the clean records of a
buffer in one loop and leaves anything doubtful to :func:`decode_message`. CRCs are
computed by whatever :mod:`rmqtool.store.crc` chose (ISA-L when installed).
"""
from __future__ import annotations

import itertools
import struct

import construct as cs

from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, MIN_MESSAGE_LENGTH,
                                       MessageHosts, MessagePrefix, message_length)
from rmqtool.formats.derive import field_names, struct_format, struct_of
from rmqtool.formats.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, transaction_type
from rmqtool.store import compression
from rmqtool.store import crc as crc_module
from rmqtool.store.crc import JAVA_CRC_MASK
from rmqtool.store.hosts import format_host
from rmqtool.store.msgid import create_message_id

PREFIX = struct_of(MessagePrefix)
HOSTS = tuple(struct_of(h) for h in MessageHosts)
PREFIX_SIZE = PREFIX.size


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
_CRC32_HEAD = (props.PROPERTY_CRC32 + props.NAME_VALUE_SEPARATOR).encode()
_SEPARATOR = ord(props.PROPERTY_SEPARATOR)
_SEPARATOR_CHAR = props.PROPERTY_SEPARATOR
_NAME_VALUE_CHAR = props.NAME_VALUE_SEPARATOR
# properties' fast path: map(str.split, entries, _NAME_VALUE_REPEAT) splits every entry in C
_STR_SPLIT = str.split
_NAME_VALUE_REPEAT = itertools.repeat(_NAME_VALUE_CHAR)
# crc_run indexes the CHECKED tuple with literals; they must be these.
assert CHECKED_FIELDS.index("store_size") == 0 and CHECKED_FIELDS.index("magic_code") == 1
assert CHECKED_FIELDS.index("body_crc") == 2 and CHECKED_FIELDS.index("sys_flag") == 3
assert CHECKED_FIELDS.index("body_length") == 4


def _well_formed_properties(raw: bytes) -> dict:
    """The properties of the common, well-formed string, in a few C-level calls; ValueError otherwise.

    Well-formed: valid UTF-8, every entry exactly one ``name \\x01 value`` with neither
    empty, one trailing separator at most (5.x). Then the broker's reading is plain
    splitting. An entry with no separator or two gives a list of 1 or 3 items, which
    dict() refuses (ValueError), as an empty name or value is refused below: the caller
    then takes the careful path (:func:`parse_properties`).
    """
    text = raw.decode("utf-8")  # UnicodeDecodeError is a ValueError
    if text[-1:] == _SEPARATOR_CHAR:
        text = text[:-1]
    p = dict(map(_STR_SPLIT, text.split(_SEPARATOR_CHAR), _NAME_VALUE_REPEAT))
    if "" in p or "" in p.values():
        raise ValueError("an empty name or value")
    return p


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
            raw = self.properties_raw
            try:
                p = _well_formed_properties(raw)
                self._properties_utf8_ok = True
            except ValueError:  # UnicodeDecodeError too
                p, self._properties_utf8_ok = parse_properties(raw)
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


def _parse_properties_slow(text: str) -> dict:
    result = {}
    for part in text.split(props.PROPERTY_SEPARATOR):
        kv = part.find(props.NAME_VALUE_SEPARATOR)
        if 0 < kv < len(part) - 1:
            result[part[:kv]] = part[kv + 1:]
    return result


def parse_properties(raw: bytes) -> tuple[dict, bool]:
    """(the broker's view of the properties, whether the bytes were valid UTF-8).

    Entries without a name or a value are skipped and the last duplicate wins, as in
    MessageDecoder.string2messageProperties.
    """
    try:
        return _well_formed_properties(raw), True
    except ValueError:  # not well-formed (UnicodeDecodeError too): the careful way
        pass
    try:
        text = raw.decode("utf-8")
        ok = True
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")  # as Java's decoder does
        ok = False
    return _parse_properties_slow(text), ok


def property_crc(props_raw: bytes) -> int | None:
    """The record CRC stored in a trailing ``__CRC32#`` entry (5.x), or None when there is none."""
    if len(props_raw) < props.CRC32_RESERVED_LEN or props_raw[-1] != _SEPARATOR:
        return None
    tail = props_raw[-props.CRC32_RESERVED_LEN:]
    if not tail.startswith(_CRC32_HEAD):
        return None
    return props.crc32_from_digits(tail[len(_CRC32_HEAD):-1].decode("ascii", "replace"))


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


def decode_message(buf, pos: int, commit_log_offset: int, limit: int, *, check_crc: bool = True,
                   path: str | None = None, file_position: int | None = None) -> Message:
    """Decode the message record at ``buf[pos:]``; raise RecordError when it is not one.

    ``limit`` is where the readable bytes end (the end of the file in ``buf``). The caller
    has checked the magic code and that totalSize fits.
    """
    (total_size, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
     born_ts) = PREFIX.unpack_from(buf, pos)
    k = (sys_flag >> 4) & 3
    end = pos + total_size
    p = pos + HEADERS[k].size
    if p > end:
        raise RecordError("recordLengthMismatch", f"totalSize {total_size} is too small for the record header")
    h = HEADERS[k].unpack_from(buf, pos)
    body_len = h[_BODY_LENGTH]
    if body_len < 0 or p + body_len + 1 > end:
        raise RecordError("recordLengthMismatch", f"bodyLength {body_len} does not fit in totalSize {total_size}")
    body = bytes(buf[p:p + body_len])
    p += body_len
    if magic == MESSAGE_MAGIC_CODE_V2:
        topic_len = (buf[p] << 8) | buf[p + 1]
        p += 2
    else:
        topic_len = buf[p]
        p += 1
    if p + topic_len + 2 > end:
        raise RecordError("recordLengthMismatch", f"topic length {topic_len} does not fit in totalSize {total_size}")
    topic_raw = bytes(buf[p:p + topic_len])
    p += topic_len
    props_len = (buf[p] << 8) | buf[p + 1]
    p += 2
    if p + props_len != end:
        expected = message_length(sys_flag, body_len, topic_len, props_len, magic)
        raise RecordError("recordLengthMismatch",
                          f"field lengths add up to {expected} bytes, totalSize says {total_size}")
    props_raw = bytes(buf[p:end])
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
        msg.body_crc_ok = (crc32(body) & JAVA_CRC_MASK) == body_crc if body_len else body_crc == 0
        stored = property_crc(props_raw)
        if stored is not None:
            msg.property_crc_ok = (crc32(memoryview(buf)[pos:end - props.CRC32_RESERVED_LEN])
                                   & JAVA_CRC_MASK) == stored
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
    reserved = props.CRC32_RESERVED_LEN
    separator = _SEPARATOR
    crc_head = _CRC32_HEAD
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
            if magic == v1:
                t = body_end + 1
                t_end = t + buf[body_end]
            elif magic == v2:
                t = body_end + 2
                t_end = t + ((buf[body_end] << 8) | buf[body_end + 1])
            else:
                return i
            props_at = t_end + 2
            # the lengths must add up exactly: then every field lies inside the record
            if props_at + ((buf[t_end] << 8) | buf[t_end + 1]) != end:
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
                if end - props_at >= reserved and praw[-1] == separator and praw.startswith(
                        crc_head, end - props_at - reserved):
                    stored = property_crc(praw)
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
