"""The one clean-record kernel: which records of a byte window are clean, found once.

:func:`clean_records` walks the totalSize chain of a window once
(:func:`rmqtool.store.record_rule.hop_chain`) and applies the one rule
(:func:`rmqtool.store.record_rule.record_parts`, stage by stage) to all of its records at
once with numpy; the run of clean records ends at the first record that is not, and of
that record it says why (a :class:`~rmqtool.store.record_rule.Refusal`, from the stage that
failed). The careful path applies the same rule to one record
(:func:`~rmqtool.store.record_rule.record_refusal`, through ``decode_message``).

Everything else is built from the one result (:class:`CleanRecords`):

* Messages: :func:`rmqtool.store.message.build_messages` (the scanner's records);
* CRC verdicts: :func:`crc_verdicts` (the integrity check's scan counts the good ones and
  decodes only the failing ones);
* numpy columns: :func:`rmqtool.store.record_columns.column_run` (whole-store checks, dispatch).

Every field position, magic code and size comes from ``formats/commitlog.py`` (through
``formats/derive.py`` and ``store/arrays.dtype_of``).
"""
from __future__ import annotations

import dataclasses

import construct as cs
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from rmqtool import native
from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, MIN_MESSAGE_LENGTH,
                                       STORE_TIMESTAMP_AT, MessageHosts, MessagePrefix)
from rmqtool.formats.crc import CRC32_DIGITS, CRC32_ENTRY_END, CRC32_ENTRY_HEAD, CRC32_RESERVED_LEN, JAVA_CRC_MASK
from rmqtool.store import crc as crc_module
from rmqtool.store.arrays import at_every_byte, dtype_of
from rmqtool.store.record_rule import (BODY_LENGTH_AT_BY_HOSTS, FIELD_SCHEMAS, HEADER_SIZE_BY_HOSTS, HOSTS_SHIFT,
                                       PROPERTIES_LENGTH_SIZE, Refusal, RECORD_START, TOPIC_LENGTH_SIZE_V1,
                                       TOPIC_LENGTH_SIZE_V2, hop_chain, record_parts, refusal_of)

# Every header field up to bodyLength, for IPv4 hosts; with IPv6 hosts the prefix holds, and
# bodyLength and storeTimestamp lie where MessageHosts puts them
HEADER_DTYPE = dtype_of(cs.Struct(*MessagePrefix.subcons, *MessageHosts[0].subcons))
HEADER_ROW = np.dtype((np.void, HEADER_DTYPE.itemsize))
assert HEADER_DTYPE.itemsize == HEADER_SIZE_BY_HOSTS[0]

# The 5.x __CRC32# entry: the record's last CRC32_RESERVED_LEN bytes
_CRC_HEAD = np.dtype(f"S{len(CRC32_ENTRY_HEAD)}")
_CRC_DIGITS_FROM_END = CRC32_DIGITS + len(CRC32_ENTRY_END)  # the digits, then the closing separator
_CRC_END_BYTE = CRC32_ENTRY_END[-1]
assert CRC32_RESERVED_LEN == len(CRC32_ENTRY_HEAD) + _CRC_DIGITS_FROM_END
# the digits are written lowest first (crc32_property_digits): digit k weighs 10^k
DIGIT_WEIGHTS = np.array([10 ** k for k in range(CRC32_DIGITS)], np.int64)
_ZERO = ord("0")
assert ord(props.PROPERTY_SEPARATOR) == _CRC_END_BYTE


