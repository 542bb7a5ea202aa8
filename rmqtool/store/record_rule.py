"""The one rule that accepts a commit log record as clean, in named stages, numpy-free.

A record is clean when its magic code is a message's, it is whole, and its lengths are the
schema's and add up to its totalSize (``CommitLog.checkMessageAndReturnSize``'s reading:
bodyLength, then the signed topic length, then the signed propertiesLength, each inside
the record, the last one ending exactly at totalSize). :func:`record_parts` states it once
over "operations" given by the caller: a window's records as numpy arrays at once
(:mod:`rmqtool.store.record_kernel`, the scanner's runs), or one record's Python ints
(:func:`record_refusal`: the careful path, random reads, dispatch's check_message). Of a
record that fails, :func:`refusal_of` says why, from the first stage it failed.

Every position and size comes from ``formats/commitlog.py`` (through ``formats/derive.py``).
"""
from __future__ import annotations

import array
import dataclasses
import struct

import construct as cs

from rmqtool import native
from rmqtool.findings import RECORD_LENGTH_MISMATCH
from rmqtool.formats.commitlog import (HEADER_FIELD_AT, MAX_PROPERTIES_LENGTH, MAX_TOPIC_LENGTH,
                                       MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, MIN_MESSAGE_LENGTH,
                                       PROPERTIES_LENGTH_SIZE, STORE_TIMESTAMP_AT, TOPIC_LENGTH_SIZE,
                                       MessageHosts, MessagePrefix, PropertiesLength, TopicLength)
from rmqtool.formats.derive import field_names, struct_of
from rmqtool.formats.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

# totalSize and magicCode: all a header-only hop (the chain walk) needs, and what a writer puts last
RECORD_START = struct_of(cs.Struct(*MessagePrefix.subcons[:2]))
assert field_names(cs.Struct(*MessagePrefix.subcons[:2])) == ("total_size", "magic_code")
HOSTS_SHIFT = 4  # sysFlag bits 4 and 5: born host, store host IPv6 (formats/sysflag.py)
assert (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG) >> HOSTS_SHIFT == 3
TOPIC_LENGTH_SIZE_V1 = TOPIC_LENGTH_SIZE[MESSAGE_MAGIC_CODE_V1]
TOPIC_LENGTH_SIZE_V2 = TOPIC_LENGTH_SIZE[MESSAGE_MAGIC_CODE_V2]

# By (sysFlag >> 4) & 3, as MessageHosts: where the body starts, where bodyLength and
# storeTimestamp lie, from a record's start
HEADER_SIZE_BY_HOSTS = tuple(MessagePrefix.sizeof() + h.sizeof() for h in MessageHosts)
BODY_LENGTH_AT_BY_HOSTS = tuple(at["body_length"] for at in HEADER_FIELD_AT)
_HOSTS_FIELDS = dict(zip(field_names(MessageHosts[0]), MessageHosts[0].subcons))
# the fields the rule reads one at a time, each as its schema declares it (signed, as Java reads them)
FIELD_SCHEMAS = {"body_length": _HOSTS_FIELDS["body_length"],
                  "store_timestamp": _HOSTS_FIELDS["store_timestamp"],
                  "topic_length_v1": "topic_length" / TopicLength[MESSAGE_MAGIC_CODE_V1],
                  "topic_length_v2": "topic_length" / TopicLength[MESSAGE_MAGIC_CODE_V2],
                  "properties_length": "properties_length" / PropertiesLength}
FIELD_STRUCTS = {name: struct_of(cs.Struct(sub)) for name, sub in FIELD_SCHEMAS.items()}

# The stages of checkMessageAndReturnSize's reading, in its order; a record is clean when it
# passes all. Each names what its failure reports (the first failing one of a record is its refusal).
STAGES = ("header_fits", "body_fits", "topic_length_fits", "topic_length_signed", "topic_fits",
          "properties_length_signed", "lengths_add_up")


@dataclasses.dataclass(frozen=True, slots=True)
class Refusal:
    """Why the record at ``position`` of a window is not clean: the stage it failed (one of
    :data:`STAGES`), a finding id and a sentence."""
    position: int
    stage: str
    finding_id: str
    reason: str


_HOP_CHUNK = bytes(8 * 4096)  # the kernel's hop: room for this many positions a call


def hop_chain(buf, i: int, stop: int, limit: int | None = None) -> tuple[array.array, int]:
    """Stage 1: the positions of the totalSize chain from ``i`` whose records have a message's
    magic code, at least the smallest record's size and lie whole in ``buf``; where it stopped."""
    v1, v2 = MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2
    min_length = MIN_MESSAGE_LENGTH
    if limit is None:
        limit = len(buf)
    kernel = native.kernel
    if kernel is not None and i >= 0:  # the same loop in C, a chunk of positions a call
        pieces = []
        while True:
            room = array.array("q", _HOP_CHUNK)
            count, i = kernel.hop(buf, i, stop, limit, min_length, v1, v2, room)
            if count < len(room):
                del room[count:]
                pieces.append(room)
                break
            pieces.append(room)
        if len(pieces) == 1:
            return pieces[0], i
        out = array.array("q")
        for piece in pieces:
            out.extend(piece)
        return out, i
    unpack = RECORD_START.unpack_from
    out = array.array("q")  # numpy takes it as it is, no conversion of a list of ints
    add = out.append
    try:
        while i < stop:
            total, magic = unpack(buf, i)
            end = i + total
            if total < min_length or end > limit or (magic != v1 and magic != v2):
                break
            add(i)
            i = end
    except struct.error:  # fewer than 8 bytes left
        pass
    return out, i


