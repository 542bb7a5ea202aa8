"""``rmqtool recover`` on a QMQ store: what QMQ's next start does (simulated, ``start.py``)
and what ``--apply`` changes so that the start loses nothing the files still hold.

QMQ's own start drops what a repair can keep, and serves what it cannot: it refuses a store
with a stray name in a log directory; it cuts the message log at the first bad record of
its last two segments; it cuts each consumer log to the message checkpoint's max sequence
(to nothing when a subject is missing from it) and leaves units pointing past the cut,
served as SUCCESS with no message; a deleted consumer log is refilled with fill units. The
plan, computed from the files alone:

1. move every stray name out of the log directories (into the backup; nothing is lost);
2. cut the message log where QMQ's recovery cuts it (zeros from there to the written end,
   the segments after it moved into the backup; the records dropped are listed: salvage
   them first), or where its validator would throw on a header past the written end;
3. rewrite each subject's consumer log so that every record the kept log holds has its
   unit, fill units stand only where no record is, and no unit points past the log; past its
   records, fill units up to where QMQ's own start and its groups' pulls have the subject's
   next sequence (:func:`_sequence_floors`: lower, new messages would take sequences a group
   has pulled past, and be skipped), within the units the log held; a record
   whose sequence lies further from its subject's others than the unreadable bytes of the log
   could hold records (its sequence field damaged: the payload CRC does not cover it) gets no
   unit, and is listed (salvage keeps it): QMQ's replay would reset the consumer log there;
   so does a record whose subject (damaged) names a directory QMQ cannot make (a NUL in it,
   a name too long: ``createAndValidateLogDir`` throws) or one outside consumerlog/ (a "..");
4. write a message checkpoint at the kept log's end that lists every subject, moving any
   checkpoint of a later version aside (the load takes the highest version).

A second plan on the repaired store finds nothing to do.

The plan reads the message log's records and each consumer log's units as columns (numpy
arrays), not an object a record: on a 1 GB log of a million records it holds about 130 MB
and takes 2 s, where it held 560 MB and took 11 s. A rewrite's units stay columns too
(:class:`UnitRows`), to the writer that packs them.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

import numpy as np

from rmqtool.formats.qmq import actionlog as actionlog_format
from rmqtool.formats.qmq import messagelog as messagelog_format
from rmqtool.formats.qmq.checkpoint import MESSAGE_CHECKPOINT_PREFIX, MessageCheckpoint
from rmqtool.formats.qmq.consumerlog import (CONSUMER_LOG_UNIT_BYTES, FILL_HEADER_SIZE, FILL_WROTE_BYTES,
                                             FILL_WROTE_OFFSET, SEGMENT_TOTAL_UNIT, is_fill_unit)
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE as MESSAGE_SEGMENT_SIZE
from rmqtool.formats.qmq.pulllog import PULL_LOG_SIZE
from rmqtool.recovery.lost import LOG_CUT, UNIT_LOST
from rmqtool.recovery.qmq.start import StartOutcome, shown_unit_bytes, simulate_start
from rmqtool.store.qmq import actionlog, checkpoints, consumerlog, messagelog, tablets
from rmqtool.store.qmq.record_kernel import LogColumns, LogColumnsBuilder, SubjectTable
from rmqtool.store.qmq.segments import LogDirectory, ZeroExtended, directory_refusal, list_log, misaligned


@dataclasses.dataclass(frozen=True)
class UnitSpec:
    """One consumer-log unit the apply writes (a fill unit where no record is)."""
    sequence: int
    wrote_offset: int
    wrote_bytes: int
    header_size: int
    timestamp: int


class UnitRows:
    """The units a rewrite writes, one a sequence from ``first_sequence`` on, as columns (a
    consumer log of millions of units is rewritten without an object a unit); iterated, they
    are :class:`UnitSpec`s."""

    __slots__ = ("first_sequence", "wrote_offset", "wrote_bytes", "header_size", "timestamp")
    __hash__ = None  # compared by value, as the plan's other fields are

    def __init__(self, first_sequence: int, wrote_offset: np.ndarray, wrote_bytes: np.ndarray,
                 header_size: np.ndarray, timestamp: np.ndarray):
        self.first_sequence = first_sequence
        self.wrote_offset, self.wrote_bytes = wrote_offset, wrote_bytes
        self.header_size, self.timestamp = header_size, timestamp

    @classmethod
    def none(cls, first_sequence: int) -> "UnitRows":
        empty = np.empty(0, np.int64)
        return cls(first_sequence, empty, empty, empty, empty)

    def __len__(self) -> int:
        return len(self.wrote_offset)

    def part(self, lo: int, hi: int) -> "UnitRows":
        """The units ``lo`` to ``hi`` (indices, not sequences) of these (views, not copies)."""
        lo, hi = max(lo, 0), max(hi, lo, 0)
        return UnitRows(self.first_sequence + lo, self.wrote_offset[lo:hi], self.wrote_bytes[lo:hi],
                        self.header_size[lo:hi], self.timestamp[lo:hi])

    def __iter__(self):
        columns = (self.wrote_offset.tolist(), self.wrote_bytes.tolist(), self.header_size.tolist(),
                   self.timestamp.tolist())
        for k, (offset, size, header, ts) in enumerate(zip(*columns)):
            yield UnitSpec(self.first_sequence + k, offset, size, header, ts)

    def __eq__(self, other) -> bool:
        if not isinstance(other, UnitRows):
            return NotImplemented
        return self.first_sequence == other.first_sequence and all(
            np.array_equal(getattr(self, c), getattr(other, c))
            for c in ("wrote_offset", "wrote_bytes", "header_size", "timestamp"))

    def fill_units(self) -> int:
        return int(np.count_nonzero(is_fill_unit(self.wrote_offset, self.wrote_bytes, self.header_size)))


@dataclasses.dataclass(frozen=True)
class ConsumerLogRewrite:
    subject: str
    directory: str
    unit_bytes: int
    first_sequence: int  # units before it are kept as they are
    units: UnitRows  # first_sequence onwards; nothing after the last
    reason: str


@dataclasses.dataclass(frozen=True)
class ZeroRange:
    path: str
    start: int  # positions in the file
    end: int
    reason: str


@dataclasses.dataclass(frozen=True)
class LostMessage:
    """A record the repaired store no longer serves (recover's ``lost_messages``, as a RocketMQ
    plan lists them): cut from the log, or kept with no consumer-log unit."""
    offset: int
    subject: str
    sequence: int
    timestamp: int
    readable: bool  # its payload matches its CRC: salvage keeps it
    reason: str  # recovery/lost.py: LOG_CUT or UNIT_LOST

    def to_json(self) -> dict:
        return {"message_log_offset": self.offset, "subject": self.subject, "sequence": self.sequence,
                "store_timestamp": self.timestamp, "readable": self.readable, "reason": self.reason}


@dataclasses.dataclass(frozen=True)
class QmqPlan:
    store: str
    broker: StartOutcome  # what QMQ's next start does to the store as it is
    moves: tuple[tuple[str, str], ...]  # (file, why) moved into the backup
    zero: tuple[ZeroRange, ...]
    consumer_logs: tuple[ConsumerLogRewrite, ...]
    checkpoint: MessageCheckpoint | None  # the message checkpoint the apply writes
    records_dropped: tuple[tuple[int, str, int], ...]  # (offset, subject, sequence) the cut drops
    # (offset, subject, sequence, why) kept in the log with no unit: their sequences are damaged
    # (_hanging_together), or their subjects name no directory QMQ can make
    records_unserved: tuple[tuple[int, str, int, str], ...] = ()
    lost_messages: tuple[LostMessage, ...] = ()  # both of the above, in log order, as a RocketMQ plan lists them
    refusal: str | None = None  # why rmqtool does not carry the plan out (a segment it cannot place)
    # the consumer log unit the rewrites are written in (consumerlog.v2.enable), and what says so:
    # "files", what the operator gave (a broker config), or "default" (nothing does)
    unit_bytes: int = CONSUMER_LOG_UNIT_BYTES
    unit_bytes_from: str = "files"

    @property
    def unit_assumed(self) -> bool:
        """Consumer log units to write in a format nothing showed: QMQ with the other setting
        throws on every unit ("illegal consumer log magic code")."""
        return bool(self.consumer_logs) and self.unit_bytes_from == "default"

    @property
    def changes_anything(self) -> bool:
        return bool(self.moves or self.zero or self.consumer_logs or self.checkpoint)

    def checkpoint_path(self) -> pathlib.Path | None:
        if self.checkpoint is None:
            return None
        return pathlib.Path(self.store) / "checkpoint" / f"{MESSAGE_CHECKPOINT_PREFIX}{self.checkpoint.offset:020d}"

    def to_json(self) -> dict:
        # the keys a RocketMQ plan has mean the same here (store_path, loadable, reason, advice,
        # lost_messages, an action's kind); QMQ's own beside them; the old names one release more
        return {
            "family": "qmq",
            "store_path": self.store,
            "store": self.store,  # store_path's old name (docs/vocabulary.md: renamed fields)
            # QMQ's own start on the store as it is, as a RocketMQ plan says its broker's
            "loadable": self.broker.loadable,
            "reason": self.broker.reason,
            "advice": self.broker.advice,
            "broker_start": self.broker.to_json(),
            "actions": [_action(a) for a in (
                *({"action": "move", "file": f, "reason": why} for f, why in self.moves),
                *({"action": "zero", "file": z.path, "start": z.start, "end": z.end, "reason": z.reason}
                  for z in self.zero),
                *({"action": "rewrite consumer log", "subject": c.subject, "directory": c.directory,
                   "first_sequence": c.first_sequence, "units": len(c.units),
                   "fill_units": c.units.fill_units(), "reason": c.reason}
                  for c in self.consumer_logs),
                *([{"action": "write checkpoint", "file": str(self.checkpoint_path()),
                    "message_log_offset": self.checkpoint.offset,
                    "subjects": len(self.checkpoint.max_sequences)}] if self.checkpoint else []))],
            "records_dropped": [{"message_log_offset": o, "subject": s, "sequence": q}
                                for o, s, q in self.records_dropped],
            "records_unserved": [{"message_log_offset": o, "subject": s, "sequence": q, "reason": why}
                                 for o, s, q, why in self.records_unserved],
            "lost_messages": [m.to_json() for m in self.lost_messages],
            "consumer_log_unit_bytes": {"value": self.unit_bytes, "taken_from": self.unit_bytes_from},
        }


def _action(a: dict) -> dict:
    """A plan action under the name a RocketMQ plan's has (``kind``), and its old one (``action``)."""
    return {"kind": a["action"], **a}


