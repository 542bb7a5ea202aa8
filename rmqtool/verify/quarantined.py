"""The records recover --keep-past-damage put in place of damaged ones: clean records the
broker serves, whose message is gone (the original bytes are in that recover's backup).
Found by their property's name in the bytes of a band's records (one C-speed search, no
record decoded), so the check costs a scan of bytes the band has just read."""
from __future__ import annotations

import mmap
import os

import numpy as np

from rmqtool.findings import RECORD_QUARANTINED, finding
from rmqtool.formats.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from rmqtool.recovery.quarantine import QUARANTINE_PROPERTY

_NEEDLE = (QUARANTINE_PROPERTY + NAME_VALUE_SEPARATOR).encode()
_END = PROPERTY_SEPARATOR.encode()


def quarantined_records(path: str, base_offset: int, offsets: np.ndarray, sizes: np.ndarray) -> list:
    """A finding for each record of ``offsets`` (commit log offsets, ascending; ``sizes`` their
    totalSize) of the segment at ``path`` that carries the quarantine property."""
    if not len(offsets):
        return []
    lo, hi = int(offsets[0]) - base_offset, int(offsets[-1] + sizes[-1]) - base_offset
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return []  # the scan has said why it cannot read the file
    try:
        buf = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return []
    finally:
        os.close(fd)
    out = []
    try:
        at = buf.find(_NEEDLE, lo, hi)
        while at >= 0:
            row = int(np.searchsorted(offsets, base_offset + at, side="right")) - 1
            start = int(offsets[row]) - base_offset
            end = start + int(sizes[row])
            if at < end:
                stop = buf.find(_END, at, end)
                reason = buf[at + len(_NEEDLE):stop if stop >= 0 else end].decode("utf-8", "replace")
                out.append(finding(RECORD_QUARANTINED, path, start,
                                   f"recover --keep-past-damage replaced a damaged record here ({reason}): its "
                                   f"message is gone; the original bytes are in that recover's backup",
                                   commit_log_offset=base_offset + start))
            at = buf.find(_NEEDLE, max(end, at + 1), hi)
    finally:
        buf.close()
    return out
