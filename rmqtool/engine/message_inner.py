"""The broker's message objects the store receives: MessageExtBrokerInner (:class:`MessageInner`)
and MessageExtBatch (:class:`MessageBatch`, whose body holds :class:`BatchItem` messages)."""
from __future__ import annotations

import dataclasses

from rmqtool.engine.property_map import properties_string
from rmqtool.formats import properties as props
from rmqtool.store.hosts import parse_host

Host = tuple  # (address bytes, port)


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
