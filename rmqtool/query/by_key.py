"""Messages by key (``KEYS``) or client message id (``UNIQ_KEY``): the broker's queryMessage.

The broker (``IndexService.queryOffset`` + ``IndexFile.selectPhyOffset`` +
``DefaultMessageStore.queryMessage``, the same at 4.9.8 and 5.3.3):

* the index key is ``topic#key``; its hash is Java's ``String.hashCode`` made
  non-negative (``Integer.MIN_VALUE`` -> 0); the slot is ``hash % maxHashSlotNum``;
* index files are read newest first. A file is read only when its [beginTimestamp,
  endTimestamp] meets [begin, end]; after it, the walk stops when the file began before
  ``begin`` or ``maxNum`` offsets have been collected;
* within a file the slot names the newest entry; entries chain to older ones through
  prevIndex. An entry is collected when its keyHash equals the key's and its time
  (beginTimestamp + timeDiff whole seconds) lies in [begin, end]; the chain ends at
  prevIndex 0 or out of range, at a negative timeDiff, or at an entry older than begin;
* ``maxNum`` counts collected offsets, hash collisions included; the offsets are sorted
  and each one is read from the commit log (offsets past its end are skipped).

So the broker returns other keys that share the hash (``Aa`` and ``BB``) and never
returns what the index does not hold. rmqtool reads every collected offset and keeps a
message only when its topic is the one asked for and its KEYS (or UNIQ_KEY) really hold
the key. It also scans the commit log where the index does not reach (no index files, a
damaged file, messages past the last indexed one or before the first) and says so in the
result's notes; with ``index_only`` it answers from the index alone, as the broker does.
Messages found by scanning are matched on their real store time; the index knows only
whole seconds after each file's beginTimestamp, as the broker does.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import pathlib
from typing import Iterable, Iterator

from rmqtool.findings import INDEX_CHAIN_BROKEN, INDEX_FILE_UNREADABLE
from rmqtool.errors import CorruptData, NothingFound, RmqError, StoreAccessError, UsageError
from rmqtool.formats import properties as props
from rmqtool.formats.indexfile import build_key, index_key_hash, java_string_hash, slot_of
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.query.explain import Notes, Trace, trace_or_none
from rmqtool.store.config import read_config_file
from rmqtool.store.indexfile import IndexFile, list_index_files
from rmqtool.store.message import Message
from rmqtool.store.paths import StorePaths
from rmqtool.store.view import StoreView, as_view

LONG_MAX = 2**63 - 1
DEFAULT_MAX_NUM = 64  # MessageStoreConfig.maxMsgsNumBatch, the broker's cap on maxNum
# What a record that the broker indexes carries in its properties (buildIndex).
_INDEXED_MARKS = (f"{props.PROPERTY_KEYS}{props.NAME_VALUE_SEPARATOR}".encode(),
                  f"{props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX}{props.NAME_VALUE_SEPARATOR}".encode())


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    """One offset the broker's index walk collects (IndexService.queryOffset's list)."""
    topic: str
    phy_offset: int
    index_file: str
    entry: int  # entry number in the file
    slot: int
    time_read: int  # beginTimestamp + timeDiff * 1000, what the time window is tested on


@dataclasses.dataclass
class KeyQueryResult:
    messages: list[Message]  # kept, by commit log offset
    sources: dict[int, str]  # commit log offset -> "index" or "scan"
    candidates: dict[str, list[Candidate]]  # per topic, in the broker's order
    dropped: list[tuple[int, str]]  # (commit log offset, why)
    notes: Notes
    used_index: bool
    scanned: list[tuple[int, int | None]]  # commit log ranges scanned ([start, stop), None: to the end)
    more: bool | None = False  # more messages match than --max kept: seen and left out (True), or the
    # index stopped collecting at --max, as the broker does, so none could tell (None)


def matches_key(message: Message, key: str, uniq_key_only: bool = False) -> bool:
    """keyOrUniqKeyActuallyEquals: one of the message's KEYS, or its UNIQ_KEY, is the key."""
    if message.uniq_key == key:
        return True
    return not uniq_key_only and key in message.keys


# --- topics -----------------------------------------------------------------------------

def store_topics(store: str | os.PathLike) -> list[str]:
    """Every topic the store knows: consume queue directories, and config/topics.json."""
    paths = StorePaths(store)
    topics: set[str] = set()
    for base in (paths.consumequeue, paths.batch_consumequeue):
        try:
            topics.update(e.name for e in os.scandir(base) if e.is_dir())
        except (FileNotFoundError, NotADirectoryError):  # no queue directories: the topics are config's
            pass
        except OSError as exc:
            raise StoreAccessError(f"cannot list directory ({exc.strerror})", base) from None
    try:  # with the broker's .bak fallback; a config that cannot be read adds nothing
        doc = read_config_file(paths.config, "topics.json").document
    except RmqError:
        doc = None
    table = doc.get("topicConfigTable") if isinstance(doc, dict) else None
    if isinstance(table, dict):
        topics.update(str(t) for t in table)
    return sorted(topics)


