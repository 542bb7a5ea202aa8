"""Where the broker's recovery ends the commit log: CommitLog.recoverNormally and
recoverAbnormally, record by record, as 4.9.8 and 5.3.3 do them.

Both walk the commit log's files (every file the directory holds, made-ahead ones too)
from a start file with checkMessageAndReturnSize(checkCRC=checkCRCOnRecover, readBody=true):
a record moves the position on, an end-of-file blank record moves to the next file in the
list (a missing middle file is simply not in the list: the walk goes on in the next one,
and the messages of the missing file are skipped without a word), and the first record
that fails ends the log. The start file differs:

* normal recovery, 4.9.8: the third-last file;
* normal recovery, 5.3.3: the last file starting at or before the consume queues' largest
  max physic offset;
* abnormal recovery (either): the last file whose first record is a message stored at or
  before the checkpoint's min timestamp (isMappedFileMatchedRecover), else the first file.

Damage before the start file is never read: the broker keeps it and serves it.
"""
from __future__ import annotations

import dataclasses
import mmap
import os
from typing import Callable

import numpy as np

from rmqtool import native
from rmqtool.dispatch.dispatcher import DispatchRequest, RecordUnreadable, check_message, request_keys
from rmqtool.dispatch.rules import RMQ_SYS_SCHEDULE_TOPIC, DelayLevels
from rmqtool.errors import StoreAccessError
from rmqtool.formats.commitlog import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODES
from rmqtool.formats.properties import PROPERTY_INNER_BASE, PROPERTY_INNER_NUM, bytes_to_properties
from rmqtool.store.arrays import at_every_byte
from rmqtool.store.commitlog_end import first_bytes
from rmqtool.store.message import HEADER_FIELDS, HEADERS, PREFIX, RECORD_START
from rmqtool.store.record_kernel import body_crc_verdicts, clean_records
from rmqtool.store.segments import Segment

V4 = "4.9"
V5 = "5.3"
SEMANTICS = (V4, V5)

_MAGIC = HEADER_FIELDS.index("magic_code")
_SYS_FLAG = HEADER_FIELDS.index("sys_flag")
_STORE_TIMESTAMP = HEADER_FIELDS.index("store_timestamp")


@dataclasses.dataclass(frozen=True)
class WalkOptions:
    semantics: str = V4
    check_crc: bool = True  # checkCRCOnRecover
    verify_prop_crc: bool = False  # 5.3.3 forceVerifyPropCRC

    @property
    def magic_codes(self) -> tuple:
        return MESSAGE_MAGIC_CODES if self.semantics == V5 else (MESSAGE_MAGIC_CODE_V1,)


@dataclasses.dataclass(frozen=True)
class WalkEnd:
    """Where recovery ends the commit log (processOffset), and why the walk stopped there."""
    end: int
    start_index: int  # the file the walk started in
    file_index: int  # the file the end lies in
    position: int  # the end's position in that file
    reason: str  # what stopped the walk (a record that failed, zeros, the last file's end)
    failed_size: int | None  # totalSize of the record that failed, when it has one
    records: int  # records the walk accepted
    last_record: tuple[int, int] | None = None  # (file index, position) of the last record accepted


def normal_start(segments: list[Segment], semantics: str, max_phy_offset_of_consume_queue: int) -> int:
    """CommitLog.recoverNormally's first file: the third-last at 4.9.8; at 5.3.3 the last one
    starting at or before the consume queues' max physic offset."""
    if semantics == V4:
        return max(len(segments) - 3, 0)
    index = len(segments) - 1
    while index > 0 and segments[index].base_offset > max_phy_offset_of_consume_queue:
        index -= 1
    return max(index, 0)


def first_store_timestamp(seg: Segment, magic_codes: tuple) -> int | None:
    """The store timestamp of the message a file starts with; None when it does not start
    with one (isMappedFileMatchedRecover reads only these bytes)."""
    head = first_bytes(seg.path, HEADERS[-1].size)
    if len(head) < PREFIX.size:
        return None
    prefix = PREFIX.unpack_from(head)
    if prefix[_MAGIC] not in magic_codes:
        return None
    header = HEADERS[(prefix[_SYS_FLAG] >> 4) & 3]  # indexed by the born and store host IPv6 bits
    if len(head) < header.size:
        return None
    return header.unpack_from(head)[_STORE_TIMESTAMP]


