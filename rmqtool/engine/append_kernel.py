"""The layouts the native kernel's append functions (rmqtool/native/append.c) write, derived
from formats/ and handed to the kernel once (:func:`kernel_for_append`): a record's head fields
by host kind, the properties length field, the index header, slot and entry, the consume
queue unit, the property names the put path reads, build_key's separator, and the CRC-32
implementation store/crc.py chose. The C code knows no layout of its own."""
from __future__ import annotations

import construct as cs

from rmqtool import native
from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import STORE_TIMESTAMP_AT, MessageHosts, MessagePrefix
from rmqtool.formats.consumequeue import CqUnit
from rmqtool.formats.crc import JAVA_CRC_MASK
from rmqtool.formats.indexfile import (HASH_SLOT_SIZE, INDEX_HEADER_SIZE, INDEX_SIZE, INVALID_INDEX, IndexEntry,
                                       IndexHeader, build_key)
from rmqtool.store.message import PROPERTIES_LENGTH

# the head fields append.c writes, in its order; born_host stands for the host block
_HEAD_NAMES = ("total_size", "magic_code", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset",
               "sys_flag", "born_timestamp", "born_host", "store_timestamp", "reconsume_times",
               "prepared_transaction_offset", "body_length")
_INT32_MAX = 2**31 - 1  # IndexFile's timeDiff is an int


def _fields(schema: cs.Struct) -> dict[str, tuple[int, int]]:
    """(position, width) of each field of a fixed-size schema."""
    out, at = {}, 0
    for sub in schema.subcons:
        out[sub.name] = (at, sub.sizeof())
        at += sub.sizeof()
    return out


def _head(hosts_index: int) -> tuple[tuple, int]:
    schema = cs.Struct(*MessagePrefix.subcons, *MessageHosts[hosts_index].subcons)
    fields = _fields(schema)
    assert fields["store_timestamp"][0] == STORE_TIMESTAMP_AT[hosts_index]
    # the host block (born host .. store port) is one piece: the encoder's shape packs it
    table = tuple((fields[n][0], 8 if n == "born_host" else fields[n][1]) for n in _HEAD_NAMES)
    return table, schema.sizeof()


def _layout() -> tuple:
    heads = [_head(k) for k in range(4)]
    header, entry, unit = _fields(IndexHeader), _fields(IndexEntry), _fields(CqUnit)
    return (tuple(h for h, _ in heads), tuple(size for _, size in heads), PROPERTIES_LENGTH.size,
            tuple(header[n] for n in ("begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset",
                                      "hash_slot_count", "index_count")), INDEX_HEADER_SIZE, HASH_SLOT_SIZE,
            tuple(entry[n] for n in ("key_hash", "phy_offset", "time_diff", "prev_index")), INDEX_SIZE,
            INVALID_INDEX, _INT32_MAX,
            tuple(unit[n] for n in ("commit_log_offset", "size", "tags_code")), CqUnit.sizeof(), JAVA_CRC_MASK,
            (props.PROPERTY_DELAY_TIME_LEVEL, props.PROPERTY_TAGS, props.PROPERTY_KEYS,
             props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            build_key("", ""), props.KEY_SEPARATOR)


_given_to = None  # the kernel the layout was handed to


def kernel_for_append(put_ok: str):
    """native.kernel (looked up now: a test may set it to None) with the layout handed over, or None."""
    global _given_to
    kernel = native.kernel
    if kernel is not None and _given_to is not kernel:
        if not hasattr(kernel, "appender"):  # a build from before the appender: the Python paths
            return None
        kernel.set_append_layout(*_layout(), put_ok)
        _given_to = kernel
    return kernel