def _log_dirs(root: pathlib.Path, unit_bytes: int) -> list[LogDirectory]:
    dirs = [list_log(root / "messagelog", MESSAGE_SEGMENT_SIZE),
            list_log(root / "actionlog", actionlog_format.PER_SEGMENT_FILE_SIZE)]
    dirs += [list_log(consumerlog.subject_directory(root, s), unit_bytes * SEGMENT_TOTAL_UNIT)
             for s in consumerlog.loaded_subjects(root)]
    pulls = root / "pulllog"
    if pulls.is_dir():
        dirs += [list_log(gs, PULL_LOG_SIZE) for c in pulls.iterdir() if c.is_dir() for gs in c.iterdir() if gs.is_dir()]
    return dirs


@dataclasses.dataclass(frozen=True)
class LogStop:
    """Where QMQ's recovery stops a log: the first damage, or payload failing its CRC, it validates."""
    offset: int
    path: str
    position: int
    reason: str


_CRC_FAILS = "its payload fails its CRC"
# why a record kept in the log gets no unit (records_unserved)
SEQUENCE_DAMAGED = "its sequence field is damaged: a unit for it would need the fill units of the whole gap"
NO_DIRECTORY = "its subject names no directory of its own for its consumer log"


def _first_bad(items, last_two: set[str]) -> LogStop | None:
    """The first item QMQ's recovery stops at: damage, or a payload failing its CRC, in one
    of the last two segments (``LogManager.recover`` validates no other)."""
    for item in items:
        if item.path not in last_two:
            continue
        if isinstance(item, (messagelog.Damage, actionlog.ActionDamage)) or \
                (isinstance(item, messagelog.MessageRecord) and item.payload_crc_ok is False):
            return LogStop(item.offset, item.path, item.position, getattr(item, "reason", _CRC_FAILS))
    return None


