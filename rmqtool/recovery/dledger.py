"""What a 5.3.3 broker's next start does to a DLedger store (``enableDLegerCommitLog``), as a plan.

Two recoveries run, one after the other (rocketmq-all-5.3.3 ``DLedgerCommitLog``, lines 291-395,
over dledger 0.3.1.2's ``DLedgerMmapFileStore.recover``, lines 138-326):

1. DLedger's own: walk the entries from the third-last data file, checking magic, size, pos,
   index and term order (no CRC), and each index unit (a unit that differs is written again
   from there on); the data ends after the last good entry (files after it deleted), the index
   at ``(ledgerEndIndex + 1) x 32``; committedIndex comes from ``dledger-<id>/checkpoint`` (none:
   -1, and ``getData`` serves nothing until a leader commits again).
2. The commit log's, which only decides how far the consume queues may reach:
   ``dledgerRecoverNormally`` (no abort file) cuts them at the data's end;
   ``dledgerRecoverAbnormally`` walks the records (checkCRCOnRecover) from the last data file whose
   first record is a V1 record stored at or before the checkpoint's min timestamp (else file 0) up
   to the first record that fails, and adds up **the records' sizes without the 48-byte DLedger
   headers** (line 353: ``mmapFileOffset += size`` with size = msgSize), so its processOffset falls
   short of the real end by 48 bytes an entry. Queue units at or past it are truncated (the write
   position only, in memory: the units stay in the files) and the reput service, from the
   queues' highest physical end, dispatches the entries after it again; a record that fails the
   reput's check is skipped, so its unit is gone until a later start reads the file again.

The plan is computed from the read side only; nothing here writes.
"""
from __future__ import annotations

import dataclasses
import pathlib

from rmqtool.findings import DLEDGER_INDEX_MISMATCH
from rmqtool.formats import dledger as fmt
from rmqtool.formats.commitlog import MESSAGE_MAGIC_CODE_V1
from rmqtool.store.checkpoint import loaded_checkpoint
from rmqtool.store.commitlog import Blank, Corrupt
from rmqtool.store.dledger import Entry, Survey, surveyed
from rmqtool.store.message import Message
from rmqtool.store.view import StoreView


@dataclasses.dataclass
class QueueCut:
    """One consume queue as the commit log's recovery and the reput leave it."""
    topic: str
    queue_id: int
    max_offset_before: int
    cut_from: int | None = None  # first queue offset truncated (None: not cut)
    redispatched: list = dataclasses.field(default_factory=list)  # queue offsets the reput writes again
    skipped: list = dataclasses.field(default_factory=list)  # queue offsets whose record the reput skips

    @property
    def max_offset_after(self) -> int:
        if self.cut_from is None:
            return self.max_offset_before
        again = [q for q in self.redispatched if q >= self.cut_from]
        end = self.cut_from
        for q in sorted(again):  # the queue grows again as long as the reput's units follow on
            if q == end:
                end += 1
        return end

    def to_json(self) -> dict:
        return {"topic": self.topic, "queue_id": self.queue_id, "max_queue_offset_before": self.max_offset_before,
                "cut_from": self.cut_from, "redispatched": self.redispatched, "skipped": self.skipped,
                "max_queue_offset_after": self.max_offset_after}