class _Scalar:
    """The same operations on one record's Python ints (the careful path, a random read)."""

    @staticmethod
    def pick(condition, if_true, if_false):
        return if_true if condition else if_false

    @staticmethod
    def any(value) -> bool:
        return bool(value)

    @staticmethod
    def of(table: tuple, index):
        return table[index]

    @staticmethod
    def read(buf, field: str, at, readable, fallback):
        return FIELD_STRUCTS[field].unpack_from(buf, at)[0] if readable else 0




def record_parts(buf, pos, end, sys_flag, magic, body_length, store_timestamp, ops) -> dict:
    """The one acceptance rule, stage by stage: where each part of a record lies, and each
    stage's verdict (cumulative: a record passes a stage only if it passed the ones before).

    ``pos``, ``end``: the records' first byte and where totalSize ends them; the rest are their
    header fields as read for IPv4 hosts (bodyLength and storeTimestamp are read again where
    IPv6 hosts move them). Arrays of records with ``ops=_Vector``, one record's ints with ``_Scalar``.
    """
    hosts = (sys_flag >> HOSTS_SHIFT) & 3
    if ops.any(hosts):  # IPv6 hosts move every field after the prefix
        body_at = pos + ops.of(HEADER_SIZE_BY_HOSTS, hosts)
        header_fits = body_at <= end
        body_length = ops.pick(header_fits, ops.read(buf, "body_length", pos + ops.of(BODY_LENGTH_AT_BY_HOSTS, hosts),
                                                     header_fits, pos), -1)
        store_timestamp = ops.read(buf, "store_timestamp", pos + ops.of(STORE_TIMESTAMP_AT, hosts), header_fits, pos)
    else:
        body_at = pos + HEADER_SIZE_BY_HOSTS[0]
        header_fits = body_at <= end
    body_end = body_at + body_length
    body_fits = header_fits & (body_length >= 0) & (body_end <= end)
    v2 = magic == MESSAGE_MAGIC_CODE_V2
    topic_at = body_end + ops.pick(v2, TOPIC_LENGTH_SIZE_V2, TOPIC_LENGTH_SIZE_V1)
    topic_length_fits = body_fits & (topic_at <= end)
    topic_length = ops.pick(v2, ops.read(buf, "topic_length_v2", body_end, topic_length_fits & v2, pos),
                            ops.read(buf, "topic_length_v1", body_end, topic_length_fits, pos))
    topic_length_signed = topic_length_fits & (topic_length >= 0)
    topic_end = topic_at + topic_length
    properties_at = topic_end + PROPERTIES_LENGTH_SIZE
    topic_fits = topic_length_signed & (properties_at <= end)
    properties_length = ops.read(buf, "properties_length", topic_end, topic_fits, pos)
    properties_length_signed = topic_fits & (properties_length >= 0)
    lengths_add_up = properties_length_signed & (properties_at + properties_length == end)
    return {"hosts": hosts, "store_timestamp": store_timestamp, "body_at": body_at, "body_length": body_length,
            "body_end": body_end, "v2": v2, "topic_at": topic_at, "topic_length": topic_length,
            "topic_end": topic_end, "properties_at": properties_at, "properties_length": properties_length,
            "header_fits": header_fits, "body_fits": body_fits, "topic_length_fits": topic_length_fits,
            "topic_length_signed": topic_length_signed, "topic_fits": topic_fits,
            "properties_length_signed": properties_length_signed, "lengths_add_up": lengths_add_up}


def refusal_of(parts: dict, pos: int, end: int) -> Refusal | None:
    """Why the record of ``parts`` (one record's, as :func:`record_parts` gives them) is not clean:
    the sentence of the first stage it did not pass; None when it passed them all."""
    failed = next((stage for stage in STAGES if not parts[stage]), None)
    if failed is None:
        return None
    total = end - pos
    if failed == "header_fits":
        reason = f"totalSize {total} is too small for the record header"
    elif failed == "body_fits":
        reason = f"bodyLength {int(parts['body_length'])} does not fit in totalSize {total}"
    elif failed == "topic_length_fits":
        reason = f"the body leaves no room for the topic length in totalSize {total}"
    elif failed == "topic_length_signed":
        magic = MESSAGE_MAGIC_CODE_V2 if parts["v2"] else MESSAGE_MAGIC_CODE_V1
        reason = (f"topic length field reads {int(parts['topic_length'])}: a V{2 if parts['v2'] else 1} "
                  f"record's topic has at most {MAX_TOPIC_LENGTH[magic]} bytes")
    elif failed == "topic_fits":
        reason = f"topic length {int(parts['topic_length'])} does not fit in totalSize {total}"
    elif failed == "properties_length_signed":
        reason = (f"properties length field reads {int(parts['properties_length'])}: a record's "
                  f"properties have at most {MAX_PROPERTIES_LENGTH} bytes")
    else:
        reason = (f"field lengths add up to {int(parts['properties_at'] + parts['properties_length']) - pos} "
                  f"bytes, totalSize says {total}")
    return Refusal(pos, failed, RECORD_LENGTH_MISMATCH, reason)


def record_refusal(buf, pos: int, end: int, sys_flag: int, magic: int, body_length: int) -> tuple[dict, Refusal | None]:
    """:func:`record_parts` of one record (its header already read), and why it is not clean (None: it is)."""
    parts = record_parts(buf, pos, end, sys_flag, magic, body_length, None, _Scalar)
    return parts, refusal_of(parts, pos, end)
