"""Checkpoint and marker checks: the checkpoint against the data, and what the next start does.

The checkpoint's three timestamps say up to when the commit log (physicMsgTimestamp),
the consume queues (logicsMsgTimestamp) and the index (indexMsgTimestamp) were flushed.
Messages stored after them may not be on disk if the host crashed. With an ``abort``
file the broker recovers abnormally: from the last commit log file whose first message
was stored at or before ``min(physic, logics) - 3 s`` (``isMappedFileMatchedRecover``),
else from the first file; without one it recovers normally from the third-last file.
"""
from __future__ import annotations

import os
from typing import Iterator

import numpy as np

from rmqtool.errors import FormatError, StoreNotFound
from rmqtool.findings import (CHECKPOINT_AHEAD_OF_DATA, CHECKPOINT_INVALID, CHECKPOINT_MISSING,
                              CHECKPOINT_WINDOW, CHECKPOINT_ZEROED, RECOVERY_START_FILE, Finding, finding)
from rmqtool.recovery.commitlog_walk import V4, abnormal_start, normal_start
from rmqtool.store.checkpoint import StoreCheckpoint, checkpoint_as_loaded, read_markers
from rmqtool.store.paths import StorePaths
from rmqtool.verify.commitlog import BandConsumer, CommitLogCheck

def _checkpoint(root) -> tuple[StoreCheckpoint | None, list[Finding]]:
    path = StorePaths(root).checkpoint
    try:
        cp = checkpoint_as_loaded(path)
    except StoreNotFound:
        return None, [finding(CHECKPOINT_MISSING, path, None,
                              "no checkpoint file: the broker creates a zeroed one, and an abnormal recovery "
                              "then rescans the commit log from its first file")]
    except FormatError as exc:
        return None, [finding(CHECKPOINT_INVALID, path, exc.offset, exc.message)]
    found = list(cp.findings)
    if not (cp.physic_msg_timestamp or cp.logics_msg_timestamp or cp.index_msg_timestamp):
        found.append(finding(CHECKPOINT_ZEROED, path, 0, "physicMsgTimestamp, logicsMsgTimestamp and "
                             "indexMsgTimestamp are all 0: an abnormal recovery rescans from the first file"))
    return cp, found


class CheckpointWindows(BandConsumer):
    """What the checkpoint check needs of every message, gathered band by band: the last store
    time, and for each checkpoint timestamp how many messages were stored after it and the
    first of them."""

    def __init__(self, store_root: str | os.PathLike):
        self.cp, self.cp_findings = _checkpoint(store_root)
        self.max_timestamp: int | None = None
        self.after: dict = {}  # timestamp -> [messages stored after it, offset of the first]

    def band(self, band) -> None:
        if not band.messages:
            return
        ts = band["store_timestamp"]
        top = int(ts.max())
        self.max_timestamp = top if self.max_timestamp is None else max(self.max_timestamp, top)
        if self.cp is None:
            return
        for value in {self.cp.physic_msg_timestamp, self.cp.logics_msg_timestamp, self.cp.index_msg_timestamp}:
            later = np.flatnonzero(ts > value)
            if len(later):
                count = self.after.setdefault(value, [0, int(band["offset"][later[0]])])
                count[0] += len(later)


def recovery_start(log: CommitLogCheck, cp: StoreCheckpoint | None) -> tuple[int, str]:
    """(segment index, why) where abnormal recovery starts (recovery/commitlog_walk.abnormal_start,
    over the first store times the scan read)."""
    min_ts = cp.min_timestamp if cp is not None else 0
    n = abnormal_start(log.segments, V4, min_ts, first_timestamp=log.first_store_timestamps.get)
    if n >= 0:
        return n, (f"its first message was stored at {log.first_store_timestamps[n]}, at or before the "
                   f"checkpoint's minTimestamp {min_ts} (min(physicMsgTimestamp, logicsMsgTimestamp) - 3 s)")
    return 0, f"no file's first message was stored at or before the checkpoint's minTimestamp {min_ts}"


def check_checkpoint(store_root: str | os.PathLike, log: CommitLogCheck,
                     windows: CheckpointWindows) -> Iterator[Finding]:
    """Markers, the checkpoint (read by ``windows``), its windows in the commit log's bands
    and the recovery plan."""
    markers = read_markers(store_root)
    yield from markers.findings
    cp = windows.cp
    yield from windows.cp_findings
    if not log.jobs:
        return
    path = StorePaths(store_root).checkpoint
    if cp is not None and windows.max_timestamp is not None:
        last = windows.max_timestamp
        for name, value in (("physicMsgTimestamp", cp.physic_msg_timestamp),
                            ("logicsMsgTimestamp", cp.logics_msg_timestamp)):
            if value > last and value != 0:  # 0: never written (a store of clocks before 1970 is behind it)
                yield finding(CHECKPOINT_AHEAD_OF_DATA, path, None,
                              f"{name} {value} is after the last stored message ({last}): messages the broker "
                              f"had flushed are no longer in the commit log", store_timestamp=last)
        for name, value, what in (("physicMsgTimestamp", cp.physic_msg_timestamp, "the commit log"),
                                  ("logicsMsgTimestamp", cp.logics_msg_timestamp, "the consume queues"),
                                  ("indexMsgTimestamp", cp.index_msg_timestamp, "the index")):
            if value in windows.after:
                count, first = windows.after[value]
                where, position = log.where(first)
                yield finding(CHECKPOINT_WINDOW, where, position,
                              f"{count} message(s) stored after {name} {value}, from commit log offset {first}: "
                              f"what {what} may not have flushed before the last stop"
                              + ("" if markers.abort.exists else " (a clean shutdown flushed it all)"),
                              commit_log_offset=first, messages=count)
    n, why = recovery_start(log, cp)
    seg = log.segments[n]
    if markers.abort.exists:
        yield finding(RECOVERY_START_FILE, seg.path, 0,
                      f"the abort file is present: the next start recovers abnormally from {seg.name} ({why}), "
                      f"re-checking every record's CRC and re-dispatching from there; anything after the first bad "
                      f"record is truncated", commit_log_offset=seg.base_offset)
    else:
        normal = log.segments[normal_start(log.segments, V4, 0)]
        yield finding(RECOVERY_START_FILE, normal.path, 0,
                      f"clean shutdown: the next start recovers normally from {normal.name} (the third-last file); "
                      f"after a crash it would start from {seg.name} ({why})", commit_log_offset=normal.base_offset)
