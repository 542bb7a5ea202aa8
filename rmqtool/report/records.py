"""Result rows: the JSON field names scripts rely on (docs/vocabulary.md lists them all).

A message row is built once, as one dict literal, with the values that repeat from record
to record (hosts, the msgId's host part, the magic code's text) taken from small caches:
``dump --format jsonl`` spends most of its time here, not in the scan.
"""
from __future__ import annotations

import base64
from binascii import b2a_base64

from rmqtool.errors import FormatError
from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import MESSAGE_MAGIC_CODE_V2
from rmqtool.formats.sysflag import COMPRESSED_FLAG
from rmqtool.report.columns import iso_ms
from rmqtool.store.hosts import format_host
from rmqtool.store.message import Message
from rmqtool.store.msgid import create_message_id

BODY_MODES = ("text", "hex", "base64", "none")


def human_time(ms: int | None) -> str | None:
    """Epoch ms as UTC ISO 8601 with milliseconds (:func:`columns.iso_ms`); None stays None."""
    return None if ms is None else iso_ms(ms)


# A key's ``*_time`` twin's name, or "" for none: rows repeat the same few dozen keys. Bounded
# as the caches below (_CACHE_MAX): keys also come from what a store holds (a QMQ message's
# attributes).
_TWINS: dict = {}
_CONTAINERS = (dict, list)


def _twin(k) -> str:
    twin = k[:-len("_timestamp")] + "_time" if isinstance(k, str) and k.endswith("_timestamp") else ""
    if len(_TWINS) >= _CACHE_MAX:
        _TWINS.clear()
    _TWINS[k] = twin
    return twin


