"""rmqtool diff STORE_A STORE_B: a fixture store against itself and against copies changed
one way each (a cut tail, a flipped body byte, a changed consumer offset), and a
master/slave-like pair written by the engine from different start offsets (UNIQ_KEY match).
Expected values come from the fixture's truth.json and the engine's put results."""
from __future__ import annotations

import json
import os

import pytest

from conftest import FIXTURES, V4, load_truth
from helpers import cli_runner, expand_store, table_sections, tree_fingerprint, writable_copy
from rmqtool.cli.app import app
from rmqtool.engine.producer import producer_message
from rmqtool.engine.store import Store
from rmqtool.errors import ExitCode
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.config import read_config_file
from rmqtool.formats import config as config_format
from test_store_view import calls  # noqa: F401 - the fixture that counts openings

SCENARIO = FIXTURES / "config" / "consumers"  # a store with config/*.json, its truth beside it
STORE = SCENARIO / "store"
QMQ_STORE = FIXTURES / "qmq" / "basic" / "store"


def diff(a, b):
    r = cli_runner().invoke(app, ["diff", str(a), str(b), "--format", "jsonl"])
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    return r, rows


def of(rows, record):
    return [r for r in rows if r["record"] == record]


@pytest.fixture(scope="module")
def truth():
    t = load_truth(SCENARIO / "truth.json")["truth"]
    return t["messages"], t["commitlog"]["maxPhyOffset"]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return writable_copy(STORE, tmp_path_factory.mktemp("diff") / "a")


def test_a_store_against_itself_is_equal():
    r, rows = diff(STORE, STORE)
    assert r.exit_code == ExitCode.OK, r.stderr
    assert [x["record"] for x in rows] == ["summary"]
    assert rows[0]["equal"] is True and rows[0]["differences"] == 0 and rows[0]["commit_log_offset"] is None


def test_a_cut_tail(base, truth, tmp_path):
    """The last commit log segment cut in the middle of the third-last message: the log
    diverges at that record, which and the two after it are only in A; their queues' max
    offsets differ; and the diff wrote nothing."""
    messages, end = truth
    cut_msg = sorted(messages, key=lambda m: m["physicalOffset"])[-3]
    start = cut_msg["physicalOffset"]
    cut = start + cut_msg["storeSize"] // 2
    b = writable_copy(base, tmp_path / "b")
    last = sorted((b / "commitlog").iterdir())[-1]
    os.truncate(last, cut - int(last.name))
    before = tree_fingerprint(b), tree_fingerprint(base)

    r, rows = diff(base, b)
    assert r.exit_code == ExitCode.CORRUPT, r.stderr
    assert (tree_fingerprint(b), tree_fingerprint(base)) == before  # read only
    past = [m for m in messages if m["physicalOffset"] >= start]
    [div] = of(rows, "commit_log_divergence")
    assert (div["reason"], div["side"], div["commit_log_offset"]) == ("missing_tail", "a", start)
    assert div["bytes_past"] == end - start and div["messages_past"] == len(past)
    only = of(rows, "message_only_in")
    assert {(x["side"], x["commit_log_offset"], x["uniq_key"]) for x in only} == \
        {("a", m["physicalOffset"], m["uniqKey"]) for m in past}
    expected = {}
    for m in past:
        key = (m["topic"], m["queueId"])
        kept = [k["queueOffset"] for k in messages if (k["topic"], k["queueId"]) == key and k["physicalOffset"] < start]
        expected[key] = (max(k["queueOffset"] for k in messages if (k["topic"], k["queueId"]) == key) + 1,
                         max(kept) + 1)
    got = {(x["topic"], x["queue_id"]): (x["a"], x["b"]) for x in of(rows, "queue_range")
           if x["field"] == "max_queue_offset"}
    assert got == expected
    summary = of(rows, "summary")[0]
    assert summary["commit_log_offset"] == start and summary["messages_only_in_a"] == len(past)
    assert summary["written_end_a"] == end and summary["written_end_b"] == start


def _flip_body_byte(store, offset: int) -> int:
    """One byte in the middle of the body of the message at ``offset`` flipped; its commit log offset."""
    with CommitLogReader.of_store(store) as reader:
        msg = reader.read(offset)
        seg, pos = reader.locate(offset)
        raw = reader.pread(seg, pos, msg.store_size)
    at = pos + raw.index(msg.body) + len(msg.body) // 2
    with open(seg.path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0xFF]))
    return seg.base_offset + at


