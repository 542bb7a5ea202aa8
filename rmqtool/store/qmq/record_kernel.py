"""The QMQ message-log kernel: a segment's run of clean message records, found once, as columns.

:func:`clean_run` walks the record chain of a segment's mapped bytes from a position with a
tight loop (magic, attributes and subject length, then the payload size after the subject:
``size = header + payload``, ``formats/qmq/messagelog.py``), then reads every field of the
records it found with numpy at once. The run ends at the first item that is not a clean
message record by ``messagelog.parse_record``'s rule (the same stages: a message's magic
and attributes, signed lengths, the record inside the segment, a UTF-8 subject); that item,
and everything the careful path does (blank and end-of-segment records, damage and its
resynchronisation, a record reaching into the zeros past a short file), stays with
``messagelog._scan``. CRC verdicts are one C call a payload (``store/crc.fast_crc32``).

Subjects are decoded once per distinct bytes into a :class:`SubjectTable` shared by every
run of a scan, so a subject is one small integer in the columns.
"""
from __future__ import annotations

import array
import dataclasses
import struct

import construct as cs
import numpy as np

from rmqtool.formats.qmq.messagelog import (ATTR_MESSAGE_RECORD, MESSAGE_LOG_MAGIC_V1, MESSAGE_LOG_MAGIC_V2,
                                            MESSAGE_LOG_MAGIC_V3, MIN_RECORD_BYTES, RecordPrefix, header_size)
from rmqtool.store import crc as crc_module
from rmqtool.store.arrays import at_every_byte, dtype_of

# Where the fields lie from a record's start (formats/qmq/messagelog.py's layout): the prefix
# (magic, attributes, timestamp), the sequence, the subject length, the subject; the payload
# size is the header's last 4 bytes and the payload CRC (V2, V3) the 8 before it.
ATTRIBUTES_AT = 4
TIMESTAMP_AT = ATTRIBUTES_AT + 1
SEQUENCE_AT = MIN_RECORD_BYTES
SUBJECT_LENGTH_AT = SEQUENCE_AT + 8
SUBJECT_AT = SUBJECT_LENGTH_AT + 2
HEADER_BEFORE_SUBJECT = {m: header_size(0, m) for m in (MESSAGE_LOG_MAGIC_V1, MESSAGE_LOG_MAGIC_V2,
                                                        MESSAGE_LOG_MAGIC_V3)}
assert HEADER_BEFORE_SUBJECT[MESSAGE_LOG_MAGIC_V3] == SUBJECT_AT + 8 + 4
assert HEADER_BEFORE_SUBJECT[MESSAGE_LOG_MAGIC_V1] == SUBJECT_AT + 4
_HOP = struct.Struct(f">Ib{SUBJECT_LENGTH_AT - TIMESTAMP_AT}xh")  # magic, attributes, subject length
_PAYLOAD_SIZE = struct.Struct(">i")
assert ATTR_MESSAGE_RECORD == 0  # the walk takes a record whose attributes are falsy

_ROUNDS = 64
# What the kernel reads of a record with numpy: the header up to the subject, and the 12
# bytes before the payload (V2, V3: payload CRC and size; V1: the size is the last 4)
HEAD_DTYPE = dtype_of(cs.Struct(*RecordPrefix.subcons, "sequence" / cs.Int64sb, "subject_length" / cs.Int16sb))
TAIL_DTYPE = dtype_of(cs.Struct("payload_crc" / cs.Int64sb, "payload_size" / cs.Int32sb))
_TAIL_ROW = np.dtype((np.void, TAIL_DTYPE.itemsize))
assert HEAD_DTYPE.itemsize == SUBJECT_AT and HEAD_DTYPE.names[2] == "timestamp"
assert HEAD_DTYPE.fields["sequence"][1] == SEQUENCE_AT and HEAD_DTYPE.fields["timestamp"][1] == TIMESTAMP_AT


