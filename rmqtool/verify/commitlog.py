"""Commit log checks: every record of every segment, then what must hold across records.

Each segment is checked on its own (:func:`check_segment`, picklable, so ``--jobs`` can
spread segments over processes): the scanner's results become findings
(:func:`rmqtool.store.commitlog.findings_of`, the one place that conversion happens), and each message leaves a
compact row in numpy arrays: where it lies, its topic-queue, queue offset, the queue
offsets it takes, the tags code its consume queue unit should hold, its store timestamp
and the hashes of its index keys. :func:`merge` joins the segments in offset order and
checks what spans records: queue offsets per topic-queue, store timestamps, ``__CRC32#``
entries missing between records that carry one, and where the commit log ends.
"""
from __future__ import annotations

import array
import dataclasses
import functools
from typing import Callable, Iterator

import numpy as np

from rmqtool.dispatch.dispatcher import inner_batch
from rmqtool.dispatch.rules import RMQ_SYS_SCHEDULE_TOPIC, DelayLevels, tags_code
from rmqtool.findings import (COMMIT_LOG_END, INNER_BATCH_PROPERTY_INVALID, PROPERTY_CRC_MISSING,
                              PROPERTY_CRC_UNREADABLE, QUEUE_OFFSET_GAP, QUEUE_OFFSET_REPEAT, STORE_TIMESTAMP_BACKWARDS, Finding, finding)
from rmqtool.formats import properties as props
from rmqtool.formats.crc import CRC32_ENTRY_HEAD, CRC32_RESERVED_LEN
from rmqtool.formats.indexfile import build_key
from rmqtool.formats.sysflag import (INNER_BATCH_FLAG, TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK,
                                     TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE)
from rmqtool.store.commitlog import Blank, ColumnMode, findings_of
from rmqtool.store.record_columns import RecordColumns, topic_queue_codes, topic_queue_of
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import Message
from rmqtool.store.parallel import SegmentJob, iter_parallel, segment_jobs
from rmqtool.verify.keyhash import index_key_hashes

# crc column: whether a record carries a __CRC32# entry
CRC_NONE, CRC_PRESENT, CRC_DAMAGED = 0, 1, 2
_SEPARATOR = ord(props.PROPERTY_SEPARATOR)
_NAME_VALUE = ord(props.NAME_VALUE_SEPARATOR)
_DISPATCHED = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)  # what gets a consume queue unit


def crc_entry_state(raw: bytes) -> int:
    """Whether stored properties end with a __CRC32# entry for a record whose CRC the scan
    could not read: CRC_DAMAGED when they end in its 20-byte shape (NAME \\x01 ten digits
    \\x02) but the name or digits are not right, else CRC_NONE."""
    n = CRC32_RESERVED_LEN
    if len(raw) >= n and raw[-1] == _SEPARATOR and raw[-12] == _NAME_VALUE:
        head = raw[-n:-11]
        if raw.startswith(CRC32_ENTRY_HEAD, len(raw) - n) or head.isascii():
            return CRC_DAMAGED
    return CRC_NONE


@dataclasses.dataclass
class SegmentCheck:
    """What checking one segment found, small enough to send between processes."""
    path: str
    base_offset: int
    size: int
    findings: list
    topic_queues: list  # (topic, queue id); the tq column indexes it
    columns: dict  # name -> numpy array, one row per message
    # each index key as its message's row and its indexKeyHashMethod (0..2^31-1), int32 both:
    # 8 bytes a key to keep and to send (its offset is offset[key_rows])
    key_rows: np.ndarray
    key_hashes: np.ndarray
    end_position: int | None = None  # one past the last record (a blank record included)
    full: bool = False  # ends with a valid blank record
    first_store_timestamp: int | None = None  # of a message at position 0 (what recovery looks at)
    merged: int | None = None  # messages, once merge() took the columns over

    @property
    def messages(self) -> int:
        return self.merged if self.columns is None else len(self.columns["offset"])


COLUMNS = (("offset", np.int64), ("size", np.int32), ("tq", np.int32), ("queue_offset", np.int64),
           ("batch", np.int32), ("tags_code", np.int64), ("store_timestamp", np.int64), ("crc", np.int8),
           ("has_keys", np.bool_))


