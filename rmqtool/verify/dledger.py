"""``rmqtool verify`` of a store run with ``enableDLegerCommitLog``: its records live in DLedger's entry log.

The commit log area walks the entries once (``store/dledger.py``): each header checked as
``DLedgerMmapFileStore.recover`` checks it, each entry against its index unit, blank fills,
and the record inside each entry with the same checks a plain commit log's records get
(body CRC, physicalOffset = pos + 48, UTF-8). The consume queue area reads every unit and
asks whether its commit log offset starts a record of that topic, queue, queue offset and
size (the dispatch DLedgerCommitLog's reput made), and whether every record has its unit;
the index area whether each index entry names a record start. The rest (markers,
checkpoint file, config) is what any store has.
"""
from __future__ import annotations

from typing import Callable, Iterator

from rmqtool.findings import (CONSUME_QUEUE_UNIT_MISMATCH, CONSUME_QUEUE_UNIT_NO_RECORD, INDEX_ENTRY_NO_RECORD,
                              MESSAGE_NOT_IN_CONSUME_QUEUE, Finding, finding)
from rmqtool.store.checkpoint import read_markers
from rmqtool.store.commitlog import findings_of
from rmqtool.store.dledger import Entry, Survey, surveyed
from rmqtool.store.message import Message
from rmqtool.store.view import StoreView
from rmqtool.verify.base import VerifyOptions, VerifyRun
from rmqtool.verify.config import check_config


class DLedgerVerify(VerifyRun):
    """One verify run of a DLedger store (the view's ``dledger`` is set, no ``commitlog/``)."""

    def __init__(self, view: StoreView, options: VerifyOptions | None = None,
                 progress: Callable[[int], None] | None = None):
        super().__init__(options, progress)
        self.view = view
        self.root = view.root
        self.live = view.live  # a running broker's store: what it writes past the entries' end now is not damage
        self.survey: Survey | None = None

    @property
    def total_bytes(self) -> int:
        return sum(s.size for s in self.view.dledger.data.segments)

    def _raw(self) -> Iterator[tuple[str, Finding]]:
        log = self.view.dledger
        only = set(self.options.only)
        # record offset -> (topic, queue id, queue offset, size): what the units and index entries must name
        records: dict[int, tuple[str, int, int, int]] = {}
        damaged: set[int] = set()
        s = self.survey = Survey()
        for f in list(log.data.findings) + list(log.index.findings) + log.load_refusals:
            yield "commitlog", f
        for r in surveyed(log, s, records=True):
            if isinstance(r, Entry):
                m = r.record
                if isinstance(m, Message):
                    records[r.record_offset] = (m.topic, m.queue_id, m.queue_offset, m.store_size)
                    for f in findings_of(m):
                        yield "commitlog", f
                else:
                    damaged.add(r.record_offset)
                if self.progress is not None:
                    self.progress(r.size)
        for f in s.findings:
            yield "commitlog", f
        queues = self.view.consume_queues(s.recover_end)
        if only & {"consumequeue", "config"}:
            for f in queues.all_findings():
                yield "consumequeue", f
        if "consumequeue" in only:
            yield from (("consumequeue", f) for f in _queue_findings(queues, records, damaged))
        if "index" in only:
            yield from (("index", f) for f in _index_findings(self.view, records, damaged))
        if "checkpoint" in only:
            yield from (("checkpoint", f) for f in read_markers(self.root).findings)
        if "config" in only:
            yield from (("config", f) for f in check_config(self.view, queues, 0, self.options.delay_spec))


def _queue_findings(queues, records: dict, damaged: set) -> Iterator[Finding]:
    """Each unit against the record it names (topic, queue, queue offset, size); records of a
    queue that no unit names (the reput dispatches every record of the entry log)."""
    seen: set[int] = set()
    for q in queues.queues:
        for u in q.iter_units():
            if u.is_fill:
                continue
            rec = records.get(u.commit_log_offset)
            where = dict(topic=q.topic, queue_id=q.queue_id, queue_offset=u.queue_offset,
                         commit_log_offset=u.commit_log_offset)
            if rec is None:
                why = ("a damaged record (the broker serves it as read: an empty topic, no properties)"
                       if u.commit_log_offset in damaged else "no record starts there")
                yield finding(CONSUME_QUEUE_UNIT_NO_RECORD, u.path, u.position,
                              f"{q.topic}/{q.queue_id}: unit {u.queue_offset} names commit log offset "
                              f"{u.commit_log_offset} in the DLedger log: {why}", **where)
                continue
            seen.add(u.commit_log_offset)
            topic, queue_id, queue_offset, size = rec
            what = [f"{name} {got} (record: {want})" for name, got, want in (
                ("topic", q.topic, topic), ("queue", q.queue_id, queue_id),
                ("queue offset", u.queue_offset, queue_offset), ("size", u.size, size)) if got != want]
            if what and not q.is_batch:
                yield finding(CONSUME_QUEUE_UNIT_MISMATCH, u.path, u.position,
                              f"{q.topic}/{q.queue_id}: unit {u.queue_offset} disagrees with the record at commit "
                              f"log offset {u.commit_log_offset}: " + "; ".join(what), **where)
    missing: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for offset, (topic, queue_id, queue_offset, _size) in records.items():
        if offset not in seen:
            missing.setdefault((topic, queue_id), []).append((queue_offset, offset))
    for (topic, queue_id), lost in sorted(missing.items()):
        lost.sort()
        q = queues.find(topic, queue_id)
        yield finding(MESSAGE_NOT_IN_CONSUME_QUEUE, q.directory if q is not None else None, None,
                      f"{topic}/{queue_id}: {len(lost)} record(s) of the DLedger log have no unit (first: queue "
                      f"offset {lost[0][0]} at commit log offset {lost[0][1]})",
                      topic=topic, queue_id=queue_id, queue_offset=lost[0][0], commit_log_offset=lost[0][1])


def _index_findings(view: StoreView, records: dict, damaged: set) -> Iterator[Finding]:
    """Each index entry's phyOffset must start a record of the DLedger log (pos + 48)."""
    listing = view.index_files
    yield from listing.findings
    files = listing.open_all()
    try:
        for f in files:
            yield from f.findings
            for e in f.iter_entries():
                if e.phy_offset not in records:
                    why = "a damaged record" if e.phy_offset in damaged else "no record starts there"
                    yield finding(INDEX_ENTRY_NO_RECORD, str(f.path), e.position,
                                  f"index entry {e.number} names commit log offset {e.phy_offset} in the DLedger "
                                  f"log: {why}", commit_log_offset=e.phy_offset)
    finally:
        for f in files:
            f.close()
