"""The records recover --keep-past-damage put in place of damaged ones: clean records the
broker serves, whose message is gone (the original bytes are in that recover's backup).
The column scan leaves a record with this property to the Message path (its name is among
those store/record_columns.py sets aside), so the check costs nothing on other records."""
from __future__ import annotations

from rmqtool.findings import RECORD_QUARANTINED, finding
from rmqtool.recovery.quarantine import QUARANTINE_PROPERTY


def quarantined_finding(message):
    """recordQuarantined for a message that carries the quarantine property, else None."""
    reason = message.properties.get(QUARANTINE_PROPERTY)
    if reason is None:
        return None
    return finding(RECORD_QUARANTINED, message.path, message.position,
                   f"recover --keep-past-damage replaced a damaged record here ({reason}): its message is gone; the "
                   f"original bytes are in that recover's backup", commit_log_offset=message.commit_log_offset)
