"""Encoding messages into commit log records, byte for byte as the 4.9.x broker does.

What lies between a producer and the bytes of ``CommitLog.DefaultAppendMessageCallback.doAppend``:

* the producer (``Message``, ``MessageClientIDSetter``, ``DefaultMQProducerImpl``): property
  map, UNIQ_KEY, body compression, transaction flag: :func:`producer_message`;
* the broker's ``SendMessageProcessor``: ``CLUSTER`` added, ``WAIT`` left out of the stored
  string: :func:`broker_inner`, giving a :class:`MessageInner` (``MessageExtBrokerInner``);
* ``CommitLog.asyncPutMessage`` + ``MessageExtEncoder``: store timestamp, body CRC, delay
  redirection to ``SCHEDULE_TOPIC_XXXX``, the V6 sysFlag bits, the record layout:
  :class:`Encoder`.

The stored properties string is ``MessageDecoder.messageProperties2String`` over a Java
``HashMap``, so its order is the HashMap's iteration order (bucket of the spread key hash,
then insertion order), which depends on the table size the map grew to. :class:`PropertyMap`
keeps what that order needs. Record struct formats are derived from ``formats/commitlog.py``.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import itertools
import operator
import os
import socket
import struct
import threading
import time
from typing import Iterable

import construct as cs

from rmqtool.errors import UsageError
from rmqtool.store.paths import names_a_directory
from rmqtool.formats import properties as props
from rmqtool.formats import sysflag
from rmqtool.formats.batch import (BATCH_MESSAGE_BODY_CRC, BATCH_MESSAGE_MAGIC_CODE, MAX_BATCH_PROPERTIES_LENGTH,
                                   BatchMessageHead, BatchPropertiesLength, batch_message_size)
from rmqtool.formats.commitlog import (MAX_PROPERTIES_LENGTH, MAX_TOPIC_LENGTH_V1, MAX_TOPIC_LENGTH_V2,
                                       MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, PHYSICAL_OFFSET_AT, QUEUE_OFFSET_AT,
                                       STORE_TIMESTAMP_AT, MessageHosts, MessagePrefix, MessageTopic)
from rmqtool.formats.crc import CRC32_RESERVED_LEN, body_crc, fill_crc32_entry, reserve_crc32_entry
from rmqtool.formats.derive import field_names, struct_format, struct_of
from rmqtool.formats.indexfile import java_string_hash
from rmqtool.formats.msgid import UniqKeyFixed, UniqKeyPerMessage
from rmqtool.dispatch.rules import (RMQ_SYS_SCHEDULE_TOPIC, TAGS_CODES, DelayLevels,  # noqa: F401
                                    delay_level_of, tags_code)
from rmqtool.store.compression import compress as compress_body
from rmqtool.store import crc as _crc
from rmqtool.store.hosts import parse_host
from rmqtool.store.message import PROPERTIES_LENGTH, RECORD_START

# TopicValidator / MessageConst names the encoder acts on
DEFAULT_CLUSTER = "DefaultCluster"  # BrokerConfig.brokerClusterName default
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # MessageStoreConfig.maxMessageSize (the body limit)
MAX_MESSAGE_SIZE_RESERVE = 64 * 1024  # MessageExtEncoder: room for everything but the body
COMPRESS_MSG_BODY_OVER = 4 * 1024  # DefaultMQProducer.compressMsgBodyOverHowmuch
COMPRESS_LEVEL = 5  # DefaultMQProducerImpl.compressLevel
_INT32 = 0xFFFFFFFF

Host = tuple  # (address bytes, port)


# --- Java values the bytes depend on -------------------------------------------------------

def _signed32(value: int) -> int:
    value &= _INT32
    return value - (1 << 32) if value & 0x80000000 else value


def utf16_length(text: str) -> int:
    """Java's String.length(): UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def java_utf8(text: str) -> bytes:
    """String.getBytes(UTF_8): unpaired surrogates become '?', as Java's encoder does."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


# --- java.util.HashMap iteration order --------------------------------------------------------

_SPREAD_CACHE: dict[str, int] = {}


def _spread_hash(name: str) -> int:
    """HashMap.hash: the key's hashCode with its high half folded into the low half."""
    h = _SPREAD_CACHE.get(name)
    if h is None:
        code = java_string_hash(name) & _INT32
        h = code ^ (code >> 16)
        if len(_SPREAD_CACHE) < 4096:
            _SPREAD_CACHE[name] = h
    return h


def hashmap_capacity(peak_size: int) -> int:
    """The table size of a default HashMap that once held ``peak_size`` entries.

    The table starts at 16 and doubles when size exceeds 0.75 x capacity; it never shrinks,
    so a map keeps the order its largest size gave it even after removals.
    """
    if peak_size <= 12:
        return 16
    capacity = 16
    while peak_size > capacity * 3 // 4:
        capacity <<= 1
    return capacity


_ORDER_CACHE: dict[tuple, tuple] = {}


def java_order(names: Iterable[str], capacity: int) -> tuple:
    """Names in HashMap iteration order: by bucket, then insertion order within a bucket.

    (Bins of more than 8 entries become trees in Java; property maps never get there.)
    """
    names = tuple(names)
    key = (names, capacity)
    order = _ORDER_CACHE.get(key)
    if order is None:
        mask = capacity - 1
        order = tuple(sorted(names, key=lambda n: _spread_hash(n) & mask))  # sort is stable
        if len(_ORDER_CACHE) < 4096:
            _ORDER_CACHE[key] = order
    return order


