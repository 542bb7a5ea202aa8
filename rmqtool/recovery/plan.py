"""What recovering a store would change: a pure plan, computed from the read side only.

The broker recovers a store every time it loads one (DefaultMessageStore.load and
recover at 4.9.8); this plan says, in its terms, what that recovery changes in the files:

* the commit log's end (CommitLog.recoverNormally / recoverAbnormally, both with
  checkCRCOnRecover, the default): the last segment holding data is read record by record
  with the body CRC checked, and the log ends after its last good record. What follows in
  that segment is zeroed here (the broker only moves its write position back, leaving
  bytes that any other reader takes for records), and segments after the end that hold
  data are deleted (truncateDirtyFiles);
* every consume queue (ConsumeQueue.recover, then truncateDirtyLogicFiles; under 5.3
  rules the batch consume queues too): units at or past the commit log's end, and
  anything non-zero after the queue's last unit, are zeroed; files after the queue's end
  are deleted;
* where dispatch to the consume queues and the index starts again: after a clean
  shutdown, from the largest commit log offset the consume queues reach; with the
  ``abort`` marker (abnormal recovery), from the last segment whose first message was
  stored at or before the checkpoint's min timestamp (isMappedFileMatchedRecover).

Nothing here writes: :func:`rmqtool.recovery.apply.apply_plan` carries a plan out (with
a backup of every byte it changes), and re-dispatching is the engine's job. All-zero
segments made ahead after the end are no change of recovery's: a writer deletes them.

The index files an abnormal start destroys (those past the checkpoint's indexMsgTimestamp)
are deleted only when dispatch does not build them again as they are (``index_model``);
a start that changes nothing (no finding, dispatch writing nothing) is an empty plan.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import time

from rmqtool.dispatch.multi_dispatch import shown_by
from rmqtool.errors import StoreNotFound
from rmqtool.findings import (ABORT_FILE_PRESENT, CONSUME_QUEUE_BEYOND_COMMIT_LOG, CQ_EXT_GARBAGE_AFTER_END,
                              CONSUME_QUEUE_FILE_AFTER_END, INDEX_FILE_NEWER_THAN_CHECKPOINT, RECORD_TORN,
                              RECOVERY_CUTS_COMMIT_LOG, SEGMENT_AFTER_END, SEGMENT_GAP, SEGMENT_OVERLAP,
                              SEGMENT_SIZE_ODD, STORE_NOT_LOADABLE, TIMER_CHAIN_LOOPS, TIMER_LOG_CUT,
                              TIMER_UNIT_PAST_COMMIT_LOG, TRAILING_GARBAGE, Finding)
from rmqtool.formats.commitlog import MESSAGE_MAGIC_CODES
from rmqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE
from rmqtool.recovery.ext_model import plan_ext_cuts
from rmqtool.recovery.outcome import Outcome, Settings, simulate
from rmqtool.recovery.timer.plan import timer_section
from rmqtool.recovery.timer.repair import plan_timer_repair, slot_range
from rmqtool.recovery.timer.start import timer_start
from rmqtool.store.commitlog import scan_segment
from rmqtool.store.commitlog_end import CommitLogEnd, all_zero_from, first_bytes, last_nonzero_from
from rmqtool.recovery.commitlog_walk import V5
from rmqtool.store.consumequeue import BATCH_CQ_LAYOUT, CQ_LAYOUT, batch_unit_before, find_queue_end, queue_directories
from rmqtool.store.message import HEADER_FIELDS, PREFIX, Message
from rmqtool.store.paths import StorePaths
from rmqtool.store.rocksdb_cq import rocksdb_only
from rmqtool.store.segments import Segment, discover, one_listing
from rmqtool.store.timer.files import find_timer_store
from rmqtool.store.view import StoreView

# storeType=defaultRocksDB (RocksDBConsumeQueueStore, 5.3.3): what the broker's start does to its queues
ROCKSDB_RECOVERY = ("the consume queues are in RocksDB only (storeType=defaultRocksDB); rmqtool does not model "
                    "their recovery: the broker takes RocksDB's dispatch checkpoint (CHECKPOINT_TOPIC) as the "
                    "consume queues' max physic offset, its recovery walk dispatches into RocksDB each record past "
                    "it, and where the log is cut below it truncateDirty moves the checkpoint and each queue's max "
                    "entry back")
ROCKSDB_REFUSAL = ("its consume queues are in RocksDB only (storeType=defaultRocksDB): --apply would dispatch into "
                   "file consume queues the broker never reads; start the broker, whose recovery cuts the commit "
                   "log and truncates the RocksDB queues together (rmqtool salvage keeps what it drops first)")
ZERO = "zero"  # write zeros over [start, end) of the file
DELETE = "delete"  # delete the file ([start, end) is the whole of it)

# Segment findings that leave no end to plan from: the broker's load refuses such a store too.
UNPLANNABLE = (SEGMENT_SIZE_ODD, SEGMENT_GAP, SEGMENT_OVERLAP)
_MAGIC_CODE = HEADER_FIELDS.index("magic_code")


@dataclasses.dataclass(frozen=True, slots=True)
class Action:
    """One change to one file."""
    kind: str  # ZERO or DELETE
    path: str
    start: int  # byte range of the file the action changes, [start, end)
    end: int
    finding: str  # the registered finding that calls for it
    message: str

    @property
    def length(self) -> int:
        return self.end - self.start

    def to_json(self) -> dict:
        return {"kind": self.kind, "file": self.path, "start": self.start, "end": self.end,
                "bytes": self.length, "finding": self.finding, "message": self.message,
                "action": self.kind}  # the name before 0.2, one release more


@dataclasses.dataclass(frozen=True, slots=True)
class QueueCut:
    """A consume queue (or 5.x batch consume queue) whose units recovery truncates."""
    topic: str
    queue_id: int
    max_offset_before: int  # one past the last written unit, in queue offsets (a batch queue: its batch's end)
    max_offset: int  # after recovery
    max_physic_offset: int  # commitLogOffset + size of the last unit kept (-1: none)
    units_truncated: int = 0
    queue_type: str = "SimpleCQ"  # or BatchCQ

    def to_json(self) -> dict:
        return {"topic": self.topic, "queue_id": self.queue_id, "queue_type": self.queue_type,
                "max_offset_before": self.max_offset_before, "max_offset": self.max_offset,
                "units_truncated": self.units_truncated, "max_physic_offset": self.max_physic_offset}


@dataclasses.dataclass(frozen=True)
class RecoveryPlan:
    """What recovery would change in a store, and where dispatch starts again afterwards."""
    store: str
    abnormal: bool  # the abort marker is there: the broker would recover abnormally
    commit_log_file_size: int
    commit_log_end: int  # the commit log's max offset once the plan is applied
    findings: tuple[Finding, ...]  # why: everything not as a clean close leaves it
    actions: tuple[Action, ...]
    queue_cuts: tuple[QueueCut, ...]
    redispatch_from: int  # commit log offset dispatch to consume queues and index restarts from
    redispatch_reason: str
    made_ahead: tuple[str, ...]  # all-zero segments after the end: not recovery's, a writer deletes them
    commit_log: CommitLogEnd  # the recovered end, for a writer that goes on from it
    outcome: Outcome | None = None  # the broker's load, recovery and start, simulated
    refusal: str | None = None  # why rmqtool does not carry this plan out (None: it can)
    timer: dict | None = None  # a 5.x timer store: what its load, recover and run do (recovery/timer/plan.py)
    ext_cuts: tuple = ()  # ConsumeQueueExt: where --apply ends each queue's ext (recovery/ext_model.ExtCut)
    rocksdb_cq: str | None = None  # storeType=defaultRocksDB: the queues' database (no file queue is planned)
    # enableMultiDispatch as the store shows it (None: off): --apply's dispatch puts the units of the
    # records it dispatches again in the queues they name too (dispatch/multi_dispatch.py)
    multi_dispatch: object = None
    # what the next start does that loses or repeats data and --apply leaves to it (the timer log's
    # cut: the broker cuts it as rmqtool would; redispatch --timer rebuilds the log instead)
    left: tuple[Finding, ...] = ()

    @property
    def loadable(self) -> bool:
        return self.outcome is None or self.outcome.loadable

    @property
    def semantics_undecided(self) -> str | None:
        """Why nothing may be applied until the operator names the broker version (None: it may)."""
        return None if self.outcome is None else self.outcome.semantics_undecided

    @property
    def is_empty(self) -> bool:
        """Nothing to recover: the store is as a clean close leaves it."""
        return not self.findings and not self.left

    @property
    def dispatch_refusal(self) -> str | None:
        """Why --apply refuses the start's dispatch (a queue rmqtool does not make), or None; the
        log's end is settled all the same (redispatch's own build refuses the same record)."""
        return None if self.outcome is None else _dispatch_refusal(self.outcome)

    @property
    def changes_nothing(self) -> bool:
        """Nothing to recover, and the start's dispatch writes nothing either: an apply has
        nothing to do (a queue or index behind the log is not recovery's, but dispatch fills it)."""
        if self.rocksdb_cq is not None:  # no file queue to dispatch into: the broker dispatches to RocksDB
            return not _changes(self.findings) and self.loadable
        return (not _changes(self.findings) and self.loadable
                and (self.outcome is None or not _dispatch_changes(self.outcome)))

    @property
    def bytes_zeroed(self) -> int:
        return sum(a.length for a in self.actions if a.kind == ZERO)

    @property
    def files_deleted(self) -> int:
        return sum(1 for a in self.actions if a.kind == DELETE)

    def summary(self) -> str:
        """One line: why, and what would change."""
        if self.is_empty:
            return "nothing to recover"
        every = self.findings + self.left
        first = every[0]
        where = first.path + (f" at offset {first.offset}" if first.offset is not None else "")
        more = f" (and {len(every) - 1} more)" if len(every) > 1 else ""
        return (f"{first.id}: {where}: {first.message}{more}; recovery zeroes {self.bytes_zeroed} bytes, "
                f"deletes {self.files_deleted} files, and dispatches again from commit log offset "
                f"{self.redispatch_from}")

    def to_json(self) -> dict:
        o = self.outcome
        out = {}
        if o is not None:
            out = {"mode": "abnormal" if o.abnormal else "normal", "mode_reason": o.mode_reason,
                   "semantics": o.semantics, "semantics_reason": o.semantics_reason,
                   "semantics_known": o.semantics_known, "semantics_undecided": o.semantics_undecided,
                   "loadable": o.loadable, "reason": o.reason, "advice": o.advice,
                   "start_file": o.start_file, "start_reason": o.start_reason,
                   "commit_log": {"min_offset": o.min_offset, "written_end": o.written_end,
                                  "recovered_end": o.recovered_end,
                                  "stopped_by": o.walk.reason if o.walk else None,
                                  # the names before 0.3, one release more
                                  "max_offset_before": o.written_end, "max_offset_after": o.recovered_end},
                   "queues": {k: {"min_offset": v.min_offset, "max_offset": v.max_offset}
                              for k, v in sorted(o.queues.items())},
                   "batch_topics": o.batch_topics, "batch_topics_reason": o.batch_topics_reason,
                   "notes": o.notes,
                   "lost_messages": o.lost_messages,
                   "files_deleted": [a.path for a in self.actions if a.kind == DELETE],
                   "index_files_destroyed": [p for p, _ts in o.index_files_destroyed],
                   "index_rebuild": {"rebuilt_as_is": o.index_rebuilt_as_is, "entries_put": o.index_entries_put,
                                     "entries_repeated": o.index_entries_repeated,
                                     "entries_lost": o.index_entries_lost, "appended_to": o.index_kept_appended},
                   "apply_refused": self.refusal or self.dispatch_refusal}
            if self.rocksdb_cq is not None:  # the simulated queues are file queues the broker does not keep
                out["queues"] = {}
                out["start_reason"] = (f"{o.start_reason} (as with file queues: the broker takes RocksDB's "
                                       f"dispatch checkpoint instead, not read here)")
                out["rocksdb_consume_queue"] = {"path": self.rocksdb_cq, "modelled": False,
                                                "what_the_broker_does": ROCKSDB_RECOVERY}
            if o.ext_files or o.ext_files_deleted:  # enableConsumeQueueExt: each ext file's write position
                before = {k: v.max_offset for k, v in o.queues_before.items()}
                out["consume_queue_ext"] = {"files": {k: [{"file": n, "wrote_position": w} for n, w in v]
                                                      for k, v in o.ext_files.items()},
                                            "files_deleted": o.ext_files_deleted,
                                            # --apply: the ext units cut, and one put for each unit dispatched
                                            "cut": [c.to_json() for c in self.ext_cuts],
                                            "units_put": {k: o.queues[k].max_offset - before.get(k, 0)
                                                          for k in o.ext_files
                                                          if k in o.queues and o.queues[k].max_offset > before.get(k, 0)}}
        return {"store_path": self.store, "recovery": "abnormal" if self.abnormal else "normal",
                "needs_recovery": not self.is_empty, "commit_log_end": self.commit_log_end,
                "findings": [f.to_json() for f in self.findings + self.left],
                "actions": [a.to_json() for a in self.actions],
                "consume_queues": [q.to_json() for q in self.queue_cuts],
                "redispatch_from": self.redispatch_from, "redispatch_reason": self.redispatch_reason,
                "made_ahead": list(self.made_ahead), "bytes_zeroed": self.bytes_zeroed,
                "files_deleted_count": self.files_deleted} | out | ({"timer": self.timer} if self.timer else {})


@one_listing()
def plan_recovery(store: str | os.PathLike | StoreView, *, commit_log_file_size: int | None = None,
                  consume_queue_file_size: int | None = None, settings: Settings = Settings(),
                  keep_index: bool = False, missing_file_ok: bool = False, now_ms: int | None = None,
                  store_type: str | None = None) -> RecoveryPlan:
    """The plan for a store, from the broker's recovery simulated (``outcome.simulate``).
    Sizes default to what the files show. A store the broker would not load (a file of odd
    size, an overlap, an entry that is not the broker's) gives a plan that says so
    (``loadable`` false, a ``refusal``), never an exception. A missing middle commit log
    file makes a refusal too (the store is rewritten only with ``missing_file_ok``: into a
    new directory, or in place when forced), though the broker loads such a store.
    ``store``: the view the command opened (or a store root, checked here). ``now_ms``: when
    the next start happens (a timer store's read time depends on it; None: the clock).
    ``store_type``: broker.conf's storeType, when given (``rocksdb_only``)."""
    view = store if isinstance(store, StoreView) else _opened(store)
    view.require_commit_log_directory()  # not there: the plan would drop every queue, as if the log were lost
    paths = view.paths
    findings: list[Finding] = []
    actions: list[Action] = []
    abnormal = paths.abort.exists()

    queue = view.commit_log_listing(commit_log_file_size)
    odd = [f for f in queue.findings if f.id in UNPLANNABLE and f.id != SEGMENT_GAP]
    gaps = [f for f in queue.findings if f.id == SEGMENT_GAP]
    outcome = simulate(view, settings, commit_log_file_size, consume_queue_file_size)
    if odd or not outcome.loadable:
        return _unplannable(paths, outcome, odd, queue)
    refusal = _missing_files(gaps, missing_file_ok, findings)
    size = commit_log_file_size or queue.mapped_file_size or 0
    segments = queue.segments
    w = outcome.walk
    made_ahead = _truncate_dirty_files(segments, w, actions, findings)
    end = _end_of(segments, w, size)
    rocksdb = rocksdb_only(paths.root, store_type=store_type)  # storeType=defaultRocksDB: no file queue to plan
    cuts, cq_max_physic = ([], -1) if rocksdb else _plan_consume_queues(
        paths, consume_queue_file_size, w.end, actions, findings, batch=outcome.semantics == V5)
    rebuilt_again = _index_files_destroyed(outcome, keep_index, actions, findings)
    ext_cuts = plan_ext_cuts(paths.root, w.end, consume_queue_file_size) if outcome.ext_files else []
    _ext_files_after(ext_cuts, actions, findings)

    # the timer store: what its start does (the plan's timer section), and what --apply mends beyond it
    left: list[Finding] = []
    timer = _timer(paths.root, outcome, now_ms, findings, actions, left)

    # where dispatch starts again
    min_offset = segments[0].base_offset if segments else 0
    redispatch, reason = _redispatch_from(outcome, segments, cq_max_physic, min_offset)
    if rocksdb:
        reason = (f"{reason} (the index; the RocksDB queues get the records past their own dispatch checkpoint "
                  f"in the recovery walk, not modelled here)")
    if abnormal:  # last among the findings: what else is wrong says more
        findings.append(Finding(ABORT_FILE_PRESENT, str(paths.abort), None,
                                "the running broker keeps the abort file until it shuts down: this is a start "
                                "after it stops uncleanly" if view.live else
                                "the last writer did not shut down cleanly"))
    elif outcome.abnormal and not _changes(findings) and _dispatch_changes(outcome):
        findings.append(Finding(ABORT_FILE_PRESENT, str(paths.abort), None,
                                "abnormal recovery asked for (--from-checkpoint): dispatch starts again from the "
                                "checkpoint's file"))
    redispatch = min(max(redispatch, min_offset), w.end)
    if _changes(findings):  # truncateDirtyFiles drops them too; in the backup (sparse) so that undo brings them back
        for path in made_ahead:
            actions.append(Action(DELETE, path, 0, os.stat(path).st_size, SEGMENT_AFTER_END,
                                  "truncateDirtyFiles: made ahead and never written (all zeros)"))
        actions += rebuilt_again  # the engine's dispatch builds them again, as the broker does
        _ext_garbage(ext_cuts, actions, findings)
    elif outcome.abnormal:
        # a forced abnormal start that changes nothing: no dispatch either (from the checkpoint's file it would
        # put the last indexed message's keys into the kept index file once more)
        redispatch = max(cq_max_physic, min_offset, 0) if cq_max_physic >= 0 else w.end
        reason = "an abnormal start changes nothing here: nothing is dispatched again"
    if rocksdb and refusal is None and _changes(findings):
        refusal = ROCKSDB_REFUSAL
    multi = _multi_dispatch(view, outcome, redispatch, w.end)
    return RecoveryPlan(str(paths.root), outcome.abnormal, size, w.end, tuple(findings), tuple(actions), tuple(cuts),
                        redispatch, reason, tuple(made_ahead), end, outcome, refusal, timer, tuple(ext_cuts),
                        str(paths.consumequeue) if rocksdb else None, multi, tuple(left))


def _multi_dispatch(view: StoreView, outcome: Outcome, redispatch: int, end: int):
    """How dispatch after the plan multi-dispatches the records it reads (light message
    queues), as the store shows the broker did; said in a note when they name any queue."""
    if redispatch >= end:
        return None
    named, multi = shown_by(view, redispatch, end, outcome.semantics == V5)
    if named:
        shown = ", ".join(sorted(named)[:3]) + (" and more" if len(named) > 3 else "")
        outcome.notes.append(
            f"records from commit log offset {redispatch} on multi-dispatch to {len(named)} queue(s) ({shown}): "
            f"dispatch puts their units there too, as the broker's does (enableMultiDispatch: the store holds "
            f"light message queues)")
    return multi


def _ext_files_after(cuts: list, actions: list[Action], findings: list[Finding]) -> None:
    """Ext files past where a queue's ext ends: truncateDirtyFiles deletes them (at this start,
    or, for the units of consume queue units cut here, at the next: apache/rocketmq #10755)."""
    for cut in cuts:
        for path in cut.files_after:
            why = (f"an ext file past the write position {cut.end} of {cut.topic}/{cut.queue_id}'s ext (one past the "
                   f"ext unit of the last unit the queue keeps): ConsumeQueueExt's truncateDirtyFiles deletes it")
            findings.append(Finding(CQ_EXT_GARBAGE_AFTER_END, str(path), 0, why))
            actions.append(Action(DELETE, str(path), 0, os.stat(path).st_size, CQ_EXT_GARBAGE_AFTER_END, why))


def _ext_garbage(cuts: list, actions: list[Action], findings: list[Finding]) -> None:
    """The bytes after each queue's ext write position that are not zeros (ext units of cut or
    lost consume queue units, a broken unit): the broker only moves its write position and
    writes its next units over them; zeroed here, like a consume queue's bytes after its last
    unit, when the start changes the store anyway."""
    for cut in cuts:
        if cut.zero_to > cut.zero_from:
            what = (f"{cut.units_after} ext unit(s) ({cut.zero_to - cut.zero_from} non-zero bytes)" if cut.units_after
                    else f"{cut.zero_to - cut.zero_from} non-zero bytes that are no ext unit")
            why = (f"{what} past the write position of {cut.topic}/{cut.queue_id}'s ext: no consume queue unit the "
                   f"queue keeps points at them")
            findings.append(Finding(CQ_EXT_GARBAGE_AFTER_END, str(cut.file), cut.zero_from, why))
            actions.append(Action(ZERO, str(cut.file), cut.zero_from, cut.zero_to, CQ_EXT_GARBAGE_AFTER_END, why))


def _timer(root: pathlib.Path, outcome: Outcome, now_ms: int | None, findings: list, actions: list,
           left: list) -> dict | None:
    """The timer section (None when the store has no timer files); the repairs beyond the
    broker (recovery/timer/repair.py) added to the findings and actions, and to ``left`` the
    cut of units written, which the start makes itself (it enqueues their records again)."""
    if not find_timer_store(root).exists:
        return None
    start = timer_start(root, outcome, int(time.time() * 1000) if now_ms is None else now_ms)
    section = timer_section(start)
    repair = plan_timer_repair(start)
    for path, lo, hi, first, n in repair.unit_ranges:
        why = (f"{n} timer log unit(s) from {first} point past the commit log's recovered end "
               f"{outcome.recovered_end}: zeroed, so the timer log ends at {repair.cut_at}")
        findings.append(Finding(TIMER_UNIT_PAST_COMMIT_LOG, str(path), lo, why))
        actions.append(Action(ZERO, str(path), lo, hi, TIMER_UNIT_PAST_COMMIT_LOG, why))
    loops = set(section.get("run", {}).get("loops", ()))
    wheel = start.files.wheel
    for index, last in repair.slots:
        finding_id = TIMER_CHAIN_LOOPS if index in loops else (
            TIMER_UNIT_PAST_COMMIT_LOG if repair.unit_ranges else TIMER_LOG_CUT)
        why = (f"slot {index}: lastPos {last} is at or past where the timer log ends ({repair.cut_at}) and no unit "
               f"before it is the slot's: zeroed, so the next unit put there starts a new chain")
        lo, hi = slot_range(index)
        findings.append(Finding(finding_id, str(wheel), lo, why))
        actions.append(Action(ZERO, str(wheel), lo, hi, finding_id, why))
    written = start.written_past_cut() if start.load.loadable else None
    section["written_end"] = written
    if written is not None:
        lo, hi = start.load.enqueue_again
        path, position = start.log_place(start.load.cut_at)
        left.append(Finding(TIMER_LOG_CUT, str(path), position,
                            f"the next start cuts the timer log at {start.load.cut_at} ({start.load.cut_reason}), "
                            f"before {written} that was written, and enqueues "
                            + (f"rmq_sys_wheel_timer queue offsets {lo}..{hi - 1} again (rmqtool verify says which are "
                               "delivered again)" if hi > lo else "nothing again")
                            + ": --apply leaves the cut to the start; rmqtool redispatch --timer rebuilds the "
                              "timer log from the commit log instead"))
    section["repair"] = {"cut_at": repair.cut_at, "units_zeroed": sum(r[4] for r in repair.unit_ranges),
                         "slots_zeroed": [i for i, _ in repair.slots],
                         "left": [{"slot_index": i, "why": why} for i, why in repair.left]}
    return section


def _opened(root) -> StoreView:
    """The view of a store root a library caller passed (checked to be a directory)."""
    if not pathlib.Path(root).is_dir():
        raise StoreNotFound("no such directory", root)
    return StoreView(root)


def _dispatch_refusal(outcome: Outcome) -> str | None:
    """Why --apply refuses a start whose dispatch makes a consume queue rmqtool does not
    write: one whose first file is at a negative offset (paths.first_file_unnameable), or one
    of a topic that names no directory; or None."""
    if outcome.topic_unnamed is not None:
        offset, topic = outcome.topic_unnamed
        return (f"the record at commit log offset {offset} has topic {topic!r}, a damaged field (the body CRC does "
                f"not cover it) that names no consume queue directory: the start's dispatch cannot make its queue; "
                f"rmqtool does not write it (rmqtool salvage keeps the messages)")
    for (topic, queue_id), q in sorted(outcome.queue_models.items()):
        unnameable = getattr(q, "unnameable", None)
        if unnameable is not None:
            offset, cq_offset = unnameable
            why = "below 0" if cq_offset < 0 else "past a Java long, which wraps"
            return (f"the record at commit log offset {offset} has queueOffset {cq_offset}, a damaged field (the "
                    f"body CRC does not cover it): the broker's dispatch makes the first file of consume queue "
                    f"{topic}/{queue_id} at {cq_offset} x 20, {why}, and names it by a negative offset; rmqtool "
                    f"does not write such a file (rmqtool salvage keeps the messages)")
    return None


def _missing_files(gaps: list[Finding], missing_file_ok: bool, findings: list[Finding]) -> str | None:
    """A missing middle commit log file: the broker loads the store and skips its messages;
    the refusal to rewrite it in place unless ``missing_file_ok``."""
    refusal = None
    for gap in gaps:
        findings.append(Finding(SEGMENT_GAP, gap.path, gap.offset,
                                f"{gap.message}: the broker loads the store and skips the missing file's messages "
                                f"without a word"))
        if not missing_file_ok:
            refusal = (f"{gap.path}: a commit log file is missing before it: rmqtool rewrites such a store only into "
                       f"a new directory (--to NEWDIR) or with --force (restore the file if you can; the broker "
                       f"itself loads the store and skips the missing file's messages)")
    return refusal


def _truncate_dirty_files(segments: list[Segment], w, actions: list[Action], findings: list[Finding]) -> list[str]:
    """truncateDirtyFiles at the walk's end: the last file zeroed after it, the files after it
    that hold data deleted; returns those made ahead and never written (all zeros), which go
    only when the start changes something else."""
    if segments and w.reason != LAST_BLANK:
        _zero_after(segments[w.file_index], w.position, actions, findings, w)
    made_ahead = []
    for seg in segments[w.file_index + 1:] if segments else []:
        if all_zero_from(seg.path, 0) is None:
            made_ahead.append(str(seg.path))
            continue
        findings.append(Finding(SEGMENT_AFTER_END, str(seg.path), 0,
                                f"a segment after the end of the commit log ({w.end}) holds data"))
        actions.append(Action(DELETE, str(seg.path), 0, seg.size, SEGMENT_AFTER_END,
                              "truncateDirtyFiles: a segment after the end of the log"))
    return made_ahead


def _index_files_destroyed(outcome: Outcome, keep_index: bool, actions: list[Action],
                           findings: list[Finding]) -> list[Action]:
    """IndexService.load after an abnormal exit: the index files it destroys (deleted, unless
    ``keep_index``). Files dispatch puts back as they are come back as actions to take only
    when the start changes something else."""
    rebuilt_again = []  # destroyed and put back as they are: a change only when the start changes more
    for path, end_ts in outcome.index_files_destroyed:
        delete = Action(DELETE, path, 0, os.stat(path).st_size, INDEX_FILE_NEWER_THAN_CHECKPOINT,
                        "IndexService.load after an abnormal exit (dispatch builds it again)")
        if outcome.index_rebuilt_as_is:
            if not keep_index:
                rebuilt_again.append(delete)
            continue
        what = (f"its endTimestamp {end_ts} is after the checkpoint's indexMsgTimestamp "
                f"{outcome.index_msg_timestamp}: the broker destroys it at an abnormal start")
        findings.append(Finding(INDEX_FILE_NEWER_THAN_CHECKPOINT, path, None,
                                what + ("; kept (--keep-index)" if keep_index else "")))
        if not keep_index:
            actions.append(delete)
    return rebuilt_again


def _redispatch_from(outcome: Outcome, segments: list[Segment], cq_max_physic: int,
                     min_offset: int) -> tuple[int, str]:
    """Where the reput starts, and why: an abnormal start from the file recovery starts from,
    a normal one from the largest commit log offset the consume queues reach."""
    if outcome.abnormal and segments:
        return segments[outcome.start_index].base_offset, outcome.start_reason
    return max(cq_max_physic, min_offset), ("no consume queue unit: from the commit log's first offset"
                                            if cq_max_physic < 0 else
                                            "from the largest commit log offset the consume queues reach")


LAST_BLANK = "a blank record ends the last file"


def _changes(findings) -> bool:
    """Findings of something the start changes: a missing middle file is not one (the broker
    loads the store as it is, every time)."""
    return any(f.id != SEGMENT_GAP for f in findings)


def _dispatch_changes(outcome: Outcome) -> bool:
    """Whether the start's dispatch writes anything: a queue gets units (or is made), or the
    index gets entries other than those of files it destroys and builds again as they were."""
    before = {k: v.max_offset for k, v in outcome.queues_before.items()}
    if {k: v.max_offset for k, v in outcome.queues.items()} != before:
        return True
    if outcome.index_files_destroyed:
        return not outcome.index_rebuilt_as_is
    return outcome.index_entries_put > 0


def _end_of(segments: list[Segment], w, size: int) -> CommitLogEnd:
    """The walk's end as the engine's writable open takes it (CommitLogEnd)."""
    if not segments:
        return CommitLogEnd(0, None, 0)
    tail = segments[w.file_index]
    result = CommitLogEnd(w.end, tail.base_offset, w.position, None, tuple(segments[w.file_index + 1:]))
    result.last_written = w.file_index
    last = _message_at(segments[w.last_record[0]], w.last_record[1]) if w.last_record else None
    if last is None:  # the walk accepted nothing: the records before its start
        last = _last_message_before(tail, w.position)
    if last is None and w.file_index > 0:
        last = _last_message_before(segments[w.file_index - 1], size or segments[w.file_index - 1].size)
    result.last_message = last
    if last is not None:
        result.store_host = (bytes(last.store_ip), last.store_port)
    return result


def _message_at(seg: Segment, position: int):
    """The message the walk accepted at ``position``, read again whole (one window)."""
    for r in scan_segment(seg, is_last=True, check_crc=False, start=position):
        return r if isinstance(r, Message) and r.position == position else None
    return None


def _last_message_before(seg: Segment, position: int):
    last = None
    for r in scan_segment(seg, is_last=True, check_crc=False, end=position):
        if isinstance(r, Message):
            last = r
    return last


def _unplannable(paths: StorePaths, outcome, odd, queue) -> RecoveryPlan:
    """A store the broker does not load: no action, the reason in the plan."""
    if odd:
        outcome.loadable = False
        outcome.reason = outcome.reason or f"{odd[0].path}: {odd[0].id}: {odd[0].message}"
    refusal = f"the broker would not load this store: {outcome.reason}"
    finding = Finding(STORE_NOT_LOADABLE, str(paths.root), None, outcome.reason)
    end = CommitLogEnd(outcome.written_end, None, 0)
    return RecoveryPlan(str(paths.root), outcome.abnormal, queue.mapped_file_size or 0, outcome.written_end,
                        (finding,), (), (), outcome.written_end, "the broker does not load this store", (),
                        end, outcome, refusal)


def _zero_after(seg: Segment, position: int, actions: list[Action], findings: list[Finding], w=None) -> None:
    """Zero what is not zero after ``position`` (the end of the last good record) in ``seg``."""
    extent = _nonzero_extent(seg.path, position)
    if extent is None:
        return
    first, last = extent
    head = first_bytes(seg.path, PREFIX.size, position)
    torn = len(head) == PREFIX.size and PREFIX.unpack_from(head)[_MAGIC_CODE] in MESSAGE_MAGIC_CODES
    if torn:
        total = PREFIX.unpack_from(head)[HEADER_FIELDS.index("store_size")]
        first = position  # its header goes too
        why = f" ({w.reason})" if w is not None and w.reason else ""
        if last > position + max(total, 0):
            findings.append(Finding(RECOVERY_CUTS_COMMIT_LOG, str(seg.path), position,
                                    f"the broker's recovery rejects the record of {total} bytes here{why}: the "
                                    f"log is cut there and the {last - position} bytes from it are dropped"))
        else:
            findings.append(Finding(RECORD_TORN, str(seg.path), position,
                                    f"a record of {total} bytes starts after the last good one but does not read "
                                    f"back whole{why}: the broker's recovery cuts the log there"))
    else:
        findings.append(Finding(TRAILING_GARBAGE, str(seg.path), first,
                                f"non-zero bytes after the last record of the commit log (it ends at "
                                f"{seg.base_offset + position})"))
    actions.append(Action(ZERO, str(seg.path), first, last, findings[-1].id,
                          "after the last good record of the commit log"))


def _plan_consume_queues(paths: StorePaths, file_size: int | None, commit_log_end: int,
                         actions: list[Action], findings: list[Finding], *,
                         batch: bool = False) -> tuple[list[QueueCut], int]:
    """Each queue of consumequeue/ (and with ``batch``, 5.3.3's batchconsumequeue/): units
    past the commit log's end, bytes after the last unit, files after the end. Returns the
    queues cut and the largest max physic offset kept."""
    cuts = []
    max_physic = -1
    kinds = [(paths.consumequeue, CQ_LAYOUT, file_size)] + ([(paths.batch_consumequeue, BATCH_CQ_LAYOUT, None)]
                                                              if batch else [])
    for root, layout, size in kinds:
        for topic, queue_id, directory in queue_directories(root):
            max_physic = max(max_physic, _plan_queue(topic, queue_id, directory, layout, size, commit_log_end,
                                                     actions, findings, cuts))
    return cuts, max_physic


def _plan_queue(topic: str, queue_id: int, directory: pathlib.Path, layout, file_size: int | None,
                commit_log_end: int, actions: list[Action], findings: list[Finding], cuts: list[QueueCut]) -> int:
    """One queue's part of :func:`_plan_consume_queues`; returns its max physic offset."""
    queue = discover(directory, required=False, mapped_file_size=file_size)
    mapped = file_size or queue.mapped_file_size
    if not queue.segments or mapped is None:  # no file, or only empty ones (5.3.3's load deletes the last)
        return -1
    qe = find_queue_end(queue.segments, mapped, commit_log_end, layout=layout)
    if qe.units_cut:
        if layout is BATCH_CQ_LAYOUT:
            before, after = (batch_unit_before(queue.segments, at) for at in (qe.written_end, qe.end))
            cuts.append(QueueCut(topic, queue_id, before[4] + before[5], after[4] + after[5] if after else 0,
                                 qe.max_physic_offset, qe.units_cut, "BatchCQ"))
        else:
            cuts.append(QueueCut(topic, queue_id, qe.written_end // CQ_STORE_UNIT_SIZE,
                                 qe.end // CQ_STORE_UNIT_SIZE, qe.max_physic_offset, qe.units_cut))
        where = qe.end_segment or qe.segments_after[0]
        findings.append(Finding(CONSUME_QUEUE_BEYOND_COMMIT_LOG, str(where.path), qe.end - where.base_offset,
                                f"{qe.units_cut} units at or past commit log offset {commit_log_end}"))
    if qe.end_segment is not None:
        seg = qe.end_segment
        extent = _nonzero_extent(seg.path, qe.end - seg.base_offset)
        if extent is not None:
            if not qe.units_cut:
                findings.append(Finding(TRAILING_GARBAGE, str(seg.path), extent[0],
                                        "non-zero bytes after the last unit of the consume queue"))
            actions.append(Action(ZERO, str(seg.path), extent[0], extent[1],
                                  CONSUME_QUEUE_BEYOND_COMMIT_LOG if qe.units_cut else TRAILING_GARBAGE,
                                  "after the last unit the consume queue keeps"))
    for seg in qe.segments_after:
        findings.append(Finding(CONSUME_QUEUE_FILE_AFTER_END, str(seg.path), None,
                                f"the queue ends at byte {qe.end} (unit {qe.end // layout.unit_size})"))
        actions.append(Action(DELETE, str(seg.path), 0, seg.size, CONSUME_QUEUE_FILE_AFTER_END,
                              "truncateDirtyFiles: a consume queue file after the queue's end"))
    return qe.max_physic_offset


def _nonzero_extent(path: pathlib.Path, position: int) -> tuple[int, int] | None:
    """[first, last + 1) of the non-zero bytes of a file from ``position`` on; None: all zero."""
    first = all_zero_from(path, position)
    if first is None:
        return None
    return first, last_nonzero_from(path, first)
