"""Rows for ``dump rocksdbcq`` (the RocksDB consume queue's units, as ``dump consumequeue``'s
rows) and the document of ``dump rocksdbconfig`` (the RocksDB config store as
``mqadmin rocksDBConfigToJson`` prints it, read offline)."""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Iterator

from rmqtool.errors import NotAStore, UsageError
from rmqtool.formats.rocksdb_cq import CONFIG_TYPES
from rmqtool.store import detect
from rmqtool.store.paths import CONFIG_DIR
from rmqtool.store.rocksdb_cq import (RocksDBConsumeQueue, config_document, is_rocksdb_dir, rocksdb_config_dirs,
                                      rocksdb_cq_dir)


@dataclasses.dataclass
class RocksDump:
    note: str | None = None  # said on stderr: why there is nothing to show


def _directory(path: pathlib.Path, what: str) -> pathlib.Path:
    path = detect.require_path(path)
    if not path.is_dir():
        raise NotAStore(f"a file: {what}", path)
    return path


def rocksdb_cq_rows(path, dump: RocksDump, topic: str | None = None, queue_id: int | None = None,
                    from_offset: int | None = None, to_offset: int | None = None,
                    findings: list | None = None) -> Iterator[dict]:
    """Every unit of the RocksDB consume queue in key order (a queue's in queue offset order):
    ``cq_unit`` rows; keys and values that are no unit go to ``findings``."""
    path = _directory(pathlib.Path(path), "dump rocksdbcq takes a store directory or its consumequeue/ directory")
    db = path if is_rocksdb_dir(path) else rocksdb_cq_dir(detect.require_store(path))
    if db is None:
        dump.note = (f"no RocksDB consume queue in {path}: consumequeue/ holds no RocksDB files "
                     f"(storeType=default without rocksdbCQDoubleWriteEnable)")
        return
    with RocksDBConsumeQueue(db) as rq:
        try:
            for u in rq.units(topic, queue_id):
                if (from_offset is not None and u.queue_offset < from_offset) or \
                        (to_offset is not None and u.queue_offset >= to_offset):
                    continue
                yield {"topic": u.topic, "queue_id": u.queue_id, "queue_offset": u.queue_offset,
                       "commit_log_offset": u.commit_log_offset, "store_size": u.size, "tags_code": u.tags_code,
                       "store_timestamp": u.store_timestamp, "file": str(db)}
        finally:
            if findings is not None:
                findings.extend(rq.findings)


def rocksdb_config(path, dump: RocksDump, config_type: str | None, findings: list) -> dict | None:
    """One type's document (``rocksDBConfigToJson -t TYPE``'s) when a type is given or PATH is
    one database; otherwise ``{type: document}`` for each database present."""
    if config_type is not None and config_type not in CONFIG_TYPES:
        raise UsageError(f"--type takes {', '.join(CONFIG_TYPES)}; not {config_type}")
    path = _directory(pathlib.Path(path), "dump rocksdbconfig takes a store directory, its config/ directory "
                                          "or one of config/topics|subscriptionGroups|consumerOffsets/")
    if is_rocksdb_dir(path):
        kind = config_type or path.name
        if kind not in CONFIG_TYPES:
            raise UsageError(f"{path} is not named after a config type: say which with --type "
                             f"({', '.join(CONFIG_TYPES)})")
        return config_document(path, kind, findings)
    root = path.parent if path.name == CONFIG_DIR else detect.require_store(path)
    found = rocksdb_config_dirs(root)
    if config_type is not None:
        found = {config_type: found[config_type]} if config_type in found else {}
    if not found:
        dump.note = (f"no RocksDB config store in {root / CONFIG_DIR}"
                     f"{'/' + config_type if config_type else ''} (storeType=default keeps config/*.json)")
        return None
    if config_type is not None:
        return config_document(found[config_type], config_type, findings)
    return {kind: config_document(db, kind, findings) for kind, db in found.items()}
