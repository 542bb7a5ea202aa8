"""Controller mode: epochFileCheckpoint (+ .bak) and brokerIdentity on stores the engine wrote,
read as the 5.3.3 broker reads them, checked by verify against the commit log, and diff's
prediction of where a slave truncates at its next sync.

No product command writes these files, so the tests write them with ``write_epoch_file`` below,
from the layout in the 5.3.3 sources (not from rmqtool's code):

* ``CheckpointFile.write`` (common/.../utils/CheckpointFile.java): line 1 the entry count, line 2
  ``UtilAll.crc32`` (CRC32 & 0x7FFFFFFF) of the entry lines, then one line an entry, every line
  ended by ``System.lineSeparator()`` ("\\n"); ``MixAll.string2File`` copies the old file to
  ``.bak`` first.
* ``EpochEntrySerializer.toLine`` (store/.../ha/autoswitch/EpochFileCache.java): "%d-%d" of epoch
  and startOffset.
* ``BrokerMetadata.encodeToStr`` / ``TempBrokerMetadata``: ``cluster#broker#brokerId[#checkCode]``.

The failover the stores act out: broker A is master in epoch 1 from offset 0 and writes m0..m9;
its slave B has copied m0..m5 when A dies. B becomes master in epoch 2 at its max offset X (the end
of m5: AutoSwitchHAService.changeToMaster appends EpochEntry(2, getMaxPhyOffset())) and writes
n0..n2. A comes back as B's slave.

The rule the expected truncation is derived from (AutoSwitchHAClient.doTruncate and
EpochFileCache.findConsistentPoint): both caches end their last epoch at their commit log's max
offset, every other epoch at the next epoch's start; walking the slave's epochs from the highest
down, the first epoch the master holds with the same start offset gives the consistent point
min(slave's end of it, master's end of it), and the slave's log is cut there (truncateFiles: when
it is below the slave's max offset and a record starts there).
"""
from __future__ import annotations

import json
import shutil
import zlib

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from helpers import cli_runner, copy_tree, examples
from rmqtool.cli.app import app
from rmqtool.engine.producer import producer_message
from rmqtool.engine.store import Store
from rmqtool.errors import ExitCode
from rmqtool.formats.broker_identity import broker_identity_text, parse_broker_identity
from rmqtool.formats.epoch_file import OK, SKIPPED, THROWS, entries_crc, epoch_file_text, parse_epoch_file
from rmqtool.store.controller import (NEW_REPLICA, NO_CONSISTENT_POINT, NOTHING_TO_TRUNCATE, TRUNCATES, EpochEntry,
                                      load_epoch_cache, slave_sync)
from rmqtool.verify.base import VerifyOptions
from rmqtool.verify.run import verify_store

SMALL = dict(commitlog_size=32 * 1024, cq_size=20 * 20, index_slots=32, index_entries=120)
LONG_MAX = (1 << 63) - 1


def write_epoch_file(path, entries, *, crc=None, count=None) -> bytes:
    """CheckpointFile.write of (epoch, startOffset) entries, the file copied to .bak first
    (MixAll.string2File); ``crc``/``count`` override the header (damage)."""
    body = "".join(f"{epoch}-{start}\n" for epoch, start in entries)
    real = zlib.crc32(body.encode()) & 0x7FFFFFFF
    data = f"{len(entries) if count is None else count}\n{real if crc is None else crc}\n{body}".encode()
    if path.exists():
        shutil.copyfile(path, path.with_name(path.name + ".bak"))
    path.write_bytes(data)
    return data


def _message(topic: str, i: int):
    return producer_message(topic, b"payload %d " % i * 6, keys=f"k-{topic}-{i}", queue_id=i % 2,
                            born_timestamp=1_700_000_000_000 + i, uniq_key=f"{0xC0:02X}{hash(topic) & 0xFF:02X}{i:028X}")


