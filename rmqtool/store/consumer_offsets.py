"""Consumer progress: the library side of ``rmqtool offsets``.

For each group, topic and queue of ``config/consumerOffset.json`` (or its .bak, where the
broker would load that): the committed offset against the queue's min and max offsets,
the lag in messages and in time, and what the broker answers when the consumer pulls at
the committed offset. Read-only.

What a pull at the committed offset gets (4.9.8 and 5.3.3 alike)::

    DefaultMessageStore.getMessage        PullMessageProcessor    the consumer
    max == 0     NO_MESSAGE_IN_QUEUE      offset 0: PULL_NOT_FOUND       waits for messages
                                          else: PULL_OFFSET_MOVED        moves to 0
    c < min      OFFSET_TOO_SMALL         PULL_OFFSET_MOVED              moves to min
    c == max     OFFSET_OVERFLOW_ONE      PULL_NOT_FOUND                 waits (long polling)
    c > max      OFFSET_OVERFLOW_BADLY    PULL_OFFSET_MOVED              moves to max
    otherwise    FOUND (messages from c)  SUCCESS

PULL_OFFSET_MOVED: the broker logs "PULL_OFFSET_MOVED:correction offset" and emits an
OffsetMovedEvent; the push consumer (OFFSET_ILLEGAL) drops the queue, stores the
nextBeginOffset as its offset and commits it 10 s later. A slave without
offsetCheckInSlave corrects nothing (nextOffsetCorrection keeps the offset) and answers
PULL_RETRY_IMMEDIATELY. A committed offset below 0 is no offset: queryConsumerOffset
then answers as if none was committed, and the consumer starts from its ConsumeFromWhere.
A missing consume queue is created empty by findConsumeQueue, so it answers as max == 0.
5.3.3 adds OFFSET_RESET for a server-side reset, held in memory only (resetOffsetTable
is not persisted), so the files cannot show it.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

from rmqtool.findings import CONFIG_UNPARSEABLE, CONSUMER_OFFSET_KEY_INVALID, CONSUMER_OFFSET_TABLE_INVALID
from rmqtool.errors import FormatError
from rmqtool.findings import (CONSUMER_OFFSET_ABOVE_MAX, CONSUMER_OFFSET_BELOW_MIN,
                              CONSUMER_OFFSET_FOR_MISSING_QUEUE, Finding, finding)
from rmqtool.formats import config as config_format
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.config import ConfigFile, known_topics, read_config_file
from rmqtool.store.consumequeue import AnyConsumeQueue, BatchConsumeQueueUnit, ConsumeQueues
from rmqtool.store.paths import CONFIG_DIR
from rmqtool.store.broker_conf import config_given
from rmqtool.store.rocksdb_cq import is_rocksdb_store_type, rocksdb_config_dirs, store_type_of
from rmqtool.store.view import StoreView, as_view

CONSUMER_OFFSET_FILE = "consumerOffset.json"
ROCKSDB_CONSUMER_OFFSETS = "consumerOffsets"  # config/consumerOffsets: RocksDBConsumerOffsetManager's database

# GetMessageStatus names, as the broker logs them
NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
FOUND = "FOUND"

COLUMNS = ("group", "topic", "queue_id", "committed_offset", "min_offset", "max_offset", "lag_messages",
           "lag_ms", "next_store_timestamp", "newest_store_timestamp", "status")


@dataclasses.dataclass(slots=True, frozen=True)
class QueueProgress:
    """One group's committed offset in one queue, and what the broker makes of it."""
    group: str
    topic: str
    queue_id: int
    committed_offset: int
    min_offset: int | None  # None: no consume queue on disk
    max_offset: int | None
    lag_messages: int | None  # max - committed, not below 0; None for a committed offset below 0
    lag_ms: int | None  # newest store timestamp - that of the next unconsumed message
    next_store_timestamp: int | None  # of the message the next pull starts at; None when none
    newest_store_timestamp: int | None  # of the queue's last message
    pull_status: str | None  # the GetMessageStatus a pull at the committed offset gets
    next_pull_offset: int | None  # where that pull leaves the consumer (nextBeginOffset)
    status: str  # the status, then what the broker does next

    def record(self) -> dict:
        row = {name: getattr(self, name) for name in COLUMNS + ("pull_status", "next_pull_offset")}
        # the queue's range under the names info uses; min/max_offset stay one release (docs/vocabulary.md)
        row["min_queue_offset"], row["max_queue_offset"] = self.min_offset, self.max_offset
        return row


