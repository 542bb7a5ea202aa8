"""``dump commitlog --stats``: what a commit log holds, summed instead of listed.

Per topic and queue: messages, their bytes (store sizes), the first and last store
timestamp and the queue offset range; then the damage, by finding ID: how many findings
and the bytes skipped as damaged regions. One pass of the same scan ``dump commitlog`` makes, with its selection.
"""
from __future__ import annotations

import dataclasses
from typing import Iterator

from rmqtool.formats.sysflag import enters_consume_queue
from rmqtool.inspect.commitlog_dump import CommitLogDump
from rmqtool.recovery.salvage import queue_offsets_of
from rmqtool.store.message import Message


@dataclasses.dataclass(slots=True)
class QueueStats:
    topic: str
    queue_id: int
    messages: int = 0
    bytes: int = 0
    first_store_timestamp: int | None = None
    last_store_timestamp: int | None = None
    min_queue_offset: int | None = None
    last_queue_offset: int | None = None

    def add(self, m: Message) -> None:
        offsets = queue_offsets_of(m)  # a 5.x inner batch record: INNER_NUM messages, their offsets
        self.messages += len(offsets)
        self.bytes += m.store_size
        ts = m.store_timestamp
        if self.first_store_timestamp is None or ts < self.first_store_timestamp:
            self.first_store_timestamp = ts
        if self.last_store_timestamp is None or ts > self.last_store_timestamp:
            self.last_store_timestamp = ts
        if self.min_queue_offset is None or offsets.start < self.min_queue_offset:
            self.min_queue_offset = offsets.start
        if self.last_queue_offset is None or offsets[-1] > self.last_queue_offset:
            self.last_queue_offset = offsets[-1]

    def record(self) -> dict:
        return {"record": "queue_stats", "topic": self.topic, "queue_id": self.queue_id, "messages": self.messages,
                "bytes": self.bytes, "first_store_timestamp": self.first_store_timestamp,
                "last_store_timestamp": self.last_store_timestamp, "min_queue_offset": self.min_queue_offset,
                # one past the last seen, as the broker's maxOffset and every other max_queue_offset
                "max_queue_offset": None if self.last_queue_offset is None else self.last_queue_offset + 1}


def commitlog_stats(dumps: CommitLogDump | list[CommitLogDump], progress=None) -> Iterator[dict]:
    """Rows of the summary of the dumps' ranges and selection (several: summed): one
    ``queue_stats`` row per topic and queue (sorted), then one ``damage_stats`` row per
    finding ID. ``limit`` stops after that many selected messages in all. Findings stay in
    each dump's ``findings``."""
    dumps = dumps if isinstance(dumps, list) else [dumps]
    queues: dict[tuple[str, int], QueueStats] = {}
    limit = dumps[0].limit if dumps else None
    seen = 0
    for dump in dumps:
        if limit is not None and seen >= limit:
            break
        selection = None if dump.selection.everything else dump.selection
        for r in dump.results(progress):
            if type(r) is not Message or (selection is not None and not selection.matches(r)):
                continue
            if not enters_consume_queue(r.sys_flag):  # no queue offset, no unit: not a queue's message
                continue
            q = queues.get((r.topic, r.queue_id))
            if q is None:
                q = queues[(r.topic, r.queue_id)] = QueueStats(r.topic, r.queue_id)
            q.add(r)
            seen += 1
            if limit is not None and seen >= limit:
                break
    for key in sorted(queues):
        yield queues[key].record()
    damage: dict[str, list] = {}
    for f in (f for dump in dumps for f in dump.findings):
        tally = damage.setdefault(f.id, [f.severity.value, 0, 0])
        tally[1] += 1
        tally[2] += (f.details or {}).get("bytes_skipped") or 0
    for finding_id in sorted(damage):
        severity, count, skipped = damage[finding_id]
        yield {"record": "damage_stats", "finding": finding_id, "severity": severity, "count": count,
               "bytes_skipped": skipped}