@pytest.fixture(scope="module")
def failover(tmp_path_factory):
    """A (old master, epoch 1 only) and B (new master from X in epoch 2), written by the engine."""
    base = tmp_path_factory.mktemp("controller")
    a, b = base / "a", base / "b"
    with Store.open(a, writable=True, **SMALL) as store:
        first = [store.append(_message("OrderTopic", i)) for i in range(6)]
    copy_tree(a, b)  # what B copied of A
    with Store.open(a, writable=True, **SMALL) as store:
        lost = [store.append(_message("OrderTopic", i)) for i in range(6, 10)]
    with Store.open(b, writable=True, **SMALL) as store:
        new = [store.append(_message("NewMasterTopic", i)) for i in range(3)]
    x = lost[0].wrote_offset
    assert x == first[-1].wrote_offset + first[-1].wrote_bytes == new[0].wrote_offset
    end_a, end_b = lost[-1].wrote_offset + lost[-1].wrote_bytes, new[-1].wrote_offset + new[-1].wrote_bytes
    write_epoch_file(a / "epochFileCheckpoint", [(1, 0)])
    write_epoch_file(b / "epochFileCheckpoint", [(1, 0)])
    write_epoch_file(b / "epochFileCheckpoint", [(1, 0), (2, x)])  # appendEntry: the old file becomes .bak
    (a / "brokerIdentity").write_text("DefaultCluster#broker-a#1")
    (b / "brokerIdentity").write_text("DefaultCluster#broker-a#2")
    return dict(a=a, b=b, x=x, end_a=end_a, end_b=end_b, base=base)


def run(*argv):
    r = cli_runner().invoke(app, [str(x) for x in argv])
    return r


def jsonl(r) -> list[dict]:
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


# --- the layout, field by field -------------------------------------------------------------------
def test_the_text_layout_matches_the_source():
    """The Javadoc example of CheckpointFile (2 entries, CRC 773307083, 7-7000 and 8-8000) reads
    field by field; rmqtool's own text of the same entries is byte for byte the writer's above."""
    example = b"2\n773307083\n7-7000\n8-8000\n"
    read = parse_epoch_file(example)
    assert (read.outcome, read.count, read.crc, read.computed_crc) == (OK, 2, 773307083, 773307083)
    assert [(e.epoch, e.start_offset, e.line, e.position) for e in read.entries] == [(7, 7000, 3, 12), (8, 8000, 4, 19)]
    assert entries_crc("7-7000\n8-8000\n") == 773307083
    assert epoch_file_text([(7, 7000), (8, 8000)]).encode() == example


def test_what_the_reader_accepts_skips_and_throws():
    """CheckpointFile.read's ways out: a wrong count or CRC (IOException: skipped), CRC 0 (not
    checked), a line that does not split in two (skipped but counted in the CRC), a header or number
    Java does not parse, an empty file (NumberFormatException: throws), bytes that are not UTF-8."""
    body = "1-100\n"
    crc = zlib.crc32(body.encode()) & 0x7FFFFFFF
    assert parse_epoch_file(f"1\n{crc + 1}\n{body}".encode()).outcome == SKIPPED
    assert parse_epoch_file(f"2\n{crc}\n{body}".encode()).outcome == SKIPPED
    assert parse_epoch_file(f"1\n0\n{body}".encode()).outcome == OK  # NOT_CHECK_CRC_MAGIC_CODE
    junk = "1-100\nnot an entry\n"
    read = parse_epoch_file(f"1\n{zlib.crc32(junk.encode()) & 0x7FFFFFFF}\n{junk}".encode())
    assert read.outcome == OK and [(e.epoch, e.start_offset) for e in read.entries] == [(1, 100)]
    for bad in (b"", b"x\n0\n", b"1\n\n1-100\n", b"1\n0\n1-1x\n", b"1\n0\n3000000000-1\n"):
        assert parse_epoch_file(bad).outcome == THROWS, bad
    assert parse_epoch_file(b"1\n0\n1-\xff\n").outcome == SKIPPED


def test_broker_identity_fields():
    """BrokerMetadata and TempBrokerMetadata's '#'-joined fields, and what isLoaded refuses."""
    ident = parse_broker_identity(b"DefaultCluster#broker-a#2")
    assert (ident.cluster_name, ident.broker_name, ident.broker_id, ident.loaded) == ("DefaultCluster", "broker-a", 2,
                                                                                        True)
    temp = parse_broker_identity(b"C#b#3#10.0.0.1:30911;1700000000000", temp=True)
    assert (temp.broker_id, temp.register_check_code, temp.loaded) == (3, "10.0.0.1:30911;1700000000000", True)
    assert broker_identity_text("C", "b", 3, "10.0.0.1:30911;1700000000000") == "C#b#3#10.0.0.1:30911;1700000000000"
    for bad in (b"DefaultCluster#broker-a", b"DefaultCluster#broker-a#null", b"#broker-a#1"):
        assert not parse_broker_identity(bad).loaded, bad


