"""MessageExtEncoder: a message to the bytes of its commit log record, byte for byte as the
4.9.x broker does it (``CommitLog.asyncPutMessage(s)`` up to the put lock): store timestamp,
body CRC, delay redirection to ``SCHEDULE_TOPIC_XXXX``, the V6 sysFlag bits, the record
layout (structs in ``record_structs``, derived from ``formats/commitlog.py``), the reserved
``__CRC32#`` entry of 5.x's enabledAppendPropCRC. The messages come from ``producer``;
the records it makes are placed by ``prepared_record.write_record``.
"""
from __future__ import annotations

from itertools import repeat
from operator import attrgetter, contains

from rmqtool.dispatch.rules import RMQ_SYS_SCHEDULE_TOPIC, TAGS_CODES, DelayLevels, delay_level_of, tags_code
from rmqtool.engine.batch_body import decode_batch_body
from rmqtool.engine.java_text import java_utf8, utf16_length
from rmqtool.engine.message_inner import Host, MessageBatch, MessageInner, as_host
from rmqtool.engine.prepared_columns import PreparedColumns
from rmqtool.engine.prepared_record import GETS_QUEUE_OFFSET, PreparedRecord, prepared_record
from rmqtool.engine.property_map import PropertyMap, properties_string
from rmqtool.engine.record_structs import HEADS, PACKING_HEADS
from rmqtool.errors import UsageError
from rmqtool.formats import properties as props
from rmqtool.formats import sysflag
from rmqtool.formats.commitlog import (MAX_PROPERTIES_LENGTH, MAX_TOPIC_LENGTH_V1, MAX_TOPIC_LENGTH_V2,
                                       MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, STORE_TIMESTAMP_AT, MessageTopic)
from rmqtool.formats.crc import CRC32_RESERVED_LEN, body_crc, reserve_crc32_entry
from rmqtool.store import crc as _crc
from rmqtool.store.message import PROPERTIES_LENGTH
from rmqtool.store.paths import NAME_MAX, names_a_directory

DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # MessageStoreConfig.maxMessageSize (the body limit)
MAX_MESSAGE_SIZE_RESERVE = 64 * 1024  # MessageExtEncoder: room for everything but the body

# module constants prepare_fields reads as globals, to keep its lookups short
_GETS_QUEUE_OFFSET = GETS_QUEUE_OFFSET
_TRAN_MASK = sysflag.TRANSACTION_MASK
_BORN_V6 = sysflag.BORNHOST_V6_FLAG
_STORE_V6 = sysflag.STOREHOSTADDRESS_V6_FLAG
_NOT_V6 = ~(sysflag.BORNHOST_V6_FLAG | sysflag.STOREHOSTADDRESS_V6_FLAG)
_DELAY = props.PROPERTY_DELAY_TIME_LEVEL
_TAGS = props.PROPERTY_TAGS
_KEYS = props.PROPERTY_KEYS
_UNIQ_KEY = props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_fast_crc32 = _crc.fast_crc32  # the same CRC-32 unmasked, as rmqtool.store.crc picks it for hot loops
_CRC_MASK = _crc.JAVA_CRC_MASK
_CLUSTER_SEP = props.PROPERTY_SEPARATOR.encode()
_tuple_new = tuple.__new__

# MessageInner's fields as prepare_columns reads them, in one C call a message
_FIELDS = attrgetter("topic", "body", "queue_id", "flag", "properties", "properties_string", "born_timestamp",
                     "born_host", "store_host", "reconsume_times", "sys_flag", "prepared_transaction_offset",
                     "store_timestamp", "prop_crc")

_PROP_LEN_FIELDS: dict[int, bytes] = {}  # propertiesLength -> its two bytes


def _prop_len_field(length: int) -> bytes:
    """The propertiesLength field (at most MAX_PROPERTIES_LENGTH + 1 of them: lengths are checked first)."""
    field = _PROP_LEN_FIELDS[length] = PROPERTIES_LENGTH.pack(length)
    return field


