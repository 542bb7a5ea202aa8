"""The legacy pull log: ``pulllog/<consumerId>/<group>@<subject>/<20-digit base>``.

Mirrors ``qmq-store/.../store/PullLog.java`` and ``GroupAndSubject``: one int64 message
sequence per pull-log sequence, the unit of pull-log sequence p at byte p x 8; a segment
holds 10,000,000 units. A fill unit (before the first pull of a rebuilt log) holds -1.
(The 5abc92f4 broker no longer writes it: pulls are kept in the action log and in
pull-log tablets, ``tablet.py``.)
"""
from __future__ import annotations

from construct import Int64sb

PULL_LOG_UNIT_BYTES = 8
PULL_LOG_SIZE = PULL_LOG_UNIT_BYTES * 10_000_000
FILL_MESSAGE_SEQUENCE = -1

PullLogUnit = Int64sb