def _first_bad_record(records: LogColumns, damage: list, last_two: int) -> LogStop | None:
    """:func:`_first_bad` of the message log, from its columns and its damage: the segments
    from index ``last_two`` on are the last two."""
    failing = np.flatnonzero(~records.crc_ok & (records.segment >= last_two))
    bad = None
    if len(failing):
        row = int(failing[0])
        seg = int(records.segment[row])
        offset = int(records.offset[row])
        bad = LogStop(offset, records.paths[seg], offset - int(records.bases[seg]), _CRC_FAILS)
    last_paths = set(records.paths[last_two:])
    d = next((d for d in damage if d.path in last_paths), None)  # damage comes in log order
    if d is not None and (bad is None or d.offset < bad.offset):
        return LogStop(d.offset, d.path, d.position, d.reason)
    return bad


def message_log_cut(broker, mlog: LogDirectory, records: LogColumns, damage: list) -> LogStop | None:
    """Where the plan ends the message log: where the simulated start's segment validator ends
    it when QMQ starts (bytes rmqtool's reader calls damage, such as a subject that is not
    UTF-8, pass the validator and are kept); the first damage or CRC failure of the last two
    segments when it does not start (the repair makes a store it starts with)."""
    bad = _first_bad_record(records, damage, max(len(mlog.segments) - 2, 0))
    if broker.refusal is not None or broker.message_log is None:
        return bad
    at = broker.message_log.cut_at
    if at is None:
        return None
    if bad is not None and bad.offset == at:
        return bad
    seg = next(s for s in reversed(mlog.segments) if s.base_offset <= at)
    return LogStop(at, str(seg.path), at - seg.base_offset, "QMQ's segment validator stops there")


