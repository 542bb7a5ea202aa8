"""Dispatch: from commit log records to consume queue units and index entries.

ReputMessageService reads the commit log from ``reput_from_offset`` the way the broker does
(``checkMessageAndReturnSize`` without the body), and hands each record to the two
dispatchers (CommitLogDispatcherBuildConsumeQueue, CommitLogDispatcherBuildIndex). It runs
inline (the engine dispatches each append itself, with the values it just encoded, and
moves ``reput_from_offset``) or as a background thread. ``behind()`` is the broker's
dispatchBehindBytes: commit log bytes written but not dispatched yet.
"""
from __future__ import annotations

import dataclasses
import re
import threading
from typing import NamedTuple

from rmqtool.errors import CorruptData, StoreAccessError
from rmqtool.formats import properties as props
from rmqtool.formats.crc import CRC32_RESERVED_LEN, java_digits_value
from rmqtool.formats.commitlog import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODES, MIN_MESSAGE_LENGTH
from rmqtool.formats.properties import bytes_to_properties
from rmqtool.formats.sysflag import (TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_NOT_TYPE,
                                     TRANSACTION_ROLLBACK_TYPE)
from rmqtool.dispatch.multi_dispatch import MultiDispatch, named
from rmqtool.dispatch.rules import RMQ_SYS_SCHEDULE_TOPIC, DelayLevels, tags_code
from rmqtool.store.crc import crc32
from rmqtool.store.message import HOSTS, PREFIX, PREFIX_SIZE, RECORD_START, RecordError, read_tail

READ_WINDOW = 1 << 20  # bytes read from the commit log at once
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")  # what Long.parseLong and Short.parseShort take (then their range)
_SPECIAL_TOPICS = frozenset({RMQ_SYS_SCHEDULE_TOPIC})  # a delayed message's tags code is its delivery time
COLUMN_REPUT = True  # False: every record through check_message (tests compare the two)
_MULTI = props.PROPERTY_INNER_MULTI_DISPATCH.encode()
COLUMN_READ_WINDOW = 8 << 20  # once a window's records came as columns: numpy's per-call cost over ~7k records


class DispatchRequest(NamedTuple):
    """What the dispatchers need of one record (the broker's DispatchRequest)."""
    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str | None
    uniq_key: str | None
    sys_flag: int
    # a batch consume queue's unit (5.x): INNER_BASE and INNER_NUM when both are there, else the queue offset and 1
    msg_base_offset: int | None = None  # None: the queue offset
    batch_size: int = 1
    inner_batch: bool = False  # INNER_BASE and INNER_NUM are there (only a 5.x BatchCQ topic's records)
    # (INNER_MULTI_DISPATCH, INNER_MULTI_QUEUE_OFFSET) when the record names queues to multi-dispatch to
    multi_dispatch: tuple | None = None


def index_keys(request: DispatchRequest) -> list[str]:
    """The keys buildIndex puts for a record, in order: UNIQ_KEY, then each of KEYS."""
    return ([] if request.uniq_key is None else [request.uniq_key]) + props.split_keys(request.keys)


