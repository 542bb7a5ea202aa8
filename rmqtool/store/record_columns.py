"""The clean records of a buffer as numpy columns: the whole-store checks' decoder.

:func:`column_run` takes the kernel's clean records of a window
(:func:`rmqtool.store.record_kernel.clean_records`: the totalSize chain walked once, every
header field read with one gather, the lengths checked) and, in named stages, sorts out
the records there is something to say about, then parses the properties of all records
at once: joined, split on the separators with numpy, the names RocketMQ's dispatch reads
(KEYS, UNIQ_KEY, TAGS, ``__CRC32#``) found by their bytes, and their values hashed as
Java's ``String.hashCode`` with prefix sums.

A record that is clean but not plain is left to the Message path (its position is in
``special``): a CRC that fails, a physicalOffset naming another place, a topic that is
not ASCII, properties that are not well formed UTF-8 or hold a non-ASCII KEYS, UNIQ_KEY
or TAGS value, the delay topic, an inner batch or INNER_NUM/INNER_BASE properties, a
trailing entry shaped like a damaged ``__CRC32#``, the property recover --keep-past-damage
gives the record it puts in place of a damaged one. So every finding still comes from the
one Message path; the columns hold only records about which there is nothing to say.
"""
from __future__ import annotations

import dataclasses

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from rmqtool import native
from rmqtool.formats import properties as props
from rmqtool.formats.crc import CRC32_DIGITS, CRC32_ENTRY_END, CRC32_RESERVED_LEN, JAVA_CRC_MASK
from rmqtool.formats.indexfile import index_hash_of, java_string_hash
from rmqtool.formats.sysflag import INNER_BATCH_FLAG, TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE
from rmqtool.store.arrays import at_every_byte
from rmqtool.store.crc import crcs_of
from rmqtool.store.record_kernel import DIGIT_WEIGHTS, CleanRecords, body_crc_verdicts, clean_records

_INV31 = pow(31, -1, 1 << 32)  # String.hashCode's prefix sums divide by 31^i (mod 2^32)
_SEP = ord(props.PROPERTY_SEPARATOR)
_NV = ord(props.NAME_VALUE_SEPARATOR)
_SPACE = ord(props.KEY_SEPARATOR)
_JOIN = props.PROPERTY_SEPARATOR.encode("ascii")  # between two records' properties: one more separator
_FIRST_NON_ASCII = 0x80
# the bytes the properties parse stops at: the separators (below 3, so one signed compare finds them
# with every byte not ASCII), the key separator
_BELOW_SEPARATORS = 3
assert _SEP < _BELOW_SEPARATORS and _NV < _BELOW_SEPARATORS
_NAME_BYTES = 16  # a name's first bytes compared (the names looked for are shorter)
_NAME_HEAD = np.dtype(">u8")  # a name's first 8 bytes as one number
_NAMES = {name: name.encode("ascii") for name in (props.PROPERTY_KEYS, props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
                                                  props.PROPERTY_TAGS, props.PROPERTY_CRC32)}
assert all(len(b) <= _NAME_HEAD.itemsize for b in _NAMES.values())
_BATCH_NAMES = tuple(n.encode("ascii") for n in (props.PROPERTY_INNER_NUM, props.PROPERTY_INNER_BASE))
assert all(len(b) >= _NAME_HEAD.itemsize for b in _BATCH_NAMES)  # told apart by their first 8 bytes and their length
# and a record recover --keep-past-damage put in place: verify reports it from the Message path
_ASIDE_NAMES = (*_BATCH_NAMES, props.PROPERTY_QUARANTINED.encode("ascii"))
assert all(len(b) >= _NAME_HEAD.itemsize for b in _ASIDE_NAMES)
_ZERO = ord("0")
# the name-value separator of a trailing __CRC32# entry, counted from the properties' end
_CRC_NV_FROM_END = len(CRC32_ENTRY_END) + CRC32_DIGITS + len(props.NAME_VALUE_SEPARATOR)
_TOPIC_MAX = 255  # longer topics (V2 records) are rare: decode_message reads them


