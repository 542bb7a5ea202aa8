"""UNIQ_KEY as the Java client makes it (MessageClientIDSetter.createUniqID); the layout is
formats/msgid.py's."""
from __future__ import annotations

import ipaddress
import itertools
import os
import socket
import struct
import threading
import time

from rmqtool.errors import UsageError
from rmqtool.formats.derive import struct_of
from rmqtool.formats.msgid import UniqKeyFixed, UniqKeyPerMessage

_INT32 = 0xFFFFFFFF


def _signed32(value: int) -> int:
    value &= _INT32
    return value - (1 << 32) if value & 0x80000000 else value


def _local_ip() -> bytes:
    """What UtilAll.getIP would pick, roughly: a non-loopback address of this host, else a
    fake one made from the clock as createFakeIP does."""
    try:
        for _family, _type, _proto, _canonname, sockaddr in socket.getaddrinfo(socket.gethostname(), None):
            host = sockaddr[0]  # (host, port) or, IPv6, (host, port, flowinfo, scope id)
            addr = ipaddress.ip_address(host.split("%")[0])
            if not addr.is_loopback and not addr.is_link_local:
                return addr.packed
    except (OSError, ValueError):
        pass
    return struct.pack(">q", int(time.time() * 1000))[4:]


def _month_start_ms(now_ms: int) -> tuple[int, int]:
    """Start of the current and of the next month, local time, as Calendar computes them."""
    t = time.localtime(now_ms / 1000)
    start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
    year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
    nxt = time.mktime((year, month, 1, 0, 0, 0, 0, 0, -1))
    return int(start * 1000), int(nxt * 1000)


_UNIQ_KEY_PER_MESSAGE = struct_of(UniqKeyPerMessage)


class UniqIdGenerator:
    """MessageClientIDSetter.createUniqID: a fixed prefix (ip, pid, class loader hash), then
    the ms since the start of the month and a 16-bit counter, as upper-case hex; the layout
    is formats/msgid.py's UniqKey."""

    def __init__(self, ip: bytes | None = None, pid: int | None = None, loader_hash: int | None = None,
                 clock=None):
        ip = bytes(_local_ip() if ip is None else ip)
        pid = os.getpid() if pid is None else pid
        # Java's class loader identity hash: any int; a stable one per process will do.
        loader_hash = (id(UniqIdGenerator) >> 4) & 0x7FFFFFFF if loader_hash is None else loader_hash
        fixed = UniqKeyFixed.get(len(ip))
        if fixed is None:
            raise UsageError(f"a producer address has 4 or 16 bytes, not {len(ip)}")
        # (short) pid, as putShort writes it: its low 16 bits
        self.prefix = fixed.build(dict(ip=ip, pid=pid & 0xFFFF, class_loader_hash=_signed32(loader_hash))).hex().upper()
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._start, self._next_start = _month_start_ms(self._clock())

    def create(self) -> str:
        now = self._clock()
        if now >= self._next_start:
            with self._lock:
                self._start, self._next_start = _month_start_ms(now)
        diff = _signed32(now - self._start)
        if -1_000_000 < diff < 0:  # clock stepped back (NTP)
            diff = 0
        # putInt writes the int's 32 bits; the layout reads them unsigned
        return self.prefix + _UNIQ_KEY_PER_MESSAGE.pack(diff & 0xFFFFFFFF, next(self._counter) & 0xFFFF).hex().upper()


_default_uniq_ids: UniqIdGenerator | None = None


def create_uniq_id() -> str:
    global _default_uniq_ids
    if _default_uniq_ids is None:
        _default_uniq_ids = UniqIdGenerator()
    return _default_uniq_ids.create()