# --- the index walk ---------------------------------------------------------------------

@dataclasses.dataclass
class _IndexFileState:
    file: IndexFile
    damaged: str | None = None  # why this file cannot be trusted to hold every key

    @property
    def covers(self) -> tuple[int, int] | None:
        """[beginPhyOffset, endPhyOffset]: the offsets of the first and last message indexed."""
        h = self.file.header
        if self.damaged or h.index_count <= 1:
            return None
        return h.begin_phy_offset, h.end_phy_offset


def _check_header(f: IndexFile) -> str | None:
    h = f.header
    if f.hash_slot_num is None:
        return "its slot count cannot be inferred"
    if h.index_count > (f.index_num or 0) or h.index_count < 0:
        return f"indexCount {h.index_count} is outside [0, {f.index_num}]"
    # Only the offsets must make a range: an endTimestamp before the beginTimestamp is what a
    # clock stepping back (NTP) leaves, and the broker reads such a file normally.
    if h.index_count > 1 and (h.begin_phy_offset > h.end_phy_offset or h.begin_phy_offset < 0):
        return "its header's begin and end commit log offsets do not make a range"
    return None


def is_time_matched(f: IndexFile, begin: int, end: int) -> bool:
    """IndexFile.isTimeMatched: the window meets the file's [beginTimestamp, endTimestamp]."""
    b, e = f.header.begin_timestamp, f.header.end_timestamp
    return (begin < b and end > e) or b <= begin <= e or b <= end <= e


def select_phy_offsets(files: list[IndexFile], topic: str, key: str, max_num: int, begin: int = 0,
                       end: int = LONG_MAX, trace: Trace | None = None,
                       damaged: dict[str, str] | None = None) -> list[Candidate]:
    """IndexService.queryOffset over files (oldest first), step for step: the offsets it
    collects, in its order. ``damaged`` receives file name -> why, for chains that break."""
    trace = trace_or_none(trace)
    index_key = build_key(topic, key)
    key_hash = index_key_hash(index_key)
    out: list[Candidate] = []
    if trace.enabled:
        trace(f"index key {index_key!r}: hashCode {java_string_hash(index_key)}, keyHash {key_hash}")
    for f in reversed(files):
        slots = f.hash_slot_num
        slot = slot_of(key_hash, slots)
        h = f.header
        if not is_time_matched(f, begin, end):
            if trace.enabled:
                trace(f"file {f.name}: [{h.begin_timestamp}, {h.end_timestamp}] misses the time window: not read")
        else:
            if trace.enabled:
                trace(f"file {f.name}: slot {slot} of {slots} holds entry {f.slot(slot)}")
            seen_findings = len(f.findings)
            for number, entry in f.lookup_chain(key_hash):
                if len(out) >= max_num:
                    break
                time_read = h.begin_timestamp + entry.time_diff * 1000
                same = entry.key_hash == key_hash
                in_window = begin <= time_read <= end
                if same and in_window:
                    out.append(Candidate(topic, entry.phy_offset, f.name, number, slot, time_read))
                if trace.enabled:
                    verdict = ("collected" if same and in_window else
                               "other key (keyHash differs)" if not same else "outside the time window")
                    trace(f"  entry {number}: keyHash {entry.key_hash}, phyOffset {entry.phy_offset}, "
                          f"time {time_read}, prevIndex {entry.prev_index}: {verdict}")
                problem = None
                if entry.key_hash < 0 or slot_of(entry.key_hash, slots) != slot:
                    problem = f"entry {number} on slot {slot}'s chain has keyHash {entry.key_hash} of another slot"
                elif h.index_count > 1 and not h.begin_phy_offset <= entry.phy_offset <= h.end_phy_offset:
                    problem = (f"entry {number} names offset {entry.phy_offset}, outside the file's "
                               f"[{h.begin_phy_offset}, {h.end_phy_offset}]")
                if problem and damaged is not None:
                    damaged.setdefault(f.name, problem)
                if time_read < begin:
                    break
            for finding in f.findings[seen_findings:]:
                if finding.id == INDEX_CHAIN_BROKEN and damaged is not None:
                    damaged.setdefault(f.name, finding.message)
        if h.begin_timestamp < begin:
            if trace.enabled:
                trace(f"file {f.name} begins before the window: older files are not read")
            break
        if len(out) >= max_num:
            if trace.enabled:
                trace(f"{max_num} offsets collected: older files are not read")
            break
    return out