# 64-bit wherever a damaged record's field or property could overflow a narrower type
_ARRAY_CODES = {"offset": "q", "size": "q", "tq": "q", "queue_offset": "q", "batch": "q", "tags_code": "q",
                "store_timestamp": "q", "crc": "b", "has_keys": "b"}
_KEY_CHUNK = 1 << 15  # index keys hashed at once
VERIFY_SPLIT = 64 << 20  # bytes of a segment one job checks
COLUMN_SCAN = True  # clean records as column blocks; False: every record as a Message (tests compare)


def check_segment(job: SegmentJob, delay_spec: str | None = None) -> SegmentCheck:
    """Scan one segment and check each record (module-level: --jobs sends it to workers).

    Clean records arrive as column blocks (store/record_columns.py) and become rows with
    numpy; every other message (a failed check, a delayed or inner-batch message, IPv6
    hosts, properties that are not plain ASCII) goes through :func:`_message_row` one by one.
    """
    delay = DelayLevels(delay_spec) if delay_spec else DelayLevels()
    seg = job.segment
    found: list = []
    tq_ids: dict = {}
    # typed arrays, not lists: 8 bytes a value instead of ~36 for an int object and its slot
    cols = {name: array.array(code) for name, code in _ARRAY_CODES.items()}
    keys = _Keys()
    blocks: list = []  # (columns by name, key offsets, key hashes) of each column block
    end = None
    full = False
    first_ts = None
    add = (cols["offset"].append, cols["size"].append, cols["tq"].append, cols["queue_offset"].append,
           cols["batch"].append, cols["tags_code"].append, cols["store_timestamp"].append, cols["crc"].append,
           cols["has_keys"].append)
    mode = ColumnMode(special_topics=frozenset({RMQ_SYS_SCHEDULE_TOPIC}))
    for r in (job.column_scan(mode, found) if COLUMN_SCAN else job.scan(found)):
        kind = type(r)
        if kind is RecordColumns:
            blocks.append(_block_rows(r, seg.base_offset, tq_ids))
            if r.position[0] == 0:
                first_ts = int(r.store_timestamp[0])
            end = int(r.position[-1] + r.size[-1])
            continue
        if kind is not Message:
            found.extend(findings_of(r))
            if isinstance(r, Blank):
                end, full = r.position + r.size, r.valid
            continue
        if r.position == 0:
            first_ts = r.store_timestamp
        end = max(end or 0, r.position + r.store_size)
        _message_row(r, delay, tq_ids, add, keys, found)
    columns = {name: np.frombuffer(cols[name], dtype=np.dtype(cols[name].typecode)).astype(dtype)
               for name, dtype in COLUMNS}
    key_offsets, key_hashes = keys.arrays()
    if blocks:
        parts = [columns] + [b[0] for b in blocks]
        columns = {name: np.concatenate([p[name] for p in parts]).astype(dtype, copy=False) for name, dtype in COLUMNS}
        key_offsets = np.concatenate([key_offsets] + [b[1] for b in blocks])
        key_hashes = np.concatenate([key_hashes] + [b[2] for b in blocks])
        if len(cols["offset"]):  # Messages and blocks interleave: commit log order again
            order = np.argsort(columns["offset"], kind="stable")
            columns = {name: col[order] for name, col in columns.items()}
            order = np.argsort(key_offsets, kind="stable")
            key_offsets, key_hashes = key_offsets[order], key_hashes[order]
    topic_queues = list(tq_ids)
    if blocks and len(columns["tq"]):  # ids by first appearance in commit log order, as one by one gives
        uniq, first = np.unique(columns["tq"], return_index=True)
        order = uniq[np.argsort(first)]
        remap = np.empty(len(topic_queues), np.int64)
        remap[order] = np.arange(len(order))
        columns["tq"] = remap[columns["tq"]].astype(columns["tq"].dtype)
        topic_queues = [topic_queues[k] for k in order.tolist()]
    key_rows = np.searchsorted(columns["offset"], key_offsets).astype(np.int32)
    return SegmentCheck(str(seg.path), seg.base_offset, seg.size, found, topic_queues, columns,
                        key_rows, key_hashes.astype(np.int32), end, full, first_ts)


