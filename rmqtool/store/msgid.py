"""Message ids: the offset msgId and the client's UNIQ_KEY, read and made.

Both layouts are declared in ``formats/msgid.py`` (OffsetMessageId, UniqKey); the structs
here are derived from them. The month is not in a UNIQ_KEY; :func:`decode_uniq_key`
resolves it from a nearby timestamp.
"""
from __future__ import annotations

import calendar
import dataclasses
import datetime
import ipaddress
from rmqtool.errors import UsageError
from rmqtool.formats.derive import struct_of
from rmqtool.formats import msgid as layout
from rmqtool.formats.msgid import HEX_LENGTHS
from rmqtool.store.hosts import format_host

# What follows the address: the same struct for both address lengths
_PLACE = struct_of(layout.MessageIdPlace)
assert all(struct_of(schema).size == n + _PLACE.size for n, schema in layout.OffsetMessageId.items())
_UNIQ_KEYS = {n: struct_of(schema) for n, schema in layout.UniqKey.items()}  # by address length


def create_message_id(store_ip: bytes, store_port: int, commit_log_offset: int) -> str:
    """MessageDecoder.createMessageId: store host address, port and commit log offset as hex."""
    return (bytes(store_ip) + _PLACE.pack(store_port, commit_log_offset)).hex().upper()


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetMessageId:
    store_host: str  # "ip:port"
    store_ip: bytes
    store_port: int
    commit_log_offset: int


def _hex_id(value: str, what: str) -> bytes:
    """The bytes of a 32 (IPv4) or 56 (IPv6) hex character id; UsageError otherwise."""
    text = value.strip()
    if len(text) not in HEX_LENGTHS:
        raise UsageError(f"{what} has {' or '.join(map(str, HEX_LENGTHS))} hex characters, not {len(text)}: "
                         f"{value!r}")
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise UsageError(f"not a hex {what.split(' ', 1)[1]}: {value!r}") from None


def decode_message_id(msg_id: str) -> OffsetMessageId:
    """Decode an offset msgId of 32 (IPv4) or 56 (IPv6) hex characters."""
    raw = _hex_id(msg_id, "an offset msgId")
    ip = raw[:HEX_LENGTHS[2 * len(raw)]]
    port, offset = _PLACE.unpack_from(raw, len(ip))
    return OffsetMessageId(format_host(ip, port), ip, port, offset)


@dataclasses.dataclass(frozen=True, slots=True)
class UniqKey:
    ip: str
    pid: int
    class_loader_hash: int
    time_since_month_start_ms: int
    counter: int
    timestamp: int | None  # epoch ms, when a nearby time resolved the month


def _month_starts_around(epoch_ms: int) -> tuple[int, int, int]:
    """The starts of the month before, of the month of ``epoch_ms`` and of the next one (UTC, ms):
    by calendar months, since a fixed number of days skips February from a month's first day."""
    dt = datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.timezone.utc)
    months = (dt.year * 12 + dt.month - 1 + shift for shift in (-1, 0, 1))
    return tuple(calendar.timegm((m // 12, m % 12 + 1, 1, 0, 0, 0)) * 1000 for m in months)


def decode_uniq_key(uniq_key: str, near_ms: int | None = None) -> UniqKey:
    """Decode a UNIQ_KEY of 32 or 56 hex characters.

    With ``near_ms`` (say the message's born timestamp), the month is taken as the one
    that puts the id's time closest to it. The producer's month boundary is its own
    local time; UTC is assumed here, so the result may be off by the zone offset.
    """
    raw = _hex_id(uniq_key, "a UNIQ_KEY")
    ip_bytes, pid, loader, since, counter = _UNIQ_KEYS[HEX_LENGTHS[2 * len(raw)]].unpack(raw)
    ip = str(ipaddress.ip_address(ip_bytes))
    timestamp = None
    if near_ms is not None:
        candidates = [start + since for start in _month_starts_around(near_ms)]
        timestamp = min(candidates, key=lambda t: abs(t - near_ms))
    return UniqKey(ip, pid, loader, since, counter, timestamp)
