"""What recovering a store would change: a pure plan, computed from the read side only.

The broker recovers a store every time it loads one (DefaultMessageStore.load and
recover at 4.9.8); this plan says, in its terms, what that recovery changes in the files:

* the commit log's end (CommitLog.recoverNormally / recoverAbnormally, both with
  checkCRCOnRecover, the default): the last segment holding data is read record by record
  with the body CRC checked, and the log ends after its last good record. What follows in
  that segment is zeroed here (the broker only moves its write position back, leaving
  bytes that any other reader takes for records), and segments after the end that hold
  data are deleted (truncateDirtyFiles);
* every consume queue (ConsumeQueue.recover, then truncateDirtyLogicFiles): units at or
  past the commit log's end, and anything non-zero after the queue's last unit, are
  zeroed; files after the queue's end are deleted;
* where dispatch to the consume queues and the index starts again: after a clean
  shutdown, from the largest commit log offset the consume queues reach; with the
  ``abort`` marker (abnormal recovery), from the last segment whose first message was
  stored at or before the checkpoint's min timestamp (isMappedFileMatchedRecover).

Nothing here writes: :func:`rmqtool.recovery.apply.apply_plan` carries a plan out (with
a backup of every byte it changes), and re-dispatching is the engine's job. All-zero
segments made ahead after the end are no change of recovery's: a writer deletes them.

Not covered: damage further back than the last segment holding data (the broker's
abnormal recovery re-checks every segment from its start and drops all that follows a
bad record), and index files written past the checkpoint.
"""
from __future__ import annotations

import dataclasses
import datetime
import os
import pathlib

from rmqtool.errors import CorruptData, FormatError, StoreNotFound
from rmqtool.findings import (ABORT_FILE_PRESENT, CONSUME_QUEUE_BEYOND_COMMIT_LOG,
                              CONSUME_QUEUE_FILE_AFTER_END, RECORD_TORN, SEGMENT_AFTER_END, SEGMENT_GAP,
                              SEGMENT_OVERLAP, SEGMENT_SIZE_ODD, TRAILING_GARBAGE, Finding)
from rmqtool.formats.commitlog import MESSAGE_MAGIC_CODES
from rmqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE
from rmqtool.store.checkpoint import read_checkpoint
from rmqtool.store.commitlog_end import CommitLogEnd, all_zero_from, find_commit_log_end, first_bytes
from rmqtool.store.consumequeue import find_queue_end, queue_directories
from rmqtool.store.message import HEADER_FIELDS, HEADERS, PREFIX
from rmqtool.store.paths import StorePaths
from rmqtool.store.segments import Segment, discover

ZERO = "zero"  # write zeros over [start, end) of the file
DELETE = "delete"  # delete the file ([start, end) is the whole of it)

# Segment findings that leave no end to plan from: the broker's load refuses such a store too.
UNPLANNABLE = (SEGMENT_SIZE_ODD, SEGMENT_GAP, SEGMENT_OVERLAP)
_ZERO_SCAN = 1 << 20  # bytes read at once while looking for the last non-zero byte
_MAGIC_CODE = HEADER_FIELDS.index("magic_code")
_SYS_FLAG = HEADER_FIELDS.index("sys_flag")
_STORE_TIMESTAMP = HEADER_FIELDS.index("store_timestamp")


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
        return {"action": self.kind, "file": self.path, "start": self.start, "end": self.end,
                "bytes": self.length, "finding": self.finding, "message": self.message}