def with_human_times(obj):
    """A copy where every positive ``*_timestamp`` field gains a ``*_time`` twin in UTC.

    A dump calls it a row of about 30 fields: each key's twin is looked up in a plain dict
    (an lru_cache wrapper a key cost more than the rest of the key's work), and only a dict
    or list value is walked into."""
    if isinstance(obj, list):
        return [with_human_times(x) if isinstance(x, _CONTAINERS) else x for x in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    twins = _TWINS
    for k, v in obj.items():
        if isinstance(v, _CONTAINERS):
            out[k] = with_human_times(v)
            continue
        out[k] = v
        twin = twins.get(k)
        if twin is None:
            twin = _twin(k)
        if twin and isinstance(v, int) and v > 0:
            out[twin] = iso_ms(v)
    return out


def render_body(body: bytes, mode: str, preview: int | None = None):
    if mode == "none":
        return None
    if mode == "raw":  # the bytes themselves, for a table that keeps them as binary (spark export)
        return bytes(body)
    if mode == "hex":
        return body.hex()
    if mode == "base64":
        return base64.b64encode(body).decode("ascii")
    text = body.decode("utf-8", "replace")
    if preview is not None and len(text) > preview:
        text = text[:preview] + "…"
    return text


# Values that repeat across the records of a store, by the bytes they come from. Bounded:
# a damaged store may hold many distinct hosts.
_CACHE_MAX = 4096
_HOSTS: dict = {}
_MSG_ID_HEADS: dict = {}
_MAGIC_TEXT: dict = {}


def host_text(ip: bytes, port: int) -> str:
    """format_host's text of a host, kept once made (a dump asks for the same few hosts again and again)."""
    key = (ip, port)
    text = _HOSTS.get(key)
    if text is None:
        if len(_HOSTS) >= _CACHE_MAX:
            _HOSTS.clear()
        text = _HOSTS[key] = format_host(ip, port)
    return text


def msg_id_head(ip: bytes, port: int) -> str:
    """create_message_id's text but its last 16 hex digits (the commit log offset)."""
    key = (ip, port)
    head = _MSG_ID_HEADS.get(key)
    if head is None:
        if len(_MSG_ID_HEADS) >= _CACHE_MAX:
            _MSG_ID_HEADS.clear()
        head = _MSG_ID_HEADS[key] = create_message_id(ip, port, 0)[:-16]
    return head


def _magic_text(magic: int) -> str:
    text = _MAGIC_TEXT.get(magic)
    if text is None:
        if len(_MAGIC_TEXT) >= _CACHE_MAX:
            _MAGIC_TEXT.clear()
        text = _MAGIC_TEXT[magic] = f"0x{magic & 0xFFFFFFFF:08X}"
    return text


_TAGS, _KEYS, _UNIQ = props.PROPERTY_TAGS, props.PROPERTY_KEYS, props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
def _b64(data: bytes) -> bytes:  # base64.b64encode without its checks: one C call
    return b2a_base64(data, newline=False)


_SEPARATOR = props.KEY_SEPARATOR
_OFFSET_LIMIT = 1 << 63  # the msgId's 8-byte offset; beyond it create_message_id says why


def message_record(m: Message, body: str = "base64", *, decompress: bool = False,
                   preview: int | None = None) -> dict:
    """A message as the JSON object every command emits (``record: "message"`` first). A
    body that does not decompress is shown as stored, and the row carries why
    (``body_decompress_error``); a codec that is not installed raises (CodecMissing)."""
    body_compressed = m.compression if m.sys_flag & COMPRESSED_FLAG else None
    decompress_error = None
    if decompress and body_compressed:
        try:
            shown = render_body(m.decompressed_body(), body, preview)
        except FormatError as exc:
            decompress_error = exc.message
            shown = render_body(m.body, body, preview)
    elif body == "none":
        shown = None
    elif body == "base64":
        shown = _b64(m.body).decode("ascii")
    else:
        shown = render_body(m.body, body, preview)
    properties = m.properties
    keys = properties.get(_KEYS)
    store_ip, store_port, offset = m.store_ip, m.store_port, m.commit_log_offset
    store_key = (store_ip, store_port)
    store_host = _HOSTS.get(store_key) or host_text(store_ip, store_port)
    born_key = (m.born_ip, m.born_port)
    born_host = _HOSTS.get(born_key) or host_text(m.born_ip, m.born_port)
    head = _MSG_ID_HEADS.get(store_key) or msg_id_head(store_ip, store_port)
    magic = m.magic_code
    row = {
        "record": "message",
        "commit_log_offset": offset,
        "store_size": m.store_size,
        "magic_code": _MAGIC_TEXT.get(magic) or _magic_text(magic),
        "message_version": 2 if magic == MESSAGE_MAGIC_CODE_V2 else 1,
        "body_crc": m.body_crc,
        "body_crc_ok": m.body_crc_ok,
        "queue_id": m.queue_id,
        "flag": m.flag,
        "queue_offset": m.queue_offset,
        "physical_offset": m.physical_offset,
        "sys_flag": m.sys_flag,
        "born_timestamp": m.born_timestamp,
        "born_host": born_host,
        "store_timestamp": m.store_timestamp,
        "store_host": store_host,
        "reconsume_times": m.reconsume_times,
        "prepared_transaction_offset": m.prepared_transaction_offset,
        "body_length": len(m.body),
        "body_compression": body_compressed,
        "body": shown,
        "topic": m.topic,
        "properties": properties,
        "properties_raw": _b64(m.properties_raw).decode("ascii"),
        "tags": properties.get(_TAGS),
        "keys": ([keys] if _SEPARATOR not in keys else props.split_keys(keys)) if keys else [],
        "uniq_key": properties.get(_UNIQ),
        "msg_id": f"{head}{offset:016X}" if 0 <= offset < _OFFSET_LIMIT else create_message_id(
            store_ip, store_port, offset),
        "file": m.path,
        "file_position": m.position,
    }
    if not m.properties_utf8_ok:
        row["properties_utf8_ok"] = False
    if not m.topic_utf8_ok:
        row["topic_utf8_ok"] = False
    if m.property_crc_ok is not None:
        row["property_crc_ok"] = m.property_crc_ok
    if decompress and body_compressed:
        if decompress_error is not None:
            row["body_decompress_error"] = decompress_error
        elif body != "none":
            row["body_decompressed"] = True
    return row
