"""What the broker's next start does to the store, for verify: recovery/'s simulation run
once (``outcome.simulate``, the code ``rmqtool recover`` plans with), and what verify says
from it:

* the recovered end (where the next start ends the log), next to the written end;
* ``recoveryCutsCommitLog`` when that start drops messages: how many, the bytes from the
  cut to the written end, and the finding at the place the recovery walk stopped;
* ``storeNotLoadable`` when the broker would not load the store or never finish starting;
* ``messageUnreachable`` for the messages of a commit log file gone from the middle (the
  broker skips them; their units remain); those whose units are lost are found by the
  consume queue check, against the queues as this start leaves them (:meth:`served`);
* the consequence of a damaged record the walk never reads (before the recovered end):
  ``none``, not its ID's default ``dropsMessages``.

The simulation reads what the broker's start reads (from the checkpoint's file after a
crash, the last three commit log files after a clean shutdown, and the consume queues'
last files), about 26 us a record it dispatches (after a crash, every one) and 1 to 2 us a
record it only checks (the clean-record kernel's windows); a clean store gives no reason to run it
(:func:`worth_simulating_now`, :func:`changes_the_start`), so verify's speed there stays.
"""
from __future__ import annotations

import dataclasses
import pathlib
import shlex
from typing import TYPE_CHECKING

import numpy as np

from rmqtool.findings import (MESSAGE_UNREACHABLE, RECOVERY_CUTS_COMMIT_LOG, SEGMENT_EMPTY, SEGMENT_GAP,
                              SEGMENT_NAME_INVALID, SEGMENT_OVERLAP, SEGMENT_SIZE_ODD, SEGMENT_UNREADABLE,
                              STORE_NOT_LOADABLE, Consequence, Finding, finding)
from rmqtool.store.consumequeue import queue_sizes_disagree
from rmqtool.store.view import StoreView

if TYPE_CHECKING:  # recovery/'s models load when a start is simulated, not with every verify
    from rmqtool.recovery.outcome import Outcome
    from rmqtool.store.consumequeue import ConsumeQueues


_LOAD = (SEGMENT_GAP, SEGMENT_SIZE_ODD, SEGMENT_OVERLAP, SEGMENT_NAME_INVALID, SEGMENT_EMPTY, SEGMENT_UNREADABLE)
_CHANGES = (Consequence.DROPS_MESSAGES, Consequence.WONT_START)


def simulate_next_start(view: StoreView) -> Outcome:
    """The simulation a view verify opens is handed (``StoreView.outcome`` runs it once)."""
    from rmqtool.recovery.outcome import Settings, simulate
    return simulate(view, Settings())


def worth_simulating_now(view: StoreView, segment_findings: list, tail_checks: list) -> bool:
    """Whether the next start may do more than keep every record, from what is known before
    the commit log's bands are checked: the abort file (abnormal recovery re-checks from the
    checkpoint's file and dispatches again), a segment finding (what the load refuses or
    skips), damage in the last ranges, a last file ending with its blank record and no file
    after it (the end stays at the blank), a directory where the lock or the checkpoint
    goes. Otherwise the simulation waits for a reason (damage met on the way, messages past
    a queue's end): a clean store's normal recovery walks its last three files, and on a
    store of 1 GiB files that is most of the store."""
    if view.has_abort or any(f.id in _LOAD for f in segment_findings):
        return True
    if view.paths.lock.is_dir() or view.paths.checkpoint.is_dir():  # the broker cannot open either: no start
        return True
    if queue_sizes_disagree(view.paths):  # one setting for every queue: the load refuses some of them
        return True
    for c in tail_checks:
        if any(f.consequence in _CHANGES for f in c.findings):
            return True
        if c.full and not any(seg.base_offset > c.base_offset for seg in view.segments):
            return True
    return False


def changes_the_start(f: Finding) -> bool:
    """A finding whose default consequence says the next start does more than keep every record."""
    return f.consequence in _CHANGES