def _cut(log: LogDirectory, bad: LogStop | None, kind: str) -> tuple[list[ZeroRange], list[tuple[str, str]], int | None]:
    """Zeros and moves that end a log where QMQ's recovery ends it, at ``bad``; the kept end (None: whole)."""
    if bad is None:
        return [], [], None
    seg = next(s for s in log.segments if str(s.path) == bad.path)
    with ZeroExtended(seg) as data:
        written = data.written  # the file's data end: everything from the bad record on goes
    zero = [ZeroRange(bad.path, bad.position, max(written, bad.position + 1),
                      f"QMQ's recovery ends the {kind} at offset {bad.offset}: {bad.reason}")]
    moves = [(str(s.path), f"a {kind} segment after the cut (QMQ's recovery deletes it)")
             for s in log.segments if s.base_offset > seg.base_offset]
    return zero, moves, bad.offset


def _scan_message_log(mlog: LogDirectory) -> tuple[LogColumns, list]:
    """The message log's records as columns (timestamps kept: the units a rewrite writes carry
    them), and its damage, in one read; no object a record."""
    builder = LogColumnsBuilder(SubjectTable(), timestamps=True)
    damage = [piece for _, piece in messagelog.log_pieces(mlog.segments, builder)
              if isinstance(piece, messagelog.Damage)]
    return builder.build(), damage


def _triples(records: LogColumns, rows: np.ndarray) -> tuple[tuple[int, str, int], ...]:
    """(offset, subject, sequence) of the records at ``rows``."""
    names = records.subjects.names
    return tuple((o, names[s], q) for o, s, q in zip(records.offset[rows].tolist(),
                                                     records.subject_id[rows].tolist(),
                                                     records.sequence[rows].tolist()))


def plan_recovery(store: str | os.PathLike, given_unit: tuple[int, str] | None = None) -> QmqPlan:
    """``given_unit``: (consumer log unit bytes, what says so) the operator gave (the broker's
    ``consumerlog.v2.enable``), for a store whose files show none."""
    root = pathlib.Path(store)
    mlog = list_log(root / "messagelog", MESSAGE_SEGMENT_SIZE)
    records, damage = _scan_message_log(mlog)
    shown = shown_unit_bytes(root)
    unit, unit_from = ((shown, "files") if shown else given_unit if given_unit is not None
                       else (CONSUMER_LOG_UNIT_BYTES, "default"))
    broker = simulate_start(root, unit_bytes=unit, records=records)
    moves: list[tuple[str, str]] = []
    misnamed = []
    for d in _log_dirs(root, unit):
        moves += [(str(p), "a name Long.parseLong refuses: QMQ does not start with it there") for p in d.unparsable]
        misnamed += misaligned(d)
    moves += [(str(p), "a name Long.parseLong refuses: QMQ does not start with it in pulllog_smt/")
              for p in tablets.unparsable_tablet_names(root)]

    # the message log, as QMQ's recovery cuts it
    zero, cut_moves, cut_at = _cut(mlog, message_log_cut(broker, mlog, records, damage), "message log")
    moves += cut_moves
    gone = {p for p, _ in cut_moves}
    keep = ~np.isin(records.segment, [i for i, p in enumerate(records.paths) if p in gone])
    if cut_at is not None:
        keep &= records.offset < cut_at
    dropped = _triples(records, np.flatnonzero(~keep))
    kept_end = int(records.end[keep].max()) if keep.any() else (mlog.segments[0].base_offset if mlog.segments else 0)
    if cut_at is not None:
        kept_end = cut_at

    alog = list_log(root / "actionlog", actionlog_format.PER_SEGMENT_FILE_SIZE)
    a_zero, a_moves, _ = _cut(alog, _first_bad([i for s in alog.segments for i in actionlog.scan_segment(s)],
                                               {str(s.path) for s in alog.segments[-2:]}), "action log")
    zero += a_zero
    moves += a_moves

    log_start = mlog.segments[0].base_offset if mlog.segments else 0
    unreadable = max(kept_end - log_start - int(records.size[keep].sum(dtype=np.int64)), 0)  # bytes no kept record holds
    rewrites, max_sequences, unserved = _consumer_logs(root, unit, records, keep, kept_end, unreadable,
                                                       _sequence_floors(broker))
    checkpoint, checkpoint_moves = _checkpoint(root, kept_end, max_sequences)
    moves += checkpoint_moves
    rows, reasons = unserved
    refusal = None
    if misnamed:  # every offset in it is the reader's guess: nothing is rewritten on that
        refusal = (f"{misnamed[0].path} is named {misnamed[0].base_offset}, not a multiple of its log's segment size "
                   f"({misnamed[0].size}): QMQ never names a segment so; rename it to where its bytes belong first"
                   + (f" ({len(misnamed) - 1} more such)" if len(misnamed) > 1 else ""))
    elif checkpoint is not None and _not_a_directory(root / "checkpoint"):
        refusal = (f"{root / 'checkpoint'} is not a directory: QMQ's start loads no snapshot from it and cannot "
                   f"write one, and the repair's message checkpoint has nowhere to go; move it aside first")
    return QmqPlan(str(root), broker, tuple(moves), tuple(zero), tuple(rewrites), checkpoint, dropped,
                   tuple((*t, why) for t, why in zip(_triples(records, rows), reasons)),
                   _lost_messages(records, np.flatnonzero(~keep), rows), refusal, unit, unit_from)


