"""A window's clean records handed to the native kernel's parts that write message_record's
rows as text (rows.c: JSON Lines, through report/jsonl_rows.py; table.c: a table's lines,
through report/table_rows.py): the record layout both read (record.c, set once from formats/),
the records' spans and CRC verdicts as they take them, and the loop that gives a part the runs
it writes and the records it declines to the Python way, each in its place.

:func:`message_record` stays the definition of a row: both parts are used only while its keys
are the ones they write, in their order (:func:`probe_keys`).
"""
from __future__ import annotations

from typing import Callable

import construct as cs
import numpy as np

from rmqtool import native
from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import HEADER_FIELD_AT, MESSAGE_MAGIC_CODE_V2, MessageHosts, MessagePrefix
from rmqtool.formats.sysflag import COMPRESSED_FLAG
from rmqtool.report.records import message_record
from rmqtool.store.message import Message, build_messages
from rmqtool.store.record_kernel import clean_records, crc_verdicts

# the header fields record.c reads, in its RMQ_F_* order (Message's names but the hosts' and the size's)
FIELDS = ("total_size", "magic_code", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset",
          "sys_flag", "born_timestamp", "born_host", "born_port", "store_timestamp", "store_host", "store_port",
          "reconsume_times", "prepared_transaction_offset")
# a clean record's row's keys in message_record's order (property_crc_ok when it is there)
ROW_KEYS = ("record", "commit_log_offset", "store_size", "magic_code", "message_version", "body_crc", "body_crc_ok",
            "queue_id", "flag", "queue_offset", "physical_offset", "sys_flag", "born_timestamp", "born_host",
            "store_timestamp", "store_host", "reconsume_times", "prepared_transaction_offset", "body_length",
            "body_compression", "body", "topic", "properties", "properties_raw", "tags", "keys", "uniq_key",
            "msg_id", "file", "file_position", "property_crc_ok")


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
    not ROW_KEYS in its order: then the kernel's parts are not used."""
    m = Message(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b"\0" * 4, 0, 0, b"\0" * 4, 0, 0, 0, b"", "", b"", {}, path="",
                position=0, body_crc_ok=True, property_crc_ok=True)
    row = message_record(m, "none")
    return tuple(row) if tuple(row) == ROW_KEYS and row["record"] == "message" else None


_ready_for = None  # the kernel module set_record_layout was called on


def kernel():
    """The kernel, its record layout set; None without it (or when message_record's keys changed)."""
    global _ready_for
    built = native.kernel
    if built is None or _ready_for is built:
        return built
    if probe_keys() is None:
        return None
    built.set_record_layout(header_layout(), tuple(n.encode("ascii") for n in (
        props.PROPERTY_TAGS, props.PROPERTY_KEYS, props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)),
        ord(props.KEY_SEPARATOR),  # (the properties' own separators are properties.c's)
        MESSAGE_MAGIC_CODE_V2, COMPRESSED_FLAG)
    _ready_for = built
    return built


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


# take(records, verdicts, spans, flags, k, pieces): appends the piece a part writes of the run
# from record k and gives how many records it holds (0: it declines record k)
Take = Callable[..., int]


def window_pieces(buf, i: int, stop: int, offset0: int, position0: int, path, check_crc: bool,
                  take: Take | None) -> tuple[int, list]:
    """(index of the first record not taken, the pieces in order) of the window's clean records
    as scan_segment's rows mode wants them: the runs ``take`` writes, and a Message (with CRC
    verdicts as the scan gives them) for each record it declines, in its place; every record a
    Message when ``take`` is None. As scan_segment's default mode, ``i`` when no clean record
    starts there."""
    records = clean_records(buf, i, stop)
    n = len(records)
    if not n:
        return i, []
    verdicts = crc_verdicts(buf, records) if check_crc else None
    if take is None:
        return records.stop, build_messages(buf, records, offset0, position0, path, check_crc, verdicts=verdicts)
    spans, flags = record_spans(records), verdict_flags(verdicts)
    pieces: list = []
    k = 0
    while k < n:
        k += take(records, verdicts, spans, flags, k, pieces)
        if k < n:  # declined: this record is a Message, its row made (and its findings reported) the Python way
            build_messages(buf, records.rows(k, k + 1), offset0, position0, path, check_crc, pieces,
                           verdicts=None if verdicts is None else verdicts.rows(k, k + 1))
            k += 1
    return records.stop, pieces
