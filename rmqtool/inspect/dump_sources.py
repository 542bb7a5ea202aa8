"""Rows for ``dump consumequeue|index|checkpoint|config``: PATH may be a store, a directory
of that kind, or a single file; each function yields JSON-ready rows and collects findings."""
from __future__ import annotations

import pathlib
from typing import Iterator

from rmqtool.errors import FormatError, NotAStore
from rmqtool.findings import (CONFIG_UNPARSEABLE, CONSUME_QUEUE_HOLE, CONSUME_QUEUE_UNIT_INVALID, QUEUE_DIR_INVALID,
                              Finding)
from rmqtool.formats.consumequeue import is_written_unit
from rmqtool.inspect.hints import wrong_kind as _wrong_kind
from rmqtool.report.sink import warn
from rmqtool.store import detect
from rmqtool.store.checkpoint import read_checkpoint
from rmqtool.store.config import parse_config_bytes, read_config_bytes, read_config_dir
from rmqtool.store.consumequeue import BatchConsumeQueue, ConsumeQueue, queue_id_of
from rmqtool.store.cqext import DanglingRuns, queue_ext
from rmqtool.store.indexfile import IndexFile
from rmqtool.store.paths import BATCH_CONSUMEQUEUE_DIR, CONFIG_DIR, CONSUMEQUEUE_DIR, INDEX_DIR
from rmqtool.store.rocksdb_cq import rocksdb_only
from rmqtool.store.view import StoreView, open_store


def _queue_id(queue_dir: pathlib.Path) -> int:
    """A queue directory's id, from its name; a name that is not one is refused."""
    queue_id = queue_id_of(queue_dir.name)
    if queue_id is None:
        raise NotAStore(f"directory name {queue_dir.name!r} is not a queue id (consumequeue/TOPIC/QUEUEID/)",
                        queue_dir)
    return queue_id


def _queues_for(path: pathlib.Path, topic: str | None, queue_id: int | None):
    """(queues, only this file or None, findings) for a store, a CQ root, topic or queue dir, or one file."""
    path = detect.require_path(path)  # a missing path is exit 8 in every command, not "not a store"
    if path.is_file():
        kind = detect.kind_of_file(path)
        if kind not in (detect.CONSUMEQUEUE, detect.BATCH_CONSUMEQUEUE):
            raise _wrong_kind(path, kind, "a consume queue file")
        cls = BatchConsumeQueue if kind == detect.BATCH_CONSUMEQUEUE else ConsumeQueue
        qdir = path.parent
        return [cls(qdir, qdir.parent.name, _queue_id(qdir))], str(path), []
    if detect.is_store_dir(path):
        cqs = StoreView(path).consume_queues()  # the store opened once: its queues as the view opens them
        _rocksdb_hint(path, cqs.queues)
        return cqs.queues, None, cqs.findings
    # a consumequeue/ root, a topic dir or a queue dir
    names = [path.name, path.parent.name, path.parent.parent.name]
    for depth, name in enumerate(names):
        if name in (CONSUMEQUEUE_DIR, BATCH_CONSUMEQUEUE_DIR):
            cls = BatchConsumeQueue if name == BATCH_CONSUMEQUEUE_DIR else ConsumeQueue
            if depth == 2:
                return [cls(path, path.parent.name, _queue_id(path))], None, []
            if depth == 1:
                queues, findings = [], []
                for q in sorted(path.iterdir(), key=lambda p: p.name):
                    if q.is_dir() and queue_id_of(q.name) is not None:
                        queues.append(cls(q, path.name, queue_id_of(q.name)))
                    else:
                        findings.append(Finding(QUEUE_DIR_INVALID, str(q), None, "not a queue id directory; ignored"))
                return queues, None, findings
            cqs = StoreView(path.parent).consume_queues()
            if name == CONSUMEQUEUE_DIR:
                _rocksdb_hint(path.parent, cqs.queues)
            return [q for q in cqs.queues if q.is_batch == (name == BATCH_CONSUMEQUEUE_DIR)], None, cqs.findings
    raise detect.not_a_store("not a store, consume queue directory or consume queue file", path)


