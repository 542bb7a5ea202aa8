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
   unit, fill units stand only where no record is, and no unit points past the log; a record
   whose sequence lies further from its subject's others than the unreadable bytes of the log
   could hold records (its sequence field damaged: the payload CRC does not cover it) gets no
   unit, and is listed (salvage keeps it): QMQ's replay would reset the consumer log there;
4. write a message checkpoint at the kept log's end that lists every subject, moving any
   checkpoint of a later version aside (the load takes the highest version).

A second plan on the repaired store finds nothing to do.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

from rmqtool.formats.qmq import actionlog as actionlog_format
from rmqtool.formats.qmq import messagelog as messagelog_format
from rmqtool.formats.qmq.checkpoint import MESSAGE_CHECKPOINT_PREFIX, MessageCheckpoint
from rmqtool.formats.qmq.consumerlog import FILL_HEADER_SIZE, FILL_WROTE_BYTES, FILL_WROTE_OFFSET, SEGMENT_TOTAL_UNIT
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE as MESSAGE_SEGMENT_SIZE
from rmqtool.formats.qmq.pulllog import PULL_LOG_SIZE
from rmqtool.recovery.qmq.start import StartOutcome, simulate_start, store_unit_bytes
from rmqtool.store.qmq import actionlog, checkpoints, consumerlog, messagelog
from rmqtool.store.qmq.segments import LogDirectory, ZeroExtended, list_log


@dataclasses.dataclass(frozen=True)
class UnitSpec:
    """One consumer-log unit the apply writes (a fill unit where no record is)."""
    sequence: int
    wrote_offset: int
    wrote_bytes: int
    header_size: int
    timestamp: int


@dataclasses.dataclass(frozen=True)
class ConsumerLogRewrite:
    subject: str
    directory: str
    unit_bytes: int
    first_sequence: int  # units before it are kept as they are
    units: tuple[UnitSpec, ...]  # first_sequence onwards; nothing after the last
    reason: str


@dataclasses.dataclass(frozen=True)
class ZeroRange:
    path: str
    start: int  # positions in the file
    end: int
    reason: str


@dataclasses.dataclass(frozen=True)
class QmqPlan:
    store: str
    broker: StartOutcome  # what QMQ's next start does to the store as it is
    moves: tuple[tuple[str, str], ...]  # (file, why) moved into the backup
    zero: tuple[ZeroRange, ...]
    consumer_logs: tuple[ConsumerLogRewrite, ...]
    checkpoint: MessageCheckpoint | None  # the message checkpoint the apply writes
    records_dropped: tuple[tuple[int, str, int], ...]  # (offset, subject, sequence) the cut drops
    # (offset, subject, sequence) kept in the log with no unit: their sequences are damaged (_hanging_together)
    records_unserved: tuple[tuple[int, str, int], ...] = ()

    @property
    def changes_anything(self) -> bool:
        return bool(self.moves or self.zero or self.consumer_logs or self.checkpoint)

    def checkpoint_path(self) -> pathlib.Path | None:
        if self.checkpoint is None:
            return None
        return pathlib.Path(self.store) / "checkpoint" / f"{MESSAGE_CHECKPOINT_PREFIX}{self.checkpoint.offset:020d}"

    def to_json(self) -> dict:
        return {
            "family": "qmq",
            "store": self.store,
            "broker_start": self.broker.to_json(),
            "actions": [
                *({"action": "move", "file": f, "reason": why} for f, why in self.moves),
                *({"action": "zero", "file": z.path, "start": z.start, "end": z.end, "reason": z.reason}
                  for z in self.zero),
                *({"action": "rewrite consumer log", "subject": c.subject, "directory": c.directory,
                   "first_sequence": c.first_sequence, "units": len(c.units),
                   "fill_units": sum(u.wrote_bytes == FILL_WROTE_BYTES for u in c.units), "reason": c.reason}
                  for c in self.consumer_logs),
                *([{"action": "write checkpoint", "file": str(self.checkpoint_path()),
                    "message_log_offset": self.checkpoint.offset,
                    "subjects": len(self.checkpoint.max_sequences)}] if self.checkpoint else []),
            ],
            "records_dropped": [{"message_log_offset": o, "subject": s, "sequence": q}
                                for o, s, q in self.records_dropped],
            "records_unserved": [{"message_log_offset": o, "subject": s, "sequence": q}
                                 for o, s, q in self.records_unserved],
        }