class RecordUnreadable(Exception):
    """checkMessageAndReturnSize said no (-1): ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def check_message(buf, pos: int, limit: int, offset: int, delay_levels: DelayLevels, *,
                  check_crc: bool = False, magic_codes: tuple = MESSAGE_MAGIC_CODES,
                  verify_prop_crc: bool = False, strict_inner: bool = False) -> tuple[int, DispatchRequest | None]:
    """checkMessageAndReturnSize(checkCRC=false, readBody=false) on ``buf[pos:limit]``.

    Returns (size, request); size 0 is the end-of-file blank record. Raises RecordUnreadable
    for anything else, and IndexError when the record is not all in the buffer.

    Recovery's call (checkCRC=true, readBody=true) adds ``check_crc``: the body CRC, or with
    ``verify_prop_crc`` (5.3's forceVerifyPropCRC) the ``__CRC32#`` value instead, whose
    absence then fails the record; ``magic_codes`` are the message magic codes the broker
    version knows (4.9.8: V1 only). ``strict_inner`` fails a record whose INNER_BASE or
    INNER_NUM does not parse, as 5.3.3's setBatchSizeIfNeeded does (its recovery ends there).
    """
    if pos + PREFIX_SIZE > limit:
        if pos + RECORD_START.size <= limit and RECORD_START.unpack_from(buf, pos)[1] == BLANK_MAGIC_CODE:
            return 0, None
        raise IndexError
    total, magic, _crc, queue_id, _flag, queue_offset, _phys, sys_flag, _born = PREFIX.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return 0, None
    if magic not in magic_codes:
        raise RecordUnreadable(f"illegal magic code 0x{magic:08X}")
    if total < MIN_MESSAGE_LENGTH:
        raise RecordUnreadable(f"totalSize {total} is too small")
    if pos + total > limit:
        raise IndexError
    hosts = HOSTS[(sys_flag >> 4) & 3]
    (_bip, _bport, store_ts, _sip, _sport, _reconsume, _prepared, body_len) = hosts.unpack_from(buf, pos + PREFIX_SIZE)
    p = pos + PREFIX_SIZE + hosts.size
    end = pos + total
    if body_len < 0 or p + body_len > end:
        raise RecordUnreadable(f"bodyLength {body_len} does not fit in totalSize {total}")
    if check_crc and not verify_prop_crc and body_len > 0 and crc32(memoryview(buf)[p:p + body_len]) != _crc:
        raise RecordUnreadable("body CRC mismatch")
    try:
        t, t_end, p = read_tail(buf, pos, p + body_len, end, magic)
    except RecordError as exc:
        raise RecordUnreadable(exc.message) from None
    topic = bytes(buf[t:t_end]).decode("utf-8", "replace")
    code = 0
    keys = uniq = None
    properties = {}
    if end > p:
        properties, _ok = bytes_to_properties(bytes(buf[p:end]))
        keys, uniq, code = request_keys(properties)
        if topic == RMQ_SYS_SCHEDULE_TOPIC:
            level_text = properties.get(props.PROPERTY_DELAY_TIME_LEVEL)
            if level_text is not None:
                try:
                    level = int(level_text)
                except ValueError:
                    raise RecordUnreadable(f"DELAY property is not a number: {level_text!r}") from None
                level = min(level, delay_levels.max_level)
                if level > 0:
                    code = delay_levels.deliver_timestamp(level, store_ts)
    if check_crc and verify_prop_crc:
        expected = java_digits_value(properties.get(props.PROPERTY_CRC32))
        if expected is None or expected < 0:
            raise RecordUnreadable("no __CRC32# property to check")
        if crc32(memoryview(buf)[pos:end - CRC32_RESERVED_LEN]) != expected:
            raise RecordUnreadable("__CRC32# property CRC mismatch")
    base, batch = queue_offset, 1
    inner = props.PROPERTY_INNER_NUM in properties and props.PROPERTY_INNER_BASE in properties
    if inner:
        try:
            base, batch = inner_batch(properties)
        except ValueError as exc:
            if strict_inner:
                raise RecordUnreadable(str(exc)) from None
            # 5.3.3 fails the whole record here (4.9.8 never reads them): left out of any batch queue instead
            base, batch = -1, -1
    multi = named(properties) if props.PROPERTY_INNER_MULTI_DISPATCH in properties else None
    return total, DispatchRequest(topic, queue_id, offset, total, code, store_ts, queue_offset, keys, uniq, sys_flag,
                                  base, batch, inner, multi)


def request_keys(properties: dict) -> tuple[str | None, str | None, int]:
    """What a DispatchRequest takes from a record's properties: (KEYS, UNIQ_KEY, the tags code of
    TAGS; a delay-topic record's code is its deliver time instead, check_message's own)."""
    tags = properties.get(props.PROPERTY_TAGS)
    return (properties.get(props.PROPERTY_KEYS), properties.get(props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            tags_code(tags) if tags else 0)


def inner_batch(properties: dict) -> tuple[int, int]:
    """(msgBaseOffset, batchSize) from INNER_BASE and INNER_NUM, as 5.3.3's setBatchSizeIfNeeded
    parses them (Long.parseLong, Short.parseShort); ValueError when they do not parse."""
    base_text, batch_text = properties[props.PROPERTY_INNER_BASE], properties[props.PROPERTY_INNER_NUM]
    base = int(base_text) if _JAVA_INTEGER.fullmatch(base_text) else None
    batch = int(batch_text) if _JAVA_INTEGER.fullmatch(batch_text) else None
    if base is None or batch is None or not -(1 << 63) <= base < 1 << 63 or not -(1 << 15) <= batch < 1 << 15:
        raise ValueError(f"INNER_BASE {base_text!r} or INNER_NUM {batch_text!r} is not a number")
    return base, batch


@dataclasses.dataclass
class DispatchColumns:
    """Many records' dispatch requests as arrays, in commit log order (a column block of the
    commit log, with the records it left to check_message merged in)."""
    topics: list  # names; ``topic`` indexes it
    topic: object  # numpy arrays from here on
    queue_id: object
    commit_log_offset: object
    msg_size: object
    tags_code: object
    store_timestamp: object
    consume_queue_offset: object
    sys_flag: object
    msg_base_offset: object  # of a batch consume queue unit
    batch_size: object
    key_record: object  # the row of each index key (UNIQ_KEY, then each of KEYS); none for rollback records
    key_hash: object  # indexKeyHashMethod(topic#key)

    def __len__(self) -> int:
        return len(self.commit_log_offset)

    @classmethod
    def of(cls, block, offset0: int, requests: list) -> "DispatchColumns":
        """A RecordColumns block of a buffer starting at commit log offset ``offset0`` (or None),
        and DispatchRequests of other records, in commit log order."""
        import numpy as np

        from rmqtool.formats.indexfile import build_key, index_key_hash

        topics = list(block.topics) if block is not None else []
        ids = {t: k for k, t in enumerate(topics)}
        cols = {"topic": [], "queue_id": [], "commit_log_offset": [], "msg_size": [], "tags_code": [],
                "store_timestamp": [], "consume_queue_offset": [], "sys_flag": [], "msg_base_offset": [],
                "batch_size": []}
        key_record, key_hash = [], []
        if block is not None and len(block):
            for name, col in (("topic", block.topic), ("queue_id", block.queue_id),
                              ("commit_log_offset", block.position + offset0), ("msg_size", block.size),
                              ("tags_code", block.tags_code), ("store_timestamp", block.store_timestamp),
                              ("consume_queue_offset", block.queue_offset), ("sys_flag", block.sys_flag),
                              ("msg_base_offset", block.queue_offset), ("batch_size", np.ones(len(block)))):
                cols[name].append(np.asarray(col, np.int64))  # no INNER_* property in a block: base and 1
            key_record.append(np.asarray(block.key_record, np.int64))
            key_hash.append(np.asarray(block.key_hash, np.int64))
        if requests:
            base = sum(len(c) for c in cols["topic"])
            rows, hashes = [], []
            for i, r in enumerate(requests):
                if r.sys_flag & TRANSACTION_MASK != TRANSACTION_ROLLBACK_TYPE:  # buildIndex skips rollback
                    keys = index_keys(r)
                    rows += [base + i] * len(keys)
                    hashes += [index_key_hash(build_key(r.topic, k)) for k in keys]
            cols["topic"].append(np.array([ids.setdefault(r.topic, len(ids)) for r in requests], np.int64))
            topics = list(ids)
            for name, k in (("queue_id", 1), ("commit_log_offset", 2), ("msg_size", 3), ("tags_code", 4),
                            ("store_timestamp", 5), ("consume_queue_offset", 6), ("sys_flag", 9),
                            ("msg_base_offset", 10), ("batch_size", 11)):
                cols[name].append(np.array([r[k] if r[k] is not None else r[6] for r in requests], np.int64))
            key_record.append(np.array(rows, np.int64))
            key_hash.append(np.array(hashes, np.int64))
        joined = {name: np.concatenate(parts) if parts else np.zeros(0, np.int64) for name, parts in cols.items()}
        record = np.concatenate(key_record) if key_record else np.zeros(0, np.int64)
        hashes = np.concatenate(key_hash) if key_hash else np.zeros(0, np.int64)
        if requests and block is not None and len(block):  # the others lie among the block's records
            order = np.argsort(joined["commit_log_offset"], kind="stable")
            joined = {name: col[order] for name, col in joined.items()}
            rank = np.empty(len(order), np.int64)
            rank[order] = np.arange(len(order))
            record = rank[record]
            key_order = np.argsort(record, kind="stable")
            record, hashes = record[key_order], hashes[key_order]
        return cls(topics, key_record=record, key_hash=hashes, **joined)

    def request(self, i: int) -> DispatchRequest:
        """Row ``i`` as a DispatchRequest (keys are hashed here already: none given)."""
        return DispatchRequest(self.topics[int(self.topic[i])], int(self.queue_id[i]), int(self.commit_log_offset[i]),
                               int(self.msg_size[i]), int(self.tags_code[i]), int(self.store_timestamp[i]),
                               int(self.consume_queue_offset[i]), None, None, int(self.sys_flag[i]),
                               int(self.msg_base_offset[i]), int(self.batch_size[i]))

    def select(self, rows) -> "DispatchColumns":
        """The requests at ``rows`` (ascending), with their keys."""
        import numpy as np

        keep = np.zeros(len(self), bool)
        keep[rows] = True
        renumber = np.cumsum(keep) - 1
        with_key = keep[self.key_record]
        fields = {f.name: getattr(self, f.name)[rows] for f in dataclasses.fields(self)
                  if f.name not in ("topics", "key_record", "key_hash")}
        return DispatchColumns(self.topics, key_record=renumber[self.key_record[with_key]],
                               key_hash=self.key_hash[with_key], **fields)


class CommitLogDispatcher:
    """doDispatch: a consume queue unit (normal and commit records), then index entries."""

    def __init__(self, consume_queues, index_service=None, checkpoint=None, skip_topics: frozenset = frozenset(),
                 batch_queues=None, multi_dispatch: MultiDispatch | None = None):
        self.consume_queues = consume_queues
        # enableMultiDispatch (None: off, the broker's default): a record's units in the queues it
        # names too, after its own (ConsumeQueue.multiDispatchLmqQueue); the reput then hands the
        # records that name any as requests, not columns
        self.multi_dispatch = multi_dispatch
        # 5.x batch topics: their units go to ``batch_queues`` (batchconsumequeue/) when given, else nowhere
        self.batch_queues = batch_queues
        self.skip_topics = skip_topics | (batch_queues.topics if batch_queues is not None else frozenset())
        self._queues = consume_queues.queues
        self.index_service = index_service
        self.checkpoint = checkpoint

    def dispatch(self, requests) -> None:
        """doDispatch for many records in commit log order: each queue's units gathered into
        runs of consecutive queue offsets, each run written at once; then every index entry
        in one pass (the index header is written once)."""
        runs: dict = {}  # (topic, queue id) -> its current run: [topic, queue id, first, next, flat units]
        order = []  # every run, in the order started (so each queue's runs stay in order)
        last_ts = 0
        last_offset = -1
        skip = self.skip_topics
        ext = getattr(self.consume_queues, "ext_enabled", False)  # ext units need each record's store time
        multi, elsewhere = self.multi_dispatch, {}
        for topic, queue_id, offset, size, code, ts, queue_offset, _keys, _uniq, sys_flag, *rest in requests:
            tran = sys_flag & TRANSACTION_MASK
            if (tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE) and topic not in skip:
                run = runs.get((topic, queue_id))
                if run is None or run[3] != queue_offset:
                    run = [topic, queue_id, queue_offset, queue_offset, []] + ([[]] if ext else [])
                    runs[(topic, queue_id)] = run
                    order.append(run)
                run[3] = queue_offset + 1
                run[4] += (offset, size, code)
                if ext:
                    run[5].append(ts)
                last_ts, last_offset = ts, offset
                if multi is not None and len(rest) > 3 and rest[3] is not None:
                    for t in multi.targets(topic, queue_id, *rest[3]):  # the same unit, at its offset there
                        elsewhere.setdefault((t.topic, t.queue_id), []).append((t.queue_offset, offset, size, code))
        if self.batch_queues is not None:
            ts, offset = self._put_batch(r for r in requests if r[0] in self.batch_queues.topics)
            if offset > last_offset:  # the checkpoint takes the later record's time
                last_ts = ts
        self.dispatch_runs(requests, order, last_ts)
        self._put_elsewhere(elsewhere)

    def _put_elsewhere(self, units: dict) -> None:
        """Multi-dispatched units, each queue's in commit log order: putMessagePositionInfo
        (no ext unit, the record's tags code as it is: doDispatchLmqQueue)."""
        find = self.consume_queues.find
        for (topic, queue_id), entries in units.items():
            cq = self._queues.get((topic, queue_id)) or find(topic, queue_id)
            for queue_offset, offset, size, code in entries:
                if not cq.put(offset, size, code, queue_offset, with_ext=False):
                    raise StoreAccessError(f"consume queue {topic}/{queue_id} refused offset {queue_offset}",
                                           cq.directory)

    def _put_batch(self, requests) -> tuple[int, int]:
        """A batch consume queue unit for each normal or commit record given (in commit log order);
        the store timestamp and offset of the last one written (0, -1: none)."""
        last_ts, last_offset = 0, -1
        find = self.batch_queues.find
        for topic, queue_id, offset, size, code, ts, queue_offset, _keys, _uniq, sys_flag, *rest in requests:
            base, batch = rest[:2] if rest else (None, 1)
            tran = sys_flag & TRANSACTION_MASK
            if tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE:
                bcq = find(topic, queue_id)
                if not bcq.put(offset, size, code, ts, queue_offset if base is None else base, batch):
                    raise StoreAccessError(f"batch consume queue {topic}/{queue_id} refused offset {offset}",
                                           bcq.directory)
                last_ts, last_offset = ts, offset
        return last_ts, last_offset

    def dispatch_runs(self, requests, runs, last_ts: int, index_keys=None) -> None:
        """:meth:`dispatch` with each queue's units already gathered (as the put path can,
        while it hands out queue offsets): ``runs`` is [topic, queue id, first queue offset,
        next queue offset, flat units] each, in the order started; ``last_ts`` is the store
        timestamp of the last record given a unit (0: none). A run may end with its records'
        store timestamps (a store with the ext: its units' ext units need them). ``index_keys``:
        the index keys gathered already (IndexServiceWriter.build_index_keys' arguments), in
        place of the requests' (which are then not read)."""
        queues = self._queues
        find = self.consume_queues.find
        for topic, queue_id, first, _next, units, *stamps in runs:
            cq = queues.get((topic, queue_id)) or find(topic, queue_id)
            if not cq.put_run(first, units, *stamps):
                raise StoreAccessError(f"consume queue {topic}/{queue_id} refused offset {first}", cq.directory)
        if self.index_service is not None:
            if index_keys is None:
                self.index_service.build_index_many(requests)
            else:
                self.index_service.build_index_keys(*index_keys)
        if last_ts and self.checkpoint is not None:
            self.checkpoint.logics_msg_timestamp = last_ts

    def dispatch_columns(self, cols: DispatchColumns) -> None:
        """:meth:`dispatch` for requests as arrays: each queue's runs of consecutive queue
        offsets found with numpy and written with put_run, the index entries written as arrays."""
        import numpy as np

        if not len(cols):
            return
        tran = cols.sys_flag & TRANSACTION_MASK
        dispatched = (tran == TRANSACTION_NOT_TYPE) | (tran == TRANSACTION_COMMIT_TYPE)
        skipped = [k for k, t in enumerate(cols.topics) if t in self.skip_topics]
        if skipped:
            dispatched &= ~np.isin(cols.topic, skipped)
        rows = np.flatnonzero(dispatched)
        last_ts = 0
        if len(rows):
            from rmqtool.store.arrays import grouped_order
            from rmqtool.store.record_columns import topic_queue_codes

            tq = topic_queue_codes(cols.topic[rows], cols.queue_id[rows])
            by_queue = grouped_order(tq)
            order = rows[by_queue]  # each queue's records, in commit log order
            tq_sorted = tq[by_queue]
            qo = cols.consume_queue_offset[order]
            breaks = np.flatnonzero((tq_sorted[1:] != tq_sorted[:-1]) | (qo[1:] != qo[:-1] + 1)) + 1
            starts = np.concatenate(([0], breaks))
            stops = np.concatenate((breaks, [len(order)])).tolist()
            offsets, sizes, codes = cols.commit_log_offset[order], cols.msg_size[order], cols.tags_code[order]
            stamps = cols.store_timestamp[order] if getattr(self.consume_queues, "ext_enabled", False) \
                else None  # a store with the ext: each unit's ext unit takes its record's store time
            heads = order[starts]
            queues = self._queues
            find = self.consume_queues.find
            for a, b, t, queue_id, first in zip(starts.tolist(), stops, cols.topic[heads].tolist(),
                                                cols.queue_id[heads].tolist(), qo[starts].tolist()):
                topic = cols.topics[t]
                cq = queues.get((topic, queue_id)) or find(topic, queue_id)
                if not cq.put_unit_columns(first, offsets[a:b], sizes[a:b], codes[a:b],
                                           stamps[a:b] if stamps is not None else None):
                    raise StoreAccessError(f"consume queue {topic}/{queue_id} refused offset {first}",
                                           cq.directory)
            last_ts = int(cols.store_timestamp[rows[-1]])
        if self.batch_queues is not None:
            batch = [k for k, t in enumerate(cols.topics) if t in self.batch_queues.topics]
            if batch:
                mine = np.flatnonzero(np.isin(cols.topic, batch)).tolist()
                ts, offset = self._put_batch([cols.request(i) for i in mine])
                if offset >= 0 and (not len(rows) or offset > cols.commit_log_offset[rows[-1]]):
                    last_ts = ts
        if self.index_service is not None:
            self.index_service.build_index_columns(cols)
        if last_ts and self.checkpoint is not None:
            self.checkpoint.logics_msg_timestamp = last_ts

    def dispatch_one(self, topic: str, queue_id: int, commit_log_offset: int, msg_size: int, tags_code: int,
                     store_timestamp: int, consume_queue_offset: int, keys: str | None, uniq_key: str | None,
                     sys_flag: int, msg_base_offset: int | None = None, batch_size: int = 1) -> None:
        tran = sys_flag & TRANSACTION_MASK
        if (tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE) and topic not in self.skip_topics:
            cq = self._queues.get((topic, queue_id)) or self.consume_queues.find(topic, queue_id)
            if not cq.put(commit_log_offset, msg_size, tags_code, consume_queue_offset, store_timestamp):
                raise StoreAccessError(f"consume queue {topic}/{queue_id} refused offset {consume_queue_offset}",
                                       cq.directory)
            if self.checkpoint is not None:
                self.checkpoint.logics_msg_timestamp = store_timestamp
        elif self.batch_queues is not None and topic in self.batch_queues.topics:
            ts, _offset = self._put_batch([DispatchRequest(topic, queue_id, commit_log_offset, msg_size, tags_code,
                                                           store_timestamp, consume_queue_offset, keys, uniq_key,
                                                           sys_flag, msg_base_offset, batch_size)])
            if ts and self.checkpoint is not None:
                self.checkpoint.logics_msg_timestamp = ts
        if self.index_service is not None:
            self.index_service.build_index(topic, commit_log_offset, store_timestamp, sys_flag, keys, uniq_key)


class ReputMessageService:
    """Reads the commit log from reput_from_offset and dispatches what it finds."""

    def __init__(self, commit_log, dispatcher: CommitLogDispatcher, delay_levels: DelayLevels,
                 reput_from_offset: int = 0, hints=None):
        self.commit_log = commit_log  # a WritableFileQueue
        # commit log offsets where records are said to start (sorted, unique: the store's consume
        # queue units), for the column kernel's chain walk (store/record_kernel.hinted_chain): speed only
        self.hints = hints
        self.dispatcher = dispatcher
        self.delay_levels = delay_levels
        self.reput_from_offset = reput_from_offset
        self.lock = threading.RLock()  # held while dispatching: inline appends and the thread share it
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.error: BaseException | None = None
        self.on_error = None  # called (in the service's thread) after a failure
        # clean records read as columns (store/record_columns.py), when the dispatcher takes them
        self.columns = COLUMN_REPUT and hasattr(dispatcher, "dispatch_columns")
        self._topic_hashes: dict = {}

    @property
    def _multi_dispatching(self) -> bool:
        """Whether the dispatcher multi-dispatches now (asked a window at a time: the engine turns
        it on for a recovery's dispatch only)."""
        return getattr(self.dispatcher, "multi_dispatch", None) is not None

    def behind(self) -> int:
        """dispatchBehindBytes."""
        return self.commit_log.max_offset - self.reput_from_offset

    def do_reput(self) -> int:
        """Dispatch everything written so far; the number of records dispatched."""
        with self.lock:
            cl = self.commit_log
            if self.reput_from_offset < cl.min_offset:
                self.reput_from_offset = cl.min_offset
            self.reput_from_offset = _past_missing_file(cl, self.reput_from_offset)
            size = cl.mapped_file_size
            window = READ_WINDOW
            count = 0
            while self.reput_from_offset < cl.max_offset:
                offset = self.reput_from_offset
                data = cl.read(offset, window)
                pieces: list = []  # DispatchColumns and lists of requests, in commit log order
                requests = []
                pos = 0
                rolled = False
                columns = False
                # records naming queues to multi-dispatch to go as requests (columns do not carry them)
                columns_here = self.columns and not (self._multi_dispatching and _MULTI in data)
                while pos < len(data):
                    if columns_here:
                        from rmqtool.store.record_columns import column_run  # numpy: loaded when dispatching
                        hints = self.hints
                        if hints is not None:  # as indices in data
                            lo, hi = hints.searchsorted((offset + pos, offset + len(data)))
                            hints = hints[lo:hi] - offset
                        j, block, special = column_run(data, pos, len(data), offset, 0, self._topic_hashes,
                                                       _SPECIAL_TOPICS, check_crc=False, hints=hints)
                        if j > pos:  # clean records as arrays; the others one by one, as below
                            if requests:
                                pieces.append(requests)
                                requests = []
                            pieces.append(self._columns_of(data, offset, block, special, pieces))
                            pos = j
                            columns = True
                            continue
                    try:
                        n, req = check_message(data, pos, len(data), offset + pos, self.delay_levels)
                    except IndexError:
                        break  # the record goes on past what was read
                    except RecordUnreadable as exc:
                        self.dispatch_pieces(pieces + [requests])
                        self.reput_from_offset = offset + pos
                        seg = cl.segment_of(offset + pos)
                        raise CorruptData(f"cannot dispatch: {exc.reason}", seg[1] if seg else cl.directory,
                                          (offset + pos) % size) from None
                    if n == 0:
                        rolled = True  # end-of-file blank: go on at the next segment
                        break
                    requests.append(req)
                    pos += n
                pieces.append(requests)
                count += self.dispatch_pieces(pieces)
                if rolled:
                    here = offset + pos
                    self.reput_from_offset = _past_missing_file(cl, here - here % size + size)
                elif pos:
                    self.reput_from_offset = offset + pos
                    window = COLUMN_READ_WINDOW if columns else READ_WINDOW
                else:
                    need = _record_size(data)
                    if need > window:
                        window = need  # one record bigger than the window: read it whole
                        continue
                    break  # not all written yet
            return count

    def _columns_of(self, data, offset: int, block, special: list, pieces: list) -> DispatchColumns:
        """A column run's records as DispatchColumns; its special records read by check_message.
        One it refuses (a DELAY that is no number) stops the dispatch there, as the loop does."""
        requests = []
        for k in special:
            try:
                requests.append(check_message(data, k, len(data), offset + k, self.delay_levels)[1])
            except RecordUnreadable as exc:
                import numpy as np

                before = DispatchColumns.of(block, offset, requests)
                self.dispatch_pieces(pieces + [before.select(np.flatnonzero(before.commit_log_offset < offset + k))])
                self.reput_from_offset = offset + k
                seg = self.commit_log.segment_of(offset + k)
                raise CorruptData(f"cannot dispatch: {exc.reason}", seg[1] if seg else self.commit_log.directory,
                                  (offset + k) % self.commit_log.mapped_file_size) from None
        return DispatchColumns.of(block, offset, requests)

    def dispatch_pieces(self, pieces: list) -> int:
        n = 0
        for piece in pieces:
            if isinstance(piece, DispatchColumns):
                if len(piece):
                    self.dispatcher.dispatch_columns(piece)
            else:
                self._dispatch(piece)
            n += len(piece)
        return n

    def _dispatch(self, requests) -> None:
        if requests:
            self.dispatcher.dispatch(requests)

    # --- background mode ---------------------------------------------------------------------
    def start(self) -> None:
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="ReputMessageService", daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        with self._cond:
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                if self.behind() <= 0:
                    self._cond.wait(0.001)
            try:
                self.do_reput()
            except BaseException as exc:  # kept for the engine to raise
                self.error = exc
                if self.on_error is not None:
                    self.on_error()
                return

    def shutdown(self) -> None:
        """Stop the thread after it has caught up (the broker waits up to 5 s)."""
        if self._thread is None:
            return
        for _ in range(5000):
            if self.behind() <= 0 or self.error is not None or not self._thread.is_alive():
                break
            self.wakeup()
            threading.Event().wait(0.001)
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join()
        self._thread = None


def _past_missing_file(commit_log, offset: int) -> int:
    """Where dispatch goes on from ``offset``: a missing middle file is skipped to the next
    file there is, as the broker's recovery walk goes through its list of files (a store its
    recovery plan loads; a reput that must wait at such a gap makes the plan refuse it)."""
    if commit_log.segment_of(offset) is not None:
        return offset
    return next((base for base, _path in commit_log.segments if base > offset), offset)


def _record_size(data: bytes) -> int:
    if len(data) < 4:
        return 0
    return max(int.from_bytes(data[:4], "big", signed=True), 0)
