"""Result rows: the JSON field names scripts rely on (documented in README.md)."""
from __future__ import annotations

import base64
import datetime

from rmqtool.errors import FormatError
from rmqtool.store.message import Message

BODY_MODES = ("text", "hex", "base64", "none")


def human_time(ms: int | None) -> str | None:
    """Epoch ms as UTC ISO 8601 with milliseconds; None stays None."""
    if ms is None:
        return None
    try:
        dt = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def with_human_times(obj):
    """A copy where every positive ``*_timestamp`` field gains a ``*_time`` twin in UTC."""
    if isinstance(obj, list):
        return [with_human_times(x) for x in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for k, v in obj.items():
        out[k] = with_human_times(v)
        if isinstance(k, str) and k.endswith("_timestamp") and isinstance(v, int) and v > 0:
            out[k[:-len("_timestamp")] + "_time"] = human_time(v)
    return out


def render_body(body: bytes, mode: str, preview: int | None = None):
    if mode == "none":
        return None
    if mode == "hex":
        return body.hex()
    if mode == "base64":
        return base64.b64encode(body).decode("ascii")
    text = body.decode("utf-8", "replace")
    if preview is not None and len(text) > preview:
        text = text[:preview] + "…"
    return text


def message_record(m: Message, body: str = "base64", *, decompress: bool = False,
                   preview: int | None = None) -> dict:
    """A message as the JSON object every command emits. A body that does not decompress
    is shown as stored, and the row carries why (``body_decompress_error``); a codec that is
    not installed raises (CodecMissing)."""
    payload = m.body
    body_compressed = m.compression
    decompress_error = None
    if decompress and body_compressed:
        try:
            payload = m.decompressed_body()
        except FormatError as exc:
            decompress_error = exc.message
    row = {
        "commit_log_offset": m.commit_log_offset,
        "store_size": m.store_size,
        "magic_code": f"0x{m.magic_code:08X}",
        "message_version": m.message_version,
        "body_crc": m.body_crc,
        "body_crc_ok": m.body_crc_ok,
        "queue_id": m.queue_id,
        "flag": m.flag,
        "queue_offset": m.queue_offset,
        "physical_offset": m.physical_offset,
        "sys_flag": m.sys_flag,
        "born_timestamp": m.born_timestamp,
        "born_host": m.born_host,
        "store_timestamp": m.store_timestamp,
        "store_host": m.store_host,
        "reconsume_times": m.reconsume_times,
        "prepared_transaction_offset": m.prepared_transaction_offset,
        "body_length": len(m.body),
        "body_compression": body_compressed,
        "body": render_body(payload, body, preview),
        "topic": m.topic,
        "properties": m.properties,
        "properties_raw": base64.b64encode(m.properties_raw).decode("ascii"),
        "tags": m.tags,
        "keys": m.keys,
        "uniq_key": m.uniq_key,
        "msg_id": m.msg_id,
        "file": m.path,
        "file_position": m.position,
    }
    if not m.properties_utf8_ok:
        row["properties_utf8_ok"] = False
    if not m.topic_utf8_ok:
        row["topic_utf8_ok"] = False
    if m.property_crc_ok is not None:
        row["property_crc_ok"] = m.property_crc_ok
    if decompress_error is not None:
        row["body_decompress_error"] = decompress_error
    elif body != "none" and decompress and body_compressed:
        row["body_decompressed"] = True
    return row
