"""`rmqtool check`: a monitoring probe cheap enough to run every minute on a live broker's store.

It reads tails and headers, never a whole segment: the last written commit log segment from
its last dispatched record (or from ``tail_bytes`` before its last data, whichever is later)
with the one scanner, each consume queue's end (``find_queue_end``: its last files' units),
the last index file's header, the checkpoint, the first record of each commit log file (the
abnormal-recovery start rule), ``config/consumerOffset.json`` with the queue units it names,
the names and sizes of the commit log and queue files (what the next start's load refuses),
and the file system's counters. Each measure is judged against thresholds (``--warn`` /
``--crit``, defaults in :data:`DEFAULT_WARN` / :data:`DEFAULT_CRIT`) into a Nagios state;
the worst state is the exit code.

Nothing here writes but :func:`write_prometheus`, which writes the textfile-collector file
the operator names (a temporary file in the same directory, then renamed over it), never
inside a store it reads.
"""
from __future__ import annotations

import bisect
import dataclasses
import enum
import math
import os
import time
from typing import Iterable

from rmqtool.errors import FormatError, RmqError, UsageError, error_line
from rmqtool.findings import Finding, Severity
from rmqtool.recovery.commitlog_walk import V4, V5, abnormal_start
from rmqtool.recovery.semantics import detect_semantics
from rmqtool.store.dledger import Entry, walk_entries
from rmqtool.store.checkpoint import loaded_checkpoint
from rmqtool.store.commitlog import Blank, findings_of, scan_segment
from rmqtool.store.commitlog_end import last_nonzero_from, last_written, segment_end
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.consumer_offsets import consumer_offsets
from rmqtool.store.indexfile import read_index_header
from rmqtool.store.message import Message
from rmqtool.store.output_path import refuse_output_in_store
from rmqtool.store.segments import one_listing
from rmqtool.store.tree import walk
from rmqtool.store.view import StoreView, as_view
from rmqtool.inspect.check_defaults import RECOVERY_RATE, TAIL_BYTES
from rmqtool.report.columns import terminal_safe
from rmqtool.report.text_file import write_text_atomically


class State(enum.IntEnum):
    """Nagios plugin states, as exit codes (not rmqtool's usual table: 3 is UNKNOWN here)."""
    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3


# CRITICAL outranks UNKNOWN: one unreadable store of several does not hide another's alarm
_RANK = {State.OK: 0, State.WARNING: 1, State.UNKNOWN: 2, State.CRITICAL: 3}

# Measures: name -> (unit, help). Per queue ones carry topic and queue_id, consumer lag also group.
MEASURES = {
    "written_end": ("bytes", "commit log offset one past the last record written"),
    "dispatch_lag_bytes": ("bytes", "commit log bytes written after the newest record any consume queue holds"),
    "dispatch_lag_ms": ("ms", "newest store time minus that of the first record no consume queue holds"),
    "dispatch_ahead_bytes": ("bytes", "how far the newest record a consume queue holds runs past the written end"),
    "queue_dispatch_lag_bytes": ("bytes", "commit log bytes written after the queue's last record (idle queues too)"),
    "queue_dispatch_lag_ms": ("ms", "newest store time minus that of the record after the queue's last one"),
    "subject_dispatch_lag_bytes": ("bytes", "QMQ: message log bytes written after the record a subject's "
                                            "consumer log last names"),
    "subject_dispatch_lag_ms": ("ms", "QMQ: newest store time minus that of the record after it"),
    "units_lost_at_start": ("messages", "QMQ: a subject's sequences the next start serves without their message, "
                                        "or not at all: units its load lacks or cuts (a consumer log file gone, a "
                                        "subject the message checkpoint lacks) naming records before its replay"),
    "index_lag_bytes": ("bytes", "commit log bytes written after the last indexed record"),
    "index_lag_ms": ("ms", "newest store time minus that of the first record after the last indexed one"),
    "unflushed_ms": ("ms", "newest store time minus the checkpoint's physicMsgTimestamp"),
    "unflushed_bytes": ("bytes", "commit log bytes after the newest record known stored at or before physicMsgTimestamp"),
    "recovery_bytes": ("bytes", "bytes an abnormal recovery walks: from the start file the checkpoint implies "
                                "(QMQ: the bytes its start replays after its checkpoints)"),
    "recovery_seconds": ("seconds", "recovery_bytes at the recovery rate"),
    "disk_used_ratio": ("ratio", "the fullest file system holding a store path (used / size)"),
    "disk_free_bytes": ("bytes", "free bytes on that file system"),
    "store_allocated_bytes": ("bytes", "bytes the store's files take on disk (sparse holes not counted)"),
    "lag_messages": ("messages", "a group's lag in a queue (max queue offset - committed offset; QMQ: in a "
                                 "subject, its last sequence - the group's max pulled sequence)"),
    "lag_ms": ("ms", "a group's lag in a queue: newest store time minus that of the next unconsumed message"),
    "newest_age_ms": ("ms", "the clock (--now) minus the newest record's store time"),
    "load_refused": ("stores", "1 when the next start's load refuses the store (a file of another size or name)"),
    "repair_unfinished": ("stores", "1 while an rmqtool repair or undo has the store half changed (cut short, "
                                    "or still running)"),
    "tail_errors": ("findings", "error findings in the commit log tail"),
    "tail_warnings": ("findings", "warning findings in the commit log tail"),
}