@dataclasses.dataclass(slots=True)
class ConsumerOffsets:
    rows: list[QueueProgress]
    findings: list[Finding]
    config: ConfigFile | None  # the consumerOffset.json read; None when it could not be read at all
    rocksdb: pathlib.Path | None = None  # config/consumerOffsets, when it is a RocksDB config store

    kind = "offset"  # its rows' kind (report/columns.VIEWS)
    nothing = "committed offset"  # what a lookup that matches no row finds none of

    def notes(self) -> list[str]:
        """What the rows do not show (stderr lines)."""
        none = ["note: no consumerOffset.json (nor .bak) in config/: no committed offsets"] \
            if self.config is not None and self.config.source is None else []
        return none + ([self.rocksdb_note()] if self.rocksdb is not None else [])

    def rocksdb_note(self) -> str | None:
        """What the rows do not show when the offsets may live in RocksDB instead."""
        if self.rocksdb is None:
            return None
        return (f"note: {self.rocksdb} is a RocksDB config store: a 5.x broker with storeType defaultRocksDB "
                f"loads its offsets from it (consumerOffset.json only when its dataVersion counter is higher); "
                f"these rows are the JSON file's (rmqtool dump rocksdbconfig shows the database's)")

    @property
    def source_path(self) -> str | None:
        """The file the offsets came from (main or .bak), None when there was none."""
        return self.config.path if self.config is not None and self.config.source else None


def pull_outcome(committed: int, min_offset: int, max_offset: int) -> tuple[str, int, str]:
    """(GetMessageStatus, nextBeginOffset, what happens next) for a pull at ``committed``
    (DefaultMessageStore.getMessage on a master, then PullMessageProcessor)."""
    if max_offset == 0:
        if committed == 0:
            return NO_MESSAGE_IN_QUEUE, 0, "NO_MESSAGE_IN_QUEUE: the queue is empty; the pull waits for messages"
        return (NO_MESSAGE_IN_QUEUE, 0, "NO_MESSAGE_IN_QUEUE: the queue is empty; PULL_OFFSET_MOVED, "
                                        "the next pull moves the offset to 0")
    if committed < min_offset:
        return (OFFSET_TOO_SMALL, min_offset, f"OFFSET_TOO_SMALL: PULL_OFFSET_MOVED, the next pull starts at "
                                              f"min offset {min_offset}")
    if committed == max_offset:
        return OFFSET_OVERFLOW_ONE, committed, "OFFSET_OVERFLOW_ONE: caught up; the pull waits for new messages"
    if committed > max_offset:
        return (OFFSET_OVERFLOW_BADLY, max_offset, f"OFFSET_OVERFLOW_BADLY: PULL_OFFSET_MOVED, the next pull "
                                                   f"moves the offset back to max offset {max_offset}")
    return FOUND, committed, f"FOUND: the next pull returns messages from offset {committed}"


class _Timestamps:
    """Store timestamps of the messages at queue offsets (the broker's getMessageStoreTimeStamp);
    None where the commit log cannot tell (no commit log at all, a fill unit, a deleted file)."""

    def __init__(self, commit_log: CommitLog | None):
        self.reader = CommitLogReader(commit_log) if commit_log is not None else None
        self.commit_log_min_offset = self.reader.min_offset if self.reader else 0

    def __enter__(self) -> "_Timestamps":
        return self

    def __exit__(self, *exc):
        if self.reader is not None:
            self.reader.close()

    def at(self, queue: AnyConsumeQueue, queue_offset: int) -> int | None:
        unit = queue.get(queue_offset)
        if unit is None or unit.is_fill:
            return None
        if isinstance(unit, BatchConsumeQueueUnit):
            return unit.store_timestamp  # the batch unit keeps it
        if self.reader is None:
            return None
        timestamp, _why = self.reader.store_timestamp(unit.commit_log_offset, unit.size)
        return timestamp if timestamp >= 0 else None


