"""The 5.x RocksDB consume queue and the RocksDB config store, read through rocksdict (the
``rocksdb`` extra, imported lazily). Layouts: ``formats/rocksdb_cq.py``.

Read-only, and never in place: rocksdict writes a ``rocksdict-config.json`` into any
directory it opens, even read-only (0.3.29; found by listing the directory before and
after), so the database's files are copied into a temporary directory and opened there
read-only. RocksDB's own read-only open replays the WAL (``*.log``) in memory and writes
nothing. LOCK and the info LOG are left behind: a running broker holds LOCK, and the copy
needs neither.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import tempfile
from typing import Iterator

from rmqtool.errors import ExtraMissing, FormatError, StoreAccessError
from rmqtool.findings import CONFIG_UNPARSEABLE, ROCKSDB_CQ_ENTRY_INVALID, Finding
from rmqtool.formats.config import loads_fastjson
from rmqtool.formats.rocksdb_cq import (CHECKPOINT_TOPIC, CHECKPOINT_VALUE_SIZE, CONFIG_TABLE_NAMES, CONFIG_TYPES,
                                        CQ_KEY_LENGTH_WITHOUT_TOPIC, CQ_VALUE_SIZE, DEFAULT_COLUMN_FAMILY,
                                        KV_DATA_VERSION_COLUMN_FAMILY, KV_DATA_VERSION_KEY, MAX_MARKER, MIN_MARKER,
                                        OFFSET_COLUMN_FAMILY, OFFSET_KEY_LENGTH_WITHOUT_TOPIC, OFFSET_VALUE_SIZE,
                                        CqKey, CqValue, OffsetKey, OffsetValue, cq_queue_prefix,
                                        topic_prefix)
from rmqtool.store.broker_conf import FIVE_X
from rmqtool.store.paths import CONFIG_DIR, CONSUMEQUEUE_DIR

ROCKSDB_EXTRA = "pip install 'rmqtool[rocksdb]'"  # what a missing rocksdict needs

# the files RocksDB keeps in a database directory (and rocksdict's own): what the file-queue
# reader meets flat in consumequeue/ when the broker writes its queues to RocksDB
_ROCKSDB_FILE = re.compile(r"CURRENT|IDENTITY|LOCK|LOG(\.old\.\d+)?|MANIFEST-\d+|OPTIONS-\d+(\.dbtmp)?"
                           r"|\d+\.(sst|log|blob)|\d+\.dbtmp|rocksdict-config\.json")
# what the read-only open needs copied (the rest is the writer's: its lock, its info log, rocksdict's note)
_NOT_COPIED = re.compile(r"LOCK|LOG(\.old\.\d+)?|rocksdict-config\.json")


def is_rocksdb_dir(path: str | os.PathLike) -> bool:
    """A RocksDB database lies in ``path``: RocksDB's CURRENT file names its manifest."""
    return (pathlib.Path(path) / "CURRENT").is_file()


def is_rocksdb_file(name: str) -> bool:
    return _ROCKSDB_FILE.fullmatch(name) is not None


def rocksdb_cq_dir(store_root: str | os.PathLike) -> pathlib.Path | None:
    """The RocksDB consume queue of a store (``consumequeue/`` holding a database), or None."""
    path = pathlib.Path(store_root) / CONSUMEQUEUE_DIR
    return path if is_rocksdb_dir(path) else None


ROCKSDB_STORE_TYPE = "defaultRocksDB"  # MessageStoreConfig.storeType of a broker keeping its queues in RocksDB


def rocksdb_only(store_root: str | os.PathLike, queues=None, store_type: str | None = None) -> bool:
    """The store keeps its consume queues in RocksDB only (``storeType=defaultRocksDB``): a
    database in consumequeue/ and no file queue. ``queues``: the file queues opened (None: any
    ``TOPIC/`` directory beside the database is one); ``store_type``: broker.conf's, when given,
    decides over the files (defaultRocksDB never reads file queues left from before the switch;
    another type reads its file queues)."""
    cq = rocksdb_cq_dir(store_root)
    if cq is None or store_type is not None:
        return cq is not None and is_rocksdb_store_type(store_type)
    if queues is not None:
        return not any(not q.is_batch for q in queues)
    return not any(entry.is_dir() for entry in os.scandir(cq))


