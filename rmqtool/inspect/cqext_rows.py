"""Rows for ``dump cqext``: every ConsumeQueueExt unit of a store, an ext directory or one ext
file, walked as the broker's ``ConsumeQueueExt.get`` reads them, with where each file's walk stopped."""
from __future__ import annotations

import pathlib
from typing import Iterator

from rmqtool.errors import NotAStore
from rmqtool.inspect.hints import wrong_kind
from rmqtool.store import detect
from rmqtool.store.consumequeue import ConsumeQueue, queue_id_of
from rmqtool.store.cqext import ConsumeQueueExt, cq_directory, garbage_finding, open_exts, queue_max_ext_address
from rmqtool.store.paths import CONSUMEQUEUE_EXT_DIR


def _ext_of(queue_dir: pathlib.Path) -> ConsumeQueueExt:
    queue_id = queue_id_of(queue_dir.name)
    if queue_id is None:
        raise NotAStore(f"directory name {queue_dir.name!r} is not a queue id (consumequeue_ext/TOPIC/QUEUEID/)",
                        queue_dir)
    return ConsumeQueueExt(queue_dir, queue_dir.parent.name, queue_id)


def _exts_for(path: pathlib.Path, findings: list) -> tuple[list[ConsumeQueueExt], str | None]:
    """(exts, only this file or None) for a store, consumequeue_ext/, a topic or queue dir, or one file."""
    path = detect.require_path(path)
    if path.is_file():
        kind = detect.kind_of_file(path)
        if kind != detect.CONSUMEQUEUE_EXT:
            raise wrong_kind(path, kind, "a consume queue ext file")
        return [_ext_of(path.parent)], str(path)
    if detect.is_store_dir(path):
        return open_exts(path, findings), None
    if path.name == CONSUMEQUEUE_EXT_DIR:
        return open_exts(path.parent, findings), None
    if path.parent.name == CONSUMEQUEUE_EXT_DIR:
        return [_ext_of(q) for q in sorted(path.iterdir()) if q.is_dir() and queue_id_of(q.name) is not None], None
    if path.parent.parent.name == CONSUMEQUEUE_EXT_DIR:
        return [_ext_of(path)], None
    raise detect.not_a_store("not a store, consumequeue_ext directory or ext file", path)


def write_end(ext: ConsumeQueueExt) -> int:
    """The ext's write position after the broker's start: recover, then truncateByMaxAddress
    with its consume queue's last ext address (recover's alone when the queue is missing)."""
    directory = cq_directory(ext.directory)
    if not directory.is_dir():
        return ext.recovered_end
    return ext.truncated_end(queue_max_ext_address(ConsumeQueue(directory, ext.topic, ext.queue_id)))


def cqext_rows(path: pathlib.Path, topic: str | None = None, queue_id: int | None = None,
               findings: list | None = None) -> Iterator[dict]:
    found: list = []
    exts, only_file = _exts_for(path, found)
    if findings is not None:
        findings.extend(found)
    for ext in exts:
        if (topic is not None and ext.topic != topic) or (queue_id is not None and ext.queue_id != queue_id):
            continue
        end = write_end(ext)
        for e in ext.walk(end):
            if only_file is not None and e.path != only_file:
                continue
            row = {"topic": ext.topic, "queue_id": ext.queue_id, "record": "stop" if e.stop else "unit",
                   "real_offset": e.real_offset}
            if e.unit is not None:
                u = e.unit
                row.update(address=e.address, size=u.size, tags_code=u.tags_code, store_timestamp=u.msg_store_time,
                           bit_map_size=u.bit_map_size, filter_bit_map=u.bit_map_hex)
            else:
                row.update(stop=e.stop, size_field=e.size_field)
            row.update(file=e.path, file_position=e.pos_in_file)
            yield row
        if findings is not None:
            findings.extend(ext.findings)
            garbage = garbage_finding(ext, end)
            if garbage is not None and (only_file is None or garbage.path == only_file):
                findings.append(garbage)
