"""Severity overrides (``--severity ID=LEVEL``) of registered findings."""
from __future__ import annotations

import dataclasses

from rmqtool.findings import Finding, Severity, finding  # noqa: F401  (verify's modules import it here)


def with_severity(f: Finding, severity: Severity) -> Finding:
    return dataclasses.replace(f, severity=severity)
