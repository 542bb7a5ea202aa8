"""Rows for ``dump compactionlog|compactioncq|positioncheckpoint`` and info's compaction
section. PATH is a store, its ``compaction/`` directory, or one file of the kind asked."""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Iterator

from rmqtool.errors import NotAStore
from rmqtool.formats.compaction import (COMPACTION_CQ_DIR, COMPACTION_DIR, COMPACTION_LOG_DIR,
                                        POSITION_CHECKPOINT_FILE)
from rmqtool.store import detect
from rmqtool.store.commitlog import Blank, Corrupt, findings_of
from rmqtool.store.compaction import (CompactionStore, consumer_view, is_tombstone, open_compaction_store,
                                      read_position_checkpoint, record_keys)
from rmqtool.store.message import Message
from rmqtool.formats.properties import split_keys

LOG, CQ, CHECKPOINT = "compactionlog", "compactioncq", "positioncheckpoint"
_FILE_DIRS = {LOG: COMPACTION_LOG_DIR, CQ: COMPACTION_CQ_DIR}


@dataclasses.dataclass
class _Source:
    store: CompactionStore
    only_file: str | None  # one file asked for: rows of that file only


def _source(path: pathlib.Path, kind: str) -> _Source:
    """The compaction store a path names, and the one file when the path is a file."""
    path = detect.require_path(path)
    if path.is_file():
        if kind == CHECKPOINT and path.name.startswith(POSITION_CHECKPOINT_FILE) \
                and path.parent.name == COMPACTION_DIR:
            return _Source(open_compaction_store(path.parent.parent), str(path))
        if kind in _FILE_DIRS and len(path.parents) >= 4 and path.parents[2].name == _FILE_DIRS[kind] \
                and path.parents[3].name == COMPACTION_DIR:
            return _Source(open_compaction_store(path.parents[4]), str(path))
        what = {LOG: "a compaction log file (compaction/compactionLog/TOPIC/QUEUE/FILE)",
                CQ: "a compaction queue file (compaction/compactionCq/TOPIC/QUEUE/FILE)",
                CHECKPOINT: "compaction/position-checkpoint"}[kind]
        raise NotAStore(f"not {what}", path)
    if path.name == COMPACTION_DIR and not detect.is_store_dir(path):
        return _Source(open_compaction_store(path.parent), None)
    return _Source(open_compaction_store(detect.require_store(path)), None)


def _queues(src: _Source, topic: str | None, queue_id: int | None):
    return [q for q in src.store.queues
            if (topic is None or q.topic == topic) and (queue_id is None or q.queue_id == queue_id)]


def record_row(r, topic: str, queue_id: int) -> dict:
    """One compaction log record in the project's words: ``compaction_log_offset`` is where it lies
    in the compaction log (its PHYSICALOFFSET field), ``compaction_key`` the whole KEYS string."""
    if isinstance(r, Message):
        key = record_keys(r)
        return {"record": "message", "topic": r.topic, "queue_id": r.queue_id, "queue_offset": r.queue_offset,
                "compaction_log_offset": r.commit_log_offset, "store_size": r.store_size,
                "compaction_key": key, "keys": split_keys(key), "tombstone": is_tombstone(r), "tags": r.tags,
                "store_timestamp": r.store_timestamp, "uniq_key": r.uniq_key, "body_length": len(r.body),
                "body_crc_ok": r.body_crc_ok, "physical_offset": r.physical_offset, "file": r.path,
                "file_position": r.position}
    row = {"record": "blank" if isinstance(r, Blank) else "corrupt", "topic": topic, "queue_id": queue_id,
           "compaction_log_offset": r.offset, "store_size": r.size}
    if isinstance(r, Corrupt):
        row.update(finding=r.finding_id, reason=r.reason)
    row.update(file=r.path, file_position=r.position)
    return row


def compaction_log_rows(path: pathlib.Path, topic: str | None = None, queue_id: int | None = None,
                        findings: list | None = None, damaged: list | None = None) -> Iterator[dict]:
    """Every record of the compaction logs: messages, END_OF_FILE blanks, damaged regions
    (each damaged one counted in ``damaged`` and its findings added to ``findings``)."""
    src = _source(path, LOG)
    if findings is not None:
        findings.extend(src.store.findings)
    for q in _queues(src, topic, queue_id):
        for r in q.scan(findings=findings):
            if src.only_file is not None and r.path != src.only_file:
                continue
            bad = findings_of(r)
            if bad:
                if findings is not None:
                    findings.extend(bad)
                if damaged is not None:
                    damaged.append(r)
            yield record_row(r, q.topic, q.queue_id)


def compaction_cq_rows(path: pathlib.Path, topic: str | None = None, queue_id: int | None = None,
                       findings: list | None = None) -> Iterator[dict]:
    """Every written unit of the compaction queues, END_POSITION units included."""
    src = _source(path, CQ)
    if findings is not None:
        findings.extend(src.store.findings)
    for q in _queues(src, topic, queue_id):
        for u in q.units():
            if src.only_file is not None and u.path != src.only_file:
                continue
            yield {"topic": u.topic, "queue_id": u.queue_id, "queue_offset": u.queue_offset,
                   "compaction_log_offset": u.log_offset, "store_size": u.size, "tags_code": u.tags_code,
                   "store_timestamp": u.store_timestamp, "batch_size": u.batch_num,
                   "compacted_offset": u.compacted_offset, "end_position": u.is_end_position,
                   "file": u.path, "file_position": u.position}


def position_checkpoint_rows(path: pathlib.Path, findings: list | None = None) -> Iterator[dict]:
    """position-checkpoint's queueOffsetMap, an entry a row (the file the broker would load:
    the .bak when the main file is missing, empty or broken; a .bak asked for by name: that one)."""
    src = _source(path, CHECKPOINT)
    root = src.store.root
    if src.only_file is not None and src.only_file.endswith(".bak"):
        from rmqtool.store.config import parse_config_bytes, read_config_bytes
        doc = parse_config_bytes(read_config_bytes(src.only_file), src.only_file)
        table = doc.get("queueOffsetMap") if isinstance(doc, dict) else None
        offsets, loaded = dict(table or {}), src.only_file
    else:
        offsets, loaded, found = read_position_checkpoint(root) if root.is_dir() else ({}, None, [])
        if findings is not None:
            findings.extend(found)
    for key, offset in sorted(offsets.items()):
        topic, _, queue = str(key).rpartition("_")
        yield {"topic": topic or str(key), "queue_id": int(queue) if queue.lstrip("-").isdigit() else None,
               "checkpoint_offset": offset, "path": loaded}


def compaction_info(store_root: pathlib.Path) -> tuple[list[dict] | None, list]:
    """info's ``compaction_queues``: each compacted queue with its files, records, keys and what a
    consumer reads; None when the store has no compaction store."""
    store = open_compaction_store(store_root)
    if not store.present:
        return None, []
    rows = []
    for q in store.queues:
        messages = q.messages(check_crc=False)
        latest = q.latest_by_key(messages)
        view = consumer_view(q, messages)
        rows.append({"topic": q.topic, "queue_id": q.queue_id, "files": len(q.log.segments),
                     "records": len(messages), "tombstones": sum(1 for m in messages if is_tombstone(m)),
                     "live_keys": len(latest), "min_queue_offset": view.min_offset, "max_queue_offset": view.max_offset,
                     "messages": len(view.messages), "checkpoint_offset": q.checkpoint})
    return rows, list(store.findings)
