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

import numpy as np

from rmqtool import findings as ids
from rmqtool.findings import Finding, finding
from rmqtool.formats.qmq import actionlog as actionlog_format
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.formats.qmq.pulllog import PULL_LOG_SIZE
from rmqtool.recovery.qmq.next_start import as_the_start_takes, next_start_findings, ranges_text
from rmqtool.recovery.qmq.start import simulate_start
from rmqtool.store.qmq import actionlog, checkpoints, consumerlog, messagelog, tablets
from rmqtool.store.qmq.record_kernel import LogColumns, LogColumnsBuilder, SubjectTable, members, sorted_unique
from rmqtool.store.qmq.segments import LogDirectory, list_log, misaligned


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
    for seg in misaligned(log):
        yield finding(ids.LOG_SEGMENT_NAME_MISALIGNED, seg.path, None,
                      f"{seg.path.name} is not a multiple of the log's segment size ({seg.size}): QMQ never names a "
                      f"segment so, and reads its bytes at offset % {seg.size}; what rmqtool says of the offsets "
                      f"in it is by its name")
    for seg in log.segments:
        if seg.file_size < seg.size:
            yield finding(ids.LOG_SEGMENT_SHORT, seg.path, seg.file_size,
                          f"{seg.file_size} bytes of {seg.size}: QMQ maps it at full size, the rest reads as zeros")


_INT64_MAX = np.iinfo(np.int64).max


def _subject_order(subject_id: np.ndarray, subject_count: int) -> np.ndarray:
    """The rows grouped by subject id, each group in row order (a stable sort)."""
    ids = subject_id
    if subject_count <= np.iinfo(np.int16).max:  # numpy's stable sort of 16-bit keys is a radix sort
        ids = ids.astype(np.int16)
    order = np.argsort(ids, kind="stable")
    return order.astype(np.int32) if len(order) <= np.iinfo(np.int32).max else order  # held a while: half the bytes


_GAP_BLOCK = 1 << 18  # sorted rows compared at once: the temporaries stay a few MB


def _sequence_gaps(records: LogColumns, order: np.ndarray) -> dict[int, tuple[int, int, int, int]]:
    """Per subject id, in the order their first break is met: (breaks, the first's sequence
    before, after, and the offset of the record after). ``order``: ``_subject_order``'s."""
    found: dict[int, list] = {}
    for lo in range(0, len(order) - 1, _GAP_BLOCK):
        rows = order[lo:lo + _GAP_BLOCK + 1]  # each block's last row is the next one's first
        sid, seq = records.subject_id[rows], records.sequence[rows]
        same = sid[1:] == sid[:-1]
        before, after = seq[:-1], seq[1:]
        breaks = same & ~((before != _INT64_MAX) & (after == before + 1))
        at = np.flatnonzero(breaks)  # the break between sorted rows at and at + 1
        for k, row in zip(at.tolist(), rows[at + 1].tolist()):
            s = int(sid[k])
            if s in found:
                found[s][0] += 1
                if row < found[s][4]:
                    found[s][1:] = [int(before[k]), int(after[k]), int(records.offset[row]), row]
            else:
                found[s] = [1, int(before[k]), int(after[k]), int(records.offset[row]), row]
    return {s: tuple(v[:4]) for s, v in sorted(found.items(), key=lambda kv: kv[1][4])}


