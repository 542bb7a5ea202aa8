"""What dispatch derives from a stored message beyond its fields: the tags code a consume
queue unit stores, and the delay levels that redirect a message to SCHEDULE_TOPIC_XXXX.

Mirrors ``MessageExtBrokerInner.tagsString2tagsCode`` and ``ScheduleMessageService``
(``parseDelayLevel``, ``delayLevel2QueueId``, ``computeDeliverTimestamp``) at 4.9.8. The
engine's encoder uses the same rules when it redirects a delayed message on put.
"""
from __future__ import annotations

from rmqtool.errors import UsageError
from rmqtool.formats import properties as props
from rmqtool.formats.indexfile import java_string_hash
from rmqtool.formats.system_topics import SCHEDULE_TOPIC

# TopicValidator.RMQ_SYS_SCHEDULE_TOPIC (declared with the other system topics)
RMQ_SYS_SCHEDULE_TOPIC = SCHEDULE_TOPIC
# MessageStoreConfig.messageDelayLevel default
DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

# tags -> code; the encoder's hot loop reads it directly before calling tags_code
TAGS_CODES: dict[str, int] = {}


def tags_code(tags: str | None) -> int:
    """MessageExtBrokerInner.tagsString2tagsCode at 4.9.8: String.hashCode of the whole tags
    string, for single and MULTI_TAGS topics alike (the filter type is not looked at)."""
    if not tags:
        return 0
    code = TAGS_CODES.get(tags)
    if code is None:
        code = java_string_hash(tags)
        if len(TAGS_CODES) > 4096:
            TAGS_CODES.clear()
        TAGS_CODES[tags] = code
    return code



# --- delay levels (ScheduleMessageService) ---------------------------------------------------

_TIME_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


class DelayLevels:
    """messageDelayLevel parsed as ScheduleMessageService.parseDelayLevel does."""

    def __init__(self, spec: str = DEFAULT_MESSAGE_DELAY_LEVEL):
        self.spec = spec
        self.table: dict[int, int] = {}
        try:
            for level, value in enumerate(spec.split(" "), start=1):
                self.table[level] = _TIME_UNITS[value[-1]] * int(value[:-1])
        except (KeyError, ValueError, IndexError):
            raise UsageError(f"not a messageDelayLevel: {spec!r}") from None
        self.max_level = max(self.table) if self.table else 0

    def queue_id(self, level: int) -> int:
        """ScheduleMessageService.delayLevel2QueueId."""
        return level - 1

    def deliver_timestamp(self, level: int, store_timestamp: int) -> int:
        """ScheduleMessageService.computeDeliverTimestamp: the SCHEDULE_TOPIC_XXXX tagsCode."""
        delay = self.table.get(level)
        return store_timestamp + (delay if delay is not None else 1000)


def delay_level_of(properties: dict) -> int:
    """Message.getDelayTimeLevel: the DELAY property as an int, 0 when absent."""
    value = properties.get(props.PROPERTY_DELAY_TIME_LEVEL)
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"DELAY property is not a number: {value!r}") from None