# Defaults: dispatch and flush fall behind by seconds on a healthy broker; the broker cleans files
# past diskMaxUsedSpaceRatio (0.75) and refuses writes past diskSpaceWarningLevelRatio (0.90).
DEFAULT_WARN = {"dispatch_lag_ms": 5000, "index_lag_ms": 5000,
                "unflushed_ms": 10000, "recovery_seconds": 60, "disk_used_ratio": 0.75, "tail_warnings": 1}
DEFAULT_CRIT = {"dispatch_lag_ms": 60000, "index_lag_ms": 60000,
                "unflushed_ms": 60000, "recovery_seconds": 600, "disk_used_ratio": 0.90, "tail_errors": 1,
                # queue units past the log: the broker's next start drops them, and their messages are gone
                "dispatch_ahead_bytes": 1,
                "load_refused": 1,  # the broker does not start on it
                "units_lost_at_start": 1,  # QMQ: messages its next start no longer serves
                "repair_unfinished": 1}  # half changed: neither what it was nor what the repair makes


@dataclasses.dataclass(frozen=True, slots=True)
class Measure:
    store_path: str
    measure: str
    value: float | int | None
    topic: str | None = None
    queue_id: int | None = None
    group: str | None = None
    state: State = State.OK
    subject: str | None = None  # QMQ's
    family: str = "rocketmq"  # the store's: a QMQ row names a subject, not a topic and queue

    @property
    def unit(self) -> str:
        return MEASURES[self.measure][0]

    def record(self) -> dict:
        where = {"subject": self.subject} if self.family == "qmq" else {"topic": self.topic, "queue_id": self.queue_id}
        return {"record": "check_measure", "store_path": self.store_path, "measure": self.measure,
                **where, "group": self.group, "value": self.value, "unit": self.unit, "state": self.state.name}


# The status line's summary of a RocketMQ store that is OK: (words, measure, unit)
SUMMARY = (("dispatch lag", "dispatch_lag_ms", " ms"), ("unflushed", "unflushed_ms", " ms"),
           ("recovery", "recovery_seconds", " s"), ("disk", "disk_used_ratio", ""))
# a DLedger store's: DLedger keeps its own flush position (no unflushed_*)
DLEDGER_SUMMARY = tuple(s for s in SUMMARY if s[1] != "unflushed_ms")


@dataclasses.dataclass(slots=True)
class StoreCheck:
    store_path: str
    measures: list[Measure]
    findings: list[Finding]  # the tail's, newest last
    unknown: str | None = None  # why the store could not be read
    summary: tuple = SUMMARY  # what the status line says of it when it is OK (its family's)

    @property
    def state(self) -> State:
        if self.unknown is not None:
            return State.UNKNOWN
        return worst(m.state for m in self.measures)

    @property
    def why_unknown(self) -> str | None:
        """Why the store could not be read, naming it (None: it was read)."""
        if self.unknown is None:
            return None
        return self.unknown if self.store_path in self.unknown else f"{self.store_path}: {self.unknown}"


