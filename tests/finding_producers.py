"""The one table finding ID -> producer: for every registered finding, a store that has that
damage and the real run that must report it there.

A producer is a scenario (a fixture store, copied, and the command run over it once) and a
recipe: a function that damages or arranges the copy and returns where its finding must be
reported (a file, and the offset when the finding has one). Recipes of one scenario damage
one copy (their damages do not mask each other), so a few runs produce every ID. The runs
are the public entry points: ``rmqtool verify``, ``recover`` (its plan) and ``dump``,
invoked in process; the findings are read from their output, never from library internals.
Where a recipe cannot damage bytes (an OS refusing a file while tests run as root), it says
how it arranges the store instead.
"""
from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import pathlib
import re
import shutil
from typing import Callable

from conftest import FIXTURES, V4, V5, load_truth
from helpers import cli_runner, copy_tree, expand_store, writable_copy
from rmqtool import findings as f

BASIC = V4 / "basic"
CRC = V5 / "v2-and-crc"
BATCHCQ = V5 / "batchcq"
CONFIG = FIXTURES / "config"
CQEXT = V5 / "cqext"
QMQ = FIXTURES / "qmq"
TIMER_CRASH = V5 / "timer-crash"
DLEDGER = V5 / "dledger"

# The broker's layouts, written out here (the fixtures' READMEs) rather than taken from the code under test
UNIT = 20  # consume queue unit: commitLogOffset 8, size 4, tagsCode 8
BATCH_UNIT = 46  # batch unit: ... msgBaseOffset 8 at 28, batchSize 2, compactedOffset 4, reserved 4
INDEX_HEADER = 40  # index file header; then 4-byte slots, then 20-byte entries
INDEX_ENTRY = 20  # keyHash 4, phyOffset 8, timeDiff 4, prevIndex 4
# record fields: totalSize, magic, bodyCRC, queueId, flag, queueOffset @20, physicalOffset @28,
# sysFlag, bornTimestamp, bornHost (8 with IPv4), storeTimestamp @56, storeHost, reconsumeTimes,
# preparedTransactionOffset, bodyLength, body @88 (IPv4 hosts), topic length and topic, properties
QUEUE_OFFSET_AT, PHYSICAL_OFFSET_AT, STORE_TIMESTAMP_V4_AT, BODY_AT_V4 = 20, 28, 56, 88
# QMQ (fixtures/qmq/README.md): a message log record is magic 4, attributes 1, timestamp 8,
# sequence 8 @13, subject length 2 and subject, payload CRC 8, payload size 4, payload; a V1
# consumer-log unit timestamp 8, wroteOffset 8 @8, wroteBytes 4, headerSize 2; a V2 unit 32 B
# starting with the magic 0xA3B2
QMQ_SEQUENCE_AT, QMQ_UNIT_V1, QMQ_UNIT_V2, QMQ_WROTE_OFFSET_AT = 13, 22, 32, 8
# ConsumeQueueExt (fixtures/rocketmq-5.3.3/README.md): a unit is size 2, tagsCode 8 @2, msgStoreTime 8, bitMapSize 2, bit map
EXT_TAGS_CODE_AT = 2


@dataclasses.dataclass(frozen=True)
class At:
    """Where a finding must be reported: a file of the store copy, and its offset (None: the
    finding has no offset, it names the file)."""
    path: pathlib.Path
    offset: int | None


@dataclasses.dataclass(frozen=True)
class Scenario:
    source: pathlib.Path  # the fixture directory (store/ or input/store/ inside, truth.json beside)
    command: str = "verify"  # verify, recover, dump-commitlog or dump-consumequeue: run once over the copy
    expand: bool = False  # kept trimmed (QMQ's): copied out to the sizes its engine left (helpers.expand_store)
    clock: bool = False  # verify --now at the fixture's fake clock (the timer store's next start depends on it)
    # the commit log split over directories beside the copy, named by a broker.conf there (--broker-config)
    multipath: bool = False
    only: str | None = None  # verify --only AREA: the area its recipes damage (the rest is read by other scenarios)

    @property
    def store(self) -> pathlib.Path:
        for inside in ("store", "input/store", "input"):
            if (self.source / inside).is_dir():
                return self.source / inside
        raise FileNotFoundError(self.source)

    def copy(self, directory: pathlib.Path) -> pathlib.Path:
        return (expand_store if self.expand else writable_copy)(self.store, directory)

    @property
    def truth(self) -> dict:
        return load_truth(self.source / "truth.json")


class Damage:
    """A scenario's store copy, with the reads and writes recipes share."""

    def __init__(self, store: pathlib.Path, truth: dict):
        self.store = store
        self.truth = truth
        self._made: dict = {}

    def once(self, damage: Callable[["Damage"], object]):
        """A damage several recipes share (each reports a finding of its own), made at the
        first recipe's call whatever the table's order; what it returned."""
        if damage not in self._made:
            self._made[damage] = damage(self)
        return self._made[damage]

    # -- the truth files ------------------------------------------------------------------
    @property
    def config(self) -> dict:
        return self.truth["messageStoreConfig"]["effectiveGetterValues"]

    @property
    def messages(self) -> list[dict]:
        return self.truth["truth"]["messages"]

    def v4_messages(self, *, body: bool = True) -> list[dict]:
        """Records with IPv4 hosts, no transaction flag and (or without) a body: BODY_AT_V4 holds."""
        return [m for m in self.messages
                if m["sysFlag"] & 0x30 == 0 and m["sysFlag"] & 0xC == 0 and (m["bodyLength"] > 0) == body]

    def place(self, offset: int) -> tuple[pathlib.Path, int]:
        """The commit log file and position of a commit log offset."""
        size = self.config["mappedFileSizeCommitLog"]
        return self.store / "commitlog" / f"{offset - offset % size:020d}", offset % size

    def record(self, m: dict) -> At:
        return At(*self.place(m["physicalOffset"]))

    def queue(self, topic: str, queue_id: int) -> dict:
        return self.truth["truth"]["consumeQueues"][topic][str(queue_id)]

    def unit(self, topic: str, queue_id: int, n: int, *, batch: bool = False) -> At:
        """The consume queue file and position of unit n (of a simple queue: queue offset n)."""
        root, unit, size = (("batchconsumequeue", BATCH_UNIT, self.config["mapperFileSizeBatchConsumeQueue"])
                            if batch else ("consumequeue", UNIT, self.config["mappedFileSizeConsumeQueue"]))
        at = n * unit
        return At(self.store / root / topic / str(queue_id) / f"{at - at % size:020d}", at % size)

    def index_file(self, n: int) -> tuple[pathlib.Path, dict]:
        header = self.truth["onDiskAfterShutdown"]["indexFiles"][n]
        return self.store / "index" / header["fileName"], header

    def index_entry(self, n: int) -> int:
        """The position of index entry n (entries count from 1) in a file of this store."""
        return INDEX_HEADER + 4 * self.config["maxHashSlotNum"] + INDEX_ENTRY * n

    # -- writes ---------------------------------------------------------------------------
    @staticmethod
    def patch(path: pathlib.Path, position: int, data: bytes) -> None:
        with open(path, "r+b") as fh:
            fh.seek(position)
            fh.write(data)

    @staticmethod
    def read(path: pathlib.Path, position: int, n: int) -> bytes:
        with open(path, "rb") as fh:
            fh.seek(position)
            return fh.read(n)

    def int_at(self, path: pathlib.Path, position: int, n: int) -> int:
        return int.from_bytes(self.read(path, position, n), "big", signed=True)

    def set_int(self, path: pathlib.Path, position: int, n: int, value: int) -> None:
        self.patch(path, position, value.to_bytes(n, "big", signed=True))


Recipe = Callable[[Damage], At]


@dataclasses.dataclass(frozen=True)
class Producer:
    scenario: str
    recipe: Recipe
    # the fixture as made shows it already (a state the finding describes, not damage made
    # here): the undamaged fixture reports it at the same place too
    as_made: bool = False


# ---- the scenarios: one copy, one run each ----------------------------------------------------
SCENARIOS: dict[str, Scenario] = {
    "records": Scenario(BASIC),  # 4.9.8 records, one damage a record, in the first files
    "queues": Scenario(BASIC),  # consume queue and file listing damage, one queue each
    "index": Scenario(BASIC),  # index file damage, one file each
    "index-order": Scenario(BASIC, only="index"),  # an index file renamed (the others' names are the truth's)
    "crc": Scenario(CRC),  # 5.3.3 records with __CRC32# (and its queues written to RocksDB, damaged a queue each)
    "batchcq": Scenario(BATCHCQ),  # 5.3.3 inner batches and their batch consume queue
    "config": Scenario(CONFIG / "removed-topic"),  # config/*.json beside a 4.9.8 store
    "config-tables": Scenario(CONFIG / "null-table"),  # and the markers
    "gap": Scenario(V4 / "crash" / "a-as-is"),  # a halted broker's store (abort left)
    "no-queues": Scenario(V4 / "crash" / "a-as-is"),
    "recover": Scenario(V4 / "crash" / "a-as-is", "recover"),  # the plan's findings
    "recover-torn": Scenario(V4 / "crash" / "a-as-is", "recover"),
    "dump-commitlog": Scenario(BASIC, "dump-commitlog"),  # what only reading bodies finds
    # what only reading the queues unit by unit finds (verify stops at a file it cannot read: exit 8)
    "dump-queues": Scenario(BATCHCQ, "dump-consumequeue"),
    # QMQ's store (fixtures/qmq, written by DefaultStorage): damage that lets it start, damage
    # that stops its start, and V2 consumer-log units
    "qmq": Scenario(QMQ / "basic", expand=True),
    "qmq-refused": Scenario(QMQ / "basic", expand=True),
    "qmq-v2": Scenario(QMQ / "v2-consumerlog", expand=True),
    # a 5.3.3 compaction store (compaction/compactionLog, compactionCq, position-checkpoint)
    "compaction": Scenario(V5 / "compaction", expand=True),
    # 5.3.3 with enableConsumeQueueExt: one damage a queue of OrderFilterTopic, TagOnlyTopic's files copied
    "cqext": Scenario(CQEXT, expand=True),
    # the 5.x timer store of a halted broker (timer-crash/a-as-is), damaged as the engine's variants were
    "timer-cut": Scenario(TIMER_CRASH / "a-as-is", expand=True, clock=True),
    "timer-check": Scenario(TIMER_CRASH / "a-as-is", expand=True, clock=True),
    "timer-units": Scenario(TIMER_CRASH / "a-as-is", expand=True, clock=True),
    "timer-refused": Scenario(TIMER_CRASH / "a-as-is", expand=True, clock=True),
    "timer-behind": Scenario(TIMER_CRASH / "a-as-is", expand=True, clock=True),
    # a 5.3.3 DLedger commit log store (dledger-n0/data and index): one damage an entry or unit
    "dledger": Scenario(DLEDGER, expand=True),
    # 4.9.8's twelve commit log files split over two disks as MultiPathMappedFileQueue puts them
    "multipath": Scenario(BASIC, multipath=True),
    # a body byte flipped where 4.9.8's normal recovery reads it, then recover --keep-past-damage --apply
    "quarantined": Scenario(FIXTURES / "crash-made" / "torn-middle-normal"),
    # controller mode's files written beside a 5.3.3 store (tests/test_controller_store.py: the layout);
    # one epoch file each: its entries, a bad CRC, a .bak no write explains
    "controller": Scenario(CRC, only="controller"),
    "controller-checksum": Scenario(CRC, only="controller"),
    "controller-bak": Scenario(CRC, only="controller"),
}