class _Keys:
    """Index keys of messages checked one by one, hashed in chunks as they come."""

    def __init__(self):
        self.strings: list = []
        self.offsets = array.array("q")
        self.hashes: list = []

    def add(self, offset: int, key: str) -> None:
        self.strings.append(key)
        self.offsets.append(offset)
        if len(self.strings) >= _KEY_CHUNK:  # the strings never pile up
            self.hashes.append(index_key_hashes(self.strings))
            self.strings = []

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        self.hashes.append(index_key_hashes(self.strings))
        self.strings = []
        return np.frombuffer(self.offsets, dtype=np.int64).copy(), np.concatenate(self.hashes)


def _block_rows(block: RecordColumns, base_offset: int, tq_ids: dict) -> tuple[dict, np.ndarray, np.ndarray]:
    """A column block as verify's rows: what _message_row computes, for plain records at once."""
    n = len(block)
    # topic-queue ids: topics of the block by queue id, through the segment's table
    pair = topic_queue_codes(block.topic, block.queue_id)
    uniq, inverse = np.unique(pair, return_inverse=True)
    ids = []
    for code in uniq.tolist():
        key = topic_queue_of(code, block.topics)
        tq = tq_ids.get(key)
        if tq is None:
            tq = tq_ids[key] = len(tq_ids)
        ids.append(tq)
    tran = block.sys_flag & TRANSACTION_MASK
    offset = block.position + base_offset
    has_keys = np.zeros(n, np.bool_)
    has_keys[block.key_record] = True
    rows = {"offset": offset, "size": block.size, "tq": np.array(ids, np.int64)[inverse.reshape(-1)],
            "queue_offset": block.queue_offset,
            "batch": ((tran == TRANSACTION_NOT_TYPE) | (tran == TRANSACTION_COMMIT_TYPE)).astype(np.int64),
            "tags_code": block.tags_code, "store_timestamp": block.store_timestamp,
            "crc": np.where(block.crc_entry, CRC_PRESENT, CRC_NONE), "has_keys": has_keys}
    return rows, offset[block.key_record], block.key_hash


