"""A decoded commit log message (the broker's MessageExt) and the fast decoder.

The decoder reads with ``struct`` formats derived from ``formats/commitlog.py``
(MessagePrefix and MessageHosts); tests assert it agrees with the construct schema on
every fixture record.
"""
from __future__ import annotations

import dataclasses

from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import (MESSAGE_MAGIC_CODE_V2, MessageHosts, MessagePrefix,
                                       message_length)
from rmqtool.formats.derive import struct_of
from rmqtool.formats.sysflag import transaction_type
from rmqtool.store import compression
from rmqtool.store.crc import crc32
from rmqtool.store.hosts import format_host
from rmqtool.store.msgid import create_message_id

PREFIX = struct_of(MessagePrefix)
HOSTS = tuple(struct_of(h) for h in MessageHosts)
PREFIX_SIZE = PREFIX.size


@dataclasses.dataclass(slots=True, eq=False)
class Message:
    commit_log_offset: int  # where the record lies (the file name offset + position)
    store_size: int
    magic_code: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int  # the record's own physicalOffset field
    sys_flag: int
    born_timestamp: int
    born_ip: bytes
    born_port: int
    store_timestamp: int
    store_ip: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_raw: bytes
    properties: dict
    path: str | None = None
    position: int | None = None  # byte position inside the segment file
    body_crc_ok: bool | None = None  # None: not checked
    property_crc_ok: bool | None = None  # None: no __CRC32# property, or not checked
    topic_utf8_ok: bool = True
    properties_utf8_ok: bool = True

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


def parse_properties(raw: bytes) -> tuple[dict, bool]:
    """(the broker's view of the properties, whether the bytes were valid UTF-8)."""
    try:
        text = raw.decode("utf-8")
        ok = True
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")  # as Java's decoder does
        ok = False
    result = {}
    for part in text.split(props.PROPERTY_SEPARATOR):
        kv = part.find(props.NAME_VALUE_SEPARATOR)
        if 0 < kv < len(part) - 1:
            result[part[:kv]] = part[kv + 1:]
    return result, ok


_CRC32_HEAD = (props.PROPERTY_CRC32 + props.NAME_VALUE_SEPARATOR).encode()


def property_crc(props_raw: bytes) -> int | None:
    """The record CRC stored in a trailing ``__CRC32#`` entry (5.x), or None when there is none."""
    if len(props_raw) < props.CRC32_RESERVED_LEN or props_raw[-1] != 2:
        return None
    tail = props_raw[-props.CRC32_RESERVED_LEN:]
    if not tail.startswith(_CRC32_HEAD):
        return None
    return props.crc32_from_digits(tail[len(_CRC32_HEAD):-1].decode("ascii", "replace"))


def decode_message(buf, pos: int, commit_log_offset: int, limit: int, *, check_crc: bool = True,
                   path: str | None = None, file_position: int | None = None) -> Message:
    """Decode the message record at ``buf[pos:]``; raise RecordError when it is not one.

    ``limit`` is where the readable bytes end (the end of the file in ``buf``). The caller
    has checked the magic code and that totalSize fits.
    """
    (total_size, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
     born_ts) = PREFIX.unpack_from(buf, pos)
    hosts = HOSTS[(sys_flag >> 4) & 3]
    end = pos + total_size
    p = pos + PREFIX_SIZE
    if p + hosts.size > end:
        raise RecordError("recordLengthMismatch", f"totalSize {total_size} is too small for the record header")
    (born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared,
     body_len) = hosts.unpack_from(buf, p)
    p += hosts.size
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
    properties, props_ok = parse_properties(props_raw)
    try:
        topic = topic_raw.decode("utf-8")
        topic_ok = True
    except UnicodeDecodeError:
        topic = topic_raw.decode("utf-8", "replace")
        topic_ok = False
    msg = Message(commit_log_offset, total_size, magic, body_crc, queue_id, flag, queue_offset,
                  physical_offset, sys_flag, born_ts, born_ip, born_port, store_ts, store_ip, store_port,
                  reconsume, prepared, body, topic, props_raw, properties, path, file_position,
                  None, None, topic_ok, props_ok)
    if check_crc:
        msg.body_crc_ok = crc32(body) == body_crc if body_len else body_crc == 0
        stored = property_crc(props_raw)
        if stored is not None:
            msg.property_crc_ok = crc32(memoryview(buf)[pos:end - props.CRC32_RESERVED_LEN]) == stored
    return msg
