"""Two stores side by side (``rmqtool diff STORE_A STORE_B``): a master and its slave, or a
store and its copy, as a failover runbook needs them before it promotes the slave.

The commit logs are compared in large blocks over the range both hold (up to each side's
written end, so a sparse or zero-extended tail reads as the scanner reads it); only around a
difference are records decoded, with the one scanner (``store/commitlog.scan_segment``; a
DLedger store's data files, which a follower holds byte for byte as its leader does, with the
entry walk, ``store/dledger.walk_entries``: a difference names its entry).
Equal bytes mean equal records: a record holds its own commit log offset (physicalOffset),
so the same bytes at the same offset are the same record on both sides. Messages in the
differing ranges, and in what only one side holds (a head or a tail), are matched by commit
log offset, then by UNIQ_KEY (a slave that re-synced from another offset holds the same
messages elsewhere); those left are on one side only.

Then the queues whose ranges differ (min/max queue offset, as the next start's load leaves
them: as ``offsets`` gives them), the
checkpoint's fields and config/*.json (topics, subscription groups, consumer offsets per
group/topic/queue, any other file key by key). Rows are of one kind (``diff``), each with a
``record``: ``commit_log_divergence``, ``message_differs``, ``message_only_in``,
``queue_range``, ``checkpoint_field``, ``config_entry``, then one ``summary``. Read only.

Stores in controller mode (both with an ``epochFileCheckpoint``): ``epoch_entry`` rows for the
epochs the two loaded caches disagree on, and one ``epoch_sync`` row, taking A as the master and
B as its slave: where B's commit log is cut at its next sync, as ``AutoSwitchHAClient.doTruncate``
computes it from the two caches and both commit logs' max offsets (each store's recovered end,
the broker's ``getMaxPhyOffset`` after its next start). ``epoch_sync`` is a prediction, not a
difference: it is not counted, so two equal stores stay equal (exit 0).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Iterator

from rmqtool.errors import FormatError, RmqError, StoreNotFound
from rmqtool.formats import config as config_format
from rmqtool.recovery.loaded_end import loaded_queues, simulate_for_info
from rmqtool.report.records import message_record
from rmqtool.store.dledger import Entry, walk_entries
from rmqtool.store.checkpoint import read_checkpoint
from rmqtool.store.commitlog import Blank, Corrupt, scan_segment
from rmqtool.store.commitlog_paths import CommitLogPaths
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.config import read_config_dir
from rmqtool.store.controller import (NEW_REPLICA, NO_CONSISTENT_POINT, NOTHING_TO_TRUNCATE, TRUNCATES,
                                      load_epoch_cache, offset_aligned, slave_sync)
from rmqtool.store.message import Message
from rmqtool.store.view import StoreView, open_store

BLOCK = 1 << 20  # bytes compared at once: one memcmp each, a numpy pass only in a block that differs
BACK = 64 << 10  # how far before a difference a scan starts first, widened until it finds the record
SIDES = ("a", "b")
# a message's fields that say which file it was read from, not what it is
_WHERE = ("file", "file_position")
CHECKPOINT_FIELDS = ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp",
                     "master_flushed_offset", "confirm_phy_offset")
# the tables of the broker's config files, and which column their keys fill
_TABLE_KEYS = {("topics.json", "topicConfigTable"): "topic",
               ("subscriptionGroup.json", "subscriptionGroupTable"): "group"}
CONSUMER_OFFSET_FILE = "consumerOffset.json"

ROW_FIELDS = ("record", "side", "commit_log_offset", "topic", "queue_id", "group", "file", "field", "a", "b",
              "reason")


class StoreDiff:
    """Two stores' differences: ``rows`` made as they are read (the summary last); ``equal``
    is known once they are out."""

    kind = "diff"  # its rows' kind (report/columns.VIEWS)

    def __init__(self, a: StoreView, b: StoreView):
        self.a, self.b = a, b
        self.equal: bool | None = None

    @property
    def rows(self) -> Iterator[dict]:
        return _diff_rows(self)


def _row(record: str, **fields) -> dict:
    row = dict.fromkeys(ROW_FIELDS)
    row["record"] = record
    row.update(fields)
    return row


# --- the commit logs --------------------------------------------------------------------------
@dataclasses.dataclass
class _Log:
    """One side's commit log: its range and a reader."""
    view: StoreView
    reader: CommitLogReader | None
    start: int  # the first segment's base offset
    end: int  # the written end

    @classmethod
    def of(cls, view: StoreView) -> "_Log":
        # a DLedger store's commit log is its data files: entries (header and record) at the same offsets
        if not (view.has_commit_log or view.records_in_dledger) or not view.segments:
            return cls(view, None, 0, 0)
        return cls(view, CommitLogReader(view.commit_log), view.segments[0].base_offset, view.written_end)

    def read(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``offset``, not past a file's end (b"": no file holds it)."""
        return self.reader.get_data(offset, length, self.end) if self.reader is not None else b""

    def next_file_after(self, offset: int) -> int | None:
        """The base offset of the first file past ``offset`` (None: none)."""
        if self.reader is None:
            return None
        return min((s.base_offset for s in self.view.segments if s.base_offset > offset), default=None)

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()


def _span(r) -> tuple[int, int]:
    if isinstance(r, Message):
        return r.commit_log_offset, r.store_size
    if isinstance(r, Entry):  # a DLedger entry: its header, then its record
        return r.pos, r.size
    return r.offset, r.size


def differing_ranges(a, b, lo: int, hi: int) -> list[tuple[int, int]]:
    """[start, end) byte ranges of [lo, hi) where the two logs differ (a range one side has no
    file for counts as differing), merged where they touch. ``a`` and ``b``: a log of any
    family (``read(offset, length)``, ``next_file_after(offset)``)."""
    import numpy as np  # numpy only when a block differs: not at the CLI's start

    out: list[tuple[int, int]] = []
    pos = lo
    while pos < hi:
        want = min(BLOCK, hi - pos)
        x, y = a.read(pos, want), b.read(pos, want)
        n = min(len(x), len(y))
        if n == 0:  # one side (or both) has no file here: what the other holds differs
            n = max(len(x), len(y))
            if n == 0:  # neither: on to the next file either side has
                nxt = [n for log in (a, b) if (n := log.next_file_after(pos)) is not None]
                pos = min(nxt + [hi])
                continue
            first, last = pos, pos + n
        elif x[:n] == y[:n]:
            pos += n
            continue
        else:
            unequal = np.frombuffer(x, np.uint8, n) != np.frombuffer(y, np.uint8, n)
            first, last = pos + int(unequal.argmax()), pos + n - int(unequal[::-1].argmax())
        if out and out[-1][1] >= first:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
        pos += n
    return out


def records_over(log: _Log, begin: int, end: int, *, check_crc: bool = True) -> Iterator:
    """The scanner's results (messages, blanks, corrupt regions) of one side that overlap
    [begin, end): each segment's scan starts a little before ``begin`` and steps back until
    it holds the record ``begin`` lies in."""
    if log.reader is None:
        return
    segments = log.view.segments
    for i, seg in enumerate(segments):
        seg_end = seg.base_offset + seg.size
        if seg_end <= begin or seg.base_offset >= end:
            continue
        is_last = i == len(segments) - 1
        s, e = max(begin, seg.base_offset) - seg.base_offset, min(end, seg_end) - seg.base_offset
        back = BACK
        while True:
            start = max(0, s - back)
            if log.view.records_in_dledger:  # entries, each its header and one record
                results = (r for r in walk_entries([seg], records=True, check_crc=check_crc, start=start)
                           if _span(r)[0] < seg.base_offset + e)
            else:
                results = scan_segment(seg, is_last=is_last, start=start, end=e, check_crc=check_crc)
            first = next(results, None)
            if first is None or start == 0 or _span(first)[0] <= seg.base_offset + s:
                break
            back *= 8
        for r in ([first] if first is not None else []), results:
            for x in r:
                off, size = _span(x)
                if off + max(size, 1) > begin and off < end:
                    yield x


def record_at(log: _Log, offset: int):
    """The scanner's result that holds ``offset`` on one side, or None."""
    return item_holding(records_over(log, offset, offset + 1), offset, _span)


def item_holding(items, offset: int, span):
    """The first of ``items`` whose bytes (``span(item)``: offset, size) hold ``offset``, or None;
    any family's scanner results."""
    for item in items:
        off, size = span(item)
        if off <= offset < off + max(size, 1):
            return item
    return None


def _kind(r) -> str | None:
    kinds = ((Entry, "entry"), (Message, "message"), (Blank, "blank"), (Corrupt, "corrupt"))
    return None if r is None else next((k for t, k in kinds if isinstance(r, t)), type(r).__name__)


def _fields(m: Message) -> dict:
    row = message_record(m)
    for k in _WHERE:
        row.pop(k, None)
    return row


_ENTRY_FIELDS = ("magic", "size", "index", "term", "pos", "channel", "chain_crc", "body_crc", "body_length")


def differing_fields(x, y) -> tuple[list[str], dict, dict]:
    """Which fields of two records at one offset differ, and their values on each side (of two
    DLedger entries, their header's as ``entry_<field>``, then their records')."""
    if isinstance(x, Entry) and isinstance(y, Entry):
        names = [f"entry_{f}" for f in _ENTRY_FIELDS if getattr(x, f) != getattr(y, f)]
        va, vb = ({n: getattr(e, n[len("entry_"):]) for n in names} for e in (x, y))
        more, ma, mb = differing_fields(x.record, y.record)
        if more == ["store_size"] and ma == mb:  # two records alike in kind and size: nothing more to say
            more = []
        return names + more, {**va, **{k: ma[k] for k in more}}, {**vb, **{k: mb[k] for k in more}}
    x, y = (r.record if isinstance(r, Entry) else r for r in (x, y))
    if isinstance(x, Message) and isinstance(y, Message):
        fx, fy = _fields(x), _fields(y)
        names = [k for k in dict.fromkeys([*fx, *fy]) if fx.get(k) != fy.get(k)]
        return names, {k: fx.get(k) for k in names}, {k: fy.get(k) for k in names}
    kx, ky = _kind(x), _kind(y)
    if kx != ky:
        return ["record"], {"record": kx}, {"record": ky}
    sx, sy = _span(x) if x is not None else None, _span(y) if y is not None else None
    return ["store_size"], {"store_size": sx and sx[1]}, {"store_size": sy and sy[1]}


@dataclasses.dataclass(slots=True, frozen=True)
class _Msg:
    """What matching needs of a message (not its body: a log that differs throughout holds
    all its messages here at once)."""
    offset: int
    uniq_key: str | None
    topic: str
    queue_id: int
    queue_offset: int
    store_size: int
    store_timestamp: int


def _messages(log: _Log, ranges: list[tuple[int, int]]) -> dict[int, _Msg]:
    out: dict[int, _Msg] = {}
    for begin, end in ranges:
        for r in records_over(log, begin, end, check_crc=False):  # CRCs only where fields are compared
            r = r.record if isinstance(r, Entry) else r
            if isinstance(r, Message) and r.commit_log_offset not in out:
                out[r.commit_log_offset] = _Msg(r.commit_log_offset, r.uniq_key, r.topic, r.queue_id,
                                                r.queue_offset, r.store_size, r.store_timestamp)
    return out


def _same_message(x: _Msg, y: _Msg) -> bool:
    """Two records at one offset are one message (changed) when they carry one UNIQ_KEY, or
    where one has none (a damaged property string) when they hold one place in one queue
    and have one size."""
    if x.uniq_key is not None and y.uniq_key is not None:
        return x.uniq_key == y.uniq_key
    return (x.topic, x.queue_id, x.queue_offset, x.store_size) == (y.topic, y.queue_id, y.queue_offset, y.store_size)


def _only_in_row(side: str, m: _Msg) -> dict:
    return _row("message_only_in", side=side, commit_log_offset=m.offset, topic=m.topic, queue_id=m.queue_id,
                queue_offset=m.queue_offset, uniq_key=m.uniq_key, store_size=m.store_size,
                store_timestamp=m.store_timestamp)


def alone_ranges(a, b) -> dict[str, list[tuple[int, int]]]:
    """What one side holds alone: a head before the other's first file, a tail past the other's
    end (any family's log: ``start``, ``end``)."""
    alone: dict[str, list[tuple[int, int]]] = {side: [] for side in SIDES}
    for side, log, other in (("a", a, b), ("b", b, a)):
        if log.end <= log.start:
            continue
        if other.end <= other.start:  # the other side has no commit log at all
            alone[side].append((log.start, log.end))
            continue
        if log.start < other.start:
            alone[side].append((log.start, min(log.end, other.start)))
        if log.end > other.end:
            alone[side].append((max(log.start, other.end), log.end))
    return alone


def log_parting(a, b, messages_of, item_at, span, differing, row, where: str,
                summary: dict) -> tuple[dict, list[dict], int | None]:
    """Where two logs part (any family's: ``start``, ``end``, ``read``, ``next_file_after``):
    (each side's messages of the ranges that differ or that it holds alone, offset -> message,
    ``messages_of(log, ranges)``; the divergence rows in offset order; the offset of the first
    different record, None: none). A row a range one side holds alone (``missing_head`` before
    the other's first file, ``missing_tail`` past its end: from the record that holds its first
    byte, with the bytes and messages past it), and one for the first range that differs
    (``different_record``: the fields that differ). ``item_at(log, offset)`` and ``span(item)``
    read a side's records, ``differing(x, y)`` compares two, ``row(**fields)`` makes a row,
    ``where`` names the offset field; ``summary`` gets the first divergence's offset and each
    side's written end."""
    logs = {"a": a, "b": b}
    lo, hi = max(a.start, b.start), min(a.end, b.end)
    ranges = differing_ranges(a, b, lo, hi) if lo < hi else []
    alone = alone_ranges(a, b)
    # every message of a differing or one-sided range, decoded once
    found = {side: messages_of(logs[side], ranges + alone[side]) for side in SIDES}
    out = []
    for side in SIDES:
        for begin, end in alone[side]:
            head = begin < max(a.start, b.start) and end <= max(a.start, b.start)
            item = item_at(logs[side], begin) if not head else None
            at = span(item)[0] if item is not None else begin
            out.append(row(side=side, **{where: at}, reason="missing_head" if head else "missing_tail",
                           first_different_byte=begin, bytes_past=end - at,
                           messages_past=sum(1 for offset in found[side] if at <= offset < end)))
    if ranges:
        first = ranges[0][0]
        x, y = item_at(a, first), item_at(b, first)
        names, va, vb = differing(x, y)
        at = min((span(i)[0] for i in (x, y) if i is not None), default=first)
        out.append(row(**{where: at}, reason="different_record", first_different_byte=first, fields=names,
                       field=", ".join(names), a=va, b=vb))
    first_record = next((d[where] for d in out if d["reason"] == "different_record"), None)
    out.sort(key=lambda r: (r[where], r["first_different_byte"]))
    summary[where] = out[0][where] if out else None
    summary["written_end_a"], summary["written_end_b"] = a.end, b.end
    return found, out, first_record


def compare_commit_logs(a: _Log, b: _Log, summary: dict) -> Iterator[dict]:
    """The divergence rows, then the message rows, as they are found; the summary's commit
    log part goes into ``summary`` once the last row is out."""
    found, divergences, first_record = log_parting(a, b, _messages, record_at, _span, differing_fields,
                                                   lambda **f: _row("commit_log_divergence", **f),
                                                   "commit_log_offset", summary)
    yield from divergences

    # the messages found, matched by offset, then by UNIQ_KEY
    left_a, left_b = found["a"], found["b"]
    for offset, ma in match_by_offset(left_a, left_b, _same_message):
        if offset == first_record:  # the divergence row names its fields already
            continue
        names, va, vb = differing_fields(a.reader.read(offset), b.reader.read(offset))
        if names:
            yield _row("message_differs", commit_log_offset=offset, topic=ma.topic, queue_id=ma.queue_id,
                       queue_offset=ma.queue_offset, uniq_key=ma.uniq_key, fields=names, field=", ".join(names),
                       a=va, b=vb)
    matched = match_by_key(left_a, left_b, lambda m: m.uniq_key)
    summary["messages_only_in_a"], summary["messages_only_in_b"] = len(left_a), len(left_b)
    summary["messages_matched_by_uniq_key"] = matched
    for side, left in (("a", left_a), ("b", left_b)):
        for offset in sorted(left):
            yield _only_in_row(side, left[offset])


def match_by_offset(left_a: dict, left_b: dict, same) -> list[tuple[int, object]]:
    """Messages left on both sides (offset -> message) at one offset that ``same(a, b)`` says
    are one message (changed or not), each taken off both sides; (offset, A's), in offset order."""
    out = []
    for offset in sorted(left_a.keys() & left_b.keys()):
        if same(left_a[offset], left_b[offset]):
            out.append((offset, left_a.pop(offset)))
            del left_b[offset]
    return out


def match_by_key(left_a: dict, left_b: dict, key) -> int:
    """Messages left on both sides (offset -> message) that one ``key`` (UNIQ_KEY, a QMQ message
    id; None: none) names, each taken off both sides, A's in offset order matched with B's
    first; how many were matched."""
    by_key: dict = {}
    for offset, m in left_b.items():
        if key(m) is not None:
            by_key.setdefault(key(m), []).append(offset)
    matched = 0
    for offset in sorted(left_a):
        k = key(left_a[offset])
        if k is not None and by_key.get(k):
            del left_b[by_key[k].pop(0)], left_a[offset]
            matched += 1
    return matched


# --- queues, checkpoint, config ---------------------------------------------------------------
def queue_ranges(view: StoreView) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, queue id) -> (min, max queue offset), each queue as the next start leaves it
    (recovery/loaded_end.loaded_queues, as ``offsets``, ``report`` and ``verify`` read them:
    units a recovery left past its cut are not the queue's, what its dispatch puts back is)."""
    has_log = view.has_commit_log and bool(view.segments)
    queues = loaded_queues(view)
    low = view.segments[0].base_offset if has_log else 0
    return {(q.topic, q.queue_id): (q.min_offset(low), q.max_offset) for q in queues.queues}


def compare_queues(a: StoreView, b: StoreView) -> list[dict]:
    qa, qb = queue_ranges(a), queue_ranges(b)
    rows = []
    for key in sorted(qa.keys() | qb.keys()):
        ra, rb = qa.get(key, (None, None)), qb.get(key, (None, None))
        for i, name in enumerate(("min_queue_offset", "max_queue_offset")):
            if ra[i] != rb[i]:
                rows.append(_row("queue_range", topic=key[0], queue_id=key[1], field=name, a=ra[i], b=rb[i]))
    return rows


def _checkpoint(view: StoreView):
    """(the checkpoint, None) or (None, why it is not read): none there, or not one the broker
    reads (its fields then compare as null, the reason said: the rest of the diff still runs)."""
    try:
        return read_checkpoint(view.paths.checkpoint), None
    except StoreNotFound:
        return None, "no checkpoint"
    except FormatError as exc:
        return None, exc.message


def compare_checkpoints(a: StoreView, b: StoreView) -> list[dict]:
    (ca, why_a), (cb, why_b) = _checkpoint(a), _checkpoint(b)
    why = "; ".join(f"{side}: {w}" for side, w in (("a", why_a), ("b", why_b)) if w) or None
    rows = []
    for name in CHECKPOINT_FIELDS:
        va, vb = getattr(ca, name, None), getattr(cb, name, None)
        if va != vb:
            rows.append(_row("checkpoint_field", file="checkpoint", field=name, a=va, b=vb, reason=why))
    if a.records_in_dledger or b.records_in_dledger:  # DLedger's own: what each replica committed, its term, its vote
        da, db = (v.dledger.checkpoint if v.records_in_dledger else None for v in (a, b))
        home = (a if a.records_in_dledger else b).dledger.home.name
        for name, file in (("committed_index", "checkpoint"), ("end_index", "checkpoint"), ("curr_term", "currterm"),
                           ("vote_leader", "currterm")):
            va, vb = getattr(da, name, None), getattr(db, name, None)
            if va != vb:
                rows.append(_row("checkpoint_field", file=f"{home}/{file}", field=f"dledger_{name}", a=va, b=vb))
    return rows


def _value_diff(x, y, path: tuple) -> Iterator[tuple[tuple, object, object]]:
    """(path, a, b) where two documents differ: an object key on one side only is one entry."""
    if isinstance(x, dict) and isinstance(y, dict):
        for k in dict.fromkeys([*x, *y]):
            if k not in x or k not in y:
                yield path + (k,), x.get(k), y.get(k)
            else:
                yield from _value_diff(x[k], y[k], path + (k,))
    elif x != y:
        yield path, x, y


def _consumer_offsets(doc) -> dict[tuple[str, str, int], int] | None:
    try:
        table = config_format.consumer_offsets(doc)
    except FormatError:
        return None
    if table is None:
        return None
    return {(*pair, q): off for key, queues in table.items() if (pair := config_format.topic_group(key)) is not None
            for q, off in queues.items()}


def compare_config(a: StoreView, b: StoreView) -> list[dict]:
    da, db = read_config_dir(a.root), read_config_dir(b.root)
    rows = []
    for name in sorted(da.files.keys() | db.files.keys()):
        fa, fb = da.files.get(name), db.files.get(name)
        xa, xb = fa.document if fa else None, fb.document if fb else None
        if xa is None or xb is None:
            if (xa is None) != (xb is None):
                rows.append(_row("config_entry", file=name, a=fa.source if fa else None, b=fb.source if fb else None,
                                 reason="file loaded on one side only"))
            continue
        offsets_a, offsets_b = (_consumer_offsets(xa), _consumer_offsets(xb)) if name == CONSUMER_OFFSET_FILE \
            else (None, None)
        if offsets_a is not None and offsets_b is not None:
            for key in sorted(offsets_a.keys() | offsets_b.keys()):
                va, vb = offsets_a.get(key), offsets_b.get(key)
                if va != vb:
                    rows.append(_row("config_entry", file=name, topic=key[0], group=key[1], queue_id=key[2],
                                     field="committed_offset", a=va, b=vb))
            xa, xb = ({k: v for k, v in d.items() if k != "offsetTable"} for d in (xa, xb))
        for path, va, vb in _value_diff(xa, xb, ()):
            extra = {}
            column = _TABLE_KEYS.get((name, path[0])) if path else None
            if column is not None and len(path) > 1:
                extra[column] = path[1]
            rows.append(_row("config_entry", file=name, field=".".join(str(p) for p in path) or None, a=va, b=vb,
                             **extra))
    return rows


# --- controller mode ---------------------------------------------------------------------------
TRUNCATE_REFUSED = "truncate_refused"  # epoch_sync's sync: truncateFiles refuses an offset not aligned


def compare_epochs(a: StoreView, b: StoreView) -> list[dict]:
    """The epochs the two loaded epoch caches disagree on (start offsets; an epoch on one side only)."""
    ca, cb = load_epoch_cache(a.root), load_epoch_cache(b.root)
    if not (ca.present and cb.present):
        return []
    ea, eb = ({e.epoch: e.start_offset for e in c.entries} for c in (ca, cb))
    return [_row("epoch_entry", file="epochFileCheckpoint", field="start_offset", epoch=epoch, a=ea.get(epoch),
                 b=eb.get(epoch)) for epoch in sorted(ea.keys() | eb.keys()) if ea.get(epoch) != eb.get(epoch)]


def _max_offset(view: StoreView) -> tuple[int, str | None]:
    """The commit log's max offset the broker has after its next start (the recovered end), or the
    written end and why when the start would not load the store."""
    from rmqtool.recovery.outcome import Settings, simulate  # the simulation: only for controller stores
    if not view.has_commit_log or not view.segments:
        return 0, None
    try:
        outcome = simulate(view, Settings(), list_lost=False)
    except RmqError as exc:  # the rest of the diff still runs; the end the files show, said
        return view.written_end, f"its next start could not be simulated ({exc.message}): its written end taken"
    if outcome.loadable and outcome.recovered_end is not None:
        return outcome.recovered_end, None
    return view.written_end, "the store does not load: its written end taken"


def epoch_sync(a: StoreView, b: StoreView) -> dict | None:
    """The ``epoch_sync`` row: B syncing from A as AutoSwitchHAClient.doTruncate does; None unless
    both stores have an epoch file."""
    ca, cb = load_epoch_cache(a.root), load_epoch_cache(b.root)
    if not (ca.present and cb.present):
        return None
    (max_a, note_a), (max_b, note_b) = _max_offset(a), _max_offset(b)
    sync = slave_sync(ca.entries, max_a, cb.entries, max_b)
    outcome, cut, why = sync.outcome, None, None
    if outcome == TRUNCATES:
        with CommitLogReader(b.commit_log) as reader:
            aligned, why = offset_aligned(reader, sync.consistent_point)
        if aligned:
            cut = sync.consistent_point
        else:
            outcome = TRUNCATE_REFUSED
    reason = {
        NEW_REPLICA: "b's epoch cache is empty: it syncs as a new replica, without truncating",
        NO_CONSISTENT_POINT: "no epoch of b's has the same start offset in a's: the handshake fails "
                             "(no consistent point) and b does not sync",
        NOTHING_TO_TRUNCATE: f"b keeps its whole commit log (consistent point {sync.consistent_point}, epoch "
                             f"{sync.epoch}, at or past its max offset {max_b})",
        TRUNCATES: f"at the next sync b truncates to {sync.consistent_point} (epoch {sync.epoch}): "
                   f"{max_b - (sync.consistent_point or 0)} bytes of its commit log dropped",
        TRUNCATE_REFUSED: f"b must truncate to {sync.consistent_point} (epoch {sync.epoch}), where no record starts "
                          f"({why}): truncateFiles refuses and the sync fails",
    }[outcome]
    notes = "; ".join(f"{side}: {n}" for side, n in (("a", note_a), ("b", note_b)) if n)
    lost = None
    if cut is not None:  # the messages b's cut drops, counted as the scanner reads them
        log = _Log.of(b)
        try:
            lost = sum(1 for r in records_over(log, cut, max_b, check_crc=False)
                       if isinstance(r, Message) and r.commit_log_offset >= cut)
        finally:
            log.close()
        reason += f", {lost} message(s)"
    return _row("epoch_sync", side="b", commit_log_offset=cut, reason=reason + (f" ({notes})" if notes else ""),
                sync=outcome, epoch=sync.epoch, consistent_point=sync.consistent_point,
                max_offset_a=max_a, max_offset_b=max_b,
                bytes_past=max_b - cut if cut is not None else None, messages_past=lost)


# --- the whole ---------------------------------------------------------------------------------
def diff_stores(path_a: str | os.PathLike, path_b: str | os.PathLike, *,
                paths_a: CommitLogPaths | None = None, paths_b: CommitLogPaths | None = None) -> StoreDiff:
    """Every difference between two stores; each store opened once (``open_store``: a missing
    path, a non-store, another family's store refused as every command refuses them, before
    the first row). ``paths_a``/``paths_b``: where a side's commit log is when not its
    ROOT/commitlog (several disks); without them each side's view finds them as every command
    does (its config/broker.properties), so a multi-path store diffs as the one log it is."""
    a = open_store(path_a, commit_log_paths=paths_a, simulate=simulate_for_info)
    b = open_store(path_b, commit_log_paths=paths_b, simulate=simulate_for_info)
    a.require_commit_log_directory("-a")  # not there: every message would read as missing from that side
    b.require_commit_log_directory("-b")
    return StoreDiff(a, b)


def _diff_rows(result: StoreDiff) -> Iterator[dict]:
    va, vb = result.a, result.b
    counts: dict[str, int] = {}
    commit_log: dict = {}

    def counted(rows):
        for r in rows:
            counts[r["record"]] = counts.get(r["record"], 0) + 1
            yield r

    a, b = _Log.of(va), _Log.of(vb)
    try:
        yield from counted(compare_commit_logs(a, b, commit_log))
    finally:
        a.close()
        b.close()
    yield from counted(compare_queues(va, vb))
    yield from counted(compare_checkpoints(va, vb))
    yield from counted(compare_config(va, vb))
    yield from counted(compare_epochs(va, vb))
    sync = epoch_sync(va, vb)
    if sync is not None:  # a prediction, not a difference: not counted
        yield sync
    differences = sum(counts.values())
    result.equal = differences == 0
    what = ", ".join(f"{n} {k}" for k, n in counts.items())
    yield _row("summary", reason="equal" if result.equal else f"differ: {what}", equal=result.equal,
               differences=differences, counts=counts, store_a=str(va.root), store_b=str(vb.root), **commit_log)