def test_flipped_body_bytes(base, truth, tmp_path):
    """A body byte flipped in two messages: a different record at the first (the divergence,
    its body named and its CRC now failing on B), the second a message that differs; nothing
    on one side only, no queue changed."""
    messages, _ = truth
    ordered = sorted(messages, key=lambda m: m["physicalOffset"])
    first, second = ordered[len(ordered) // 2], ordered[len(ordered) // 2 + 10]
    b = writable_copy(base, tmp_path / "b")
    flipped = _flip_body_byte(b, first["physicalOffset"])
    _flip_body_byte(b, second["physicalOffset"])

    r, rows = diff(base, b)
    assert r.exit_code == ExitCode.CORRUPT, r.stderr
    [div] = of(rows, "commit_log_divergence")
    assert (div["reason"], div["commit_log_offset"], div["first_different_byte"]) == \
        ("different_record", first["physicalOffset"], flipped)
    assert set(div["fields"]) == {"body", "body_crc_ok"}
    assert (div["a"]["body_crc_ok"], div["b"]["body_crc_ok"]) == (True, False)
    [changed] = of(rows, "message_differs")
    assert (changed["commit_log_offset"], changed["uniq_key"], changed["queue_offset"]) == \
        (second["physicalOffset"], second["uniqKey"], second["queueOffset"])
    assert set(changed["fields"]) == {"body", "body_crc_ok"}
    assert not of(rows, "message_only_in") and not of(rows, "queue_range")


def test_a_missing_head(base, truth, tmp_path):
    """B without its first commit log file (deleted as old): its log starts later, the
    messages of that file are only in A, and the queues' min offsets move past them."""
    messages, _ = truth
    b = writable_copy(base, tmp_path / "b")
    first = sorted((b / "commitlog").iterdir())[0]
    second_base = int(sorted((b / "commitlog").iterdir())[1].name)
    first.unlink()

    r, rows = diff(base, b)
    assert r.exit_code == ExitCode.CORRUPT, r.stderr
    gone = [m for m in messages if m["physicalOffset"] < second_base]
    [div] = of(rows, "commit_log_divergence")
    assert (div["reason"], div["side"], div["commit_log_offset"], div["messages_past"]) == \
        ("missing_head", "a", 0, len(gone))
    assert {(x["side"], x["commit_log_offset"]) for x in of(rows, "message_only_in")} == \
        {("a", m["physicalOffset"]) for m in gone}
    # the queues that lost messages start later on B (where correctMinOffset finds the first
    # unit of a queue's first file at or past B's first commit log offset)
    lost = {(m["topic"], m["queueId"]) for m in gone}
    ranges = of(rows, "queue_range")
    assert ranges and all(x["field"] == "min_queue_offset" and x["b"] > x["a"] for x in ranges)
    assert {(x["topic"], x["queue_id"]) for x in ranges} <= lost


def test_a_changed_consumer_offset(base, tmp_path):
    """consumerOffset.json with one committed offset moved: one config entry naming the
    group, topic and queue with both values."""
    b = writable_copy(base, tmp_path / "b")
    config = read_config_file(b / "config", "consumerOffset.json")
    table = config_format.consumer_offsets(config.document)
    key, queues = sorted(table.items())[0]
    topic, group = key.split("@")
    queue_id, committed = sorted(queues.items())[0]
    doc = config.document
    doc["offsetTable"][key][queue_id] = committed + 7
    (b / "config" / "consumerOffset.json").write_text(json.dumps(doc))

    r, rows = diff(base, b)
    assert r.exit_code == ExitCode.CORRUPT, r.stderr
    assert [x["record"] for x in rows] == ["config_entry", "summary"]
    entry = rows[0]
    assert (entry["file"], entry["group"], entry["topic"], entry["queue_id"], entry["field"]) == \
        ("consumerOffset.json", group, topic, int(queue_id), "committed_offset")
    assert (entry["a"], entry["b"]) == (committed, committed + 7)


def test_a_slave_written_from_another_offset_matches_by_uniq_key(tmp_path):
    """The same messages appended to two stores by the engine, B's after one message of its
    own: no offset matches, every common message is matched by UNIQ_KEY, and only B's own
    message is on one side only."""
    small = dict(commitlog_size=32 * 1024, cq_size=20 * 20, index_slots=32, index_entries=120)
    messages = [producer_message("OrderTopic", b"order %d" % i * 8, keys=f"k-{i}", queue_id=i % 2,
                                 born_timestamp=1_700_000_000_000 + i,
                                 uniq_key=f"{0xAC:02X}{i:030X}") for i in range(60)]
    with Store.open(tmp_path / "a", writable=True, **small) as store:
        for m in messages:
            store.append(m)
    with Store.open(tmp_path / "b", writable=True, **small) as store:
        own = store.append(producer_message("SlaveOnly", b"re-synced here", uniq_key="F" * 32,
                                            born_timestamp=1_700_000_000_000))
        for m in messages:
            store.append(m)

    r, rows = diff(tmp_path / "a", tmp_path / "b")
    assert r.exit_code == ExitCode.CORRUPT, r.stderr
    summary = of(rows, "summary")[0]
    assert summary["messages_matched_by_uniq_key"] == len(messages)
    assert [(x["side"], x["commit_log_offset"], x["uniq_key"]) for x in of(rows, "message_only_in")] == \
        [("b", own.wrote_offset, own.uniq_key)]
    assert of(rows, "commit_log_divergence")[0]["commit_log_offset"] == 0
    assert {(x["topic"], x["field"], x["a"], x["b"]) for x in of(rows, "queue_range")} == \
        {("SlaveOnly", "min_queue_offset", None, 0), ("SlaveOnly", "max_queue_offset", None, 1)}


def test_bad_input(tmp_path):
    """A missing store 8, a file 4, a QMQ store 4 (diff reads RocketMQ stores), one line each."""
    (tmp_path / "file").write_text("x")
    for other, code in ((tmp_path / "none", ExitCode.OPERATIONAL), (tmp_path / "file", ExitCode.BAD_INPUT),
                        (QMQ_STORE, ExitCode.BAD_INPUT)):
        r, rows = diff(STORE, other)
        assert r.exit_code == code, (other, r.stderr)
        assert not rows and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_each_store_is_opened_once(calls):
    """One view a store (two here, the same path given twice), its commit log listed once,
    its ends found once, its queues opened once."""
    r, rows = diff(STORE, STORE)
    assert r.exit_code == ExitCode.OK, r.stderr
    assert calls["StoreView"] == 2 and calls["require_store"] == 2, calls
    assert calls["CommitLog"] == 2 and calls["commit log listed"] == 2, calls
    assert calls["last_file_end"] == 2 and calls["written_end"] == 2 and calls["open_consume_queues"] == 2, calls
    assert {v for k, v in calls.items() if k.startswith("queue ")} == {2}, calls


def test_zero_and_sparse_tails_read_alike(base, tmp_path):
    """The last commit log file cut at the written end (its zeros dropped), or cut there and
    extended again as a sparse file: the same log as the broker's preallocated file."""
    end = load_truth(SCENARIO / "truth.json")["truth"]["commitlog"]["maxPhyOffset"]
    for name, extend in (("trimmed", False), ("sparse", True)):
        b = writable_copy(base, tmp_path / name)
        last = sorted((b / "commitlog").iterdir())[-1]
        size = last.stat().st_size
        os.truncate(last, end - int(last.name))
        if extend:
            os.truncate(last, size)
        r, rows = diff(base, b)
        assert r.exit_code == ExitCode.OK, (name, r.stdout, r.stderr)
        assert rows[-1]["equal"] is True and rows[-1]["written_end_b"] == end


@pytest.mark.parametrize("variant", ["crash/e1-corrupt-body-in-last-commitlog-file",
                                     "crash/e3-corrupt-body-in-second-to-last-commitlog-file",
                                     "crash-fast/e2-corrupt-body-in-first-commitlog-file"])
def test_queue_ranges_are_the_ones_the_next_start_leaves(variant, tmp_path):
    """The real broker's store after a recovery that cut the log at a body CRC failure (expected/):
    its queues' units past the cut stay on disk, and the next start cuts them again. diff's
    queue ranges are those the broker had (truth), as offsets and info give them; and the
    crashed store before that recovery (input/) has the same."""
    from helpers import expand_store

    root = FIXTURES / "rocketmq-4.9.8" / variant
    truth = load_truth(root / "truth.json")["truth"]["consumeQueues"]
    maxima = {(t, int(q)): v["maxOffset"] for t, qs in truth.items() for q, v in qs.items() if v["maxOffset"]}
    stores = [expand_store(root / side / "store", tmp_path / side) for side in ("input", "expected")]
    r = cli_runner().invoke(app, ["diff", *map(str, stores), "-f", "jsonl"])
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert not [row for row in rows if row["record"] == "queue_range" and row["field"] == "max_queue_offset"]
    from rmqtool.inspect.diff import queue_ranges
    from rmqtool.recovery.loaded_end import simulate_for_info
    from rmqtool.store.view import open_store
    ranges = queue_ranges(open_store(stores[1], simulate=simulate_for_info))
    assert {k: hi for k, (_lo, hi) in ranges.items() if hi} == maxima


@pytest.mark.parametrize("table", ['{"offsetTable": 5}', '{"offsetTable": {"T@g": "x"}}', "[]",
                                   '{"offsetTable": {"T@g": {"0": 1, "1": {"2": 3}}}}'])
def test_a_config_of_odd_shapes_is_shown_in_a_table(tmp_path, table):
    """consumerOffset.json whose offsetTable is no map of maps (or whose keys are fastjson's bare
    integers, read as ints): the table shows each differing entry (an AttributeError went out)."""
    a = writable_copy(STORE, tmp_path / "a")
    (a / "config" / "consumerOffset.json").write_text(table)
    r = cli_runner().invoke(app, ["diff", str(a), str(STORE)], env={"COLUMNS": "120"})
    assert r.exit_code == ExitCode.CORRUPT and r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert "config_entry" in r.stdout


@pytest.fixture(scope="module")
def crashed_pair(tmp_path_factory) -> tuple:
    """A store and a copy of it crashed mid-write: rows whose a and b (epoch ms) differ only in
    their last digits, after some thousand rows where a and b are null."""
    crashed = expand_store(V4 / "crash" / "a-as-is" / "input", tmp_path_factory.mktemp("crashed") / "input")
    return V4 / "basic" / "store", crashed / "store"


@pytest.mark.parametrize("columns", [80, 100, 120, 160])
def test_a_table_shows_each_value_whole_or_not_at_all(crashed_pair, columns):
    """The table at any width: a checkpoint field's a and b (which differ) each whole or its column
    left out, never cut so that both print alike, though the first rows set the widths before them;
    the field's and the file's names whole. The field rows are a table of their own: at 80
    columns too a and b both show."""
    rows = diff(*crashed_pair)[1]
    want = of(rows, "checkpoint_field")
    assert len(want) == 3 and rows.index(want[0]) > 200
    text = cli_runner().invoke(app, ["diff", *map(str, crashed_pair)], env={"COLUMNS": str(columns)}).stdout
    shown = [cells for _, section in table_sections(text) for cells in section if cells["record"] == "checkpoint_field"]
    assert len(shown) == len(want)
    for cells, row in zip(shown, want):
        assert {name: cells[name] for name in ("field", "a", "b", "file") if name in cells} == {
            name: str(row[name]) for name in ("field", "a", "b", "file") if name in cells}
        assert {"field", "a", "b"} <= set(cells)
    assert max(map(len, text.splitlines())) <= columns


@pytest.mark.parametrize("variant", ["c1-delete-cq-queue-dir", "c2-delete-last-cq-file"])
def test_queue_ranges_are_those_the_next_start_leaves(variant):
    """A queue file or directory deleted: the start's dispatch puts the units back, so each
    side's range is the engine's after its start (truth.json), as offsets and report read them;
    diff cut the files and said the queue differed from an intact store's."""
    crash = V4 / "crash"
    ranges = {}
    for name in ("a-as-is", variant):
        queues = load_truth(crash / name / "truth.json")["truth"]["consumeQueues"]
        ranges[name] = {(t, int(q)): (v["apiMinOffsetInQueue"], v["apiMaxOffsetInQueue"])
                        for t, qs in queues.items() for q, v in qs.items()}
    r, rows = diff(crash / "a-as-is" / "input" / "store", crash / variant / "input" / "store")
    shown = {(x["topic"], x["queue_id"]) for x in of(rows, "queue_range")}
    a, b = ranges["a-as-is"], ranges[variant]
    assert shown == {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}, rows