def test_which_file_the_broker_loads(tmp_path):
    """CheckpointFile.read: the file, else (missing, no entries, IOException) the .bak; a file that
    throws fails the start even when the .bak is good. initEntries: a repeated epoch keeps its
    later line, each entry ends where the next line starts."""
    main = tmp_path / "epochFileCheckpoint"
    bak = tmp_path / "epochFileCheckpoint.bak"
    write_epoch_file(main, [(1, 0)])
    write_epoch_file(main, [(1, 0), (2, 500)])
    cache = load_epoch_cache(tmp_path)
    assert cache.loaded_from == main and cache.entries == (EpochEntry(1, 0, 500), EpochEntry(2, 500, None))
    write_epoch_file(main, [(1, 0), (2, 500), (3, 900)], crc=7)  # .bak now holds 1-0, 2-500
    cache = load_epoch_cache(tmp_path)
    assert cache.loaded_from == bak and [e.epoch for e in cache.entries] == [1, 2]
    main.write_bytes(b"")
    cache = load_epoch_cache(tmp_path)
    assert cache.start_fails and cache.loaded_from is None
    main.unlink()
    assert load_epoch_cache(tmp_path).loaded_from == bak
    bak.write_bytes(b"1\n5\n1-0\n")  # CRC wrong: skipped, the cache starts empty
    cache = load_epoch_cache(tmp_path)
    assert cache.loaded_from is None and not cache.start_fails and cache.entries == ()
    write_epoch_file(main, [(1, 0), (2, 100), (2, 300), (3, 400)])
    assert load_epoch_cache(tmp_path).entries == (EpochEntry(1, 0, 100), EpochEntry(2, 300, 400),
                                                  EpochEntry(3, 400, None))


# --- the next sync ------------------------------------------------------------------------------------
def test_slave_sync_rule():
    """doTruncate over constructed caches, the expected values by the rule in the module docstring."""
    master = (EpochEntry(1, 0, 1000), EpochEntry(2, 1000, None))
    # the slave went on writing epoch 1 to 1500: consistent in epoch 1 at min(1500, 1000)
    s = slave_sync(master, 3000, (EpochEntry(1, 0, None),), 1500)
    assert (s.outcome, s.consistent_point, s.epoch) == (TRUNCATES, 1000, 1)
    # the slave stopped short of the master's epoch 1 end: nothing to cut
    s = slave_sync(master, 3000, (EpochEntry(1, 0, None),), 800)
    assert (s.outcome, s.consistent_point) == (NOTHING_TO_TRUNCATE, 800)
    # the same epoch 2 on both: consistent at the smaller max offset
    s = slave_sync(master, 3000, (EpochEntry(1, 0, 1000), EpochEntry(2, 1000, None)), 2500)
    assert (s.outcome, s.consistent_point, s.epoch) == (NOTHING_TO_TRUNCATE, 2500, 2)
    # epoch 2 started elsewhere on the slave: epoch 1 decides, min(1200, 1000)
    s = slave_sync(master, 3000, (EpochEntry(1, 0, 1200), EpochEntry(2, 1200, None)), 2500)
    assert (s.outcome, s.consistent_point, s.epoch) == (TRUNCATES, 1000, 1)
    assert slave_sync(master, 3000, (EpochEntry(5, 0, None),), 10).outcome == NO_CONSISTENT_POINT
    assert slave_sync(master, 3000, (), 10).outcome == NEW_REPLICA
    # a slave's last epoch past its own end keeps Long.MAX_VALUE as its end
    s = slave_sync(master, 3000, (EpochEntry(2, 1000, None),), 900)
    assert (s.consistent_point, s.outcome) == (min(LONG_MAX, 3000), NOTHING_TO_TRUNCATE)


