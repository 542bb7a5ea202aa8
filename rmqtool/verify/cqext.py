"""ConsumeQueueExt checks (``consumequeue_ext/``, enableConsumeQueueExt).

A consume queue unit whose tagsCode field is an ext address is followed as the broker's
iterator follows it (``ConsumeQueue.getExt`` over the ext files as recover and
truncateByMaxAddress leave them): the ext unit's tagsCode and msgStoreTime are then what the
unit is matched against its record with (:mod:`rmqtool.verify.consumequeue`), and an address
that finds nothing is a dangling run. Store-wide: ext directories without their consume queue
(a deleted topic's, apache/rocketmq #6343) or consume queues without theirs, and bytes past the
ext's write position.
"""
from __future__ import annotations

import pathlib

import numpy as np

from rmqtool.findings import CQ_EXT_DIR_ORPHANED, CQ_EXT_UNIT_MISMATCH, Finding, finding
from rmqtool.formats.cqext import CQ_EXT_MAX_ADDR
from rmqtool.store.consumequeue import ConsumeQueues
from rmqtool.store.cqext import DanglingRuns, ExtLookup, garbage_finding, open_exts, queue_ext
from rmqtool.store.paths import CONSUMEQUEUE_EXT_DIR

EXT_NONE, EXT_FOUND, EXT_DANGLING = 0, 1, 2  # an item's "ext" field


class QueueExtCheck:
    """One plain queue's ext: resolves the units' ext addresses, collects dangling runs and
    ext units that disagree with their record."""

    def __init__(self, queue):
        self.queue = queue
        self.ext = queue_ext(queue)
        self.dangling = DanglingRuns(queue.topic, queue.queue_id)
        self.mismatch: list[tuple[int, Finding]] = []
        self.found: dict[int, ExtLookup] = {}  # real offset -> lookup, for the mismatch's place

    def resolve(self, items: np.ndarray, where) -> None:
        """Units whose tagsCode field is an ext address: the ext unit's tagsCode and store time
        in their place (``ext`` EXT_FOUND), or EXT_DANGLING."""
        is_ext = items["tags_code"] <= CQ_EXT_MAX_ADDR
        if not is_ext.any():
            return
        for j in np.flatnonzero(is_ext).tolist():
            found = self.ext.lookup(int(items["tags_code"][j]))
            path, position = where(int(items["file"][j]), int(items["index"][j]))
            self.dangling.add(int(items["index"][j]), path, position, found)
            if found.ok:
                items["tags_code"][j], items["store_timestamp"][j] = found.unit.tags_code, found.unit.msg_store_time
                items["ext"][j], items["ext_offset"][j] = EXT_FOUND, found.real_offset
                self.found[found.real_offset] = found
            else:
                items["ext"][j] = EXT_DANGLING

    def check(self, band, items: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Ext units against their records (tagsCode, storeTimestamp); the mask of items whose
        tags code the plain check must leave alone (they were followed through the ext)."""
        ext = items["ext"] != EXT_NONE
        found = np.flatnonzero(items["ext"] == EXT_FOUND)
        if not len(found):
            return ext
        tags, stored = band["tags_code"][rows[found]], band["store_timestamp"][rows[found]]
        bad = (tags != items["tags_code"][found]) | (stored != items["store_timestamp"][found])
        for k in np.flatnonzero(bad).tolist():
            j = int(found[k])
            item = items[j]
            lookup = self.found[int(item["ext_offset"])]
            self.mismatch.append((int(item["seq"]), finding(
                CQ_EXT_UNIT_MISMATCH, lookup.path, lookup.pos_in_file,
                f"ext unit of {self.queue.topic}/{self.queue.queue_id} queue offset {int(item['index'])}: tagsCode "
                f"{int(item['tags_code'])}, msgStoreTime {int(item['store_timestamp'])}; its record at commit log "
                f"offset {int(band['offset'][rows[j]])} has tags hash {int(tags[k])}, storeTimestamp "
                f"{int(stored[k])}: the broker filters it by another message's tags and bit map",
                topic=self.queue.topic, queue_id=self.queue.queue_id, queue_offset=int(item["index"]),
                commit_log_offset=int(band["offset"][rows[j]]))))
        return ext

    def findings(self) -> list[Finding]:
        found = self.dangling.findings() + [f for _, f in sorted(self.mismatch, key=lambda t: t[0])]
        if self.ext.ext is not None:
            found += self.ext.ext.findings
            garbage = garbage_finding(self.ext.ext, self.ext.end)
            if garbage is not None:
                found.append(garbage)
        return found


def orphan_findings(root: pathlib.Path, queues: ConsumeQueues) -> list[Finding]:
    """Ext directories without their consume queue (the broker never opens them: a deleted
    topic's, apache/rocketmq #6343), and, in a store that has ext directories, consume queues
    without theirs (the broker makes an empty one: every ext address of the queue dangles)."""
    found: list[Finding] = []
    exts = open_exts(root, found)
    if not exts:
        return found
    plain = {(q.topic, q.queue_id): q for q in queues.queues if not q.is_batch}
    for ext in exts:
        if (ext.topic, ext.queue_id) not in plain:
            found.append(finding(CQ_EXT_DIR_ORPHANED, ext.directory, None,
                                 f"ext directory of {ext.topic}/{ext.queue_id} without its consume queue: the broker "
                                 f"never opens it (a topic created again under this name appends after its units)",
                                 topic=ext.topic, queue_id=ext.queue_id))
    have = {(e.topic, e.queue_id) for e in exts}
    for key, q in plain.items():
        if key not in have:
            found.append(finding(CQ_EXT_DIR_ORPHANED, q.directory, None,
                                 f"consume queue {key[0]}/{key[1]} without its {CONSUMEQUEUE_EXT_DIR} directory in a "
                                 f"store that has them: its ext addresses find nothing", topic=key[0], queue_id=key[1]))
    return found