def _log_dirs(root: pathlib.Path, unit_bytes: int) -> list[LogDirectory]:
    dirs = [list_log(root / "messagelog", MESSAGE_SEGMENT_SIZE),
            list_log(root / "actionlog", actionlog_format.PER_SEGMENT_FILE_SIZE)]
    dirs += [list_log(root / "consumerlog" / s, unit_bytes * SEGMENT_TOTAL_UNIT) for s in consumerlog.subjects(root)]
    pulls = root / "pulllog"
    if pulls.is_dir():
        dirs += [list_log(gs, PULL_LOG_SIZE) for c in pulls.iterdir() if c.is_dir() for gs in c.iterdir() if gs.is_dir()]
    return dirs


def _first_bad(items, last_two: set[str]):
    """The first item QMQ's recovery stops at: damage, or a payload failing its CRC, in one
    of the last two segments (``LogManager.recover`` validates no other)."""
    for item in items:
        if item.path not in last_two:
            continue
        if isinstance(item, (messagelog.Damage, actionlog.ActionDamage)) or \
                (isinstance(item, messagelog.MessageRecord) and item.payload_crc_ok is False):
            return item
    return None


def _cut(log: LogDirectory, items: list, kind: str) -> tuple[list[ZeroRange], list[tuple[str, str]], int | None]:
    """Zeros and moves that end a log where QMQ's recovery ends it; the kept end (None: whole)."""
    last_two = {str(s.path) for s in log.segments[-2:]}
    bad = _first_bad(items, last_two)
    if bad is None:
        return [], [], None
    seg = next(s for s in log.segments if str(s.path) == bad.path)
    with ZeroExtended(seg) as data:
        written = data.written  # the file's data end: everything from the bad record on goes
    why = getattr(bad, "reason", "its payload fails its CRC")
    zero = [ZeroRange(bad.path, bad.position, max(written, bad.position + 1),
                      f"QMQ's recovery ends the {kind} at offset {bad.offset}: {why}")]
    moves = [(str(s.path), f"a {kind} segment after the cut (QMQ's recovery deletes it)")
             for s in log.segments if s.base_offset > seg.base_offset]
    return zero, moves, bad.offset


def plan_recovery(store: str | os.PathLike) -> QmqPlan:
    root = pathlib.Path(store)
    broker = simulate_start(root)
    unit = broker.unit_bytes or store_unit_bytes(root)
    moves: list[tuple[str, str]] = []
    for d in _log_dirs(root, unit):
        moves += [(str(p), "a name Long.parseLong refuses: QMQ does not start with it there") for p in d.unparsable]

    # the message log, as QMQ's recovery cuts it
    mlog = list_log(root / "messagelog", MESSAGE_SEGMENT_SIZE)
    items = [i for s in mlog.segments for i in messagelog.scan_segment(s, payloads=False)]  # every record kept
    zero, cut_moves, cut_at = _cut(mlog, items, "message log")
    moves += cut_moves
    gone = {p for p, _ in cut_moves}
    kept = [i for i in items if isinstance(i, messagelog.MessageRecord) and i.path not in gone
            and (cut_at is None or i.offset < cut_at)]
    dropped = tuple((i.offset, i.subject, i.sequence) for i in items if isinstance(i, messagelog.MessageRecord)
                    and (i.path in gone or (cut_at is not None and i.offset >= cut_at)))
    kept_end = max((r.offset + r.size for r in kept), default=mlog.segments[0].base_offset if mlog.segments else 0)
    if cut_at is not None:
        kept_end = cut_at

    alog = list_log(root / "actionlog", actionlog_format.PER_SEGMENT_FILE_SIZE)
    a_zero, a_moves, _ = _cut(alog, [i for s in alog.segments for i in actionlog.scan_segment(s)], "action log")
    zero += a_zero
    moves += a_moves

    log_start = mlog.segments[0].base_offset if mlog.segments else 0
    unreadable = max(kept_end - log_start - sum(r.size for r in kept), 0)  # bytes no kept record holds
    rewrites, max_sequences, unserved = _consumer_logs(root, unit, kept, kept_end, unreadable)
    checkpoint, checkpoint_moves = _checkpoint(root, kept_end, max_sequences)
    moves += checkpoint_moves
    return QmqPlan(str(root), broker, tuple(moves), tuple(zero), tuple(rewrites), checkpoint, dropped,
                   tuple((r.offset, r.subject, r.sequence) for r in unserved))


