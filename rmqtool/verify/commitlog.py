"""Commit log checks: every record of every segment, then what must hold across records.

Each byte range of a segment (a band) is checked on its own (:func:`check_segment`,
picklable, so ``--jobs`` can spread bands over processes): the scanner's results become
findings (:func:`rmqtool.store.commitlog.findings_of`, the one place that conversion
happens), and each message leaves a compact row in numpy arrays: where it lies, its
topic-queue, queue offset, the queue offsets it takes, the tags code its consume queue
unit should hold, its store timestamp and the hashes of its index keys.
:class:`CommitLogCheck` takes the bands in offset order, one at a time, hands each to the
other areas' checks (:class:`BandConsumer`) and carries what spans records from band to
band: queue offsets per topic-queue, store timestamps, ``__CRC32#`` entries missing
between records that carry one, and where the commit log ends.
"""
from __future__ import annotations

import array
import dataclasses
import functools
import itertools
from typing import Callable, Iterator

import numpy as np

from rmqtool import native
from rmqtool.dispatch.dispatcher import inner_batch
from rmqtool.dispatch.rules import RMQ_SYS_SCHEDULE_TOPIC, DelayLevels, tags_code
from rmqtool.findings import (COMMIT_LOG_END, INNER_BATCH_PROPERTY_INVALID, PROPERTY_CRC_MISSING,
                              PROPERTY_CRC_MISSING_AT_END,
                              PROPERTY_CRC_UNREADABLE, QUEUE_OFFSET_GAP, QUEUE_OFFSET_REPEAT, STORE_TIMESTAMP_BACKWARDS, Finding, finding)
from rmqtool.formats import properties as props
from rmqtool.formats.crc import CRC32_ENTRY_HEAD, CRC32_RESERVED_LEN
from rmqtool.formats.indexfile import build_key, index_key_hashes
from rmqtool.formats.sysflag import (INNER_BATCH_FLAG, TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK,
                                     TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE)
from rmqtool.store.commitlog import Blank, ColumnMode, findings_of
from rmqtool.store.record_columns import RecordColumns, topic_queue_codes, topic_queue_of
from rmqtool.store.commitlog_end import CommitLog, segment_end
from rmqtool.store.consumequeue import UnitFiles
from rmqtool.store.message import Message
from rmqtool.store.parallel import SegmentJob, iter_parallel, segment_jobs
from rmqtool.verify.quarantined import quarantined_finding

# crc column: whether a record carries a __CRC32# entry
CRC_NONE, CRC_PRESENT, CRC_DAMAGED = 0, 1, 2
_SEPARATOR = ord(props.PROPERTY_SEPARATOR)
_NAME_VALUE = ord(props.NAME_VALUE_SEPARATOR)
_DISPATCHED = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)  # what gets a consume queue unit


def tq_order(tq: np.ndarray, count: int) -> np.ndarray:
    """The rows of ``tq`` (topic-queue ids below ``count``) by topic-queue, each topic-queue's in
    their order: as 16-bit keys where the ids fit, which numpy sorts by radix (about 2.5x faster)."""
    return np.argsort(tq.astype(np.int16) if count <= 1 << 15 else tq, kind="stable")


