"""The struct formats a record is packed and placed with, derived from formats/commitlog.py's
schemas: the head (prefix and hosts, up to bodyLength) for each host kind, the fields doAppend
writes once the record has its place (queue and physical offset, store timestamp), and the
head as the encoder packs it per message."""
from __future__ import annotations

import struct

import construct as cs

from rmqtool.formats.commitlog import PHYSICAL_OFFSET_AT, QUEUE_OFFSET_AT, MessageHosts, MessagePrefix
from rmqtool.formats.derive import field_names, struct_format, struct_of


def _head_struct(hosts_index: int) -> struct.Struct:
    """Prefix + hosts of a record, in one struct derived from the schemas (up to bodyLength)."""
    return struct.Struct(struct_format(MessagePrefix) + struct_format(MessageHosts[hosts_index])[1:])


HEADS = tuple(_head_struct(i) for i in range(4))
HEAD_FIELDS = field_names(MessagePrefix) + field_names(MessageHosts[0])
assert HEAD_FIELDS[-1] == "body_length" and HEAD_FIELDS[5:7] == ("queue_offset", "physical_offset")


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
# RECORD_START (store/message.py: totalSize, magic) is written last: then the record exists
assert PHYSICAL_OFFSET_AT == QUEUE_OFFSET_AT + RECORD_PLACE.size // 2  # RECORD_PLACE writes both at QUEUE_OFFSET_AT


# What prepare packs per message:
# The head with the fields doAppend writes later (totalSize, magic, queueOffset, physicalOffset)
# as pad bytes, and the host fields (born host and port, storeTimestamp, store host and port)
# as one bytes field made once per host pair: 9 values to pack instead of 17. Both are derived
# from the head's own codes, so the layout stays the schema's.

_PLACED_LATER = ("total_size", "magic_code", "queue_offset", "physical_offset")
_HOST_BLOCK = ("born_host", "born_port", "store_timestamp", "store_host", "store_port")


def _packing_structs(head: struct.Struct) -> tuple[struct.Struct, struct.Struct]:
    """(the head as prepare packs it, the host block) for one of :data:`HEADS`."""
    order = head.format[0]
    codes = dict(zip(HEAD_FIELDS, _field_codes(head), strict=True))
    block = struct.Struct(order + "".join(codes[n] for n in _HOST_BLOCK))
    out = []
    for name in HEAD_FIELDS:
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
