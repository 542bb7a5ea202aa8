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
from rmqtool.store.checkpoint import StoreCheckpoint, read_checkpoint, read_markers
from rmqtool.store.paths import StorePaths
from rmqtool.verify.commitlog import CommitLogData

NORMAL_RECOVERY_FILES = 3  # recoverNormally starts at mappedFiles.size() - 3


def _checkpoint(root) -> tuple[StoreCheckpoint | None, list[Finding]]:
    path = StorePaths(root).checkpoint
    try:
        cp = read_checkpoint(path)
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


def recovery_start(data: CommitLogData, cp: StoreCheckpoint | None) -> tuple[int, str]:
    """(segment index, why) where abnormal recovery starts: the last file whose first
    record is a message stored at or before the checkpoint's minTimestamp (not 0)."""
    min_ts = cp.min_timestamp if cp is not None else 0
    for n in range(len(data.checks) - 1, -1, -1):
        first = data.checks[n].first_store_timestamp
        if first and first <= min_ts:
            return n, (f"its first message was stored at {first}, at or before the checkpoint's "
                       f"minTimestamp {min_ts} (min(physicMsgTimestamp, logicsMsgTimestamp) - 3 s)")
    return 0, f"no file's first message was stored at or before the checkpoint's minTimestamp {min_ts}"


def check_checkpoint(store_root: str | os.PathLike, data: CommitLogData | None) -> Iterator[Finding]:
    """Markers, the checkpoint, and (with the commit log's data) its windows and the recovery plan."""
    markers = read_markers(store_root)
    yield from markers.findings
    cp, found = _checkpoint(store_root)
    yield from found
    if data is None or not data.checks:
        return
    path = StorePaths(store_root).checkpoint
    ts = data["store_timestamp"]
    if cp is not None and len(ts):
        last = int(ts.max())
        for name, value in (("physicMsgTimestamp", cp.physic_msg_timestamp),
                            ("logicsMsgTimestamp", cp.logics_msg_timestamp)):
            if value > last:
                yield finding(CHECKPOINT_AHEAD_OF_DATA, path, None,
                              f"{name} {value} is after the last stored message ({last}): messages the broker "
                              f"had flushed are no longer in the commit log", store_timestamp=last)
        for name, value, what in (("physicMsgTimestamp", cp.physic_msg_timestamp, "the commit log"),
                                  ("logicsMsgTimestamp", cp.logics_msg_timestamp, "the consume queues"),
                                  ("indexMsgTimestamp", cp.index_msg_timestamp, "the index")):
            after = np.flatnonzero(ts > value)
            if len(after):
                first = int(data["offset"][after[0]])
                where, position = data.where(first)
                yield finding(CHECKPOINT_WINDOW, where, position,
                              f"{len(after)} message(s) stored after {name} {value}, from commit log offset {first}: "
                              f"what {what} may not have flushed before the last stop"
                              + ("" if markers.abort.exists else " (a clean shutdown flushed it all)"),
                              commit_log_offset=first, messages=int(len(after)))
    n, why = recovery_start(data, cp)
    seg = data.segments[n]
    if markers.abort.exists:
        yield finding(RECOVERY_START_FILE, seg.path, 0,
                      f"the abort file is present: the next start recovers abnormally from {seg.name} ({why}), "
                      f"re-checking every record's CRC and re-dispatching from there; anything after the first bad "
                      f"record is truncated", commit_log_offset=seg.base_offset)
    else:
        normal = data.segments[max(len(data.segments) - NORMAL_RECOVERY_FILES, 0)]
        yield finding(RECOVERY_START_FILE, normal.path, 0,
                      f"clean shutdown: the next start recovers normally from {normal.name} (the third-last file); "
                      f"after a crash it would start from {seg.name} ({why})", commit_log_offset=normal.base_offset)
