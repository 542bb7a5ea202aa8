"""The clean records of a buffer as numpy columns: the whole-store checks' decoder.

:func:`column_run` takes exactly the records :func:`rmqtool.store.message.decode_run`
takes (whole in the buffer, starting before ``stop``, lengths adding up) and stops at
the first one it would not, for the scanner's careful path. Of those records it hops
the totalSize chain in Python (the only per-record loop besides the CRCs), then reads
every header field with one gather of fixed-size rows viewed as the schema's dtype
(``formats/commitlog.py`` through ``store/arrays.dtype_of``), checks the lengths, and
parses the properties of all records at once: joined, split on the separators with
numpy, the names RocketMQ's dispatch reads (KEYS, UNIQ_KEY, TAGS, ``__CRC32#``) found by
their bytes, and their values hashed as Java's ``String.hashCode`` with prefix sums.

A record that is whole but not plain is left to :func:`rmqtool.store.message.decode_message`
(its position is in ``special``): a CRC that fails, a physicalOffset naming another place,
a topic that is not ASCII, properties that are not well formed UTF-8 or hold a non-ASCII
KEYS, UNIQ_KEY or TAGS value, the delay topic, an inner batch or INNER_NUM/INNER_BASE properties, a trailing
entry shaped like a damaged ``__CRC32#``.
So every finding still comes from the one Message path; the columns hold only records
about which there is nothing to say.
"""
from __future__ import annotations

import array
import dataclasses
import struct

import construct as cs
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import (MAX_PROPERTIES_LENGTH, MAX_TOPIC_LENGTH_V1, MESSAGE_MAGIC_CODE_V1,
                                       MESSAGE_MAGIC_CODE_V2, MIN_MESSAGE_LENGTH, STORE_TIMESTAMP_AT, MessageHosts,
                                       MessagePrefix)
from rmqtool.formats.crc import CRC32_DIGITS, CRC32_RESERVED_LEN, JAVA_CRC_MASK
from rmqtool.formats.indexfile import index_hash_of, java_string_hash
from rmqtool.formats.sysflag import INNER_BATCH_FLAG, TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE
from rmqtool.store import crc as crc_module
from rmqtool.store.arrays import at_every_byte, dtype_of
from rmqtool.store.message import RECORD_START

# Every header field up to bodyLength, for IPv4 hosts; with IPv6 hosts the prefix holds and
# bodyLength and storeTimestamp are read where MessageHosts puts them
HEADER_DTYPE = dtype_of(cs.Struct(*MessagePrefix.subcons, *MessageHosts[0].subcons))
HEADER_SIZE = HEADER_DTYPE.itemsize
_HEADER_ROW = np.dtype((np.void, HEADER_SIZE))
assert HEADER_SIZE == 88
_HEADER_SIZES = np.array([MessagePrefix.sizeof() + h.sizeof() for h in MessageHosts], np.int64)
_STORE_TIMESTAMP_AT = np.array(STORE_TIMESTAMP_AT, np.int64)
assert HEADER_DTYPE.fields["store_timestamp"][1] == STORE_TIMESTAMP_AT[0]
_INV31 = pow(31, -1, 1 << 32)
_SEP = ord(props.PROPERTY_SEPARATOR)
_NV = ord(props.NAME_VALUE_SEPARATOR)
_SPACE = ord(props.KEY_SEPARATOR)
_NAME_BYTES = 16  # a name's first bytes compared (the names looked for are shorter)
_NAMES = {name: name.encode("ascii") for name in (props.PROPERTY_KEYS, props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
                                                  props.PROPERTY_TAGS, props.PROPERTY_CRC32)}