class SubjectTable:
    """Subjects by id, each decoded once: ``ids`` maps a subject's raw bytes to its id (None:
    not UTF-8, not a clean record's subject)."""

    def __init__(self):
        self.names: list[str] = []
        self._by_name: dict[str, int] = {}
        self.ids: dict[bytes, int | None] = {}

    def id_of_raw(self, raw: bytes) -> int | None:
        if raw in self.ids:
            return self.ids[raw]
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.ids[raw] = None
            return None
        sid = self.ids[raw] = self.id_of(name)
        return sid

    def id_of(self, name: str) -> int:
        sid = self._by_name.get(name)
        if sid is None:
            sid = self._by_name[name] = len(self.names)
            self.names.append(name)
        return sid

    def get(self, name: str) -> int | None:
        return self._by_name.get(name)


_ARRAYS = ("position", "size", "header_size", "magic", "timestamp", "sequence", "subject_id", "payload_crc",
           "crc_ok")


@dataclasses.dataclass(slots=True)
class MessageRun:
    """Clean message records of one segment, in order; every array is indexed by record.
    ``payload_crc`` is 0 for V1 records (no CRC field); ``crc_ok`` is None when the payloads
    were not checked, else a verdict a record (True for V1: nothing to check)."""
    position: np.ndarray  # in the segment file
    size: np.ndarray
    header_size: np.ndarray
    magic: np.ndarray
    timestamp: np.ndarray
    sequence: np.ndarray
    subject_id: np.ndarray
    payload_crc: np.ndarray
    crc_ok: np.ndarray | None
    stop: int  # where the run ended: the careful path goes on from here

    def __len__(self) -> int:
        return len(self.position)

    def rows(self, keep) -> "MessageRun":
        """The records ``keep`` picks (a mask or indices)."""
        return MessageRun(*(None if getattr(self, f) is None else getattr(self, f)[keep] for f in _ARRAYS),
                          stop=self.stop)


def _walk(buf, i: int, stop: int, limit: int) -> tuple[array.array, array.array, int]:
    """The chain of whole message records from ``i`` (each starting before ``stop``, ending by
    ``limit``) whose magic, attributes and lengths are a clean record's; their positions,
    subject lengths, and where the walk stopped."""
    hop, size_at = _HOP.unpack_from, _PAYLOAD_SIZE.unpack_from
    v1, v2, v3 = MESSAGE_LOG_MAGIC_V1, MESSAGE_LOG_MAGIC_V2, MESSAGE_LOG_MAGIC_V3
    after_v3, after_v1 = HEADER_BEFORE_SUBJECT[v3], HEADER_BEFORE_SUBJECT[v1]
    positions, lengths = array.array("q"), array.array("q")
    add, add_length = positions.append, lengths.append
    try:
        while i < stop:
            magic, attributes, subject_length = hop(buf, i)
            if attributes or subject_length < 0:
                break
            if magic == v3 or magic == v2:
                at = i + after_v3 + subject_length
            elif magic == v1:
                at = i + after_v1 + subject_length
            else:
                break
            (payload_size,) = size_at(buf, at - 4)
            end = at + payload_size
            if payload_size < 0 or end > limit:
                break
            add(i)
            add_length(subject_length)
            i = end
    except struct.error:  # a header cut by the mapped bytes' end: the careful path reads it
        pass
    return positions, lengths, i


ROW_BYTES = 64  # of each record, gathered once: the header, and the subject and tail when short
_ROW = np.dtype((np.void, ROW_BYTES))


