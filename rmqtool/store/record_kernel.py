"""The one clean-record kernel: which records of a byte window the broker's reader accepts, found once.

A record is clean when its magic code is a message's, it is whole in the window, and its
lengths are the schema's and add up to its totalSize (``CommitLog.checkMessageAndReturnSize``'s
reading: bodyLength, then the signed topic length, then the signed propertiesLength, each
inside the record, the last one ending exactly at totalSize). :func:`clean_records` walks
the totalSize chain of a window once and checks every record of it with numpy, stage by
stage (:data:`STAGES`); the run of clean records ends at the first record that is not. Of
that record it also says why (:class:`Refusal`, from the stage that failed), so the
scanner's careful path reports damage by the same rule.

Everything else is built from the one result (:class:`CleanRecords`):

* Messages: :func:`rmqtool.store.message.build_messages` (the scanner's records, and the
  careful path's one record at a time);
* CRC verdicts: :func:`crc_verdicts` (the integrity check's scan counts the good ones and
  decodes only the failing ones);
* numpy columns: :func:`rmqtool.store.record_columns.column_run` (whole-store checks, dispatch).

Every field position, magic code and size comes from ``formats/commitlog.py`` (through
``formats/derive.py`` and ``store/arrays.dtype_of``).
"""
from __future__ import annotations

import array
import dataclasses
import struct

import construct as cs
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from rmqtool.findings import RECORD_LENGTH_MISMATCH
from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import (HEADER_FIELD_AT, MAX_PROPERTIES_LENGTH, MAX_TOPIC_LENGTH,
                                       MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, MIN_MESSAGE_LENGTH,
                                       PROPERTIES_LENGTH_SIZE, STORE_TIMESTAMP_AT, TOPIC_LENGTH_SIZE,
                                       MessageHosts, MessagePrefix, PropertiesLength, TopicLength)
from rmqtool.formats.crc import CRC32_DIGITS, CRC32_ENTRY_END, CRC32_ENTRY_HEAD, CRC32_RESERVED_LEN, JAVA_CRC_MASK
from rmqtool.formats.derive import field_names, struct_of
from rmqtool.formats.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG
from rmqtool.store import crc as crc_module
from rmqtool.store.arrays import at_every_byte, dtype_of
from rmqtool.store.message import RECORD_START  # totalSize and magicCode: all the chain walk reads

# Every header field up to bodyLength, for IPv4 hosts; with IPv6 hosts the prefix holds, and
# bodyLength and storeTimestamp lie where MessageHosts puts them
HEADER_DTYPE = dtype_of(cs.Struct(*MessagePrefix.subcons, *MessageHosts[0].subcons))
HEADER_ROW = np.dtype((np.void, HEADER_DTYPE.itemsize))
HOSTS_SHIFT = 4  # sysFlag bits 4 and 5: born host, store host IPv6 (formats/sysflag.py)
assert (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG) >> HOSTS_SHIFT == 3
TOPIC_LENGTH_SIZE_V1 = TOPIC_LENGTH_SIZE[MESSAGE_MAGIC_CODE_V1]
TOPIC_LENGTH_SIZE_V2 = TOPIC_LENGTH_SIZE[MESSAGE_MAGIC_CODE_V2]

# The 5.x __CRC32# entry: the record's last CRC32_RESERVED_LEN bytes
_CRC_HEAD = np.dtype(f"S{len(CRC32_ENTRY_HEAD)}")
_CRC_DIGITS_FROM_END = CRC32_DIGITS + len(CRC32_ENTRY_END)  # the digits, then the closing separator
_CRC_END_BYTE = CRC32_ENTRY_END[-1]
assert CRC32_RESERVED_LEN == len(CRC32_ENTRY_HEAD) + _CRC_DIGITS_FROM_END
# the digits are written lowest first (crc32_property_digits): digit k weighs 10^k
DIGIT_WEIGHTS = np.array([10 ** k for k in range(CRC32_DIGITS)], np.int64)
_ZERO = ord("0")
assert ord(props.PROPERTY_SEPARATOR) == _CRC_END_BYTE


@dataclasses.dataclass(frozen=True, slots=True)
class Refusal:
    """Why the record at ``position`` of a window is not clean: a finding id and a sentence."""
    position: int
    finding_id: str
    reason: str


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


def hop_chain(buf, i: int, stop: int, limit: int | None = None) -> tuple[array.array, int]:
    """Stage 1: the positions of the totalSize chain from ``i`` whose records have a message's
    magic code, at least the smallest record's size and lie whole in ``buf``; where it stopped."""
    unpack = RECORD_START.unpack_from
    v1, v2 = MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2
    min_length = MIN_MESSAGE_LENGTH
    if limit is None:
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
    except struct.error:  # fewer than 8 bytes left
        pass
    return out, i


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
        return _FIELD_STRUCTS[field].unpack_from(buf, at)[0] if readable else 0