@dataclasses.dataclass(slots=True)
class CheckResult:
    stores: list[StoreCheck]
    not_written: str | None = None  # why the --prometheus file was not written (None: written, or not asked)

    @property
    def state(self) -> State:
        """The worst store's; UNKNOWN at least when the Prometheus file was not written (the
        probe did not do all it was asked, and the collector's file is stale)."""
        return worst([*(s.state for s in self.stores), *([State.UNKNOWN] if self.not_written else [])])

    @property
    def exit_code(self) -> int:
        return int(self.state)

    def rows(self) -> list[dict]:
        """Every store's measures, then its state (the status line's and the exit code's part,
        as ``rmqtool_check_state``): a store that could not be read has no measure, only
        its UNKNOWN state and why."""
        return [*(m.record() for s in self.stores for m in s.measures),
                *({"record": "check_state", "store_path": s.store_path, "state": s.state.name, "unknown": s.unknown}
                  for s in self.stores)]

    def unknown_lines(self) -> list[str]:
        """Why each store that could not be read was not."""
        return [s.why_unknown for s in self.stores if s.unknown is not None]

    def status_line(self) -> str:
        return status_line(self)


def worst(states: Iterable[State]) -> State:
    return max(states, key=_RANK.__getitem__, default=State.OK)


def parse_thresholds(items: Iterable[str] | None, option: str) -> dict[str, float]:
    """``NAME=VALUE`` items (a measure name, a finite number) as a dict; a bad one is a usage
    error (nan compares false with every value and inf is never reached: either would turn
    the threshold off without a word)."""
    out = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or name not in MEASURES:
            raise UsageError(f"{option} {item!r}: give MEASURE=VALUE, MEASURE one of {', '.join(MEASURES)}")
        try:
            out[name] = float(value)
        except ValueError:
            raise UsageError(f"{option} {item!r}: {value!r} is not a number") from None
        if not math.isfinite(out[name]):
            raise UsageError(f"{option} {item!r}: give a finite number")
    return out


def judge(value, name: str, warn: dict, crit: dict) -> State:
    """At or above the critical threshold CRITICAL, at or above the warning one WARNING."""
    if value is None:
        return State.OK
    if name in crit and value >= crit[name]:
        return State.CRITICAL
    if name in warn and value >= warn[name]:
        return State.WARNING
    return State.OK


# --- one store ------------------------------------------------------------------------------------

@dataclasses.dataclass(slots=True)
class _Tail:
    """The last written segment's tail as the scanner read it."""
    end: int  # the written end (commit log offset)
    records: list[tuple[int, int, str, int, int]]  # (offset, size, topic, queue_id, store_timestamp)
    findings: list[Finding]
    start: int  # commit log offset the scan started at

    @property
    def newest_timestamp(self) -> int | None:
        return self.records[-1][4] if self.records else None

    def timestamp_from(self, offset: int) -> int | None:
        """The store time of the first tail record at or after ``offset`` (None: none)."""
        # records are in scan order, so by offset: a search, not a walk (it runs once a queue)
        i = bisect.bisect_left(self.records, offset, key=lambda r: r[0])
        return self.records[i][4] if i < len(self.records) else None


def _read_tail(view: StoreView, tail_bytes: int) -> _Tail:
    """Scan the last ``tail_bytes`` of the last written segment's data (sparse holes skipped
    unread; the scanner's resync finds the first record start in it)."""
    segments = view.segments
    last = last_written(segments)
    if last < 0:
        start = segments[0].base_offset if segments else 0
        return _Tail(start, [], [], start)
    seg = segments[last]
    data_end = last_nonzero_from(seg.path, 0) or 0
    start = max(data_end - tail_bytes, 0)
    records, found = [], []
    end, full, clean_end, seen = start, False, start, False
    if view.records_in_dledger:  # the data file's entries, each holding one record
        items = walk_entries([seg], records=True, check_crc=True, start=start)
    else:
        items = scan_segment(seg, is_last=True, start=start, check_crc=True)
    for r in items:
        if isinstance(r, Entry):  # DLedger keeps an entry whatever its record holds (no CRC): the log reaches its end
            end, seen, r = r.position + r.size, True, r.record
        bad = findings_of(r)
        found += bad
        if isinstance(r, Message):
            records.append((r.commit_log_offset, r.store_size, r.topic, r.queue_id, r.store_timestamp))
            end = r.position + r.store_size
            clean_end = end if not bad else clean_end
            seen = True
        elif isinstance(r, Blank):
            end, full, seen = r.position + r.size, r.valid, True
    if not seen:  # no record in the tail read (a segment whose first bytes are garbage): the end is
        # where the records before it end, the one written end every command gives
        return _Tail(view.written_end, records, found, seg.base_offset + start)
    if view.lock_holder is not None:
        # a running broker may be writing the bytes after its last whole record right now: what
        # follows the last clean record is judged on a later run, once more records follow it
        found = [f for f in found if f.offset is None or f.offset < clean_end]
    mapped = view.mapped_file_size or seg.size
    return _Tail(segment_end(seg.base_offset, end, full, mapped), records, found, seg.base_offset + start)