def _head_code(name: bytes) -> int:
    """A name's first 8 bytes (zero-padded) as the number _NAME_HEAD reads."""
    return int.from_bytes(name[:_NAME_HEAD.itemsize].ljust(_NAME_HEAD.itemsize, b"\0"), "big")


def _head_mask(width: int) -> np.uint64:
    """The bits of a _NAME_HEAD number that hold its first ``width`` bytes."""
    bits = 8 * _NAME_HEAD.itemsize
    return np.uint64(((1 << (8 * width)) - 1) << (bits - 8 * width))


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
               special_topics: frozenset = frozenset(), check_crc: bool = True, hints: np.ndarray | None = None
               ) -> tuple[int, RecordColumns | None, list]:
    """(where the run stopped, the plain records' columns, positions of the special records).

    The records are the kernel's clean records of ``buf`` from ``i``, starting before
    ``stop`` (:func:`rmqtool.store.record_kernel.clean_records`); the index returned is that of
    the first record not taken (the careful path's). Special records lie inside the run,
    before that index, in order. ``offset0`` and ``position0``: the commit log offset and
    file position of ``buf[0]``; special records are given as indices in ``buf``.
    ``topic_hashes``: a cache of String.hashCode("topic#") by topic, kept by the caller.
    ``special_topics``: topics whose records the caller wants as Messages (the delay topic:
    its tags code is a time). ``check_crc`` False (dispatch: checkMessageAndReturnSize
    without checkCRC): body CRCs and physicalOffset fields are not looked at, and make no
    record special. ``hints``: indices in ``buf`` where records are said to start (sorted,
    unique), for the kernel's speed only.

    The stages, in order (each may mark more records special; the later ones look only at
    the records still plain): the header's verdicts, the topics, the properties parsed all
    at once, the ``__CRC32#`` entries, TAGS, the index keys.
    """
    records = clean_records(buf, i, stop, hints=hints)
    if not len(records):
        return records.stop, None, []
    special = _special_by_header(buf, records, offset0, check_crc)
    topics, topic_index = _topics(buf, records, special, special_topics)
    kernel = native.kernel
    done = None if kernel is None else _native_property_stages(kernel, buf, records, special, topics, topic_index,
                                                               topic_hashes, check_crc)
    if done is not None:
        crc_entry, tags_code, key_record, key_hash = done
    else:
        items = _property_items(buf, records, special)
        crc_entry = _crc_entries(buf, records, items, special, check_crc)
        tags_code = _tags_codes(items, len(records))
        _special_by_wide_values(items, special)
        key_record, key_hash = _index_keys(records, items, special, topics, topic_index, topic_hashes)
    # every record plain (the common case): the arrays as they are; a field at a time (numpy copies
    # picked rows of a structured array a field at a time, at many times the cost)
    keep = np.flatnonzero(~special) if special.any() else slice(None)
    header = records.header
    columns = RecordColumns(position=records.position[keep] + position0, size=records.size[keep],
                            queue_id=header["queue_id"][keep].astype(np.int64),
                            queue_offset=header["queue_offset"][keep].astype(np.int64),
                            sys_flag=header["sys_flag"][keep].astype(np.int64),
                            store_timestamp=records.store_timestamp[keep], topic=topic_index[keep], topics=topics,
                            tags_code=tags_code[keep], crc_entry=crc_entry[keep],
                            key_record=key_record, key_hash=key_hash)
    return records.stop, columns, records.position[special].tolist()


def _special_by_header(buf, records: CleanRecords, offset0: int, check_crc: bool) -> np.ndarray:
    """Stage 1: records the header already sends to the Message path: an inner batch, a topic
    longer than the columns read, and (when CRCs are checked) a physicalOffset naming
    another place or a body CRC that fails."""
    sys_flag = records.header["sys_flag"]
    special = ((sys_flag & INNER_BATCH_FLAG) != 0) | (records.topic_length > _TOPIC_MAX)
    if check_crc:
        special |= records.header["physical_offset"] != offset0 + records.position
        special |= ~body_crc_verdicts(buf, records)
    return special