def is_rocksdb_store_type(store_type: str | None) -> bool:
    """MessageStoreConfig.isEnableRocksDBStore: storeType equalsIgnoreCase defaultRocksDB."""
    return store_type is not None and store_type.lower() == ROCKSDB_STORE_TYPE.lower()


def configured_store_type(given) -> str | None:
    """storeType from the --broker-config in ``given`` (GivenSizes), when one was given and sets it."""
    return store_type_of(getattr(given, "broker_config", None))


def store_type_of(conf) -> str | None:
    """storeType as a broker config (a BrokerConfig, or None) gives it (trimmed: only a 5.x
    broker has the setting, and its properties2Object trims it)."""
    return None if conf is None else conf.string_setting("storeType", FIVE_X)


def rocksdb_config_dirs(store_root: str | os.PathLike) -> dict[str, pathlib.Path]:
    """config type (topics, subscriptionGroups, consumerOffsets) -> its RocksDB directory, those present."""
    base = pathlib.Path(store_root) / CONFIG_DIR
    return {t: base / t for t in CONFIG_TYPES if is_rocksdb_dir(base / t)}


def require_rocksdict():
    try:
        import rocksdict
    except ImportError:
        raise ExtraMissing(f"reading a RocksDB consume queue or config store needs rocksdict: {ROCKSDB_EXTRA}") \
            from None
    return rocksdict


