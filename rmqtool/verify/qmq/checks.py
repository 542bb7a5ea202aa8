"""The checks of a QMQ store, each as registered findings at the file and offset it concerns.

In the order a reader meets them: the log directories' names and sizes, the message log's
records (and each subject's sequences), every consumer-log unit against the record it
points at, the checkpoints against the data, the action log and the pull-log tablets (with
what the action replay skips). Nothing here writes; a store is read once.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Iterator

from rmqtool import findings as ids
from rmqtool.findings import Finding, finding
from rmqtool.formats.qmq import actionlog as actionlog_format
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.formats.qmq.pulllog import PULL_LOG_SIZE
from rmqtool.recovery.qmq.start import simulate_start
from rmqtool.store.qmq import actionlog, checkpoints, consumerlog, messagelog, tablets
from rmqtool.store.qmq.segments import LogDirectory, list_log
from rmqtool.verify.qmq.next_start import next_start_findings, ranges_text


@dataclasses.dataclass(frozen=True, slots=True)
class RecordAt:
    subject: str
    sequence: int
    size: int
    header_size: int


def _ranges_text(numbers: list[int]) -> str:
    out: list[list[int]] = []
    for n in sorted(numbers):
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return ranges_text(out)


def _listing(log: LogDirectory) -> Iterator[Finding]:
    for path in log.unparsable:
        yield finding(ids.LOG_SEGMENT_NAME_INVALID, path, None,
                      f"{path.name!r} is not a number: LogManager.loadLogs fails (Long.parseLong) and the broker "
                      f"does not start")
    for seg in log.segments:
        if seg.file_size < seg.size:
            yield finding(ids.LOG_SEGMENT_SHORT, seg.path, seg.file_size,
                          f"{seg.file_size} bytes of {seg.size}: QMQ maps it at full size, the rest reads as zeros")


@dataclasses.dataclass
class QmqChecks:
    root: pathlib.Path
    records: dict[int, RecordAt] = dataclasses.field(default_factory=dict)  # message log offset -> record
    written_end: int = 0
    actions: list = dataclasses.field(default_factory=list)  # the action log's clean actions
    scanned: list = dataclasses.field(default_factory=list)  # the message log's records, for the simulation

    def message_log(self) -> Iterator[Finding]:
        log = list_log(self.root / "messagelog", PER_SEGMENT_FILE_SIZE)
        yield from _listing(log)
        last_sequence: dict[str, int] = {}
        gaps: dict[str, list[tuple[int, int, int]]] = {}
        for seg in log.segments:
            for item in messagelog.scan_segment(seg):
                yield from messagelog.findings_of(item)
                if isinstance(item, messagelog.Damage):
                    self.written_end = max(self.written_end, item.offset + item.size)
                    continue
                if not isinstance(item, messagelog.MessageRecord):
                    continue
                self.written_end = item.offset + item.size
                self.scanned.append(item)
                self.records[item.offset] = RecordAt(item.subject, item.sequence, item.size, item.header_size)
                before = last_sequence.get(item.subject)
                if before is not None and item.sequence != before + 1:
                    gaps.setdefault(item.subject, []).append((before, item.sequence, item.offset))
                last_sequence[item.subject] = item.sequence
        for subject, found in gaps.items():
            first_before, first_after, at = found[0]
            yield finding(ids.MESSAGE_SEQUENCE_GAP, self.root / "messagelog", None,
                          f"{subject}: {len(found)} break(s) in its sequences, the first {first_before} then "
                          f"{first_after} at message log offset {at}", subject=subject)

    def consumer_logs(self, loaded_offset: int | None) -> Iterator[Finding]:
        units_of: dict[str, set[int]] = {}
        for subject in consumerlog.subjects(self.root):
            directory, unit = consumerlog.open_consumer_log(self.root, subject)
            yield from _listing(directory)
            past, wrong, invalid = [], [], []
            seen = units_of.setdefault(subject, set())
            first_path = None
            for u in consumerlog.read_units(directory, unit, subject) if unit else ():
                first_path = first_path or u.path
                if u.kind == "invalid":
                    invalid.append(u)
                elif u.kind == "message":
                    rec = self.records.get(u.wrote_offset)
                    if u.wrote_offset >= self.written_end:
                        past.append(u)
                    elif rec is None or (rec.subject, rec.sequence, rec.size, rec.header_size) != \
                            (subject, u.sequence, u.wrote_bytes, u.header_size):
                        wrong.append(u)
                    else:
                        seen.add(u.sequence)
            if past:
                yield finding(ids.CONSUMER_LOG_UNIT_PAST_END, past[0].path, past[0].position,
                              f"{subject}: sequences {_ranges_text([u.sequence for u in past])} point past the "
                              f"message log's end ({self.written_end}): served as SUCCESS with no message",
                              subject=subject, sequences=len(past))
            for u in wrong[:1]:
                yield finding(ids.CONSUMER_LOG_UNIT_MISMATCH, u.path, u.position,
                              f"{subject}: sequences {_ranges_text([w.sequence for w in wrong])} do not point at "
                              f"their records (the first: offset {u.wrote_offset}, {u.wrote_bytes} bytes)",
                              subject=subject, sequence=u.sequence, sequences=len(wrong))
            for u in invalid[:1]:
                yield finding(ids.CONSUMER_LOG_UNIT_INVALID, u.path, u.position,
                              f"{subject}: units {_ranges_text([w.sequence for w in invalid])} are of no known kind",
                              subject=subject, sequence=u.sequence, sequences=len(invalid))
        # records no unit reaches, that the next start's replay (from the loaded checkpoint) does not dispatch
        missing: dict[str, list[int]] = {}
        for offset, rec in self.records.items():
            if rec.sequence in units_of.get(rec.subject, ()):
                continue
            if loaded_offset is not None and offset >= loaded_offset:
                continue  # replayed at the next start
            missing.setdefault(rec.subject, []).append(rec.sequence)
        for subject, sequences in missing.items():
            yield finding(ids.MESSAGE_NOT_IN_CONSUMER_LOG, self.root / "consumerlog" / subject, None,
                          f"{subject}: sequences {_ranges_text(sequences)} are in the message log but no consumer-log "
                          f"unit points at them, and the next start's replay begins after them", subject=subject,
                          sequences=len(sequences))

    def checkpoints(self) -> tuple[list[Finding], int | None]:
        out = []
        message_cps = checkpoints.message_checkpoints(self.root)
        for snaps in (message_cps, checkpoints.action_checkpoints(self.root)):
            for s in snaps.skipped:
                out.append(finding(ids.CHECKPOINT_UNREADABLE, s.path, None,
                                   f"the broker's load skips it ({s.error})"))
        loaded = message_cps.loaded
        if loaded is not None:
            listed = loaded.value.max_sequences
            for subject in consumerlog.subjects(self.root):
                directory, unit = consumerlog.open_consumer_log(self.root, subject)
                has_units = unit is not None and next(consumerlog.read_units(directory, unit, subject), None)
                if has_units and subject not in listed:
                    out.append(finding(ids.CHECKPOINT_SUBJECT_MISSING, loaded.path, None,
                                       f"{subject} has a consumer log but the loaded message checkpoint does not "
                                       f"list it: the load truncates its consumer log to nothing", subject=subject))
        return out, loaded.value.offset if loaded else None

    def action_log(self) -> Iterator[Finding]:
        log = list_log(self.root / "actionlog", actionlog_format.PER_SEGMENT_FILE_SIZE)
        yield from _listing(log)
        actions = []
        for seg in log.segments:
            for item in actionlog.scan_segment(seg):
                if isinstance(item, actionlog.ActionDamage):
                    yield finding(ids.ACTION_RECORD_INVALID, item.path, item.position,
                                  f"{item.size} bytes at action log offset {item.offset} are not an action: "
                                  f"{item.reason}", action_log_offset=item.offset)
                else:
                    actions.append(item)
        for t in tablets.tablets(self.root):
            if not t.valid:
                yield finding(ids.PULL_LOG_TABLET_INVALID, t.path, None,
                              f"tablet {t.tablet_id}: {t.error}: the load stops here and destroys it and later ones")
                break
        self.actions = actions

    def pull_logs(self) -> Iterator[Finding]:
        base = self.root / "pulllog"
        if base.is_dir():
            for consumer_dir in sorted(p for p in base.iterdir() if p.is_dir()):
                for gs_dir in sorted(p for p in consumer_dir.iterdir() if p.is_dir()):
                    yield from _listing(list_log(gs_dir, PULL_LOG_SIZE))


def check_store(root: str | os.PathLike) -> Iterator[Finding]:
    """Every finding of a QMQ store, area by area, then what its next start does about them."""
    checks = QmqChecks(pathlib.Path(root))
    yield from checks.message_log()
    checkpoint_findings, loaded_offset = checks.checkpoints()
    yield from checks.consumer_logs(loaded_offset)
    yield from checkpoint_findings
    yield from checks.action_log()
    yield from checks.pull_logs()
    yield from next_start_findings(simulate_start(checks.root, records=checks.scanned), checks.actions)