def _lost_messages(records: LogColumns, dropped: np.ndarray, unserved: np.ndarray) -> tuple[LostMessage, ...]:
    """The records at rows ``dropped`` (the cut's) and ``unserved`` (kept with no unit), by offset."""
    rows = np.concatenate((dropped, unserved))
    why = np.concatenate((np.zeros(len(dropped), np.int8), np.ones(len(unserved), np.int8)))
    order = np.argsort(records.offset[rows], kind="stable")
    rows, why = rows[order], why[order]
    names = records.subjects.names
    return tuple(LostMessage(o, names[s], q, t, ok, UNIT_LOST if w else LOG_CUT) for o, s, q, t, ok, w in zip(
        records.offset[rows].tolist(), records.subject_id[rows].tolist(), records.sequence[rows].tolist(),
        records.timestamp[rows].tolist(), records.crc_ok[rows].tolist(), why.tolist()))


def _by_subject(records: LogColumns, keep: np.ndarray) -> dict[int, np.ndarray]:
    """The kept records' rows by subject id, sorted by sequence, one a sequence: of records with
    the same sequence the last in the log (a later record of a sequence stands for it)."""
    rows = np.flatnonzero(keep)
    order = rows[np.lexsort((rows, records.sequence[rows], records.subject_id[rows]))]
    sid, seq = records.subject_id[order], records.sequence[order]
    last = np.ones(len(order), bool)
    last[:-1] = (sid[1:] != sid[:-1]) | (seq[1:] != seq[:-1])
    order, sid = order[last], sid[last]
    bounds = np.flatnonzero(np.diff(sid)) + 1
    return {int(sid[lo]): order[lo:hi] for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(order)])
            if lo < hi}


@dataclasses.dataclass
class _OnDisk:
    """A consumer log's units as columns, by sequence (of units at one sequence, the last read)."""
    sequence: np.ndarray
    kind: np.ndarray
    wrote_offset: np.ndarray
    wrote_bytes: np.ndarray
    header_size: np.ndarray
    timestamp: np.ndarray


def _on_disk(directory: LogDirectory, unit: int) -> _OnDisk:
    chunks = list(consumerlog.unit_columns(directory, unit, timestamps=True))
    if not chunks:
        empty = np.empty(0, np.int64)
        return _OnDisk(empty, np.empty(0, np.int8), empty, empty, empty, empty)
    seq = np.concatenate([c.sequence for c in chunks])
    fields = [np.concatenate([getattr(c, f) for c in chunks]) for f in
              ("kind", "wrote_offset", "wrote_bytes", "header_size", "timestamp")]
    order = np.argsort(seq, kind="stable")
    seq = seq[order]
    last = np.ones(len(seq), bool)
    last[:-1] = seq[1:] != seq[:-1]
    pick = order[last]
    return _OnDisk(seq[last], *(f[pick] for f in fields))