@dataclasses.dataclass(slots=True)
class CleanRecords:
    """The clean records of a window, in order; every array is indexed by record.

    Positions are indices in the window's buffer. ``stop`` is where the run of clean
    records ended: the first record not taken, for the careful path. ``refusal`` says why
    when a record lies there that looks like a message, is whole, but whose lengths are not
    a record's; None when the chain stopped for another reason (not a message's magic code,
    a totalSize too small or reaching past the window or ``stop``).
    """
    position: np.ndarray
    end: np.ndarray  # position + totalSize
    header: np.ndarray  # HEADER_DTYPE rows; after the prefix valid only for IPv4 hosts
    hosts: np.ndarray  # (sysFlag >> 4) & 3: MessageHosts' index
    store_timestamp: np.ndarray
    body_at: np.ndarray
    body_end: np.ndarray
    topic_at: np.ndarray
    topic_end: np.ndarray
    properties_at: np.ndarray
    stop: int
    refusal: Refusal | None = None

    def __len__(self) -> int:
        return len(self.position)

    @property
    def size(self) -> np.ndarray:
        return self.end - self.position

    @property
    def topic_length(self) -> np.ndarray:
        return self.topic_end - self.topic_at

    @property
    def properties_length(self) -> np.ndarray:
        return self.end - self.properties_at

    def take(self, n: int) -> "CleanRecords":
        """The first n records; the run then stops at the n-th."""
        if n >= len(self):
            return self
        return CleanRecords(*(getattr(self, f)[:n] for f in _ARRAYS), stop=int(self.position[n]), refusal=None)

    def rows(self, lo: int, hi: int) -> "CleanRecords":
        """Records lo to hi (a batch of the run)."""
        return CleanRecords(*(getattr(self, f)[lo:hi] for f in _ARRAYS), stop=self.stop, refusal=self.refusal)

    def shifted(self, by: int) -> "CleanRecords":
        """The same records in a buffer that starts ``-by`` bytes later (every position moved by ``by``)."""
        return CleanRecords(*(getattr(self, f) if f in _NOT_POSITIONS else getattr(self, f) + by for f in _ARRAYS),
                            stop=self.stop + by, refusal=self.refusal)

    def where(self, keep: np.ndarray) -> "CleanRecords":
        """The records ``keep`` picks (a mask or indices); stop and refusal stay."""
        return CleanRecords(*(getattr(self, f)[keep] for f in _ARRAYS), stop=self.stop, refusal=self.refusal)


_ARRAYS = tuple(f.name for f in dataclasses.fields(CleanRecords) if f.name not in ("stop", "refusal"))
_NOT_POSITIONS = ("header", "hosts", "store_timestamp")
_EMPTY = np.zeros(0, np.int64)


# The rule's tables and fields as numpy reads them
_TABLES = {t: np.array(t, np.int64) for t in (HEADER_SIZE_BY_HOSTS, BODY_LENGTH_AT_BY_HOSTS, STORE_TIMESTAMP_AT)}
_FIELD_DTYPES = {name: dtype_of(cs.Struct(sub))[0] for name, sub in FIELD_SCHEMAS.items()}
assert all(d.kind == "i" for d in _FIELD_DTYPES.values())  # signed, as Java reads them


class _Vector:
    """The stages' operations over arrays of records (a window's run)."""

    @staticmethod
    def pick(condition, if_true, if_false):
        return np.where(condition, if_true, if_false)

    @staticmethod
    def any(values) -> bool:
        return bool(values.any())

    @staticmethod
    def of(table: tuple, index):
        return _TABLES[table][index]

    @staticmethod
    def read(buf, field: str, at, readable, fallback):
        """The field's value at each position ``at`` where ``readable``, read at ``fallback``
        elsewhere (a record's own start: always inside the buffer); as int64."""
        return at_every_byte(buf, _FIELD_DTYPES[field])[np.where(readable, at, fallback)].astype(np.int64)


# totalSize and magicCode, as hop_chain reads them
_START_DTYPE = dtype_of(cs.Struct(*MessagePrefix.subcons[:2]))
_START_ROW = np.dtype((np.void, _START_DTYPE.itemsize))  # picked as bytes, then viewed: numpy copies a field at a time
assert _START_DTYPE.itemsize == RECORD_START.size