# ---- records (4.9.8 basic: normal recovery reads only the last files; damage lies in the first) ----
def _in_file(d: Damage, n: int) -> list[dict]:
    size = d.config["mappedFileSizeCommitLog"]
    return [m for m in d.v4_messages() if m["physicalOffset"] // size == n]


def _topic_at(m: dict) -> int:
    return BODY_AT_V4 + m["bodyLength"] + 1


def _properties_at(m: dict) -> int:
    return m["storeSize"] - m["propertiesLength"]


def body_crc_mismatch(d: Damage) -> At:
    m = _in_file(d, 0)[5]
    at = d.record(m)
    d.patch(at.path, at.offset + BODY_AT_V4, bytes([d.read(at.path, at.offset + BODY_AT_V4, 1)[0] ^ 0xFF]))
    return at


def record_quarantined(d: Damage) -> At:
    """The record 4.9.8 cuts the log at (its maxPhyOffset in the truth) replaced in place."""
    offset = d.truth["engines"]["4.9.8"]["maxPhyOffset"]
    size = int(d.truth["sizes"][0])
    r = cli_runner().invoke(_app(), ["recover", str(d.store), "--keep-past-damage", "--semantics", "4.9", "--apply",
                                     "--backup-dir", str(d.store.parent / "backup")])
    assert r.exit_code == 0, r.output
    return At(d.store / "commitlog" / f"{offset - offset % size:020d}", offset % size)


def record_offset_mismatch(d: Damage) -> At:
    m = _in_file(d, 0)[10]
    at = d.record(m)
    d.set_int(at.path, at.offset + PHYSICAL_OFFSET_AT, 8, m["physicalOffset"] + 1)
    return at


def topic_invalid_utf8(d: Damage) -> At:
    m = _in_file(d, 0)[15]
    at = d.record(m)
    d.patch(at.path, at.offset + _topic_at(m), b"\xff")
    return at


def properties_invalid_utf8(d: Damage) -> At:
    m = _in_file(d, 0)[20]
    at = d.record(m)
    d.patch(at.path, at.offset + _properties_at(m), b"\xff")
    return at


def record_size_invalid(d: Damage) -> At:
    m = _in_file(d, 0)[30]
    at = d.record(m)
    d.set_int(at.path, at.offset, 4, 5)
    return at


def record_length_mismatch(d: Damage) -> At:
    m = _in_file(d, 0)[40]
    at = d.record(m)
    d.patch(at.path, at.offset + _topic_at(m) - 1, bytes([len(m["topic"].encode()) + 1]))
    return at


def record_magic_invalid(d: Damage) -> At:
    first, _, after = _in_file(d, 1)[3:6]
    at = d.record(first)
    d.patch(at.path, at.offset, b"\xee" * (after["physicalOffset"] - first["physicalOffset"]))
    return at


def _queue_offset_ahead(d: Damage) -> dict:
    """A record's queueOffset field 5 ahead of where its topic-queue is."""
    m = _in_file(d, 1)[20]
    at = d.record(m)
    d.set_int(at.path, at.offset + QUEUE_OFFSET_AT, 8, m["queueOffset"] + 5)
    return m


def queue_offset_gap(d: Damage) -> At:
    """The record whose queueOffset is ahead: offsets skipped before it."""
    return d.record(d.once(_queue_offset_ahead))


def queue_offset_repeat(d: Damage) -> At:
    """The next record of the same topic-queue: its offset goes back."""
    m = d.once(_queue_offset_ahead)
    later = [n for n in d.messages if (n["topic"], n["queueId"]) == (m["topic"], m["queueId"])
             and n["physicalOffset"] > m["physicalOffset"] and n["sysFlag"] & 0xC == 0]
    return d.record(later[0])


def blank_record_invalid(d: Damage) -> At:
    b = d.truth["truth"]["commitlog"]["blankMarkers"][2]
    at = At(*d.place(b["offset"]))
    d.set_int(at.path, at.offset, 4, b["totalSizeField"] - 1)
    return at


def blank_record_missing(d: Damage) -> At:
    b = d.truth["truth"]["commitlog"]["blankMarkers"][3]
    at = At(*d.place(b["offset"]))
    d.patch(at.path, at.offset, bytes(8))
    return at


def trailing_garbage(d: Damage) -> At:
    at = At(*d.place(d.truth["truth"]["commitlog"]["maxPhyOffset"]))
    d.patch(at.path, at.offset + 100, b"\xee" * 10)
    return at


def index_header_invalid(d: Damage) -> At:
    """The newest index file's indexCount negative (the records' scenario leaves the index alone)."""
    path, _ = d.index_file(2)
    d.set_int(path, 36, 4, -3)
    return At(path, 0)


# ---- consume queues (basic: 3 topics x 4 queues, 100 units a file; one damage a queue) --------
def consume_queue_unit_no_record(d: Damage) -> At:
    at = d.unit("OrderTopic", 0, 10)
    d.set_int(at.path, at.offset, 8, d.int_at(at.path, at.offset, 8) + 1)
    return at


def consume_queue_unit_mismatch(d: Damage) -> At:
    at = d.unit("OrderTopic", 1, 10)
    d.set_int(at.path, at.offset + 12, 8, d.int_at(at.path, at.offset + 12, 8) ^ 1)  # tagsCode
    return at


def _zeroed_units(d: Damage) -> At:
    """Three units of OrderTopic/2 zeroed in the middle of its queue."""
    at = d.unit("OrderTopic", 2, 10)
    d.patch(at.path, at.offset, bytes(3 * UNIT))
    return at


def consume_queue_hole(d: Damage) -> At:
    return d.once(_zeroed_units)


def message_not_in_consume_queue(d: Damage) -> At:
    """The messages the zeroed units held: inside the queue's range, with no unit (at the first)."""
    d.once(_zeroed_units)
    entries = d.queue("OrderTopic", 2)["entries"]
    return At(*d.place(entries[10][1]))


def consume_queue_unit_invalid(d: Damage) -> At:
    at = d.unit("OrderTopic", 3, 10)
    d.set_int(at.path, at.offset + 8, 4, -1)  # size
    return at


def consume_queue_missing(d: Damage) -> At:
    """A queue directory gone: its messages are reported at the first one's record."""
    directory = d.store / "consumequeue" / "PaymentTopic" / "0"
    for p in directory.iterdir():
        p.unlink()
    directory.rmdir()
    return At(*d.place(d.queue("PaymentTopic", 0)["entries"][0][1]))


def consume_queue_file_misaligned(d: Damage) -> At:
    last = sorted((d.store / "consumequeue" / "PaymentTopic" / "1").iterdir())[-1]
    path = last.with_name(f"{int(last.name) + d.config['mappedFileSizeConsumeQueue'] + 10:020d}")
    path.write_bytes(bytes(d.config["mappedFileSizeConsumeQueue"]))
    return At(path, None)


def message_not_dispatched(d: Damage) -> At:
    """The queue's last file gone: its messages lie past the queue's end."""
    files = sorted((d.store / "consumequeue" / "PaymentTopic" / "2").iterdir())
    files[-1].unlink()
    first = int(files[-1].name) // UNIT
    return At(*d.place(next(e[1] for e in d.queue("PaymentTopic", 2)["entries"] if e[0] == first)))


def consume_queue_beyond_commit_log(d: Damage) -> At:
    """One more unit after the queue's last, pointing past the commit log's end."""
    q = d.queue("PaymentTopic", 3)
    at = d.unit("PaymentTopic", 3, q["maxOffset"])
    end = d.truth["truth"]["commitlog"]["maxPhyOffset"]
    d.patch(at.path, at.offset, end.to_bytes(8, "big") + (100).to_bytes(4, "big") + bytes(8))
    return at


def consume_queue_fill_units(d: Damage) -> At:
    """The first ten units of a file as the broker writes them when it rebuilds a queue from
    the middle of a file (commitLogOffset 0, size Integer.MAX_VALUE, tagsCode 0)."""
    at = d.unit("AuditLogTopic", 0, 0)
    d.patch(at.path, 0, (bytes(8) + (2**31 - 1).to_bytes(4, "big") + bytes(8)) * 10)
    return at


def queue_dir_invalid(d: Damage) -> At:
    path = d.store / "consumequeue" / "notes.txt"
    path.write_text("not a topic")
    return At(path, None)


def _next_file(directory: pathlib.Path, size: int) -> pathlib.Path:
    last = sorted(directory.iterdir())[-1]
    return last.with_name(f"{int(last.name) + size:020d}")


def segment_empty(d: Damage) -> At:
    path = _next_file(d.store / "consumequeue" / "AuditLogTopic" / "1", d.config["mappedFileSizeConsumeQueue"])
    path.write_bytes(b"")
    return At(path, 0)


def segment_unreadable(d: Damage) -> At:
    """A consume queue file the OS refuses to read: mode 000 (the dump runs without the
    capabilities that let root read it anyway, see _unprivileged)."""
    path = d.store / "consumequeue" / "PlainTopic" / "0" / f"{0:020d}"
    path.chmod(0)
    return At(path, None)


def segment_overlap(d: Damage) -> At:
    """A copy of a queue's last file named half a file before it."""
    directory = d.store / "consumequeue" / "AuditLogTopic" / "2"
    files = sorted(directory.iterdir())
    path = directory / f"{int(files[-1].name) - d.config['mappedFileSizeConsumeQueue'] // 2:020d}"
    path.write_bytes(files[-1].read_bytes())
    return At(path, None)


def segment_size_odd(d: Damage) -> At:
    """A queue's last file one unit longer than the mapped file size."""
    path = sorted((d.store / "consumequeue" / "AuditLogTopic" / "3").iterdir())[-1]
    path.write_bytes(path.read_bytes() + bytes(UNIT))
    return At(path, None)


def segment_name_invalid(d: Damage) -> At:
    path = d.store / "commitlog" / "notes.txt"
    path.write_text("not a segment")
    return At(path, None)


# ---- index files (basic: 3 files, 1000 slots; one damage a file) ------------------------------
def index_entry_mismatch(d: Damage) -> At:
    path, _ = d.index_file(0)
    at = d.index_entry(5) + 12  # timeDiff: another store time
    d.set_int(path, at, 4, d.int_at(path, at, 4) + 1000)
    return At(path, d.index_entry(5))


def index_chain_broken(d: Damage) -> At:
    path, _ = d.index_file(0)
    d.set_int(path, d.index_entry(9) + 16, 4, 9)  # prevIndex naming itself: a loop
    return At(path, d.index_entry(9))


def index_entry_no_record(d: Damage) -> At:
    path, _ = d.index_file(0)
    at = d.index_entry(20) + 4  # phyOffset
    d.set_int(path, at, 8, d.int_at(path, at, 8) + 1)
    return At(path, d.index_entry(20))


def index_header_mismatch(d: Damage) -> At:
    path, header = d.index_file(1)
    d.set_int(path, 32, 4, header["hashSlotCount"] + 1)
    return At(path, 0)


def _clock_stepped_back(d: Damage) -> tuple[pathlib.Path, dict]:
    """The store clock stepped back while the newest index file filled: its last message stored
    (and the header's endTimestamp, as putKey writes it) before its first. Once a copy."""
    path, header = d.index_file(2)
    last = next(m for m in d.messages if m["physicalOffset"] == header["endPhyOffset"])
    assert last["sysFlag"] & 0x10 == 0  # an IPv4 bornHost: the store timestamp at STORE_TIMESTAMP_V4_AT
    earlier = header["beginTimestamp"] - 1000
    record = d.record(last)
    d.set_int(record.path, record.offset + STORE_TIMESTAMP_V4_AT, 8, earlier)
    d.set_int(path, 8, 8, earlier)
    return path, last


def store_timestamp_backwards(d: Damage) -> At:
    return d.record(d.once(_clock_stepped_back)[1])


def index_timestamp_backwards(d: Damage) -> At:
    return At(d.once(_clock_stepped_back)[0], 0)


def index_file_out_of_order(d: Damage) -> At:
    """The oldest index file renamed after the newest (added back under a clock ahead, or renamed
    by hand): its entries come before those of the file it now sorts after."""
    files = d.truth["onDiskAfterShutdown"]["indexFiles"]
    (first, _), (last, _) = d.index_file(0), d.index_file(len(files) - 1)
    moved = first.with_name(f"{int(last.name) + 1:017d}")
    first.rename(moved)
    return At(moved, 0)


def index_file_name_invalid(d: Damage) -> At:
    path = d.store / "index" / "notes.txt"
    path.write_text("not an index file")
    return At(path, None)


def index_file_unreadable(d: Damage) -> At:
    """An index file shorter than its header."""
    path = d.store / "index" / "20991231235959999"
    path.write_bytes(bytes(10))
    return At(path, None)


def index_geometry_unknown(d: Damage) -> At:
    """A new index file with no entry yet (indexCount 1), of a broker configured with
    maxHashSlotNum 100 and maxIndexNum 300: no entry to check a guess against, and the size is
    not the default 1:4 ratio, so nothing tells its geometry."""
    path = d.store / "index" / "20991231235959998"
    path.write_bytes(bytes(32) + (0).to_bytes(4, "big") + (1).to_bytes(4, "big")
                     + bytes(4 * 100 + INDEX_ENTRY * 300))
    return At(path, None)


# ---- 5.3.3 records with __CRC32# --------------------------------------------------------------
def _crc_messages(d: Damage) -> list[dict]:
    return [m for m in d.messages if "propertyCrc32OffsetInRecord" in m]


def _appended(d: Damage) -> int:
    """Two records appended after the broker's by rmqtool append, as a writer with
    enabledAppendPropCRC off writes them (before any damage: append refuses a damaged store).
    Where the first lies."""
    runner = cli_runner()
    for i in range(2):
        r = runner.invoke(_app(), ["append", str(d.store), "--prop-crc", "off", "--topic", "OrderTopic",
                                   "--body", f"m{i}"])
        assert r.exit_code == 0, r.output
    return d.truth["truth"]["commitlog"]["maxPhyOffset"]


def property_crc_missing_at_end(d: Damage) -> At:
    return At(*d.place(d.once(_appended)))


def property_crc_mismatch(d: Damage) -> At:
    d.once(_appended)
    m = _crc_messages(d)[10]
    at = d.record(m)
    d.patch(at.path, at.offset + m["propertyCrc32OffsetInRecord"] + 9, b"9")  # a digit
    return at


def property_crc_unreadable(d: Damage) -> At:
    d.once(_appended)
    m = _crc_messages(d)[20]
    at = d.record(m)
    d.patch(at.path, at.offset + m["propertyCrc32OffsetInRecord"] + 6, b"3")  # the name
    return at


def property_crc_missing(d: Damage) -> At:
    d.once(_appended)
    m = _crc_messages(d)[30]
    at = d.record(m)
    d.patch(at.path, at.offset + m["propertyCrc32OffsetInRecord"] + 8, b"x")  # the separator: no entry
    return at


def record_truncated(d: Damage) -> At:
    """The middle file cut inside a record."""
    d.once(_appended)
    size = d.config["mappedFileSizeCommitLog"]
    inside = [m for m in d.messages if m["physicalOffset"] // size == 1]
    cut = inside[-3]
    at = d.record(cut)
    at.path.write_bytes(at.path.read_bytes()[:at.offset + 10])
    return at


# ---- 5.3.3 batch consume queue ------------------------------------------------------------------
def batch_consume_queue_offset_gap(d: Damage) -> At:
    """A unit's msgBaseOffset one past where the batch before it ends. Read in order by dump (and
    query, spark export); verify matches each unit with its record instead, and reports the
    same damage as consumeQueueUnitMismatch."""
    at = d.unit("BatchCQTopic", 0, 3, batch=True)
    d.set_int(at.path, at.offset + 28, 8, d.int_at(at.path, at.offset + 28, 8) + 1)  # msgBaseOffset
    return at


# ---- config/*.json (4.9.8-shaped, beside a broker-written store) ------------------------------
def _config(d: Damage, name: str) -> pathlib.Path:
    return d.store / "config" / name


def _legacy_group(d: Damage) -> pathlib.Path:
    """The fixture as made (config/removed-topic): legacy_group's offsets for LegacyTopic stay,
    the topic is gone from topics.json and from the store."""
    path = _config(d, "consumerOffset.json")
    assert '"LegacyTopic@legacy_group"' in path.read_text()
    return path


def consumer_offset_topic_missing(d: Damage) -> At:
    return At(_legacy_group(d), None)


def consumer_offset_for_missing_queue(d: Damage) -> At:
    """LegacyTopic's committed offsets above 0, for queues with no consume queue."""
    return At(_legacy_group(d), None)


def _offsets_out_of_range(d: Damage) -> None:
    path = _config(d, "consumerOffset.json")
    text = path.read_text()
    patched = re.sub(r'("CrashTopic@order_group":\{)0:\d+,1:\d+', r"\g<1>0:20,1:400", text)
    assert patched != text
    path.write_text(patched)


def consumer_offset_below_min(d: Damage) -> At:
    """order_group's CrashTopic/0 at 20: the queue starts at 50 (fixtures/config/README.md)."""
    d.once(_offsets_out_of_range)
    return At(_config(d, "consumerOffset.json"), None)


def consumer_offset_above_max(d: Damage) -> At:
    """order_group's CrashTopic/1 at 400: the queue ends at 310."""
    d.once(_offsets_out_of_range)
    return At(_config(d, "consumerOffset.json"), None)


def _topics_broken(d: Damage) -> At:
    """topics.json with a byte no fastjson text holds where its table's name starts."""
    path = _config(d, "topics.json")
    at = path.read_bytes().index(b'"topicConfigTable"')
    d.patch(path, at, b"@")
    return At(path, at)


def config_unparseable(d: Damage) -> At:
    return d.once(_topics_broken)


def config_bak_used(d: Damage) -> At:
    """The broker loads topics.json.bak instead."""
    d.once(_topics_broken)
    return At(_config(d, "topics.json.bak"), None)


def config_bak_stale(d: Damage) -> At:
    """That .bak an hour older than the broken main file: what changed since is lost."""
    d.once(_topics_broken)
    bak = _config(d, "topics.json.bak")
    main = os.stat(_config(d, "topics.json")).st_mtime
    os.utime(bak, (main - 3600, main - 3600))
    return At(bak, None)


def delay_offset_out_of_range(d: Damage) -> At:
    path = _config(d, "delayOffset.json")
    path.write_text('{\n\t"offsetTable":{3:5}\n}')  # level 3: the store has no such delay queue
    return At(path, None)


def topic_queue_count_mismatch(d: Damage) -> At:
    """A queue directory for a queue id topics.json does not give OtherTopic (1 queue)."""
    source = d.store / "consumequeue" / "OtherTopic" / "0"
    directory = source.with_name("5")
    directory.mkdir()
    return At(directory, None)


def consumer_offset_key_invalid(d: Damage) -> At:
    """An offsetTable key without '@' first, the others as they were: fastjson loads it."""
    path = _config(d, "consumerOffset.json")
    text = path.read_text()
    patched = text.replace('"offsetTable":{', '"offsetTable":{\n\t\t"noSeparator":{0:3\n\t\t},', 1)
    assert patched != text
    path.write_text(patched)
    return At(path, None)


def consumer_offset_table_invalid(d: Damage) -> At:
    """The fixture as made (config/null-table): an offsetTable the broker loads as null."""
    path = _config(d, "consumerOffset.json")
    assert '"offsetTable":null' in path.read_text()
    return At(path, None)


def config_table_invalid(d: Damage) -> At:
    path = _config(d, "topics.json")
    path.write_text('{"topicConfigTable":[]}')
    return At(path, None)


def config_tmp_leftover(d: Damage) -> At:
    path = _config(d, "subscriptionGroup.json.tmp")
    path.write_text('{"subscriptionGroupTable":{')
    return At(path, None)


def config_too_large(d: Damage) -> At:
    """A file past what a broker's config file can hold: sparse, so nothing is written."""
    path = _config(d, "delayOffset.json")
    with open(path, "r+b") as fh:
        fh.truncate(257 << 20)
    return At(path, None)


def checkpoint_invalid(d: Damage) -> At:
    path = d.store / "checkpoint"
    path.write_bytes(path.read_bytes()[:100])
    return At(path, None)


def abort_file_unexpected(d: Damage) -> At:
    path = d.store / "abort"
    path.write_text("not a pid")
    return At(path, 0)


def abort_file_present(d: Damage) -> At:
    """The abort file the halted broker left (crash/a-as-is)."""
    path = d.store / "abort"
    assert path.is_file()
    return At(path, None)


def lock_file_unexpected(d: Damage) -> At:
    path = d.store / "lock"
    path.write_bytes(b"held")
    return At(path, 0)


# ---- the broker's next start ------------------------------------------------------------------
def checkpoint_missing(d: Damage) -> At:
    path = d.store / "checkpoint"
    path.unlink()
    return At(path, None)


def checkpoint_zeroed(d: Damage) -> At:
    d.once(_appended)  # append writes the checkpoint: first
    path = d.store / "checkpoint"
    path.write_bytes(bytes(path.stat().st_size))
    return At(path, 0)


# a clean store reports these too: where its data ends and what its next start reads
def checkpoint_window(d: Damage) -> At:
    """The first message stored after the checkpoint's physicMsgTimestamp (what a crash may not have flushed)."""
    flushed = d.truth["onDiskAfterShutdown"]["checkpoint"]["physicMsgTimestamp"]
    return d.record(next(m for m in d.messages if m["storeTimestamp"] > flushed))


def recovery_start_file(d: Damage) -> At:
    """A clean shutdown: the next start recovers normally from the third-last file."""
    return At(sorted((d.store / "commitlog").iterdir())[-3], 0)


def commit_log_end(d: Damage) -> At:
    return At(*d.place(d.truth["truth"]["commitlog"]["maxPhyOffset"]))


def checkpoint_ahead_of_data(d: Damage) -> At:
    """physicMsgTimestamp a day after the last stored message (crash-made/checkpoint-newer-than-data's shape)."""
    path = d.store / "checkpoint"
    last = max(m["storeTimestamp"] for m in d.messages)
    d.set_int(path, 0, 8, last + 86_400_000)
    return At(path, None)


def index_key_not_indexed(d: Damage) -> At:
    """The middle index file gone: the first message it covered has keys no entry covers."""
    path, header = d.index_file(1)
    path.unlink()
    return At(*d.place(header["beginPhyOffset"]))


def index_missing(d: Damage) -> At:
    path = d.store / "index"
    for p in path.iterdir():
        p.unlink()
    path.rmdir()
    return At(path, None)


def _drop_middle_file(d: Damage) -> pathlib.Path:
    """Commit log file 131072 gone (crash-made/missing-middle-*'s shape); the file after it."""
    size = d.config["mappedFileSizeCommitLog"]
    (d.store / "commitlog" / f"{2 * size:020d}").unlink()
    return d.store / "commitlog" / f"{3 * size:020d}"


def _split_commit_log(d: Damage) -> list[pathlib.Path]:
    """storePathCommitLog=DISK-A,DISK-B beside the copy: file i in the sorted paths' i mod 2
    (MultiPathMappedFileQueue.tryCreateMappedFile with no disk full), STORE/commitlog left
    holding file 0's copy only, and a read-only path that does not exist; the two disks."""
    size = d.config["mappedFileSizeCommitLog"]
    disks = [d.store.parent / f"disk-{c}" / "commitlog" for c in "ab"]
    for disk in disks:
        disk.mkdir(parents=True)
    for f in sorted((d.store / "commitlog").iterdir()):
        target = disks[int(f.name) // size % 2] / f.name
        (shutil.copyfile if int(f.name) == 0 else shutil.move)(f, target)
    gone = d.store.parent / "disk-gone" / "commitlog"
    (d.store.parent / "broker.conf").write_text(f"storePathCommitLog={disks[0]},{disks[1]}\n"
                                                f"readOnlyCommitLogStorePaths={gone}\n")
    return disks


def commit_log_file_duplicated(d: Damage) -> At:
    """File 3 (disk-b's by the rule) copied into disk-a too: the copy outside the rule's path is named."""
    disks, size = d.once(_split_commit_log), d.config["mappedFileSizeCommitLog"]
    name = f"{3 * size:020d}"
    shutil.copyfile(disks[1] / name, disks[0] / name)
    return At(disks[0] / name, None)


def commit_log_file_misplaced(d: Damage) -> At:
    """File 5 (disk-b's by the rule) moved to disk-a."""
    disks, size = d.once(_split_commit_log), d.config["mappedFileSizeCommitLog"]
    name = f"{5 * size:020d}"
    shutil.move(disks[1] / name, disks[0] / name)
    return At(disks[0] / name, None)


def commit_log_path_missing(d: Damage) -> At:
    d.once(_split_commit_log)
    return At(d.store.parent / "disk-gone" / "commitlog", None)


def commit_log_files_not_loaded(d: Damage) -> At:
    d.once(_split_commit_log)
    return At(d.store / "commitlog", None)


def segment_gap(d: Damage) -> At:
    return At(d.once(_drop_middle_file), None)


def message_unreachable(d: Damage) -> At:
    """The abort left: the broker loads the store and skips the gap's messages; reported at the
    file after the gap, where the broker's walk goes on."""
    return At(d.once(_drop_middle_file), 0)


def store_not_loadable(d: Damage) -> At:
    """The gap with no consume queues and no abort (crash-made/missing-middle-no-queues):
    start() dispatches from 0 and waits at the gap for ever."""
    after = d.once(_drop_middle_file)
    (d.store / "abort").unlink()
    for p in sorted((d.store / "consumequeue").rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    return At(after, None)


def _inner_batch_record(d: Damage) -> dict:
    """The last batch record of BatchCQTopic/1 (past the damage the batch queue scenario puts in queue 0)."""
    return [m for m in d.messages if m["topic"] == "BatchCQTopic" and m["queueId"] == 1
            and "INNER_BASE" in m["properties"]][-1]


def _inner_base_not_a_number(d: Damage) -> At:
    """An INNER_BASE digit changed to x (crash-made/inner-base-not-a-number's shape)."""
    m = _inner_batch_record(d)
    at = d.record(m)
    props = m["propertiesString"].encode()
    where = props.index(b"INNER_BASE\x01") + len(b"INNER_BASE\x01")
    d.patch(at.path, at.offset + m["storeSize"] - m["propertiesLength"] + where, b"x")
    return at


def inner_batch_property_invalid(d: Damage) -> At:
    return d.once(_inner_base_not_a_number)


def recovery_cuts_commit_log(d: Damage) -> At:
    """That record, with records after it: 5.3.3's recovery (normal, the last files) cuts the log there."""
    return d.once(_inner_base_not_a_number)


# ---- the recover plan (crash/a-as-is: the abort left, so the next start recovers abnormally) ----
def _written_files(d: Damage) -> list[pathlib.Path]:
    size = d.config["mappedFileSizeCommitLog"]
    return [d.store / "commitlog" / f"{n * size:020d}"
            for n in sorted({m["physicalOffset"] // size for m in d.messages})]


def _cut_second_to_last_file(d: Damage) -> dict:
    """A body byte flipped in the first record of the second-to-last written file (crash/e3's shape)."""
    base = int(_written_files(d)[-2].name)
    m = next(m for m in d.v4_messages() if m["physicalOffset"] >= base)
    at = d.record(m)
    d.patch(at.path, at.offset + BODY_AT_V4, bytes([d.read(at.path, at.offset + BODY_AT_V4, 1)[0] ^ 0xFF]))
    return m


def segment_after_end(d: Damage) -> At:
    d.once(_cut_second_to_last_file)
    return At(_written_files(d)[-1], 0)


def consume_queue_file_after_end(d: Damage) -> At:
    """The last file of CrashTopic/0: every unit in it points past the cut segment_after_end made."""
    cut = d.once(_cut_second_to_last_file)["physicalOffset"]
    last = sorted((d.store / "consumequeue" / "CrashTopic" / "0").iterdir())[-1]
    assert next(e[1] for e in d.queue("CrashTopic", 0)["entries"] if e[0] == int(last.name) // UNIT) >= cut
    return At(last, None)


def index_file_newer_than_checkpoint(d: Damage) -> At:
    """The index file the real broker destroyed when it recovered this store (crash/a-as-is/expected)."""
    kept = {p.name for p in (V4 / "crash" / "a-as-is" / "expected" / "store" / "index").iterdir()}
    (destroyed,) = [p for p in (d.store / "index").iterdir() if p.name not in kept]
    return At(destroyed, None)


def record_torn(d: Damage) -> At:
    """The second half of the last record overwritten (crash/b2's shape)."""
    m = max(d.messages, key=lambda m: m["physicalOffset"])
    at = d.record(m)
    half = m["storeSize"] // 2
    d.patch(at.path, at.offset + half, b"\xee" * (m["storeSize"] - half))
    return at


def body_decompress_failed(d: Damage) -> At:
    """A ZSTD body whose frame header is gone: dump --decompress cannot read it."""
    m = next(m for m in d.messages if m.get("compressionType") == "ZSTD")
    at = d.record(m)
    raw = d.read(at.path, at.offset, m["storeSize"])
    body = base64.b64decode(m["body"])
    d.patch(at.path, at.offset + raw.index(body), b"\xee" * 8)
    d.dump_range = (m["physicalOffset"], m["physicalOffset"] + m["storeSize"])
    return at


def _app():
    from rmqtool.cli.app import app
    return app


# ---- QMQ (basic, expanded; readBack in truth.json is what DefaultStorage read) -----------------

def _qmq_records(d: Damage) -> list[dict]:
    return d.truth["readBack"]["messageLog"]["records"]


def _qmq_log(d: Damage, name: str = "messagelog") -> pathlib.Path:
    return d.store / name / f"{0:020d}"


def _qmq_cut(d: Damage) -> dict:
    """One payload byte flipped three quarters into the log: QMQ's recovery cuts it there."""
    rec = _qmq_records(d)[len(_qmq_records(d)) * 3 // 4]
    at = rec["offset"] + rec["headerSize"] + rec["payloadSize"] // 2
    d.patch(_qmq_log(d), at, bytes([d.read(_qmq_log(d), at, 1)[0] ^ 0xFF]))
    return rec


def payload_crc_mismatch(d: Damage) -> At:
    return At(_qmq_log(d), d.once(_qmq_cut)["offset"])


def recovery_cuts_message_log(d: Damage) -> At:
    d.once(_qmq_cut)
    return At(d.store / "messagelog", None)


def _qmq_after_cut(d: Damage) -> str:
    """A subject with records on both sides of the cut: sequences before it stay, later ones go."""
    cut = d.once(_qmq_cut)
    before = {r["subject"] for r in _qmq_records(d) if r["offset"] < cut["offset"]}
    return next(r["subject"] for r in _qmq_records(d) if r["offset"] > cut["offset"] and r["subject"] in before)


def messages_served_empty(d: Damage) -> At:
    return At(d.store / "consumerlog" / _qmq_after_cut(d), None)


def messages_not_served(d: Damage) -> At:
    return d.once(_qmq_consumer_log_deleted)  # its records: no unit serves them after the start


def _qmq_resequenced(d: Damage) -> dict:
    """A record early in the log given a sequence 1000 past its own (its CRC covers the payload only)."""
    rec = next(r for r in _qmq_records(d)[10:] if r["subject"] == "inventory.delta")
    d.set_int(_qmq_log(d), rec["offset"] + QMQ_SEQUENCE_AT, 8, rec["sequence"] + 1000)
    return rec


def message_sequence_gap(d: Damage) -> At:
    d.once(_qmq_resequenced)
    return At(d.store / "messagelog", None)


def consumer_log_unit_mismatch(d: Damage) -> At:
    rec = d.once(_qmq_resequenced)
    return At(d.store / "consumerlog" / rec["subject"] / f"{0:020d}", rec["sequence"] * QMQ_UNIT_V1)


def consumer_log_unit_past_end(d: Damage) -> At:
    path = d.store / "consumerlog" / "order.created" / f"{0:020d}"
    d.set_int(path, 3 * QMQ_UNIT_V1 + QMQ_WROTE_OFFSET_AT, 8, 1 << 40)  # unit 3 points past every segment
    return At(path, 3 * QMQ_UNIT_V1)


def message_record_invalid(d: Damage) -> At:
    end = max(r["offset"] + r["size"] for r in _qmq_records(d))
    d.patch(_qmq_log(d), end, b"not a record" * 3)  # garbage after the last record
    return At(_qmq_log(d), end)


def _qmq_consumer_log_deleted(d: Damage) -> At:
    """crash/e's damage: a subject's only consumer-log file deleted, its records before the
    checkpoint the replay starts from."""
    directory = d.store / "consumerlog" / "schedule.reminder"
    (directory / f"{0:020d}").unlink()
    return At(directory, None)


def message_not_in_consumer_log(d: Damage) -> At:
    return d.once(_qmq_consumer_log_deleted)


def checkpoint_unreadable(d: Damage) -> At:
    path = sorted((d.store / "checkpoint").glob("message-checkpoint.*"))[0]  # an old one: nothing else changes
    path.write_text("2\n##garbled##\n")
    return At(path, None)


def checkpoint_subject_missing(d: Damage) -> At:
    path = sorted((d.store / "checkpoint").glob("message-checkpoint.*"))[-1]  # the one a start loads
    lines = [line for line in path.read_text().splitlines(keepends=True) if not line.startswith("支付")]
    path.write_text("".join(lines))
    return At(path, None)


def checkpoint_directory_invalid(d: Damage) -> At:
    """checkpoint/ replaced by a file (its snapshots gone with it)."""
    import shutil
    path = d.store / "checkpoint"
    shutil.rmtree(path)
    path.write_text("not a directory\n")
    return At(path, None)


def action_record_invalid(d: Damage) -> At:
    end = d.truth["readBack"]["actionLog"]["records"][-1]["endOffset"]
    d.patch(_qmq_log(d, "actionlog"), end, b"garbage!" * 4)
    return At(_qmq_log(d, "actionlog"), end)


def action_replay_skips_actions(d: Damage) -> At:
    return At(d.store / "pulllog_smt", None)  # as made: QMQ's replay starts past the tablet's end


def log_segment_short(d: Damage) -> At:
    legacy = d.truth["readBack"]["pullLogs"]["legacyPullLogs"][0]
    path = d.store / "pulllog" / legacy["consumerId"] / legacy["groupAndSubject"] / f"{0:020d}"
    with open(path, "r+b") as fh:
        fh.truncate(64)
    return At(path, 64)


def log_segment_name_invalid(d: Damage) -> At:
    path = d.store / "messagelog" / f"{0:020d}.bak"
    path.write_bytes(b"a copy someone left")
    return At(path, None)


def log_segment_name_misaligned(d: Damage) -> At:
    """A second file in a legacy pull log, named 100 bytes on: not a name QMQ gives."""
    legacy = d.truth["readBack"]["pullLogs"]["legacyPullLogs"][-1]
    path = d.store / "pulllog" / legacy["consumerId"] / legacy["groupAndSubject"] / f"{100:020d}"
    path.write_bytes(bytes(64))
    return At(path, None)


def pull_log_tablet_invalid(d: Damage) -> At:
    path = d.store / d.truth["readBack"]["pullLogTablets"][0]["file"]
    d.patch(path, 40, bytes([d.read(path, 40, 1)[0] ^ 0xFF]))  # a payload byte: the CRC fails
    return At(path, None)


def consumer_log_unit_invalid(d: Damage) -> At:
    subject = sorted(d.truth["readBack"]["consumerLogs"])[0]
    path = d.store / "consumerlog" / subject / f"{0:020d}"
    d.patch(path, QMQ_UNIT_V2, b"\x00\x00")  # unit 1's magic gone
    return At(path, QMQ_UNIT_V2)


# ---- the compaction store (5.3.3 compaction: fixtures/rocketmq-5.3.3/README.md, "Compaction on disk") ----
def _compaction_topic(d: Damage, queue_id: int) -> dict:
    return next(t for t in d.truth["compactionTopics"] if t["queueId"] == queue_id)


def compaction_cq_file_missing(d: Damage) -> At:
    """The last queue file of queue 1 deleted: its log file has no twin (sanityCheck throws)."""
    t = _compaction_topic(d, 1)
    name = t["compactionCq"]["files"][-1]["name"]
    (d.store / t["compactionCq"]["dir"] / name).unlink()
    return At(d.store / t["compactionLog"]["dir"] / name, None)


def _unit_names_the_next_record(d: Damage) -> tuple[At, At]:
    """Queue 2's unit 3 pointed at record 4: the unit names a record of another queue offset,
    and record 3 is named by no unit."""
    t = _compaction_topic(d, 2)
    cq_file = t["compactionCq"]["files"][0]
    cq = d.store / t["compactionCq"]["dir"] / cq_file["name"]
    third, fourth = cq_file["units"][3], cq_file["units"][4]
    d.set_int(cq, third["posInFile"], 8, fourth["logOffset"])  # logOffset: the unit's first 8 bytes
    record = next(r for r in t["compactionLog"]["records"] if r["logOffset"] == third["logOffset"])
    return At(cq, third["posInFile"]), At(d.store / t["compactionLog"]["dir"] / record["file"], record["posInFile"])


def compaction_cq_unit_mismatch(d: Damage) -> At:
    return d.once(_unit_names_the_next_record)[0]


def compaction_record_not_in_cq(d: Damage) -> At:
    return d.once(_unit_names_the_next_record)[1]


def compaction_checkpoint_mismatch(d: Damage) -> At:
    """position-checkpoint rewritten (fastjson's layout) naming queue offset 500 for queue 0, past its log."""
    path = d.store / "compaction" / "position-checkpoint"
    path.write_text('{\n\t"empty":false,\n\t"queueOffsetMap":{\n\t\t"UserProfileTopic_0":500,\n'
                    '\t\t"UserProfileTopic_1":67\n\t}\n}')
    return At(path, None)
# ---- the RocksDB consume queue (5.3.3 crc: its file queues' units written to RocksDB in consumequeue/
# by tests/rocksdb_store.py, from the source's layout; one damage a queue) ----
def _rocksdb_cq(d: Damage) -> pathlib.Path:
    from rocksdb_store import truth_units, write_rocksdb_cq
    return write_rocksdb_cq(d.store, truth_units(d.truth))


def _rocksdb_edit(d: Damage, **edits) -> At:
    from rocksdb_store import edit_rocksdb
    db = d.once(_rocksdb_cq)
    edit_rocksdb(db, **edits)
    return At(db, None)  # a key of the database: its findings name the database directory


def rocksdb_cq_entry_invalid(d: Damage) -> At:
    """A key whose separator after the topic length is 0x02, not CTRL_1."""
    return _rocksdb_edit(d, put={b"\x00\x00\x00\x01\x02T\x01": b"\x00" * 28})


def rocksdb_cq_unit_mismatch(d: Damage) -> At:
    """PaymentTopic/1's unit 2 pointed at commit log offset 10^9 (no file holds it)."""
    from rocksdb_store import unit_key, unit_value
    _, _, size, tags, _ = d.queue("PaymentTopic", 1)["entries"][2]
    return _rocksdb_edit(d, put={unit_key("PaymentTopic", 1, 2): unit_value(10**9, size, tags, 0)})


def rocksdb_cq_unit_missing(d: Damage) -> At:
    """OrderTopic/0's unit 5 deleted."""
    from rocksdb_store import unit_key
    return _rocksdb_edit(d, delete=[unit_key("OrderTopic", 0, 5)])


def rocksdb_cq_offset_mismatch(d: Damage) -> At:
    """PaymentTopic/0's max entry naming its unit 3, not its last."""
    from rocksdb_store import offset_key, offset_value
    queue_offset, phy, _, _, _ = d.queue("PaymentTopic", 0)["entries"][3]
    return _rocksdb_edit(d, put_offset={offset_key("PaymentTopic", 0, "max"): offset_value(phy, queue_offset)})


def rocksdb_cq_file_queue_differs(d: Damage) -> At:
    """OrderTopic/1's unit 4 given another tags code in RocksDB only."""
    from rocksdb_store import unit_key, unit_value
    queue_offset, phy, size, tags, _ = d.queue("OrderTopic", 1)["entries"][4]
    stored = next(m["storeTimestamp"] for m in d.messages if m["physicalOffset"] == phy)
    return _rocksdb_edit(d, put={unit_key("OrderTopic", 1, queue_offset): unit_value(phy, size, tags + 1, stored)})


# ---- consumequeue_ext (5.3.3 cqext: OrderFilterTopic's three queues, one damage each) ----
def _ext_walk(d: Damage, topic: str, queue_id: int) -> list[dict]:
    return next(q["ext"]["walk"] for q in d.truth["consumeQueues"] if (q["topic"], q["queueId"]) == (topic, queue_id))


def _ext_file(d: Damage, topic: str, queue_id: int, name: str) -> pathlib.Path:
    return d.store / "consumequeue_ext" / topic / str(queue_id) / name


def cq_ext_address_dangling(d: Damage) -> At:
    """The last ext file of OrderFilterTopic/0 deleted: its units' CQ units find nothing."""
    walk = [w for w in _ext_walk(d, "OrderFilterTopic", 0) if "unit" in w]
    last = walk[-1]["file"]
    _ext_file(d, "OrderFilterTopic", 0, last).unlink()
    first = next(w for w in walk if w["file"] == last)
    return d.unit("OrderFilterTopic", 0, first["referencedByQueueOffsets"][0])


def cq_ext_unit_mismatch(d: Damage) -> At:
    """An ext unit of OrderFilterTopic/1 given another tags hash."""
    w = [w for w in _ext_walk(d, "OrderFilterTopic", 1) if "unit" in w][5]
    path = _ext_file(d, "OrderFilterTopic", 1, w["file"])
    d.set_int(path, w["posInFile"] + EXT_TAGS_CODE_AT, 8, w["unit"]["tagsCode"] + 1)
    return At(path, w["posInFile"])


def cq_ext_garbage_after_end(d: Damage) -> At:
    """The last two ext units of OrderFilterTopic/2 overwritten with 0xEE (cqext-damaged's third mutation)."""
    walk = [w for w in _ext_walk(d, "OrderFilterTopic", 2) if "unit" in w]
    start, last = walk[-2], walk[-1]
    path = _ext_file(d, "OrderFilterTopic", 2, start["file"])
    d.patch(path, start["posInFile"], b"\xee" * (last["posInFile"] + last["unit"]["size"] - start["posInFile"]))
    return At(path, start["posInFile"])


def cq_ext_dir_orphaned(d: Damage) -> At:
    """An ext directory left by a deleted topic (apache/rocketmq #6343): TagOnlyTopic's ext files under another name."""
    gone = d.store / "consumequeue_ext" / "DeletedTopic" / "0"
    copy_tree(d.store / "consumequeue_ext" / "TagOnlyTopic" / "0", gone)
    return At(gone, None)
# ---- DLedger (fixtures/rocketmq-5.3.3/README.md: an entry header is magic 4, size 4, index 8, term 8,
# pos 8 @24, channel, chainCrc, bodyCrc, bodyLength (48 B), then the record; an index unit is magic 4,
# pos 8, size 4, index 8, term 8 @24) ----
DLEDGER_POS_AT, DLEDGER_BODY_AT, DLEDGER_UNIT_TERM_AT = 24, 48, 24


def _dledger_entry(d: Damage, n: int) -> dict:
    return d.truth["truth"]["entries"][n]


def dledger_entry_invalid(d: Damage) -> At:
    """An entry's pos field naming another place (DLedger's recover stops there)."""
    e = _dledger_entry(d, -5)
    path = d.store / "dledger-n0" / "data" / e["dataFile"]
    d.set_int(path, e["positionInDataFile"] + DLEDGER_POS_AT, 8, e["pos"] + 1)
    return At(path, e["positionInDataFile"])


def dledger_record_invalid(d: Damage) -> At:
    """The record inside entry 40 claiming one byte more than the entry's body holds."""
    e = _dledger_entry(d, 40)
    path = d.store / "dledger-n0" / "data" / e["dataFile"]
    d.set_int(path, e["positionInDataFile"] + DLEDGER_BODY_AT, 4, e["bodyLength"] + 1)
    return At(path, e["positionInDataFile"] + DLEDGER_BODY_AT)


def dledger_index_mismatch(d: Damage) -> At:
    """Index unit 10 given another term than its entry's."""
    u = d.truth["truth"]["indexUnits"][10]
    path = d.store / "dledger-n0" / "index" / u["indexFile"]
    d.set_int(path, u["positionInIndexFile"] + DLEDGER_UNIT_TERM_AT, 8, u["term"] + 3)
    return At(path, u["positionInIndexFile"])


# ---- the timer store (timer-crash: each variant's truth.json says what the engine then did) ----
TIMER_UNIT, TIMER_SLOT, TIMER_HASH_AT = 52, 32, 40  # timer log unit (hashCodeOfRealTopic at 40), wheel slot


def _variant(name: str) -> dict:
    return load_truth(TIMER_CRASH / name / "truth.json")


def _timer_log_at(d: Damage, position: int) -> At:
    size = d.truth["timerAfterLoad"]["timerLog"]["files"][0]["fileSize"]
    return At(d.store / "timerlog" / f"{position - position % size:020d}", position % size)


def _zero_timer_tail(d: Damage) -> dict:
    """b's damage: the last timer log units zeroed."""
    m = _variant("b-timerlog-tail-zeroed")["mutation"]
    at = _timer_log_at(d, m["zeroedFromPosition"])
    d.patch(at.path, at.offset, bytes(m["zeroedToPosition"] - m["zeroedFromPosition"]))
    return m


def timer_log_cut(d: Damage) -> At:
    return _timer_log_at(d, d.once(_zero_timer_tail)["zeroedFromPosition"])


def timer_chain_loops(d: Damage) -> At:
    d.once(_zero_timer_tail)
    truth = _variant("b-timerlog-tail-zeroed")
    loops = [i for i, end, _at in truth["onDiskAfterShutdown"]["chainsNotEndingAtMinusOne"] if end == "loop"]
    return At(d.store / "timerwheel", min(loops) * TIMER_SLOT)


def timercheck_missing(d: Damage) -> At:
    (d.store / "config" / "timercheck").unlink()
    return At(d.store / "config" / "timercheck", None)


def timer_state(d: Damage) -> At:
    return At(d.store / "timerwheel", None)


def timer_unit_stranded(d: Damage) -> At:
    m = _variant("d-wheel-slot-zeroed-outside-rescan")["mutation"]
    d.patch(d.store / "timerwheel", m["slotIndex"] * TIMER_SLOT, bytes(TIMER_SLOT))
    return At(d.store / "timerwheel", m["slotIndex"] * TIMER_SLOT)


def timer_unit_record_mismatch(d: Damage) -> At:
    unit = d.truth["timerAfterLoad"]["timerLog"]["units"][0]
    at = _timer_log_at(d, unit["position"])
    d.patch(at.path, at.offset + TIMER_HASH_AT, (unit["hashCodeOfRealTopic"] + 1).to_bytes(4, "big", signed=True))
    return at


def timer_unit_past_commit_log(d: Damage) -> At:
    m = _variant("e-commitlog-truncated")["mutation"]
    path = d.store / m["file"]
    position = m["cutAtCommitLogOffset"] - int(path.name)
    d.patch(path, position, bytes(path.stat().st_size - position))
    for name in m["removedFiles"]:
        (d.store / "commitlog" / name).unlink(missing_ok=True)
    first = min(u["position"] for u in d.truth["timerAfterLoad"]["timerLog"]["units"]
                if u["offsetPy"] >= m["cutAtCommitLogOffset"])
    return _timer_log_at(d, first)


def timer_log_damaged(d: Damage) -> At:
    """The first unit of the first timer log file garbled: that file lies before the one the
    next start's recovery walks from (the fixture's timercheck flush position is past it)."""
    files = d.truth["timerAfterLoad"]["timerLog"]["files"]
    first = d.store / "timerlog" / f"{0:020d}"
    assert len(files) > 1 and first.exists()
    d.patch(first, 0, b"\xee" * TIMER_UNIT)
    return At(first, 0)


def timer_metrics_drift(d: Damage) -> At:
    path = d.store / "config" / "timermetrics"
    document = json.loads(path.read_text())
    topic = sorted(document["timingCount"])[0]
    document["timingCount"][topic]["count"] += 100
    path.write_text(json.dumps(document, separators=(",", ":")))
    return At(path, None)


def timer_store_not_loadable(d: Damage) -> At:
    os.truncate(d.store / "timerwheel", 4096)  # TimerWheel's constructor refuses another length
    return At(d.store / "timerwheel", None)


# ---- controller mode (epochFileCheckpoint, .bak, brokerIdentity beside the 5.3.3 CRC store) ----
# CheckpointFile.write (5.3.3 common/.../utils/CheckpointFile.java): the entry count, the CRC32 & 0x7FFFFFFF
# of the entry lines, then "<epoch>-<startOffset>" lines, each line ended by "\n"
def _epoch_text(entries, crc: int | None = None) -> bytes:
    import zlib
    body = "".join(f"{e}-{s}\n" for e, s in entries)
    return f"{len(entries)}\n{zlib.crc32(body.encode()) & 0x7FFFFFFF if crc is None else crc}\n{body}".encode()


def _line_at(data: bytes, n: int) -> int:
    return sum(len(x) + 1 for x in data.split(b"\n")[:n - 1])


def _epoch_lines(d: Damage) -> tuple[pathlib.Path, bytes]:
    """The first commit log file deleted (as retention does), then an epoch file whose lines 3..7 are:
    epoch 1 ending before the log's new first offset, epoch 2 sound, epoch 3 starting 8 bytes into
    the second file's first record, epoch 5 and then epoch 4 past the written end."""
    size = d.config["mappedFileSizeCommitLog"]
    (d.store / "commitlog" / f"{0:020d}").unlink()
    far = 1 << 40
    data = _epoch_text([(1, 0), (2, 100), (3, size + 8), (5, far), (4, far + 100)])
    path = d.store / "epochFileCheckpoint"
    path.write_bytes(data)
    return path, data


def epoch_range_empty(d: Damage) -> At:
    path, data = d.once(_epoch_lines)
    return At(path, _line_at(data, 3))


def epoch_start_not_record(d: Damage) -> At:
    path, data = d.once(_epoch_lines)
    return At(path, _line_at(data, 5))


def epoch_past_commit_log(d: Damage) -> At:
    path, data = d.once(_epoch_lines)
    return At(path, _line_at(data, 6))


def epoch_order_invalid(d: Damage) -> At:
    path, data = d.once(_epoch_lines)
    return At(path, _line_at(data, 7))


def epoch_file_invalid(d: Damage) -> At:
    """A .bak whose first line is no number: NumberFormatException if the broker reads it."""
    path = d.store / "epochFileCheckpoint.bak"
    path.write_bytes(b"x\n")
    return At(path, 0)


def broker_identity_invalid(d: Damage) -> At:
    """brokerIdentity without its brokerId field (decodeFromStr throws; the broker registers again)."""
    path = d.store / "brokerIdentity"
    path.write_text("DefaultCluster#broker-a")
    return At(path, None)


def epoch_file_checksum(d: Damage) -> At:
    """A CRC one off (line 2): the broker skips the file for its .bak."""
    path = d.store / "epochFileCheckpoint"
    (d.store / "epochFileCheckpoint.bak").write_bytes(_epoch_text([(1, 0)]))
    good = _epoch_text([(1, 0), (2, 100)])
    crc = int(good.split(b"\n")[1])
    path.write_bytes(_epoch_text([(1, 0), (2, 100)], crc=crc + 1))
    return At(path, _line_at(good, 2))


def epoch_bak_differs(d: Damage) -> At:
    """A .bak holding an epoch the file does not, with no single write between them."""
    (d.store / "epochFileCheckpoint").write_bytes(_epoch_text([(1, 0), (2, 100)]))
    path = d.store / "epochFileCheckpoint.bak"
    path.write_bytes(_epoch_text([(1, 0), (3, 100)]))
    return At(path, None)


PRODUCERS: dict[str, Producer] = {
    # segments
    f.SEGMENT_NAME_INVALID: Producer("queues", segment_name_invalid),
    f.SEGMENT_SIZE_ODD: Producer("queues", segment_size_odd),
    f.SEGMENT_GAP: Producer("gap", segment_gap),
    f.SEGMENT_OVERLAP: Producer("queues", segment_overlap),
    f.SEGMENT_EMPTY: Producer("queues", segment_empty),
    f.SEGMENT_UNREADABLE: Producer("dump-queues", segment_unreadable),
    f.SEGMENT_AFTER_END: Producer("recover", segment_after_end),
    f.COMMIT_LOG_END: Producer("index", commit_log_end, as_made=True),
    # a commit log over several directories
    f.COMMIT_LOG_FILE_DUPLICATED: Producer("multipath", commit_log_file_duplicated),
    f.COMMIT_LOG_FILE_MISPLACED: Producer("multipath", commit_log_file_misplaced),
    f.COMMIT_LOG_PATH_MISSING: Producer("multipath", commit_log_path_missing),
    f.COMMIT_LOG_FILES_NOT_LOADED: Producer("multipath", commit_log_files_not_loaded),
    # commit log records
    f.BODY_CRC_MISMATCH: Producer("records", body_crc_mismatch),
    f.PROPERTY_CRC_MISMATCH: Producer("crc", property_crc_mismatch),
    f.INNER_BATCH_PROPERTY_INVALID: Producer("batchcq", inner_batch_property_invalid),
    f.RECORD_MAGIC_INVALID: Producer("records", record_magic_invalid),
    f.RECORD_SIZE_INVALID: Producer("records", record_size_invalid),
    f.RECORD_LENGTH_MISMATCH: Producer("records", record_length_mismatch),
    f.RECORD_OFFSET_MISMATCH: Producer("records", record_offset_mismatch),
    f.RECORD_QUARANTINED: Producer("quarantined", record_quarantined),
    f.RECORD_TRUNCATED: Producer("crc", record_truncated),
    f.PROPERTIES_INVALID_UTF8: Producer("records", properties_invalid_utf8),
    f.TOPIC_INVALID_UTF8: Producer("records", topic_invalid_utf8),
    f.BLANK_RECORD_INVALID: Producer("records", blank_record_invalid),
    f.BLANK_RECORD_MISSING: Producer("records", blank_record_missing),
    f.TRAILING_GARBAGE: Producer("records", trailing_garbage),
    f.BODY_DECOMPRESS_FAILED: Producer("dump-commitlog", body_decompress_failed),
    f.RECORD_TORN: Producer("recover-torn", record_torn),
    f.STORE_NOT_LOADABLE: Producer("no-queues", store_not_loadable),
    f.RECOVERY_CUTS_COMMIT_LOG: Producer("batchcq", recovery_cuts_commit_log),
    f.MESSAGE_UNREACHABLE: Producer("gap", message_unreachable),
    f.PROPERTY_CRC_UNREADABLE: Producer("crc", property_crc_unreadable),
    f.PROPERTY_CRC_MISSING: Producer("crc", property_crc_missing),
    f.PROPERTY_CRC_MISSING_AT_END: Producer("crc", property_crc_missing_at_end),
    f.QUEUE_OFFSET_GAP: Producer("records", queue_offset_gap),
    f.QUEUE_OFFSET_REPEAT: Producer("records", queue_offset_repeat),
    f.STORE_TIMESTAMP_BACKWARDS: Producer("index", store_timestamp_backwards),
    # checkpoint and markers
    f.CHECKPOINT_INVALID: Producer("config-tables", checkpoint_invalid),
    f.ABORT_FILE_PRESENT: Producer("gap", abort_file_present, as_made=True),
    f.ABORT_FILE_UNEXPECTED: Producer("config-tables", abort_file_unexpected),
    f.LOCK_FILE_UNEXPECTED: Producer("config-tables", lock_file_unexpected),
    f.CHECKPOINT_MISSING: Producer("records", checkpoint_missing),
    f.CHECKPOINT_ZEROED: Producer("crc", checkpoint_zeroed),
    f.CHECKPOINT_AHEAD_OF_DATA: Producer("no-queues", checkpoint_ahead_of_data),
    f.CHECKPOINT_WINDOW: Producer("index", checkpoint_window, as_made=True),
    f.RECOVERY_START_FILE: Producer("index", recovery_start_file, as_made=True),
    # config/*.json
    f.CONFIG_UNPARSEABLE: Producer("config", config_unparseable),
    f.CONFIG_BAK_USED: Producer("config", config_bak_used),
    f.CONFIG_TMP_LEFTOVER: Producer("config-tables", config_tmp_leftover),
    f.CONFIG_TABLE_INVALID: Producer("config-tables", config_table_invalid),
    f.CONFIG_TOO_LARGE: Producer("config-tables", config_too_large),
    f.CONFIG_BAK_STALE: Producer("config", config_bak_stale),
    f.DELAY_OFFSET_OUT_OF_RANGE: Producer("config", delay_offset_out_of_range),
    f.CONSUMER_OFFSET_TOPIC_MISSING: Producer("config", consumer_offset_topic_missing, as_made=True),
    f.TOPIC_QUEUE_COUNT_MISMATCH: Producer("config", topic_queue_count_mismatch),
    f.CONSUMER_OFFSET_TABLE_INVALID: Producer("config-tables", consumer_offset_table_invalid, as_made=True),
    f.CONSUMER_OFFSET_KEY_INVALID: Producer("config", consumer_offset_key_invalid),
    f.CONSUMER_OFFSET_BELOW_MIN: Producer("config", consumer_offset_below_min),
    f.CONSUMER_OFFSET_ABOVE_MAX: Producer("config", consumer_offset_above_max),
    f.CONSUMER_OFFSET_FOR_MISSING_QUEUE: Producer("config", consumer_offset_for_missing_queue, as_made=True),
    # consume queues
    f.QUEUE_DIR_INVALID: Producer("queues", queue_dir_invalid),
    f.CONSUME_QUEUE_FILE_MISALIGNED: Producer("queues", consume_queue_file_misaligned),
    f.CONSUME_QUEUE_HOLE: Producer("queues", consume_queue_hole),
    f.CONSUME_QUEUE_UNIT_INVALID: Producer("queues", consume_queue_unit_invalid),
    f.BATCH_CONSUME_QUEUE_OFFSET_GAP: Producer("dump-queues", batch_consume_queue_offset_gap),
    f.CONSUME_QUEUE_BEYOND_COMMIT_LOG: Producer("queues", consume_queue_beyond_commit_log),
    f.CONSUME_QUEUE_FILE_AFTER_END: Producer("recover", consume_queue_file_after_end),
    f.CONSUME_QUEUE_MISSING: Producer("queues", consume_queue_missing),
    f.CONSUME_QUEUE_UNIT_NO_RECORD: Producer("queues", consume_queue_unit_no_record),
    f.CONSUME_QUEUE_UNIT_MISMATCH: Producer("queues", consume_queue_unit_mismatch),
    f.CONSUME_QUEUE_FILL_UNITS: Producer("queues", consume_queue_fill_units),
    f.MESSAGE_NOT_IN_CONSUME_QUEUE: Producer("queues", message_not_in_consume_queue),
    f.MESSAGE_NOT_DISPATCHED: Producer("queues", message_not_dispatched),
    # index files
    f.INDEX_FILE_NAME_INVALID: Producer("index", index_file_name_invalid),
    f.INDEX_FILE_UNREADABLE: Producer("index", index_file_unreadable),
    f.INDEX_GEOMETRY_UNKNOWN: Producer("index", index_geometry_unknown),
    f.INDEX_CHAIN_BROKEN: Producer("index", index_chain_broken),
    f.INDEX_HEADER_INVALID: Producer("records", index_header_invalid),
    f.INDEX_HEADER_MISMATCH: Producer("index", index_header_mismatch),
    f.INDEX_TIMESTAMP_BACKWARDS: Producer("index", index_timestamp_backwards),
    f.INDEX_FILE_OUT_OF_ORDER: Producer("index-order", index_file_out_of_order),
    f.INDEX_ENTRY_NO_RECORD: Producer("index", index_entry_no_record),
    f.INDEX_ENTRY_MISMATCH: Producer("index", index_entry_mismatch),
    f.INDEX_KEY_NOT_INDEXED: Producer("queues", index_key_not_indexed),
    f.INDEX_MISSING: Producer("gap", index_missing),
    f.INDEX_FILE_NEWER_THAN_CHECKPOINT: Producer("recover", index_file_newer_than_checkpoint, as_made=True),
    # QMQ
    f.PAYLOAD_CRC_MISMATCH: Producer("qmq", payload_crc_mismatch),
    f.RECOVERY_CUTS_MESSAGE_LOG: Producer("qmq", recovery_cuts_message_log),
    f.MESSAGES_SERVED_EMPTY: Producer("qmq", messages_served_empty),
    f.MESSAGES_NOT_SERVED: Producer("qmq", messages_not_served),
    f.MESSAGE_SEQUENCE_GAP: Producer("qmq", message_sequence_gap),
    f.CONSUMER_LOG_UNIT_MISMATCH: Producer("qmq", consumer_log_unit_mismatch),
    f.CONSUMER_LOG_UNIT_PAST_END: Producer("qmq", consumer_log_unit_past_end),
    f.MESSAGE_RECORD_INVALID: Producer("qmq", message_record_invalid),
    f.MESSAGE_NOT_IN_CONSUMER_LOG: Producer("qmq", message_not_in_consumer_log),
    f.CHECKPOINT_UNREADABLE: Producer("qmq", checkpoint_unreadable),
    f.CHECKPOINT_SUBJECT_MISSING: Producer("qmq", checkpoint_subject_missing),
    f.ACTION_RECORD_INVALID: Producer("qmq", action_record_invalid),
    f.ACTION_REPLAY_SKIPS_ACTIONS: Producer("qmq", action_replay_skips_actions, as_made=True),
    f.LOG_SEGMENT_SHORT: Producer("qmq", log_segment_short),
    f.LOG_SEGMENT_NAME_MISALIGNED: Producer("qmq", log_segment_name_misaligned),
    f.LOG_SEGMENT_NAME_INVALID: Producer("qmq-refused", log_segment_name_invalid),
    f.PULL_LOG_TABLET_INVALID: Producer("qmq-refused", pull_log_tablet_invalid),
    f.CONSUMER_LOG_UNIT_INVALID: Producer("qmq-v2", consumer_log_unit_invalid),
    f.CHECKPOINT_DIRECTORY_INVALID: Producer("qmq-v2", checkpoint_directory_invalid),
    # compaction store
    f.COMPACTION_CQ_FILE_MISSING: Producer("compaction", compaction_cq_file_missing),
    f.COMPACTION_CQ_UNIT_MISMATCH: Producer("compaction", compaction_cq_unit_mismatch),
    f.COMPACTION_RECORD_NOT_IN_CQ: Producer("compaction", compaction_record_not_in_cq),
    f.COMPACTION_CHECKPOINT_MISMATCH: Producer("compaction", compaction_checkpoint_mismatch),
    f.CQ_EXT_ADDRESS_DANGLING: Producer("cqext", cq_ext_address_dangling),
    f.CQ_EXT_UNIT_MISMATCH: Producer("cqext", cq_ext_unit_mismatch),
    f.CQ_EXT_GARBAGE_AFTER_END: Producer("cqext", cq_ext_garbage_after_end),
    f.CQ_EXT_DIR_ORPHANED: Producer("cqext", cq_ext_dir_orphaned),
    f.DLEDGER_ENTRY_INVALID: Producer("dledger", dledger_entry_invalid),
    f.DLEDGER_RECORD_INVALID: Producer("dledger", dledger_record_invalid),
    f.DLEDGER_INDEX_MISMATCH: Producer("dledger", dledger_index_mismatch),
    # the RocksDB consume queue (built in the crc scenario's copy)
    f.ROCKSDB_CQ_ENTRY_INVALID: Producer("crc", rocksdb_cq_entry_invalid),
    f.ROCKSDB_CQ_UNIT_MISMATCH: Producer("crc", rocksdb_cq_unit_mismatch),
    f.ROCKSDB_CQ_UNIT_MISSING: Producer("crc", rocksdb_cq_unit_missing),
    f.ROCKSDB_CQ_OFFSET_MISMATCH: Producer("crc", rocksdb_cq_offset_mismatch),
    f.ROCKSDB_CQ_FILE_QUEUE_DIFFERS: Producer("crc", rocksdb_cq_file_queue_differs),
    # the timer store
    f.TIMER_STATE: Producer("timer-check", timer_state, as_made=True),
    f.TIMERCHECK_MISSING: Producer("timer-check", timercheck_missing),
    f.TIMER_LOG_CUT: Producer("timer-cut", timer_log_cut),
    f.TIMER_CHAIN_LOOPS: Producer("timer-cut", timer_chain_loops),
    f.TIMER_UNIT_STRANDED: Producer("timer-units", timer_unit_stranded),
    f.TIMER_UNIT_RECORD_MISMATCH: Producer("timer-units", timer_unit_record_mismatch),
    f.TIMER_UNIT_PAST_COMMIT_LOG: Producer("timer-units", timer_unit_past_commit_log),
    f.TIMER_METRICS_DRIFT: Producer("timer-units", timer_metrics_drift),
    f.TIMER_LOG_DAMAGED: Producer("timer-behind", timer_log_damaged),
    f.TIMER_STORE_NOT_LOADABLE: Producer("timer-refused", timer_store_not_loadable),
    # controller mode
    f.EPOCH_RANGE_EMPTY: Producer("controller", epoch_range_empty),
    f.EPOCH_START_NOT_RECORD: Producer("controller", epoch_start_not_record),
    f.EPOCH_PAST_COMMIT_LOG: Producer("controller", epoch_past_commit_log),
    f.EPOCH_ORDER_INVALID: Producer("controller", epoch_order_invalid),
    f.EPOCH_FILE_INVALID: Producer("controller", epoch_file_invalid),
    f.BROKER_IDENTITY_INVALID: Producer("controller", broker_identity_invalid),
    f.EPOCH_FILE_CHECKSUM: Producer("controller-checksum", epoch_file_checksum),
    f.EPOCH_BAK_DIFFERS: Producer("controller-bak", epoch_bak_differs),
}


# ---- running a scenario ---------------------------------------------------------------------------
@dataclasses.dataclass
class Run:
    """A scenario's run: where each of its recipes said its finding must be, and what the run
    reported; ``clean()``: what the same command reports on the undamaged fixture."""
    name: str
    store: pathlib.Path
    damage: Damage
    expected: dict[str, At]
    found: list[dict]  # {"finding", "path", "offset"}

    def where(self, finding_id: str) -> list[tuple[str | None, int | None]]:
        return [(r["path"], r["offset"]) for r in self.found if r["finding"] == finding_id]

    def clean_where(self, finding_id: str) -> list[tuple[str | None, int | None]]:
        """Where the undamaged fixture's run reports it, paths as in this copy."""
        source, found = _clean_findings(self.name, self.damage, self.store.parent)
        return [(None if r["path"] is None else str(self.store / pathlib.Path(r["path"]).relative_to(source)),
                 r["offset"]) for r in found if r["finding"] == finding_id]


_clean: dict = {}


def _clean_findings(name: str, damage: Damage, scratch: pathlib.Path) -> tuple[pathlib.Path, list[dict]]:
    """The scenario's command over its undamaged fixture (read only: none of them writes; a
    trimmed one expanded first, into ``scratch``), once for scenarios that share a fixture
    and a command; (the store it read, its findings)."""
    scenario = SCENARIOS[name]
    key = (scenario.store, scenario.command, tuple(_argv(scenario)))
    if key not in _clean:
        store = scenario.copy(scratch / f"clean-{len(_clean)}") if scenario.expand else scenario.store
        _clean[key] = store, _findings_of(scenario.command, store, damage, _argv(scenario))
    return _clean[key]


_ONE_LINE = re.compile(r"^(?:error|warning|info): (\w+): (.*?)(?: at offset (\d+))?: ")


def _argv(scenario: Scenario) -> list[str]:
    """What a scenario adds to its command: the timer fixtures' fake clock (their next start), the area it checks."""
    argv = ["--only", scenario.only] if scenario.only else []
    if not scenario.clock:
        return argv
    return argv + ["--now", str(scenario.truth["timerAfterLoad"]["state"]["fakeNowMs"])]


def _findings_of(command: str, store: pathlib.Path, damage: Damage, argv: list[str] = ()) -> list[dict]:
    runner = cli_runner()
    if command == "verify":
        r = runner.invoke(_app(), ["verify", str(store), "-f", "jsonl", "--no-progress", "--jobs", "1", *argv])
        assert r.exit_code in (0, 3), r.output
        return [json.loads(line) for line in r.stdout.splitlines()]
    if command == "recover":
        r = runner.invoke(_app(), ["recover", str(store), "-f", "json"])
        assert r.exit_code in (0, 3), r.output
        return json.loads(r.stdout)["findings"]
    if command == "dump-commitlog":
        begin, end = damage.dump_range  # the damaged record only: the rest needs no decoding
        argv = ["dump", "commitlog", str(store), "--decompress", "--no-crc", "--from-offset", str(begin),
                "--to-offset", str(end)]
    else:
        assert command == "dump-consumequeue"
        argv = ["dump", "consumequeue", str(store)]
    with _unprivileged():
        r = runner.invoke(_app(), [*argv, "-f", "jsonl"])
    assert r.exit_code in (0, 3), r.output
    found = []
    for line in r.stderr.splitlines():  # dump's findings: one line each on stderr (Finding.one_line)
        m = _ONE_LINE.match(line)
        if m:
            found.append({"finding": m[1], "path": m[2], "offset": None if m[3] is None else int(m[3])})
    return found


@contextlib.contextmanager
def _unprivileged():
    """Root reads a mode-000 file anyway (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH): when the tests
    run as root, this thread leaves those capabilities out of its effective set meanwhile (they
    stay permitted, so they come back after), and the OS refuses the file as it refuses a user."""
    if os.geteuid() != 0:
        yield
        return
    import ctypes

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    libc = ctypes.CDLL(None, use_errno=True)
    header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3: two words
    assert libc.capget(ctypes.byref(header), data) == 0, os.strerror(ctypes.get_errno())
    before = data[0].effective
    data[0].effective &= ~((1 << 1) | (1 << 2))  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
    assert libc.capset(ctypes.byref(header), data) == 0, os.strerror(ctypes.get_errno())
    try:
        yield
    finally:
        data[0].effective = before
        assert libc.capset(ctypes.byref(header), data) == 0, os.strerror(ctypes.get_errno())


def run_scenario(name: str, directory: pathlib.Path) -> Run:
    """Copy the scenario's store into ``directory``, apply its recipes in the table's order, run its command once."""
    scenario = SCENARIOS[name]
    store = scenario.copy(directory / "store")
    d = Damage(store, scenario.truth)
    expected = {finding_id: p.recipe(d) for finding_id, p in PRODUCERS.items() if p.scenario == name}
    argv = _argv(scenario) + (["--broker-config", str(store.parent / "broker.conf")] if scenario.multipath else [])
    return Run(name, store, d, expected, _findings_of(scenario.command, store, d, argv))
