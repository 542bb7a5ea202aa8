"""Which broker version's rules a store's recovery follows (4.9 or 5.3), from what the
store holds: the evidence, never a guess.

A 5.x broker leaves marks a 4.9.8 broker cannot make; one is enough:

* records (the first ones of every segment holding data, empty and unwritten segments
  skipped): the V2 magic code (a topic longer than 127 bytes), the INNER_BATCH sys flag
  (a BatchCQ topic), a trailing ``__CRC32#`` entry (enabledAppendPropCRC);
* ``batchconsumequeue/``, ``timerwheel``, ``timerlog/``, ``compaction/`` (5.x stores);
* config files only 5.x's BrokerPathConfigHelper names: ``topicQueueMapping.json``,
  ``consumerOrderInfo.json``, ``timercheck``, ``timermetrics``, ``transactionMetrics``,
  ``messageRequestMode.json`` (and their ``.bak``); a topics.json topic of queue.type BatchCQ;
* the checkpoint's masterFlushedOffset or confirmPhyOffset (bytes 24..40) not zero;
* ``abort.bak``, or an ``abort`` holding a PID: 5.3.3's createTempFile writes the PID with
  MixAll.string2File, which copies the old content to ``abort.bak`` first.

4.9.8's createTempFile makes an empty ``abort`` and never an ``abort.bak``: an empty abort
file with no abort.bak is the one mark of a 4.9 broker. No mark, or marks of both, and the
store does not say: :attr:`Detection.semantics` is None ("could not tell").
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

from rmqtool.errors import RmqError
from rmqtool.formats.commitlog import MESSAGE_MAGIC_CODE_V2, MESSAGE_MAGIC_CODES, MIN_MESSAGE_LENGTH
from rmqtool.formats.crc import CRC32_RESERVED_LEN, ends_with_crc32_entry
from rmqtool.formats.sysflag import INNER_BATCH_FLAG
from rmqtool.recovery.commitlog_walk import V4, V5
from rmqtool.store.broker_conf import BrokerConfig, StringReading, java_trim
from rmqtool.store.checkpoint import StoreMarkers, read_checkpoint, read_markers
from rmqtool.store.commitlog_paths import STORE_PATH_COMMIT_LOG, reading_by_directories, reading_matters
from rmqtool.store.commitlog_end import first_bytes
from rmqtool.store.config import configured_batch_topics
from rmqtool.store.message import HEADER_FIELDS, PREFIX
from rmqtool.store.paths import StorePaths
from rmqtool.store.segments import Segment, list_segments

# The first bytes of each segment read for records: a few records, whatever the store's size.
SAMPLE_BYTES = 16 << 10
# Paths under the store root only a 5.x broker makes (StorePathConfigHelper, TimerMessageStore,
# CompactionStore, BrokerPathConfigHelper at 5.3.3 against 4.9.8).
V5_PATHS = ("batchconsumequeue", "timerwheel", "timerlog", "compaction")
V5_CONFIG_FILES = ("topicQueueMapping.json", "consumerOrderInfo.json", "timercheck", "timermetrics",
                   "transactionMetrics", "messageRequestMode.json")
_MAGIC = HEADER_FIELDS.index("magic_code")
_SIZE = HEADER_FIELDS.index("store_size")
_SYS_FLAG = HEADER_FIELDS.index("sys_flag")


@dataclasses.dataclass(frozen=True)
class Detection:
    semantics: str | None  # V4, V5, or None: the store does not say
    reason: str


def detect_semantics(paths: StorePaths, segments: list[Segment]) -> Detection:
    """4.9 or 5.3 rules, and why; None when the evidence is absent or contradictory."""
    try:
        markers = read_markers(paths.root)
    except RmqError:
        markers = None
    v4 = _mark_of_4_9(markers)
    v5 = _mark_of_5_x(paths, segments, markers)
    if v5 and not v4:
        return Detection(V5, f"a 5.x broker wrote this store: {v5}")
    if v4 and not v5:
        return Detection(V4, f"a 4.9 broker wrote this store: {v4}, and nothing in it is 5.x-only")
    if v4 and v5:
        return Detection(None, f"could not tell: {v5} says 5.x, but {v4} says 4.9")
    return Detection(None, "could not tell: nothing in the store is 5.x-only (no V2, inner-batch or __CRC32# record "
                           "among each segment's first records, no batchconsumequeue/, timerwheel, timerlog/, "
                           "compaction/, 5.x config file, 5.x checkpoint field or abort.bak), and nothing says 4.9 "
                           "(an empty abort file without abort.bak)")


def config_reading(root: str | os.PathLike, conf: BrokerConfig, semantics: str | None = None) -> StringReading:
    """How the broker that owns the store at ``root`` reads ``conf``'s String settings (5.x's
    properties2Object trims them, 4.9's does not), where that changes where its commit log is:
    as ``semantics`` (--semantics) says; else as the store shows (its root, and the files of the
    commit log as either version would find it); else by which of the two is a directory."""
    if not reading_matters(conf):
        return StringReading(True, "")
    if semantics is not None:
        return StringReading(semantics == V5, f"read as {semantics} does, as --semantics says")
    as_written = conf.settings[STORE_PATH_COMMIT_LOG]
    segments = []
    paths = StorePaths(root)
    for d in dict.fromkeys((str(paths.commitlog), as_written, java_trim(as_written))):
        if os.path.isdir(d):
            segments += list_segments(pathlib.Path(d), [])
    found = detect_semantics(paths, segments)
    if found.semantics == V5:
        return StringReading(True, f"trimmed as 5.x's properties2Object trims a String setting; {found.reason}")
    if found.semantics == V4:
        return StringReading(False, f"untrimmed as 4.9's properties2Object keeps a String setting; {found.reason}")
    return reading_by_directories(conf, f"the store does not say which broker version reads it ({found.reason})")


def _mark_of_4_9(markers: StoreMarkers | None) -> str | None:
    if markers is not None and markers.abort.exists and not markers.abort.content and not markers.abort_bak.exists:
        return "the abort file is empty and there is no abort.bak (4.9.8's createTempFile)"
    return None


def _mark_of_5_x(paths: StorePaths, segments: list[Segment], markers: StoreMarkers | None) -> str | None:
    """The first 5.x-only thing found, cheapest first (None: none)."""
    if markers is not None and markers.abort_bak.exists:
        return "abort.bak is there (5.x's start() writes the abort file with string2File, which leaves it)"
    if markers is not None and markers.abort.pid is not None:
        return "the abort file holds a PID (5.x's createTempFile; 4.9.8 leaves it empty)"
    for name in V5_PATHS:
        if os.path.lexists(paths.root / name):
            return f"{name} is there (5.x only)"
    for name in V5_CONFIG_FILES:
        for candidate in (name, name + ".bak"):
            if os.path.lexists(paths.config / candidate):
                return f"config/{candidate} is there (5.x's BrokerPathConfigHelper only)"
    try:
        cp = read_checkpoint(paths.checkpoint)
        if cp.has_5x_fields:
            return "the checkpoint holds masterFlushedOffset/confirmPhyOffset (5.x only)"
    except (RmqError, OSError):
        pass
    if configured_batch_topics(paths.config):
        return "topics.json gives a topic queue.type BatchCQ (5.x only)"
    for seg in segments:
        mark = _record_mark(seg)
        if mark:
            return mark
    return None


def _record_mark(seg: Segment) -> str | None:
    """What the first records of a segment show of 5.x: header hops over its first
    SAMPLE_BYTES (an empty or unwritten segment shows nothing, and damage ends the hops)."""
    if seg.size == 0:
        return None
    try:
        head = first_bytes(seg.path, min(seg.size, SAMPLE_BYTES))
    except RmqError:
        return None
    pos = 0
    while pos + PREFIX.size <= len(head):
        prefix = PREFIX.unpack_from(head, pos)
        total, magic = prefix[_SIZE], prefix[_MAGIC]
        if magic not in MESSAGE_MAGIC_CODES or total < MIN_MESSAGE_LENGTH or pos + total > seg.size:
            return None
        where = f"the record at {seg.base_offset + pos} in {seg.path.name}"
        if magic == MESSAGE_MAGIC_CODE_V2:
            return f"{where} has the V2 magic code (5.x only)"
        if prefix[_SYS_FLAG] & INNER_BATCH_FLAG:
            return f"{where} is an inner batch (INNER_BATCH sys flag, 5.x only)"
        end = pos + total
        tail = (head[end - CRC32_RESERVED_LEN:end] if end <= len(head) else
                _read_tail(seg, end))
        if ends_with_crc32_entry(tail):
            return f"{where} ends with a __CRC32# entry (5.x enabledAppendPropCRC)"
        pos = end
    return None


def _read_tail(seg: Segment, end: int) -> bytes:
    try:
        return first_bytes(seg.path, CRC32_RESERVED_LEN, end - CRC32_RESERVED_LEN)
    except RmqError:
        return b""