@dataclasses.dataclass(frozen=True, slots=True)
class QueueCut:
    """A consume queue whose units recovery truncates."""
    topic: str
    queue_id: int
    max_offset_before: int  # one past the last written unit, in queue offsets
    max_offset: int  # after recovery
    max_physic_offset: int  # commitLogOffset + size of the last unit kept (-1: none)

    def to_json(self) -> dict:
        return {"topic": self.topic, "queue_id": self.queue_id, "max_offset_before": self.max_offset_before,
                "max_offset": self.max_offset, "units_truncated": self.max_offset_before - self.max_offset,
                "max_physic_offset": self.max_physic_offset}


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
    commit_log: CommitLogEnd  # the read side's end, for a writer that goes on from it

    @property
    def is_empty(self) -> bool:
        """Nothing to recover: the store is as a clean close leaves it."""
        return not self.findings

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
        first = self.findings[0]
        where = first.path + (f" at offset {first.offset}" if first.offset is not None else "")
        more = f" (and {len(self.findings) - 1} more)" if len(self.findings) > 1 else ""
        return (f"{first.id}: {where}: {first.message}{more}; recovery zeroes {self.bytes_zeroed} bytes, "
                f"deletes {self.files_deleted} files, and dispatches again from commit log offset "
                f"{self.redispatch_from}")

    def to_json(self) -> dict:
        return {"store": self.store, "recovery": "abnormal" if self.abnormal else "normal",
                "needs_recovery": not self.is_empty, "commit_log_end": self.commit_log_end,
                "findings": [f.to_json() for f in self.findings], "actions": [a.to_json() for a in self.actions],
                "consume_queues": [q.to_json() for q in self.queue_cuts],
                "redispatch_from": self.redispatch_from, "redispatch_reason": self.redispatch_reason,
                "made_ahead": list(self.made_ahead), "bytes_zeroed": self.bytes_zeroed,
                "files_deleted": self.files_deleted}


def plan_recovery(store_root: str | os.PathLike, *, commit_log_file_size: int | None = None,
                  consume_queue_file_size: int | None = None) -> RecoveryPlan:
    """The plan for a store. Sizes default to what the files show. Raises CorruptData for a
    commit log that gives no end to plan from (segments of odd size, gaps, overlaps)."""
    paths = StorePaths(store_root)
    if not paths.root.is_dir():
        raise StoreNotFound("no such directory", paths.root)
    findings: list[Finding] = []
    actions: list[Action] = []
    abnormal = paths.abort.exists()

    # the commit log
    queue = discover(paths.commitlog, required=False, mapped_file_size=commit_log_file_size)
    odd = [f for f in queue.findings if f.id in UNPLANNABLE]
    if odd:
        raise CorruptData(f"{odd[0].id}: {odd[0].message}", odd[0].path)
    size = commit_log_file_size or queue.mapped_file_size or 0
    end = find_commit_log_end(queue.segments, size, check_crc=True)
    if end.segment_base is not None:
        tail = next(s for s in queue.segments if s.base_offset == end.segment_base)
        _zero_after(tail, end.wrote_position, actions, findings)
    made_ahead = []
    for seg in end.extra_segments:
        if all_zero_from(seg.path, 0) is None:
            made_ahead.append(str(seg.path))
            continue
        findings.append(Finding(SEGMENT_AFTER_END, str(seg.path), 0,
                                f"a segment after the end of the commit log ({end.end}) holds data"))
        actions.append(Action(DELETE, str(seg.path), 0, seg.size, SEGMENT_AFTER_END,
                              "truncateDirtyFiles: a segment after the end of the log"))
    kept = [s for s in queue.segments if s.base_offset < end.end or s.base_offset == end.segment_base]

    # the consume queues
    cuts, cq_max_physic = _plan_consume_queues(paths, consume_queue_file_size, end.end, actions, findings)

    # where dispatch starts again
    min_offset = queue.segments[0].base_offset if queue.segments else 0
    redispatch = max(cq_max_physic, min_offset)
    if cq_max_physic < 0:
        reason = "no consume queue unit: from the commit log's first offset"
    else:
        reason = "from the largest commit log offset the consume queues reach"
    if abnormal:  # last among the findings: what else is wrong says more
        findings.append(Finding(ABORT_FILE_PRESENT, str(paths.abort), None,
                                "the last writer did not shut down cleanly"))
        min_ts, source = _checkpoint_min_timestamp(paths)
        matched = _recovery_start_segment(kept, min_ts)
        start = matched.base_offset if matched is not None else min_offset
        if start < redispatch:
            redispatch = start
            if matched is not None:
                reason = (f"abnormal recovery: from the last segment whose first message was stored at or "
                          f"before the checkpoint's min timestamp {min_ts} ({_iso(min_ts)}; {source})")
            else:
                reason = (f"abnormal recovery: no segment's first message was stored at or before the "
                          f"checkpoint's min timestamp {min_ts} ({source}): from the first segment")
    redispatch = min(max(redispatch, min_offset), end.end)
    return RecoveryPlan(str(paths.root), abnormal, size, end.end, tuple(findings), tuple(actions), tuple(cuts),
                        redispatch, reason, tuple(made_ahead), end)


