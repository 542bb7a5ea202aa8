"""JSON Lines rows of a window's clean records, written by the native kernel (rows.c) straight
from the record kernel's clean records into one bytes object a run: no Message, no dict, no
orjson call a row.

:func:`message_record` encoded by orjson stays the definition: the kernel writes the same
bytes for the common record and declines every other one (compressed bodies, strings that are
not ASCII, properties that are not the common string, failed CRCs, ...); a declined record
comes back as a Message, in its place, and goes the Python way. Without the kernel (or with
``RMQTOOL_NATIVE=0``) every record is a Message, as before. The header's layout comes from
formats/, the row's keys from a row message_record makes.
"""
from __future__ import annotations

import construct as cs
import numpy as np
import orjson

from rmqtool import native
from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import HEADER_FIELD_AT, MESSAGE_MAGIC_CODE_V2, MessageHosts, MessagePrefix
from rmqtool.formats.sysflag import COMPRESSED_FLAG
from rmqtool.report.records import message_record
from rmqtool.report.sink import EncodedRows
from rmqtool.store.message import Message, build_messages
from rmqtool.store.record_kernel import clean_records, crc_verdicts

# the header fields rows.c (and table.c) read, in their order (Message's names but the hosts' and the size's)
FIELDS = ("total_size", "magic_code", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset",
           "sys_flag", "born_timestamp", "born_host", "born_port", "store_timestamp", "store_host", "store_port",
           "reconsume_times", "prepared_transaction_offset")
# the row's keys in the order rows.c writes them (message_record's; property_crc_ok when it is there)
ROW_KEYS = ("record", "commit_log_offset", "store_size", "magic_code", "message_version", "body_crc", "body_crc_ok",
            "queue_id", "flag", "queue_offset", "physical_offset", "sys_flag", "born_timestamp", "born_host",
            "store_timestamp", "store_host", "reconsume_times", "prepared_transaction_offset", "body_length",
            "body_compression", "body", "topic", "properties", "properties_raw", "tags", "keys", "uniq_key",
            "msg_id", "file", "file_position", "property_crc_ok")
BODIES = {"none": False, "base64": True}  # the body modes the kernel writes: base64 or not


def header_layout() -> tuple:
    """Each hosts kind's (field (position, size) pairs, header size), from formats/commitlog.py."""
    out = []
    for at, hosts in zip(HEADER_FIELD_AT, MessageHosts):
        subcons = {s.name: s for s in (*MessagePrefix.subcons, *hosts.subcons)}
        size = cs.Struct(*MessagePrefix.subcons, *hosts.subcons).sizeof()
        out.append((tuple((at[f], subcons[f].sizeof()) for f in FIELDS), size))
    return tuple(out)


def probe_keys() -> tuple | None:
    """The keys of a row message_record makes (with a __CRC32# verdict), or None when they are
    not the ones rows.c writes in its order: then the kernel is not used."""
    m = Message(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b"\0" * 4, 0, 0, b"\0" * 4, 0, 0, 0, b"", "", b"", {}, path="",
                position=0, body_crc_ok=True, property_crc_ok=True)
    row = message_record(m, "none")
    return tuple(row) if tuple(row) == ROW_KEYS and row["record"] == "message" else None


_ready_for = None  # the kernel module set_row_layout was called on


def _kernel():
    """The kernel, its row layout set; None without it (or when message_record's keys changed)."""
    global _ready_for
    kernel = native.kernel
    if kernel is None or _ready_for is kernel:
        return kernel
    keys = probe_keys()
    if keys is None:
        return None
    kernel.set_row_layout(header_layout(), tuple((b"," if n else b"") + orjson.dumps(k) + b":" for n, k in enumerate(keys)), orjson.dumps("message"),
                          tuple(n.encode("ascii") for n in (props.PROPERTY_TAGS, props.PROPERTY_KEYS,
                                                            props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)),
                          ord(props.KEY_SEPARATOR),  # (the properties' own separators are properties.c's)
                          MESSAGE_MAGIC_CODE_V2, COMPRESSED_FLAG)
    _ready_for = kernel
    return kernel


def wanted(body: str) -> bool:
    """The kernel is there and writes rows of this body mode."""
    return body in BODIES and native.kernel is not None


def record_spans(records) -> np.ndarray:
    """The records' spans as the kernel's parts take them: int64 rows of (position, end, hosts kind,
    body, topic, properties start)."""
    return np.stack((records.position, records.end, records.hosts, records.body_at, records.body_end,
                     records.topic_at, records.topic_end, records.properties_at), axis=1).astype(np.int64)


def verdict_flags(verdicts) -> np.ndarray | None:
    """CRC verdicts as the kernel's parts take them: uint8 rows of (body CRC holds, a __CRC32#
    entry, it holds); None when the CRCs are not checked."""
    return None if verdicts is None else np.stack(
        (verdicts.body_ok, verdicts.has_entry, verdicts.entry_ok), axis=1).astype(np.uint8)


class RowRun:
    """A window's clean records as scan_segment's rows mode wants them: EncodedRows for the runs
    the kernel writes, Messages (with CRC verdicts as the scan gives them) for the records it declines."""

    def __init__(self, body: str, check_crc: bool):
        self.base64 = BODIES[body]
        self.check_crc = check_crc
        self._file_json: dict = {}
        _kernel()  # its row layout set now: a dump's worker processes, forked after, inherit it

    def _file(self, path) -> bytes | None:
        text = self._file_json.get(path)
        if text is None:
            try:
                text = self._file_json[path] = orjson.dumps(path)
            except (TypeError, orjson.JSONEncodeError):  # a name that is not UTF-8: the Python rows
                return None
        return text

    def __call__(self, buf, i: int, stop: int, offset0: int, position0: int, path) -> tuple[int, list]:
        """(index of the first record not taken, the pieces in order); as scan_segment's default
        mode, ``i`` when no clean record starts there."""
        records = clean_records(buf, i, stop)
        n = len(records)
        if not n:
            return i, []
        verdicts = crc_verdicts(buf, records) if self.check_crc else None
        kernel = _kernel()
        file_json = self._file(path)
        if kernel is None or file_json is None:
            return records.stop, build_messages(buf, records, offset0, position0, path, self.check_crc,
                                                verdicts=verdicts)
        spans, flags = record_spans(records), verdict_flags(verdicts)
        pieces: list = []
        k = 0
        while k < n:
            data, taken = kernel.jsonl_rows(buf, spans, flags, k, offset0, position0, file_json, self.base64)
            if taken:
                pieces.append(EncodedRows(data, taken, position0 + int(records.position[k])))
                k += taken
            if k < n:  # declined: this record's row is made the Python way
                build_messages(buf, records.rows(k, k + 1), offset0, position0, path, self.check_crc, pieces,
                               verdicts=None if verdicts is None else verdicts.rows(k, k + 1))
                k += 1
        return records.stop, pieces