def hinted_chain(buf, i: int, stop: int, limit: int | None, hints: np.ndarray) -> tuple[np.ndarray, int]:
    """:func:`hop_chain`'s result (positions, where it stopped), proven from candidate record
    positions where it can: ``hints`` (sorted, repeats allowed; indices in ``buf``: the consume
    queue units' commit log offsets) are read by the hop's rule all at once, and the chain holds
    from a candidate while each is a record ending exactly where the next candidate begins.
    hop_chain itself goes on wherever the proof breaks (a record no unit names: an undispatched
    tail, a lost queue, a system topic), up to the next candidate. A wrong or missing candidate
    costs only speed: every position taken is one the hop reaches from ``i``."""
    if limit is None:
        limit = len(buf)
    lo, hi = np.searchsorted(hints, (i, stop))
    c = hints[lo:hi]
    c = c[c <= len(buf) - RECORD_START.size]  # a candidate hop_chain cannot read is left to it
    n = len(c)
    if n:
        head = at_every_byte(buf, _START_ROW)[c].view(_START_DTYPE)
        total = head["total_size"].astype(np.int64)
        magic = head["magic_code"]
        end = c + total
        chained = (total >= MIN_MESSAGE_LENGTH) & (end <= limit) & \
            ((magic == MESSAGE_MAGIC_CODE_V1) | (magic == MESSAGE_MAGIC_CODE_V2))
        chained[:-1] &= end[:-1] == c[1:]
        chained[-1] = False  # the last candidate: the hop takes it from there
        breaks = np.flatnonzero(~chained)
    pieces = []
    p = i
    while True:
        k = int(np.searchsorted(c, p))  # the first candidate at or past p
        if k < n and c[k] == p:  # proven: candidates k .. m - 1 are the hop's next records
            m = int(breaks[np.searchsorted(breaks, k)])
            if m > k:
                pieces.append(c[k:m])
                p = int(c[m])
            k = int(np.searchsorted(c, p, side="right"))  # past p (and past any repeat of it)
        if p >= stop:
            break
        to = min(stop, int(c[k])) if k < n else stop  # hop up to the next candidate
        hopped, p = hop_chain(buf, p, to, limit)
        if hopped:
            pieces.append(np.frombuffer(hopped, np.int64))
        if p < to or p >= stop:
            break  # the hop stopped at a record it does not take, or at the window's end
    return (np.concatenate(pieces) if len(pieces) > 1 else pieces[0] if pieces else _EMPTY), p


# strided_chain: the hop runs this far before a stride is tried again, doubled while tries fail
_HOP_BYTES = 64 << 10
_STRIDE_MIN_RUN = 4  # records a stride must prove to count as found (else the hop goes on a while)


def strided_chain(buf, i: int, stop: int, limit: int | None = None) -> tuple[np.ndarray, int]:
    """:func:`hop_chain`'s result (positions, where it stopped), proven a stride at a time where
    records follow each other at one size (a producer's fixed-size messages, a bench store's):
    when the record at ``i`` and the next have the same totalSize ``s``, the positions
    ``i + k * s`` are read by the hop's rule all at once, and the chain holds up to the first
    that is not a record of that size ending inside ``limit``. hop_chain itself goes on from
    there, and wherever records differ in size; the positions taken are the hop's, only found
    with fewer Python steps."""
    if limit is None:
        limit = len(buf)
    readable = len(buf) - RECORD_START.size  # the last position whose totalSize and magic can be read
    unpack = RECORD_START.unpack_from
    v1, v2 = MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2
    pieces = []
    hop_bytes = _HOP_BYTES
    while i < stop and i <= readable:
        total, magic = unpack(buf, i)
        nxt = i + total
        if total >= MIN_MESSAGE_LENGTH and nxt <= readable and nxt < stop and unpack(buf, nxt)[0] == total \
                and (magic == v1 or magic == v2):
            count = (min(stop - 1, readable) - i) // total + 1  # positions i + k * total starting before stop
            at = np.arange(i, i + count * total, total, dtype=np.int64)
            head = at_every_byte(buf, _START_ROW)[at].view(_START_DTYPE)
            magics = head["magic_code"]
            same = (head["total_size"] == total) & ((magics == v1) | (magics == v2)) & (at <= limit - total)
            m = count if same.all() else int(same.argmin())  # records proven: up to the first that is not
            if m >= _STRIDE_MIN_RUN:
                pieces.append(at[:m])
                i += m * total
                hop_bytes = _HOP_BYTES
                continue
            hop_bytes *= 2  # a stride that proves little: try again later
        to = min(stop, i + hop_bytes)
        hopped, j = hop_chain(buf, i, to, limit)
        if hopped:
            pieces.append(np.frombuffer(hopped, np.int64))
        i = j
        if j < to:
            break  # the hop stopped at a record it does not take
    return (np.concatenate(pieces) if len(pieces) > 1 else pieces[0] if pieces else _EMPTY), i


def candidate_starts(offsets: list) -> np.ndarray:
    """Commit log offsets where records are said to start (arrays of them: consume queue units'),
    sorted and unique, as :func:`hinted_chain` takes them (np.unique's hashing is far slower)."""
    if not offsets:
        return _EMPTY
    out = np.concatenate(offsets, dtype=np.int64)  # one copy, in this machine's byte order
    out.sort()
    repeated = out[1:] == out[:-1]
    return out[np.append(True, ~repeated)] if repeated.any() else out