@dataclasses.dataclass
class DLedgerPlan:
    root: pathlib.Path
    abnormal: bool
    survey: Survey
    committed_index: int
    data_files_deleted: list
    index_rewritten_from: int | None
    index_end: int
    start_file: str | None = None
    start_reason: str = ""
    process_offset: int | None = None
    stopped_at: dict | None = None
    max_phy_offset_of_consume_queue: int = -1
    reput_from: int | None = None
    queues: list = dataclasses.field(default_factory=list)
    # MmapFileList.load refuses a data or index file of another length than the configured one:
    # the broker exits before any recovery (the steps after it are what a start would do once mended)
    refused: list = dataclasses.field(default_factory=list)

    @property
    def refusal(self) -> str | None:
        if not self.refused:
            return None
        f = self.refused[0]
        more = f" (and {len(self.refused) - 1} more file(s))" if len(self.refused) > 1 else ""
        return f"the broker does not load this store: {f.path}: {f.message}{more}"

    @property
    def changes(self) -> bool:
        return bool(self.data_files_deleted or self.index_rewritten_from is not None
                    or any(q.cut_from is not None for q in self.queues))

    @property
    def lost(self) -> list[dict]:
        return [{"topic": q.topic, "queue_id": q.queue_id, "queue_offset": o} for q in self.queues for o in q.skipped]

    def to_json(self) -> dict:
        s = self.survey
        return {
            "store_path": str(self.root), "store": str(self.root),  # store: the old name, as QMQ's plan has it
            "mode": "abnormal" if self.abnormal else "normal",
            "loadable": not self.refused, "refusal": self.refusal,
            "dledger": {"recover_end": s.recover_end, "ledger_end_index": s.ledger_end_index,
                        "ledger_end_term": s.ledger_end_term, "committed_index": self.committed_index,
                        "data_files_deleted": self.data_files_deleted,
                        "index_rewritten_from": self.index_rewritten_from, "index_end": self.index_end},
            "commitlog": {"start_file": self.start_file, "start_reason": self.start_reason,
                          "process_offset": self.process_offset, "stopped_at": self.stopped_at,
                          "max_phy_offset_of_consume_queue": self.max_phy_offset_of_consume_queue,
                          "reput_from": self.reput_from},
            "queues": [q.to_json() for q in self.queues],
            "lost_messages": self.lost,
            "findings": [f.to_json() for f in [*self.refused, *s.findings]],
        }

    def steps(self) -> list[str]:
        s, out = self.survey, []
        if self.refused:
            out.append(f"{self.refusal}; the broker exits, and none of what follows runs until the file is mended")
        out.append(f"{'abnormal' if self.abnormal else 'normal'} recovery "
                   f"({'the abort file is there' if self.abnormal else 'no abort file'}) of a DLedger commit log")
        out.append(f"DLedger recover: the data ends at {s.recover_end} after entry {s.ledger_end_index} "
                   f"(term {s.ledger_end_term})"
                   + (f"; data files deleted: {', '.join(self.data_files_deleted)}" if self.data_files_deleted else ""))
        if self.index_rewritten_from is not None:
            out.append(f"DLedger recover writes the index again from unit {self.index_rewritten_from}")
        out.append(f"the index ends at byte {self.index_end} ({s.ledger_end_index + 1} units)")
        out.append(f"committedIndex {self.committed_index} from dledger checkpoint" if self.committed_index >= 0 else
                   "no dledger checkpoint: committedIndex -1, nothing is served until a leader commits again "
                   "(a single node does so at once, up to its ledger end)")
        if self.abnormal:
            out.append(f"DLedgerCommitLog recovers from data file {self.start_file} ({self.start_reason}); "
                       f"processOffset {self.process_offset} (record sizes without the 48-byte DLedger headers)"
                       + (f", stopped by the record at {self.stopped_at['commit_log_offset']}: "
                          f"{self.stopped_at['reason']}" if self.stopped_at else ""))
        else:
            out.append(f"DLedgerCommitLog.recoverNormally: maxPhyOffset {self.process_offset}")
        cut = [q for q in self.queues if q.cut_from is not None]
        if cut:
            out.append(f"max physical offset of the consume queues {self.max_phy_offset_of_consume_queue} >= "
                       f"{self.process_offset}: truncateDirtyLogicFiles({self.process_offset})")
        for q in cut:
            out.append(f"queue {q.topic}/{q.queue_id}: units from {q.cut_from} truncated (in memory; the file keeps "
                       f"them, a later start reads them again)"
                       + (f"; the reput dispatches {', '.join(map(str, q.redispatched))} again" if q.redispatched else "")
                       + (f"; it skips {', '.join(map(str, q.skipped))} (the record fails its check)" if q.skipped
                          else "")
                       + f": offsets [0, {q.max_offset_after})")
        if cut:
            out.append(f"the reput service starts at {self.reput_from}")
        return out