def _queue_ends(view: StoreView):
    """(queue, dispatched end, its last record's (offset, size)) of every queue holding units."""
    out = []
    for q in view.consume_queues(None).queues:
        if q.max_offset <= 0:
            continue
        unit = q.get(q.max_offset - 1)
        if unit is None or unit.is_fill:
            continue
        out.append((q, unit.commit_log_offset + unit.size, (unit.commit_log_offset, unit.size)))
    return out


def _index_end(view: StoreView) -> int | None:
    """The commit log offset of the last record the newest index file holds (its header's endPhyOffset)."""
    paths = view.index_files.paths
    if not paths:
        return None
    header = read_index_header(paths[-1])
    return header.end_phy_offset if header is not None and header.index_count > 1 else None


def dispatch_lag(tail, dispatched_end: int, timestamp_at) -> tuple[int, int | None]:
    """(bytes, ms) from a dispatched end to the written end: the bytes written after it, and
    the newest store time minus that of the record at it (the oldest not dispatched there).
    Any family's tail (``end``, ``start``, ``newest_timestamp``, ``timestamp_from``);
    ``timestamp_at(offset)``: the store time of the record at an offset the tail does not
    hold, or the first after a file's end there (None: no record starts there; the bytes
    still count, the time is not known)."""
    if dispatched_end >= tail.end:
        return 0, 0
    newest = tail.newest_timestamp
    ts = tail.timestamp_from(dispatched_end) if dispatched_end >= tail.start else None
    if ts is None:
        ts = timestamp_at(dispatched_end)
    return tail.end - dispatched_end, (newest - ts if newest is not None and ts is not None else None)


def _timestamps(reader: CommitLogReader):
    """The commit log's ``timestamp_at`` for :func:`dispatch_lag`."""
    def at(offset: int) -> int | None:
        try:  # a queue whose last record ended a file: the next record opens the next file
            return reader.read(reader.past_blank(offset), check_crc=False).store_timestamp
        except RmqError:
            return None
    return at


def _record_end(reader: CommitLogReader, offset: int) -> int:
    """One past the record at ``offset``; the offset itself when no record is readable there
    (an index ahead of a log cut short: nothing after it is waiting to be indexed)."""
    try:
        return offset + reader.read(offset, check_crc=False).store_size
    except RmqError:
        return offset


def _disk(view: StoreView) -> tuple[float, int, int]:
    dirs = [p for p in (view.root, *view.commit_log_directories, view.paths.consumequeue,
                        view.paths.batch_consumequeue, view.paths.index) if p.is_dir()]  # each commit log disk too
    outside = [d for d in view.commit_log_directories if not d.resolve().is_relative_to(view.root.resolve())]
    return disk_use(dirs, [view.root, *outside])


def disk_use(dirs: list, trees: list) -> tuple[float, int, int]:
    """(used ratio of the fullest file system holding one of ``dirs``, its free bytes, bytes
    the files under ``trees`` take on disk)."""
    worst_fs = None
    for d in dirs:
        st = os.statvfs(d)
        size = st.f_blocks * st.f_frsize
        free = st.f_bavail * st.f_frsize
        ratio = (size - st.f_bfree * st.f_frsize) / size if size else 0.0
        if worst_fs is None or ratio > worst_fs[0]:
            worst_fs = (ratio, free)
    allocated = 0
    counted = set()  # (device, inode): a file reached by two names (a symlink, a disk listed twice) counts once
    for top, _dirs, files in (walked for d in trees for walked in walk(d)):
        for name in files:
            try:
                st = os.stat(os.path.join(top, name))
            except OSError:
                continue  # a file the broker deleted meanwhile, or a broken link
            if (st.st_dev, st.st_ino) not in counted:
                counted.add((st.st_dev, st.st_ino))
                allocated += st.st_blocks * 512
    ratio, free = worst_fs or (0.0, 0)
    return round(ratio, 4), free, allocated