# By (sysFlag >> 4) & 3, as MessageHosts: where the body starts, where bodyLength and
# storeTimestamp lie, from a record's start
HEADER_SIZE_BY_HOSTS = tuple(MessagePrefix.sizeof() + h.sizeof() for h in MessageHosts)
BODY_LENGTH_AT_BY_HOSTS = tuple(at["body_length"] for at in HEADER_FIELD_AT)
_TABLES = {t: np.array(t, np.int64) for t in (HEADER_SIZE_BY_HOSTS, BODY_LENGTH_AT_BY_HOSTS, STORE_TIMESTAMP_AT)}
_FIELD_SCHEMAS = {"body_length": MessageHosts[0].subcons[-1],
                  "store_timestamp": MessageHosts[0].subcons[field_names(MessageHosts[0]).index("store_timestamp")],
                  "topic_length_v1": "topic_length" / TopicLength[MESSAGE_MAGIC_CODE_V1],
                  "topic_length_v2": "topic_length" / TopicLength[MESSAGE_MAGIC_CODE_V2],
                  "properties_length": "properties_length" / PropertiesLength}
_FIELD_DTYPES = {name: dtype_of(cs.Struct(sub))[0] for name, sub in _FIELD_SCHEMAS.items()}
_FIELD_STRUCTS = {name: struct_of(cs.Struct(sub)) for name, sub in _FIELD_SCHEMAS.items()}
assert all(d.kind == "i" for d in _FIELD_DTYPES.values())  # signed, as Java reads them

# The stages of checkMessageAndReturnSize's reading, in its order; a record is clean when it
# passes all. Each names what its failure reports (the first failing one of a record is its refusal).
STAGES = ("header_fits", "body_fits", "topic_length_fits", "topic_length_signed", "topic_fits",
          "properties_length_signed", "lengths_add_up")


def record_parts(buf, pos, end, sys_flag, magic, body_length, store_timestamp, ops=_Vector) -> dict:
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


def clean_records(buf, i: int, stop: int, limit: int | None = None) -> CleanRecords:
    """The clean records of ``buf`` from index ``i``, each starting before ``stop`` and ending by
    ``limit`` (the buffer's end): one walk of the totalSize chain (:func:`hop_chain`), then
    :func:`record_parts` over all of its records at once."""
    positions, hopped_to = hop_chain(buf, i, stop, limit)
    if not positions:
        return CleanRecords(_EMPTY, _EMPTY, np.zeros(0, HEADER_DTYPE), _EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY,
                            _EMPTY, _EMPTY, stop=hopped_to)
    pos = np.frombuffer(positions, np.int64)
    header = at_every_byte(buf, HEADER_ROW)[pos].view(HEADER_DTYPE)
    end = pos + header["total_size"].astype(np.int64)
    parts = record_parts(buf, pos, end, header["sys_flag"].astype(np.int64), header["magic_code"],
                         header["body_length"].astype(np.int64), header["store_timestamp"].astype(np.int64))
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
    return Refusal(pos, RECORD_LENGTH_MISMATCH, reason)


def record_refusal(buf, pos: int, end: int, sys_flag: int, magic: int, body_length: int) -> tuple[dict, Refusal | None]:
    """:func:`record_parts` of one record (its header already read), and why it is not clean (None: it is)."""
    parts = record_parts(buf, pos, end, sys_flag, magic, body_length, None, _Scalar)
    return parts, refusal_of(parts, pos, end)


# --- CRC verdicts ------------------------------------------------------------------------------

def crcs_of(buf, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The CRC-32 (unmasked) of each byte range [start, end) of ``buf``: one C call a range over
    views of the buffer, the loop itself in C (map over builtins, no Python frame a record)."""
    view = memoryview(buf)
    try:
        return np.fromiter(map(crc_module.fast_crc32, map(view.__getitem__, map(slice, start.tolist(), end.tolist()))),
                           np.int64, count=len(start))
    finally:
        view.release()


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
    end = records.end
    shaped = records.properties_length >= CRC32_RESERVED_LEN
    if not shaped.any():
        return shaped, np.zeros(len(records), np.int64)
    data = np.frombuffer(buf, np.uint8)
    start = np.where(shaped, end - CRC32_RESERVED_LEN, records.position)
    shaped &= data[np.where(shaped, end - 1, records.position)] == _CRC_END_BYTE
    shaped &= at_every_byte(buf, _CRC_HEAD)[start] == CRC32_ENTRY_HEAD
    digits = sliding_window_view(data, CRC32_DIGITS)[np.where(shaped, end - _CRC_DIGITS_FROM_END, records.position)]
    digits = digits.astype(np.int64) - _ZERO
    shaped &= ((digits >= 0) & (digits <= 9)).all(axis=1)
    return shaped, digits @ DIGIT_WEIGHTS


def body_crc_verdicts(buf, records: CleanRecords) -> np.ndarray:
    """Whether each clean record's bodyCRC field is its body's CRC (0 for an empty body)."""
    crcs = crcs_of(buf, records.body_at, records.body_end)
    stored_body = records.header["body_crc"].astype(np.int64)
    return np.where(records.body_end > records.body_at, (crcs & JAVA_CRC_MASK) == stored_body, stored_body == 0)


def crc_verdicts(buf, records: CleanRecords) -> CrcVerdicts:
    """The body CRC and the __CRC32# entry of every clean record, as the broker checks them."""
    body_ok = body_crc_verdicts(buf, records)
    has_entry, stored = crc32_entries(buf, records)
    entry_ok = np.zeros(len(records), bool)
    rows = np.flatnonzero(has_entry)
    if len(rows):
        got = crcs_of(buf, records.position[rows], records.end[rows] - CRC32_RESERVED_LEN)
        entry_ok[rows] = (got & JAVA_CRC_MASK) == stored[rows]
    return CrcVerdicts(body_ok, has_entry, entry_ok)
