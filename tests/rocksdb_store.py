"""Test stores with a RocksDB consume queue and config store, written with rocksdict.

The real broker's RocksDB side (rocksdbjni) cannot be built on these machines, so these
databases are written here from the 5.3.3 layouts, spelled out below byte by byte from the
sources rather than taken from rmqtool's formats/ (the code under test):

- unit key (RocksDBConsumeQueueTable.java:364-367): int32 topic length, 0x01, topic UTF-8,
  0x01, int32 queueId, 0x01, int64 cqOffset; value (374-377): int64 commitLogOffset,
  int32 size, int64 tagsCode, int64 storeTimestamp; big-endian, column family ``default``
- offset key (RocksDBConsumeQueueOffsetTable.java:691-701): int32 topic length, 0x01, topic,
  0x01, "max" or "min", 0x01, int32 queueId; value (715-718): int64 commitLogOffset, int64
  cqOffset of the queue's last unit (RocksDBConsumeQueueStore.java:284-299); the dispatch
  checkpoint: topic "CHECKPOINT_TOPIC", "max", queue 0, an int64 (280-288); column family
  ``offset`` (ConsumeQueueRocksDBStorage.java:37)
- the database in ``<root>/consumequeue/`` itself (RocksDBConsumeQueueStore.java:94,
  StorePathConfigHelper.java:23-25), beside the file queues when double-written
- config: ``config/<type>/``, column families default, kvDataVersion, forbidden
  (ConfigRocksDBStorage.java:36-41, 71-78); keys UTF-8 names, values fastjson JSON

The units come from a fixture's truth.json (what the real 5.3.3 broker's file consume queue
held, and each message's storeTimestamp), so every field a reader returns can be checked
against the truth rather than against rmqtool's file-queue reader.
"""
from __future__ import annotations

import json
import os
import pathlib
import struct

CTRL_1 = b"\x01"


def unit_key(topic: str, queue_id: int, cq_offset: int) -> bytes:
    raw = topic.encode("utf-8")
    return struct.pack(">i", len(raw)) + CTRL_1 + raw + CTRL_1 + struct.pack(">i", queue_id) + CTRL_1 + \
        struct.pack(">q", cq_offset)


def unit_value(commit_log_offset: int, size: int, tags_code: int, store_timestamp: int) -> bytes:
    return struct.pack(">qiqq", commit_log_offset, size, tags_code, store_timestamp)


def offset_key(topic: str, queue_id: int, marker: str) -> bytes:
    raw = topic.encode("utf-8")
    return struct.pack(">i", len(raw)) + CTRL_1 + raw + CTRL_1 + marker.encode() + CTRL_1 + struct.pack(">i", queue_id)


def offset_value(commit_log_offset: int, cq_offset: int) -> bytes:
    return struct.pack(">qq", commit_log_offset, cq_offset)


def truth_units(truth: dict) -> list[dict]:
    """Every unit of the truth's consume queues with its message's storeTimestamp, in queue order."""
    stored = {m["physicalOffset"]: m["storeTimestamp"] for m in truth["truth"]["messages"]}
    units = []
    for topic, queues in sorted(truth["truth"]["consumeQueues"].items()):
        for queue_id, q in sorted(queues.items(), key=lambda kv: int(kv[0])):
            for queue_offset, phy, size, tags, _batch in q["entries"]:
                units.append({"topic": topic, "queue_id": int(queue_id), "queue_offset": queue_offset,
                              "commit_log_offset": phy, "store_size": size, "tags_code": tags,
                              "store_timestamp": stored[phy]})
    return units


def _open(path: pathlib.Path, families: tuple[str, ...]):
    from rocksdict import DBCompressionType, Options, Rdict

    def options():
        o = Options(raw_mode=True)
        o.create_if_missing(True)
        o.set_compression_type(DBCompressionType.lz4())  # rocksdbCompressionType's default (MessageStoreConfig:447)
        return o
    db = Rdict(str(path), options())
    cfs = {}
    for name in families:
        try:
            cfs[name] = db.get_column_family(name)
        except Exception:
            cfs[name] = db.create_column_family(name, options())
    return db, cfs


def _close(db, path: pathlib.Path) -> None:
    db.close()
    (path / "rocksdict-config.json").unlink(missing_ok=True)  # rocksdict's own note: no broker writes one


def write_rocksdb_cq(store: pathlib.Path, units: list[dict], *, max_entries: bool = True) -> pathlib.Path:
    """The units into ``store/consumequeue/`` as RocksDBConsumeQueueStore writes them, with each
    queue's "max" entry (its last unit) and the dispatch checkpoint (the end of the last unit's record)."""
    path = store / "consumequeue"
    path.mkdir(parents=True, exist_ok=True)
    db, cfs = _open(path, ("offset",))
    last: dict = {}
    for u in units:
        db[unit_key(u["topic"], u["queue_id"], u["queue_offset"])] = unit_value(
            u["commit_log_offset"], u["store_size"], u["tags_code"], u["store_timestamp"])
        last[(u["topic"], u["queue_id"])] = u
    if max_entries:
        for (topic, queue_id), u in last.items():
            cfs["offset"][offset_key(topic, queue_id, "max")] = offset_value(u["commit_log_offset"], u["queue_offset"])
    if units:
        end = max(u["commit_log_offset"] + u["store_size"] for u in units)
        cfs["offset"][offset_key("CHECKPOINT_TOPIC", 0, "max")] = struct.pack(">q", end)
    _close(db, path)
    return path


def edit_rocksdb(path: pathlib.Path, *, put: dict | None = None, delete: list | None = None,
                 put_offset: dict | None = None) -> None:
    """Damage a database written here: keys put or deleted in ``default``, put in ``offset``."""
    db, cfs = _open(path, ("offset",))
    for k, v in (put or {}).items():
        db[k] = v
    for k in delete or []:
        del db[k]
    for k, v in (put_offset or {}).items():
        cfs["offset"][k] = v
    _close(db, path)


def write_rocksdb_config(store: pathlib.Path, config_type: str, table: dict, data_version: dict | None) -> pathlib.Path:
    """A config database (RocksDBTopicConfigManager & co.): name -> JSON value, the DataVersion's JSON."""
    path = store / "config" / config_type
    path.mkdir(parents=True, exist_ok=True)
    db, cfs = _open(path, ("kvDataVersion", "forbidden"))
    for name, value in table.items():
        db[name.encode("utf-8")] = value if isinstance(value, bytes) else json.dumps(value).encode("utf-8")
    if data_version is not None:
        cfs["kvDataVersion"][b"kvDataVersionKey"] = json.dumps(data_version).encode("utf-8")
    _close(db, path)
    return path


def snapshot(path: pathlib.Path) -> dict:
    """Each file's (size, mtime, bytes) of a directory: that a reader changed nothing."""
    return {e.name: (e.stat().st_size, e.stat().st_mtime_ns, pathlib.Path(e.path).read_bytes())
            for e in os.scandir(path) if e.is_file()}
