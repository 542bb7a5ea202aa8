"""The side stores a 5.x broker keeps beside the commit log, found in a store root, and
whether rmqtool reads each (``info``'s ``side_stores``). One table: a reader added for a
side store changes its row here."""
from __future__ import annotations

import pathlib

from rmqtool.store import detect
from rmqtool.store.rocksdb_cq import is_rocksdb_dir

# (name in the store root, what it is, the command that reads it or None); a trailing "*"
# matches any name starting so (DLedger's dledger-<selfId>)
SIDE_STORES = (
    ("timerwheel", "timer store: the wheel (TimerWheel)", "dump timerwheel"),
    ("timerlog", "timer store: the timer log (TimerLog)", "dump timerlog"),
    ("config/timercheck", "timer store: the checkpoint (TimerCheckpoint)", "dump timercheck"),
    ("config/timermetrics", "timer store: per-topic counts (TimerMetrics)", "dump timermetrics"),
    ("batchconsumequeue", "batch consume queues (BatchConsumeQueue)", "dump consumequeue"),
    ("consumequeue_ext", "consume queue extension units (ConsumeQueueExt)", "dump cqext"),
    ("compaction", "compaction topics' log, queues and position-checkpoint (CompactionStore)", "dump compactionlog"),
    ("transaction", "4.x transaction state table and redo log", None),
    ("dledger*", "DLedger commit log (DLedgerCommitLog)", "dump dledger"),
    ("epochFileCheckpoint", "controller mode: the epoch file (EpochFileCache)", "dump epochfile"),
    ("brokerIdentity", "controller mode: the broker id the controller assigned (BrokerMetadata)", "info"),
)


# RocksDB databases, found by their CURRENT file: the 5.x consume queue (flat in consumequeue/,
# beside any file queues) and the config store (RocksDBConfigManager's three databases)
ROCKSDB_STORES = (
    ("consumequeue", "RocksDB consume queue (RocksDBConsumeQueueStore)", "dump rocksdbcq"),
    ("config/topics", "RocksDB config store: topics (RocksDBTopicConfigManager)", "dump rocksdbconfig"),
    ("config/subscriptionGroups", "RocksDB config store: subscription groups (RocksDBSubscriptionGroupManager)",
     "dump rocksdbconfig"),
    ("config/consumerOffsets", "RocksDB config store: consumer offsets (RocksDBConsumerOffsetManager)",
     "dump rocksdbconfig"),
)


def side_stores(root) -> list[dict]:
    """Each side store present in ``root``: its name, path, what it is, read_by (None: not read)."""
    root = pathlib.Path(root)
    found = [{"name": name, "path": str(root / name), "description": what, "read_by": f"rmqtool {command}"}
             for name, what, command in ROCKSDB_STORES if is_rocksdb_dir(root / name)]
    for name, what, command in SIDE_STORES:
        if name.endswith("*"):
            paths = sorted(p for p in root.glob(name) if p.is_dir())
        else:
            paths = [root / name] if (root / name).exists() else []
        for p in paths:
            found.append({"name": p.relative_to(root).as_posix(), "path": str(p), "description": what,
                          "read_by": f"rmqtool {command}" if command else None})
    return found


# a dump kind of a side store (and config/, which a broker writes once it persists one): the
# directory it reads in a store root, and what a root without it tells
_DUMPED = {
    "cqext": ("consumequeue_ext", "the broker ran without enableConsumeQueueExt"),
    "config": ("config", "no config/*.json (the broker writes them there once it persists topics, "
                         "subscriptions or offsets)"),
    "compactionlog": ("compaction", "no compaction store (a 4.x broker, or no COMPACTION topic)"),
    "compactioncq": ("compaction", "no compaction store (a 4.x broker, or no COMPACTION topic)"),
    "positioncheckpoint": ("compaction", "no compaction store (a 4.x broker, or no COMPACTION topic)"),
}


def absent_note(path: str | pathlib.Path, kind: str) -> str | None:
    """What ``dump KIND`` says of a store root without the directory it reads (None: the root
    has it, or the path is not a store root): dump says so, not an empty list alone."""
    path = pathlib.Path(path)
    directory, why = _DUMPED[kind]
    if detect.is_store_dir(path) and not (path / directory).exists():
        return f"no {directory}/ in {path}: {why}"
    return None