def open_index(store: str | os.PathLike, notes: Notes, trace: Trace) -> list[_IndexFileState]:
    """Every readable index file, oldest first; what cannot be read becomes a note."""
    listing = list_index_files(store)
    files = listing.open_all()
    for finding in listing.findings:
        if finding.id == INDEX_FILE_UNREADABLE:
            notes.add(f"index file {pathlib.Path(finding.path).name} cannot be read ({finding.message}): "
                      f"its messages are found by scanning the commit log", trace)
        elif trace.enabled:
            trace(finding.one_line())
    states = []
    for f in files:
        problem = _check_header(f)
        if problem:
            notes.add(f"index file {f.name} is damaged ({problem}): its messages are found by scanning "
                      f"the commit log", trace)
            f.close()
            continue
        states.append(_IndexFileState(f))
        if trace.enabled:
            h = f.header
            trace(f"index file {f.name}: {f.hash_slot_num} slots, {f.index_num} entries, indexCount "
                  f"{h.index_count}; time [{h.begin_timestamp}, {h.end_timestamp}], commit log offsets "
                  f"[{h.begin_phy_offset}, {h.end_phy_offset}]")
            if h.index_count > 1 and h.end_timestamp < h.begin_timestamp:
                trace(f"index file {f.name}: its end timestamp is before its begin timestamp (the clock "
                      f"stepped back while it was written): read as the broker reads it")
    return states


# --- coverage and the scan --------------------------------------------------------------

def _merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def uncovered(covered: list[tuple[int, int]], start: int) -> list[tuple[int, int | None]]:
    """Commit log ranges to scan, from ``start`` on, given inclusive covered ranges of
    record offsets. Each range starts at a record start (a covered range's last offset is
    one), so the scan can begin there; records inside covered ranges are skipped later."""
    gaps: list[tuple[int, int | None]] = []
    pos = start
    for lo, hi in covered:
        if hi < pos:
            continue
        if lo > pos:
            gaps.append((pos, lo))
        pos = max(pos, hi)
    gaps.append((pos, None))
    return gaps


def _in_covered(offset: int, covered: list[tuple[int, int]]) -> bool:
    return any(lo <= offset <= hi for lo, hi in covered)


@dataclasses.dataclass
class _ScanStats:
    records: int = 0  # records read in the uncovered ranges
    indexable: int = 0  # of them, records that carry KEYS or UNIQ_KEY, outside ``damaged``
    damaged: list = dataclasses.field(default_factory=list)  # damaged index files' ranges: their own note says so
    first: int | None = None  # the first and last of the ``indexable``
    last: int | None = None


def _scan_records(reader: CommitLogReader, start: int, stop: int | None, needle: bytes | None,
                  stats: _ScanStats, covered: list[tuple[int, int]], *,
                  zeros_end: bool = False) -> Iterator[Message]:
    """Messages in [start, stop) outside ``covered``, from the one damage-tolerant scanner.

    With a ``needle`` (the key's bytes) the scanner decodes only records that hold it and
    hops over the rest by totalSize, so a scan for one key costs little more than a hop;
    the stats then count only those records."""
    for result in reader.commit_log.scan(start, stop, check_crc=True, needle=needle, zeros_end=zeros_end):
        if not isinstance(result, Message):
            continue
        offset = result.commit_log_offset
        if covered and _in_covered(offset, covered):
            continue
        stats.records += 1
        if any(mark in result.properties_raw for mark in _INDEXED_MARKS) and not _in_covered(offset, stats.damaged):
            stats.indexable += 1
            if stats.first is None:
                stats.first = offset
            stats.last = offset
        yield result


# --- the query --------------------------------------------------------------------------

def _check_arguments(key: str, max_num: int, begin: int, end: int) -> None:
    if not key:
        raise UsageError("the key is empty")
    if max_num <= 0:
        raise UsageError(f"--max must be at least 1, not {max_num}")
    if begin > end:
        raise UsageError(f"the time window is empty: begin {begin} is after end {end}")


