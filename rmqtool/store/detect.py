"""What a path is: a store directory, or which kind of store file (dump takes any of them)."""
from __future__ import annotations

import os
import pathlib

from rmqtool.errors import NotAStore, StoreAccessError, StoreNotFound
from rmqtool.formats.commitlog import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODES
from rmqtool.store import paths
from rmqtool.store.family import detect_family, require_rocketmq
from rmqtool.store.message import RECORD_START
from rmqtool.store.small_file import not_regular, open_regular

COMMITLOG, CONSUMEQUEUE, BATCH_CONSUMEQUEUE, INDEX, CHECKPOINT, CONFIG, ABORT, LOCK = (
    "commitlog", "consumequeue", "batchconsumequeue", "index", "checkpoint", "config", "abort", "lock")
CONSUMEQUEUE_EXT = "consumequeue_ext"
DLEDGER = "dledger"  # a DLedger commit log's data or index file, or its dledger-<selfId>/ directory
# the 5.x timer store's files (rmqtool.store.timer)
TIMERWHEEL, TIMERLOG, TIMERCHECK, TIMERMETRICS = "timerwheel", "timerlog", "timercheck", "timermetrics"
_TIMER_NAMES = {"timerwheel": TIMERWHEEL, "timercheck": TIMERCHECK, "timermetrics": TIMERMETRICS,
                "timermetrics.bak": TIMERMETRICS}
# controller mode's files in the store root (rmqtool.store.controller)
EPOCH_FILE, BROKER_IDENTITY = "epochfile", "brokeridentity"
_CONTROLLER_NAMES = {"epochFileCheckpoint": EPOCH_FILE, "epochFileCheckpoint.bak": EPOCH_FILE,
                     "brokerIdentity": BROKER_IDENTITY, "brokerIdentity-temp": BROKER_IDENTITY}
STORE = "store"
# a file of a RocksDB database (5.x): the consume queue's, flat in consumequeue/, or a config store's
ROCKSDB_CQ, ROCKSDB_CONFIG = "RocksDB consume queue", "RocksDB config store"

INDEX_NAME_DIGITS = 17  # yyyyMMddHHmmssSSS


def require_path(path: str | os.PathLike) -> pathlib.Path:
    p = pathlib.Path(path)
    try:
        kind = not_regular(p.stat().st_mode)
    except FileNotFoundError:
        raise StoreNotFound("no such file or directory", p) from None
    except PermissionError:
        raise StoreAccessError("permission denied", p) from None
    if kind is not None:  # a FIFO would be waited on for ever, a device read for ever
        raise NotAStore(f"{kind}, not a file or directory: rmqtool reads regular files and directories only", p)
    if p.is_dir() and not os.access(p, os.R_OK | os.X_OK):
        raise StoreAccessError("permission denied", p)
    if p.is_file() and not os.access(p, os.R_OK):
        raise StoreAccessError("permission denied", p)
    return p


def is_store_dir(path: pathlib.Path) -> bool:
    return path.is_dir() and (any((path / d).is_dir() for d in (
        paths.COMMITLOG_DIR, paths.CONSUMEQUEUE_DIR, paths.BATCH_CONSUMEQUEUE_DIR, paths.INDEX_DIR))
        or any(path.glob("dledger-*/data")))  # enableDLegerCommitLog: DLedger's entry log, no commitlog/


def require_store(path: str | os.PathLike) -> pathlib.Path:
    """A store root directory, or a clear error saying what the path is instead."""
    p = require_path(path)
    if not p.is_dir():
        raise NotAStore("not a store directory (a file; dump takes single files)", p)
    # another family's store (or one rmqtool tells apart but does not read): said, not "not a store"
    require_rocketmq(detect_family(p), p)
    if not is_store_dir(p):
        if not any(p.iterdir()):
            raise NotAStore("empty directory: not a RocketMQ store", p)
        raise NotAStore("not a RocketMQ store (no commitlog/, consumequeue/ or index/ inside)", p)
    return p


def not_a_store(what: str, path: pathlib.Path) -> NotAStore:
    """The error for a directory that is none of ``what`` (a dump kind's inputs): another
    family's store is said in its one line (naming the commands that read it), as require_store says it."""
    require_rocketmq(detect_family(path), path)
    return NotAStore(what, path)


def kind_of_file(path: pathlib.Path) -> str:
    """The kind of a single store file, from its place, name and first bytes."""
    from rmqtool.store.rocksdb_cq import is_rocksdb_dir, is_rocksdb_file  # a file named: its reader's module
    name = path.name
    parent = path.parent.name
    if is_rocksdb_file(name) and is_rocksdb_dir(path.parent):  # before LOCK and *.json: RocksDB has both
        return ROCKSDB_CQ if parent == paths.CONSUMEQUEUE_DIR else ROCKSDB_CONFIG
    if _in_dledger(path):
        return DLEDGER
    if name in (paths.CHECKPOINT_FILE,):
        return CHECKPOINT
    if name in (paths.ABORT_FILE, paths.ABORT_BAK_FILE):
        return ABORT
    if name == paths.LOCK_FILE:
        return LOCK
    if name in _TIMER_NAMES:
        return _TIMER_NAMES[name]
    if name in _CONTROLLER_NAMES:
        return _CONTROLLER_NAMES[name]
    if parent == TIMERLOG:
        return TIMERLOG
    if name.endswith(".json") or name.endswith(".json.bak"):
        return CONFIG
    if parent == paths.COMMITLOG_DIR:
        return COMMITLOG
    if parent == paths.INDEX_DIR or (len(name) == INDEX_NAME_DIGITS and name.isdigit()):
        return INDEX
    grand = path.parent.parent.parent.name if path.parent.parent else ""
    if grand == paths.CONSUMEQUEUE_DIR:
        return CONSUMEQUEUE
    if grand == paths.BATCH_CONSUMEQUEUE_DIR:
        return BATCH_CONSUMEQUEUE
    if grand == paths.CONSUMEQUEUE_EXT_DIR:
        return CONSUMEQUEUE_EXT
    try:
        with open(open_regular(path, "store file"), "rb") as f:
            head = f.read(8)
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", path) from None
    if len(head) == RECORD_START.size:
        _, magic = RECORD_START.unpack(head)
        if magic in MESSAGE_MAGIC_CODES or magic == BLANK_MAGIC_CODE:
            return COMMITLOG
    raise NotAStore("cannot tell what kind of store file this is", path)


def _in_dledger(path: pathlib.Path) -> bool:
    """A file of DLedger's entry log or index (``dledger-<selfId>/data/`` or ``index/``, named by
    an offset); its checkpoint and currterm are refused here with the command that shows them."""
    if path.parent.name in ("data", "index") and paths.is_dledger_home(path.parent.parent):
        return paths.is_segment_name(path.name)
    if paths.is_dledger_home(path.parent):
        raise NotAStore(f"DLedger's {path.name} file: rmqtool info {path.parent.parent} shows it (its dledger "
                        f"section)", path)
    return False


def kind_of(path: str | os.PathLike) -> str:
    p = require_path(path)
    if p.is_dir():
        if paths.is_dledger_home(p):
            return DLEDGER
        if is_store_dir(p):
            return STORE
        if p.name == paths.COMMITLOG_DIR:
            return COMMITLOG
        if p.name == paths.INDEX_DIR:
            return INDEX
        if p.name == paths.CONFIG_DIR:
            return CONFIG
        require_store(p)  # says what is wrong with it
    return kind_of_file(p)
