"""Which messages a command asks for: topic, queue, store time window, tag, key, sys flags, msgId."""
from __future__ import annotations

import dataclasses

from rmqtool.formats.sysflag import (COMPRESSED_FLAG, INNER_BATCH_FLAG, TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK,
                                     TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
from rmqtool.store.message import Message

# --sys-flag NAME: what a record's sysFlag must show (a transaction type, or a flag bit set)
SYS_FLAG_NAMES = ("prepared", "commit", "rollback", "compressed", "batch")


def _has_sys_flag(sys_flag: int, name: str) -> bool:
    if name == "compressed":
        return bool(sys_flag & COMPRESSED_FLAG)
    if name == "batch":  # a 5.x inner batch: one record holding several messages
        return bool(sys_flag & INNER_BATCH_FLAG)
    return sys_flag & TRANSACTION_MASK == {"prepared": TRANSACTION_PREPARED_TYPE, "commit": TRANSACTION_COMMIT_TYPE,
                                           "rollback": TRANSACTION_ROLLBACK_TYPE}[name]


@dataclasses.dataclass(frozen=True, slots=True)
class MessageSelection:
    topic: str | None = None
    queue_id: int | None = None
    begin_time: int | None = None  # store timestamp, ms, inclusive
    end_time: int | None = None  # store timestamp, ms, inclusive
    tag: str | None = None  # the TAGS property, exactly
    key: str | None = None  # one of the KEYS, or the UNIQ_KEY
    sys_flags: tuple[str, ...] = ()  # SYS_FLAG_NAMES: a record showing any of them
    msg_id: str | None = None  # the offset msgId (store host and commit log offset), case-insensitive

    def __post_init__(self):
        bad = sorted(set(self.sys_flags) - set(SYS_FLAG_NAMES))
        if bad:
            from rmqtool.errors import UsageError
            raise UsageError(f"--sys-flag takes {'|'.join(SYS_FLAG_NAMES)}, not {', '.join(bad)}")

    def matches(self, m: Message) -> bool:
        if self.topic is not None and m.topic != self.topic:
            return False
        if self.queue_id is not None and m.queue_id != self.queue_id:
            return False
        if self.begin_time is not None and m.store_timestamp < self.begin_time:
            return False
        if self.end_time is not None and m.store_timestamp > self.end_time:
            return False
        if self.tag is not None and m.tags != self.tag:
            return False
        if self.key is not None and self.key not in m.keys and m.uniq_key != self.key:
            return False
        if self.sys_flags and not any(_has_sys_flag(m.sys_flag, name) for name in self.sys_flags):
            return False
        if self.msg_id is not None and m.msg_id.upper() != self.msg_id.upper():
            return False
        return True

    @property
    def everything(self) -> bool:
        return self == MessageSelection()