def query_by_key(store: str | os.PathLike | StoreView, key: str, *, topic: str | None = None, begin: int = 0,
                 end: int = LONG_MAX, max_num: int = DEFAULT_MAX_NUM, uniq_key: bool = False,
                 use_index: bool = True, index_only: bool = False, commit_log_end: int | None = None,
                 index_files_gone: frozenset = frozenset(), trace: Trace | None = None) -> KeyQueryResult:
    """Messages of ``topic`` (every topic when None) whose KEYS or UNIQ_KEY is ``key``
    (``uniq_key``: whose UNIQ_KEY is), stored in [begin, end], at most ``max_num``, the
    newest ones, in commit log order.

    ``use_index=False`` scans the whole commit log. ``index_only`` answers from the index
    alone, as the broker does. ``commit_log_end`` treats the commit log as ending there,
    as a broker does after a recovery truncated it (the bytes after stay on disk), and
    ``index_files_gone`` (names) as gone, as its start destroys them: what they covered is
    scanned, as its dispatch indexes those messages again (none, index only)."""
    _check_arguments(key, max_num, begin, end)
    trace = trace_or_none(trace)
    view = as_view(store)
    root = view.root
    notes = Notes()
    topics = [topic] if topic is not None else store_topics(root)
    if not topics and use_index:  # the index's keys are topic#key: without a topic no slot can be asked
        notes.add("no topic known (no consume queue directory nor config/topics.json): the index is asked "
                  "by topic#key, give the topic with -t", trace)
    if trace.enabled:
        trace(f"query {'UNIQ_KEY' if uniq_key else 'key'} {key!r} in "
              f"{'topic ' + repr(topic) if topic is not None else f'{len(topics)} topic(s)'}; "
              f"time [{begin}, {end}], max {max_num}")
    with CommitLogReader(view.commit_log) as reader:
        states = [s for s in open_index(root, notes, trace) if s.file.name not in index_files_gone] \
            if use_index else []
        try:
            if not use_index:
                notes.add("--no-index: scanning the whole commit log", trace)
            elif not states:
                if index_only:
                    notes.add("no readable index files: nothing to answer from (index only)", trace)
                else:
                    notes.add(f"no readable index files in {StorePaths(root).index}: scanning the whole commit log",
                              trace)
            if use_index and states:
                return _indexed(reader, states, topics, key, topic, begin, end, max_num, uniq_key, index_only,
                                commit_log_end, notes, trace)
            if use_index and index_only:
                return KeyQueryResult([], {}, {}, [], notes, False, [])
            return _scanned(reader, key, topic, begin, end, max_num, uniq_key, commit_log_end, notes, trace)
        finally:
            for state in states:
                state.file.close()


def _scanned(reader, key, topic, begin, end, max_num, uniq_key, commit_log_end, notes, trace) -> KeyQueryResult:
    stats = _ScanStats()
    newest: collections.deque[Message] = collections.deque(maxlen=max_num)
    seen = 0
    for message in _matching_scan(reader, reader.min_offset, commit_log_end, key, topic, begin, end, uniq_key,
                                  stats, [], trace):
        newest.append(message)
        seen += 1
    if trace.enabled:
        trace(f"scanned the commit log: {stats.records} record(s) hold the key's bytes; {len(newest)} kept "
              f"(the newest {max_num} at most)")
    messages = list(newest)
    return KeyQueryResult(messages, {m.commit_log_offset: "scan" for m in messages}, {}, [], notes, False,
                          [(reader.min_offset, commit_log_end)], more=seen > max_num)


def _matching_scan(reader, start, stop, key, topic, begin, end, uniq_key, stats, covered, trace, *,
                   prefilter: bool = True) -> Iterator[Message]:
    """Messages in [start, stop) that hold the key; ``prefilter``: decode only records holding its bytes."""
    needle = key.encode("utf-8") if prefilter and "\ufffd" not in key else None
    # past the index's end (an open range) the records appended since are wanted: the scan
    # stops at zeros, as the broker does, instead of checking the rest of the segment
    open_range = stop is None and bool(covered)
    for message in _scan_records(reader, start, stop, needle, stats, covered, zeros_end=open_range):
        if topic is not None and message.topic != topic:
            continue
        if not matches_key(message, key, uniq_key):
            continue
        if not begin <= message.store_timestamp <= end:
            if trace.enabled:
                trace(f"scan: offset {message.commit_log_offset} holds the key but was stored at "
                      f"{message.store_timestamp}, outside the window")
            continue
        if trace.enabled:
            trace(f"scan: offset {message.commit_log_offset} ({message.topic}): kept")
        yield message