def small_unique(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of int64 codes: counted, not sorted, where they span
    few values (a band's topic-queues: a few queue ids of one topic)."""
    if not len(values):
        return np.unique(values, return_inverse=True)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo >= 1 << 16:
        return np.unique(values, return_inverse=True)
    present = np.bincount(values - lo, minlength=hi - lo + 1) > 0
    return np.flatnonzero(present) + lo, (np.cumsum(present) - 1)[values - lo]


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
    segment_index: int = 0  # place of the segment in the commit log
    lo: int = 0  # the commit log offsets whose records the band holds (CommitLogCheck.band_lo/hi)
    hi: int = 0
    band_index: int = 0  # its job's place in CommitLogCheck.jobs
    _by_tq: tuple | None = dataclasses.field(default=None, repr=False, compare=False)

    def by_topic_queue(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(order, bounds): the rows of topic-queue i, in their order, are order[bounds[i]:bounds[i + 1]]
        (``count`` topic-queues); made once a band, for the checks that take it."""
        if self._by_tq is None:
            tq = self.columns["tq"]
            order = tq_order(tq, count)
            self._by_tq = (order, np.searchsorted(tq[order], np.arange(count + 1)))
        return self._by_tq

    @property
    def messages(self) -> int:
        return len(self.columns["offset"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def locate(self, offsets: np.ndarray, likely: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(row index, whether a message starts there) for each commit log offset. ``likely``:
        the rows they are expected to be, in order (a healthy queue's units are its
        topic-queue's messages): proven with one gather, else searched."""
        starts = self.columns["offset"]
        if likely is not None and len(likely) == len(offsets) and np.array_equal(starts[likely], offsets):
            return likely, np.ones(len(offsets), bool)
        idx = np.searchsorted(starts, offsets)
        clipped = np.minimum(idx, max(len(starts) - 1, 0))
        found = (idx < len(starts)) & (starts[clipped] == offsets) if len(starts) else np.zeros(len(offsets), bool)
        return clipped, found


COLUMNS = (("offset", np.int64), ("size", np.int32), ("tq", np.int32), ("queue_offset", np.int64),
           ("batch", np.int32), ("tags_code", np.int64), ("store_timestamp", np.int64), ("crc", np.int8),
           ("has_keys", np.bool_))


# 64-bit wherever a damaged record's field or property could overflow a narrower type
_ARRAY_CODES = {"offset": "q", "size": "q", "tq": "q", "queue_offset": "q", "batch": "q", "tags_code": "q",
                "store_timestamp": "q", "crc": "b", "has_keys": "b"}
_KEY_CHUNK = 1 << 15  # index keys hashed at once
VERIFY_SPLIT = 64 << 20  # bytes of a segment one job checks
COLUMN_SCAN = True  # clean records as column blocks; False: every record as a Message (tests compare)


def check_segment(job: SegmentJob, delay_spec: str | None = None, hints: UnitFiles | None = None) -> SegmentCheck:
    """Scan one segment and check each record (module-level: --jobs sends it to workers);
    ``hints``: the queue files naming where its records start, read for its range here when
    numpy walks the chain (without the native kernel).

    Clean records arrive as column blocks (store/record_columns.py) and become rows with
    numpy; every other message (a failed check, a delayed or inner-batch message, IPv6
    hosts, properties that are not plain ASCII) goes through :func:`_message_row` one by one.
    """
    delay = DelayLevels(delay_spec) if delay_spec else DelayLevels()
    seg = job.segment
    if hints is not None and native.kernel is None:  # the band's share of where records are said to start
        # (only numpy's chain reads them: the kernel's C hop needs none, and the reads cost 3 ms a band)
        job = dataclasses.replace(job, hints=hints.between(
            seg.base_offset + job.start, seg.base_offset + (seg.size if job.end is None else job.end)))
    found: list = []
    tq_ids: dict = {}
    # typed arrays, not lists: 8 bytes a value instead of ~36 for an int object and its slot
    cols = {name: array.array(code) for name, code in _ARRAY_CODES.items()}
    keys = _Keys()
    blocks: list = []  # (columns by name, key rows, key hashes) of each column block
    end = None
    full = False
    first_ts = None
    add = (cols["offset"].append, cols["size"].append, cols["tq"].append, cols["queue_offset"].append,
           cols["batch"].append, cols["tags_code"].append, cols["store_timestamp"].append, cols["crc"].append,
           cols["has_keys"].append)
    mode = ColumnMode(special_topics=frozenset({RMQ_SYS_SCHEDULE_TOPIC}), hints=job.hints)
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
        quarantined = quarantined_finding(r)
        if quarantined is not None:
            found.append(quarantined)
    columns, key_rows, key_hashes = _merged(cols, keys, blocks)
    topic_queues = _first_seen_order(columns, list(tq_ids), bool(blocks))
    return SegmentCheck(str(seg.path), seg.base_offset, seg.size, found, topic_queues, columns,
                        key_rows, key_hashes.astype(np.int32), end, full, first_ts, job.index)


def _merged(cols: dict, keys: "_Keys", blocks: list) -> tuple[dict, np.ndarray, np.ndarray]:
    """The rows of the messages checked one by one (``cols``, ``keys``) and of the column
    blocks, in commit log order, as numpy columns; each index key's row, and its hash."""
    columns = {name: np.frombuffer(cols[name], dtype=np.dtype(cols[name].typecode)).astype(dtype)
               for name, dtype in COLUMNS}
    key_offsets, key_hashes = keys.arrays()
    key_rows = None
    if blocks:
        parts = [columns] + [b[0] for b in blocks]
        columns = {name: np.concatenate([p[name] for p in parts]).astype(dtype, copy=False) for name, dtype in COLUMNS}
        key_hashes = np.concatenate([key_hashes] + [b[2] for b in blocks])
        if len(cols["offset"]):  # Messages and blocks interleave: commit log order again
            key_offsets = np.concatenate([key_offsets] + [b[0]["offset"][b[1]] for b in blocks])
            order = np.argsort(columns["offset"], kind="stable")
            columns = {name: col[order] for name, col in columns.items()}
            order = np.argsort(key_offsets, kind="stable")
            key_offsets, key_hashes = key_offsets[order], key_hashes[order]
        else:  # blocks only, in order: a key's row is its row in its block after the blocks before
            starts = np.cumsum([0] + [len(b[0]["offset"]) for b in blocks[:-1]])
            key_rows = np.concatenate([b[1] + start for b, start in zip(blocks, starts.tolist())])
    if key_rows is None:
        key_rows = np.searchsorted(columns["offset"], key_offsets)
    return columns, key_rows.astype(np.int32), key_hashes


def _first_seen_order(columns: dict, topic_queues: list, had_blocks: bool) -> list:
    """The topic queues renumbered by first appearance in commit log order, as checking one
    by one numbers them (``columns["tq"]`` rewritten to match); the list in that order."""
    if had_blocks and len(columns["tq"]):
        tq = columns["tq"]  # ids below len(topic_queues): each one's first row without a stable sort (4 ms a band)
        first = np.full(len(topic_queues), len(tq), np.int64)
        np.minimum.at(first, tq, np.arange(len(tq)))
        uniq = np.flatnonzero(first < len(tq))
        order = uniq[np.argsort(first[uniq])]
        remap = np.empty(len(topic_queues), np.int64)
        remap[order] = np.arange(len(order))
        columns["tq"] = remap[columns["tq"]].astype(columns["tq"].dtype)
        topic_queues = [topic_queues[k] for k in order.tolist()]
    return topic_queues


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
    """A column block as verify's rows (what _message_row computes, for plain records at once),
    and its index keys as their rows in the block and their hashes."""
    n = len(block)
    # topic-queue ids: topics of the block by queue id, through the segment's table
    pair = topic_queue_codes(block.topic, block.queue_id)
    uniq, inverse = small_unique(pair)
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
    return rows, block.key_record, block.key_hash


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


class BandConsumer:
    """What the other checks give :class:`CommitLogCheck`: what needs no band, before the first
    (:meth:`before_bands`); each band (the messages of one byte range, in commit log order) as
    it is checked; and afterwards the bands holding the offsets they could not match in order
    (:meth:`late_offsets`), checked again."""

    def before_bands(self) -> None:
        """Work that needs no band, done while the workers scan the first ones."""

    def band(self, band: SegmentCheck) -> None:
        pass

    def late_offsets(self) -> np.ndarray:
        return np.zeros(0, np.int64)

    def late_band(self, band: SegmentCheck) -> None:
        pass


class CommitLogCheck:
    """The commit log checks, one byte range (a band) at a time, in offset order.

    Only a band's columns are held, never the whole log's: what spans records (queue
    offsets per topic-queue, store timestamps, ``__CRC32#`` entries) is carried from band
    to band as a few values a topic-queue, and the consume queue, index and checkpoint
    checks take each band as it passes (:class:`BandConsumer`). :meth:`prepare` finds
    where the log ends before any band is given out (the consume queues' load cut needs
    it), by checking the last ranges while the other workers check the first; its checks
    are kept and given in their turn. ``hints``: where records are said to start
    (store/consumequeue.UnitFiles), each band reading its share where it is checked (memory a
    band's, and no read of every queue before the workers start): they let numpy prove a
    window's chain at once and change nothing but the speed (the native kernel hops it in C,
    and no band reads them).
    """

    def __init__(self, commit_log: CommitLog, *, workers: int = 1, delay_spec: str | None = None,
                 on_segment: Callable[[SegmentCheck], None] | None = None, hints: UnitFiles | None = None):
        self.commit_log = commit_log
        self.workers = workers
        self.delay_spec = delay_spec
        self.on_segment = on_segment
        self.segments = commit_log.segments
        self.min_offset = self.segments[0].base_offset if self.segments else 0  # getMinPhyOffset
        self.jobs = segment_jobs(commit_log, split_size=VERIFY_SPLIT)
        self.hints = hints
        # the offsets whose records each band holds; a file longer than the gap to the next one is
        # shadowed there by the next, as the broker finds a file by offset
        lo = [j.segment.base_offset + j.start for j in self.jobs]
        hi = [j.segment.base_offset + (j.segment.size if j.end is None else j.end) for j in self.jobs]
        later = None  # the lowest start of the bands after
        for k in range(len(self.jobs) - 1, -1, -1):
            if later is not None:
                hi[k] = min(hi[k], later)
                lo[k] = min(lo[k], hi[k])
            later = lo[k] if later is None else min(later, lo[k])
        self.band_lo, self.band_hi = np.array(lo, np.int64), np.array(hi, np.int64)
        self.topic_queues: list = []  # (topic, queue id) by global tq id, in order of first appearance
        self._tq_ids: dict = {}
        self.messages = 0
        self.first_store_timestamps: dict = {}  # segment index -> store time of a message at position 0
        self._last_written: SegmentCheck | None = None  # the last band with a record (or a blank one)
        self._kept: dict = {}  # job index -> check made by prepare()
        self.written_end: int | None = None  # one past the last record written (prepare)
        self.next_start_seen = None  # the broker's next start once simulated (verify/next_start.NextStart)
        # () -> verify/next_start.NextStart: the broker's next start, simulated on first call (given by the run)
        self.next_start = None
        self._cross = _CrossRecords(self)

    def prepare(self) -> int:
        """The written end (store/commitlog_end.written_end), from the checks of the last ranges:
        one past the last record of the last range holding one (a segment ending with a blank
        record: the next segment's start)."""
        if self.written_end is None:
            self.written_end = self.min_offset
            for i in range(len(self.jobs) - 1, -1, -1):
                c = self._kept[i] = check_segment(self.jobs[i], self.delay_spec, self.hints)
                if c.end_position is not None:
                    self.written_end = segment_end(c.base_offset, c.end_position, c.full, c.size)
                    break
        return self.written_end

    def prepared_checks(self) -> list[SegmentCheck]:
        """The checks prepare() made (the last ranges, up to the last one holding a record)."""
        return list(self._kept.values())

    @property
    def recovered_end(self) -> int | None:
        """Where the broker's next start ends the log (recovery/outcome.py's simulation, given by
        the run); None: not simulated, the store would not load, or the simulation failed."""
        return self.next_start_seen.recovered_end if self.next_start_seen is not None else None

    @property
    def end(self) -> int | None:
        """The written end, by its name before 0.3."""
        return self.written_end

    def _band(self, k: int, c: SegmentCheck) -> SegmentCheck:
        """Job k's check as a band: the offsets it holds, its topic-queue ids those of the
        whole log's table."""
        c.lo, c.hi, c.band_index = int(self.band_lo[k]), int(self.band_hi[k]), k
        c._by_tq = None  # its tq column changes here
        ids = []
        for tq in c.topic_queues:
            i = self._tq_ids.get(tq)
            if i is None:
                i = self._tq_ids[tq] = len(self.topic_queues)
                self.topic_queues.append(tq)
            ids.append(i)
        remap = np.array(ids, np.int32)
        if len(c.columns["tq"]):
            c.columns["tq"] = remap[c.columns["tq"]]
        c.topic_queues = self.topic_queues
        return c

    def findings(self, consumers: Callable[[], list[BandConsumer]] | None = None) -> Iterator[Finding]:
        """Every commit log finding: each band's as it is checked, then what spans records and
        where the log ends. ``consumers`` makes, once the log's end is known, the checks each
        band goes to on the way."""
        yield from self.commit_log.findings  # names, sizes, gaps, overlaps of segments
        takers: list = []

        def before() -> int:  # while the other workers scan the first ranges: the end, from the last
            self.prepare()
            takers.extend(consumers() if consumers is not None else ())
            for consumer in takers:
                consumer.before_bands()
            return min(self._kept, default=len(self.jobs))

        scanned = self._scan(self.jobs, before)

        def kept() -> Iterator[SegmentCheck]:  # after the scanned ones; before() fills _kept
            for k in sorted(self._kept):
                yield self._kept.pop(k)

        for k, c in enumerate(itertools.chain(scanned, kept())):
            self._band(k, c)
            yield from c.findings
            if c.first_store_timestamp is not None:
                self.first_store_timestamps[c.segment_index] = c.first_store_timestamp
            if c.end_position is not None:
                self._last_written = c
            self.messages += c.messages
            self._cross.band(c)
            for consumer in takers:
                consumer.band(c)
            if self.on_segment is not None:
                self.on_segment(c)
            c.columns = c.key_rows = c.key_hashes = c._by_tq = None  # let go of the band before the next
        yield from self._cross.findings()
        yield from self._end_findings()

    def queue_ends(self) -> dict[tuple[str, int], tuple[int, int]]:
        """After the scan: (topic, queue id) -> (one past the last queue offset its records took,
        the commit log offset of that last record), for what a queue must hold up to."""
        c = self._cross
        return {tq: (int(c.last_qo[i] + c.last_batch[i]), int(c.last_offset[i]))
                for i, tq in enumerate(self.topic_queues) if i < len(c.last_offset) and c.last_offset[i] >= 0}

    def band_again(self, k: int) -> SegmentCheck:
        """Band k checked again, here (what damage rarely needs once more)."""
        return self._band(k, check_segment(self.jobs[k], self.delay_spec, self.hints))

    def recheck(self, consumers: list[BandConsumer]) -> None:
        """The bands holding the offsets consumers could not match in order, checked again and
        given to them (damaged queues and index files: the others need none)."""
        late = [offsets for offsets in (c.late_offsets() for c in consumers) if len(offsets)]
        if not late:  # the common case: nothing to check again (np.unique would load numpy.ma for nothing)
            return
        offsets = np.unique(np.concatenate(late))
        k = np.searchsorted(self.band_lo, offsets, side="right") - 1
        inside = (k >= 0) & (offsets < self.band_hi[np.maximum(k, 0)])
        wanted = sorted(set(k[inside].tolist()))
        for i, c in zip(wanted, self._scan([self.jobs[i] for i in wanted])):
            self._band(i, c)
            for consumer in consumers:
                consumer.late_band(c)
            c.columns = c._by_tq = None

    def _scan(self, jobs: list[SegmentJob], before: Callable[[], int] | None = None) -> Iterator[SegmentCheck]:
        # at most four bands a worker taken and not yet matched: memory stays a few bands', and a worker
        # does not wait while this process matches a slow band (two made the child wait 0.1 s a run)
        return iter_parallel(jobs, functools.partial(check_segment, delay_spec=self.delay_spec, hints=self.hints),
                             workers=self.workers, ahead=4 * max(self.workers, 1), before=before)

    def tq_id(self, topic: str, queue_id: int) -> int | None:
        """A topic-queue's id in the table, once a message of it has been seen."""
        return self._tq_ids.get((topic, queue_id))

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

    def record(self, offset: int, tq: int, queue_offset: int) -> dict:
        """A message's fields as a finding gives them."""
        topic, queue_id = self.topic_queues[tq]
        return {"commit_log_offset": int(offset), "topic": topic, "queue_id": queue_id,
                "queue_offset": int(queue_offset)}

    def _end_findings(self) -> list[Finding]:
        last = self._last_written
        seen = self.next_start_seen
        if self.recovered_end is None and seen is not None and seen.outcome is None:
            recovered = f"the broker's next start could not be simulated ({seen.error})"
        elif self.recovered_end is None and seen is not None:
            recovered = "the broker's next start does not load the store (storeNotLoadable)"
        elif self.recovered_end is None:
            recovered = ("the broker's next start was not simulated (a clean shutdown, and nothing found that "
                         "changes it, such as damage it reads or a message past its queue's end: rmqtool recover "
                         "walks it)")
        elif self.recovered_end == self.written_end:
            recovered = "the broker's next start ends the log there too (recovered end)"
        else:
            recovered = f"the broker's next start ends the log at {self.recovered_end} (recovered end)"
        if last is None:
            if self.segments:
                return [finding(COMMIT_LOG_END, self.segments[0].path, 0,
                                f"the commit log holds no record; {recovered}", commit_log_offset=self.written_end,
                                written_end=self.written_end, recovered_end=self.recovered_end)]
            return []
        state = "full, ends with its blank record" if last.full else f"written to position {last.end_position}"
        return [finding(COMMIT_LOG_END, last.path, last.end_position,
                        f"the records written end at offset {self.written_end} (written end): {self.messages} "
                        f"messages; its last segment is {state} of {last.size} bytes; {recovered}",
                        commit_log_offset=self.written_end, messages=self.messages, written_end=self.written_end,
                        recovered_end=self.recovered_end)]


class _CrossRecords:
    """What spans records, carried from band to band: per topic-queue the last queue offset
    (and the queue offsets it took, and where), the last store timestamp, and the records
    without a ``__CRC32#`` entry since the last one with it."""

    def __init__(self, log: CommitLogCheck):
        self.log = log
        self.found: list = []  # (commit log offset, kind, finding): sorted at the end
        self.last_qo = np.zeros(0, np.int64)
        self.last_batch = np.zeros(0, np.int64)
        self.last_offset = np.full(0, -1, np.int64)  # -1: no message of the topic-queue yet
        self.last_ts: int | None = None
        self.crc_seen = False
        self.crc_waiting: list = []  # (band, first row) of records without an entry after the last with one
        self.crc_trailing: list | None = None  # [offset, tq, queue offset, count]: the first of them, and how many

    def band(self, c: SegmentCheck) -> None:
        grow = len(self.log.topic_queues) - len(self.last_qo)
        if grow > 0:
            self.last_qo = np.concatenate((self.last_qo, np.zeros(grow, np.int64)))
            self.last_batch = np.concatenate((self.last_batch, np.zeros(grow, np.int64)))
            self.last_offset = np.concatenate((self.last_offset, np.full(grow, -1, np.int64)))
        if c.messages:
            self._queue_offsets(c)
            self._timestamps(c)
            self._crc(c)

    def _queue_offsets(self, c: SegmentCheck) -> None:
        """Per topic-queue, in commit log order, each record's queue offset must be the one
        before plus the queue offsets it took (1, or INNER_NUM for a 5.x inner batch);
        prepared and rollback records take none (queue offset 0, no unit)."""
        batch = c["batch"]
        if not (batch > 0).any():
            return
        order = c.by_topic_queue(len(self.log.topic_queues))[0]  # by topic-queue, each's in commit log order
        order = order[batch[order] > 0]
        tq = c["tq"][order].astype(np.int64)
        qo = c["queue_offset"][order]
        batch = c["batch"][order].astype(np.int64)
        offset = c["offset"][order]
        first = np.concatenate(([True], tq[1:] != tq[:-1]))
        prev_qo, prev_batch, prev_offset = np.roll(qo, 1), np.roll(batch, 1), np.roll(offset, 1)
        prev_qo[first], prev_batch[first], prev_offset[first] = (self.last_qo[tq[first]], self.last_batch[tq[first]],
                                                                 self.last_offset[tq[first]])
        expected = prev_qo + prev_batch
        for k in np.flatnonzero((prev_offset >= 0) & (qo != expected)).tolist():
            here = self.log.record(offset[k], tq[k], qo[k])
            path, position = self.log.where(here["commit_log_offset"])
            want, got = int(expected[k]), here["queue_offset"]
            before_qo, before = int(prev_qo[k]), int(prev_offset[k])
            if got > want:
                f = finding(QUEUE_OFFSET_GAP, path, position,
                            f"{here['topic']}/{here['queue_id']}: queue offset {got} follows "
                            f"{before_qo} (at commit log offset {before}); {got - want} offsets missing",
                            previous_queue_offset=before_qo, previous_commit_log_offset=before, **here)
            else:
                f = finding(QUEUE_OFFSET_REPEAT, path, position,
                            f"{here['topic']}/{here['queue_id']}: queue offset {got} after "
                            f"{before_qo} (at commit log offset {before}), expected {want}",
                            previous_queue_offset=before_qo, previous_commit_log_offset=before, **here)
            self.found.append((here["commit_log_offset"], 0, f))
        last = np.concatenate((tq[1:] != tq[:-1], [True]))
        self.last_qo[tq[last]], self.last_batch[tq[last]], self.last_offset[tq[last]] = (qo[last], batch[last],
                                                                                        offset[last])

    def _timestamps(self, c: SegmentCheck) -> None:
        ts = c["store_timestamp"]
        before = np.concatenate(([ts[0] if self.last_ts is None else self.last_ts], ts[:-1]))
        for k in np.flatnonzero(ts < before).tolist():
            here = self.log.record(c["offset"][k], c["tq"][k], c["queue_offset"][k])
            path, position = self.log.where(here["commit_log_offset"])
            self.found.append((here["commit_log_offset"], 1, finding(
                STORE_TIMESTAMP_BACKWARDS, path, position,
                f"store timestamp {int(ts[k])} is {int(before[k]) - int(ts[k])} ms before the record before it",
                store_timestamp=int(ts[k]), previous_store_timestamp=int(before[k]), **here)))
        self.last_ts = int(ts[-1])

    def _crc(self, c: SegmentCheck) -> None:
        """A record with no __CRC32# entry between two that carry one: enabledAppendPropCRC was
        on, so the entry was lost (a damaged name makes it look absent, not clean). Before the
        first and after the last carrying record the setting may simply have been off. Records
        after the last carrying one wait as (band, first row) only: were the setting turned off
        for good, they would be the rest of the store; the bands are checked again if a later
        record carries an entry."""
        crc = c["crc"]
        none = crc == CRC_NONE
        present = np.flatnonzero(crc == CRC_PRESENT)
        if not len(present):
            if self.crc_seen and none.any():
                self.crc_waiting.append((c.band_index, 0))
                self._trailing(c, np.flatnonzero(none))
            return
        if self.crc_seen:  # those waiting, and this band's before its first carrying record, are confirmed
            for k, first in self.crc_waiting:
                again = self.log.band_again(k)
                self._missing(again, np.flatnonzero(again["crc"][first:] == CRC_NONE) + first)
            self._missing(c, np.flatnonzero(none[:present[0]]))
        self.crc_waiting = []
        self.crc_trailing = None
        self._missing(c, np.flatnonzero(none[present[0]:present[-1]]) + present[0])
        self.crc_seen = True
        if none[present[-1]:].any():
            self.crc_waiting.append((c.band_index, int(present[-1])))
            self._trailing(c, np.flatnonzero(none[present[-1]:]) + present[-1])

    def _trailing(self, c: SegmentCheck, rows: np.ndarray) -> None:
        """Records without an entry after the last carrying one: the first, and a count (a
        broker with forceVerifyPropCRC cuts the log at the first; said once, at the end)."""
        if self.crc_trailing is None:
            k = int(rows[0])
            self.crc_trailing = [int(c["offset"][k]), int(c["tq"][k]), int(c["queue_offset"][k]), 0]
        self.crc_trailing[3] += len(rows)

    def _missing(self, c: SegmentCheck, rows: np.ndarray) -> None:
        for offset, tq, qo in zip(c["offset"][rows].tolist(), c["tq"][rows].tolist(),
                                  c["queue_offset"][rows].tolist()):
            here = self.log.record(offset, tq, qo)
            path, position = self.log.where(offset)
            self.found.append((offset, 2, finding(PROPERTY_CRC_MISSING, path, position,
                                                  "no __CRC32# entry, between records that carry one", **here)))

    def findings(self) -> list[Finding]:
        if self.crc_trailing is not None:
            offset, tq, qo, count = self.crc_trailing
            here = self.log.record(offset, tq, qo)
            path, position = self.log.where(offset)
            self.found.append((offset, 2, finding(
                PROPERTY_CRC_MISSING_AT_END, path, position,
                f"this record and the {count - 1} after it carry no __CRC32# entry, though the records before them "
                f"do: a broker with forceVerifyPropCRC ends the commit log here and drops all {count}",
                messages=count, **here)))
            self.crc_trailing = None
        self.found.sort(key=lambda t: (t[0], t[1]))
        return [f for _, _, f in self.found]