class PropertyMap(dict):
    """A message's property map: a dict in insertion order that also remembers the largest
    size it reached, which fixes the Java HashMap table size and so the string's order."""

    __slots__ = ("peak",)

    def __init__(self, *args, peak: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.peak = max(peak, len(self))

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        if len(self) > self.peak:
            self.peak = len(self)

    def update(self, *args, **kwargs):
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def copy(self) -> "PropertyMap":
        return PropertyMap(self, peak=self.peak)

    @property
    def capacity(self) -> int:
        return hashmap_capacity(self.peak)

    def to_string(self) -> str:
        return properties_string(self, self.peak)


def properties_string(properties: dict, peak: int = 0) -> str:
    """MessageDecoder.messageProperties2String over a HashMap holding ``properties`` (in
    insertion order) whose largest size was ``peak``: 4.x drops the last separator."""
    if not properties:
        return ""
    size = len(properties)
    if type(properties) is PropertyMap and properties.peak > size:
        size = properties.peak
    if peak > size:
        size = peak
    names = tuple(properties)
    key = (names, size if size > 12 else 0)
    cached = _TEMPLATES.get(key)
    if cached is None:
        order = java_order(names, hashmap_capacity(size))
        template = _SEP.join(f"{n.replace('%', '%%')}{_KV}%s" for n in order)
        cached = (order, template)
        if len(_TEMPLATES) > 4096:
            _TEMPLATES.clear()
        _TEMPLATES[key] = cached
    order, template = cached
    values = tuple(map(properties.__getitem__, order))
    if None in values:  # Java skips null values
        return _SEP.join([f"{n}{_KV}{v}" for n, v in zip(order, values) if v is not None])
    return template % values


_TEMPLATES: dict[tuple, tuple] = {}
_SEP = props.PROPERTY_SEPARATOR
_KV = props.NAME_VALUE_SEPARATOR


def string_to_property_map(text: str) -> PropertyMap:
    """MessageDecoder.string2messageProperties into a map that keeps the string's order."""
    return PropertyMap(props.string_to_properties(text))


# --- UNIQ_KEY (MessageClientIDSetter) --------------------------------------------------------

def _local_ip() -> bytes:
    """What UtilAll.getIP would pick, roughly: a non-loopback address of this host, else a
    fake one made from the clock as createFakeIP does."""
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            addr = ipaddress.ip_address(info[4][0].split("%")[0])
            if not addr.is_loopback and not addr.is_link_local:
                return addr.packed
    except (OSError, ValueError):
        pass
    return struct.pack(">q", int(time.time() * 1000))[4:]


def _month_start_ms(now_ms: int) -> tuple[int, int]:
    """Start of the current and of the next month, local time, as Calendar computes them."""
    t = time.localtime(now_ms / 1000)
    start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
    year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
    nxt = time.mktime((year, month, 1, 0, 0, 0, 0, 0, -1))
    return int(start * 1000), int(nxt * 1000)


_UNIQ_KEY_PER_MESSAGE = struct_of(UniqKeyPerMessage)


class UniqIdGenerator:
    """MessageClientIDSetter.createUniqID: a fixed prefix (ip, pid, class loader hash), then
    the ms since the start of the month and a 16-bit counter, as upper-case hex; the layout
    is formats/msgid.py's UniqKey."""

    def __init__(self, ip: bytes | None = None, pid: int | None = None, loader_hash: int | None = None,
                 clock=None):
        ip = bytes(_local_ip() if ip is None else ip)
        pid = os.getpid() if pid is None else pid
        # Java's class loader identity hash: any int; a stable one per process will do.
        loader_hash = (id(UniqIdGenerator) >> 4) & 0x7FFFFFFF if loader_hash is None else loader_hash
        fixed = UniqKeyFixed.get(len(ip))
        if fixed is None:
            raise UsageError(f"a producer address has 4 or 16 bytes, not {len(ip)}")
        # (short) pid, as putShort writes it: its low 16 bits
        self.prefix = fixed.build(dict(ip=ip, pid=pid & 0xFFFF, class_loader_hash=_signed32(loader_hash))).hex().upper()
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._start, self._next_start = _month_start_ms(self._clock())

    def create(self) -> str:
        now = self._clock()
        if now >= self._next_start:
            with self._lock:
                self._start, self._next_start = _month_start_ms(now)
        diff = _signed32(now - self._start)
        if -1_000_000 < diff < 0:  # clock stepped back (NTP)
            diff = 0
        # putInt writes the int's 32 bits; the layout reads them unsigned
        return self.prefix + _UNIQ_KEY_PER_MESSAGE.pack(diff & 0xFFFFFFFF, next(self._counter) & 0xFFFF).hex().upper()


_default_uniq_ids: UniqIdGenerator | None = None


def create_uniq_id() -> str:
    global _default_uniq_ids
    if _default_uniq_ids is None:
        _default_uniq_ids = UniqIdGenerator()
    return _default_uniq_ids.create()


# --- body compression as the Java client does it ---------------------------------------------

CODEC_FLAGS = {"zlib": sysflag.COMPRESSION_ZLIB_TYPE, "lz4": sysflag.COMPRESSION_LZ4_TYPE,
               "zstd": sysflag.COMPRESSION_ZSTD_TYPE}


# --- the broker's message objects ------------------------------------------------------------

def as_host(value) -> Host:
    """'ip:port', '[v6]:port' or an (address bytes, port) pair -> (address bytes, port)."""
    if isinstance(value, tuple):
        return value
    return parse_host(value)


@dataclasses.dataclass(slots=True)
class MessageInner:
    """MessageExtBrokerInner: one message as the store receives it.

    ``properties`` is the broker's property map in insertion order (a plain dict, or a
    :class:`PropertyMap` that remembers the table size). ``properties_string`` is what gets
    stored (bytes: stored as they are); None means ``messageProperties2String(properties)``. The map decides the delay
    redirect and the dispatch values (TAGS, KEYS, UNIQ_KEY), so it should hold what the
    string holds (the broker's map may also hold WAIT, which the string leaves out). ``store_host`` None and
    ``store_timestamp`` None mean the store's own host and clock. The body CRC, the V6 bits
    and the queue offset are the store's to set. ``prop_crc``: the record ends with a
    ``__CRC32#`` entry over its bytes as placed, as 5.x writes it with enabledAppendPropCRC
    (a trailing entry the stored properties already hold is replaced, never copied).
    """
    topic: str
    body: bytes = b""
    queue_id: int = 0
    flag: int = 0
    properties: dict = dataclasses.field(default_factory=dict)
    properties_string: str | bytes | None = None
    born_timestamp: int = 0
    born_host: Host = (b"\x7f\x00\x00\x01", 0)
    store_host: Host | None = None
    reconsume_times: int = 0
    sys_flag: int = 0
    prepared_transaction_offset: int = 0
    store_timestamp: int | None = None
    prop_crc: bool = False

    @property
    def tags(self) -> str | None:
        return self.properties.get(props.PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(props.PROPERTY_KEYS)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


@dataclasses.dataclass(slots=True)
class BatchItem:
    """One message inside a batch body (the fields MessageDecoder.encodeMessage keeps)."""
    body: bytes = b""
    flag: int = 0
    properties: dict = dataclasses.field(default_factory=dict)
    properties_string: str | None = None

    def stored_properties_string(self) -> str:
        if self.properties_string is not None:
            return self.properties_string
        return properties_string(self.properties)


@dataclasses.dataclass(slots=True)
class MessageBatch:
    """MessageExtBatch: a batch body (MessageDecoder.encodeMessages) plus the batch's own
    fields; every inner message becomes its own record. ``properties`` is the batch's map
    (the broker adds CLUSTER; the producer's WAIT stays in it)."""
    topic: str
    body: bytes
    queue_id: int = 0
    flag: int = 0
    properties: dict = dataclasses.field(default_factory=dict)
    born_timestamp: int = 0
    born_host: Host = (b"\x7f\x00\x00\x01", 0)
    store_host: Host | None = None
    reconsume_times: int = 0
    sys_flag: int = 0
    store_timestamp: int | None = None


_BATCH_HEAD = struct_of(BatchMessageHead)  # totalSize, magic (0), bodyCRC (0), flag, bodyLength
_BATCH_PROPS_LEN = struct_of(BatchPropertiesLength)


def encode_batch_body(items: Iterable[BatchItem]) -> bytes:
    """MessageDecoder.encodeMessages: each item as totalSize, 0, 0, flag, body, properties."""
    parts = []
    head = _BATCH_HEAD.pack
    props_len = _BATCH_PROPS_LEN.pack
    for item in items:
        prop = java_utf8(item.stored_properties_string())
        if len(prop) > MAX_BATCH_PROPERTIES_LENGTH:
            raise UsageError(f"properties of a batch message are {len(prop)} bytes, more than "
                             f"{MAX_BATCH_PROPERTIES_LENGTH}")
        body = item.body
        parts.append(head(batch_message_size(len(body), len(prop)), BATCH_MESSAGE_MAGIC_CODE,
                          BATCH_MESSAGE_BODY_CRC, item.flag, len(body)))
        parts.append(body)
        parts.append(props_len(len(prop)))
        parts.append(prop)
    return b"".join(parts)


def decode_batch_body(body: bytes) -> list[tuple[int, bytes, bytes]]:
    """MessageDecoder.decodeMessages as the broker's batch encoder walks it: the inner
    messages as (flag, body, raw properties bytes); totalSize, magic and CRC are skipped."""
    out = []
    pos = 0
    end = len(body)
    head = _BATCH_HEAD.unpack_from
    head_size = _BATCH_HEAD.size
    props_len = _BATCH_PROPS_LEN.unpack_from
    while pos < end:
        if pos + head_size > end:
            raise UsageError(f"batch body ends inside a message header at byte {pos}")
        _size, _magic, _crc, flag, body_len = head(body, pos)
        p = pos + head_size
        if body_len < 0 or p + body_len + 2 > end:
            raise UsageError(f"batch message at byte {pos}: body length {body_len} runs past the batch")
        inner = body[p:p + body_len]
        p += body_len
        (prop_len,) = props_len(body, p)
        p += 2
        if prop_len < 0 or p + prop_len > end:
            raise UsageError(f"batch message at byte {pos}: properties length {prop_len} runs past the batch")
        out.append((flag, inner, body[p:p + prop_len]))
        pos = p + prop_len
    return out


# --- producer + SendMessageProcessor -----------------------------------------------------------

def producer_properties(*, tags: str | None = None, keys: str | Iterable[str] | None = None,
                        user_properties: dict | None = None, wait_store_msg_ok: bool = True,
                        delay_level: int = 0, transaction_prepared: bool = False,
                        producer_group: str | None = None, uniq_key: str | None = None,
                        generate_uniq_key: bool = True, uniq_ids: UniqIdGenerator | None = None) -> PropertyMap:
    """A producer Message's property map, filled in the order the client fills it:
    the constructor (TAGS, KEYS, WAIT), putUserProperty, setDelayTimeLevel, the transaction
    producer (TRAN_MSG, PGROUP), then MessageClientIDSetter.setUniqID at send time."""
    m = PropertyMap()
    if tags:
        m[props.PROPERTY_TAGS] = tags
    if keys:
        m[props.PROPERTY_KEYS] = keys if isinstance(keys, str) else props.KEY_SEPARATOR.join(keys)
    m[props.PROPERTY_WAIT_STORE_MSG_OK] = "true" if wait_store_msg_ok else "false"
    for name, value in (user_properties or {}).items():
        m[name] = value
    if delay_level > 0:
        m[props.PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)
    if transaction_prepared:
        m[props.PROPERTY_TRANSACTION_PREPARED] = "true"
    if producer_group is not None:
        m[props.PROPERTY_PRODUCER_GROUP] = producer_group
    if uniq_key is not None:
        m[props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq_key
    elif generate_uniq_key and props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in m:
        m[props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = (uniq_ids.create() if uniq_ids else create_uniq_id())
    return m


def broker_inner(topic: str, body: bytes, producer_map: dict, *, queue_id: int = 0, flag: int = 0,
                 sys_flag: int = 0, born_timestamp: int = 0, born_host=(b"\x7f\x00\x00\x01", 0),
                 store_host=None, reconsume_times: int = 0, cluster: str | None = DEFAULT_CLUSTER,
                 prepared_transaction_offset: int = 0) -> MessageInner:
    """SendMessageProcessor.sendMessage: the wire properties string (the producer map in its
    HashMap order) parsed into a new map, CLUSTER put, WAIT taken out for the stored string
    and put back (so a later re-serialisation, the delay redirect, keeps it)."""
    wire = properties_string(producer_map)
    m = string_to_property_map(wire)
    if cluster is not None:
        m[props.PROPERTY_CLUSTER] = cluster
    if props.PROPERTY_WAIT_STORE_MSG_OK in m:
        wait = m.pop(props.PROPERTY_WAIT_STORE_MSG_OK)
        stored = m.to_string()
        m[props.PROPERTY_WAIT_STORE_MSG_OK] = wait
    else:
        stored = m.to_string()
    return MessageInner(topic=topic, body=body, queue_id=queue_id, flag=flag, properties=m,
                        properties_string=stored, born_timestamp=born_timestamp, born_host=as_host(born_host),
                        store_host=None if store_host is None else as_host(store_host),
                        reconsume_times=reconsume_times, sys_flag=sys_flag,
                        prepared_transaction_offset=prepared_transaction_offset)


def producer_message(topic: str, body: bytes = b"", *, tags: str | None = None,
                     keys: str | Iterable[str] | None = None, user_properties: dict | None = None,
                     queue_id: int = 0, flag: int = 0, born_timestamp: int | None = None,
                     born_host="127.0.0.1:0", store_host=None, reconsume_times: int = 0,
                     delay_level: int = 0, transaction: str | None = None,
                     producer_group: str | None = None, uniq_key: str | None = None,
                     generate_uniq_key: bool = True, compress: str | None = "zlib",
                     compress_over: int = COMPRESS_MSG_BODY_OVER, cluster: str | None = DEFAULT_CLUSTER,
                     prepared_transaction_offset: int = 0,
                     uniq_ids: UniqIdGenerator | None = None) -> MessageInner:
    """A message as a 4.9.x producer sends it and SendMessageProcessor hands it to the store.

    ``transaction``: None, 'prepared' (a half message with TRAN_MSG and PGROUP, as the
    transaction producer sends it), 'commit' or 'rollback' (store-level end records; give
    ``prepared_transaction_offset``). Bodies of ``compress_over`` bytes or more are compressed
    with ``compress`` (None: never), setting COMPRESSED and the codec's type bits.
    """
    if transaction not in (None, "prepared", "commit", "rollback"):
        raise UsageError(f"transaction must be prepared, commit or rollback, not {transaction!r}")
    m = producer_properties(tags=tags, keys=keys, user_properties=user_properties, delay_level=delay_level,
                            transaction_prepared=transaction == "prepared", producer_group=producer_group,
                            uniq_key=uniq_key, generate_uniq_key=generate_uniq_key, uniq_ids=uniq_ids)
    sys_flag = 0
    if compress and len(body) >= compress_over:
        body = compress_body(body, compress)
        sys_flag |= sysflag.COMPRESSED_FLAG | CODEC_FLAGS[compress]
    sys_flag |= {None: 0, "prepared": sysflag.TRANSACTION_PREPARED_TYPE,
                 "commit": sysflag.TRANSACTION_COMMIT_TYPE,
                 "rollback": sysflag.TRANSACTION_ROLLBACK_TYPE}[transaction]
    return broker_inner(topic, body, m, queue_id=queue_id, flag=flag, sys_flag=sys_flag,
                        born_timestamp=int(time.time() * 1000) if born_timestamp is None else born_timestamp,
                        born_host=born_host, store_host=store_host, reconsume_times=reconsume_times,
                        cluster=cluster, prepared_transaction_offset=prepared_transaction_offset)


def producer_batch(topic: str, items: Iterable[BatchItem], *, queue_id: int = 0,
                   born_timestamp: int | None = None, born_host="127.0.0.1:0", store_host=None,
                   wait_store_msg_ok: bool = True, cluster: str | None = DEFAULT_CLUSTER) -> MessageBatch:
    """MessageBatch.generateFromList + encode() and SendMessageProcessor.sendBatchMessage:
    the batch map holds WAIT (from the first message) and the broker's CLUSTER."""
    wire = PropertyMap({props.PROPERTY_WAIT_STORE_MSG_OK: "true" if wait_store_msg_ok else "false"})
    m = string_to_property_map(properties_string(wire))
    if cluster is not None:
        m[props.PROPERTY_CLUSTER] = cluster
    return MessageBatch(topic=topic, body=encode_batch_body(items), queue_id=queue_id, properties=m,
                        born_timestamp=int(time.time() * 1000) if born_timestamp is None else born_timestamp,
                        born_host=as_host(born_host), store_host=None if store_host is None else as_host(store_host))


def batch_item(body: bytes = b"", *, tags: str | None = None, keys=None, user_properties: dict | None = None,
               flag: int = 0, uniq_key: str | None = None, generate_uniq_key: bool = True,
               wait_store_msg_ok: bool = True, uniq_ids: UniqIdGenerator | None = None) -> BatchItem:
    """A producer Message put in a batch (DefaultMQProducer.batch sets each UNIQ_KEY)."""
    m = producer_properties(tags=tags, keys=keys, user_properties=user_properties,
                            wait_store_msg_ok=wait_store_msg_ok, uniq_key=uniq_key,
                            generate_uniq_key=generate_uniq_key, uniq_ids=uniq_ids)
    return BatchItem(body=body, flag=flag, properties=m)


# --- the record -----------------------------------------------------------------------------

def _head_struct(hosts_index: int) -> struct.Struct:
    """Prefix + hosts of a record, in one struct derived from the schemas (up to bodyLength)."""
    return struct.Struct(struct_format(MessagePrefix) + struct_format(MessageHosts[hosts_index])[1:])


HEADS = tuple(_head_struct(i) for i in range(4))
_HEAD_FIELDS = field_names(MessagePrefix) + field_names(MessageHosts[0])
assert _HEAD_FIELDS[-1] == "body_length" and _HEAD_FIELDS[5:7] == ("queue_offset", "physical_offset")

_CLUSTER_SEP = props.PROPERTY_SEPARATOR.encode()


def _field_codes(st: struct.Struct) -> list[str]:
    """The struct codes of a derived struct, one per field (counts kept: '4s', 'q')."""
    codes, count = [], ""
    for ch in st.format.lstrip("<>=!@"):
        if ch.isdigit():
            count += ch
        else:
            codes.append(count + ch)
            count = ""
    return codes


def _fields_struct(schema, *names: str) -> struct.Struct:
    """A struct of some adjacent fields of a schema, derived from the schema."""
    subcons = {sub.name: sub for sub in schema.subcons}
    return struct_of(cs.Struct(*(subcons[n] for n in names)))


RECORD_PLACE = _fields_struct(MessagePrefix, "queue_offset", "physical_offset")  # written by doAppend, at QUEUE_OFFSET_AT
RECORD_TIME = _fields_struct(MessageHosts[0], "store_timestamp")  # at STORE_TIMESTAMP_AT
# RECORD_START (totalSize, magic) is written last: then the record exists
_QQ, _Q, _START = RECORD_PLACE, RECORD_TIME, RECORD_START
assert PHYSICAL_OFFSET_AT == QUEUE_OFFSET_AT + RECORD_PLACE.size // 2  # RECORD_PLACE writes both at QUEUE_OFFSET_AT


# --- what prepare packs per message ------------------------------------------------------------
# The head with the fields doAppend writes later (totalSize, magic, queueOffset, physicalOffset)
# as pad bytes, and the host fields (born host and port, storeTimestamp, store host and port)
# as one bytes field made once per host pair: 9 values to pack instead of 17. Both are derived
# from the head's own codes, so the layout stays the schema's.

_PLACED_LATER = ("total_size", "magic_code", "queue_offset", "physical_offset")
_HOST_BLOCK = ("born_host", "born_port", "store_timestamp", "store_host", "store_port")


def _packing_structs(head: struct.Struct) -> tuple[struct.Struct, struct.Struct]:
    """(the head as prepare packs it, the host block) for one of :data:`HEADS`."""
    order = head.format[0]
    codes = dict(zip(_HEAD_FIELDS, _field_codes(head), strict=True))
    block = struct.Struct(order + "".join(codes[n] for n in _HOST_BLOCK))
    out = []
    for name in _HEAD_FIELDS:
        if name in _PLACED_LATER:
            out.append(f"{struct.calcsize(order + codes[name])}x")
        elif name == _HOST_BLOCK[0]:
            out.append(f"{block.size}s")
        elif name not in _HOST_BLOCK:
            out.append(codes[name])
    packing = struct.Struct(order + "".join(out))
    assert packing.size == head.size
    return packing, block


PACKING_HEADS = tuple(_packing_structs(h) for h in HEADS)  # by (sysFlag >> 4) & 3

_PROP_LEN_FIELDS: dict[int, bytes] = {}  # propertiesLength -> its two bytes


def _prop_len_field(length: int) -> bytes:
    """The propertiesLength field (at most MAX_PROPERTIES_LENGTH + 1 of them: lengths are checked first)."""
    field = _PROP_LEN_FIELDS[length] = PROPERTIES_LENGTH.pack(length)
    return field


class PreparedRecord(tuple):
    """A message encoded but not placed: what CommitLog holds after MessageExtEncoder.encode.

    ``record`` is the whole record with totalSize, magic, queueOffset, physicalOffset and
    storeTimestamp still zero; doAppend copies it in one piece, writes the place and time,
    then totalSize and ``magic_code`` last, in the put lock (:meth:`write_into`). The rest is
    what the store needs around it: where it goes, and the dispatch values of
    checkMessageAndReturnSize.
    A tuple, because the append path makes one per message and unpacks it at once.
    """

    __slots__ = ()
    FIELDS = ("topic", "queue_id", "record", "total_size", "sys_flag", "store_timestamp_at", "store_timestamp",
              "tags_code", "keys", "uniq_key", "delay_level", "store_ip", "store_port", "gets_queue_offset",
              "magic_code", "prop_crc")

    topic = property(operator.itemgetter(0))
    queue_id = property(operator.itemgetter(1))
    record = property(operator.itemgetter(2))
    total_size = property(operator.itemgetter(3))
    sys_flag = property(operator.itemgetter(4))
    store_timestamp_at = property(operator.itemgetter(5))
    store_timestamp = property(operator.itemgetter(6))
    tags_code = property(operator.itemgetter(7))
    keys = property(operator.itemgetter(8))
    uniq_key = property(operator.itemgetter(9))
    delay_level = property(operator.itemgetter(10))  # > 0: a SCHEDULE_TOPIC_XXXX record; tagsCode = deliver time
    store_ip = property(operator.itemgetter(11))
    store_port = property(operator.itemgetter(12))
    gets_queue_offset = property(operator.itemgetter(13))  # prepared and rollback records: offset 0, no CQ unit
    magic_code = property(operator.itemgetter(14))
    prop_crc = property(operator.itemgetter(15))  # its last 20 bytes: a __CRC32# entry to fill once placed

    def write_into(self, buf, pos: int, queue_offset: int, physical_offset: int, store_timestamp: int) -> None:
        write_record(buf, pos, self[2], self[14], self[5], queue_offset, physical_offset, store_timestamp, self[15])

    def to_bytes(self, queue_offset: int, physical_offset: int, store_timestamp: int) -> bytes:
        out = bytearray(self[3])
        self.write_into(out, 0, queue_offset, physical_offset, store_timestamp)
        return bytes(out)

    @property
    def transaction_type(self) -> int:
        return self[4] & sysflag.TRANSACTION_MASK


_GETS_QUEUE_OFFSET = (sysflag.TRANSACTION_NOT_TYPE, sysflag.TRANSACTION_COMMIT_TYPE)
_TRAN_MASK = sysflag.TRANSACTION_MASK
_BORN_V6 = sysflag.BORNHOST_V6_FLAG
_STORE_V6 = sysflag.STOREHOSTADDRESS_V6_FLAG
_DELAY = props.PROPERTY_DELAY_TIME_LEVEL
_TAGS = props.PROPERTY_TAGS
_KEYS = props.PROPERTY_KEYS
_UNIQ_KEY = props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_fast_crc32 = _crc.fast_crc32  # the same CRC-32 unmasked, as rmqtool.store.crc picks it for hot loops
_CRC_MASK = _crc.JAVA_CRC_MASK
_tuple_new = tuple.__new__


def prepared_record(topic: str, queue_id: int, record: bytes, sys_flag: int, store_timestamp: int | None,
                    tags_code: int, keys: str | None, uniq_key: str | None, delay_level: int,
                    store_ip: bytes, store_port: int, prop_crc: bool = False) -> PreparedRecord:
    """A PreparedRecord of a whole encoded ``record`` (its totalSize and magic are kept apart)."""
    magic = _START.unpack_from(record)[1]
    record = bytes(_START.size) + record[_START.size:]
    return _tuple_new(PreparedRecord, (topic, queue_id, record, len(record), sys_flag,
                                       STORE_TIMESTAMP_AT[(sys_flag >> 4) & 3], store_timestamp, tags_code, keys,
                                       uniq_key, delay_level, store_ip, store_port,
                                       (sys_flag & sysflag.TRANSACTION_MASK) in _GETS_QUEUE_OFFSET, magic,
                                       prop_crc))


def write_record(buf, pos: int, record: bytes, magic_code: int, store_timestamp_at: int, queue_offset: int,
                 physical_offset: int, store_timestamp: int, prop_crc: bool = False) -> None:
    """Write a prepared record at ``buf[pos:]`` with its place and time (and, ``prop_crc``,
    its ``__CRC32#`` entry over them). The record holds zeros where totalSize and magic go;
    they are written last, so a process killed half way leaves zeros where the record
    starts, not half a record. (One copy of the whole record: slicing off its first 8 bytes
    would copy it twice.)"""
    size = len(record)
    buf[pos:pos + size] = record
    _QQ.pack_into(buf, pos + QUEUE_OFFSET_AT, queue_offset, physical_offset)
    _Q.pack_into(buf, pos + store_timestamp_at, store_timestamp)
    if prop_crc:
        fill_crc32_entry(buf, pos, size, _START.pack(size, magic_code), _fast_crc32)
    _START.pack_into(buf, pos, size, magic_code)


_NOT_V6 = ~(sysflag.BORNHOST_V6_FLAG | sysflag.STOREHOSTADDRESS_V6_FLAG)


def _prepare_method(make, name: str, doc: str):
    """One body for :meth:`Encoder.prepare` and :meth:`Encoder.prepare_fields`: ``make``
    turns the fields into what is returned (None: the plain tuple). What depends only on the
    topic, the hosts and the sysFlag comes from :meth:`Encoder._shape`'s cache; module
    constants are globals of this module to keep lookups short."""

    def prepare(self, msg: MessageInner, queue_id: int | None = None):
        body = msg.body or b""
        body_len = len(body)
        if body_len > self.max_body_size:
            raise UsageError(f"message body is {body_len} bytes, more than maxMessageSize {self.max_body_size}")
        if queue_id is None:
            queue_id = msg.queue_id
        if queue_id < 0:
            raise UsageError(f"queue id {queue_id} is negative")
        topic = msg.topic
        sys_flag = msg.sys_flag
        properties = msg.properties
        text = msg.properties_string
        delay_level = 0
        if properties:
            if _DELAY in properties:
                topic, queue_id, redirected, delay_level = self._delay(msg, topic, queue_id, sys_flag)
                if redirected is not None:
                    text = redirected
            if text is None:
                text = properties_string(properties)
            get = properties.get
            tags = get(_TAGS)
            keys = get(_KEYS)
            uniq = get(_UNIQ_KEY)
            if tags and not delay_level:  # delayed: the deliver time, set at append
                code = TAGS_CODES.get(tags)
                if code is None:
                    code = tags_code(tags)
            else:
                code = 0
        else:
            keys = uniq = None
            code = 0
            if text is None:
                text = ""
        try:
            prop = text.encode()  # UTF-8; the default spelled out costs an argument parse
        except UnicodeEncodeError:
            prop = java_utf8(text)
        except AttributeError:  # bytes: a stored record's properties, written again as they were
            prop = text
        prop_crc = msg.prop_crc if self.append_prop_crc is None else self.append_prop_crc
        if prop_crc:
            prop = reserve_crc32_entry(prop)
        prop_len = len(prop)
        if prop_len > MAX_PROPERTIES_LENGTH:
            raise UsageError(f"properties are {prop_len} bytes, more than {MAX_PROPERTIES_LENGTH}")
        born = msg.born_host
        store = msg.store_host
        try:
            shape = self._shapes.get((topic, born, store, sys_flag))
        except TypeError:  # a host given as a list: no cache, the same bytes
            shape = None
        if shape is None:
            shape = self._shape(topic, born, store, sys_flag)
        magic, tpart, pack, fixed, sys_flag, store_ts_at, store_ip, store_port, gets_queue_offset, hosts = shape
        total = fixed + body_len + prop_len
        if total > self.max_record_size:
            raise UsageError(f"message record would be {total} bytes, more than {self.max_record_size}")
        prop_len_field = _PROP_LEN_FIELDS.get(prop_len)
        if prop_len_field is None:
            prop_len_field = _prop_len_field(prop_len)
        record = b"".join((pack(_fast_crc32(body) & _CRC_MASK if body_len else 0, queue_id, msg.flag, sys_flag,
                                msg.born_timestamp, hosts, msg.reconsume_times, msg.prepared_transaction_offset,
                                body_len),
                           body, tpart, prop_len_field, prop))
        fields = (topic, queue_id, record, total, sys_flag, store_ts_at, msg.store_timestamp, code, keys, uniq,
                  delay_level, store_ip, store_port, gets_queue_offset, magic, prop_crc)
        return fields if make is None else make(fields)

    prepare.__name__ = name
    prepare.__qualname__ = f"Encoder.{name}"
    prepare.__doc__ = doc
    return prepare


class Encoder:
    """CommitLog.asyncPutMessage(s) up to the bytes: one per store.

    What depends only on (topic, born host, store host, sysFlag) is cached (:meth:`_shape`);
    body, properties, queue id, flag and the other numbers are per message. Input is
    validated the way the broker refuses messages (MESSAGE_ILLEGAL).
    """

    def __init__(self, store_host: Host, delay_levels: DelayLevels | None = None,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE):
        self._shapes: dict[tuple, tuple] = {}  # (topic, born host, store host, sysFlag) -> _shape
        self.store_host = as_host(store_host)
        self.delay_levels = delay_levels or DelayLevels()
        self.max_body_size = max_message_size
        self.max_record_size = max_message_size + MAX_MESSAGE_SIZE_RESERVE
        self._topics: dict[str, tuple[int, bytes]] = {}
        # 5.x enabledAppendPropCRC: each record ends with a __CRC32# entry (reserved here,
        # filled by the writer once the record is placed: write_record's prop_crc). None:
        # as each message says (MessageInner.prop_crc: a moved record that carried one)
        self.append_prop_crc: bool | None = False

    @property
    def store_host(self) -> Host:
        return self._store_host

    @store_host.setter
    def store_host(self, value) -> None:
        self._store_host = as_host(value)
        self._shapes.clear()  # shapes of messages without their own store host hold it

    def topic_part(self, topic: str) -> tuple[int, bytes]:
        """(magic, length field + topic bytes): V2 when the topic is longer than V1's length
        field holds (127, as 5.x chooses by its length in chars), or when its UTF-8 form is."""
        part = self._topics.get(topic)
        if part is None:
            raw = java_utf8(topic)
            if not raw:
                raise UsageError("topic is empty")
            if len(raw) > MAX_TOPIC_LENGTH_V2:  # the broker would read the length field negative
                raise UsageError(f"topic is {len(raw)} bytes long, more than {MAX_TOPIC_LENGTH_V2}")
            if not names_a_directory(topic):  # it names consumequeue/TOPIC/
                raise UsageError(f"topic {topic!r} cannot name a consume queue directory")
            v2 = utf16_length(topic) > MAX_TOPIC_LENGTH_V1 or len(raw) > MAX_TOPIC_LENGTH_V1
            magic = MESSAGE_MAGIC_CODE_V2 if v2 else MESSAGE_MAGIC_CODE_V1
            part = (magic, MessageTopic[magic].build(dict(topic=raw)))
            if len(self._topics) < 65536:
                self._topics[topic] = part
        return part

    prepare = _prepare_method(
        PreparedRecord, "prepare",  # calling the class: cheaper than tuple.__new__(PreparedRecord, ...)
        """Everything asyncPutMessage does before taking the put lock, as a :class:`PreparedRecord`;
        ``queue_id`` overrides the message's (a selector's choice).""")
    prepare_fields = _prepare_method(
        None, "prepare_fields",
        """:meth:`prepare`'s fields (PreparedRecord.FIELDS) as a plain tuple, for callers that only
        unpack it: a tuple subclass costs an allocation and a deallocation of its own (about
        0.1 us a message).""")

    def _shape(self, topic: str, born: Host, store: Host | None, sys_flag: int) -> tuple:
        """What a record's bytes take from (topic, born host, store host, sysFlag) alone:
        magic, length field + topic bytes, the packing struct, the size of all but body and
        properties, the sysFlag with its V6 bits, where storeTimestamp goes, the store host,
        whether it gets a queue offset, and the packed host fields (storeTimestamp zero)."""
        key = (topic, born, store, sys_flag)
        magic, tpart = self.topic_part(topic)
        store = store or self._store_host
        store_ip, store_port = store[0], store[1]
        born_ip, born_port = born[0], born[1]
        sys_flag &= _NOT_V6
        if len(born_ip) == 16:
            sys_flag |= _BORN_V6
        if len(store_ip) == 16:
            sys_flag |= _STORE_V6
        hosts_index = (sys_flag >> 4) & 3
        pack, block = PACKING_HEADS[hosts_index]
        shape = (magic, tpart, pack.pack, pack.size + len(tpart) + PROPERTIES_LENGTH.size, sys_flag, STORE_TIMESTAMP_AT[hosts_index],
                 store_ip, store_port, (sys_flag & _TRAN_MASK) in _GETS_QUEUE_OFFSET,
                 block.pack(born_ip, born_port, 0, store_ip, store_port))
        try:
            if len(self._shapes) >= 4096:
                self._shapes.clear()
            self._shapes[key] = shape
        except TypeError:  # unhashable hosts: not cached
            pass
        return shape

    def _delay(self, msg: MessageInner, topic: str, queue_id: int, sys_flag: int):
        """(topic, queue id, properties string or None for the message's own, delay level)
        of a message whose map holds DELAY."""
        level = delay_level_of(msg.properties)
        if topic == RMQ_SYS_SCHEDULE_TOPIC:
            # already redirected (a record written again as it was stored): the deliver time
            # is its tagsCode, as checkMessageAndReturnSize computes it
            return topic, queue_id, None, max(0, min(level, self.delay_levels.max_level))
        if level > 0 and (sys_flag & _TRAN_MASK) in _GETS_QUEUE_OFFSET:
            return self._redirect_delayed(msg, level, queue_id)
        return topic, queue_id, None, 0

    def _redirect_delayed(self, msg: MessageInner, level: int, queue_id: int):
        """Delay: clamp the level, back up REAL_TOPIC / REAL_QID in (a copy of) the map and
        re-serialise it; the record goes to SCHEDULE_TOPIC_XXXX."""
        m = PropertyMap(msg.properties, peak=getattr(msg.properties, "peak", 0))  # the caller's map stays as given
        if level > self.delay_levels.max_level:
            level = self.delay_levels.max_level
            m[props.PROPERTY_DELAY_TIME_LEVEL] = str(level)
        m[props.PROPERTY_REAL_TOPIC] = msg.topic
        m[props.PROPERTY_REAL_QUEUE_ID] = str(queue_id)
        return RMQ_SYS_SCHEDULE_TOPIC, self.delay_levels.queue_id(level), m.to_string(), level

    def prepare_batch(self, batch: MessageBatch) -> list[PreparedRecord]:
        """MessageExtEncoder.encode(MessageExtBatch): one record per inner message; its
        properties are the inner ones, a separator when they do not end with one, and the
        batch's own. Transactions and delays are refused, as asyncPutMessages does."""
        if batch.sys_flag & sysflag.TRANSACTION_MASK:
            raise UsageError("a batch cannot be a transaction message")
        if batch.properties and delay_level_of(batch.properties) > 0:
            raise UsageError("a batch cannot be delayed")
        if len(batch.body) > self.max_body_size:
            raise UsageError(f"batch body is {len(batch.body)} bytes, more than maxMessageSize {self.max_body_size}")
        batch_prop = java_utf8(properties_string(batch.properties))
        if len(batch_prop) > MAX_PROPERTIES_LENGTH:
            raise UsageError(f"batch properties are {len(batch_prop)} bytes, more than {MAX_PROPERTIES_LENGTH}")
        store = batch.store_host or self.store_host
        born = batch.born_host
        sys_flag = batch.sys_flag & _NOT_V6
        if len(born[0]) == 16:
            sys_flag |= sysflag.BORNHOST_V6_FLAG
        if len(store[0]) == 16:
            sys_flag |= sysflag.STOREHOSTADDRESS_V6_FLAG
        magic, tpart = self.topic_part(batch.topic)
        head = HEADS[(sys_flag >> 4) & 3]
        out = []
        for flag, body, inner in decode_batch_body(batch.body):
            if inner and batch_prop and not inner.endswith(_CLUSTER_SEP):
                prop = inner + _CLUSTER_SEP + batch_prop
            else:
                prop = inner + batch_prop
            parsed = props.string_to_properties(prop.decode("utf-8", "replace"))
            if self.append_prop_crc:  # the entry reserved after them, no separator added (the batch encode)
                prop += bytes(CRC32_RESERVED_LEN)
            if len(prop) > MAX_PROPERTIES_LENGTH:
                raise UsageError(f"batch message properties are {len(prop)} bytes, more than {MAX_PROPERTIES_LENGTH}")
            tags = parsed.get(props.PROPERTY_TAGS)
            total = head.size + len(body) + len(tpart) + PROPERTIES_LENGTH.size + len(prop)
            record = b"".join((head.pack(total, magic, body_crc(body, _fast_crc32), batch.queue_id,
                                         flag, 0, 0, sys_flag, batch.born_timestamp, born[0], born[1], 0, store[0],
                                         store[1], batch.reconsume_times, 0, len(body)),
                               body, tpart, PROPERTIES_LENGTH.pack(len(prop)), prop))
            out.append(prepared_record(batch.topic, batch.queue_id, record, sys_flag, batch.store_timestamp,
                                      tags_code(tags), parsed.get(props.PROPERTY_KEYS),
                                      parsed.get(props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), 0,
                                      store[0], store[1], bool(self.append_prop_crc)))
        if not out:
            raise UsageError("the batch holds no message")
        return out


__all__ = [
    "BatchItem", "DelayLevels", "Encoder", "MessageBatch", "MessageInner", "PreparedRecord", "PropertyMap",
    "UniqIdGenerator", "batch_item", "broker_inner", "compress_body", "create_uniq_id", "decode_batch_body",
    "encode_batch_body", "hashmap_capacity", "java_order", "java_string_hash", "prepared_record", "producer_batch",
    "producer_message", "producer_properties", "properties_string",
    "string_to_property_map", "tags_code", "write_record",
]
