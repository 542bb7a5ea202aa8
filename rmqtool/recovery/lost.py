"""Why a message is no longer served after the broker's next start (or recover's repair): a
lost message's ``reason`` in recover's ``lost_messages``, the same words in every family
(docs/vocabulary.md)."""
from __future__ import annotations

LOG_CUT = "log cut"  # recovery ends the log (RocketMQ's commit log, QMQ's message log) before it
FILE_MISSING = "file missing"  # its commit log file is gone: the broker skips the gap
# no queue unit serves it: its consume queue unit is gone and the start does not dispatch it
# again (RocketMQ); the repair gives it no consumer-log unit (QMQ: records_unserved says why)
UNIT_LOST = "unit lost"