def abnormal_start(segments: list[Segment], semantics: str, min_timestamp: int, *,
                   first_timestamp: Callable[[int], int | None] | None = None) -> int:
    """CommitLog.recoverAbnormally's first file: the last one whose first message was stored
    at or before the checkpoint's min timestamp (isMappedFileMatchedRecover; a stamp of 0
    never matches); -1 when no file matches (the walk then starts at the first file).

    ``first_timestamp(index)``: the store time of the message file ``index`` starts with
    (None: it starts with none), when the caller has read it already (verify's scan); by
    default each file's head is read, with ``semantics``' magic codes."""
    magic = WalkOptions(semantics).magic_codes
    for index in range(len(segments) - 1, -1, -1):
        stamp = (first_store_timestamp(segments[index], magic) if first_timestamp is None
                 else first_timestamp(index))
        if stamp is not None and stamp != 0 and stamp <= min_timestamp:
            return index
    return -1


def check_at(buf, pos: int, limit: int, offset: int, options: WalkOptions,
             delay_levels: DelayLevels) -> tuple[int, DispatchRequest | None, str | None, int | None]:
    """checkMessageAndReturnSize at ``buf[pos]`` with recovery's settings:
    (size, request, why it failed, its totalSize). size 0: a blank record; -1: failed."""
    if limit - pos >= RECORD_START.size:
        total, magic = RECORD_START.unpack_from(buf, pos)
        if magic == BLANK_MAGIC_CODE:
            if options.semantics == V5 and limit - pos - 4 < total - 4:
                return -1, None, "a blank record longer than the file", total  # 5.3.3 checks totalSize first
            return 0, None, None, None
    else:
        return -1, None, "the file ends", None
    try:
        size, request = check_message(buf, pos, limit, offset, delay_levels, check_crc=options.check_crc,
                                      magic_codes=options.magic_codes, verify_prop_crc=options.verify_prop_crc,
                                      strict_inner=options.semantics == V5)
    except RecordUnreadable as exc:
        return -1, None, exc.reason if magic else "zeros (no record is written here)", total
    except (IndexError, ValueError):
        return -1, None, f"a record of {total} bytes runs past the end of the file", total
    return size, request, None, None


# the walk's fast path: the clean records of a window of starts at once (store/record_kernel)
WINDOW = 4 << 20  # bytes of record starts a window covers: its arrays stay small enough to be reused, not mapped afresh
_SCHEDULE = RMQ_SYS_SCHEDULE_TOPIC.encode("ascii")
_INNER = PROPERTY_INNER_NUM.encode("ascii")  # strict_inner fails a record only with both names there
assert PROPERTY_INNER_BASE != PROPERTY_INNER_NUM


def fast_path_holds(options: WalkOptions) -> bool:
    """Whether :func:`sure_records` can vouch for records with these options (forceVerifyPropCRC
    is left to check_message: the __CRC32# value as its property map reads it)."""
    return not options.verify_prop_crc


def sure_records(buf, records, options: WalkOptions) -> np.ndarray:
    """Of the kernel's clean records of ``buf`` (:func:`clean_records`), those check_message
    surely accepts with recovery's settings, with nothing else to say: a magic code this
    version knows, the body CRC holding (checkCRCOnRecover), not the delay topic (whose DELAY
    property may fail the record), no INNER_NUM bytes anywhere when 5.3.3 parses INNER_*.
    The clean rule is check_message's reading of the lengths, so each of them is accepted with
    its totalSize; every other record goes through check_message itself."""
    sure = np.isin(records.header["magic_code"], np.array(options.magic_codes, np.int64))
    if options.check_crc:
        sure &= body_crc_verdicts(buf, records)  # an empty body needs a stored 0: stricter than the broker
    length = records.topic_length
    maybe = np.flatnonzero(length == len(_SCHEDULE))
    if len(maybe):
        topics = at_every_byte(buf, np.dtype((np.void, len(_SCHEDULE))))[records.topic_at[maybe]]
        sure[maybe[topics == np.void(_SCHEDULE)]] = False
    if options.semantics == V5 and len(records):
        hits = inner_hits(buf, int(records.position[0]), int(records.end[-1]))
        if len(hits):  # the record each occurrence lies in
            sure[np.searchsorted(records.position, hits, side="right") - 1] = False
    return sure


