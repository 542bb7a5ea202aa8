"""Which command reads a path of each kind, for the hint a refusal gives: every hint is a
command line that exists (tests run each one)."""
from __future__ import annotations

import pathlib
import shlex

from rmqtool.errors import NotAStore
from rmqtool.store import detect

# detect's kinds -> the command that reads them; markers (abort, lock) are shown by info
_COMMAND = {
    detect.COMMITLOG: "dump commitlog",
    detect.CONSUMEQUEUE: "dump consumequeue",
    detect.BATCH_CONSUMEQUEUE: "dump consumequeue",
    detect.CONSUMEQUEUE_EXT: "dump cqext",
    detect.DLEDGER: "dump dledger",
    detect.INDEX: "dump index",
    detect.CHECKPOINT: "dump checkpoint",
    detect.CONFIG: "dump config",
    detect.STORE: "info",
    detect.ABORT: "info",
    detect.LOCK: "info",
    detect.TIMERWHEEL: "dump timerwheel",
    detect.TIMERLOG: "dump timerlog",
    detect.TIMERCHECK: "dump timercheck",
    detect.TIMERMETRICS: "dump timermetrics",
    detect.EPOCH_FILE: "dump epochfile",
    detect.BROKER_IDENTITY: "info",
    detect.ROCKSDB_CQ: "dump rocksdbcq",
    detect.ROCKSDB_CONFIG: "dump rocksdbconfig",
}


def command_for(path: pathlib.Path, kind: str) -> str:
    """The command line that reads ``path`` (of ``kind``): ``rmqtool dump index PATH``, or
    ``rmqtool info STORE`` for a marker file, which only info shows; a RocksDB file's
    database directory."""
    target = path.parent if kind in (detect.ABORT, detect.LOCK, detect.BROKER_IDENTITY, detect.ROCKSDB_CQ,
                                     detect.ROCKSDB_CONFIG) else path
    return f"rmqtool {_COMMAND[kind]} {shlex.quote(str(target))}"


def wrong_kind(path: pathlib.Path, kind: str, wanted: str) -> NotAStore:
    """The refusal for a path of another kind than a command reads, naming the one that does."""
    article = "an" if kind[0] in "aeiou" else "a"
    return NotAStore(f"this is {article} {kind} file, not {wanted} (try: {command_for(path, kind)})", path)