def _topics(buf, records: CleanRecords, special: np.ndarray, special_topics: frozenset) -> tuple[list, np.ndarray]:
    """Stage 2: (the run's topics, each record's index into them), by length, then by their bytes
    (one topic a run is the common case). A topic that is not ASCII (decode_message decides
    whether it is UTF-8) and the caller's special topics make their records special."""
    topic_at = records.topic_at
    kernel = native.kernel
    if kernel is not None:  # one topic a run, found by the kernel without a gather
        first = kernel.same_topic(buf, np.ascontiguousarray(topic_at), np.ascontiguousarray(records.topic_end),
                                  special)
        name = bytes(buf[topic_at[first]:records.topic_end[first]]) if first >= 0 else None
        if name is not None and name.isascii():
            t = name.decode("ascii")
            if t in special_topics:
                special[:] = True
            return [t], np.zeros(len(records), np.int64)
    topic_len = records.topic_length
    topic_index = np.zeros(len(records), np.int64)
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
            if not b.isascii():
                ids.append(-1)
                continue
            t = b.decode("ascii")
            k = seen.get(t)
            if k is None:
                k = seen[t] = len(topics)
                topics.append(t)
            ids.append(k)
        topic_index[rows] = np.array(ids, np.int64)[np.asarray(inverse).reshape(-1)]
    special |= topic_index < 0
    for t in special_topics & seen.keys():
        special |= topic_index == seen[t]
    return topics, topic_index


@dataclasses.dataclass
class _PropertyItems:
    """The properties of a run joined (a separator between records) and cut into items.

    Positions are indices into ``joined``; per record: where its properties start and end;
    per mark (a separator, a name-value separator, a space, a byte not ASCII): where and which;
    per item kept (well formed, of a record still plain): its span, its name-value separator,
    its record, its name's length and first 8 bytes; ``wanted``: the kept items of each name
    dispatch reads; ``prefix``: String.hashCode prefix sums over ``joined``.
    """
    joined: bytes
    data: np.ndarray  # joined as uint8, padded past the end
    record_start: np.ndarray
    record_end: np.ndarray
    marks: np.ndarray
    kinds: np.ndarray
    nonascii: np.ndarray
    item_start: np.ndarray
    item_end: np.ndarray
    item_nv: np.ndarray
    item_record: np.ndarray
    wanted: dict
    prefix: np.ndarray