assert all(len(b) <= 8 for b in _NAMES.values())
_BATCH_NAMES = tuple(n.encode("ascii") for n in (props.PROPERTY_INNER_NUM, props.PROPERTY_INNER_BASE))
assert all(len(b) >= 8 for b in _BATCH_NAMES)  # told apart by their first 8 bytes and their length
_DIGIT_WEIGHTS = np.array([10 ** k for k in range(CRC32_DIGITS)], np.int64)  # least significant first
_TOPIC_MAX = 255  # longer topics (V2 records) are rare: decode_message reads them
# the bytes the properties parse stops at: the separators (below 3, so one signed compare finds them
# with every byte not ASCII), the key separator
assert _SEP < 3 and _NV < 3


@dataclasses.dataclass
class RecordColumns:
    """The plain records of one run, in order, and the topics they name."""
    position: np.ndarray  # file position in the segment
    size: np.ndarray
    queue_id: np.ndarray
    queue_offset: np.ndarray
    sys_flag: np.ndarray
    store_timestamp: np.ndarray
    topic: np.ndarray  # index into topics
    topics: list
    tags_code: np.ndarray  # tagsString2tagsCode of TAGS (0 without)
    crc_entry: np.ndarray  # bool: carries a __CRC32# entry (and it holds)
    key_record: np.ndarray  # for each index key (UNIQ_KEY, then each of KEYS): its record's row
    key_hash: np.ndarray  # indexKeyHashMethod(topic#key)

    def __len__(self) -> int:
        return len(self.position)


def topic_queue_codes(topic, queue_id):
    """(topic index, queue id) arrays as one sortable int64 code a topic-queue."""
    return topic * (1 << 32) + (queue_id & 0xFFFFFFFF)


def topic_queue_of(code: int, topics: list) -> tuple[str, int]:
    """The (topic, queue id) a code of :func:`topic_queue_codes` stands for."""
    queue_id = code & 0xFFFFFFFF
    return topics[code >> 32], queue_id - (1 << 32) if queue_id >= 1 << 31 else queue_id


_powers_cache: dict = {}


def _powers(base: int, n: int) -> np.ndarray:
    """base^0 .. base^(n-1) mod 2^32 as uint32, cached and grown by doubling."""
    have = _powers_cache.get(base)
    if have is None or len(have) < n:
        size = max(n, 1 << 16, 2 * (len(have) if have is not None else 0))
        out = np.empty(size, np.uint32)
        out[0] = 1
        m = 1
        while m < size:  # base^(m + k) = base^k * base^m, wrapping mod 2^32
            take = min(m, size - m)
            np.multiply(out[:take], np.uint32(pow(base, m, 1 << 32)), out=out[m:m + take])
            m += take
        _powers_cache[base] = have = out
    return have[:n]


def _hop(buf: bytes, i: int, stop: int) -> tuple[array.array, int]:
    """Positions of the records whose totalSize and magic code look like a message's, from i."""
    unpack = RECORD_START.unpack_from
    v1, v2 = MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2
    min_length = MIN_MESSAGE_LENGTH
    limit = len(buf)
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
    except struct.error:
        pass
    return out, i


