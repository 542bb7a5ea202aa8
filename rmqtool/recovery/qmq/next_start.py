"""What QMQ's next start does to a store, as findings: verify's consequences, and what info says.

From ``recovery/qmq/start.py``'s simulation, run once: a start that is refused or never
finishes, the records a cut of the message log drops, the sequences served as SUCCESS with
no message or not served at all, and the actions the replay skips.
"""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Iterable, Iterator

from rmqtool import findings as ids
from rmqtool.findings import Consequence, Finding, finding
from rmqtool.recovery.qmq.start import StartOutcome, ranges_minus
from rmqtool.store.qmq.consumerlog import subject_directory


def ranges_text(ranges: Iterable) -> str:
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def _count(ranges: Iterable) -> int:
    return sum(b - a + 1 for a, b in ranges)


def _why_empty(s) -> str:
    """Which of the empty sequences the replay filled (``fillPreBlank``: their records were
    not replayed), and which have a unit of their own pointing past the kept message log (its
    record cut, or never written there). QMQ's fill units point past it too (offset 0,
    2147483647 bytes)."""
    why = [f"{what} {ranges_text(ranges)}" for what, ranges in (
        ("filled by the replay, their records not replayed:", s.fill_units),
        ("units pointing past the kept message log:",
         ranges_minus(s.units_pointing_past_log_end, s.fill_units, s.fills_without_record))) if ranges]
    return f" ({'; '.join(why)})" if why else ""


def served_empty(s) -> tuple:
    """The sequences a subject serves as SUCCESS with no message that had a message to serve: not
    those of fill units in the files where no record of the files is (a message lost before;
    recover --apply writes them so that the subject's next sequence stays where QMQ's start and
    its groups have it)."""
    return ranges_minus(s.served_success_without_message, s.fills_without_record)


def refusal_finding(root, refusal) -> Finding:
    """``storeNotLoadable``: the start refused (its constructor throws) or never finishing (a replay hangs)."""
    what = "refuses to start" if refusal.kind == "refused" else "never finishes starting"
    return finding(ids.STORE_NOT_LOADABLE, refusal.file or root, refusal.offset, f"QMQ {what}: {refusal.text}")


def next_start_findings(outcome: StartOutcome, actions_in_files: list) -> Iterator[Finding]:
    root = pathlib.Path(outcome.store)
    if outcome.refusal is not None:
        r = outcome.refusal
        yield refusal_finding(root, r)
        if r.kind == "refused":
            return  # nothing after the load happens
    log = outcome.message_log
    if log is not None and log.cut_at is not None:
        subjects = sorted({r.subject for r in log.records_lost})
        yield finding(ids.RECOVERY_CUTS_MESSAGE_LOG, root / "messagelog", None,
                      f"the next start ends the message log at {log.cut_at}, before its written end "
                      f"{log.written_end}: " + (f"{len(log.records_lost)} record(s) of {', '.join(subjects)} are "
                                                f"dropped" if subjects else "no whole record lies past it, "
                                                f"{log.written_end - log.cut_at} bytes are dropped"),
                      message_log_offset=log.cut_at, records=len(log.records_lost))
    for s in outcome.subjects:
        empty = served_empty(s)
        if empty:
            yield finding(ids.MESSAGES_SERVED_EMPTY, subject_directory(root, s.subject), None,
                          f"{s.subject}: sequences {ranges_text(empty)} are served as "
                          f"SUCCESS with no message after the next start{_why_empty(s)}", subject=s.subject,
                          sequences=_count(empty))
        if s.not_served_kept:  # those past the cut are the cut's (recoveryCutsMessageLog)
            yield finding(ids.MESSAGES_NOT_SERVED, subject_directory(root, s.subject), None,
                          f"{s.subject}: sequences {ranges_text(s.not_served_kept)} are in the message log but no "
                          f"sequence serves them after the next start", subject=s.subject,
                          sequences=_count(s.not_served_kept))
    actions = outcome.action_log
    if actions is not None and actions.replay_state:
        skipped = [a for a in actions_in_files if a.end_offset > actions.replay_state - 1]
        if skipped:
            yield finding(ids.ACTION_REPLAY_SKIPS_ACTIONS, root / "pulllog_smt", None,
                          f"the action replay starts at {actions.replay_state}, one byte past the last valid "
                          f"tablet's end: {len(skipped)} action(s) after it (from offset {skipped[0].offset}) are "
                          f"not replayed, and consumer progress falls back to the action checkpoint",
                          actions=len(skipped))


def as_the_start_takes(f: Finding, refusal) -> Finding:
    """A damaged record the start's load throws at does not cut the log: QMQ does not start."""
    if refusal is not None and refusal.kind == "refused" and (f.path, f.offset) == (refusal.file, refusal.offset):
        return dataclasses.replace(f, consequence=Consequence.WONT_START)
    return f
