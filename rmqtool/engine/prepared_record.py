"""A message encoded but not placed (:class:`PreparedRecord`), and placing it: what
CommitLog.DefaultAppendMessageCallback.doAppend writes in the put lock (the place and time,
the ``__CRC32#`` entry of a 5.x record written with enabledAppendPropCRC, then totalSize and
magic last)."""
from __future__ import annotations

from typing import NamedTuple

from rmqtool.formats import sysflag
from rmqtool.formats.commitlog import QUEUE_OFFSET_AT, STORE_TIMESTAMP_AT
from rmqtool.formats.crc import fill_crc32_entry
from rmqtool.engine.record_structs import RECORD_PLACE, RECORD_TIME
from rmqtool.store import crc as _crc
from rmqtool.store.message import RECORD_START

# a prepared and a rollback record get queue offset 0 and no consume queue unit
GETS_QUEUE_OFFSET = (sysflag.TRANSACTION_NOT_TYPE, sysflag.TRANSACTION_COMMIT_TYPE)
_QQ, _Q, _START = RECORD_PLACE, RECORD_TIME, RECORD_START
_fast_crc32 = _crc.fast_crc32  # the same CRC-32 unmasked, as rmqtool.store.crc picks it for hot loops
_tuple_new = tuple.__new__


class PreparedRecord(NamedTuple):
    """A message encoded but not placed: what CommitLog holds after MessageExtEncoder.encode.

    ``record`` is the whole record with totalSize, magic, queueOffset, physicalOffset and
    storeTimestamp still zero; doAppend copies it in one piece, writes the place and time,
    then totalSize and ``magic_code`` last, in the put lock (:meth:`write_into`). The rest is
    what the store needs around it: where it goes, and the dispatch values of
    checkMessageAndReturnSize.
    A tuple, because the append path makes one per message and unpacks it at once (the
    encoder's ``prepare_fields`` gives the same fields as a plain tuple, in this order).
    """
    topic: str
    queue_id: int
    record: bytes
    total_size: int
    sys_flag: int
    store_timestamp_at: int
    store_timestamp: int | None
    tags_code: int
    keys: str | None
    uniq_key: str | None
    delay_level: int  # > 0: a SCHEDULE_TOPIC_XXXX record; tagsCode = deliver time
    store_ip: bytes
    store_port: int
    gets_queue_offset: bool  # prepared and rollback records: offset 0, no CQ unit
    magic_code: int
    prop_crc: bool  # its last 20 bytes: a __CRC32# entry to fill once placed

    def write_into(self, buf, pos: int, queue_offset: int, physical_offset: int, store_timestamp: int) -> None:
        write_record(buf, pos, self.record, self.magic_code, self.store_timestamp_at, queue_offset, physical_offset,
                     store_timestamp, self.prop_crc)

    def to_bytes(self, queue_offset: int, physical_offset: int, store_timestamp: int) -> bytes:
        out = bytearray(self.total_size)
        self.write_into(out, 0, queue_offset, physical_offset, store_timestamp)
        return bytes(out)

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & sysflag.TRANSACTION_MASK


# where the append path reads a plain tuple of PreparedRecord's fields (prepare_fields)
TOTAL_SIZE = PreparedRecord._fields.index("total_size")


def prepared_record(topic: str, queue_id: int, record: bytes, sys_flag: int, store_timestamp: int | None,
                    tags_code: int, keys: str | None, uniq_key: str | None, delay_level: int,
                    store_ip: bytes, store_port: int, prop_crc: bool = False) -> PreparedRecord:
    """A PreparedRecord of a whole encoded ``record`` (its totalSize and magic are kept apart)."""
    _total_size, magic = _START.unpack_from(record)
    record = bytes(_START.size) + record[_START.size:]
    return _tuple_new(PreparedRecord, (topic, queue_id, record, len(record), sys_flag,
                                       STORE_TIMESTAMP_AT[(sys_flag >> 4) & 3], store_timestamp, tags_code, keys,
                                       uniq_key, delay_level, store_ip, store_port,
                                       (sys_flag & sysflag.TRANSACTION_MASK) in GETS_QUEUE_OFFSET, magic,
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