def _offset_table(config: ConfigFile, findings: list[Finding]) -> list[tuple[str, str, int, int]]:
    """(topic, group, queue id, committed offset) of each entry the broker would load (its
    decode held: read_config_file falls back to the .bak where it throws)."""
    table = config_format.consumer_offsets(config.document)
    if table is None:
        doc = config.document
        why = ("offsetTable is null" if isinstance(doc, dict) and "offsetTable" in doc else "no offsetTable")
        findings.append(Finding(CONSUMER_OFFSET_TABLE_INVALID, config.path, None,
                                f"{why}: the broker loads no committed offsets from this file"))
        return []
    entries = []
    for key, queues in table.items():
        pair = config_format.topic_group(key)
        if pair is None:
            findings.append(Finding(CONSUMER_OFFSET_KEY_INVALID, config.path, None,
                                    f"offsetTable key {key!r} is not topic@group: the broker keeps its "
                                    f"{len(queues)} offsets and no consumer's lookup finds them"))
            continue
        entries.extend((*pair, queue_id, offset) for queue_id, offset in queues.items())
    return entries


def _rocksdb_offsets(root) -> "pathlib.Path | None":
    """config/consumerOffsets when it holds a database the broker may load its offsets from: a
    --broker-config whose storeType is not defaultRocksDB says the broker reads the JSON
    (BrokerController: RocksDBConsumerOffsetManager only when isEnableRocksDBStore)."""
    found = rocksdb_config_dirs(root).get(ROCKSDB_CONSUMER_OFFSETS)
    store_type = store_type_of(config_given(root))
    if found is None or (store_type is not None and not is_rocksdb_store_type(store_type)):
        return None
    return found


def committed_queues(config_dir) -> set[tuple[str, int]]:
    """(topic, queue id) of every queue a group committed an offset above 0 in (the
    consumerOffset.json the broker would load), for a topic topics.json still has when there
    is one: queues that held messages. Empty when the file is absent or unreadable."""
    try:
        config = read_config_file(config_dir, CONSUMER_OFFSET_FILE)
    except FormatError:
        return set()
    if config.source is None:
        return set()
    topics = known_topics(config_dir)
    return {(topic, queue_id) for topic, _group, queue_id, offset in _offset_table(config, [])
            if offset > 0 and (topics is None or topic in topics)}


_AT_APPEND_POSITION = object()


def consumer_offsets(store: str | os.PathLike | StoreView, group: str | None = None,
                     topic: str | None = None, *,
                     commit_log_max_offset: "int | None | object" = _AT_APPEND_POSITION,
                     queues: ConsumeQueues | None = None) -> ConsumerOffsets:
    """Every committed offset of ``config/consumerOffset.json`` (or the .bak the broker would
    load), optionally one group's or one topic's, against the store's consume queues, cut
    where the broker's load cuts them at the commit log's append position (or at
    ``commit_log_max_offset``; None: uncut, as a probe of a live store reads them), or
    ``queues`` as the caller gives them (the queues as the simulated next start leaves them:
    recovery/loaded_end.loaded_queues, which store/ may not import)."""
    view = as_view(store)
    root = view.root
    config_dir = root / CONFIG_DIR
    findings: list[Finding] = []
    rocksdb = _rocksdb_offsets(root)
    try:
        config = read_config_file(config_dir, CONSUMER_OFFSET_FILE)
    except FormatError as exc:  # the main file and its .bak both broken
        findings.append(Finding(CONFIG_UNPARSEABLE, exc.path, exc.offset, exc.message))
        return ConsumerOffsets([], findings, None, rocksdb)
    findings += config.findings
    if config.source is None:
        return ConsumerOffsets([], findings, config, rocksdb)
    entries = [e for e in _offset_table(config, findings)
               if (group is None or e[1] == group) and (topic is None or e[0] == topic)]
    if not entries:
        return ConsumerOffsets([], findings, config, rocksdb)

    # Without commitlog/ (a partial copy) the queues give their own ranges, uncut; no store timestamps.
    commit_log = view.commit_log if view.has_commit_log else None
    if queues is None:
        if commit_log_max_offset is _AT_APPEND_POSITION:
            commit_log_max_offset = view.commit_log_end.end if commit_log is not None and view.segments else None
        queues = view.consume_queues(commit_log_max_offset)
    topics = known_topics(config_dir)
    rows = []
    with _Timestamps(commit_log) as timestamps:
        for topic_name, group_name, queue_id, committed in sorted(entries, key=lambda e: (e[1], e[0], e[2])):
            queue = queues.find(topic_name, queue_id)
            row = _progress(group_name, topic_name, queue_id, committed, queue, timestamps.commit_log_min_offset,
                            timestamps)
            finding = _finding(row, queue, config.path, topics)
            if finding is not None:
                findings.append(finding)
            rows.append(row)
    return ConsumerOffsets(rows, findings, config, rocksdb)