def _crcs(buf: bytes, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The CRC32 of each byte range [start, end) of ``buf``: one C call a range over views of the
    buffer, the loop itself in C (map over builtins, no Python frame a record)."""
    view = memoryview(buf)
    try:
        return np.fromiter(map(crc_module.fast_crc32, map(view.__getitem__, map(slice, start.tolist(), end.tolist()))),
                           np.int64, count=len(start))
    finally:
        view.release()


def _range_hashes(prefix: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """String.hashCode (mod 2^32, uint32) of the byte ranges [start, end) of the joined
    properties, from prefix[i] = sum of byte[j] * 31^-j for j < i; ranges not empty."""
    p31 = _powers(31, int(end.max()) if len(end) else 1)
    return p31[end - 1] * (prefix[end] - prefix[start])


def _split_keys(spaces: np.ndarray, rec: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple:
    """KEYS values [start, end) cut at the spaces inside them, empty pieces left out: (record, start, end)
    of each key, in order."""
    lo = np.searchsorted(spaces, start)
    cuts = np.searchsorted(spaces, end) - lo
    if not cuts.any():
        return rec, start, end
    pieces = cuts + 1
    item = np.repeat(np.arange(len(rec)), pieces)
    k = np.arange(int(pieces.sum())) - np.repeat(np.cumsum(pieces) - pieces, pieces)  # piece number in its value
    at = lo[item] + k  # the space after piece k
    last = k == cuts[item]
    p_start = np.where(k == 0, start[item], spaces[np.maximum(at - 1, 0)] + 1)
    p_end = np.where(last, end[item], spaces[np.minimum(at, len(spaces) - 1)])
    keep = p_end > p_start
    return rec[item[keep]], p_start[keep], p_end[keep]


def column_run(buf: bytes, i: int, stop: int, offset0: int, position0: int, topic_hashes: dict,
               special_topics: frozenset = frozenset(), check_crc: bool = True
               ) -> tuple[int, RecordColumns | None, list]:
    """(where the run stopped, the plain records' columns, positions of the special records).

    Records from ``i`` whole in ``buf`` and starting before ``stop``; the index returned is
    that of the first record not taken (the careful path's). Special records lie inside the
    run, before that index, in order; they are whole and their lengths add up.
    ``offset0`` and ``position0``: the commit log offset and file position of ``buf[0]``;
    special records are given as indices in ``buf``. ``topic_hashes``: a cache of
    String.hashCode("topic#") by topic, kept by the caller. ``special_topics``: topics
    whose records the caller wants as Messages (the delay topic: its tags code is a time).
    ``check_crc`` False (dispatch: checkMessageAndReturnSize without checkCRC): body CRCs
    and physicalOffset fields are not looked at, and make no record special.
    """
    positions, _ = _hop(buf, i, stop)
    if not positions:
        return i, None, []
    arr = np.frombuffer(buf, np.uint8)
    limit = len(buf)
    pos = np.frombuffer(positions, np.int64)
    h = at_every_byte(buf, _HEADER_ROW)[pos].view(HEADER_DTYPE)
    total = h["total_size"].astype(np.int64)
    end = pos + total
    sys_flag = h["sys_flag"].astype(np.int64)
    hosts = (sys_flag >> 4) & 3  # MessageHosts' index
    body_len = h["body_length"].astype(np.int64)
    store_timestamp = h["store_timestamp"].astype(np.int64)
    body_at = pos + HEADER_SIZE
    if hosts.any():  # IPv6 hosts move every field after the prefix
        header_size = _HEADER_SIZES[hosts]
        whole = total >= header_size  # where the fields can be read at all
        body_at = pos + header_size
        at = np.where(whole, body_at - 4, pos)
        body_len = np.where(whole, at_every_byte(buf, ">i4")[at], -1).astype(np.int64)
        at = np.where(whole, pos + _STORE_TIMESTAMP_AT[hosts], pos)
        store_timestamp = at_every_byte(buf, ">i8")[at].astype(np.int64)
    body_end = body_at + body_len
    magic = h["magic_code"]
    v2 = magic == MESSAGE_MAGIC_CODE_V2
    length_size = np.where(v2, 2, 1)
    # the tail as read_tail reads it; the first record whose lengths do not add up ends the run
    fits = (body_len >= 0) & (body_end + length_size + 2 <= end)
    be = np.where(fits, body_end, pos)
    b0 = arr[be].astype(np.int64)
    b1 = arr[np.minimum(be + 1, limit - 1)].astype(np.int64)
    topic_len = np.where(v2, (b0 << 8) | b1, b0)
    fits &= np.where(v2, b0 < 0x80, b0 <= MAX_TOPIC_LENGTH_V1)  # the sign bit: read_tail refuses it
    topic_at = be + length_size
    topic_end = topic_at + topic_len
    props_at = topic_end + 2
    fits &= props_at <= end
    te = np.where(fits, topic_end, pos)
    props_field = (arr[te].astype(np.int64) << 8) | arr[te + 1]
    props_len = end - props_at
    fits &= (props_field == props_len) & (props_len <= MAX_PROPERTIES_LENGTH)
    bad = np.flatnonzero(~fits)
    n = int(bad[0]) if len(bad) else len(pos)
    stop_at = int(pos[n]) if n < len(pos) else int(end[-1])
    if n == 0:
        return stop_at, None, []
    if n < len(pos):
        pos, h, total, end, sys_flag, store_timestamp = (pos[:n], h[:n], total[:n], end[:n], sys_flag[:n],
                                                         store_timestamp[:n])
        body_at, body_end, topic_at, topic_end, props_at = (body_at[:n], body_end[:n], topic_at[:n],
                                                            topic_end[:n], props_at[:n])
        topic_len = topic_len[:n]
    special = ((sys_flag & INNER_BATCH_FLAG) != 0) | (topic_len > _TOPIC_MAX)
    if check_crc:
        special |= h["physical_offset"] != offset0 + pos
        # body CRCs: one C call a record over a view of the buffer
        crcs = _crcs(buf, body_at, body_end)
        stored_crc = h["body_crc"].astype(np.int64)
        special |= np.where(body_end > body_at, (crcs & JAVA_CRC_MASK) != stored_crc, stored_crc != 0)

    # topics: by length, then by their bytes (one topic a run is the common case)
    topic_idx = np.zeros(n, np.int64)
    topics: list = []
    seen: dict = {}
    ok_topic = ~special
    lengths = topic_len[ok_topic]
    for length in (lengths[:1].tolist() if len(lengths) and (lengths == lengths[0]).all()
                   else np.unique(lengths).tolist()):
        rows = np.flatnonzero(ok_topic & (topic_len == length))
        if length == 0:
            names, inverse = [b""], np.zeros(len(rows), np.int64)
        else:
            raw = at_every_byte(buf, f"V{length}")[topic_at[rows]]  # each topic's bytes as one value
            if (raw == raw[0]).all():
                names, inverse = [raw[0].tobytes()], np.zeros(len(rows), np.int64)
            else:
                names, inverse = np.unique(raw, return_inverse=True)
        ids = []
        for name in names:
            b = bytes(name)
            if not b.isascii():  # decode_message decides (UTF-8 or not)
                ids.append(-1)
                continue
            t = b.decode("ascii")
            k = seen.get(t)
            if k is None:
                k = seen[t] = len(topics)
                topics.append(t)
            ids.append(k)
        topic_idx[rows] = np.array(ids, np.int64)[np.asarray(inverse).reshape(-1)]
    special |= topic_idx < 0
    for t in special_topics & seen.keys():
        special |= topic_idx == seen[t]

    # properties: joined with a separator between records, parsed all at once
    pstarts = props_at.tolist()
    pends = end.tolist()
    # map over builtins: the per-record loop runs in C, not as Python bytecode
    joined = b"\x02".join(map(buf.__getitem__, map(slice, pstarts, pends))) + bytes(_NAME_BYTES + CRC32_RESERVED_LEN)
    J = np.frombuffer(joined, np.uint8)
    plen = end - props_at
    rec_start = np.zeros(n, np.int64)
    np.cumsum(plen[:-1] + 1, out=rec_start[1:])
    rec_end = rec_start + plen
    data_len = int(rec_end[-1])
    body = J[:data_len]

    def record_of(at: np.ndarray) -> np.ndarray:
        return np.searchsorted(rec_start, at, side="right") - 1

    # separators, spaces, non-ASCII bytes (and zero bytes, which no test below picks): a few a record
    marks = np.flatnonzero((body.view(np.int8) < 3) | (body == _SPACE))
    kinds = body[marks]
    nonascii = marks[kinds >= 0x80]
    if len(nonascii):  # fine outside the values hashed below, if the whole string is UTF-8
        for r in np.unique(record_of(nonascii)).tolist():
            try:
                joined[rec_start[r]:rec_end[r]].decode("utf-8")
            except UnicodeDecodeError:
                special[r] = True
    sep_k = np.flatnonzero(kinds == _SEP)  # each separator's place among the marks
    seps = marks[sep_k]
    item_start = np.concatenate(([0], seps + 1))
    item_end = np.concatenate((seps, [data_len]))
    # the record of each item: the join's separators (rec_end) are separators too, and the item
    # after each one starts the next record (sorted merges by counting, not searches)
    item_rec = np.zeros(len(item_start), np.int64)
    item_rec[np.searchsorted(seps, rec_end[:-1]) + 1] = 1
    np.cumsum(item_rec, out=item_rec)
    empty = item_end == item_start
    # an empty entry only at a record's end: its trailing separator, or no properties at all
    special[item_rec[empty & (item_end != rec_end[item_rec])]] = True
    is_nv = kinds == _NV
    nvs = marks[is_nv]
    nv_before = np.zeros(len(marks) + 1, np.int64)  # name-value separators among the first k marks
    np.cumsum(is_nv, out=nv_before[1:])
    first_nv = np.concatenate(([0], nv_before[sep_k]))  # before each item's start
    nv_count = np.concatenate((nv_before[sep_k], nv_before[-1:])) - first_nv  # inside each item
    full = ~empty
    nv_at = nvs[np.minimum(first_nv, max(len(nvs) - 1, 0))] if len(nvs) else np.zeros(len(item_start), np.int64)
    well = (nv_count == 1) & (nv_at > item_start) & (nv_at < item_end - 1)
    special[item_rec[full & ~well]] = True
    item_ok = full & well & ~special[item_rec]
    items = np.flatnonzero(item_ok)
    i_start, i_end, i_nv, i_rec = item_start[items], item_end[items], nv_at[items], item_rec[items]
    name_len = i_nv - i_start
    heads = at_every_byte(J, ">u8")[i_start]
    for name in _BATCH_NAMES:  # a batch consume queue unit takes INNER_BASE and INNER_NUM: check_message reads them
        code = int.from_bytes(name[:8], "big")
        special[i_rec[(name_len == len(name)) & (heads == np.uint64(code))]] = True
    wanted = {}
    for key, name in _NAMES.items():
        width = len(name)
        code = int.from_bytes(name.ljust(8, b"\0"), "big")
        keep_bits = np.uint64(((1 << (8 * width)) - 1) << (8 * (8 - width)))
        hit = (name_len == width) & ((heads & keep_bits) == np.uint64(code))
        wanted[key] = np.flatnonzero(hit)
        counts = np.bincount(i_rec[wanted[key]], minlength=n)
        special |= counts > 1  # a duplicate: the last wins, decode_message knows
    prefix = np.empty(len(J) + 1, np.uint32)  # uint32 arithmetic wraps mod 2^32, as hashCode's does
    prefix[0] = 0
    np.multiply(J, _powers(_INV31, len(J)), out=prefix[1:])  # in place: no temporary the size of J
    np.cumsum(prefix[1:], out=prefix[1:])

    # __CRC32#: valid only as the record's last 20 bytes (stored_record_crc); anything else is special
    crc_entry = np.zeros(n, bool)
    crc_items = wanted[props.PROPERTY_CRC32]
    if len(crc_items):
        recs = i_rec[crc_items]
        shaped = (plen[recs] >= CRC32_RESERVED_LEN) & (i_start[crc_items] == rec_end[recs] - CRC32_RESERVED_LEN) & (
            i_end[crc_items] == rec_end[recs] - 1)
        digits = sliding_window_view(J, CRC32_DIGITS)[i_nv[crc_items] + 1].astype(np.int64) - ord("0")
        shaped &= ((digits >= 0) & (digits <= 9)).all(axis=1)
        special[recs[~shaped]] = True
        recs = recs[shaped]
        stored = digits[shaped] @ _DIGIT_WEIGHTS
        keep = ~special[recs]
        recs, stored = recs[keep], stored[keep]
        if check_crc:
            got = _crcs(buf, pos[recs], end[recs] - CRC32_RESERVED_LEN)
            good = (got & JAVA_CRC_MASK) == stored
        else:
            good = np.ones(len(recs), bool)
        special[recs[~good]] = True
        crc_entry[recs[good]] = True
    # a trailing entry of the reserved shape that is not a readable __CRC32#: crc_entry_state decides
    tail_shape = (plen >= CRC32_RESERVED_LEN) & (J[np.maximum(rec_end - 1, 0)] == _SEP) & (
        J[np.maximum(rec_end - 12, 0)] == _NV)
    special |= tail_shape & ~crc_entry

    # TAGS: tagsString2tagsCode
    tags_code = np.zeros(n, np.int64)
    t_items = wanted[props.PROPERTY_TAGS]
    if len(t_items):
        tags_code[i_rec[t_items]] = _range_hashes(prefix, i_nv[t_items] + 1, i_end[t_items]).view(np.int32)

    if len(nonascii):  # hashCode runs over UTF-16 units: a hashed value that is not ASCII goes to decode_message
        hashed = np.concatenate([wanted[n] for n in (props.PROPERTY_TAGS, props.PROPERTY_KEYS,
                                                     props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)])
        wide = np.searchsorted(nonascii, i_nv[hashed] + 1) < np.searchsorted(nonascii, i_end[hashed])
        special[i_rec[hashed[wide]]] = True
    # index keys: UNIQ_KEY, then each non-empty key of KEYS split at spaces (IndexService.buildIndex)
    plain = ~special
    indexed = plain & ((sys_flag & TRANSACTION_MASK) != TRANSACTION_ROLLBACK_TYPE)  # buildIndex skips rollback
    key_parts = []
    it = wanted[props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
    it = it[indexed[i_rec[it]]]
    if len(it):
        key_parts.append((i_rec[it], i_nv[it] + 1, i_end[it]))
    it = wanted[props.PROPERTY_KEYS]
    it = it[indexed[i_rec[it]]]
    if len(it):
        key_parts.append(_split_keys(marks[kinds == _SPACE], i_rec[it], i_nv[it] + 1, i_end[it]))
    rows_of_plain = np.cumsum(plain) - 1  # row of each plain record in the columns
    if key_parts:
        key_rec = np.concatenate([p[0] for p in key_parts])
        v_start = np.concatenate([p[1] for p in key_parts])
        v_end = np.concatenate([p[2] for p in key_parts])
        order = np.argsort(key_rec, kind="stable")  # record order; UNIQ_KEY before KEYS in a record
        key_rec, v_start, v_end = key_rec[order], v_start[order], v_end[order]
        value_hash = _range_hashes(prefix, v_start, v_end)
        topic_hash = np.array([topic_hashes.get(t) if t in topic_hashes else
                               topic_hashes.setdefault(t, java_string_hash(t + "#") & 0xFFFFFFFF)
                               for t in topics], np.uint32)
        p31 = _powers(31, int((v_end - v_start).max()) + 1)
        full_hash = topic_hash[topic_idx[key_rec]] * p31[v_end - v_start] + value_hash
        key_hash = index_hash_of(full_hash)
        key_record = rows_of_plain[key_rec]
    else:
        key_hash = np.zeros(0, np.int64)
        key_record = np.zeros(0, np.int64)
    keep = np.flatnonzero(plain)
    columns = RecordColumns(position=pos[keep] + position0, size=total[keep], queue_id=h["queue_id"][keep].astype(np.int64),
                            queue_offset=h["queue_offset"][keep].astype(np.int64), sys_flag=sys_flag[keep],
                            store_timestamp=store_timestamp[keep], topic=topic_idx[keep],
                            topics=topics, tags_code=tags_code[keep], crc_entry=crc_entry[keep],
                            key_record=key_record, key_hash=key_hash)
    return stop_at, columns, pos[special].tolist()
