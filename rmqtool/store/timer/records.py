"""The timer log's units against the commit log records they name, all at once.

A unit is plain when getMessageByCommitOffset would find its own record: offsetPy/sizePy lie
inside one commit log file, below the recovered end, and hold one whole record of exactly
sizePy bytes (the record rule, :func:`rmqtool.store.record_kernel.records_at`) of topic
``rmq_sys_wheel_timer`` whose REAL_TOPIC hashes to the unit's hashCodeOfRealTopic. There is
nothing to say about a plain unit; verify decodes the others one by one as the broker reads
them (``MessageStoreAtLoad.record``), so every finding still comes from that one path.
"""
from __future__ import annotations

import itertools
import os
import pathlib
import re

import construct as cs
import numpy as np

from rmqtool import native
from rmqtool.errors import StoreAccessError
from rmqtool.formats.commitlog import MESSAGE_MAGIC_CODES
from rmqtool.formats.indexfile import java_string_hash
from rmqtool.formats.properties import (NAME_VALUE_SEPARATOR, PROPERTY_REAL_TOPIC, PROPERTY_SEPARATOR,
                                        bytes_to_properties)
from rmqtool.formats.timerlog import TIMER_TOPIC
from rmqtool.store.arrays import at_every_byte, dtype_of
from rmqtool.store.commitlog_paths import commit_log_paths_of, list_commit_log
from rmqtool.store.paths import COMMITLOG_DIR
from rmqtool.store.record_kernel import HEADER_DTYPE, records_at
from rmqtool.store.record_rule import (FIELD_SCHEMAS, HEADER_SIZE_BY_HOSTS, HOSTS_SHIFT, PROPERTIES_LENGTH_SIZE,
                                       TOPIC_LENGTH_SIZE_V1, TOPIC_LENGTH_SIZE_V2)
from rmqtool.store.segments import discover

_TOPIC = TIMER_TOPIC.encode("ascii")


_REAL_TOPIC_ENTRY = PROPERTY_REAL_TOPIC.encode("ascii") + NAME_VALUE_SEPARATOR.encode("ascii")
# the entry and its value up to the next separator (a match's span: no group, no Python frame a match)
_ENTRY_VALUE = re.compile(re.escape(_REAL_TOPIC_ENTRY) + b"[^" + PROPERTY_SEPARATOR.encode("ascii") + b"]*")


_FEW_TOPICS = 64  # up to this many real topics among the units, values are compared with each one's


def _value_hash(value: bytes, hashes: dict) -> int | None:
    """String.hashCode of a REAL_TOPIC value bytes_to_properties surely reads as it is (ASCII,
    no ``\u0001``); None otherwise."""
    c = hashes.get(value)
    if c is None and value.isascii() and NAME_VALUE_SEPARATOR.encode("ascii") not in value:
        c = hashes[value] = java_string_hash(value.decode("ascii"))
    return c


_ENTRY = re.compile(re.escape(_REAL_TOPIC_ENTRY))