def test_diff_says_where_the_old_master_truncates(failover):
    """diff B A (B the new master, A its slave): A's epoch 1 is B's epoch 1 (start 0), which ends at
    X on B and at A's end on A: A is cut to X, losing m6..m9; and the other way round, B would lose
    its epoch 2. Exit codes as before: the stores differ (3)."""
    a, b, x = failover["a"], failover["b"], failover["x"]
    r = run("diff", b, a, "-f", "jsonl")
    assert r.exit_code == ExitCode.CORRUPT, r.stderr
    rows = jsonl(r)
    [sync] = [row for row in rows if row["record"] == "epoch_sync"]
    assert (sync["sync"], sync["commit_log_offset"], sync["consistent_point"], sync["epoch"]) == (TRUNCATES, x, x, 1)
    assert (sync["max_offset_a"], sync["max_offset_b"]) == (failover["end_b"], failover["end_a"])
    assert sync["bytes_past"] == failover["end_a"] - x and f"truncates to {x} (epoch 1)" in sync["reason"]
    assert sync["messages_past"] == 4  # m6..m9: what A wrote after B had copied
    [entry] = [row for row in rows if row["record"] == "epoch_entry"]
    assert (entry["epoch"], entry["a"], entry["b"]) == (2, x, None)
    summary = rows[-1]
    assert summary["record"] == "summary" and "epoch_sync" not in summary["counts"]
    assert summary["counts"]["epoch_entry"] == 1

    r = run("diff", a, b, "-f", "jsonl")
    [sync] = [row for row in jsonl(r) if row["record"] == "epoch_sync"]
    assert (sync["sync"], sync["commit_log_offset"], sync["bytes_past"], sync["messages_past"]) == \
        (TRUNCATES, x, failover["end_b"] - x, 3)  # n0..n2, B's epoch 2


def test_diff_of_equal_controller_stores_stays_equal_and_a_misplaced_point_is_refused(failover, tmp_path):
    """A store against itself: exit 0, its sync keeps everything. A master whose epoch 2 starts 8
    bytes into a record of the slave: truncateFiles refuses (not aligned)."""
    b = failover["b"]
    r = run("diff", b, b, "-f", "jsonl")
    assert r.exit_code == ExitCode.OK, r.stderr
    [sync] = [row for row in jsonl(r) if row["record"] == "epoch_sync"]
    assert sync["sync"] == NOTHING_TO_TRUNCATE and sync["commit_log_offset"] is None
    odd = tmp_path / "odd"
    copy_tree(b, odd)
    write_epoch_file(odd / "epochFileCheckpoint", [(1, 0), (2, failover["x"] + 8)])
    [sync] = [row for row in jsonl(run("diff", odd, failover["a"], "-f", "jsonl")) if row["record"] == "epoch_sync"]
    assert (sync["sync"], sync["consistent_point"], sync["commit_log_offset"]) == \
        ("truncate_refused", failover["x"] + 8, None)


# --- info, dump, verify ---------------------------------------------------------------------------------
def test_info_and_dump_show_the_epochs_and_identity(failover):
    b, x = failover["b"], failover["x"]
    r = run("info", b, "-f", "json")
    assert r.exit_code == ExitCode.OK, r.stderr
    doc = json.loads(r.stdout)
    ctl = doc["controller"]
    assert ctl["epoch_file"]["loaded_from"] == str(b / "epochFileCheckpoint")
    assert ctl["epoch_file"]["epochs"] == [{"epoch": 1, "start_offset": 0, "end_offset": x},
                                           {"epoch": 2, "start_offset": x, "end_offset": None}]
    assert ctl["epoch_file"]["last_epoch"] == 2 and not ctl["epoch_file"]["start_fails"]
    assert (ctl["broker_identity"]["cluster_name"], ctl["broker_identity"]["broker_name"],
            ctl["broker_identity"]["broker_id"]) == ("DefaultCluster", "broker-a", 2)
    assert {s["name"] for s in doc["side_stores"]} >= {"epochFileCheckpoint", "brokerIdentity"}
    r = run("dump", "epochfile", b, "-f", "jsonl")
    assert r.exit_code == ExitCode.OK, r.stderr
    assert [(row["epoch"], row["start_offset"], row["end_offset"], row["line"]) for row in jsonl(r)] == \
        [(1, 0, x, 3), (2, x, None, 4)]
    r = run("dump", "epochfile", b / "epochFileCheckpoint.bak", "-f", "jsonl")
    assert [(row["epoch"], row["start_offset"]) for row in jsonl(r)] == [(1, 0)]
    assert run("verify", b, "--only", "controller", "-f", "jsonl", "--no-progress").exit_code == ExitCode.OK


def _line_position(data: bytes):
    """The byte position of line n (from 1) of a file's bytes."""
    return lambda n: sum(len(s) + 1 for s in data.split(b"\n")[:n - 1])