def sure_requests(buf, records, sure: np.ndarray, base: int) -> list:
    """check_message's DispatchRequest of each record :func:`sure_records` vouched for (``sure``),
    built from the kernel's parts of it (``base``: the commit log offset of ``buf[0]``); None
    for the others, and for a record with both INNER_* properties (4.9.8's walk does not
    vouch them away; check_message reads them), which go through check_message itself. A
    vouched record is no delay-topic record: its keys and tags code are dispatch's request_keys."""
    kernel = native.kernel
    header = records.header
    out = []
    topics: dict = {}
    for k, (ok, queue_id, queue_offset, sys_flag, store_ts, at, end, t_at, t_end, p_at) in enumerate(zip(
            sure.tolist(), header["queue_id"].tolist(), header["queue_offset"].tolist(), header["sys_flag"].tolist(),
            records.store_timestamp.tolist(), records.position.tolist(), records.end.tolist(),
            records.topic_at.tolist(), records.topic_end.tolist(), records.properties_at.tolist())):
        if not ok:
            out.append(None)
            continue
        raw_topic = bytes(buf[t_at:t_end])
        topic = topics.get(raw_topic)
        if topic is None:
            topic = topics[raw_topic] = raw_topic.decode("utf-8", "replace")
        keys = uniq = None
        code = 0
        if end > p_at:
            raw = bytes(buf[p_at:end])
            properties = kernel.properties_dict(raw) if kernel is not None else None
            if properties is None:  # not the common string: the broker's loop
                properties = bytes_to_properties(raw)[0]
            if PROPERTY_INNER_NUM in properties and PROPERTY_INNER_BASE in properties:
                out.append(None)
                continue
            keys, uniq, code = request_keys(properties)
        out.append(DispatchRequest(topic, queue_id, base + at, end - at, code, store_ts, queue_offset, keys, uniq,
                                   sys_flag, queue_offset, 1, False))
    return out


_HITS_ROOM = 256  # INNER_NUM occurrences a call of the kernel's find_all writes (a batch store's window: calls again)


def inner_hits(buf, at: int, end: int) -> np.ndarray:
    """Where INNER_NUM's bytes occur in ``buf[at:end]``, as a loop of ``buf.find`` finds them (in
    the native kernel when it is there: one C search of the window, not a Python call a hit)."""
    kernel = native.kernel
    if kernel is None:
        hits = []
        while (at := buf.find(_INNER, at, end)) >= 0:
            hits.append(at)
            at += 1
        return np.array(hits, np.int64)
    pieces = []
    while True:
        out = np.empty(_HITS_ROOM, np.int64)
        n = kernel.find_all(buf, _INNER, at, end, out)
        pieces.append(out[:n])
        if n < _HITS_ROOM:
            break
        at = int(out[n - 1]) + 1
    return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)


class MappedSegment:
    """A commit log file mapped read-only for the walk (a file of zero bytes maps to b"")."""

    def __init__(self, seg: Segment):
        self.segment = seg
        try:
            fd = os.open(seg.path, os.O_RDONLY)
        except OSError as exc:
            raise StoreAccessError(f"cannot open ({exc.strerror})", seg.path) from None
        self._released = 0  # pages before this were given back (release_before)
        try:
            size = os.fstat(fd).st_size
            self.buf = mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else b""
        except OSError as exc:
            raise StoreAccessError(f"cannot map ({exc.strerror})", seg.path) from None
        finally:
            os.close(fd)

    def release_before(self, pos: int) -> None:
        """Gives back the mapped pages before ``pos`` (the walk never reads behind itself; a page
        read again is mapped again): the process holds a window of the file, not all it walked."""
        upto = pos - pos % mmap.PAGESIZE
        if isinstance(self.buf, mmap.mmap) and upto > self._released:
            self.buf.madvise(mmap.MADV_DONTNEED, self._released, upto - self._released)
            self._released = upto

    def close(self) -> None:
        if isinstance(self.buf, mmap.mmap):
            self.buf.close()

    def __enter__(self) -> "MappedSegment":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# Over 80 lines on purpose: the walk's state (file, position, records, the last accepted) is
