"""A store that a running broker (or ``rmqtool append``) holds, read as a snapshot.

The broker holds the ``lock`` file for as long as it runs (store/lock.py asks who, without
ever dropping a lock). Its commit log, consume queues and index grow while they are read,
so a reader takes the written commit log end once, when the read begins (the consistent
end), and reads up to it. What lies past it is the moving tail, not damage: the record
being written (half there, or still zeros), consume queue units dispatched after the end
was taken, and the abort file a running broker keeps until it shuts down.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

from rmqtool.findings import ABORT_FILE_PRESENT, CONSUME_QUEUE_BEYOND_COMMIT_LOG, Finding
from rmqtool.store.commitlog_end import CommitLog, last_file_end
from rmqtool.store.commitlog_paths import commit_log_paths_of, list_commit_log
from rmqtool.store.detect import is_store_dir
from rmqtool.store.lock import is_locked
from rmqtool.store.paths import COMMITLOG_DIR, StorePaths, is_segment_name

# findings a running broker's store shows by being written to, wherever they are
_ALWAYS_MOVING = frozenset({ABORT_FILE_PRESENT, CONSUME_QUEUE_BEYOND_COMMIT_LOG})


@dataclasses.dataclass(frozen=True)
class LiveStore:
    root: pathlib.Path
    pid: int  # the lock's holder
    commit_log_end: int  # the written commit log end when the read began

    def note(self) -> str:
        """The line a command prints on stderr before it reads a live store."""
        return (f"rmqtool: {self.root} is live: PID {self.pid} holds its lock (a running broker or writer); "
                f"reading up to commit log offset {self.commit_log_end}, its written end now; what is written "
                f"after that is left out, not reported as damage")

    def is_moving(self, finding: Finding) -> bool:
        """Whether a finding is about the moving tail rather than damage."""
        if finding.id in _ALWAYS_MOVING:
            return True
        offset = _commit_log_offset(finding)
        return offset is not None and offset >= self.commit_log_end

    def settled(self, findings: list[Finding]) -> list[Finding]:
        """The findings that stand on a live store (the moving tail's left out)."""
        return [f for f in findings if not self.is_moving(f)]

    def to_json(self) -> dict:
        return {"locked_by_pid": self.pid, "consistent_commit_log_end": self.commit_log_end}


def _commit_log_offset(finding: Finding) -> int | None:
    details = finding.details or {}
    if details.get("commit_log_offset") is not None:
        return details["commit_log_offset"]
    if finding.path is None:
        return None
    path = pathlib.Path(finding.path)
    if path.parent.name == COMMITLOG_DIR and is_segment_name(path.name):
        return int(path.name) + (finding.offset or 0)
    return None


def store_root_of(path: str | os.PathLike) -> pathlib.Path | None:
    """The store a path belongs to: the store itself, its commitlog/ dir or a segment in it."""
    p = pathlib.Path(path)
    for candidate in (p, p.parent, p.parent.parent):
        if candidate.is_dir() and is_store_dir(candidate):
            return candidate
    return None


def live_store(path: str | os.PathLike) -> LiveStore | None:
    """The live view of the store ``path`` belongs to, or None when no process holds its lock."""
    root = store_root_of(path)
    if root is None:
        return None
    paths = StorePaths(root)
    if not paths.lock.exists():
        return None
    pid = is_locked(paths.lock)
    if pid is None:
        return None
    given = commit_log_paths_of(root)  # a commit log in several directories
    log = CommitLog.of_queue(list_commit_log(given, root)) if given is not None else \
        CommitLog(paths.commitlog) if paths.commitlog.is_dir() else None
    end = last_file_end(log.segments, log.mapped_file_size).end if log and log.segments else 0
    return LiveStore(root, pid, end)