class _Rows:
    """The first ROW_BYTES bytes of each record at ``pos`` (zeros past the mapped bytes),
    copied out in one pass over the mapped bytes; the header fields, each payload's CRC and
    size and the subjects are then read from these rows (from the mapped bytes only when a
    long subject puts them past the row)."""

    def __init__(self, buf, pos: np.ndarray, raw: np.ndarray | None = None):
        self.buf, self.pos = buf, pos
        if raw is None:
            whole = pos + ROW_BYTES <= len(buf)
            # a buffer shorter than a row (a segment cut short) has no whole row: all are read below
            raw = at_every_byte(buf, _ROW)[np.where(whole, pos, 0)] if len(buf) >= ROW_BYTES \
                else np.zeros(len(pos), _ROW)
            for k in np.flatnonzero(~whole).tolist():
                raw[k] = np.void(bytes(buf[int(pos[k]):int(pos[k]) + ROW_BYTES]).ljust(ROW_BYTES, b"\0"))
        self.raw = raw
        self.bytes = raw.view(np.uint8).reshape(len(pos), ROW_BYTES)
        self.head = np.ndarray((len(pos),), HEAD_DTYPE, raw, 0, (ROW_BYTES,))

    def take(self, n: int, more: "_Rows") -> "_Rows":
        """The first n rows, then ``more``'s."""
        if not len(more.pos):
            return self if n == len(self.pos) else _Rows(self.buf, self.pos[:n], self.raw[:n])
        return _Rows(self.buf, np.concatenate((self.pos[:n], more.pos)), np.concatenate((self.raw[:n], more.raw)))

    def tails(self, header: np.ndarray, readable: np.ndarray) -> np.ndarray:
        """The TAIL_DTYPE fields ending ``header`` bytes into each record (where its payload
        starts); read only where ``readable`` (zeros elsewhere)."""
        at = header - TAIL_DTYPE.itemsize
        inside = readable & (at >= 0) & (at <= ROW_BYTES - TAIL_DTYPE.itemsize)
        out = np.zeros(len(self.pos), _TAIL_ROW)
        where = np.where(inside, at, -1)
        for offset in np.flatnonzero(np.bincount(where + 1)[1:]).tolist():  # a subject length: a column of the rows
            column = np.ndarray((len(self.pos),), _TAIL_ROW, self.raw, offset, (ROW_BYTES,))
            picked = where == offset
            out[picked] = column[picked]
        rows = np.flatnonzero(readable & ~inside)
        out[rows] = at_every_byte(self.buf, _TAIL_ROW)[self.pos[rows] + at[rows]]
        return out.view(TAIL_DTYPE)

    def subjects(self, rows: np.ndarray, length: int) -> np.ndarray:
        """The subjects of these rows, all ``length`` bytes long, as an (n, length) byte array."""
        if SUBJECT_AT + length <= ROW_BYTES:
            return np.ascontiguousarray(self.bytes[rows, SUBJECT_AT:SUBJECT_AT + length])
        picked = at_every_byte(self.buf, np.dtype((np.void, length)))[self.pos[rows] + SUBJECT_AT]
        return picked.view(np.uint8).reshape(len(rows), length)


def _header_sizes(magic: np.ndarray, subject_length: np.ndarray) -> np.ndarray:
    return np.where(magic == MESSAGE_LOG_MAGIC_V1, HEADER_BEFORE_SUBJECT[MESSAGE_LOG_MAGIC_V1],
                    HEADER_BEFORE_SUBJECT[MESSAGE_LOG_MAGIC_V3]) + subject_length


def _hinted_chain(buf, start: int, stop: int, limit: int, hints: np.ndarray) -> tuple[_Rows, int, int, np.ndarray]:
    """The leading part of the walk from ``start`` proven from candidate positions (sorted,
    unique; the consumer logs' units say where records start): every candidate is read by
    ``_walk``'s rule at once, and the chain holds while each is a record that ends exactly
    where the next candidate begins (the last one: that it is a record). The candidates'
    rows, how many are proven, where the proof ends (``_walk`` goes on from there) and the
    candidates' tails. A wrong or missing candidate only ends the proof early."""
    c = hints[hints.searchsorted(start):hints.searchsorted(stop)]  # a window's: a slice, not a mask of them all
    c = c[c + HEAD_DTYPE.itemsize <= limit]
    if not len(c) or c[0] != start:
        return _Rows(buf, c[:0]), 0, start, None
    rows = _Rows(buf, c)
    magic = rows.head["magic"]
    subject_length = rows.head["subject_length"].astype(np.int64)
    known = (magic == MESSAGE_LOG_MAGIC_V1) | (magic == MESSAGE_LOG_MAGIC_V2) | (magic == MESSAGE_LOG_MAGIC_V3)
    header = _header_sizes(magic, subject_length)
    readable = known & (rows.head["attributes"] == ATTR_MESSAGE_RECORD) & (subject_length >= 0) & \
        (c + header <= limit)
    tails = rows.tails(header, readable)
    payload_size = tails["payload_size"].astype(np.int64)
    end = c + header + payload_size
    chained = readable & (payload_size >= 0) & (end <= limit) & (end == np.append(c[1:], end[-1]))
    broken = np.flatnonzero(~chained)
    m = int(broken[0]) if len(broken) else len(c)
    return rows, m, int(c[m]) if m < len(c) else int(end[-1]), tails


