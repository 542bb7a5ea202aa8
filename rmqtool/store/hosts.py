"""Socket addresses as the broker stores them: 4 or 16 address bytes and a 4-byte port."""
from __future__ import annotations

import ipaddress

from rmqtool.errors import UsageError


def format_host(ip: bytes, port: int) -> str:
    """'ip:port', or '[v6]:port' for IPv6."""
    if len(ip) == 4:
        return f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}:{port}"
    return f"[{ipaddress.IPv6Address(bytes(ip)).compressed}]:{port}"


def parse_host(text: str) -> tuple[bytes, int]:
    """'1.2.3.4:10911' or '[::1]:10911' -> (address bytes, port)."""
    try:
        if text.startswith("["):
            addr, _, port = text[1:].partition("]:")
        else:
            addr, _, port = text.rpartition(":")
        return ipaddress.ip_address(addr).packed, int(port)
    except ValueError:
        raise UsageError(f"not a host:port address: {text!r}") from None