def _progress(group: str, topic: str, queue_id: int, committed: int, queue: AnyConsumeQueue | None,
              commit_log_min_offset: int, timestamps: _Timestamps) -> QueueProgress:
    if queue is None:
        low = high = None
        status, next_offset, text = pull_outcome(committed, 0, 0)
    else:
        low, high = queue.min_offset(commit_log_min_offset), queue.max_offset
        status, next_offset, text = pull_outcome(committed, low, high)
    if committed < 0:  # queryConsumerOffset: no committed offset
        return QueueProgress(group, topic, queue_id, committed, low, high, None, None, None, None, None, None,
                             f"no committed offset ({committed}): the consumer starts from its ConsumeFromWhere")
    newest = next_ts = lag_ms = None
    if queue is not None and high > low:
        newest = timestamps.at(queue, high - 1)
        if next_offset < high and status in (FOUND, OFFSET_TOO_SMALL):
            next_ts = timestamps.at(queue, next_offset)
            if next_ts is not None and newest is not None:
                lag_ms = newest - next_ts
    lag = max((high or 0) - committed, 0)
    return QueueProgress(group, topic, queue_id, committed, low, high, lag, lag_ms, next_ts, newest,
                         status, next_offset, text)


def _finding(row: QueueProgress, queue: AnyConsumeQueue | None, path: str,
             known_topics: set[str] | None) -> Finding | None:
    where = f"{row.topic}@{row.group} queue {row.queue_id}: committed offset {row.committed_offset}"
    located = {"group": row.group, "topic": row.topic, "queue_id": row.queue_id, "queue_offset": row.committed_offset}
    if queue is None:
        if row.committed_offset <= 0:
            return None  # nothing consumed yet (a retry topic with no retry message): the broker's normal
        gone = "" if known_topics is None or row.topic in known_topics else " and topics.json has no such topic"
        return finding(CONSUMER_OFFSET_FOR_MISSING_QUEUE, path, None,
                       f"{where}, but the store has no consume queue{gone}; {row.status}", **located)
    if row.pull_status == OFFSET_TOO_SMALL:
        return finding(CONSUMER_OFFSET_BELOW_MIN, path, None,
                       f"{where} is below min offset {row.min_offset}: {row.min_offset - row.committed_offset} "
                       f"messages were deleted unconsumed; {row.status}", **located)
    if row.pull_status == OFFSET_OVERFLOW_BADLY or (row.pull_status == NO_MESSAGE_IN_QUEUE
                                                     and row.committed_offset > 0):
        return finding(CONSUMER_OFFSET_ABOVE_MAX, path, None,
                       f"{where} is past max offset {row.max_offset}: the queue lost messages this group "
                       f"had consumed, or the file belongs to another store; {row.status}", **located)
    return None