@one_listing()
def check_store(path, *, now: int, tail_bytes: int, recovery_rate: float) -> StoreCheck:
    view = as_view(path)  # a store path, or the view a caller opened (report)
    if view.paths.lock.is_dir():  # as the checkpoint's: no broker runs on it, none starts (recover says why)
        raise FormatError("a directory where the lock file should be: the broker cannot start on this store",
                          view.paths.lock)
    root = str(view.root)
    values: list[tuple] = []  # (measure, value, topic, queue_id, group)
    queues = _queue_ends(view)
    index_at = _index_end(view)
    findings: list[Finding] = []
    with CommitLogReader(view.commit_log) as reader:
        index_end = _record_end(reader, index_at) if index_at is not None else None
        queue_end = max((e for _q, e, _l in queues), default=None)  # the reput's position, as the queues show it
        tail = _read_tail(view, tail_bytes)
        timestamp_at = _timestamps(reader)
        findings = tail.findings
        values.append(("written_end", tail.end, None, None, None))
        if queue_end is not None:
            b, ms = dispatch_lag(tail, queue_end, timestamp_at)
            values += [("dispatch_lag_bytes", b, None, None, None), ("dispatch_lag_ms", ms, None, None, None)]
            if view.lock_holder is None:  # a running broker may be copying the record a unit names
                values.append(("dispatch_ahead_bytes", max(queue_end - tail.end, 0), None, None, None))
        for q, end, _last in queues:
            b, ms = dispatch_lag(tail, end, timestamp_at)
            values += [("queue_dispatch_lag_bytes", b, q.topic, q.queue_id, None),
                       ("queue_dispatch_lag_ms", ms, q.topic, q.queue_id, None)]
        if index_end is not None:
            b, ms = dispatch_lag(tail, index_end, timestamp_at)
            values += [("index_lag_bytes", b, None, None, None), ("index_lag_ms", ms, None, None, None)]
        if view.records_in_dledger:
            values += _dledger_recovery(view, tail, recovery_rate)
        else:
            found = detect_semantics(view.paths, view.segments).semantics  # the rules that wrote it; None: not shown
            values += _flush_and_recovery(view, tail, reader, queues, recovery_rate, found or V5)
    if tail.newest_timestamp is not None:
        values.append(("newest_age_ms", now - tail.newest_timestamp, None, None, None))
    values += _consumers(view)
    refused = int(bool(view.dledger.refused_at_load)) if view.records_in_dledger else _load_refused(view, found)
    values.append(("load_refused", refused, None, None, None))
    values.append(("repair_unfinished", int(view.unfinished is not None), None, None, None))
    ratio, free, allocated = _disk(view)
    values += [("disk_used_ratio", ratio, None, None, None), ("disk_free_bytes", free, None, None, None),
               ("store_allocated_bytes", allocated, None, None, None),
               ("tail_errors", sum(f.severity == Severity.ERROR for f in findings), None, None, None),
               ("tail_warnings", sum(f.severity == Severity.WARNING for f in findings), None, None, None)]
    return StoreCheck(root, [Measure(root, *v) for v in values], findings,
                      summary=DLEDGER_SUMMARY if view.records_in_dledger else SUMMARY)


def _flush_and_recovery(view: StoreView, tail: _Tail, reader: CommitLogReader, queues, rate: float,
                        semantics: str) -> list[tuple]:
    if not view.paths.checkpoint.exists():
        return []
    cp = loaded_checkpoint(view.paths.checkpoint)  # the fields the broker's start reads, whatever its size
    out = []
    newest = tail.newest_timestamp
    flushed = cp.physic_msg_timestamp
    if newest is not None and flushed > 0:  # 0: the checkpoint was never written with a flush time
        out.append(("unflushed_ms", max(newest - flushed, 0), None, None, None))
        # the newest record known stored at or before the flush time: a tail record, or a queue's last record
        known = [(r[0] + r[1], r[4]) for r in tail.records]
        for _q, end, last in queues:
            if end < tail.start:
                ts = reader.store_timestamp(*last)[0]
                if ts >= 0:
                    known.append((end, ts))
        flushed_to = max((end for end, ts in known if ts <= flushed), default=None)
        if flushed_to is not None:
            out.append(("unflushed_bytes", tail.end - flushed_to, None, None, None))
    # ``semantics``: V5 where the store does not show them, which accepts both magic codes
    start = abnormal_start(view.segments, semantics, cp.min_timestamp) if view.segments else -1
    base = view.segments[max(start, 0)].base_offset if view.segments else 0
    walked = max(tail.end - base, 0)
    out += [("recovery_bytes", walked, None, None, None),
            ("recovery_seconds", round(walked / rate, 3), None, None, None)]
    return out