def plan_dledger_recovery(view: StoreView, *, check_crc: bool = True) -> DLedgerPlan:
    """The broker's next start on a DLedger store, step by step (see the module's docstring)."""
    log = view.dledger
    s = Survey()
    walked = list(surveyed(log, s, records=True, check_crc=check_crc))
    segs = log.data.segments
    # MmapFileList.truncateOffset: a file that starts past the end goes
    deleted = [seg.name for seg in segs if s.recover_end is not None and seg.base_offset > s.recover_end]
    rewrite = next((f.details.get("entry_index") for f in s.findings
                    if f.id == DLEDGER_INDEX_MISMATCH and f.details), None)
    cp = log.checkpoint
    committed = cp.committed_index if cp.committed_index is not None else -1
    plan = DLedgerPlan(view.root, view.has_abort, s, committed, deleted, rewrite,
                       (s.ledger_end_index + 1) * fmt.INDEX_UNIT_SIZE,
                       refused=log.refused_at_load)
    queues = view.consume_queues()
    units = {(q.topic, q.queue_id): [u for u in q.iter_units() if not u.is_fill] for q in queues.queues}
    ends = [u.commit_log_offset + u.size for us in units.values() for u in us[-1:]]
    plan.max_phy_offset_of_consume_queue = max(ends, default=-1)
    entries = [r for r in walked if isinstance(r, Entry) and (s.recover_end is None or r.pos < s.recover_end)]
    if plan.abnormal:
        _abnormal_walk(plan, view, entries, walked)
    else:
        plan.process_offset = s.recover_end
    cut_at = plan.process_offset
    for q in queues.queues:
        us = units[(q.topic, q.queue_id)]
        qc = QueueCut(q.topic, q.queue_id, q.max_offset)
        if cut_at is not None and plan.max_phy_offset_of_consume_queue >= cut_at:
            first = next((u for u in us if u.commit_log_offset >= cut_at), None)
            if first is not None:
                qc.cut_from = first.queue_offset
        plan.queues.append(qc)
    if any(q.cut_from is not None for q in plan.queues):
        _reput(plan, units, entries)
    return plan


def _abnormal_walk(plan: DLedgerPlan, view: StoreView, entries: list, walked: list) -> None:
    """dledgerRecoverAbnormally: the start file (isMmapFileMatchedRecover), then records up to the first that fails."""
    segs = view.dledger.data.segments
    try:
        min_ts = loaded_checkpoint(view.paths.checkpoint).min_timestamp if view.paths.checkpoint.exists() else 0
    except Exception:  # noqa: BLE001 - a checkpoint the broker cannot read: it starts from zeros
        min_ts = 0
    start = 0
    for i in range(len(segs) - 1, -1, -1):
        first = next((e for e in entries if segs[i].base_offset <= e.pos < segs[i].base_offset + segs[i].size), None)
        m = first.record if first is not None and first.pos == segs[i].base_offset else None
        if (isinstance(m, Message) and m.magic_code == MESSAGE_MAGIC_CODE_V1 and m.store_timestamp != 0
                and m.store_timestamp <= min_ts):
            start = i
            plan.start_reason = (f"its first record was stored at {m.store_timestamp}, at or before the checkpoint's "
                                 f"min timestamp {min_ts}")
            break
    else:
        plan.start_reason = (f"no data file's first record is a V1 record stored at or before the checkpoint's min "
                             f"timestamp {min_ts}: file 0")
    seg = segs[start] if segs else None
    plan.start_file = seg.name if seg else None
    process = seg.base_offset if seg else 0
    added = 0
    for r in walked:
        at = r.offset if isinstance(r, (Blank, Corrupt)) else r.pos
        if seg is None or at < seg.base_offset:
            continue
        if isinstance(r, Blank):  # the next file: processOffset restarts at its name
            nxt = next((x for x in segs if x.base_offset > seg.base_offset), None)
            if nxt is None:
                break
            seg, process, added = nxt, nxt.base_offset, 0
            continue
        if isinstance(r, Corrupt):
            plan.stopped_at = {"commit_log_offset": r.offset, "reason": r.reason}
            break
        m = r.record
        if not isinstance(m, Message) or m.body_crc_ok is False:
            reason = m.reason if isinstance(m, Corrupt) else "the body CRC does not match"
            plan.stopped_at = {"commit_log_offset": r.record_offset, "reason": reason}
            break
        added += m.store_size  # msgSize: the 48-byte header is not counted (the engine's arithmetic)
    plan.process_offset = process + added


def _reput(plan: DLedgerPlan, units: dict, entries: list) -> None:
    """The reput from the queues' highest physical end after the cut: which units it writes again."""
    cut = {(q.topic, q.queue_id): q for q in plan.queues}
    kept_ends = []
    for key, us in units.items():
        q = cut[key]
        kept = [u for u in us if q.cut_from is None or u.queue_offset < q.cut_from]
        if kept:
            kept_ends.append(kept[-1].commit_log_offset + kept[-1].size)
    plan.reput_from = max(kept_ends, default=0)
    for e in entries:
        if e.pos < plan.reput_from:
            continue
        m = e.record
        if isinstance(m, Message):
            q = cut.get((m.topic, m.queue_id))
            if q is not None and q.cut_from is not None and m.queue_offset >= q.cut_from:
                q.redispatched.append(m.queue_offset)
        else:  # the reput's check fails: the unit that named it is not written again
            for key, us in units.items():
                q = cut[key]
                q.skipped += [u.queue_offset for u in us if u.commit_log_offset == e.record_offset
                              and q.cut_from is not None and u.queue_offset >= q.cut_from]
