"""Rebuilding ConsumeQueueExt with the consume queues it serves (redispatch on a store whose
broker runs with enableConsumeQueueExt: ``store/cqext.ext_writing``).

What ``ConsumeQueue.putMessagePositionInfoWrapper`` does for each dispatched message, after
the fact over the staged queues: an ext unit (the tags hash, the record's store timestamp,
the filter bit map) appended to the queue's ext files through the one ext writer
(``engine/cqext_writer.py``: ConsumeQueueExt.put, which append and recover --apply's dispatch
use too), and its address written into the unit's tagsCode field. The bit map is the broker's
SQL92 evaluation at dispatch time, which rmqtool does not redo: a unit keeps the bit map the
store's own ext unit for that message has (same commit log offset, tags hash and store time);
any other gets the writer's unevaluated one (every bit set, the topic's bit map size), which
the broker's ExpressionMessageFilter reads as "match" (the commit log check then decides).
"""
from __future__ import annotations

import pathlib

from rmqtool.errors import UsageError
from rmqtool.engine.cqext_writer import ConsumeQueueExtWriter
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.consumequeue import ConsumeQueue
from rmqtool.store.cqext import ExtWriting, ext_writing, queue_ext
from rmqtool.store.paths import CONSUMEQUEUE_DIR, CONSUMEQUEUE_EXT_DIR, StorePaths
from rmqtool.store.segments import SegmentQueue

TAGS_CODE_AT = 12  # the consume queue unit's tagsCode field: after commitLogOffset 8 and size 4


def rebuild_exts(store_root, staging: pathlib.Path, queues: list[tuple[str, int]], log: SegmentQueue,
                 cq_size: int, writing: ExtWriting) -> None:
    """Give each staged plain queue its ext files (``staging/consumequeue_ext/``) and its units
    their ext addresses, as the broker's dispatch with enableConsumeQueueExt writes them."""
    paths = StorePaths(store_root)
    reader = CommitLogReader(CommitLog.of_queue(log))
    carried = {key: _carried_bit_maps(paths, *key) for key in queues}
    topic_size: dict[str, int] = {}  # a topic's bit map size, as its units show (a topic's units share one)
    for (topic, _q), (_units, size) in carried.items():
        if size is not None:
            topic_size.setdefault(topic, size)
    try:
        for topic, queue_id in queues:
            units, size = carried[(topic, queue_id)]
            _rebuild_queue(staging, topic, queue_id, reader, cq_size, writing.file_size, units,
                           topic_size.get(topic, 0) if size is None else size)
    finally:
        reader.close()


def _carried_bit_maps(paths: StorePaths, topic: str, queue_id: int) -> tuple[dict[int, tuple], int | None]:
    """queue offset -> (commit log offset, tags hash, store time, bit map) of the store's own
    ext units that a lookup finds, and the bit map size of the last of them (None: none found)."""
    directory = paths.consumequeue / topic / str(queue_id)
    if not directory.is_dir():
        return {}, None
    queue = ConsumeQueue(directory, topic, queue_id)
    ext = queue_ext(queue)
    out, size = {}, None
    for u in queue.iter_units():
        found = ext.lookup(u.tags_code)
        if found is not None and found.ok:
            out[u.queue_offset] = (u.commit_log_offset, found.unit.tags_code, found.unit.msg_store_time,
                                   found.unit.filter_bit_map)
            size = max(found.unit.bit_map_size, 0)
    return out, size


def _rebuild_queue(staging: pathlib.Path, topic: str, queue_id: int, reader: CommitLogReader, cq_size: int,
                   file_size: int, carried: dict[int, tuple], bit_map_size: int) -> None:
    staged_dir = staging / CONSUMEQUEUE_DIR / topic / str(queue_id)
    staged = ConsumeQueue(staged_dir, topic, queue_id, mapped_file_size=cq_size)
    writer = ConsumeQueueExtWriter(staging / CONSUMEQUEUE_EXT_DIR / topic / str(queue_id), file_size, bit_map_size)
    patches: dict[str, list] = {}
    try:
        for u in staged.iter_units():
            if u.is_fill:
                continue  # fillPreBlank writes its units without the ext
            store_timestamp, _why = reader.store_timestamp(u.commit_log_offset, u.size)
            own = carried.get(u.queue_offset)
            mine = own is not None and own[:3] == (u.commit_log_offset, u.tags_code, store_timestamp)
            # the store's own unit's bit map (b"": it had none), else the writer's unevaluated one
            address = writer.put(u.tags_code, store_timestamp, (own[3] or b"") if mine else None)
            patches.setdefault(u.path, []).append((u.position + TAGS_CODE_AT, address))
    finally:
        writer.close()
    for path, items in patches.items():
        with open(path, "r+b") as f:
            for position, address in items:
                f.seek(position)
                f.write(address.to_bytes(8, "big", signed=True))


def uses_ext(store_root, broker_config=None) -> bool:
    """Whether the store's dispatch writes ext units (``store/cqext.ext_writing``)."""
    return ext_writing(store_root, broker_config).enabled


def refuse_from_offset(store_root, from_offset, broker_config=None) -> None:
    if from_offset is not None and uses_ext(store_root, broker_config):
        raise UsageError("--from-offset: this store has consumequeue_ext/, whose units rmqtool rebuilds only "
                         "with their whole queues; leave --from-offset out", pathlib.Path(store_root))