def _subject_ids(rows: _Rows, lengths: np.ndarray, subjects: SubjectTable) -> tuple[np.ndarray, int]:
    """Each record's subject id; and how many records lead with a UTF-8 subject (the run ends
    at the first that does not). Distinct subjects are found per subject length: grouped by
    their first and last 8 bytes, longer ones then proven byte for byte equal to their
    group's first row (else compared row by row); only distinct byte strings are decoded."""
    ids = np.full(len(lengths), -1, np.int32)
    for length in np.flatnonzero(np.bincount(lengths)).tolist():
        picked = np.flatnonzero(lengths == length)
        if length == 0:
            sid = subjects.id_of_raw(b"")
            ids[picked] = -2 if sid is None else sid
            continue
        raw = rows.subjects(picked, length)
        keys = raw.view((np.void, length))[:, 0]
        if length >= 8 and _by_key(raw, keys, picked, ids, subjects):
            continue
        for _ in range(_ROUNDS):  # a round a distinct subject of this length
            if not len(picked):
                break
            same = keys == keys[0]
            sid = subjects.id_of_raw(bytes(keys[0]))
            ids[picked[same]] = -2 if sid is None else sid
            picked, keys = picked[~same], keys[~same]
        for r, k in zip(picked.tolist(), keys.tolist()):  # many subjects of one length: a dict lookup a record
            sid = subjects.id_of_raw(bytes(k))
            ids[r] = -2 if sid is None else sid
    bad = np.flatnonzero(ids == -2)
    return ids, int(bad[0]) if len(bad) else len(lengths)


