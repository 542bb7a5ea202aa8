"""The index key hash of many keys at once: ``IndexFile.indexKeyHashMethod`` vectorised.

Java's String.hashCode is sum(c[i] * 31^(n-1-i)) mod 2^32 over UTF-16 units. Over all
keys laid end to end, each unit is weighted by 31^(N-1-i); a key's sum is then moved
to its own end with 31's inverse mod 2^32. numpy's uint64 arithmetic wraps mod 2^64,
which keeps every value right mod 2^32. The per-character loop of
``formats.indexfile.java_string_hash`` costs ~10 us a key; this a fraction of that.
"""
from __future__ import annotations

import numpy as np

_MASK = np.uint64(0xFFFFFFFF)
_INV31 = pow(31, -1, 1 << 32)


def _powers(base: int, n: int) -> np.ndarray:
    """base^0 .. base^(n-1) mod 2^32."""
    out = np.full(n, base, dtype=np.uint64)
    if n:
        out[0] = 1
        np.cumprod(out, out=out)
    return out & _MASK


_CHUNK = 1 << 15  # keys hashed at once: the arrays below take ~40 bytes a UTF-16 unit


def index_key_hashes(keys: list[str]) -> np.ndarray:
    """indexKeyHashMethod of each key (int64, 0 .. 2^31-1); keys must not be empty.

    In chunks, so memory stays a few MiB however many keys a segment holds (all at once,
    a million keys took 2 GB of weights and products)."""
    if len(keys) <= _CHUNK:
        return _hashes(keys)
    return np.concatenate([_hashes(keys[i:i + _CHUNK]) for i in range(0, len(keys), _CHUNK)])


def _hashes(keys: list[str]) -> np.ndarray:
    if not keys:
        return np.zeros(0, dtype=np.int64)
    encoded = [k.encode("utf-16-be", "surrogatepass") for k in keys]
    units = np.frombuffer(b"".join(encoded), dtype=">u2").astype(np.uint64)
    lengths = np.fromiter((len(e) >> 1 for e in encoded), dtype=np.int64, count=len(encoded))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    total = int(ends[-1])
    weights = _powers(31, total)[::-1]  # unit i weighs 31^(total-1-i)
    sums = np.add.reduceat(units * weights, starts) & _MASK
    inverse = _powers(_INV31, total + 1)  # move each sum from the global end to its key's end
    h = (sums * inverse[total - ends]) & _MASK
    signed = h.astype(np.int64)
    signed = np.where(signed >= 1 << 31, signed - (1 << 32), signed)
    return np.where(signed == -(1 << 31), 0, np.abs(signed))