def _property_items(buf, records: CleanRecords, special: np.ndarray) -> _PropertyItems:
    """Stage 3: every record's properties parsed at once: joined, split on the separators with
    numpy, each item checked for one name-value separator with a name and a value. A record
    whose properties are not well formed UTF-8, hold an empty entry before their end, an item
    not of that shape, INNER_NUM/INNER_BASE or a name dispatch reads twice is special."""
    n = len(records)
    starts = records.properties_at.tolist()
    ends = records.end.tolist()
    # map over builtins: the per-record loop runs in C, not as Python bytecode
    joined = _JOIN.join(map(buf.__getitem__, map(slice, starts, ends))) + bytes(_NAME_BYTES + CRC32_RESERVED_LEN)
    data = np.frombuffer(joined, np.uint8)
    length = records.properties_length
    record_start = np.zeros(n, np.int64)
    np.cumsum(length[:-1] + len(_JOIN), out=record_start[1:])
    record_end = record_start + length
    data_len = int(record_end[-1])
    body = data[:data_len]

    # separators, spaces, non-ASCII bytes (and zero bytes, which no test below picks): a few a record
    marks = np.flatnonzero((body.view(np.int8) < _BELOW_SEPARATORS) | (body == _SPACE))
    kinds = body[marks]
    nonascii = marks[kinds >= _FIRST_NON_ASCII]
    if len(nonascii):  # fine outside the values hashed below, if the whole string is UTF-8
        for r in np.unique(np.searchsorted(record_start, nonascii, side="right") - 1).tolist():
            try:
                joined[record_start[r]:record_end[r]].decode("utf-8")
            except UnicodeDecodeError:
                special[r] = True
    sep_k = np.flatnonzero(kinds == _SEP)  # each separator's place among the marks
    seps = marks[sep_k]
    item_start = np.concatenate(([0], seps + 1))
    item_end = np.concatenate((seps, [data_len]))
    # the record of each item: the join's separators (record_end) are separators too, and the item
    # after each one starts the next record (sorted merges by counting, not searches)
    item_record = np.zeros(len(item_start), np.int64)
    item_record[np.searchsorted(seps, record_end[:-1]) + 1] = 1
    np.cumsum(item_record, out=item_record)
    empty = item_end == item_start
    # an empty entry only at a record's end: its trailing separator, or no properties at all
    special[item_record[empty & (item_end != record_end[item_record])]] = True
    is_nv = kinds == _NV
    nvs = marks[is_nv]
    nv_before = np.zeros(len(marks) + 1, np.int64)  # name-value separators among the first k marks
    np.cumsum(is_nv, out=nv_before[1:])
    first_nv = np.concatenate(([0], nv_before[sep_k]))  # before each item's start
    nv_count = np.concatenate((nv_before[sep_k], nv_before[-1:])) - first_nv  # inside each item
    nv_at = nvs[np.minimum(first_nv, max(len(nvs) - 1, 0))] if len(nvs) else np.zeros(len(item_start), np.int64)
    well = (nv_count == 1) & (nv_at > item_start) & (nv_at < item_end - 1)
    special[item_record[~empty & ~well]] = True
    kept = np.flatnonzero(~empty & well & ~special[item_record])
    i_start, i_end, i_nv, i_record = item_start[kept], item_end[kept], nv_at[kept], item_record[kept]
    name_len = i_nv - i_start
    heads = at_every_byte(data, _NAME_HEAD)[i_start]
    for name in _ASIDE_NAMES:  # a batch consume queue unit takes INNER_BASE and INNER_NUM: check_message reads them
        special[i_record[(name_len == len(name)) & (heads == np.uint64(_head_code(name)))]] = True
    wanted = {}
    for key, name in _NAMES.items():
        hit = (name_len == len(name)) & ((heads & _head_mask(len(name))) == np.uint64(_head_code(name)))
        wanted[key] = np.flatnonzero(hit)
        special |= np.bincount(i_record[wanted[key]], minlength=n) > 1  # a duplicate: the last wins, decode_message knows
    prefix = np.empty(len(data) + 1, np.uint32)  # uint32 arithmetic wraps mod 2^32, as hashCode's does
    prefix[0] = 0
    np.multiply(data, _powers(_INV31, len(data)), out=prefix[1:])  # in place: no temporary the size of data
    np.cumsum(prefix[1:], out=prefix[1:])
    return _PropertyItems(joined, data, record_start, record_end, marks, kinds, nonascii, i_start, i_end, i_nv,
                          i_record, wanted, prefix)


def _crc_entries(buf, records: CleanRecords, items: _PropertyItems, special: np.ndarray,
                 check_crc: bool) -> np.ndarray:
    """Stage 4: which records carry a ``__CRC32#`` entry that holds. The entry is valid only as the
    record's last CRC32_RESERVED_LEN bytes (stored_record_crc); one anywhere else, one whose
    CRC fails, or a trailing entry of the reserved shape that is not a readable ``__CRC32#``
    (crc_entry_state decides) makes its record special."""
    crc_entry = np.zeros(len(records), bool)
    crc_items = items.wanted[props.PROPERTY_CRC32]
    length = records.properties_length
    if len(crc_items):
        recs = items.item_record[crc_items]
        last_bytes = items.record_end[recs] - CRC32_RESERVED_LEN
        shaped = (length[recs] >= CRC32_RESERVED_LEN) & (items.item_start[crc_items] == last_bytes) & (
            items.item_end[crc_items] == items.record_end[recs] - len(CRC32_ENTRY_END))
        digits = sliding_window_view(items.data, CRC32_DIGITS)[items.item_nv[crc_items] + 1].astype(np.int64) - _ZERO
        shaped &= ((digits >= 0) & (digits <= 9)).all(axis=1)
        special[recs[~shaped]] = True
        recs = recs[shaped]
        stored = digits[shaped] @ DIGIT_WEIGHTS
        keep = ~special[recs]
        recs, stored = recs[keep], stored[keep]
        if check_crc:
            got = crcs_of(buf, records.position[recs], records.end[recs] - CRC32_RESERVED_LEN)
            good = (got & JAVA_CRC_MASK) == stored
        else:
            good = np.ones(len(recs), bool)
        special[recs[~good]] = True
        crc_entry[recs[good]] = True
    data, record_end = items.data, items.record_end
    tail_shape = (length >= CRC32_RESERVED_LEN) & (data[np.maximum(record_end - len(CRC32_ENTRY_END), 0)] == _SEP) & (
        data[np.maximum(record_end - _CRC_NV_FROM_END, 0)] == _NV)
    special |= tail_shape & ~crc_entry
    return crc_entry