def _message_row(r: Message, delay: DelayLevels, tq_ids: dict, add: tuple, keys: _Keys, found: list) -> None:
    """One message's row (and its findings, index keys) for a record checked on its own."""
    if r.body_crc_ok is False or r.property_crc_ok is False or not r.topic_utf8_ok or (
            r.physical_offset != r.commit_log_offset) or not r.properties_utf8_ok:
        found.extend(findings_of(r))
    offset = r.commit_log_offset
    topic = r.topic
    key = (topic, r.queue_id)
    tq = tq_ids.get(key)
    if tq is None:
        tq = tq_ids[key] = len(tq_ids)
    p = r.properties
    sys_flag = r.sys_flag
    tran = sys_flag & TRANSACTION_MASK
    batch = 0
    if tran in _DISPATCHED:
        batch = 1
        if sys_flag & INNER_BATCH_FLAG:
            try:
                batch = int(p.get(props.PROPERTY_INNER_NUM, 1))
            except ValueError:
                batch = 1
    if props.PROPERTY_INNER_NUM in p and props.PROPERTY_INNER_BASE in p:
        try:
            inner_batch(p)
        except ValueError as exc:
            found.append(finding(INNER_BATCH_PROPERTY_INVALID, r.path, r.position,
                                 f"{exc}: a 5.x broker's record check (setBatchSizeIfNeeded) fails the record, so "
                                 f"its recovery cuts the commit log here",
                                 commit_log_offset=offset, topic=topic, queue_id=r.queue_id,
                                 queue_offset=r.queue_offset))
    tags = p.get(props.PROPERTY_TAGS)
    code = tags_code(tags) if tags else 0
    if topic == RMQ_SYS_SCHEDULE_TOPIC:
        level = p.get(props.PROPERTY_DELAY_TIME_LEVEL)
        if level is not None and level.lstrip("-").isdigit():
            level = min(int(level), delay.max_level)
            if level > 0:
                code = delay.deliver_timestamp(level, r.store_timestamp)
    if r.property_crc_ok is None:
        crc = crc_entry_state(r.properties_raw)
        if crc == CRC_DAMAGED:
            found.append(finding(PROPERTY_CRC_UNREADABLE, r.path, r.position,
                                 "properties end like a __CRC32# entry, but its name or digits are damaged",
                                 commit_log_offset=offset, topic=topic, queue_id=r.queue_id,
                                 queue_offset=r.queue_offset))
    else:
        crc = CRC_PRESENT
    has_keys = False
    if tran != TRANSACTION_ROLLBACK_TYPE:  # IndexService.buildIndex skips rollback records only
        uniq = p.get(props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq is not None:
            keys.add(offset, build_key(topic, uniq))
            has_keys = True
        for k in props.split_keys(p.get(props.PROPERTY_KEYS)):
            keys.add(offset, build_key(topic, k))
            has_keys = True
    for f, v in zip(add, (offset, r.store_size, tq, r.queue_offset, batch, code, r.store_timestamp, crc,
                          has_keys)):
        f(v)


def _joined(pieces: list[SegmentCheck]) -> SegmentCheck:
    """The checks of a segment's byte ranges, in order, as the check of the whole segment."""
    if len(pieces) == 1:
        return pieces[0]
    table: dict = {}
    columns = {}
    bases = np.cumsum([0] + [c.messages for c in pieces[:-1]])
    for name, dtype in COLUMNS:  # a column at a time, each piece's let go once joined (one copy, not two)
        parts = []
        for c in pieces:
            col = c.columns[name]
            if name == "tq" and len(col):
                col = np.array([table.setdefault(tq, len(table)) for tq in c.topic_queues], dtype=np.int32)[col]
            parts.append(col)
            c.columns[name] = None
        columns[name] = np.concatenate(parts)
        parts = None
    for c in pieces:  # topic-queues of pieces without messages too
        for tq in c.topic_queues:
            table.setdefault(tq, len(table))
    written = [c for c in pieces if c.end_position is not None]
    first = pieces[0]
    return SegmentCheck(first.path, first.base_offset, first.size, [f for c in pieces for f in c.findings],
                        list(table), columns,
                        np.concatenate([c.key_rows + np.int32(b)  # a segment's rows fit int32
                                        for c, b in zip(pieces, bases.tolist())]),
                        np.concatenate([c.key_hashes for c in pieces]),
                        written[-1].end_position if written else None, written[-1].full if written else False,
                        first.first_store_timestamp)


def _per_segment(pieces: Iterator[SegmentCheck]) -> Iterator[SegmentCheck]:
    group: list = []
    for c in pieces:
        if group and c.path != group[0].path:
            yield _joined(group)
            group = []
        group.append(c)
    if group:
        yield _joined(group)


@dataclasses.dataclass
class CommitLogData:
    """Every message of the commit log in offset order, as columns, for the other checks."""
    directory: str
    segments: list  # store.segments.Segment
    checks: list  # SegmentCheck per segment, in order
    topic_queues: list  # (topic, queue id) by tq id
    columns: dict
    key_rows: np.ndarray  # the row of each index key's message (int32 below 2^31 messages)
    key_hashes: np.ndarray  # its indexKeyHashMethod, int32
    min_offset: int  # getMinPhyOffset: the first segment's offset
    end: int  # one past the last record: the commit log's max offset

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def locate(self, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row index, whether a message starts there) for each commit log offset."""
        starts = self.columns["offset"]
        idx = np.searchsorted(starts, offsets)
        clipped = np.minimum(idx, max(len(starts) - 1, 0))
        found = (idx < len(starts)) & (starts[clipped] == offsets) if len(starts) else np.zeros(len(offsets), bool)
        return clipped, found

    def segment_of(self, offset: int):
        """The segment an offset lies in (by name), or None."""
        for seg in reversed(self.segments):
            if seg.base_offset <= offset:
                return seg
        return None

    def where(self, offset: int) -> tuple[str | None, int | None]:
        """(file, position) of a commit log offset."""
        seg = self.segment_of(offset)
        return (str(seg.path), offset - seg.base_offset) if seg else (None, None)


def segment_checks(commit_log: CommitLog, *, workers: int = 1, delay_spec: str | None = None) -> Iterator[SegmentCheck]:
    """check_segment over every segment, in order, over ``workers`` processes. A segment
    after the last one written to is scanned as the last (no blank record expected)."""
    # byte ranges, not whole segments: two cores share one big segment, and a job's memory is bounded
    jobs = segment_jobs(commit_log, split_size=VERIFY_SPLIT)
    return _per_segment(iter_parallel(jobs, functools.partial(check_segment, delay_spec=delay_spec),
                                      workers=workers))


def merge(commit_log: CommitLog, checks: list[SegmentCheck]) -> CommitLogData:
    """Join the segments' columns (remapping each segment's topic-queue ids to one table)."""
    table: dict = {}
    counts = [c.messages for c in checks]
    remaps = [np.array([table.setdefault(tq, len(table)) for tq in c.topic_queues], dtype=np.int32) for c in checks]
    columns = {}
    for name, dtype in COLUMNS:  # a column at a time, each segment's piece let go once joined
        parts = [remap[c.columns[name]] if name == "tq" and len(c.columns[name]) else c.columns[name]
                 for c, remap in zip(checks, remaps)]
        columns[name] = np.concatenate(parts) if parts else np.zeros(0, dtype)
        parts = None
        for c in checks:
            c.columns[name] = None
    # rows and hashes (indexKeyHashMethod: 0..2^31-1) fit int32: 8 bytes kept for every key of the store
    key_hashes = (np.concatenate([c.key_hashes for c in checks], dtype=np.int32, casting="unsafe") if checks
                  else np.zeros(0, np.int32))
    bases = np.cumsum([0] + counts[:-1]).tolist() if checks else []
    row_type = np.int32 if sum(counts) < 1 << 31 else np.int64
    key_rows = (np.concatenate([c.key_rows.astype(row_type) + b for c, b in zip(checks, bases)])
                if checks else np.zeros(0, row_type))
    for c, n in zip(checks, counts):  # one copy of the columns, not two: the merged ones are kept
        c.merged = n
        c.columns = c.key_hashes = c.key_rows = None
    segs = commit_log.segments
    end = segs[0].base_offset if segs else 0
    for c in checks:
        if c.end_position is not None:
            end = c.base_offset + c.end_position
            if c.full:  # the next record goes into the next file
                end = c.base_offset + c.size
    return CommitLogData(str(commit_log.directory), segs, checks, list(table), columns, key_rows, key_hashes,
                         segs[0].base_offset if segs else 0, end)


def cross_record_findings(data: CommitLogData) -> list[Finding]:
    """What spans records: queue offsets per topic-queue, store timestamps going back,
    __CRC32# entries missing between records that carry one, and where the log ends."""
    found: list = []
    found += _queue_offset_findings(data)
    found += _timestamp_findings(data)
    found += _crc_missing_findings(data)
    found.sort(key=lambda f: f.details.get("commit_log_offset", 0) if f.details else 0)
    found += _end_findings(data)
    return found


