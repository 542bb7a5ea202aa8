"""What lies between a producer and the store: the producer (``Message``,
``MessageClientIDSetter``, ``DefaultMQProducerImpl``: property map, UNIQ_KEY, body
compression, transaction flag) and the broker's ``SendMessageProcessor`` (``CLUSTER``
added, ``WAIT`` left out of the stored string), giving the :class:`MessageInner` or
:class:`MessageBatch` the encoder takes."""
from __future__ import annotations

import time
from typing import Iterable

from rmqtool.engine.batch_body import encode_batch_body
from rmqtool.engine.message_inner import BatchItem, MessageBatch, MessageInner, as_host
from rmqtool.engine.property_map import PropertyMap, properties_string, string_to_property_map
from rmqtool.engine.uniq_key import UniqIdGenerator, create_uniq_id
from rmqtool.errors import UsageError
from rmqtool.formats import properties as props
from rmqtool.formats import sysflag
from rmqtool.store.compression import compress as compress_body

DEFAULT_CLUSTER = "DefaultCluster"  # BrokerConfig.brokerClusterName default
COMPRESS_MSG_BODY_OVER = 4 * 1024  # DefaultMQProducer.compressMsgBodyOverHowmuch
COMPRESS_LEVEL = 5  # DefaultMQProducerImpl.compressLevel

# body compression as the Java client does it
CODEC_FLAGS = {"zlib": sysflag.COMPRESSION_ZLIB_TYPE, "lz4": sysflag.COMPRESSION_LZ4_TYPE,
               "zstd": sysflag.COMPRESSION_ZSTD_TYPE}


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
