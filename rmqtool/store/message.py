"""A decoded commit log message (the broker's MessageExt), and Messages built from the kernel's records.

The header is read with ``struct`` formats derived from ``formats/commitlog.py``
(MessagePrefix, MessageHosts, and the tail's TopicLength and PropertiesLength). Which
records are clean is decided in one place, :mod:`rmqtool.store.record_kernel`: a window's
records at once (:func:`build_messages` builds their Messages), one record at a time for
the careful path and random reads (:func:`decode_message`, :func:`read_tail`).

Speed (issue 2): each header field is a slot of its own, filled from one
``unpack_from`` of a derived struct (prefix and hosts joined), so reading a field costs
a slot read, not a Python call. Properties are parsed into a dict on first access, most
strings in a few C-level calls. CRCs are computed by whatever :mod:`rmqtool.store.crc`
chose (ISA-L when installed).

With the native kernel (issue 27), build_messages' loop and the properties getter run in C
(rmqtool/native/messages.c: slots filled through Message's slot descriptors, the header
read with the fields derived here from HEADERS); the loop below stays the definition and
takes whatever the kernel declines, and ``native.kernel = None`` runs it alone.
"""
from __future__ import annotations

import itertools
import re
import struct

import construct as cs

from rmqtool.findings import RECORD_LENGTH_MISMATCH, RECORD_MAGIC_INVALID
from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import (MESSAGE_MAGIC_CODE_V2, SYS_FLAG_AT, MessageHosts, MessagePrefix,
                                       PropertiesLength, TopicLength)
from rmqtool.formats.crc import CRC32_RESERVED_LEN, stored_record_crc
from rmqtool.formats.derive import field_names, struct_of
from rmqtool.formats.properties import bytes_to_properties
from rmqtool.formats.sysflag import transaction_type
from rmqtool import native
from rmqtool.store import compression
from rmqtool.store import crc as crc_module
from rmqtool.store.crc import JAVA_CRC_MASK
from rmqtool.store.hosts import format_host
from rmqtool.store.msgid import create_message_id
from rmqtool.store import record_rule
from rmqtool.store.record_rule import HEADER_SIZE_BY_HOSTS, HOSTS_SHIFT, record_refusal

PREFIX = struct_of(MessagePrefix)
HOSTS = tuple(struct_of(h) for h in MessageHosts)
PREFIX_SIZE = PREFIX.size
# totalSize and magicCode: all a header-only hop needs, and what a writer puts last
RECORD_START = record_rule.RECORD_START  # totalSize, magicCode: the readers and writers take it from here
_SYS_FLAG_FIELD = struct_of(cs.Struct(MessagePrefix.subcons[field_names(MessagePrefix).index("sys_flag")]))

# The variable tail's length fields, by magic code
TOPIC_LENGTHS = {magic: struct_of(cs.Struct("topic_length" / field)) for magic, field in TopicLength.items()}
PROPERTIES_LENGTH = struct_of(cs.Struct("properties_length" / PropertiesLength))


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