def _by_offset(records: LogColumns) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The records as a map from offset (the last record read at an offset wins): sorted
    offsets, the record row of each, and the order the offsets were first met. The rows and
    the order are None when they are every row in order (offsets rising, as a log is read)."""
    if len(records) < 2 or bool((records.offset[1:] > records.offset[:-1]).all()):
        return records.offset, None, None
    order = np.argsort(records.offset, kind="stable")
    offsets = records.offset[order]
    last = np.r_[offsets[1:] != offsets[:-1], True]
    first = np.r_[True, offsets[1:] != offsets[:-1]]
    return offsets[last], order[last], np.argsort(order[first], kind="stable")


def _groups(order: np.ndarray, keys: np.ndarray, count: int) -> dict[int, np.ndarray]:
    """``order`` (rows grouped by key, ``_subject_order``'s) cut into each key's rows."""
    bounds = np.cumsum(np.bincount(keys, minlength=count)).tolist() if len(keys) else [0] * count
    return {k: order[lo:hi] for k, (lo, hi) in enumerate(zip([0, *bounds[:-1]], bounds)) if hi > lo}


def _find(offsets: np.ndarray, mine: np.ndarray, mine_offsets: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Where each wanted offset would go in ``offsets`` (sorted, unique; the index clipped to the
    last), as ``np.searchsorted``. A consumer log's units mostly point at its subject's records
    in turn: ``mine`` (their indices, rising; ``mine_offsets`` their offsets) answers a chunk at
    once when the chunk's offsets are a run of them."""
    n = len(wanted)
    if n and len(mine):
        k = int(np.searchsorted(mine_offsets, wanted[0]))
        if k + n <= len(mine) and np.array_equal(mine_offsets[k:k + n], wanted):
            return mine[k:k + n]
    return np.minimum(np.searchsorted(offsets, wanted), len(offsets) - 1)


def _each_reached(reached: list[np.ndarray], mine: np.ndarray) -> bool:
    """Whether the units reached each of the subject's records, in turn: then every record's
    sequence is one a unit points at, and none is missing (else each is looked up)."""
    return bool(len(mine)) and sum(map(len, reached)) == len(mine) and np.array_equal(np.concatenate(reached), mine)


@dataclasses.dataclass
class QmqChecks:
    root: pathlib.Path
    records: LogColumns | None = None  # the message log's records, for the checks and the simulation
    written_end: int = 0
    actions: list = dataclasses.field(default_factory=list)  # the action log's clean actions

    units: dict = dataclasses.field(default_factory=dict)  # subject -> (directory, unit bytes, unit columns)
    _order: np.ndarray | None = None  # the records grouped by subject (_subject_order), until the consumer logs use it

    def read_consumer_logs(self) -> np.ndarray:
        """Every subject's units, read once; the message log offsets they point at (sorted,
        unique): where records should start, for the message-log kernel to prove."""
        pointed = []
        for subject in consumerlog.loaded_subjects(self.root):
            directory, unit = consumerlog.open_consumer_log(self.root, subject)
            # kept until the units are checked: sizes in the files' own widths (int32, int16), not int64
            columns = [dataclasses.replace(u, wrote_bytes=u.wrote_bytes.astype(np.int32),
                                           header_size=u.header_size.astype(np.int16))
                       for u in consumerlog.unit_columns(directory, unit)] if unit else []
            self.units[subject] = directory, unit, columns
            pointed.extend(u.wrote_offset[u.kind == consumerlog.MESSAGE] for u in columns)
        return sorted_unique(np.concatenate(pointed)) if pointed else np.zeros(0, np.int64)

    def message_log(self) -> Iterator[Finding]:
        log = list_log(self.root / "messagelog", PER_SEGMENT_FILE_SIZE)
        yield from _listing(log)
        hints = self.read_consumer_logs()
        builder = LogColumnsBuilder(SubjectTable(), expect=len(hints))  # a record a unit, mostly
        for data, piece in messagelog.log_pieces(log.segments, builder, hints):
            yield from messagelog.piece_findings(data, piece, builder.subjects)
        del hints  # the records are proven: the offsets are not needed
        self.records = records = builder.build()
        self.written_end = records.written_end
        self._order = _subject_order(records.subject_id, len(records.subjects.names))
        for sid, (count, first_before, first_after, at) in _sequence_gaps(records, self._order).items():
            subject = records.subjects.names[sid]
            yield finding(ids.MESSAGE_SEQUENCE_GAP, self.root / "messagelog", None,
                          f"{subject}: {count} break(s) in its sequences, the first {first_before} then "
                          f"{first_after} at message log offset {at}", subject=subject)

    def consumer_logs(self, loaded_offset: int | None) -> Iterator[Finding]:
        records, count = self.records, len(self.records.subjects.names)
        offsets, rows, first_met = _by_offset(records)
        if rows is None:  # each offset's record is its row
            record_sid, record_seq = records.subject_id, records.sequence
            order = self._order if self._order is not None else _subject_order(record_sid, count)
        else:
            record_sid, record_seq = records.subject_id[rows], records.sequence[rows]
            order = _subject_order(record_sid, count)
        self._order = None
        by_subject = _groups(order, record_sid, count)  # subject id -> its indices into offsets, rising
        del order
        missing = np.ones(len(offsets), bool)
        for subject, (directory, unit, columns) in self.units.items():
            yield from _listing(directory)
            sid = records.subjects.get(subject)
            mine = by_subject.get(sid, np.zeros(0, np.int64))
            mine_offsets = offsets[mine]
            past, wrong, invalid = [], [], []  # (path, positions, sequences, offsets, sizes) of each chunk
            seen, reached = [], []  # sequences whose unit points at their record; those records' indices
            for u in columns:
                invalid.append((u, u.kind == consumerlog.INVALID))
                message = u.kind == consumerlog.MESSAGE
                is_past = message & (u.wrote_offset >= self.written_end)
                match = np.zeros(len(u), bool)
                pointing = np.flatnonzero(message & ~is_past)  # the units whose record is looked up
                if len(offsets) and sid is not None and len(pointing):
                    wanted = u.wrote_offset[pointing]
                    at = _find(offsets, mine, mine_offsets, wanted)
                    row = at if rows is None else rows[at]
                    hit = (offsets[at] == wanted) & (records.subject_id[row] == sid) & \
                        (records.sequence[row] == u.sequence[pointing]) & \
                        (records.size[row] == u.wrote_bytes[pointing]) & \
                        (records.header_size[row] == u.header_size[pointing])
                    match[pointing] = hit
                    reached.append(at[hit])
                past.append((u, is_past))
                wrong.append((u, message & ~is_past & ~match))
                if sid is not None:
                    seen.append(u.sequence[message & ~is_past & match])
            if seen:  # records no unit reaches, that the next start's replay does not dispatch: below
                if _each_reached(reached, mine):
                    missing[mine] = False
                else:
                    is_mine = record_sid == sid
                    missing[is_mine] = ~members(record_seq[is_mine], sorted_unique(np.concatenate(seen)))
            past, wrong, invalid = (_picked(chunks) for chunks in (past, wrong, invalid))
            if past:
                path, position, _, _, _ = past[0]
                yield finding(ids.CONSUMER_LOG_UNIT_PAST_END, path, position,
                              f"{subject}: sequences {_ranges_text([p[2] for p in past])} point past the "
                              f"message log's end ({self.written_end}): no record behind them (those the next "
                              f"start's consumer log keeps are served as SUCCESS with no message: "
                              f"messagesServedEmpty names them)",
                              subject=subject, sequences=len(past))
            if wrong:
                path, position, sequence, wrote_offset, wrote_bytes = wrong[0]
                yield finding(ids.CONSUMER_LOG_UNIT_MISMATCH, path, position,
                              f"{subject}: sequences {_ranges_text([w[2] for w in wrong])} do not point at "
                              f"their records (the first: offset {wrote_offset}, {wrote_bytes} bytes)",
                              subject=subject, sequence=sequence, sequences=len(wrong))
            if invalid:
                path, position, sequence, _, _ = invalid[0]
                yield finding(ids.CONSUMER_LOG_UNIT_INVALID, path, position,
                              f"{subject}: units {_ranges_text([w[2] for w in invalid])} are of no known kind",
                              subject=subject, sequence=sequence, sequences=len(invalid))
        self.units = {}  # read by nothing after this
        # records no unit reaches, that the next start's replay (from the loaded checkpoint) does not dispatch;
        # with no checkpoint offset (none loaded, or 0) it replays the whole log
        missing &= offsets < (loaded_offset or 0)
        met = np.flatnonzero(missing) if first_met is None else first_met[missing[first_met]]  # as first met
        by_subject: dict[int, list[int]] = {}
        for sid, sequence in zip(record_sid[met].tolist(), record_seq[met].tolist()):
            by_subject.setdefault(sid, []).append(sequence)
        for sid, sequences in by_subject.items():
            subject = records.subjects.names[sid]
            yield finding(ids.MESSAGE_NOT_IN_CONSUMER_LOG, consumerlog.subject_directory(self.root, subject), None,
                          f"{subject}: sequences {_ranges_text(sequences)} are in the message log but no consumer-log "
                          f"unit points at them, and the next start's replay begins after them", subject=subject,
                          sequences=len(sequences))

    def checkpoints(self) -> tuple[list[Finding], int | None]:
        out = []
        where = self.root / "checkpoint"
        if os.path.lexists(where) and not where.is_dir():  # File.exists() holds: no mkdirs; listFiles gives null
            out.append(finding(ids.CHECKPOINT_DIRECTORY_INVALID, where, None,
                               "not a directory: QMQ's start loads no snapshot from it, so it replays the message "
                               "and action logs from their start, and saving a snapshot there fails"))
        message_cps = checkpoints.message_checkpoints(self.root)
        for snaps in (message_cps, checkpoints.action_checkpoints(self.root)):
            for s in snaps.skipped:
                out.append(finding(ids.CHECKPOINT_UNREADABLE, s.path, None,
                                   f"the broker's load skips it ({s.error})"))
        loaded = message_cps.loaded
        if loaded is not None:
            listed = loaded.value.max_sequences
            for subject in consumerlog.loaded_subjects(self.root):
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
                    yield from actionlog.findings_of(item)
                else:
                    actions.append(item)
        for path in tablets.unparsable_tablet_names(self.root):
            yield finding(ids.LOG_SEGMENT_NAME_INVALID, path, None,
                          f"{path.name!r} is not a number: SortedPullLogTable's load fails (Long.parseLong) and the "
                          f"broker does not start")
        yield from tablets.tablet_findings(self.root)
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
    log_findings = list(checks.message_log())
    start = simulate_start(checks.root, records=checks.records)
    yield from (as_the_start_takes(f, start.refusal) for f in log_findings)
    checkpoint_findings, loaded_offset = checks.checkpoints()
    yield from checks.consumer_logs(loaded_offset)
    yield from checkpoint_findings
    yield from checks.action_log()
    yield from checks.pull_logs()
    yield from next_start_findings(start, checks.actions)


def _picked(chunks) -> list[tuple[str, int, int, int, int]]:
    """(path, position, sequence, wrote offset, wrote bytes) of the units each chunk's mask picks, in order."""
    out = []
    for u, mask in chunks:
        picked = np.flatnonzero(mask)
        if len(picked):
            out.extend(zip([u.path] * len(picked), u.position[picked].tolist(), u.sequence[picked].tolist(),
                           u.wrote_offset[picked].tolist(), u.wrote_bytes[picked].tolist()))
    return out