def _dledger_recovery(view: StoreView, tail: _Tail, rate: float) -> list[tuple]:
    """What a start reads of a DLedger store: DLedger's recover walks the entries from the
    third-last data file to the end (DLedgerMmapFileStore.recover), whatever the abort file
    says. DLedger keeps its own flush position, not the checkpoint's flush time: no unflushed_*."""
    segments = view.segments
    base = segments[max(len(segments) - 3, 0)].base_offset if segments else 0
    walked = max(tail.end - base, 0)
    return [("recovery_bytes", walked, None, None, None),
            ("recovery_seconds", round(walked / rate, 3), None, None, None)]


def _load_refused(view: StoreView, found: str | None) -> int:
    """1 when the next start's load (recovery/outcome.load_only: file names and sizes, the
    queues' types) refuses the store under the rules that wrote it (``found``); under both
    rules when the store does not show which."""
    from rmqtool.recovery.outcome import load_only
    return int(all(not load_only(view, rules).loadable for rules in ((found,) if found else (V4, V5))))


def _consumers(view: StoreView) -> list[tuple]:
    """Consumer lag of each committed offset (offsets' rows; the queues already opened uncut)."""
    result = consumer_offsets(view, commit_log_max_offset=None)
    out = []
    for row in result.rows:
        if row.lag_messages is None:
            continue
        out.append(("lag_messages", row.lag_messages, row.topic, row.queue_id, row.group))
        if row.lag_ms is not None:
            out.append(("lag_ms", row.lag_ms, row.topic, row.queue_id, row.group))
    return out


def run_check(stores: list, *, warn: Iterable[str] | None = None, crit: Iterable[str] | None = None,
              now: int | None = None, tail_bytes: int = TAIL_BYTES, recovery_rate: float = RECOVERY_RATE,
              prometheus: str | os.PathLike | None = None, check_one=None) -> CheckResult:
    """Check each store; judge each measure against the thresholds (the defaults, then
    ``NAME=VALUE`` items overriding them); a store that cannot be read is UNKNOWN.
    With ``prometheus``, the textfile-collector file is written (atomically), unless the path
    lies inside a store read; when it is not written, ``not_written`` says why and the state
    is UNKNOWN at least. ``check_one(path, now=, tail_bytes=, recovery_rate=)`` checks one store
    (the command passes its family's: ``FamilyTools.check``); by default :func:`check_store`."""
    check_one = check_one or check_store
    now = now if now is not None else int(time.time() * 1000)  # the one wall-clock read; tests pass theirs
    warns = {**DEFAULT_WARN, **parse_thresholds(warn, "--warn")}
    crits = {**DEFAULT_CRIT, **parse_thresholds(crit, "--crit")}
    if not (math.isfinite(recovery_rate) and recovery_rate > 0):  # nan and inf: an estimate of nan or 0 s
        raise UsageError(f"--recovery-rate {recovery_rate}: give a finite number of bytes per second above 0")
    checks = []
    for path in stores:
        try:
            c = check_one(path, now=now, tail_bytes=tail_bytes, recovery_rate=recovery_rate)
        except RmqError as exc:  # Nagios: a store that cannot be read is UNKNOWN, not an rmqtool exit
            checks.append(StoreCheck(str(path), [], [], exc.one_line()))
            continue
        except OSError as exc:  # what the OS refuses that no reader named (a symlink loop): UNKNOWN too
            checks.append(StoreCheck(str(path), [], [], f"{exc.filename or path}: {exc.strerror or exc}"))
            continue
        c.measures = [dataclasses.replace(m, state=judge(m.value, m.measure, warns, crits)) for m in c.measures]
        checks.append(c)
    result = CheckResult(checks)
    if prometheus is not None:
        try:  # never among a store's files; a file that cannot be written still leaves the status said
            refuse_output_in_store(prometheus, "--prometheus", stores)
            write_prometheus(result, prometheus)
        except (RmqError, OSError) as exc:
            result.not_written = error_line(exc)[0]
    return result


# --- output ---------------------------------------------------------------------------------------