def _tags_codes(items: _PropertyItems, n: int) -> np.ndarray:
    """Stage 5: tagsString2tagsCode of each record's TAGS (String.hashCode; 0 without)."""
    tags_code = np.zeros(n, np.int64)
    tags = items.wanted[props.PROPERTY_TAGS]
    if len(tags):
        tags_code[items.item_record[tags]] = _range_hashes(items.prefix, items.item_nv[tags] + 1,
                                                           items.item_end[tags]).view(np.int32)
    return tags_code


def _special_by_wide_values(items: _PropertyItems, special: np.ndarray) -> None:
    """Stage 6: hashCode runs over UTF-16 units: a hashed value (TAGS, KEYS, UNIQ_KEY) that is not
    ASCII goes to decode_message."""
    if not len(items.nonascii):
        return
    hashed = np.concatenate([items.wanted[n] for n in (props.PROPERTY_TAGS, props.PROPERTY_KEYS,
                                                       props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)])
    wide = (np.searchsorted(items.nonascii, items.item_nv[hashed] + 1)
            < np.searchsorted(items.nonascii, items.item_end[hashed]))
    special[items.item_record[hashed[wide]]] = True


def _index_keys(records: CleanRecords, items: _PropertyItems, special: np.ndarray, topics: list,
                topic_index: np.ndarray, topic_hashes: dict) -> tuple[np.ndarray, np.ndarray]:
    """Stage 7: (row of each index key's record among the plain ones, indexKeyHashMethod(topic#key)):
    UNIQ_KEY, then each non-empty key of KEYS split at spaces (IndexService.buildIndex), of
    the plain records that are not a rollback (buildIndex skips those)."""
    plain = ~special
    sys_flag = records.header["sys_flag"].astype(np.int64)
    indexed = plain & ((sys_flag & TRANSACTION_MASK) != TRANSACTION_ROLLBACK_TYPE)
    record_parts, start_parts, end_parts = [], [], []
    uniq = items.wanted[props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
    uniq = uniq[indexed[items.item_record[uniq]]]
    if len(uniq):
        record_parts.append(items.item_record[uniq])
        start_parts.append(items.item_nv[uniq] + 1)
        end_parts.append(items.item_end[uniq])
    keys = items.wanted[props.PROPERTY_KEYS]
    keys = keys[indexed[items.item_record[keys]]]
    if len(keys):
        key_record, key_start, key_end = _split_keys(items.marks[items.kinds == _SPACE], items.item_record[keys],
                                                     items.item_nv[keys] + 1, items.item_end[keys])
        record_parts.append(key_record)
        start_parts.append(key_start)
        end_parts.append(key_end)
    if not record_parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    key_rec = np.concatenate(record_parts)
    v_start = np.concatenate(start_parts)
    v_end = np.concatenate(end_parts)
    order = np.argsort(key_rec, kind="stable")  # record order; UNIQ_KEY before KEYS in a record
    key_rec, v_start, v_end = key_rec[order], v_start[order], v_end[order]
    value_hash = _range_hashes(items.prefix, v_start, v_end)
    topic_hash = _topic_hashes_of(topics, topic_hashes)
    p31 = _powers(31, int((v_end - v_start).max()) + 1)
    full_hash = topic_hash[topic_index[key_rec]] * p31[v_end - v_start] + value_hash
    rows_of_plain = np.cumsum(plain) - 1  # row of each plain record in the columns
    return rows_of_plain[key_rec], index_hash_of(full_hash)


# the native kernel's reading of stages 3 to 7 (columns.c): names, separators and the __CRC32# entry's shape
_NATIVE_SPEC = (_SEP, _NV, _SPACE, tuple(_NAMES[n] for n in (props.PROPERTY_KEYS, props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
                                                              props.PROPERTY_TAGS, props.PROPERTY_CRC32)),
                _ASIDE_NAMES, CRC32_RESERVED_LEN, len(CRC32_ENTRY_END), CRC32_DIGITS, _CRC_NV_FROM_END,
                tuple(DIGIT_WEIGHTS.tolist()))


def _topic_hashes_of(topics: list, topic_hashes: dict) -> np.ndarray:
    """String.hashCode("topic#") of each topic (uint32), from the caller's cache."""
    return np.array([topic_hashes.get(t) if t in topic_hashes else
                     topic_hashes.setdefault(t, java_string_hash(t + "#") & 0xFFFFFFFF) for t in topics], np.uint32)


def _native_property_stages(kernel, buf, records: CleanRecords, special: np.ndarray, topics: list,
                            topic_index: np.ndarray, topic_hashes: dict, check_crc: bool):
    """Stages 3 to 7 by the native kernel, a record at a time (columns.c's property_columns):
    (crc_entry, tags_code, key_record, key_hash) as the Python stages give them, or None when
    the kernel declines (the Python stages then run). The __CRC32# entries' CRCs are taken here."""
    n = len(records)
    sys_flag = records.header["sys_flag"]
    indexed = np.ascontiguousarray((sys_flag & TRANSACTION_MASK) != TRANSACTION_ROLLBACK_TYPE)
    # a special record's topic index may be -1 or name no topic: it reads the 0 appended
    topic_hash = np.append(_topic_hashes_of(topics, topic_hashes), np.uint32(0))[topic_index]
    tags_code = np.empty(n, np.int64)
    crc_stored = np.empty(n, np.int64)
    properties_at = np.ascontiguousarray(records.properties_at, np.int64)
    end = np.ascontiguousarray(records.end, np.int64)
    record_parts, hash_parts = [], []
    first, room = 0, 2 * n + 16
    while True:
        key_record = np.empty(room, np.int64)
        key_hash = np.empty(room, np.uint32)
        got = kernel.property_columns(buf, properties_at, end, special, indexed, topic_hash, tags_code,
                                      crc_stored, key_record, key_hash, _NATIVE_SPEC, first)
        if got is None:
            return None
        first, keys = got
        record_parts.append(key_record[:keys])
        hash_parts.append(key_hash[:keys])
        if first >= n:
            break
        room = max(2 * (n - first) + 16, 2 * room)  # a record's keys did not fit: more room, until they do
    # stage 4's CRC: a plain record's trailing __CRC32# entry holds
    crc_entry = crc_stored >= 0
    recs = np.flatnonzero(crc_entry)
    if check_crc and len(recs):
        got = crcs_of(buf, records.position[recs], records.end[recs] - CRC32_RESERVED_LEN)
        bad = recs[(got & JAVA_CRC_MASK) != crc_stored[recs]]
        special[bad] = True
        crc_entry[bad] = False
    key_record = record_parts[0] if len(record_parts) == 1 else np.concatenate(record_parts)
    key_hash = hash_parts[0] if len(hash_parts) == 1 else np.concatenate(hash_parts)
    plain = ~special
    keep = plain[key_record]
    if not keep.all():
        key_record, key_hash = key_record[keep], key_hash[keep]
    rows_of_plain = np.cumsum(plain) - 1  # row of each plain record in the columns
    return crc_entry, tags_code, rows_of_plain[key_record], index_hash_of(key_hash)