def _indexed(reader, states, topics, key, topic, begin, end, max_num, uniq_key, index_only, commit_log_end,
             notes, trace) -> KeyQueryResult:
    files = [s.file for s in states]
    damaged: dict[str, str] = {}
    candidates: dict[str, list[Candidate]] = {}
    for t in topics:
        with trace.section(f"topic {t!r}:") if trace.enabled else contextlib.nullcontext():
            candidates[t] = select_phy_offsets(files, t, key, max_num, begin, end, trace, damaged)
    for state in states:
        if state.file.name in damaged and not state.damaged:
            state.damaged = damaged[state.file.name]
            then = ("the answer may miss messages (index only)" if index_only
                    else "its commit log range is scanned as well")
            notes.add(f"index file {state.file.name} is damaged ({state.damaged}): {then}", trace)
    kept: dict[int, Message] = {}
    sources: dict[int, str] = {}
    dropped: list[tuple[int, str]] = []
    for t, found in candidates.items():
        _read_candidates(reader, t, found, key, uniq_key, commit_log_end, kept, sources, dropped, trace)
    scanned: list[tuple[int, int | None]] = []
    if not index_only:
        covered = _merge(c for c in (s.covers for s in states) if c is not None)
        gaps = uncovered(covered, reader.min_offset)
        if commit_log_end is not None:
            gaps = [(lo, commit_log_end if hi is None else min(hi, commit_log_end))
                    for lo, hi in gaps if lo < commit_log_end]
        if trace.enabled:
            trace(f"the index covers commit log offsets {covered or 'nothing'}; scanning what it does not: "
                  f"{[(lo, 'end' if hi is None else hi) for lo, hi in gaps]}")
        stats = _ScanStats(damaged=[(s.file.header.begin_phy_offset, s.file.header.end_phy_offset)
                                    for s in states if s.damaged])
        cutoffs = {t: min(c.phy_offset for c in found) for t, found in candidates.items() if len(found) >= max_num}
        for lo, hi in gaps:
            scanned.append((lo, hi))
            # every record of a gap is decoded, to count those with keys the index misses
            for message in _matching_scan(reader, lo, hi, key, topic, begin, end, uniq_key, stats, covered, trace,
                                          prefilter=False):
                offset = message.commit_log_offset
                cutoff = cutoffs.get(message.topic)
                if cutoff is not None and offset < cutoff:
                    dropped.append((offset, f"found by scanning, but older than the oldest of the {max_num} "
                                            f"offsets the index gave"))
                    continue
                if offset not in kept:
                    kept[offset] = message
                    sources[offset] = "scan"
        if stats.indexable:
            notes.add(f"{stats.indexable} message(s) with keys in commit log offsets [{stats.first}, {stats.last}] "
                      f"are not in the index: scanned them", trace)
    ordered = sorted(kept)
    if len(ordered) > max_num:
        for offset in ordered[:-max_num]:
            why = f"more than --max {max_num} messages: only the newest are kept"
            if trace.enabled:
                trace(f"offset {offset}: dropped: {why}")
            dropped.append((offset, why))
            sources.pop(offset, None)
        ordered = ordered[-max_num:]
    more = any(why.startswith(("more than --max", "found by scanning, but older")) for _, why in dropped) or (
        None if any(len(found) >= max_num for found in candidates.values()) else False)
    return KeyQueryResult([kept[o] for o in ordered], sources, candidates, dropped, notes, True, scanned, more=more)


def _read_candidates(reader: CommitLogReader, topic: str, found: list[Candidate], key: str, uniq_key: bool,
                     commit_log_end: int | None, kept: dict, sources: dict, dropped: list, trace: Trace) -> None:
    """queryMessage's second half: the offsets sorted, each read; then rmqtool's check."""
    for c in sorted(found, key=lambda c: c.phy_offset):
        offset = c.phy_offset
        if commit_log_end is not None and offset >= commit_log_end:
            why = f"past the commit log's end {commit_log_end}"
        else:
            try:
                message = reader.read(offset)
            except (NothingFound, CorruptData) as exc:
                why = f"no message there ({exc.message})"
            else:
                why = _mismatch(message, topic, key, uniq_key)
                if why is None:
                    if trace.enabled:
                        trace(f"offset {offset} (index {c.index_file} entry {c.entry}): kept: {_describe(message)}")
                    kept.setdefault(offset, message)
                    sources.setdefault(offset, "index")
                    continue
        if trace.enabled:
            trace(f"offset {offset} (index {c.index_file} entry {c.entry}): dropped: {why}")
        dropped.append((offset, why))


def _describe(m: Message) -> str:
    return f"topic {m.topic!r}, KEYS {' '.join(m.keys)!r}, UNIQ_KEY {m.uniq_key!r}"


def _mismatch(m: Message, topic: str, key: str, uniq_key: bool) -> str | None:
    if m.topic != topic:
        return f"hash collision: the message is in topic {m.topic!r}"
    if not matches_key(m, key, uniq_key):
        return f"hash collision: {_describe(m)}"
    return None