def _sequence_floors(broker: StartOutcome) -> dict[str, tuple[int, int]]:
    """Each subject's (next sequence QMQ's own start leaves it, one past the highest sequence a
    group or consumer has pulled). A rewrite keeps the next sequence at both: below them, new
    messages would take sequences QMQ's start never gives again, and a group resumes past them
    (pull + 1) and skips those messages."""
    floors = {s.subject: (s.consumer_log[1], 0) for s in broker.subjects}
    for row in broker.consumer_progress:
        # a group's pull is a consumer log sequence; its consumers' are their pull logs', but a broadcast group's
        pulled = max([row["pull"], *(c[0] for c in row["consumers"].values() if row["broadcast"])]) + 1
        start, before = floors.get(row["subject"], (0, 0))
        floors[row["subject"]] = (start, max(before, pulled))
    return floors


def _fills(first: int, last: int) -> UnitRows:
    """Fill units for sequences ``first`` to ``last`` (QMQ serves each as SUCCESS with no message)."""
    n = max(last - first + 1, 0)
    return UnitRows(first, np.full(n, FILL_WROTE_OFFSET, np.int64), np.full(n, FILL_WROTE_BYTES, np.int64),
                    np.full(n, FILL_HEADER_SIZE, np.int64), np.zeros(n, np.int64))


def _kept_next(subject: str, floors: dict[str, tuple[int, int]]) -> str:
    started, pulled = floors.get(subject, (0, 0))
    return f"QMQ's own start leaves it at {started}" + (f", its groups pulled to {pulled - 1}" if pulled else "")


def _consumer_logs(root: pathlib.Path, unit: int, records: LogColumns, keep: np.ndarray, kept_end: int,
                   unreadable: int, floors: dict[str, tuple[int, int]]
                   ) -> tuple[list[ConsumerLogRewrite], dict[str, int], tuple[np.ndarray, list]]:
    """The consumer logs' rewrites, each subject's max sequence, and the rows of the records
    left without a unit, in log order, with why each is. Units past the kept log become fill
    units up to the subject's floor (:func:`_sequence_floors`, within the units on disk)."""
    names = records.subjects.names
    by_subject: dict[str, np.ndarray] = {}
    unserved, causes = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    reasons = [SEQUENCE_DAMAGED]
    for sid, rows in _by_subject(records, keep).items():
        directory = consumerlog.subject_directory(root, names[sid])
        refusal = directory_refusal(directory)
        if refusal is None and consumerlog.outside_its_own(root, directory):
            refusal = f"{directory} is not a directory of its own under consumerlog/: rmqtool writes nothing there"
        if refusal is not None:  # no consumer log QMQ can make, or none of its own: no unit for any of them
            unserved.append(rows)
            causes.append(np.full(len(rows), len(reasons)))
            reasons.append(f"{NO_DIRECTORY}: {refusal}")
            continue
        by_subject[names[sid]], apart = _hanging_together(records, rows, names[sid], unreadable)
        unserved.append(apart)
        causes.append(np.zeros(len(apart), np.int64))
    rewrites, max_sequences = [], {}
    kept = np.flatnonzero(keep)  # the kept records by offset, for the units that prove theirs
    kept = kept[np.argsort(records.offset[kept], kind="stable")]
    for subject in sorted(set(by_subject) | set(consumerlog.loaded_subjects(root))):
        directory, _ = consumerlog.open_consumer_log(root, subject, unit)
        on_disk = _on_disk(directory, unit)
        # the highest sequence the rewrite keeps a unit for, past its records: the floor, within the units on disk
        floor = min(max(floors.get(subject, (0, 0))) - 1, int(on_disk.sequence.max()) if len(on_disk.sequence) else -1)
        rows = by_subject.get(subject)
        if rows is None:  # units pointing into what the cut drops become fill units up to the floor; the rest stays
            past = on_disk.sequence[(on_disk.kind == consumerlog.MESSAGE) & (on_disk.wrote_offset >= kept_end)]
            if len(past):
                kept_to = f"; fill units to {floor} keep its next sequence at {floor + 1} ({_kept_next(subject, floors)})" \
                    if floor >= past[0] else ""
                rewrites.append(ConsumerLogRewrite(subject, str(directory.directory), unit, int(past[0]),
                                                   _fills(int(past[0]), floor),
                                                   f"units {past[0]}-{past[-1]} point past the kept message log"
                                                   + kept_to))
            kept_units = on_disk.sequence if not len(past) else on_disk.sequence[on_disk.sequence < past[0]]
            if len(past) and floor >= past[0]:
                max_sequences[subject] = floor
            elif len(kept_units):
                max_sequences[subject] = int(kept_units.max())
            continue
        sequences = records.sequence[rows]
        first, last = int(sequences[0]), int(sequences[-1])
        top = max(last, floor)
        # a log whose first units are gone starts again where QMQ's writeUnit would start it: the
        # first sequence's segment (allocOrResetSegments), fill units from its base (fillPreBlank)
        start = first if (on_disk.sequence < first).any() else max(first - first % SEGMENT_TOTAL_UNIT, 0)
        max_sequences[subject] = top
        old = _aligned(on_disk, start, top)
        wanted = _wanted(records, rows, start, old, kept)
        beyond = old.sequence > last  # past the subject's records: fill units only (none proves a record there)
        wanted[0][beyond], wanted[1][beyond], wanted[2][beyond] = FILL_WROTE_OFFSET, FILL_WROTE_BYTES, FILL_HEADER_SIZE
        # units past the records that go: after the floor, and before it those a fill unit replaces
        filled = (old.sequence > last) & (old.kind == consumerlog.MESSAGE) & (wanted[0] == FILL_WROTE_OFFSET) \
            & (wanted[1] == FILL_WROTE_BYTES)
        past = np.concatenate((old.sequence[filled], on_disk.sequence[on_disk.sequence > top]))
        if len(past) or _units_differ(old, wanted):
            why = (f"units {past.min()}-{past.max()} point past the kept message log" if len(past) else
                   "records of the kept message log have no unit, or units that do not point at them")
            if top > last:
                why += f"; fill units to {top} keep its next sequence at {top + 1} ({_kept_next(subject, floors)})"
            rewrites.append(ConsumerLogRewrite(subject, str(directory.directory), unit, start,
                                               _wanted_units(old, records, rows, wanted, start), why))
    unserved_rows, why_rows = np.concatenate(unserved), np.concatenate(causes)
    order = np.argsort(records.offset[unserved_rows], kind="stable")
    return rewrites, max_sequences, (unserved_rows[order], [reasons[k] for k in why_rows[order].tolist()])


