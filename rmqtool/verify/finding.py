"""A verify finding: a registered Finding plus the fields that locate it in RocketMQ's terms.

Rows carry ``finding, severity, path, offset, message`` and, where a finding has them,
``topic``, ``queue_id``, ``queue_offset``, ``commit_log_offset`` and counts. A subclass
rather than a change to :class:`rmqtool.findings.Finding`, so the registry stays one file
others add IDs to; it can fold into Finding later.
"""
from __future__ import annotations

import dataclasses

from rmqtool.findings import Finding, Severity


@dataclasses.dataclass(slots=True, frozen=True)
class VerifyFinding(Finding):
    details: dict | None = None

    def to_json(self) -> dict:
        row = Finding.to_json(self)  # no zero-argument super() in a slots dataclass
        if self.details:
            row.update(self.details)
        return row


def finding(finding_id: str, path, offset: int | None, message: str, **details) -> VerifyFinding:
    """A finding with its details (None values left out)."""
    return VerifyFinding(finding_id, None if path is None else str(path), offset, message,
                         details={k: v for k, v in details.items() if v is not None} or None)


def with_severity(f: Finding, severity: Severity) -> Finding:
    return dataclasses.replace(f, severity=severity)