def topic_bytes(topic: str) -> bytes:
    """The topic as a record holds it (String.getBytes(UTF_8)), or UsageError when it is none a
    store can take whatever its version: empty, too long for any length field or for a directory
    name, no directory name, or not Unicode text."""
    raw = java_utf8(topic)
    if not raw:
        raise UsageError("topic is empty")
    if raw != topic.encode("utf-8", "surrogatepass"):  # Java writes '?' for each: another topic
        raise UsageError(f"topic {topic!r} is not Unicode text (a lone surrogate, such as a byte that is "
                         f"not UTF-8 in an argument): a broker would write {raw.decode()!r}")
    if len(raw) > MAX_TOPIC_LENGTH_V2:  # the broker would read the length field negative
        raise UsageError(f"topic is {len(raw)} bytes long, more than {MAX_TOPIC_LENGTH_V2}")
    if not names_a_directory(topic):  # it names consumequeue/TOPIC/
        raise UsageError(f"topic {topic!r} cannot name a consume queue directory")
    if len(raw) > NAME_MAX:  # written, then never dispatched: its directory cannot be made
        raise UsageError(f"topic is {len(raw)} bytes long: its consume queue directory's name would be "
                         f"more than the {NAME_MAX} bytes a file system takes")
    return raw


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
        # a topic longer than V1's length field holds goes into a V2 record, which only a 5.x
        # store writes (CommitLog.asyncPutMessage); 4.9.8's checkMessage refuses it
        # (MESSAGE_ILLEGAL), and a V2 record ends the log at its next start. None: allowed;
        # else why not (the store said 4.9, or nothing)
        self.v2_refused: str | None = None

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
            raw = topic_bytes(topic)
            v2 = utf16_length(topic) > MAX_TOPIC_LENGTH_V1 or len(raw) > MAX_TOPIC_LENGTH_V1
            if v2 and self.v2_refused is not None:
                raise UsageError(f"topic is {utf16_length(topic)} characters ({len(raw)} bytes) long, more than "
                                 f"{MAX_TOPIC_LENGTH_V1}: a 4.9 broker refuses it (MESSAGE_ILLEGAL) and a V2 record "
                                 f"ends its log at the next start; only a 5.x store writes one, and "
                                 f"{self.v2_refused} (--semantics 5.3 says it is one)")
            magic = MESSAGE_MAGIC_CODE_V2 if v2 else MESSAGE_MAGIC_CODE_V1
            part = (magic, MessageTopic[magic].build(dict(topic=raw)))
            if len(self._topics) < 65536:
                self._topics[topic] = part
        return part

    def prepare(self, msg: MessageInner, queue_id: int | None = None) -> PreparedRecord:
        """Everything asyncPutMessage does before taking the put lock, as a :class:`PreparedRecord`;
        ``queue_id`` overrides the message's (a selector's choice)."""
        return _tuple_new(PreparedRecord, self.prepare_fields(msg, queue_id))

    def prepare_fields(self, msg: MessageInner, queue_id: int | None = None) -> tuple:
        """:meth:`prepare`'s fields (PreparedRecord's, in order) as a plain tuple, for the append
        path, which only unpacks it: a tuple subclass costs an allocation and a deallocation of
        its own (about 0.1 us a message). What depends only on the topic, the hosts and the
        sysFlag comes from :meth:`_shape`'s cache."""
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
            uniq = get(_UNIQ_KEY) or None  # an empty value: string2messageProperties drops the pair, dispatch sees none
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
        return fields

    def prepare_columns(self, messages, queue_ids=None) -> PreparedColumns | None:
        """:meth:`prepare_fields` for many messages at once, as :class:`PreparedColumns`, when
        they share one shape (topic, born host, store host, sysFlag), none is delayed, each
        has its stored properties string (a str) and none gets a ``__CRC32#`` entry; None
        otherwise, and for anything prepare_fields would refuse (it then says why).
        ``queue_ids``: a selector's choices, else each message's."""
        if not messages:
            return None
        try:
            (topics, bodies, message_queue_ids, flags, maps, texts, born_timestamps, born_hosts, store_hosts,
             reconsume_times, sys_flags, prepared_offsets, store_timestamps, prop_crcs) = zip(*map(_FIELDS, messages))
            n = len(topics)  # count() compares by identity first: cheap when the objects are shared
            if (topics.count(topics[0]) != n or born_hosts.count(born_hosts[0]) != n
                    or store_hosts.count(store_hosts[0]) != n or sys_flags.count(sys_flags[0]) != n):
                return None
            hash((topics[0], born_hosts[0], store_hosts[0]))  # TypeError: unhashable hosts (no shape cache)
            if self.append_prop_crc or (self.append_prop_crc is None and any(prop_crcs)):
                return None
            if any(map(contains, maps, repeat(_DELAY))):
                return None
            tags = list(map(dict.get, maps, repeat(_TAGS)))
            keys = list(map(dict.get, maps, repeat(_KEYS)))
            uniqs = [u or None for u in map(dict.get, maps, repeat(_UNIQ_KEY))]  # an empty one: none (above)
            props = list(map(str.encode, texts))  # TypeError: a string to make, or stored bytes
            body_lengths = list(map(len, bodies))  # TypeError: a body of None
        except (TypeError, AttributeError, UnicodeEncodeError):
            return None  # not plain messages of one shape: one by one
        if queue_ids is None:
            queue_ids = list(message_queue_ids)
        elif len(queue_ids) != len(bodies):
            return None
        prop_lengths = list(map(len, props))
        if (max(body_lengths) > self.max_body_size or max(prop_lengths) > MAX_PROPERTIES_LENGTH
                or min(queue_ids) < 0):
            return None
        stamps = None
        unstamped = store_timestamps.count(None)
        if unstamped != len(store_timestamps):
            if unstamped:
                return None
            stamps = list(store_timestamps)
        topic, born, store, sys_flag = topics[0], born_hosts[0], store_hosts[0], sys_flags[0]
        shape = self._shapes.get((topic, born, store, sys_flag)) or self._shape(topic, born, store, sys_flag)
        magic, tpart, _pack, fixed, sys_flag, _store_ts_at, store_ip, store_port, gets_queue_offset, _hosts = shape
        import numpy as np

        sizes = fixed + np.array(body_lengths, np.int64) + np.array(prop_lengths, np.int64)
        if int(sizes.max()) > self.max_record_size:
            return None
        crcs = np.fromiter(map(_fast_crc32, bodies), np.int64, len(bodies)) & _CRC_MASK
        codes = dict.fromkeys(tags, 0)
        for t in codes:
            if t:
                code = TAGS_CODES.get(t)
                codes[t] = tags_code(t) if code is None else code
        born_ip, born_port = born
        return PreparedColumns(topic, magic, tpart, sys_flag, (sys_flag >> 4) & 3, born_ip, born_port, store_ip,
                               store_port, gets_queue_offset, sizes, list(bodies), props, crcs, queue_ids,
                               list(flags), list(born_timestamps), list(reconsume_times), list(prepared_offsets),
                               list(map(codes.__getitem__, tags)), keys, uniqs, stamps)

    def _shape(self, topic: str, born: Host, store: Host | None, sys_flag: int) -> tuple:
        """What a record's bytes take from (topic, born host, store host, sysFlag) alone:
        magic, length field + topic bytes, the packing struct, the size of all but body and
        properties, the sysFlag with its V6 bits, where storeTimestamp goes, the store host,
        whether it gets a queue offset, and the packed host fields (storeTimestamp zero)."""
        key = (topic, born, store, sys_flag)
        magic, tpart = self.topic_part(topic)
        store = store or self._store_host
        store_ip, store_port = store
        born_ip, born_port = born
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
        store_ip, store_port = batch.store_host or self.store_host
        born_ip, born_port = batch.born_host
        sys_flag = batch.sys_flag & _NOT_V6
        if len(born_ip) == 16:
            sys_flag |= sysflag.BORNHOST_V6_FLAG
        if len(store_ip) == 16:
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
                                         flag, 0, 0, sys_flag, batch.born_timestamp, born_ip, born_port, 0,
                                         store_ip, store_port, batch.reconsume_times, 0, len(body)),
                               body, tpart, PROPERTIES_LENGTH.pack(len(prop)), prop))
            out.append(prepared_record(batch.topic, batch.queue_id, record, sys_flag, batch.store_timestamp,
                                      tags_code(tags), parsed.get(props.PROPERTY_KEYS),
                                      parsed.get(props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), 0,
                                      store_ip, store_port, bool(self.append_prop_crc)))
        if not out:
            raise UsageError("the batch holds no message")
        return out
