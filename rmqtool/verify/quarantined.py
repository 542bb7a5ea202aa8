"""The records recover --keep-past-damage put in place of damaged ones: clean records the
broker serves, whose message is gone (the original bytes are in that recover's backup).
Found by their tagsCode among the band's columns, then their property read, so the check
costs a comparison of a column the band has already."""
from __future__ import annotations

import numpy as np

from rmqtool.dispatch.rules import tags_code
from rmqtool.findings import RECORD_QUARANTINED, finding
from rmqtool.formats.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from rmqtool.recovery.quarantine import QUARANTINE_PROPERTY, QUARANTINE_TAGS

_NEEDLE = (QUARANTINE_PROPERTY + NAME_VALUE_SEPARATOR).encode()
_END = PROPERTY_SEPARATOR.encode()
_CODE = tags_code(QUARANTINE_TAGS)


def quarantined_records(path: str, base_offset: int, offsets: np.ndarray, sizes: np.ndarray,
                        tags_codes: np.ndarray) -> list:
    """A finding for each record of ``offsets`` (commit log offsets; ``sizes`` their totalSize,
    ``tags_codes`` their tagsCode) of the segment at ``path`` that carries the quarantine
    property. The tags a replacement record carries make its tagsCode a column comparison
    away; the few records that match are read to confirm."""
    out = []
    for row in np.flatnonzero(tags_codes == _CODE).tolist():
        start = int(offsets[row]) - base_offset
        try:
            with open(path, "rb") as f:
                f.seek(start)
                record = f.read(int(sizes[row]))
        except OSError:
            continue  # the scan has said why it cannot read the file
        at = record.find(_NEEDLE)
        if at < 0:
            continue  # a message of these tags that no recover put there
        value = record[at + len(_NEEDLE):].split(_END, 1)[0]
        out.append(finding(RECORD_QUARANTINED, path, start,
                           f"recover --keep-past-damage replaced a damaged record here "
                           f"({value.decode('utf-8', 'replace')}): its message is gone; the original bytes are in "
                           f"that recover's backup", commit_log_offset=base_offset + start))
    return out