def clean_records(buf, i: int, stop: int, limit: int | None = None, hints: np.ndarray | None = None) -> CleanRecords:
    """The clean records of ``buf`` from index ``i``, each starting before ``stop`` and ending by
    ``limit`` (the buffer's end): one walk of the totalSize chain (:func:`hop_chain`; with
    ``hints``, candidate record positions sorted and unique, :func:`hinted_chain`; with the
    native kernel, hop_chain's C loop, hints unused), then :func:`record_parts` over all of its
    records at once. With the native kernel its run of records that rule takes comes first in
    one pass (scan.c's clean_run), and the numpy path goes on from the first record it did not take."""
    kernel = native.kernel
    if kernel is None or i < 0:
        return _clean_records(buf, i, stop, limit, hints)
    limit = len(buf) if limit is None else limit
    run, j = _native_run(kernel, buf, i, stop, limit)
    if kernel.hop(buf, j, min(stop, j + 1), limit, MIN_MESSAGE_LENGTH, MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2,
                  None)[0] == 0:  # the hop takes nothing at j (a window's end, no record): nor would the numpy path
        rest = CleanRecords(*_EMPTY_RUN, stop=j)
    else:
        rest = _clean_records(buf, j, stop, limit, hints)  # from the first record C did not take
    if run is None:
        return rest
    if len(rest):
        return CleanRecords(*(_joined([getattr(run, f), getattr(rest, f)]) for f in _ARRAYS),
                            stop=rest.stop, refusal=rest.refusal)
    run.stop, run.refusal = rest.stop, rest.refusal
    return run


# The native kernel's record runs (rmqtool/native/scan.c crc_run, clean_run): every position and size they read, in order
RECORD_LAYOUT = (MIN_MESSAGE_LENGTH, MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, HEADER_DTYPE.fields["body_crc"][1],
                 HEADER_DTYPE.fields["sys_flag"][1], HOSTS_SHIFT, *HEADER_SIZE_BY_HOSTS, *BODY_LENGTH_AT_BY_HOSTS,
                 *STORE_TIMESTAMP_AT, TOPIC_LENGTH_SIZE_V1, TOPIC_LENGTH_SIZE_V2, PROPERTIES_LENGTH_SIZE, JAVA_CRC_MASK,
                 CRC32_RESERVED_LEN, CRC32_DIGITS, _CRC_DIGITS_FROM_END, _CRC_END_BYTE, CRC32_ENTRY_HEAD)
# what they assume of them: big-endian signed fields of these sizes (as Java reads them)
assert all(HEADER_DTYPE[f].str == ">i4" for f in ("total_size", "body_crc", "sys_flag", "body_length"))
assert HEADER_DTYPE["store_timestamp"].str == ">i8" and _FIELD_DTYPES["store_timestamp"].str == ">i8"
assert [_FIELD_DTYPES[f].itemsize for f in ("topic_length_v1", "topic_length_v2", "properties_length")] == \
    [TOPIC_LENGTH_SIZE_V1, TOPIC_LENGTH_SIZE_V2, PROPERTIES_LENGTH_SIZE]
assert all(_FIELD_DTYPES[f].str in ("|i1", ">i2", ">i4") for f in ("topic_length_v1", "topic_length_v2",
                                                                    "properties_length"))
# clean_run's int64 rows, in its order; the header rows it copies are HEADER_DTYPE's (IPv4 hosts') size
_RUN_COLUMNS = ("position", "end", "hosts", "store_timestamp", "body_at", "body_end", "topic_at", "topic_end",
                "properties_at")
assert set(_RUN_COLUMNS) | {"header"} == set(_ARRAYS)
_EMPTY_RUN = tuple(np.zeros(0, HEADER_DTYPE) if f == "header" else _EMPTY for f in _ARRAYS)
_RUN_ROOM = 64  # records a first guess of a run's length leaves room for beyond the window at its first record's size
_RUN_CHUNK = 1 << 15  # records a call of clean_run fills at most (a window of small records: several calls)


