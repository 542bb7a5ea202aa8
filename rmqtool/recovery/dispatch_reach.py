"""Which queue files the re-dispatch after a recovery plan can write, and the others' state.

Dispatch after the plan reads the commit log from the plan's ``redispatch_from`` to its end
and appends each record's unit to its topic's queue (consume queue, 5.x batch consume queue,
ConsumeQueueExt): the last file of a queue whose topic has no record there is never
written. A backup that copied every queue's last file whole (a store of 8,000 queues: 8,000
copies, on a real broker gigabytes of units) keeps only those of the topics read; the
others' size and written end are recorded, and the repair's end and undo check that they
are as they were (a write there would be one the backup cannot take back).

When what dispatch reads is not known for sure (a record that does not read whole, a
property that dispatches it to other queues too, a commit log on several disks), every
queue's last file is kept, as before.
"""
from __future__ import annotations

import pathlib

from rmqtool.formats.properties import PROPERTY_INNER_MULTI_DISPATCH
from rmqtool.store.commitlog import Blank
from rmqtool.store.commitlog_end import CommitLog, last_nonzero_from
from rmqtool.store.message import Message
from rmqtool.store.paths import CONSUMEQUEUE_EXT_DIR, StorePaths


def dispatched_topics(plan, commit_log_directories=()) -> frozenset | None:
    """The topics of the records dispatch reads after ``plan`` (None: not known for sure)."""
    if commit_log_directories:
        return None  # read through the view that knows its disks: not repeated here
    if plan.redispatch_from >= plan.commit_log_end:
        return frozenset()
    paths = StorePaths(pathlib.Path(plan.store))
    if not paths.commitlog.is_dir():
        return None
    topics = set()
    # looked for in the raw properties, none parsed (a GiB of records in 0.8 s, not 1.2); a value
    # naming it only keeps every queue, as the property would
    multi = PROPERTY_INNER_MULTI_DISPATCH.encode()
    for r in CommitLog(paths.commitlog).scan(plan.redispatch_from, plan.commit_log_end, check_crc=False):
        if type(r) is Message:
            if multi in r.properties_raw:  # dispatched to other queues too
                return None
            topics.add(r.topic)
        elif not isinstance(r, Blank):
            return None
    return frozenset(topics)


def queue_last_files(root: pathlib.Path) -> list[tuple[bool, str, pathlib.Path]]:
    """(a consume queue's: not a batch consume queue's or an ext's, topic, last file) of every
    queue directory of every kind dispatch appends to."""
    paths = StorePaths(root)
    out = []
    for kind in (paths.consumequeue, paths.batch_consumequeue, paths.root / CONSUMEQUEUE_EXT_DIR):
        for directory in sorted(kind.glob("*/*")):
            if directory.is_dir():
                files = sorted(p for p in directory.iterdir() if p.is_file())
                if files:
                    out.append((kind == paths.consumequeue, directory.parent.name, files[-1]))
    return out


def file_state(path: pathlib.Path) -> list[int]:
    """[size, written end]: what a write of units into the file would change."""
    return [path.stat().st_size, last_nonzero_from(path) or 0]


def first_written(left_alone: dict | None) -> str | None:
    """The first of the files recorded as left alone that is no longer as it was, in a phrase;
    None when every one is (or none was recorded)."""
    for name, state in sorted((left_alone or {}).items()):
        path = pathlib.Path(name)
        now = file_state(path) if path.is_file() else None
        if now != state:
            return (f"{name} was written after the backup was made, which does not hold it (its queue's topic has "
                    f"no record where dispatch reads)")
    return None