def _rocksdb_hint(root: pathlib.Path, queues) -> None:
    """storeType=defaultRocksDB: no file queue to dump; say which command reads its queues."""
    if rocksdb_only(root, queues):
        warn(f"rmqtool: {root}'s consume queues are in RocksDB only (storeType=defaultRocksDB): "
             f"rmqtool dump rocksdbcq {root} reads them")


def consume_queue_rows(path: pathlib.Path, topic: str | None = None, queue_id: int | None = None,
                       from_offset: int | None = None, to_offset: int | None = None,
                       findings: list | None = None) -> Iterator[dict]:
    """Every unit in range, fill units and invalid ones too (``valid: false``, with a finding
    each: the broker's readers skip them, a dump shows them)."""
    queues, only_file, found = _queues_for(path, topic, queue_id)
    if findings is not None:
        findings.extend(found)
    for q in queues:
        if (topic is not None and q.topic != topic) or (queue_id is not None and q.queue_id != queue_id):
            continue
        start = None if from_offset is None else from_offset
        if only_file is not None and start is None:
            start = 0  # a single file: all of it, fill units included
        shown = set()  # (path, position) of the invalid units given a finding here
        ext = None if q.is_batch else queue_ext(q)
        dangling = DanglingRuns(q.topic, q.queue_id)
        units = q.iter_units(start, to_offset) if q.is_batch else q.iter_units(start, to_offset, invalid=True)
        for u in units:
            if only_file is not None and u.path != only_file:
                continue
            row = {"topic": u.topic, "queue_id": u.queue_id, "queue_offset": u.queue_offset,
                   "commit_log_offset": u.commit_log_offset, "store_size": u.size, "tags_code": u.tags_code,
                   "size": u.size}  # size: the name before 0.2, one release more
            if q.is_batch:
                row.update(store_timestamp=u.store_timestamp, msg_base_offset=u.msg_base_offset,
                           batch_size=u.batch_size, compacted_offset=u.compacted_offset)
            else:
                row["is_fill"] = u.is_fill
                row["valid"] = is_written_unit(u.commit_log_offset, u.size)
                found = ext.lookup(u.tags_code) if row["valid"] else None
                if found is not None:  # what ConsumeQueue's iterator hands getMessage
                    row.update(tags_code=found.unit.tags_code if found.ok else u.tags_code, ext_address=u.tags_code,
                               ext_lookup=found.status,
                               filter_bit_map=found.unit.bit_map_hex if found.ok else None)
                    dangling.add(u.queue_offset, u.path, u.position, found)
                if not row["valid"] and findings is not None:
                    shown.add((u.path, u.position))
                    hole = u.commit_log_offset == 0 and u.size == 0 and u.tags_code == 0
                    findings.append(Finding(CONSUME_QUEUE_HOLE if hole else CONSUME_QUEUE_UNIT_INVALID, u.path,
                                            u.position, f"queue offset {u.queue_offset}: unit with commitLogOffset "
                                            f"{u.commit_log_offset}, size {u.size} (the broker skips it)"))
            row.update(file=u.path, file_position=u.position)
            yield row
        if findings is not None:
            findings.extend(f for f in q.findings if (f.path, f.offset) not in shown)
            findings.extend(dangling.findings())