def _native_run(kernel, buf, i: int, stop: int, limit: int) -> tuple[CleanRecords | None, int]:
    """The kernel's run of clean records from ``i`` (None when it took none) and where it stopped;
    its arrays sized by a guess (the window at its first record's size), called again while full."""
    pieces = []
    first = None
    while True:
        span = min(stop, len(buf)) - i
        if span <= 0 or i > len(buf) - RECORD_START.size:
            break
        if first is None:
            first = max(RECORD_START.unpack_from(buf, i)[0], MIN_MESSAGE_LENGTH)
        room = min(span // MIN_MESSAGE_LENGTH + 1, span // first + _RUN_ROOM, _RUN_CHUNK)
        columns = np.empty((len(_RUN_COLUMNS), room), np.int64)
        header = np.empty(room, HEADER_DTYPE)
        count, i = kernel.clean_run(buf, i, stop, limit, RECORD_LAYOUT, columns, header.view(np.uint8))
        if count:
            columns, header = columns[:, :count], header[:count]
            if count < room // 4:  # records larger than the guess: keep no idle room
                columns, header = columns.copy(), header.copy()
            pieces.append((columns, header))
        if count < room:
            break
    if not pieces:
        return None, i
    if len(pieces) == 1:
        columns, header = pieces[0]
    else:
        columns = np.concatenate([c for c, _ in pieces], axis=1)
        header = _joined([h for _, h in pieces])
    arrays = dict(zip(_RUN_COLUMNS, columns), header=header)
    return CleanRecords(*(arrays[f] for f in _ARRAYS), stop=i), i


def _joined(arrays: list) -> np.ndarray:
    """The arrays one after the other, header rows kept big-endian (numpy would join records in this machine's order)."""
    if arrays[0].dtype == HEADER_DTYPE:
        return np.concatenate([a.view(HEADER_ROW) for a in arrays]).view(HEADER_DTYPE)
    return np.concatenate(arrays)


def _clean_records(buf, i: int, stop: int, limit: int | None, hints: np.ndarray | None) -> CleanRecords:
    """clean_records' numpy path: the chain, then :func:`record_parts` over all of it at once."""
    if native.kernel is not None:  # the hop in C outruns both of numpy's proofs below
        hopped, hopped_to = hop_chain(buf, i, stop, limit)
        pos = np.frombuffer(hopped, np.int64) if len(hopped) else _EMPTY
    elif hints is not None and len(hints):
        pos, hopped_to = hinted_chain(buf, i, stop, limit, hints)
    else:
        pos, hopped_to = strided_chain(buf, i, stop, limit)
    if not len(pos):
        return CleanRecords(_EMPTY, _EMPTY, np.zeros(0, HEADER_DTYPE), _EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY,
                            _EMPTY, _EMPTY, stop=hopped_to)
    header = at_every_byte(buf, HEADER_ROW)[pos].view(HEADER_DTYPE)
    end = pos + header["total_size"].astype(np.int64)
    parts = record_parts(buf, pos, end, header["sys_flag"].astype(np.int64), header["magic_code"],
                         header["body_length"].astype(np.int64), header["store_timestamp"].astype(np.int64), _Vector)
    bad = np.flatnonzero(~parts["lengths_add_up"])
    n = int(bad[0]) if len(bad) else len(pos)
    if n < len(pos):
        refusal = refusal_of({k: v[n] for k, v in parts.items()}, int(pos[n]), int(end[n]))
        stop_at = int(pos[n])
    else:
        refusal, stop_at = None, hopped_to
    return CleanRecords(pos[:n], end[:n], header[:n], parts["hosts"][:n], parts["store_timestamp"][:n],
                        parts["body_at"][:n], parts["body_end"][:n], parts["topic_at"][:n],
                        parts["topic_end"][:n], parts["properties_at"][:n], stop=stop_at, refusal=refusal)


def records_at(buf, pos: np.ndarray) -> dict:
    """The rule (:func:`record_parts`) over records said to start at ``pos`` (a lookup's: the
    timer log's units naming theirs), all at once. Each position must leave a whole header
    inside ``buf``. Returns, a row a position: ``whole`` (the totalSize stays inside ``buf``
    and the lengths add up), ``end`` (pos + totalSize), ``total_size``, ``magic_code``,
    ``topic_at``, ``topic_end``, ``properties_at`` (meaningful where whole)."""
    header = at_every_byte(buf, HEADER_ROW)[pos].view(HEADER_DTYPE)
    total = header["total_size"].astype(np.int64)
    end = pos + total
    inside = (total > 0) & (end <= len(buf))
    parts = record_parts(buf, pos[inside], end[inside], header["sys_flag"][inside].astype(np.int64),
                         header["magic_code"][inside], header["body_length"][inside].astype(np.int64),
                         header["store_timestamp"][inside].astype(np.int64), _Vector)
    out = {"end": end, "total_size": total, "magic_code": header["magic_code"]}
    for name in ("topic_at", "topic_end", "properties_at"):
        out[name] = np.zeros(len(pos), np.int64)
        out[name][inside] = parts[name]
    out["whole"] = np.zeros(len(pos), bool)
    out["whole"][inside] = parts["lengths_add_up"]
    return out


# --- CRC verdicts ------------------------------------------------------------------------------

@dataclasses.dataclass(slots=True)
class CrcVerdicts:
    """Of each clean record: its body CRC holds; its __CRC32# entry, when it has a readable one."""
    body_ok: np.ndarray  # bool
    has_entry: np.ndarray  # bool: the properties end with a __CRC32# entry whose digits read (stored_record_crc)
    entry_ok: np.ndarray  # bool, meaningful where has_entry

    def rows(self, lo: int, hi: int) -> "CrcVerdicts":
        return CrcVerdicts(self.body_ok[lo:hi], self.has_entry[lo:hi], self.entry_ok[lo:hi])

    def where(self, keep: np.ndarray) -> "CrcVerdicts":
        return CrcVerdicts(self.body_ok[keep], self.has_entry[keep], self.entry_ok[keep])

    @property
    def ok(self) -> np.ndarray:
        """Both CRCs hold (the record's entry, when it has one)."""
        return self.body_ok & (self.entry_ok | ~self.has_entry)


def crc32_entries(buf, records: CleanRecords) -> tuple[np.ndarray, np.ndarray]:
    """(has an entry, the value stored) of each record: ``formats/crc.stored_record_crc``'s
    reading (its head, 10 digits lowest first, the separator, as the properties' last bytes)."""
    n = len(records)
    has_entry = np.zeros(n, bool)
    stored = np.zeros(n, np.int64)
    data = np.frombuffer(buf, np.uint8)
    end = records.end
    # the last byte first (inside every record): a 4.x record's properties end without a separator
    rows = np.flatnonzero((data[end - 1] == _CRC_END_BYTE) & (records.properties_length >= CRC32_RESERVED_LEN))
    if not len(rows):
        return has_entry, stored
    end = end[rows]
    rows = rows[at_every_byte(buf, _CRC_HEAD)[end - CRC32_RESERVED_LEN] == CRC32_ENTRY_HEAD]
    end = records.end[rows]
    digits = sliding_window_view(data, CRC32_DIGITS)[end - _CRC_DIGITS_FROM_END].astype(np.int64) - _ZERO
    readable = ((digits >= 0) & (digits <= 9)).all(axis=1)
    has_entry[rows[readable]] = True
    stored[rows[readable]] = digits[readable] @ DIGIT_WEIGHTS
    return has_entry, stored


def body_crc_verdicts(buf, records: CleanRecords) -> np.ndarray:
    """Whether each clean record's bodyCRC field is its body's CRC (0 for an empty body)."""
    crcs = crc_module.crcs_of(buf, records.body_at, records.body_end)
    stored_body = records.header["body_crc"].astype(np.int64)
    return np.where(records.body_end > records.body_at, (crcs & JAVA_CRC_MASK) == stored_body, stored_body == 0)


def good_crc_run(buf, i: int, stop: int) -> tuple[int, int] | None:
    """The records :func:`clean_records` takes from ``i`` whose :func:`crc_verdicts` say ok, up to the
    first that is not one of them, in one pass of the native kernel: (how many, where they end);
    None without the kernel (or when it has not the CRC function store/crc.py chose)."""
    kernel = crc_module.kernel_crcs()
    if kernel is None:
        return None
    return kernel.crc_run(buf, i, stop, len(buf), RECORD_LAYOUT)


def crc_verdicts(buf, records: CleanRecords) -> CrcVerdicts:
    """The body CRC and the __CRC32# entry of every clean record, as the broker checks them."""
    body_ok = body_crc_verdicts(buf, records)
    has_entry, stored = crc32_entries(buf, records)
    entry_ok = np.zeros(len(records), bool)
    rows = np.flatnonzero(has_entry)
    if len(rows):
        got = crc_module.crcs_of(buf, records.position[rows], records.end[rows] - CRC32_RESERVED_LEN)
        entry_ok[rows] = (got & JAVA_CRC_MASK) == stored[rows]
    return CrcVerdicts(body_ok, has_entry, entry_ok)