def _by_key(raw: np.ndarray, keys: np.ndarray, picked: np.ndarray, ids: np.ndarray, subjects: SubjectTable) -> bool:
    """Subject ids of same-length subjects (``raw``: their bytes, a C-contiguous row each, at
    least 8) grouped by the pair of their first and last 8 bytes, two 64-bit numbers read in
    place: equal pairs are equal subjects up to 16 bytes, and longer ones are then proven
    equal to their group's first row. False (nothing set) when there are too many distinct
    pairs or two subjects share one."""
    count, length = raw.shape
    first8 = np.ndarray((count,), "<u8", raw, 0, (length,)).copy()  # aligned: the rounds compare faster
    last8 = np.ndarray((count,), "<u8", raw, length - 8, (length,)).copy()
    group = np.full(count, -1, np.int64)
    firsts = []
    for _ in range(_ROUNDS):  # a round a distinct pair: the rows of a pair are all unassigned until its round
        first = int((group < 0).argmax())
        if group[first] >= 0:
            break
        group[(first8 == first8[first]) & (last8 == last8[first])] = len(firsts)
        firsts.append(first)
    if (group < 0).any() or (length > 16 and not (keys == keys[np.array(firsts)][group]).all()):
        return False
    sids = np.array([-2 if (sid := subjects.id_of_raw(bytes(keys[f]))) is None else sid for f in firsts], np.int32)
    ids[picked] = sids[group]
    return True


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted (a sort: numpy's hashing unique is slower on large arrays).
    Values in a few long ascending runs (the consumer logs' offsets and sequences, one run a
    subject) are merged by the stable sort (timsort) several times faster than the default
    sort, which is faster on values in no order."""
    runs = np.count_nonzero(values[1:] < values[:-1]) + 1 if len(values) else 0
    values = np.sort(values, kind="stable" if runs <= len(values) // 1024 + 16 else "quicksort")
    return values[np.r_[True, values[1:] != values[:-1]]] if len(values) else values


def members(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Whether each value is in ``sorted_set`` (sorted, unique): ``np.isin`` by a binary search."""
    if not len(sorted_set):
        return np.zeros(len(values), bool)
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values


def clean_run(buf, start: int, stop: int, limit: int, subjects: SubjectTable, check_crc: bool = True,
              hints: np.ndarray | None = None) -> MessageRun:
    """The clean message records of ``buf`` (a segment's mapped bytes) from ``start``: one walk
    of the chain, then every column at once. ``stop``: records start before it (the written
    end); ``limit``: they end by it (the mapped bytes' end, at most the segment's size).
    ``hints``: candidate record positions (sorted, unique) that let the walk's start be proven
    at once (:func:`_hinted_chain`)."""
    rows, proven, tails = _Rows(buf, np.zeros(0, np.int64)), 0, None
    if hints is not None and len(hints):
        rows, proven, start, tails = _hinted_chain(buf, start, stop, limit, hints)
    positions, _, stopped = _walk(buf, start, stop, limit)
    if len(positions):
        tails = None
    rows = rows.take(proven, _Rows(buf, np.frombuffer(positions, np.int64)))
    pos, head = rows.pos, rows.head
    subject_length = head["subject_length"].astype(np.int64)
    subject_id, n = _subject_ids(rows, subject_length, subjects) if len(pos) else (np.zeros(0, np.int32), 0)
    magic = head["magic"].astype(np.int64)
    header = _header_sizes(magic, subject_length)
    tail = tails[:proven] if tails is not None else rows.tails(header, np.ones(len(pos), bool))
    if n < len(pos):
        stopped = int(pos[n])
        pos, head, header, subject_id, magic, tail = pos[:n], head[:n], header[:n], subject_id[:n], magic[:n], tail[:n]
    v1 = magic == MESSAGE_LOG_MAGIC_V1
    payload_at = pos + header
    size = header + tail["payload_size"].astype(np.int64)
    payload_crc = np.where(v1, 0, tail["payload_crc"].astype(np.int64))
    crc_ok = None
    if check_crc:
        crc_ok = v1 | (crc_module.crcs_of(buf, payload_at, pos + size) == payload_crc)
    return MessageRun(pos, size, header, magic, head["timestamp"].astype(np.int64),
                      head["sequence"].astype(np.int64), subject_id, payload_crc, crc_ok, stopped)


def single_run(record, subjects: SubjectTable, check_crc: bool = True) -> MessageRun:
    """One record of the careful path (a ``messagelog.MessageRecord``) as a run of one."""
    def one(value, dtype=np.int64):
        return np.array([value], dtype)
    crc_ok = None if not check_crc else one(record.payload_crc_ok is not False, bool)
    return MessageRun(one(record.position), one(record.size), one(record.header_size), one(record.magic),
                      one(record.timestamp), one(record.sequence), one(subjects.id_of(record.subject), np.int32),
                      one(record.payload_crc or 0), crc_ok, record.position + record.size)


@dataclasses.dataclass(slots=True)
class LogColumns:
    """Every message record of a message log as the files hold them, in scan order (segments
    by base offset): what verify checks and the start simulation read, a column a field."""
    subjects: SubjectTable
    paths: list[str]  # segment files, by segment index
    segment: np.ndarray  # the segment index of each record
    offset: np.ndarray  # message log offset of the record's first byte
    bases: np.ndarray  # the base offset of each segment, by segment index
    size: np.ndarray
    header_size: np.ndarray
    magic: np.ndarray
    sequence: np.ndarray
    subject_id: np.ndarray
    crc_ok: np.ndarray | None
    timestamp: np.ndarray | None = None  # kept when the builder was asked (recover's plan writes units)
    # the message log offset where the written records (and damage) end: the first segment's
    # base when there are none; never past a segment's written bytes (messagelog.item_end)
    written_end: int = 0

    def __len__(self) -> int:
        return len(self.offset)

    @property
    def end(self) -> np.ndarray:
        return self.offset + self.size

    @property
    def position(self) -> np.ndarray:
        """Each record's position in its segment file (computed, not held)."""
        return self.offset - self.bases[self.segment]

    def subject_names(self) -> set[str]:
        return {self.subjects.names[i] for i in self.subject_ids_present()}

    def subject_ids_present(self) -> list[int]:
        return np.flatnonzero(np.bincount(self.subject_id, minlength=len(self.subjects.names))).tolist()

    def validated_prefixes(self) -> dict[str, int]:
        """Of each segment file, where the run of records from position 0 that QMQ's segment
        validator accepts one by one ends (0: none): chained from 0, a V2 or V3 magic (the
        validator reads a CRC field in every record) and the payload's CRC holding."""
        out = {}
        if self.crc_ok is None:
            return out
        ok = (self.magic != MESSAGE_LOG_MAGIC_V1) & self.crc_ok
        bounds = np.flatnonzero(np.diff(self.segment)) + 1
        for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(self)]):
            if lo == hi:
                continue
            pos = self.offset[lo:hi] - self.bases[int(self.segment[lo])]  # one segment's records
            end = pos + self.size[lo:hi]
            chained = pos == np.concatenate(([0], end[:-1]))
            bad = np.flatnonzero(~(chained & ok[lo:hi]))
            m = int(bad[0]) if len(bad) else hi - lo
            out[self.paths[int(self.segment[lo])]] = int(end[m - 1]) if m else 0
        return out