def _consumer_logs(root: pathlib.Path, unit: int, kept: list, kept_end: int,
                   unreadable: int) -> tuple[list[ConsumerLogRewrite], dict[str, int], list]:
    by_subject: dict[str, dict[int, messagelog.MessageRecord]] = {}
    for r in kept:
        by_subject.setdefault(r.subject, {})[r.sequence] = r
    unserved = []
    for subject, records in by_subject.items():
        by_subject[subject], apart = _hanging_together(records, unreadable)
        unserved += apart
    rewrites, max_sequences = [], {}
    for subject in sorted(set(by_subject) | set(consumerlog.subjects(root))):
        directory, _ = consumerlog.open_consumer_log(root, subject, unit)
        on_disk = {u.sequence: u for u in consumerlog.read_units(directory, unit, subject)}
        records = by_subject.get(subject, {})
        if not records:  # units pointing into what the cut drops go; the rest stays
            past = sorted(s for s, u in on_disk.items() if u.kind == "message" and u.wrote_offset >= kept_end)
            if past:
                rewrites.append(ConsumerLogRewrite(subject, str(directory.directory), unit, past[0], (),
                                                   f"units {past[0]}-{past[-1]} point past the kept message log"))
            kept_units = [s for s in on_disk if not past or s < past[0]]
            if kept_units:
                max_sequences[subject] = max(kept_units)
            continue
        first, last = min(records), max(records)
        below = [s for s in on_disk if s < first]
        # a log whose first units are gone starts again where QMQ's writeUnit would start it: the
        # first sequence's segment (allocOrResetSegments), fill units from its base (fillPreBlank)
        start = first if below else max(first - first % SEGMENT_TOTAL_UNIT, 0)
        want = []
        for seq in range(start, last + 1):
            rec = records.get(seq)
            old = on_disk.get(seq)
            if rec is None:
                want.append(UnitSpec(seq, FILL_WROTE_OFFSET, FILL_WROTE_BYTES, FILL_HEADER_SIZE,
                                     old.timestamp if old is not None and old.kind == "fill" else 0))
                continue
            same = old is not None and old.kind == "message" and \
                (old.wrote_offset, old.wrote_bytes, old.header_size) == (rec.offset, rec.size, rec.header_size)
            want.append(UnitSpec(seq, rec.offset, rec.size, rec.header_size, old.timestamp if same else rec.timestamp))
        max_sequences[subject] = last
        past = [s for s in on_disk if s > last]
        differs = past or any(_unit_differs(on_disk.get(u.sequence), u) for u in want)
        if differs:
            why = (f"units {min(past)}-{max(past)} point past the kept message log" if past else
                   "records of the kept message log have no unit, or units that do not point at them")
            rewrites.append(ConsumerLogRewrite(subject, str(directory.directory), unit, start, tuple(want), why))
    return rewrites, max_sequences, sorted(unserved, key=lambda r: r.offset)


def _hanging_together(records: dict, unreadable: int) -> tuple[dict, list]:
    """A subject's records ({sequence: record}) whose sequences hang together, and the others.

    Two sequences hang together when the sequences between them could be records lost in the
    log's ``unreadable`` bytes (each at least a record of the subject with an empty payload) or
    the subject's own records whose sequences are damaged: the fill units a rewrite writes stay
    within what the log holds. Of the runs that hang together the longest stands (on a tie:
    one not negative, then the lowest); a record outside it has a damaged sequence field (the
    payload CRC does not cover it), and a unit for it would need the fill units of the whole
    gap (billions, for a high byte changed)."""
    if len(records) < 2:
        return records, []
    subject = next(iter(records.values())).subject
    slack = unreadable // messagelog_format.header_size(len(subject.encode("utf-8")),
                                                        messagelog_format.MESSAGE_LOG_MAGIC_V1) + len(records)
    runs = []
    for s in sorted(records):
        if runs and s - runs[-1][-1] - 1 <= slack:
            runs[-1].append(s)
        else:
            runs.append([s])
    if len(runs) == 1:
        return records, []
    best = set(max(runs, key=lambda run: (len(run), run[0] >= 0)))  # on a tie: not negative, then the lowest
    return ({s: r for s, r in records.items() if s in best},
            [r for s, r in sorted(records.items()) if s not in best])


def _unit_differs(old, want: UnitSpec) -> bool:
    if old is None:
        return True
    return (old.wrote_offset, old.wrote_bytes, old.header_size) != (want.wrote_offset, want.wrote_bytes,
                                                                   want.header_size)


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
