"""Config checks (``config/*.json`` and their ``.bak``) against the store's queues.

Reading follows ``ConfigManager.load`` (the reader reports files the broker would
silently replace by their .bak); here is added whether that .bak is older than the file
it stands in for, and what the tables say against the consume queues: committed
consumer offsets (as ``rmqtool offsets`` reads them) and delay offsets outside their queue's [min, max], offsets kept for
topics that topics.json no longer has, and queue directories topics.json's queue
counts do not cover.
"""
from __future__ import annotations

import os
import pathlib
from typing import Iterator

from rmqtool.errors import FormatError
from rmqtool.findings import (CONFIG_BAK_STALE, CONFIG_TABLE_INVALID, CONSUMER_OFFSET_ABOVE_MAX,
                              CONSUMER_OFFSET_BELOW_MIN, CONSUMER_OFFSET_FOR_MISSING_QUEUE,
                              CONSUMER_OFFSET_KEY_INVALID, CONSUMER_OFFSET_TABLE_INVALID, CONSUMER_OFFSET_TOPIC_MISSING,
                              DELAY_OFFSET_OUT_OF_RANGE, TOPIC_QUEUE_COUNT_MISMATCH, Finding, finding)
from rmqtool.formats.config import BAK_SUFFIX, delay_offsets
from rmqtool.dispatch.rules import RMQ_SYS_SCHEDULE_TOPIC, DelayLevels
from rmqtool.store.config import BAK, ConfigFile, read_config_dir
from rmqtool.store.consumequeue import ConsumeQueues
from rmqtool.store.consumer_offsets import consumer_offsets
from rmqtool.store.view import StoreView


def _bak_stale(c: ConfigFile) -> Finding | None:
    if c.source != BAK:
        return None
    main = pathlib.Path(c.path[:-len(BAK_SUFFIX)])
    try:
        main_mtime, bak_mtime = main.stat().st_mtime, pathlib.Path(c.path).stat().st_mtime
    except OSError:
        return None  # the main file is missing: nothing to be older than
    if bak_mtime < main_mtime:
        return finding(CONFIG_BAK_STALE, c.path, None, f"the broker falls back to this .bak, written "
                       f"{main_mtime - bak_mtime:.0f} s before {main.name}: what changed since is lost")
    return None


def _queue_range(queues: ConsumeQueues, topic: str, queue_id: int, commit_log_min: int) -> tuple[int, int] | None:
    q = queues.find(topic, queue_id)
    return None if q is None else (q.min_offset(commit_log_min), q.max_offset)


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def check_config(store: str | os.PathLike | StoreView, queues: ConsumeQueues | None, commit_log_min: int = 0,
                 delay_spec: str | None = None, started: ConsumeQueues | None = None) -> Iterator[Finding]:
    """``queues``: the files checked; ``started``: the queues as the simulated next start leaves
    them (recovery/started_queues.py), which the committed and delay offsets are judged against
    when given (the start's dispatch puts back what a file lost)."""
    store_root = store.root if isinstance(store, StoreView) else store
    cd = read_config_dir(store_root)
    yield from cd.all_findings()
    for c in cd.files.values():
        stale = _bak_stale(c)
        if stale is not None:
            yield stale
    topics = None
    topics_file = cd.files.get("topics.json")
    if topics_file is not None and isinstance(topics_file.document, dict):
        table = topics_file.document.get("topicConfigTable")
        if isinstance(table, dict):
            topics = table
        elif table is not None:
            yield finding(CONFIG_TABLE_INVALID, topics_file.path, None, "'topicConfigTable' is not an object")
    if topics is not None and queues is not None:
        yield from _queue_counts(topics_file.path, topics, queues)
    if queues is None:
        return
    queues = started if started is not None else queues
    # committed offsets against the queues: the one reading rmqtool offsets shows (its config
    # findings were reported above, with the directory's)
    progress = consumer_offsets(store, queues=queues)  # as the next start leaves them (else cut where it cuts them)
    yield from (f for f in progress.findings if f.id in _OFFSET_FINDINGS)
    if topics is not None and progress.config is not None:
        for group, topic in sorted({(r.group, r.topic) for r in progress.rows if r.topic not in topics}):
            yield finding(CONSUMER_OFFSET_TOPIC_MISSING, progress.config.path, None,
                          f"group {group!r} keeps offsets for topic {topic!r}, which topics.json "
                          f"no longer has", topic=topic, group=group)
    delay_file = cd.files.get("delayOffset.json")
    if delay_file is not None and delay_file.document is not None:
        try:
            table = delay_offsets(delay_file.document)
        except FormatError as exc:
            yield finding(CONFIG_TABLE_INVALID, delay_file.path, None, exc.message)
        else:
            levels = DelayLevels(delay_spec) if delay_spec else DelayLevels()
            for level, offset in table.items():
                level = _int(level)
                if level is None:
                    continue
                yield from _offset_in_range(delay_file.path, queues, RMQ_SYS_SCHEDULE_TOPIC, levels.queue_id(level),
                                            _int(offset), commit_log_min, f"delay level {level}")


_OFFSET_FINDINGS = {CONSUMER_OFFSET_TABLE_INVALID, CONSUMER_OFFSET_KEY_INVALID, CONSUMER_OFFSET_BELOW_MIN,
                    CONSUMER_OFFSET_ABOVE_MAX, CONSUMER_OFFSET_FOR_MISSING_QUEUE}


def _offset_in_range(path: str, queues: ConsumeQueues, topic: str, queue_id: int | None, offset: int | None,
                     commit_log_min: int, who: str, **details) -> Iterator[Finding]:
    if queue_id is None or offset is None:
        yield finding(CONFIG_TABLE_INVALID, path, None, f"{who}: queue {queue_id!r} offset {offset!r} "
                      "is not a number")
        return
    bounds = _queue_range(queues, topic, queue_id, commit_log_min)
    lo, hi = bounds if bounds is not None else (0, 0)
    if not lo <= offset <= hi:
        yield finding(DELAY_OFFSET_OUT_OF_RANGE, path, None,
                      f"{who}: offset {offset} of {topic}/{queue_id} is outside the queue's [{lo}, {hi}]"
                      + ("" if bounds is not None else " (no such consume queue)"),
                      topic=topic, queue_id=queue_id, queue_offset=offset, **details)


def _queue_counts(path: str, topics: dict, queues: ConsumeQueues) -> Iterator[Finding]:
    for q in queues.queues:
        config = topics.get(q.topic)
        if not isinstance(config, dict):
            continue
        counts = [_int(config.get(k)) for k in ("readQueueNums", "writeQueueNums")]
        counts = [c for c in counts if c is not None]
        if counts and q.queue_id >= max(counts):
            yield finding(TOPIC_QUEUE_COUNT_MISMATCH, q.directory, None,
                          f"queue {q.queue_id} of {q.topic}, but topics.json gives it readQueueNums "
                          f"{config.get('readQueueNums')} and writeQueueNums {config.get('writeQueueNums')}",
                          topic=q.topic, queue_id=q.queue_id, config=path)