# LogColumns' columns filled from each run, with their types: the segment's index and the
# message log offset come from the run's segment, the rest from the run's column of that name.
# Sizes fit 32 bits (a record lies inside a 1 GB segment) and a magic 32 unsigned bits.
_BUILT = (("segment", np.int32), ("offset", np.int64), ("size", np.int32),
          ("header_size", np.int32), ("magic", np.uint32), ("sequence", np.int64), ("subject_id", np.int32),
          ("crc_ok", np.bool_))


class LogColumnsBuilder:
    """Runs of the segments of one log, gathered into :class:`LogColumns`: each run is copied
    into the columns as it comes (kept no longer than its segment's window), into arrays
    sized for ``expect`` records that double when more come. ``timestamps``: keep each
    record's timestamp too."""

    def __init__(self, subjects: SubjectTable, check_crc: bool = True, expect: int = 0, timestamps: bool = False):
        self.subjects, self.check_crc = subjects, check_crc
        self.paths: list[str] = []
        self._bases: list[int] = []
        self._fields = (_BUILT if check_crc else _BUILT[:-1]) + ((("timestamp", np.int64),) if timestamps else ())
        self._columns = {name: np.empty(max(expect, 1024), dtype) for name, dtype in self._fields}
        self._count = 0
        self.written_end: int | None = None

    def segment(self, path: str, base_offset: int) -> int:
        self.paths.append(path)
        self._bases.append(base_offset)
        if self.written_end is None:
            self.written_end = base_offset
        return len(self.paths) - 1

    def reached(self, end: int | None) -> None:
        """The log's bytes go on to ``end`` (a scanned item's :func:`messagelog.item_end`)."""
        if end is not None and end > self.written_end:
            self.written_end = end

    def add(self, segment_index: int, base_offset: int, run: MessageRun) -> None:
        lo, hi = self._count, self._count + len(run)
        if hi > len(self._columns["offset"]):
            capacity = max(hi, 2 * len(self._columns["offset"]))
            for name, column in self._columns.items():
                grown = np.empty(capacity, column.dtype)
                grown[:lo] = column[:lo]
                self._columns[name] = grown
        columns = self._columns
        columns["segment"][lo:hi] = segment_index
        np.add(run.position, base_offset, out=columns["offset"][lo:hi])
        for name, _ in self._fields[2:]:
            columns[name][lo:hi] = getattr(run, name)
        self._count = hi

    def build(self) -> LogColumns:
        n, columns = self._count, self._columns
        self._columns = {}
        c = {name: column[:n] if len(column) == n or n > len(column) // 2 else column[:n].copy()
             for name, column in columns.items()}
        return LogColumns(self.subjects, self.paths, c["segment"], c["offset"], np.array(self._bases, np.int64),
                          c["size"], c["header_size"], c["magic"], c["sequence"], c["subject_id"], c.get("crc_ok"),
                          c.get("timestamp"), self.written_end or 0)