_BODY_LENGTH = HEADER_FIELDS.index("body_length")
_BODY_CRC = HEADER_FIELDS.index("body_crc")


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
        # (with the native kernel, message_properties stands in for this getter and calls it
        # for what it declines: set after the class)
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

    Dispatch's check_message reads the header itself; the rest is the one rule
    (:func:`rmqtool.store.record_kernel.record_parts`) on this record.
    """
    if magic not in TOPIC_LENGTHS:
        raise RecordError(RECORD_MAGIC_INVALID, f"magic code 0x{magic:08X} is not a message record's")
    sys_flag = sys_flag_of(memoryview(buf)[pos:pos + PREFIX_SIZE])
    body_length = body_end - pos - HEADER_SIZE_BY_HOSTS[(sys_flag >> HOSTS_SHIFT) & 3]
    parts, refusal = record_refusal(buf, pos, end, sys_flag, magic, body_length)
    if refusal is not None:
        raise RecordError(refusal.finding_id, refusal.reason)
    return parts["topic_at"], parts["topic_end"], parts["properties_at"]


def decode_message(buf, pos: int, commit_log_offset: int, limit: int, *, check_crc: bool = True,
                   path: str | None = None, file_position: int | None = None) -> Message:
    """Decode the message record at ``buf[pos:]``; raise RecordError when it is not one.

    ``limit`` is where the readable bytes end (the end of the file in ``buf``). The caller
    has checked the magic code and that totalSize fits. The record is accepted by the one
    rule (:func:`rmqtool.store.record_kernel.record_parts`, on this one record) and built as
    :func:`build_messages` builds a window's records.
    """
    total_size, magic, _crc, _queue_id, _flag, _queue_offset, _physical, sys_flag, _born = PREFIX.unpack_from(buf, pos)
    if magic not in TOPIC_LENGTHS:
        raise RecordError(RECORD_MAGIC_INVALID, f"magic code 0x{magic:08X} is not a message record's")
    end = pos + total_size
    hosts = (sys_flag >> HOSTS_SHIFT) & 3
    header = HEADERS[hosts]
    if pos + HEADER_SIZE_BY_HOSTS[hosts] > end:
        raise RecordError(RECORD_LENGTH_MISMATCH, f"totalSize {total_size} is too small for the record header")
    h = header.unpack_from(buf, pos)
    parts, refusal = record_refusal(buf, pos, end, sys_flag, magic, h[_BODY_LENGTH])
    if refusal is not None:
        raise RecordError(refusal.finding_id, refusal.reason)
    body = bytes(buf[parts["body_at"]:parts["body_end"]])
    topic_raw = bytes(buf[parts["topic_at"]:parts["topic_end"]])
    props_raw = bytes(buf[parts["properties_at"]:end])
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
        body_crc = h[_BODY_CRC]
        msg.body_crc_ok = (crc32(body) & JAVA_CRC_MASK) == body_crc if body else body_crc == 0
        stored = stored_record_crc(props_raw)
        if stored is not None:
            msg.property_crc_ok = (crc32(memoryview(buf)[pos:end - CRC32_RESERVED_LEN]) & JAVA_CRC_MASK) == stored
    return msg


# The native kernel's copy of build_messages' loop (rmqtool/native/messages.c): Message's
# slots and the header's fields, derived here from HEADERS and handed over once.
_NATIVE_FIXED_SLOTS = ("commit_log_offset", "body", "topic", "properties_raw", "_properties", "_properties_utf8_ok",
                       "path", "position", "body_crc_ok", "property_crc_ok", "topic_utf8_ok")
_NATIVE_KINDS = {**dict.fromkeys("bhilq", 0), **dict.fromkeys("BHILQ", 1), "s": 2}


def _native_header(header: struct.Struct) -> tuple | None:
    """(size, ((position, kind, width, slot descriptor or None), ...)) of a big-endian header
    struct, a field a Message slot named as HEADER_FIELDS names it; None when a code is not one
    the kernel reads."""
    if header.format[0] not in ">!":
        return None
    specs, fmt = [], header.format[0]
    for count, code in re.findall(r"(\d*)(\D)", header.format[1:]):
        if code not in _NATIVE_KINDS:
            return None
        repeat, width = (1, int(count or 1)) if code == "s" else (int(count or 1), struct.calcsize(fmt[0] + code))
        for _ in range(repeat):
            specs.append((struct.calcsize(fmt), _NATIVE_KINDS[code], width))
            fmt += f"{width}s" if code == "s" else code
    if len(specs) != len(HEADER_FIELDS) or struct.calcsize(fmt) != header.size:
        return None
    return header.size, tuple((*spec, Message.__dict__[name] if name in MESSAGE_HEADER_FIELDS else None)
                              for spec, name in zip(specs, HEADER_FIELDS))


def _set_native_layout() -> None:
    headers = tuple(_native_header(h) for h in HEADERS)
    if native.kernel is not None and None not in headers:  # else the kernel declines every window
        python_getter = Message.properties
        native.kernel.set_message_layout(Message, tuple(Message.__dict__[n] for n in _NATIVE_FIXED_SLOTS), headers,
                                         native, python_getter.fget)
        # the same getter in C: no Python frame a message for the full decode (it reads
        # native.kernel at each first access too, and calls the Python getter when it is None)
        Message.properties = property(native.kernel.message_properties, python_getter.fset, doc=python_getter.__doc__)


_set_native_layout()


def build_messages(buf, records, offset0: int, position0: int, path: str | None, check_crc: bool,
                   out: list | None = None, verdicts=None) -> list:
    """Messages of the clean records of a window (:class:`rmqtool.store.record_kernel.CleanRecords`),
    appended to ``out``; with ``check_crc`` their CRC verdicts are set
    (:func:`rmqtool.store.record_kernel.crc_verdicts`, or ``verdicts`` when the caller has them
    for these records: a window's, handed out by batch), else left None (not checked).

    ``offset0`` and ``position0`` are the commit log offset and the file position of ``buf[0]``.
    The records were accepted once by the kernel; here each is only cut out of ``buf``.
    """
    if out is None:
        out = []
    if not len(records):
        return out
    kernel = native.kernel
    if kernel is not None:  # the same Messages, built in C; None: declined, the loop below builds them
        crc = None
        if check_crc:
            if verdicts is None:
                from rmqtool.store.record_kernel import crc_verdicts  # numpy
                verdicts = crc_verdicts(buf, records)
            crc = (verdicts.body_ok, verdicts.has_entry, verdicts.entry_ok)
        if kernel.messages(buf, (records.position, records.end, records.hosts, records.body_at, records.body_end,
                                 records.topic_at, records.topic_end, records.properties_at),
                           offset0, position0, path, crc, out, _TOPICS, _decode_topic) is not None:
            return out
    if type(buf) is not bytes:  # a reused read buffer: the Message's bytes must not change under it
        first, last = int(records.position[0]), int(records.end[-1])
        buf = bytes(buf[first:last])
        records = records.shifted(-first)
        offset0 += first
        position0 += first
    if check_crc:
        if verdicts is None:
            from rmqtool.store.record_kernel import crc_verdicts  # numpy
            verdicts = crc_verdicts(buf, records)
        body_oks = verdicts.body_ok.tolist()
        entry_states = itertools.repeat(None)  # no __CRC32# entry (4.x): not checked
        if verdicts.has_entry.any():
            entry_states = [ok if has else None for ok, has in zip(verdicts.entry_ok.tolist(),
                                                                   verdicts.has_entry.tolist())]
    else:
        body_oks = entry_states = itertools.repeat(None)
    headers = HEADERS
    new = object.__new__
    message = Message
    topics = _TOPICS
    append = out.append
    for pos, end, hosts, body_at, body_end, topic_at, topic_end, props_at, body_ok, entry_ok in zip(
            records.position.tolist(), records.end.tolist(), records.hosts.tolist(), records.body_at.tolist(),
            records.body_end.tolist(), records.topic_at.tolist(), records.topic_end.tolist(),
            records.properties_at.tolist(), body_oks, entry_states):
        m = new(message)
        (m.store_size, m.magic_code, m.body_crc, m.queue_id, m.flag, m.queue_offset, m.physical_offset,
         m.sys_flag, m.born_timestamp, m.born_ip, m.born_port, m.store_timestamp, m.store_ip, m.store_port,
         m.reconsume_times, m.prepared_transaction_offset, _) = headers[hosts].unpack_from(buf, pos)
        m.body = buf[body_at:body_end]
        raw = buf[topic_at:topic_end]
        topic = topics.get(raw)
        if topic is None:
            topic, m.topic_utf8_ok = _decode_topic(raw)
        else:
            m.topic_utf8_ok = True
        m.topic = topic
        m.properties_raw = buf[props_at:end]
        m._properties = None
        m._properties_utf8_ok = None
        m.commit_log_offset = offset0 + pos
        m.position = position0 + pos
        m.path = path
        m.body_crc_ok = body_ok
        m.property_crc_ok = entry_ok
        append(m)
    return out