@dataclasses.dataclass
class NextStart:
    """The simulated next start, and what verify matched against it."""
    view: StoreView
    outcome: Outcome | None
    error: str | None = None  # why the start could not be simulated
    cause: str | None = None  # the finding reported where the recovery walk stopped

    @classmethod
    def of(cls, view: StoreView) -> "NextStart":
        """The view's simulated start (its ``outcome``, run once; the view hands in the simulation)."""
        try:
            return cls(view, view.outcome)
        except Exception as exc:  # noqa: BLE001 - verify's own checks go on; the run says why this one did not
            return cls(view, None, f"{type(exc).__name__}: {exc}")

    @property
    def root(self) -> pathlib.Path:
        return self.view.root

    def served(self, topic: str, queue_id: int, offsets) -> "np.ndarray | None":
        """Whether the queue serves each message after the start (None: not known)."""
        return self.outcome.served(topic, queue_id, offsets) if self.loadable else None

    def queues(self) -> "ConsumeQueues | None":
        """The consume queues as the start leaves them, what its dispatch puts back included
        (recovery/started_queues.py: the ranges recover plans with); None when not known."""
        if not self.loadable:
            return None
        from rmqtool.recovery.started_queues import started_queues
        return started_queues(self.view, self.outcome)

    def redispatch_command(self, topic: str, queue_id: int) -> str:
        """The command line that rebuilds one queue from the commit log."""
        return (f"rmqtool redispatch {shlex.quote(str(self.root))} --cq --topic {shlex.quote(topic)} "
                f"--queue {queue_id} --apply")

    @property
    def loadable(self) -> bool:
        return self.outcome is not None and self.outcome.loadable

    @property
    def recovered_end(self) -> int | None:
        return self.outcome.recovered_end if self.loadable else None

    @property
    def cut_at(self) -> tuple[str, int] | None:
        """(file, position) where the recovery walk stopped, when records follow it."""
        o = self.outcome
        if not self.loadable or o.walk is None or o.end_file is None:
            return None
        return o.end_file, o.walk.position

    @property
    def dropped(self) -> list[dict]:
        """The messages the log cut drops (the plan's lost messages of that reason)."""
        from rmqtool.recovery.lost import LOG_CUT
        return [m for m in self.outcome.lost_messages if m["reason"] == LOG_CUT] if self.loadable else []

    def note(self, f: Finding) -> Finding:
        """A commit log finding seen on the way: remember the one at the cut; a damaged record
        before the recovered end is never read by the recovery walk, so the start keeps it."""
        cut = self.cut_at
        if cut is not None and (f.path, f.offset) == cut and self.cause is None:
            self.cause = f.id
            return f
        if f.consequence is Consequence.DROPS_MESSAGES and self.loadable and f.path and f.offset is not None:
            offset = (f.details or {}).get("commit_log_offset")
            if offset is None:
                try:
                    offset = int(pathlib.Path(f.path).name) + f.offset
                except ValueError:
                    return f
            if offset < self.outcome.recovered_end:
                return dataclasses.replace(f, consequence=Consequence.NONE)
        return f

    def findings(self) -> list[Finding]:
        """What the next start does, as findings (after the commit log's own)."""
        o = self.outcome
        if o is None:
            return []
        if not o.loadable:
            return [finding(STORE_NOT_LOADABLE, o.refused_path or o.start_file or None, None, o.reason,
                            advice=o.advice)]
        return self._missing_file() + self._cut()

    def _missing_file(self) -> list[Finding]:
        """The messages of commit log files gone from the middle: the broker loads the store and
        skips them, while their queues' units still name them."""
        from rmqtool.recovery.lost import FILE_MISSING
        missing = [m for m in self.outcome.lost_messages if m["reason"] == FILE_MISSING]
        if not missing:
            return []
        segments = self.view.segments
        found = []
        for a, b in zip(segments, segments[1:]):
            lo, hi = a.base_offset + a.size, b.base_offset
            inside = [m for m in missing if lo <= m["commit_log_offset"] < hi]
            if inside:
                found.append(finding(MESSAGE_UNREACHABLE, str(b.path), 0,
                                     f"{len(inside)} messages lie in commit log offsets [{lo}, {hi}), a file gone "
                                     f"before this one: the broker loads the store and skips them, so no consumer "
                                     f"gets them though their queue units remain (restore the file; they are gone "
                                     f"otherwise)", commit_log_offset=lo, messages=len(inside)))
        return found

    def _cut(self) -> list[Finding]:
        o = self.outcome
        dropped = self.dropped
        if not dropped:  # bytes only (a blank record the end stays at, a torn tail): other findings say so
            return []
        path, position = self.cut_at or (None, None)
        why = o.walk.reason if o.walk is not None else "?"
        cause = f"{self.cause} here" if self.cause else f"the walk stopped: {why}"
        return [finding(RECOVERY_CUTS_COMMIT_LOG, path, position,
                        f"the next broker start ends the commit log at {o.recovered_end} ({cause}); it drops "
                        f"{len(dropped)} messages and the {o.written_end - o.recovered_end} bytes up to the written "
                        f"end {o.written_end}, across every file after it (rmqtool recover lists them)",
                        commit_log_offset=o.recovered_end, messages=len(dropped),
                        bytes_dropped=o.written_end - o.recovered_end, caused_by=self.cause, stopped_by=why,
                        written_end=o.written_end, recovered_end=o.recovered_end)]