def index_rows(path: pathlib.Path, entries: bool = True, slots: bool = False,
               findings: list | None = None) -> Iterator[dict]:
    path = detect.require_path(path)
    if path.is_file():
        kind = detect.kind_of_file(path)
        if kind != detect.INDEX:
            raise _wrong_kind(path, kind, "an index file")
        files = [IndexFile(path)]
    else:
        if path.name != INDEX_DIR and not detect.is_store_dir(path):
            raise detect.not_a_store("not a store, index directory or index file", path)
        root = path.parent if path.name == INDEX_DIR else path
        listing = StoreView(root).index_files  # the store opened once: its index/ as the view lists it
        files = listing.open_all()
        if findings is not None:
            findings.extend(listing.findings)
    for f in files:
        try:
            h = f.header
            yield {"record": "header", "file": str(f.path), "begin_timestamp": h.begin_timestamp,
                   "end_timestamp": h.end_timestamp, "begin_commit_log_offset": h.begin_phy_offset,
                   "end_commit_log_offset": h.end_phy_offset, "hash_slot_count": h.hash_slot_count,
                   "index_count": h.index_count, "max_hash_slot_num": f.hash_slot_num,
                   "max_index_num": f.index_num, "write_full": f.is_write_full,
                   # the names before 0.2, one release more
                   "begin_phy_offset": h.begin_phy_offset, "end_phy_offset": h.end_phy_offset}
            if slots:
                for slot, value in f.iter_slots():
                    yield {"record": "slot", "file": str(f.path), "slot": slot, "index": value}
            if entries:
                for e in f.iter_entries():
                    yield {"record": "entry", "file": str(f.path), "index": e.number, "key_hash": e.key_hash,
                           "commit_log_offset": e.phy_offset, "time_diff": e.time_diff,
                           "timestamp": f.timestamp_of(e), "prev_index": e.prev_index,
                           "file_position": e.position,
                           "phy_offset": e.phy_offset}  # the name before 0.2, one release more
            if findings is not None:
                findings.extend(f.findings)
        finally:
            f.close()


def checkpoint_row(path: pathlib.Path, findings: list | None = None) -> dict:
    if detect.require_path(path).is_dir():
        path = open_store(path).paths.checkpoint
    elif detect.kind_of_file(path) != detect.CHECKPOINT:
        raise _wrong_kind(path, detect.kind_of_file(path), "a checkpoint file")
    cp = read_checkpoint(path)
    if findings is not None:
        findings.extend(cp.findings)
    return {"file": str(path), "physic_msg_timestamp": cp.physic_msg_timestamp,
            "logics_msg_timestamp": cp.logics_msg_timestamp, "index_msg_timestamp": cp.index_msg_timestamp,
            "min_timestamp": cp.min_timestamp, "master_flushed_offset": cp.master_flushed_offset,
            "confirm_phy_offset": cp.confirm_phy_offset, "has_5x_fields": cp.has_5x_fields}


def _stringify_keys(obj):
    """JSON needs string keys; fastjson's integer keys become their decimal text."""
    if isinstance(obj, dict):
        return {str(k): _stringify_keys(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_stringify_keys(v) for v in obj]
    return obj


def config_rows(path: pathlib.Path, findings: list | None = None) -> Iterator[dict]:
    detect.require_path(path)
    if path.is_dir() and path.name != CONFIG_DIR and not (path / CONFIG_DIR).is_dir():
        detect.require_store(path)  # a store without config/ dumps nothing; an empty dir is not a store
    if path.is_file():
        if detect.kind_of_file(path) != detect.CONFIG:
            raise _wrong_kind(path, detect.kind_of_file(path), "a config file")
        raw = read_config_bytes(path)  # one too large to read is refused as before
        try:
            doc = parse_config_bytes(raw, path)
        except FormatError as exc:  # a config file the broker cannot parse is damage, as in a directory
            if findings is None:
                raise
            findings.append(Finding(CONFIG_UNPARSEABLE, exc.path, exc.offset, exc.message))
            return
        yield {"file": path.name, "path": str(path), "source": "file", "document": _stringify_keys(doc)}
        return
    root = path.parent if path.name == "config" else path
    cd = read_config_dir(root)
    if findings is not None:
        findings.extend(cd.all_findings())
    for name, c in cd.files.items():
        yield {"file": name, "path": c.path, "source": c.source, "document": _stringify_keys(c.document)}