def _real_topic_hashes(buf, starts: np.ndarray, ends: np.ndarray, hashes: dict,
                       expected: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_scan_real_topic_hashes`, the common records first: where each range holds
    ``REAL_TOPIC\u0001`` once (found by a pass for the name alone, no value span to make), at an
    entry's start, and its value is the first value seen of its unit's hash (its bytes, then
    the range's end or a separator), the code is that value's. The others are scanned."""
    codes = np.zeros(len(starts), np.int64)
    known = np.zeros(len(starts), bool)
    if not len(starts):
        return codes, known
    at = np.fromiter(map(re.Match.start, _ENTRY.finditer(buf, int(starts.min()), int(ends.max()))), dtype=np.int64)
    if not len(at):
        return codes, known
    first = np.searchsorted(at, starts, side="left")
    count = np.searchsorted(at, ends - len(_REAL_TOPIC_ENTRY), side="right") - first
    data = np.frombuffer(buf, np.uint8)
    one = np.flatnonzero(count == 1)
    a = at[first[one]]
    one = one[(a == starts[one]) | (data[np.maximum(a - 1, 0)] == ord(PROPERTY_SEPARATOR))]
    v = at[first[one]] + len(_REAL_TOPIC_ENTRY)
    want = expected[one] if expected is not None else np.zeros(len(one), np.int64)
    left = np.ones(len(one), bool)
    groups = np.unique(want).tolist()
    for e in groups if len(groups) <= _FEW_TOPICS else ():
        # a unit hash's first value; without the hashes, the first values, up to _FEW_TOPICS of them
        for _ in range(1 if expected is not None else _FEW_TOPICS):
            pick = _first_value(data, v, ends[one], left & (want == e), hashes)
            if pick is None:
                break
            k, value, c = pick
            left[k] = False
            if c is None:
                continue  # an empty or odd value: scanned
            rows = np.append(np.flatnonzero(left & (want == e)), k)
            n = len(value)
            rows = rows[v[rows] + n <= ends[one[rows]]]
            same = at_every_byte(buf, np.dtype((np.void, n)))[v[rows]] == np.void(value)
            after = v[rows] + n
            ended = after == ends[one[rows]]
            ended[~ended] = data[after[~ended]] == ord(PROPERTY_SEPARATOR)
            rows = rows[same & ended]
            codes[one[rows]], known[one[rows]] = c, True
            left[rows] = False
    rest = np.flatnonzero(~known)
    if len(rest):
        c, k = _scan_real_topic_hashes(buf, starts[rest], ends[rest], hashes,
                                       expected[rest] if expected is not None else None)
        codes[rest], known[rest] = c, k
    return codes, known


def real_topic_hashes(buf, starts: np.ndarray, ends: np.ndarray, hashes: dict,
                      expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, known) of :func:`_real_topic_hashes`' sure reading, a range at a time in the
    native kernel when it is there (the same rule; a range neither is sure of is read by
    bytes_to_properties, so the verdicts are the same either way)."""
    kernel = native.kernel
    if kernel is None:
        return _real_topic_hashes(buf, starts, ends, hashes, expected)
    codes, known = np.empty(len(starts), np.int64), np.empty(len(starts), bool)
    kernel.real_topic_hashes(buf, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(ends, np.int64),
                             _REAL_TOPIC_ENTRY, ord(PROPERTY_SEPARATOR), ord(NAME_VALUE_SEPARATOR), codes, known)
    return codes, known


def _first_value(data: np.ndarray, v: np.ndarray, ends: np.ndarray, rows: np.ndarray, hashes: dict):
    """(row, value, its hash or None) of the first of the rows (a mask) whose value starts at
    ``v`` (up to a separator or its range's end); None without such a row."""
    some = np.flatnonzero(rows)
    if not len(some):
        return None
    k = int(some[0])
    seps = np.flatnonzero(data[int(v[k]):int(ends[k])] == ord(PROPERTY_SEPARATOR))
    value = data[int(v[k]):int(v[k]) + int(seps[0]) if len(seps) else int(ends[k])].tobytes()
    return k, value, _value_hash(value, hashes) if value else None


def _scan_real_topic_hashes(buf, starts: np.ndarray, ends: np.ndarray, hashes: dict,
                            expected: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The hash of REAL_TOPIC in each properties range [start, end) of ``buf``, all found in
    one regex pass, where bytes_to_properties surely reads that value: exactly one
    ``REAL_TOPIC\u0001`` in the range, starting an entry, its value non-empty ASCII with no
    ``\u0001``. (codes, known): the rest is left to bytes_to_properties.

    ``expected``: the hash each range's unit holds; with few of them, the values equal to the
    first value of each are found by comparing bytes (no sort), the rest hashed one distinct
    value at a time."""
    codes = np.zeros(len(starts), np.int64)
    known = np.zeros(len(starts), bool)
    if not len(starts):
        return codes, known
    spans = np.fromiter(itertools.chain.from_iterable(
        map(re.Match.span, _ENTRY_VALUE.finditer(buf, int(starts.min()), int(ends.max())))), dtype=np.int64)
    if not len(spans):
        return codes, known
    at, value_end = spans[0::2], spans[1::2]
    value_at = at + len(_REAL_TOPIC_ENTRY)
    first = np.searchsorted(at, starts, side="left")
    count = np.searchsorted(at, ends - len(_REAL_TOPIC_ENTRY), side="right") - first
    one = np.flatnonzero(count == 1)
    a, v = at[first[one]], value_at[first[one]]
    length = np.minimum(value_end[first[one]], ends[one]) - v
    entry = (a == starts[one]) | (np.frombuffer(buf, np.uint8)[np.maximum(a - 1, 0)] == ord(PROPERTY_SEPARATOR))
    one, v, length = one[entry & (length > 0)], v[entry & (length > 0)], length[entry & (length > 0)]
    for n in np.unique(length).tolist():  # the values of one length at a time, each distinct one hashed once
        rows = np.flatnonzero(length == n)
        values = at_every_byte(buf, np.dtype((np.void, n)))[v[rows]]
        left = np.ones(len(rows), bool)
        wanted = np.unique(expected[one[rows]]) if expected is not None else ()
        if len(wanted) <= _FEW_TOPICS:
            want = expected[one[rows]] if expected is not None else None
            for e in wanted.tolist() if len(wanted) else ():
                candidates = np.flatnonzero(left & (want == e))
                same = candidates[values[candidates] == values[candidates[0]]]
                c = _value_hash(values[candidates[0]].tobytes(), hashes)
                codes[one[rows[same]]], known[one[rows[same]]] = (c, True) if c is not None else (0, False)
                left[same] = False
        rest = np.flatnonzero(left)
        if not len(rest):
            continue
        distinct, which = np.unique(values[rest], return_inverse=True)
        code, valid = np.zeros(len(distinct), np.int64), np.zeros(len(distinct), bool)
        for k, value in enumerate(distinct.tolist()):
            c = _value_hash(value, hashes)
            if c is not None:
                code[k], valid[k] = c, True
        codes[one[rows[rest]]], known[one[rows[rest]]] = code[which], valid[which]
    return codes, known


UNBOUNDED = (0, (1 << 63) - 1)  # (low, end) of plain_units over every commit log file as it is


def plain_units(root, offset_py: np.ndarray, size_py: np.ndarray, topic_hash: np.ndarray, low: int,
                end: int) -> np.ndarray:
    """A mask over units (their offsetPy, sizePy, hashCodeOfRealTopic columns): plain ones.

    A unit's verdict reads only its own record's bytes: the mask over [low, end) is the
    :data:`UNBOUNDED` one with :func:`within` (what lets it be read before the end is known)."""
    plain = np.zeros(len(offset_py), bool)
    offset_py = offset_py if offset_py.dtype == np.int64 else offset_py.astype(np.int64)  # (no copy of a column)
    size_py = size_py.astype(np.int64)
    hashes: dict[str, int] = {}
    given = commit_log_paths_of(root)  # a commit log in several directories
    listing = list_commit_log(given, root) if given is not None else \
        discover(pathlib.Path(root) / COMMITLOG_DIR, required=False)
    for seg in listing.segments:
        if seg.size < HEADER_DTYPE.itemsize:
            continue
        last = min(end, seg.base_offset + seg.size)  # getData: inside this file, below the end
        rows = np.flatnonzero(within(offset_py, size_py, max(low, seg.base_offset), last)
                              & (size_py >= HEADER_DTYPE.itemsize))
        if not len(rows):
            continue
        # in commit log order and a window of records at a time, read into one reused buffer:
        # each window's regex pass covers its own records, and memory stays that of a window
        at = offset_py[rows]
        if len(rows) > 1 and not (at[1:] >= at[:-1]).all():  # units come in commit log order, mostly
            order = np.argsort(at, kind="stable")
            rows, at = rows[order], at[order]
        at -= seg.base_offset  # (in place: arrays of a million units are kept few)
        reach = size_py[rows]
        reach += at
        np.maximum.accumulate(reach, out=reach)  # how far the records up to each one reach
        window = bytearray()
        with open(seg.path, "rb", buffering=0) as f:
            lo = 0
            while lo < len(rows):
                hi = min(lo + _BATCH, max(lo + 1, int(np.searchsorted(reach, at[lo] + _WINDOW, side="right"))))
                start, stop = int(at[lo]), int(reach[hi - 1])
                if len(window) < stop - start:
                    window = bytearray(stop - start)
                got = 0
                while got < stop - start and (n := os.preadv(f.fileno(), [memoryview(window)[got:stop - start]],
                                                             start + got)):
                    got += n
                if got < stop - start:  # the file shrank under us
                    raise StoreAccessError(f"read {got} bytes of {stop - start}", seg.path, start)
                batch = rows[lo:hi]
                plain[batch] = _plain_in(memoryview(window)[:stop - start], at[lo:hi] - start, size_py[batch],
                                         topic_hash[batch], hashes)
                lo = hi
    return plain


def within(offset_py: np.ndarray, size_py: np.ndarray, low: int, end: int) -> np.ndarray:
    """The units whose records lie in [low, end) of the commit log: plain_units' bounds (not
    offset + size <= end: a damaged offset near 2**63 overflows the sum)."""
    return (offset_py >= low) & (offset_py <= end - size_py.astype(np.int64, copy=False))


_BATCH = 1 << 13  # units matched at once: a window of a few MB, which the passes over it find in the cache
_WINDOW = 32 << 20  # bytes of commit log read at once (a window holds one record at least, however long)


# the record rule's fields plain_sure reads (IPv4 hosts; the others are left to records_at)
_PLAIN_LAYOUT = (HEADER_DTYPE.fields["total_size"][1], HEADER_DTYPE.fields["magic_code"][1],
                 HEADER_DTYPE.fields["sys_flag"][1], HEADER_DTYPE.fields["body_length"][1], HEADER_SIZE_BY_HOSTS[0],
                 HOSTS_SHIFT, *MESSAGE_MAGIC_CODES, TOPIC_LENGTH_SIZE_V1, TOPIC_LENGTH_SIZE_V2,
                 PROPERTIES_LENGTH_SIZE)
assert len(MESSAGE_MAGIC_CODES) == 2 and HEADER_DTYPE.itemsize == HEADER_SIZE_BY_HOSTS[0]
assert [HEADER_DTYPE[f].str for f in ("total_size", "magic_code", "sys_flag", "body_length")] == \
    [">i4", ">u4", ">i4", ">i4"]
assert [dtype_of(cs.Struct(FIELD_SCHEMAS[f]))[0].str for f in ("topic_length_v1", "topic_length_v2",
                                                                "properties_length")] == \
    [f"|i{TOPIC_LENGTH_SIZE_V1}", f">i{TOPIC_LENGTH_SIZE_V2}", f">i{PROPERTIES_LENGTH_SIZE}"]


def _plain_in(buf, pos: np.ndarray, size_py: np.ndarray, topic_hash: np.ndarray, hashes: dict) -> np.ndarray:
    """plain_units' verdict on units whose records start at ``pos`` of ``buf`` (a window of a commit
    log file): the native kernel's plain_sure first (the common case), :func:`_plain_rule` on the
    units it did not find plain."""
    kernel = native.kernel
    if kernel is None:
        return _plain_rule(buf, pos, size_py, topic_hash, hashes)
    ok = np.zeros(len(pos), bool)
    found = kernel.plain_sure(buf, np.ascontiguousarray(pos, np.int64), np.ascontiguousarray(size_py, np.int64),
                              np.ascontiguousarray(topic_hash, np.int64), _PLAIN_LAYOUT, _TOPIC, _REAL_TOPIC_ENTRY,
                              ord(PROPERTY_SEPARATOR), ord(NAME_VALUE_SEPARATOR), ok)
    if found is None:  # a layout it does not read
        return _plain_rule(buf, pos, size_py, topic_hash, hashes)
    if found < len(pos):
        rest = np.flatnonzero(~ok)
        ok[rest] = _plain_rule(buf, pos[rest], size_py[rest], topic_hash[rest], hashes)
    return ok


def _plain_rule(buf, pos: np.ndarray, size_py: np.ndarray, topic_hash: np.ndarray, hashes: dict) -> np.ndarray:
    """The verdict of the record rule (:func:`records_at`) and the properties' reading, all at once."""
    parts = records_at(buf, pos)
    ok = (parts["whole"] & (parts["total_size"] == size_py)
          & np.isin(parts["magic_code"], list(MESSAGE_MAGIC_CODES))
          & (parts["topic_end"] - parts["topic_at"] == len(_TOPIC)))
    topics = at_every_byte(buf, np.dtype((np.void, len(_TOPIC))))[parts["topic_at"][ok]]
    ok[np.flatnonzero(ok)] = topics == np.void(_TOPIC)
    found = np.flatnonzero(ok)
    code, known = real_topic_hashes(buf, parts["properties_at"][found], parts["end"][found], hashes,
                                    topic_hash[found].astype(np.int64))
    ok[found[known]] = code[known] == topic_hash[found[known]]
    for k in found[~known].tolist():  # the others as the broker reads properties
        real = bytes_to_properties(bytes(buf[parts["properties_at"][k]:parts["end"][k]]))[0].get(PROPERTY_REAL_TOPIC)
        code = hashes.get(real)
        if code is None and real is not None:
            code = hashes[real] = java_string_hash(real)
        ok[k] = code is not None and code == topic_hash[k]
    del parts, topics  # views of the window: released before it is read into again
    return ok