class Database:
    """A database opened read-only from a temporary copy of its files (see the module's note).
    ``cf(name)`` is a column family (None when the database has none of that name)."""

    def __init__(self, path: str | os.PathLike):
        rocksdict = require_rocksdict()
        self.path = pathlib.Path(path)
        self._tmp = tempfile.mkdtemp(prefix="rmqtool-rocksdb-")
        try:
            self._copy()
            raw = rocksdict.Options(raw_mode=True)
            self.column_families = rocksdict.Rdict.list_cf(self._tmp, raw)
            self._db = rocksdict.Rdict(self._tmp, raw, access_type=rocksdict.AccessType.read_only(),
                                       column_families={n: rocksdict.Options(raw_mode=True)
                                                        for n in self.column_families if n != DEFAULT_COLUMN_FAMILY})
        except PermissionError as exc:
            self.close()
            raise StoreAccessError("permission denied", exc.filename or self.path) from None
        except Exception as exc:  # rocksdict raises plain Exceptions ("Corruption: ...", "IO error: ...")
            self.close()
            raise FormatError(f"RocksDB refuses to open it: {self._said(exc)}", self.path) from None

    def _copy(self, tries: int = 3) -> None:
        """The files the open needs, into the temporary directory. A running broker's compaction
        deletes files while they are copied: the copy starts again, then gives up in one line."""
        for attempt in range(tries):
            try:
                for entry in os.scandir(self.path):
                    if entry.is_file() and is_rocksdb_file(entry.name) and not _NOT_COPIED.fullmatch(entry.name):
                        shutil.copyfile(entry.path, os.path.join(self._tmp, entry.name))
                return
            except FileNotFoundError:
                for name in os.listdir(self._tmp):
                    os.unlink(os.path.join(self._tmp, name))
        raise StoreAccessError("the database's files changed while they were copied (a running broker "
                               "compacting?); try again", self.path)

    def _said(self, exc: Exception) -> str:
        """RocksDB's message, its first line, naming the store's files rather than the copy's."""
        text = str(exc).splitlines()[0] if str(exc) else repr(exc)
        return text.replace(self._tmp, str(self.path))

    def cf(self, name: str):
        if name == DEFAULT_COLUMN_FAMILY:
            return self._db
        return self._db.get_column_family(name) if name in self.column_families else None

    def items(self, name: str, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """(key, value) of a column family in key order, those starting with ``prefix``."""
        cf = self.cf(name)
        if cf is None:
            return
        try:
            # the raw iterator, its status asked at the end: rocksdict's items() ends quietly at a
            # damaged block, as if the column family ended there
            it = cf.iter()
            it.seek(prefix) if prefix else it.seek_to_first()
            while it.valid():
                key = it.key()
                if not key.startswith(prefix):
                    return
                yield key, it.value()
                it.next()
            it.status()
        except Exception as exc:  # a damaged block met while iterating ("Corruption: block checksum mismatch")
            raise FormatError(f"RocksDB stops reading column family {name!r}: {self._said(exc)}", self.path) from None

    def close(self) -> None:
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()
            self._db = None
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- the consume queue ------------------------------------------------------------------

@dataclasses.dataclass(slots=True, frozen=True)
class RocksUnit:
    """One consume queue unit as RocksDBConsumeQueueTable stores it."""
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    size: int
    tags_code: int
    store_timestamp: int


@dataclasses.dataclass(slots=True, frozen=True)
class OffsetEntry:
    """A "max" or "min" entry of the offset column family: the unit's commit log and queue offsets."""
    topic: str
    queue_id: int
    marker: str  # "max" or "min"
    commit_log_offset: int
    queue_offset: int


def _topic(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")  # new String(bytes, UTF_8): malformed bytes become U+FFFD


def parse_unit(key: bytes, value: bytes) -> RocksUnit | str:
    """A unit from its key and value, or why they are not one (as the broker lays them out)."""
    if len(key) < CQ_KEY_LENGTH_WITHOUT_TOPIC:
        return f"key of {len(key)} bytes, fewer than a unit key's {CQ_KEY_LENGTH_WITHOUT_TOPIC}"
    try:
        k = CqKey.parse(key)
    except Exception:  # construct's errors: a wrong separator or a short topic
        return "key does not parse as topicLength, 0x01, topic, 0x01, queueId, 0x01, cqOffset"
    if len(key) != CQ_KEY_LENGTH_WITHOUT_TOPIC + k.topic_length:
        return f"key of {len(key)} bytes for a topic of {k.topic_length}: trailing bytes"
    if len(value) != CQ_VALUE_SIZE:
        return f"value of {len(value)} bytes, not {CQ_VALUE_SIZE}"
    v = CqValue.parse(value)
    return RocksUnit(_topic(k.topic), k.queue_id, k.queue_offset, v.commit_log_offset, v.size, v.tags_code,
                     v.store_timestamp)


def parse_offset(key: bytes, value: bytes) -> OffsetEntry | int | str:
    """An offset entry; the dispatch checkpoint's commit log offset (an int); or why neither."""
    try:
        k = OffsetKey.parse(key)
    except Exception:
        return "key does not parse as topicLength, 0x01, topic, 0x01, max|min, 0x01, queueId"
    if len(key) != OFFSET_KEY_LENGTH_WITHOUT_TOPIC + k.topic_length or k.marker not in (MAX_MARKER, MIN_MARKER):
        return f"key with marker {k.marker!r} or trailing bytes"
    topic = _topic(k.topic)
    if topic == CHECKPOINT_TOPIC and len(value) == CHECKPOINT_VALUE_SIZE:
        return int.from_bytes(value, "big", signed=True)
    if len(value) != OFFSET_VALUE_SIZE:
        return f"value of {len(value)} bytes, not {OFFSET_VALUE_SIZE}"
    v = OffsetValue.parse(value)
    return OffsetEntry(topic, k.queue_id, k.marker, v.commit_log_offset, v.queue_offset)


class RocksDBConsumeQueue:
    """A store's RocksDB consume queue, opened once (a temporary copy, removed by ``close``)."""

    def __init__(self, path: str | os.PathLike):
        self.path = pathlib.Path(path)
        self.db = Database(self.path)
        self.findings: list[Finding] = []
        self.checkpoint: int | None = None  # CHECKPOINT_TOPIC's value: the commit log offset dispatch built to
        self.offsets: dict[tuple[str, int], dict[str, OffsetEntry]] = {}
        if self.db.cf(OFFSET_COLUMN_FAMILY) is None:
            self._bad(None, f"no {OFFSET_COLUMN_FAMILY!r} column family (the broker opens default and offset)")
        for key, value in self.db.items(OFFSET_COLUMN_FAMILY):
            entry = parse_offset(key, value)
            if isinstance(entry, str):
                self._bad(key, f"offset entry: {entry}")
            elif isinstance(entry, int):
                self.checkpoint = entry
            else:
                self.offsets.setdefault((entry.topic, entry.queue_id), {})[entry.marker] = entry

    def _bad(self, key: bytes | None, why: str) -> None:
        at = "" if key is None else f" (key {key[:64].hex()}{'...' if len(key) > 64 else ''})"
        self.findings.append(Finding(ROCKSDB_CQ_ENTRY_INVALID, str(self.path), None, why + at))

    def units(self, topic: str | None = None, queue_id: int | None = None) -> Iterator[RocksUnit]:
        """Units in key order: by topic length and bytes, queue id, then queue offset (a queue's in
        offset order). Keys and values that are no unit become findings."""
        prefix = b""
        if topic is not None:
            raw = topic.encode("utf-8")
            prefix = cq_queue_prefix(raw, queue_id) if queue_id is not None else topic_prefix(raw)
        for key, value in self.db.items(DEFAULT_COLUMN_FAMILY, prefix):
            unit = parse_unit(key, value)
            if isinstance(unit, str):
                self._bad(key, f"unit: {unit}")
                continue
            if queue_id is None or unit.queue_id == queue_id:
                yield unit

    def queues(self) -> list[tuple[str, int]]:
        """(topic, queue id) of every queue the offset table names, sorted (the dispatch checkpoint left out)."""
        return sorted(self.offsets)

    def max_offset(self, topic: str, queue_id: int) -> int | None:
        """getMaxOffsetInQueue: one past the "max" entry's queue offset (None: no entry)."""
        entry = self.offsets.get((topic, queue_id), {}).get(MAX_MARKER)
        return None if entry is None else entry.queue_offset + 1

    def min_offset(self, topic: str, queue_id: int) -> int | None:
        """The "min" entry's queue offset, when the broker has written one."""
        entry = self.offsets.get((topic, queue_id), {}).get(MIN_MARKER)
        return None if entry is None else entry.queue_offset

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "RocksDBConsumeQueue":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- the config store (rocksDBConfigToJson) ------------------------------------------------

def config_document(path: str | os.PathLike, config_type: str, findings: list) -> dict:
    """One config database as ``rocksDBConfigToJson -t TYPE`` prints it: topics and
    subscriptionGroups ``{"dataVersion": ..., "<table>": {name: config}}``, consumerOffsets
    ``{"offsetTable": {"topic@group": {queueId: offset}}}`` (RocksDBConfigToJsonCommand.java
    188-230, 286-311). A value that is not fastjson's JSON becomes a finding and is left out."""
    path = pathlib.Path(path)
    table: dict = {}
    doc: dict = {}
    with Database(path) as db:
        for key, value in db.items(DEFAULT_COLUMN_FAMILY):
            name = key.decode("utf-8", "replace")
            try:
                parsed = loads_fastjson(value.decode("utf-8"))
            except (UnicodeDecodeError, FormatError) as exc:
                findings.append(Finding(CONFIG_UNPARSEABLE, str(path), None, f"key {name!r}: the value is not JSON "
                                        f"({exc}); left out"))
                continue
            if config_type == "consumerOffsets":
                parsed = parsed.get("offsetTable") if isinstance(parsed, dict) else None
            table[name] = parsed
        if config_type != "consumerOffsets":
            version = dict(db.items(KV_DATA_VERSION_COLUMN_FAMILY)).get(KV_DATA_VERSION_KEY)
            if version is not None:
                try:
                    doc["dataVersion"] = loads_fastjson(version.decode("utf-8"))
                except (UnicodeDecodeError, FormatError) as exc:
                    findings.append(Finding(CONFIG_UNPARSEABLE, str(path), None, f"kvDataVersion: not JSON ({exc})"))
    doc[CONFIG_TABLE_NAMES[config_type]] = table
    return doc