def status_line(result: CheckResult) -> str:
    """``RMQTOOL CHECK <STATE> - <what is wrong, or a summary> | <perfdata>``."""
    parts = []
    for s in result.stores:
        if s.unknown is not None:
            parts.append(s.why_unknown)
            continue
        bad = [m for m in s.measures if m.state != State.OK]
        if bad:
            parts.append(f"{s.store_path}: " + ", ".join(
                f"{m.state.name} {m.measure}{_where(m)}={_fmt(m.value)}" for m in bad))
            newest = next((f for f in reversed(s.findings) if f.severity != Severity.INFO), None)
            if newest is not None and any(m.measure.startswith("tail_") for m in bad):
                parts.append(f"newest tail finding: {newest.id} at {newest.path}:{newest.offset}")
        else:
            by = {m.measure: m.value for m in s.measures if m.topic is None and m.subject is None}
            parts.append(f"{s.store_path}: " + ", ".join(f"{words} {_fmt(by.get(name))}{unit}"
                                                         for words, name, unit in s.summary))
    if result.not_written is not None:
        parts.append(result.not_written)
    many = len(result.stores) > 1
    perf = " ".join(_perfdata(s, f"{n}_" if many else "") for n, s in enumerate(result.stores) if s.unknown is None)
    # names come from the store (groups, topics, file names): no control character may reach the
    # terminal or start a line of its own, and no "|" may pass for the start of the perfdata
    detail = terminal_safe("; ".join(parts)).replace("|", "\\x7c")
    return f"RMQTOOL CHECK {result.state.name} - {detail}" + (f" | {perf}" if perf else "")


_PERF_UNITS = {"bytes": "B", "ms": "ms", "seconds": "s"}


def _perfdata(s: StoreCheck, prefix: str) -> str:
    """Store-wide measures, and the worst queue's and group's, as Nagios perfdata (label=value[unit]);
    with several stores each label starts with the store's place on the command line (``0_``)."""
    best: dict[str, Measure] = {}
    for m in s.measures:
        if m.value is not None and (m.measure not in best or m.value > best[m.measure].value):
            best[m.measure] = m
    return " ".join(f"{prefix}{name}={_fmt(m.value)}{_PERF_UNITS.get(m.unit, '')}" for name, m in best.items())


def _where(m: Measure) -> str:
    bits = [b for b in (m.group, m.subject, m.topic, None if m.queue_id is None else str(m.queue_id)) if b is not None]
    return f"[{' '.join(bits)}]" if bits else ""


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:g}"
    return str(int(value))


def _label(value) -> str:
    r"""A label value as the exposition format quotes it (\\, \" and \n its only escapes: the
    collector drops a file with any other). A lone surrogate (a name's byte that is not UTF-8)
    cannot be written as UTF-8: it is its text, \\udcff, as the JSON rows show it."""
    text = str(value).encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def prometheus_text(result: CheckResult) -> str:
    """The node_exporter textfile-collector exposition: one gauge per measure, HELP and TYPE once."""
    by_name: dict[str, list[Measure]] = {}
    for s in result.stores:
        for m in s.measures:
            if m.value is not None and not (isinstance(m.value, float) and math.isnan(m.value)):
                by_name.setdefault(m.measure, []).append(m)
    lines = []
    for name, ms in by_name.items():
        metric = f"rmqtool_check_{name}"
        lines += [f"# HELP {metric} {MEASURES[name][1]} ({MEASURES[name][0]})", f"# TYPE {metric} gauge"]
        for m in ms:
            labels = {"store": m.store_path, "subject": m.subject, "topic": m.topic, "queue": m.queue_id,
                      "group": m.group}
            text = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items() if v is not None)
            lines.append(f"{metric}{{{text}}} {_fmt(m.value) if not isinstance(m.value, float) else repr(m.value)}")
    metric = "rmqtool_check_state"
    lines += [f"# HELP {metric} the store's Nagios state (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN)",
              f"# TYPE {metric} gauge"]
    lines += [f'{metric}{{store="{_label(s.store_path)}"}} {int(s.state)}' for s in result.stores]
    return "\n".join(lines) + "\n"


def write_prometheus(result: CheckResult, path: str | os.PathLike) -> None:
    """Write the file as the textfile collector wants it: a temporary file in the same
    directory, then renamed over the target, so the collector never reads half a file."""
    write_text_atomically(path, prometheus_text(result), "the Prometheus file")
