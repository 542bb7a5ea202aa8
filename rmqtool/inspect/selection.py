"""Which messages a command asks for: topic, queue, store time window."""
from __future__ import annotations

import dataclasses

from rmqtool.store.message import Message


@dataclasses.dataclass(frozen=True, slots=True)
class MessageSelection:
    topic: str | None = None
    queue_id: int | None = None
    begin_time: int | None = None  # store timestamp, ms, inclusive
    end_time: int | None = None  # store timestamp, ms, inclusive

    def matches(self, m: Message) -> bool:
        if self.topic is not None and m.topic != self.topic:
            return False
        if self.queue_id is not None and m.queue_id != self.queue_id:
            return False
        if self.begin_time is not None and m.store_timestamp < self.begin_time:
            return False
        if self.end_time is not None and m.store_timestamp > self.end_time:
            return False
        return True

    @property
    def everything(self) -> bool:
        return self == MessageSelection()