def _zero_after(seg: Segment, position: int, actions: list[Action], findings: list[Finding]) -> None:
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
        findings.append(Finding(RECORD_TORN, str(seg.path), position,
                                f"a record of {total} bytes starts after the last good one but does not read "
                                f"back whole (lengths or body CRC): the broker's recovery cuts the log there"))
    else:
        findings.append(Finding(TRAILING_GARBAGE, str(seg.path), first,
                                f"non-zero bytes after the last record of the commit log (it ends at "
                                f"{seg.base_offset + position})"))
    actions.append(Action(ZERO, str(seg.path), first, last, RECORD_TORN if torn else TRAILING_GARBAGE,
                          "after the last good record of the commit log"))


def _plan_consume_queues(paths: StorePaths, file_size: int | None, commit_log_end: int,
                         actions: list[Action], findings: list[Finding]) -> tuple[list[QueueCut], int]:
    """Each queue of consumequeue/: units past the commit log's end, bytes after the last
    unit, files after the end. Returns the queues cut and the largest max physic offset kept."""
    cuts = []
    max_physic = -1
    for topic, queue_id, directory in queue_directories(paths.consumequeue):
        queue = discover(directory, required=False, mapped_file_size=file_size)
        if not queue.segments:
            continue
        mapped = file_size or queue.mapped_file_size
        qe = find_queue_end(queue.segments, mapped, commit_log_end)
        max_physic = max(max_physic, qe.max_physic_offset)
        if qe.units_cut:
            cuts.append(QueueCut(topic, queue_id, qe.written_end // CQ_STORE_UNIT_SIZE, qe.end // CQ_STORE_UNIT_SIZE,
                                 qe.max_physic_offset))
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
                                    f"the queue ends at offset {qe.end // CQ_STORE_UNIT_SIZE}"))
            actions.append(Action(DELETE, str(seg.path), 0, seg.size, CONSUME_QUEUE_FILE_AFTER_END,
                                  "truncateDirtyFiles: a consume queue file after the queue's end"))
    return cuts, max_physic


def _nonzero_extent(path: pathlib.Path, position: int) -> tuple[int, int] | None:
    """[first, last + 1) of the non-zero bytes of a file from ``position`` on; None: all zero."""
    first = all_zero_from(path, position)
    if first is None:
        return None
    last = first + 1
    pos = first
    while True:
        pos = all_zero_from(path, pos)  # skips zeros (and holes) up to the next non-zero byte
        if pos is None:
            return first, last
        chunk = first_bytes(path, _ZERO_SCAN, pos)
        stripped = chunk.rstrip(b"\0")
        last = pos + len(stripped)
        pos += len(chunk)


def _checkpoint_min_timestamp(paths: StorePaths) -> tuple[int, str]:
    """StoreCheckpoint.getMinTimestamp, 0 (every segment is newer) when there is none to read."""
    try:
        return read_checkpoint(paths.checkpoint).min_timestamp, "from the checkpoint"
    except StoreNotFound:
        return 0, "no checkpoint file"
    except FormatError:
        return 0, "the checkpoint cannot be read"


def recovery_start(segments: list[Segment], min_timestamp: int) -> int:
    """recoverAbnormally's start: the last segment whose first message was stored at or
    before ``min_timestamp`` (isMappedFileMatchedRecover), else the first segment."""
    matched = _recovery_start_segment(segments, min_timestamp)
    if matched is not None:
        return matched.base_offset
    return segments[0].base_offset if segments else 0


def _recovery_start_segment(segments: list[Segment], min_timestamp: int) -> Segment | None:
    for seg in reversed(segments):
        head = first_bytes(seg.path, HEADERS[-1].size)
        if len(head) < PREFIX.size:
            continue
        prefix = PREFIX.unpack_from(head)
        if prefix[_MAGIC_CODE] not in MESSAGE_MAGIC_CODES:
            continue
        header = HEADERS[(prefix[_SYS_FLAG] >> 4) & 3]  # as HEADERS is indexed: the born and store host IPv6 bits
        if len(head) < header.size:
            continue
        stamp = header.unpack_from(head)[_STORE_TIMESTAMP]
        if stamp != 0 and stamp <= min_timestamp:
            return seg
    return None


def _iso(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).isoformat(timespec="milliseconds")