def _record(data: CommitLogData, i: int) -> dict:
    offset = int(data["offset"][i])
    topic, queue_id = data.topic_queues[int(data["tq"][i])]
    return {"commit_log_offset": offset, "topic": topic, "queue_id": queue_id,
            "queue_offset": int(data["queue_offset"][i])}


def _queue_offset_findings(data: CommitLogData) -> list[Finding]:
    """Per topic-queue, in commit log order, each record's queue offset must be the one
    before plus the queue offsets it took (1, or INNER_NUM for a 5.x inner batch);
    prepared and rollback records take none (queue offset 0, no unit)."""
    rows = np.flatnonzero(data["batch"] > 0)
    if len(rows) < 2:
        return []
    order = rows[np.argsort(data["tq"][rows], kind="stable")]
    tq = data["tq"][order]
    qo = data["queue_offset"][order]
    expected = qo[:-1] + data["batch"][order][:-1]
    same = tq[1:] == tq[:-1]
    found = []
    for k in np.flatnonzero(same & (qo[1:] != expected)):
        before, after = int(order[k]), int(order[k + 1])
        here = _record(data, after)
        path, position = data.where(here["commit_log_offset"])
        want = int(expected[k])
        got = here["queue_offset"]
        if got > want:
            found.append(finding(QUEUE_OFFSET_GAP, path, position,
                                 f"{here['topic']}/{here['queue_id']}: queue offset {got} follows "
                                 f"{int(qo[k])} (at commit log offset {int(data['offset'][before])}); "
                                 f"{got - want} offsets missing", previous_queue_offset=int(qo[k]),
                                 previous_commit_log_offset=int(data["offset"][before]), **here))
        else:
            found.append(finding(QUEUE_OFFSET_REPEAT, path, position,
                                 f"{here['topic']}/{here['queue_id']}: queue offset {got} after "
                                 f"{int(qo[k])} (at commit log offset {int(data['offset'][before])}), "
                                 f"expected {want}", previous_queue_offset=int(qo[k]),
                                 previous_commit_log_offset=int(data["offset"][before]), **here))
    return found