def _ids(store) -> dict[str, list]:
    found: dict[str, list] = {}
    for f in verify_store(store, VerifyOptions(only=("controller",))):
        found.setdefault(f.id, []).append((f.path, f.offset, f.consequence.value if f.consequence else None))
    return found


def test_verify_finds_damage(failover, tmp_path):
    """A bad CRC (the .bak loads), an epoch past the commit log, a start inside a record, epochs out of
    order, a .bak no single write explains, an empty file (the start fails), a broken identity."""
    store = tmp_path / "s"
    copy_tree(failover["b"], store)
    main, x, end = store / "epochFileCheckpoint", failover["x"], failover["end_b"]
    write_epoch_file(main, [(1, 0), (2, x), (3, end + 100)], crc=12345)
    found = _ids(store)
    assert found["epochFileChecksum"] == [(str(main), 2, "none")]  # line 2: the CRC
    assert set(found) == {"epochFileChecksum"}  # the .bak (1-0, 2-X) loads and is sound

    write_epoch_file(main, [(9, 5)])  # sound, but no single write turns it into the next file
    data = write_epoch_file(main, [(1, 0), (2, x + 8), (4, end + 100), (3, end + 50)])
    found = _ids(store)
    line = _line_position(data)
    assert found["epochStartNotRecord"] == [(str(main), line(4), "none")]
    assert found["epochPastCommitLog"] == [(str(main), line(5), "none"), (str(main), line(6), "none")]
    assert found["epochOrderInvalid"] == [(str(main), line(6), "none")]
    assert found["epochBakDiffers"] == [(str(store / "epochFileCheckpoint.bak"), None, "none")]

    main.write_bytes(b"")
    (store / "epochFileCheckpoint.bak").write_bytes(b"x\n")  # never read: the start fails on the file first
    (store / "brokerIdentity").write_text("DefaultCluster#broker-a")
    found = _ids(store)
    assert found["epochFileInvalid"] == [(str(main), 0, "wontStart"),
                                         (str(store / "epochFileCheckpoint.bak"), 0, "none")]
    assert found["brokerIdentityInvalid"] == [(str(store / "brokerIdentity"), None, "none")]
    r = run("info", store, "-f", "json")
    assert json.loads(r.stdout)["controller"]["epoch_file"]["start_fails"] is True
    r = run("verify", store, "--only", "controller", "-f", "jsonl", "--no-progress")
    assert r.exit_code == ExitCode.CORRUPT and "Traceback" not in r.stderr


def test_an_epoch_before_the_first_file(failover, tmp_path):
    """The first commit log file deleted as retention does: epoch 1 ends at or before the new first
    offset; the broker drops it at its next deletion (truncatePrefixByOffset) when it ends before."""
    store = tmp_path / "s"
    copy_tree(failover["a"], store)
    line = _line_position(write_epoch_file(store / "epochFileCheckpoint", [(1, 0), (2, 10), (3, 20)]))
    found = _ids(store)
    assert "epochRangeEmpty" not in found  # the first file is there
    size = SMALL["commitlog_size"]
    files = sorted((store / "commitlog").iterdir())
    assert len(files) == 1 and int(files[0].name) == 0
    files[0].rename(store / "commitlog" / f"{size:020d}")  # the log now starts at one file's size
    found = _ids(store)
    assert [(o, c) for _, o, c in found["epochRangeEmpty"]] == [(line(3), "rebuilt"), (line(4), "rebuilt")]


@settings(max_examples=examples(40))
@given(data=st.binary(max_size=80), lines=st.lists(st.text(alphabet="0123456789-+\r\n x", max_size=12), max_size=5))
def test_any_bytes_read_as_the_reader_reads_them(data, lines):
    """Whatever the bytes: an outcome, never an exception; an OK read's entries are what its lines
    say and its CRC the CheckpointFile rule's."""
    for raw in (data, "\n".join(lines).encode(), b"2\n0\n" + "\n".join(lines).encode()):
        read = parse_epoch_file(raw)
        assert read.outcome in (OK, SKIPPED, THROWS)
        if read.outcome == OK:
            assert len(read.entries) == read.count and read.crc in (0, read.computed_crc)
        parse_broker_identity(raw)
        parse_broker_identity(raw, temp=True)