def _aligned(on_disk: _OnDisk, start: int, last: int) -> _OnDisk:
    """The units on disk from ``start`` to ``last``, one a sequence in order (``sequence`` is
    ``start`` on; ``kind`` -1 where no unit is): what the rewrite's units are held against."""
    n = last - start + 1
    inside = (on_disk.sequence >= start) & (on_disk.sequence <= last)
    where = on_disk.sequence[inside] - start
    old = _OnDisk(np.arange(start, last + 1, dtype=np.int64), np.full(n, -1, np.int8),
                  *(np.zeros(n, np.int64) for _ in range(4)))
    for field in ("kind", "wrote_offset", "wrote_bytes", "header_size", "timestamp"):
        getattr(old, field)[where] = getattr(on_disk, field)[inside]
    return old


def _wanted(records: LogColumns, rows: np.ndarray, start: int, old: _OnDisk,
            kept: np.ndarray) -> tuple[np.ndarray, ...]:
    """The (wrote_offset, wrote_bytes, header_size) of the units from ``start`` on (``old``:
    the units on disk there, :func:`_aligned`) a rewrite wants: a record's where the subject
    has one; where it has none, the unit on disk when that unit proves its record (``kept``:
    the kept records' rows by offset), else a fill unit's; and where each record's unit lies
    among them.

    A unit proves its record when a kept record lies exactly where it points, of its size and
    header size and at its sequence: the record is the subject's, read under another subject
    because a subject byte is damaged (the CRC covers only the payload). QMQ serves it through
    that unit (getMessage reads no subject); a fill unit there would lose it."""
    at = records.sequence[rows] - start
    n = len(old.kind)
    offset = np.full(n, FILL_WROTE_OFFSET, np.int64)
    size = np.full(n, FILL_WROTE_BYTES, np.int64)
    header = np.full(n, FILL_HEADER_SIZE, np.int64)
    if len(kept):
        units = np.flatnonzero(old.kind == consumerlog.MESSAGE)
        pointed = old.wrote_offset[units]
        r = kept[np.minimum(np.searchsorted(records.offset[kept], pointed), len(kept) - 1)]
        proven = units[(records.offset[r] == pointed) & (records.size[r] == old.wrote_bytes[units])
                       & (records.header_size[r] == old.header_size[units])
                       & (records.sequence[r] == old.sequence[units])]
        offset[proven], size[proven], header[proven] = (old.wrote_offset[proven], old.wrote_bytes[proven],
                                                        old.header_size[proven])
    offset[at], size[at], header[at] = records.offset[rows], records.size[rows], records.header_size[rows]
    return offset, size, header, at