def _timestamp_findings(data: CommitLogData) -> list[Finding]:
    ts = data["store_timestamp"]
    found = []
    for k in np.flatnonzero(ts[1:] < ts[:-1]):
        here = _record(data, int(k) + 1)
        path, position = data.where(here["commit_log_offset"])
        found.append(finding(STORE_TIMESTAMP_BACKWARDS, path, position,
                             f"store timestamp {int(ts[k + 1])} is {int(ts[k] - ts[k + 1])} ms before the "
                             f"record before it", store_timestamp=int(ts[k + 1]),
                             previous_store_timestamp=int(ts[k]), **here))
    return found


def _crc_missing_findings(data: CommitLogData) -> list[Finding]:
    """A record with no __CRC32# entry between two that carry one: enabledAppendPropCRC was
    on, so the entry was lost (a damaged name makes it look absent, not clean). Before the
    first and after the last carrying record the setting may simply have been off."""
    crc = data["crc"]
    present = np.flatnonzero(crc == CRC_PRESENT)
    if not len(present):
        return []
    found = []
    window = crc[present[0]:present[-1]]
    for k in np.flatnonzero(window == CRC_NONE):
        here = _record(data, int(present[0] + k))
        path, position = data.where(here["commit_log_offset"])
        found.append(finding(PROPERTY_CRC_MISSING, path, position,
                             "no __CRC32# entry, between records that carry one", **here))
    return found


def _end_findings(data: CommitLogData) -> list[Finding]:
    written = [c for c in data.checks if c.end_position is not None]
    if not written:
        if data.segments:
            return [finding(COMMIT_LOG_END, data.segments[0].path, 0, "the commit log holds no record",
                            commit_log_offset=data.end)]
        return []
    last = written[-1]
    state = "full, ends with its blank record" if last.full else f"written to position {last.end_position}"
    return [finding(COMMIT_LOG_END, last.path, last.end_position,
                    f"the commit log ends at offset {data.end}: {len(data['offset'])} messages; its last "
                    f"segment is {state} of {last.size} bytes", commit_log_offset=data.end,
                    messages=int(len(data["offset"])))]


class CommitLogCheck:
    """Runs the commit log checks: iterate :meth:`findings`, then read :attr:`data`."""

    def __init__(self, commit_log: CommitLog, *, workers: int = 1, delay_spec: str | None = None,
                 on_segment: Callable[[SegmentCheck], None] | None = None):
        self.commit_log = commit_log
        self.workers = workers
        self.delay_spec = delay_spec
        self.on_segment = on_segment
        self.data: CommitLogData | None = None

    def findings(self) -> Iterator[Finding]:
        yield from self.commit_log.findings  # names, sizes, gaps, overlaps of segments
        checks = []
        for c in segment_checks(self.commit_log, workers=self.workers, delay_spec=self.delay_spec):
            checks.append(c)
            yield from c.findings
            if self.on_segment is not None:
                self.on_segment(c)
        self.data = merge(self.commit_log, checks)
        yield from cross_record_findings(self.data)