# shared by its kernel window and its one-by-one step; split, each call would carry all of it
def walk(segments: list[Segment], start_index: int, options: WalkOptions, delay_levels: DelayLevels,
         on_record=None, position: int = 0, dispatch_from: int = 0, hints: np.ndarray | None = None) -> WalkEnd:
    """The recovery walk from ``segments[start_index]`` (CommitLog.recoverNormally /
    recoverAbnormally): its ``WalkEnd.end`` is the **recovered end**, the walk's processOffset,
    where the broker's next start ends the log (``Outcome.recovered_end`` holds it).
    ``on_record(request)`` is called for each record accepted at commit log offset
    ``dispatch_from`` or later (what the broker dispatches during the walk). ``position``: where
    in the start file the walk begins (the record after one recover --keep-past-damage
    replaces; recovery itself always begins at a file's start).

    The records no request is asked of go a window at a time through the clean-record kernel
    (:func:`sure_records`); the others, and wherever the kernel's run stops, through
    check_message one by one (:func:`check_at`), which alone says why a record fails.
    ``hints``: commit log offsets where records are said to start (sorted, unique: the consume
    queues' units), which let the kernel prove a window's chain at once; they change nothing
    but the speed."""
    if not segments:
        return WalkEnd(0, 0, 0, 0, "no commit log file", None, 0)
    index = start_index
    records = 0
    last_record = None
    fast = fast_path_holds(options)
    while True:
        seg = segments[index]
        base = seg.base_offset
        with MappedSegment(seg) as mapped:
            buf = mapped.buf
            limit = len(buf)
            pos = position if index == start_index else 0
            last = None  # position of the last record accepted in this file
            file_hints = None
            if hints is not None and fast:
                lo, hi = np.searchsorted(hints, (base, base + limit))
                file_hints = hints[lo:hi] - base
            # records starting before here need no request: the kernel may vouch for them
            quiet_to = limit if on_record is None else min(limit, max(dispatch_from - base, 0))
            while True:
                while fast and pos < limit:  # a window of the kernel's clean records
                    # past quiet_to each record is dispatched: its request built from the kernel's parts
                    # where it vouches for the record (check_message's, one Python call a record otherwise)
                    dispatching = pos >= quiet_to
                    stop = min(limit if dispatching else quiet_to, pos + WINDOW)
                    run = clean_records(buf, pos, stop, limit, hints=file_hints)
                    if not len(run):
                        break
                    starts = run.position
                    sure = sure_records(buf, run, options)
                    rows = (enumerate(sure_requests(buf, run, sure, base)) if dispatching else
                            ((k, None) for k in np.flatnonzero(~sure).tolist()))  # the rest need no request
                    for k, request in rows:
                        p = int(starts[k])
                        if request is None:
                            size, request, why, total = check_at(buf, p, limit, base + p, options, delay_levels)
                            if size <= 0:  # a clean record is no blank: it fails here, the records before it stand
                                records += k
                                if k:
                                    last_record = (index, int(starts[k - 1]))
                                elif last is not None:
                                    last_record = (index, last)
                                return WalkEnd(base + p, start_index, index, p, why, total, records, last_record)
                        if on_record is not None and base + p >= dispatch_from:
                            on_record(request)
                    records += len(starts)
                    last = int(starts[-1])
                    pos = run.stop
                    mapped.release_before(pos)
                    if run.stop < stop:
                        break  # the run stopped short: check_message says what lies there
                size, request, why, total = check_at(buf, pos, limit, base + pos, options, delay_levels)
                if size > 0:
                    records += 1
                    if on_record is not None and base + pos >= dispatch_from:
                        on_record(request)
                    last = pos
                    pos += size
                    continue
                if last is not None:
                    last_record = (index, last)
                if size == 0:
                    if index + 1 < len(segments):
                        break  # the next file
                    # no next file: 'Current branch can not happen', the end stays at the blank
                    return WalkEnd(base + pos, start_index, index, pos,
                                   "a blank record ends the last file", None, records, last_record)
                return WalkEnd(base + pos, start_index, index, pos, why, total, records, last_record)
        index += 1