def _units_differ(old: _OnDisk, wanted: tuple[np.ndarray, ...]) -> bool:
    """Whether a unit on disk (``old``, :func:`_aligned`) is missing or points elsewhere than
    the rewrite's (``wanted``: :func:`_wanted`'s) would."""
    offset, size, header, _ = wanted
    return bool((old.kind == -1).any() or (old.wrote_offset != offset).any() or (old.wrote_bytes != size).any()
                or (old.header_size != header).any())


def _wanted_units(old: _OnDisk, records: LogColumns, rows: np.ndarray, wanted: tuple[np.ndarray, ...],
                  start: int) -> UnitRows:
    """The units a rewrite writes from ``start`` on (``wanted``: :func:`_wanted`'s; ``old``: the
    units on disk there), each with the timestamp it keeps: a fill unit the old fill unit's
    (else 0), a unit kept or a record's unit the old unit's when it already points there,
    else the record's."""
    offset, size, header, at = wanted
    is_record = np.zeros(len(offset), bool)
    is_record[at] = True
    same = (old.kind == consumerlog.MESSAGE) & (old.wrote_offset == offset) & (old.wrote_bytes == size) \
        & (old.header_size == header)
    timestamp = np.where((old.kind == consumerlog.FILL) | same, old.timestamp, 0)  # a fill unit's, a unit kept
    record_time = np.zeros(len(offset), np.int64)
    record_time[at] = records.timestamp[rows]
    timestamp = np.where(is_record, np.where(same, old.timestamp, record_time), timestamp)
    return UnitRows(start, offset, size, header, timestamp)


def _hanging_together(records: LogColumns, rows: np.ndarray, subject: str,
                      unreadable: int) -> tuple[np.ndarray, np.ndarray]:
    """Of a subject's records (``rows``, one a sequence, by sequence), those whose sequences
    hang together (:func:`hanging_run`), and the others."""
    lo, hi = hanging_run(records.sequence[rows], sequence_slack(subject, unreadable, len(rows)))
    if lo == 0 and hi == len(rows):
        return rows, rows[:0]
    return rows[lo:hi], np.concatenate((rows[:lo], rows[hi:]))


def sequence_slack(subject: str, unreadable: int, records: int) -> int:
    """How many of a subject's sequences may be missing between its records and still hang
    together: records lost in the log's ``unreadable`` bytes (each at least a record of the
    subject with an empty payload), or its own ``records`` whose sequences are damaged."""
    return unreadable // messagelog_format.header_size(len(subject.encode("utf-8")),
                                                       messagelog_format.MESSAGE_LOG_MAGIC_V1) + records


def hanging_run(sequences: np.ndarray, slack: int) -> tuple[int, int]:
    """Of a subject's sequences (sorted, unique), the run [lo, hi) that hangs together.

    Sequences hang together when no more than ``slack`` (:func:`sequence_slack`) are missing
    between them: the fill units a rewrite writes, all gaps counted, stay within what the log
    holds. Of the runs that hang together the longest stands (on a tie: one not negative, then
    the lowest); a record outside it has a damaged sequence field (the payload CRC does not
    cover it), and a unit for it would need the fill units of the whole gap (billions, for a
    high byte changed)."""
    if len(sequences) < 2:
        return 0, len(sequences)
    # missing sequences before each record; a run [i, j) misses missing[j - 1] - missing[i] of them
    missing = sequences - np.arange(len(sequences))
    top = np.iinfo(np.int64).max
    reach = np.where(missing > top - slack, top, missing + min(slack, top))  # no wrap past int64 (a damaged high byte)
    ends = np.searchsorted(missing, reach, side="right")  # each start's longest run, its end
    lengths = ends - np.arange(len(sequences))
    lo = int(np.argmax(2 * lengths + (sequences >= 0)))  # the longest, then not negative; the first: the lowest
    return lo, int(ends[lo])


def _not_a_directory(path: pathlib.Path) -> bool:
    """A name there that is no directory (a file, a dangling link): SnapshotStore's listFiles
    gives nothing, and a snapshot written into it fails."""
    return os.path.lexists(path) and not path.is_dir()


def _checkpoint(root: pathlib.Path, kept_end: int, max_sequences: dict[str, int]):
    snaps = checkpoints.message_checkpoints(root)
    later = [(str(s.path), "a message checkpoint past the kept message log: the load would take it")
             for s in snaps.all if s.version is not None and s.version > kept_end]
    loaded = snaps.loaded
    want = MessageCheckpoint(kept_end, dict(sorted(max_sequences.items())))
    if loaded is not None and not later and loaded.version == kept_end and loaded.value.offset == kept_end \
            and loaded.value.max_sequences == want.max_sequences:
        return None, []
    return want, later
