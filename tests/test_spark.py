"""The fleet pipeline in local mode: the export of the fixture stores holds exactly the
messages and consume queue units of their truth.json; byte-range splits of a segment cut
anywhere give exactly the records of a whole scan; spark verify and spark query agree with
verify and query; spark stats finds a UNIQ_KEY planted in two stores. One Spark session
is shared by every test here (starting one takes seconds)."""
from __future__ import annotations

import base64
import collections
import importlib
import json
import os
import pathlib

import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from conftest import CLEAN_SCENARIOS, FIXTURES, SPARK_TEST_SQL_CONF, V4, V5, load_truth
from helpers import examples
from rmqtool.cli.app import app
from rmqtool.errors import UsageError
from rmqtool.spark.splits import SegmentTask, plan_tasks, scan_task
from rmqtool.spark.stores import StoreSpec, parse_store, store_specs
from rmqtool.store.commitlog import scan_segment
from rmqtool.store.commitlog_end import CommitLog, segment_ranges
from rmqtool.store.parallel import SegmentJob

importlib.import_module("pyspark")  # make test installs the spark extra: a missing one fails here, never skips

EXPORTED = {"basic": V4 / "basic", "txdelay": V4 / "txdelay", "v2crc": V5 / "v2-and-crc", "batchcq": V5 / "batchcq"}
runner = CliRunner()
# The spark commands run here find conftest's session (one a worker) by getOrCreate and would set their
# own shuffle partitions on it (8): these keep the settings it was made with for the small stores
SMALL = [a for k, v in SPARK_TEST_SQL_CONF.items() for a in ("--conf", f"{k}={v}")]


def spark_cmd(*args):
    """``rmqtool spark ...`` in-process, in the worker's session."""
    return runner.invoke(app, ["spark", *args, *SMALL])


@pytest.fixture(scope="module")
def exported(spark, tmp_path_factory):
    from rmqtool.spark.export import export
    out = tmp_path_factory.mktemp("fleet") / "export"
    specs = [StoreSpec(name, str((d / "store").resolve())) for name, d in EXPORTED.items()]
    result = export(spark, specs, out, split_size=100_000)  # many ranges a segment
    return out, result


# --- splits (no Spark) -------------------------------------------------------------------------

def _key(r) -> tuple:
    return (type(r).__name__, getattr(r, "commit_log_offset", getattr(r, "offset", None)), r.position)


def _segments():
    for name, d in CLEAN_SCENARIOS.items():
        log = CommitLog(d / "store" / "commitlog")
        for rng in segment_ranges(log.segments):
            yield name, rng


SEGMENTS = list(_segments())


def _tasks(rng, points: list[int]) -> list[SegmentTask]:
    """Tasks over [a, b) for consecutive points (the last one runs to the file's end)."""
    seg = rng.segment
    return [SegmentTask("s", "p", SegmentJob(seg, rng.index, rng.is_last, a, None, True, None if b >= seg.size else b))
            for a, b in zip(points, points[1:]) if a < b]


@settings(max_examples=examples(60), deadline=None)
@given(st.sampled_from(range(len(SEGMENTS))), st.lists(st.integers(min_value=1), min_size=1, max_size=6))
def test_ranges_cut_anywhere_give_the_whole_scan(pick, cuts):
    _name, rng = SEGMENTS[pick]
    seg = rng.segment
    whole = [_key(r) for r in scan_segment(seg, is_last=rng.is_last)]
    points = sorted({c % max(seg.size, 1) for c in cuts} | {0, seg.size})
    split = [_key(r) for t in _tasks(rng, points) for r in scan_task(t)]
    assert split == whole


def test_cuts_inside_records_and_inside_the_blank_tail():
    """Every cut one byte into each record, and into the blank record's tail, of a segment."""
    _name, rng = next((n, r) for n, r in SEGMENTS if not r.is_last)
    seg = rng.segment
    results = list(scan_segment(seg, is_last=rng.is_last))
    whole = [_key(r) for r in results]
    tail = results[-1]
    points = sorted({r.position + 1 for r in results} | {tail.position + 9, 0, seg.size})
    assert [_key(r) for t in _tasks(rng, points) for r in scan_task(t)] == whole


def test_a_plan_tiles_every_segment():
    store = V4 / "basic" / "store"
    tasks = plan_tasks([StoreSpec("b", str(store))], 100_000)
    sizes = {t.job.segment.path: t.job.segment.size for t in tasks}
    assert sorted(sizes) == sorted((store / "commitlog").iterdir())
    for segment, size in sizes.items():
        ranges = sorted((t.job.start, t.job.end or size) for t in tasks if t.job.segment.path == segment)
        assert ranges[0][0] == 0 and ranges[-1][1] == size and len(ranges) > 1
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert sum(t.bytes for t in tasks) == sum(sizes.values())


def test_store_names(tmp_path):
    assert parse_store("/data/broker-a/store") == StoreSpec("broker-a", "/data/broker-a/store")
    assert parse_store("a=/x/store") == StoreSpec("a", "/x/store")
    with pytest.raises(UsageError):  # '=' in the directory name: it cannot name a partition
        parse_store("/x/y=z")
    assert parse_store("n=/x/y=z") == StoreSpec("n", "/x/y=z")
    listing = tmp_path / "stores.txt"
    listing.write_text("# the fleet\nb=/data/b/store\n\n/data/c\n")
    assert [s.name for s in store_specs(["a=/data/a"], listing)] == ["a", "b", "c"]
    with pytest.raises(UsageError):
        store_specs(["x=/one", "x=/two"])
    with pytest.raises(UsageError):
        store_specs([])


# --- export ----------------------------------------------------------------------------------

def _table(out: pathlib.Path, name: str):
    import pyarrow.dataset as ds
    return ds.dataset(out / name, format="parquet", partitioning="hive").to_table().to_pylist()


def test_export_holds_every_message_of_truth_field_by_field(exported):
    out, result = exported
    rows = _table(out, "messages")
    assert result.messages == len(rows)
    for name, d in EXPORTED.items():
        truth = load_truth(d / "truth.json")["truth"]["messages"]
        mine = sorted((r for r in rows if r["store_name"] == name), key=lambda r: r["commit_log_offset"])
        assert len(mine) == len(truth), name
        for row, t in zip(mine, sorted(truth, key=lambda t: t["physicalOffset"])):
            assert row["commit_log_offset"] == t["physicalOffset"]
            assert row["store_size"] == t["storeSize"]
            assert (row["topic"], row["queue_id"], row["queue_offset"]) == (t["topic"], t["queueId"], t["queueOffset"])
            assert (row["sys_flag"], row["flag"], row["body_crc"] & 0xFFFFFFFF) == \
                (t["sysFlag"], t["flag"], t["bodyCRC"] & 0xFFFFFFFF)
            assert (row["store_timestamp"], row["born_timestamp"]) == (t["storeTimestamp"], t["bornTimestamp"])
            assert row["body"] == base64.b64decode(t["body"])
            assert row["tags"] == t["tags"] and row["uniq_key"] == t["uniqKey"] and row["msg_id"] == t["msgId"]
            assert row["keys"] == (t["keys"].split() if t["keys"] else [])
            assert dict(row["properties"]) == t["properties"]
            assert row["store_path"] == str((d / "store").resolve())


def test_export_holds_every_consume_queue_unit_of_truth(exported):
    out, result = exported
    rows = _table(out, "consume_queue")
    assert result.consume_queue_units == len(rows)
    for name, d in EXPORTED.items():
        expected = sorted((topic, int(q), e[0], e[1], e[2], e[3], e[4] if len(e) > 4 else 1)
                          for topic, queues in load_truth(d / "truth.json")["truth"]["consumeQueues"].items()
                          for q, queue in queues.items() for e in queue["entries"])
        mine = sorted((r["topic"], r["queue_id"], r["queue_offset"], r["commit_log_offset"], r["size"], r["tags_code"],
                       r["batch_size"]) for r in rows if r["store_name"] == name)
        assert mine == expected, name


def test_export_refuses_a_directory_with_files(spark, tmp_path):
    from rmqtool.spark.export import export
    (tmp_path / "x").write_text("keep me")
    with pytest.raises(UsageError):
        export(spark, [StoreSpec("b", str(V4 / "basic" / "store"))], tmp_path)
    assert (tmp_path / "x").read_text() == "keep me"


# --- query, verify, stats --------------------------------------------------------------------

def _jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_spark_query_gives_query_rows(exported):
    out, _ = exported
    store = (EXPORTED["basic"] / "store").resolve()
    truth = load_truth(EXPORTED["basic"] / "truth.json")["truth"]["messages"]
    key = next(k for t in truth for k in (t["keys"] or "").split())
    for args in (["--key", key], ["--uniq-key", truth[3]["uniqKey"]], ["--msg-id", truth[5]["msgId"]]):
        fleet = spark_cmd("query", "--table", str(out), *args, "-f", "jsonl")
        alone = runner.invoke(app, ["query", str(store), *args, "-f", "jsonl"])
        assert fleet.exit_code == alone.exit_code == 0, fleet.stderr
        mine = [r for r in _jsonl(fleet.stdout) if r.pop("store_name") == "basic" and r.pop("store_path")]
        assert sorted(mine, key=lambda r: r["commit_log_offset"]) == \
            sorted(_jsonl(alone.stdout), key=lambda r: r["commit_log_offset"])
    topic = truth[0]["topic"]
    rows = _jsonl(spark_cmd("query", "--table", str(out), "-t", topic, "-f", "jsonl", "--body", "none").stdout)
    assert sorted(r["commit_log_offset"] for r in rows if r["store_name"] == "basic") == \
        sorted(t["physicalOffset"] for t in truth if t["topic"] == topic)
    none = spark_cmd("query", "--table", str(out), "--key", "no-such-key-anywhere")
    assert none.exit_code == 1


def test_spark_query_keeps_the_newest_of_each_store_and_says_more_exist_as_query_does(exported):
    """-n N: a store's newest N messages (its highest offsets), in commit log order, and a line
    on stderr that more exist, as query -n N gives them. It kept the oldest N, silently."""
    out, _ = exported
    store = (EXPORTED["basic"] / "store").resolve()
    truth = load_truth(EXPORTED["basic"] / "truth.json")["truth"]["messages"]
    key, count = collections.Counter(k for t in truth for k in (t["keys"] or "").split()).most_common(1)[0]
    limit = 3
    assert count > limit  # the case: more match than -n keeps
    fleet = spark_cmd("query", "--table", str(out), "--key", key, "-n", str(limit), "-f", "jsonl")
    alone = runner.invoke(app, ["query", str(store), "--key", key, "-n", str(limit), "-f", "jsonl"])
    assert fleet.exit_code == alone.exit_code == 0, fleet.stderr
    mine = [r for r in _jsonl(fleet.stdout) if r.pop("store_name") == "basic" and r.pop("store_path")]
    assert mine == _jsonl(alone.stdout)
    assert "more exist" in alone.stderr and f"basic: {limit} shown; more exist (--limit {limit} kept the newest)" \
        in fleet.stderr


def test_spark_query_says_a_damaged_message_and_exits_3_as_query_does(spark, tmp_path):
    """A message found whose body CRC fails (crash e2: a body byte flipped) is printed, named on
    stderr by its file and offset, and the exit code is 3, from an export and from stores, as
    query gives it. spark query printed it with exit 0 and nothing on stderr."""
    from rmqtool.spark.export import export
    crash = V4 / "crash" / "e2-corrupt-body-in-first-commitlog-file"
    store = (crash / "input" / "store").resolve()
    flipped = load_truth(crash / "truth.json")["mutation"]["messagePhysicalOffset"]
    msg_id = next(t["msgId"] for t in load_truth(crash / "truth.json")["truth"]["messages"]
                  if t["physicalOffset"] == flipped)
    alone = runner.invoke(app, ["query", str(store), "--msg-id", msg_id, "-f", "jsonl"])
    assert alone.exit_code == 3 and [r["body_crc_ok"] for r in _jsonl(alone.stdout)] == [False]
    damaged = [line for line in alone.stderr.splitlines() if line.endswith("is damaged")]
    assert len(damaged) == 1 and str(flipped) in damaged[0]
    export(spark, [StoreSpec("e2", str(store))], tmp_path / "out")
    for source in (["--table", str(tmp_path / "out")], [f"e2={store}"]):
        fleet = spark_cmd("query", *source, "--msg-id", msg_id, "-f", "jsonl")
        assert fleet.exit_code == 3, fleet.output
        rows = _jsonl(fleet.stdout)
        assert [{k: v for k, v in r.items() if k not in ("store_name", "store_path")} for r in rows] == \
            _jsonl(alone.stdout)
        assert [line for line in fleet.stderr.splitlines() if line.endswith("is damaged")] == damaged


def test_spark_verify_agrees_with_verify(spark, tmp_path):
    """Every family verify reads, each through its own checks: spark verify ran RocketMQ's plain
    verify on a DLedger store (hundreds of findings of records it read as commit log ones);
    a timer store's checks at the --now both are given."""
    from helpers import expand_store

    stores = [V4 / "basic" / "store", V4 / "crash" / "b1-truncate-last-commitlog-mid-message" / "input" / "store",
              V4 / "no-such-store",
              expand_store(V5 / "dledger" / "store", tmp_path / "dledger"),
              expand_store(V5 / "timer" / "store", tmp_path / "timer"),
              expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "qmq")]
    now = "2026-11-30T00:00:00Z"
    fleet = spark_cmd("verify", *[f"s{i}={p}" for i, p in enumerate(stores)], "-f", "jsonl", "--now", now)
    rows = _jsonl(fleet.stdout)
    worst = 0
    for i, store in enumerate(stores):
        alone = runner.invoke(app, ["verify", str(store), "-f", "jsonl", "--jobs", "1", "--now", now])
        worst = max(worst, alone.exit_code)
        mine = [dict(r) for r in rows if r.get("store_name") == f"s{i}" and "finding" in r]
        for r in mine:
            r.pop("store_name")
        assert mine == _jsonl(alone.stdout), store
        summary = next(r for r in rows if r.get("record") == "verify_summary" and r["store_name"] == f"s{i}")
        assert summary["finding_count"] == len(mine) and summary["exit_code"] == alone.exit_code
    assert fleet.exit_code == worst
    refused = spark_cmd("export", str(stores[3]), "--out", str(tmp_path / "out"))  # its tasks read plain segments
    assert refused.exit_code == 4 and "spark export (which query and stats run first) does not read it" in \
        refused.stderr and "spark verify" in refused.stderr


def test_spark_stats_finds_a_uniq_key_planted_in_two_stores(spark, tmp_path):
    """A copy of a store whose one message is appended again to another store (as a retried
    send landing on a second broker would be): that UNIQ_KEY is reported with both copies."""
    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.store import Store
    truth = load_truth(V5 / "v2-and-crc" / "truth.json")["truth"]["messages"]
    planted = next(t for t in truth if t["uniqKey"])
    other = tmp_path / "broker-b" / "store"
    with Store.open(other, writable=True, commitlog_size=1 << 20) as store:
        store.append(producer_message("OtherTopic", b"unrelated"))
        result = store.append(producer_message(planted["topic"], base64.b64decode(planted["body"]),
                                                   uniq_key=planted["uniqKey"]))
    r = spark_cmd("stats", f"a={V5 / 'v2-and-crc' / 'store'}", f"b={other}", f"c={V5 / 'batchcq' / 'store'}",
                  "-f", "jsonl")
    assert r.exit_code == 0, r.stderr
    rows = _jsonl(r.stdout)
    dups = [x for x in rows if x["record"] == "duplicate_uniq_key"]
    assert [d["uniq_key"] for d in dups] == [planted["uniqKey"]]
    assert [(c["store_name"], c["commit_log_offset"]) for c in dups[0]["copies"]] == \
        [("a", planted["physicalOffset"]), ("b", result.wrote_offset)]
    assert dups[0]["store_count"] == 2
    per_queue = [x for x in rows if x["record"] == "queue_stats" and x["store_name"] == "a"]
    assert sum(x["messages"] for x in per_queue) == len(truth)
    assert sum(x["bytes"] for x in per_queue) == sum(t["storeSize"] for t in truth)
    ranges = {(t["topic"], t["queueId"]): [] for t in truth}
    for t in truth:
        ranges[(t["topic"], t["queueId"])].append(t["queueOffset"])
    assert {(x["topic"], x["queue_id"]): (x["min_queue_offset"], x["max_queue_offset"]) for x in per_queue} == {
        k: (min(v), max(v) + 1) for k, v in ranges.items()}  # [min, max): max one past, as everywhere
    # a 5.x inner batch record counts its INNER_NUM messages and offsets, as the broker's queue does
    queues = load_truth(V5 / "batchcq" / "truth.json")["truth"]["consumeQueues"]
    assert {(x["topic"], str(x["queue_id"])): (x["min_queue_offset"], x["max_queue_offset"], x["messages"])
            for x in rows if x["record"] == "queue_stats" and x["store_name"] == "c"} == {
        (t, q): (v["minOffset"], v["maxOffset"], v["messageTotalInQueue"])
        for t, qs in queues.items() for q, v in qs.items() if v["maxOffset"] > v["minOffset"]}


def test_json_of_verify_and_stats_is_one_document_of_the_jsonl_rows(exported, tmp_path):
    """-f json: one array holding every row -f jsonl gives (findings and summaries; queue stats
    and duplicate UNIQ_KEYs), as dump commitlog --stats gives its two kinds. It printed two
    arrays one after the other, which no JSON parser reads."""
    out, _ = exported
    for args in (["verify", f"b={V4 / 'basic' / 'store'}", f"gone={tmp_path / 'gone'}"],
                 ["stats", "--table", str(out)]):
        lines, document = (spark_cmd(*args, "-f", fmt) for fmt in ("jsonl", "json"))
        assert document.exit_code == lines.exit_code, document.output
        rows = _jsonl(lines.stdout)
        assert {r.get("record") for r in rows} >= ({"verify_summary"} if args[0] == "verify" else
                                                   {"queue_stats"})
        assert json.loads(document.stdout) == rows


def test_a_table_or_a_list_of_stores_that_is_not_there_is_8_and_the_wrong_kind_4(tmp_path):
    """--table: a missing path exit 8 (no such directory), a file or a store directory exit 4;
    --stores-from: a missing file exit 8. They were 8 with "not an export directory" for all
    three, and 2 for the list."""
    afile = tmp_path / "afile"
    afile.write_text("")
    for table, code, words in ((tmp_path / "gone", 8, "no such directory"), (afile, 4, "not an export directory"),
                               (V4 / "basic" / "store", 4, "not an export directory")):
        for command in ("query", "stats"):
            r = runner.invoke(app, ["spark", command, "--table", str(table), *(["--uniq-key", "x"] if command == "query"
                                                                               else [])])
            assert (r.exit_code, r.stdout) == (code, ""), (table, r.output)
            assert r.stderr == f"rmqtool: error: {table}: {words}" + (" (no messages/ inside)\n" if code == 4 else "\n")
    for command in ("verify", "export", "query", "stats"):
        r = runner.invoke(app, ["spark", command, "--stores-from", str(tmp_path / "none.txt"), "--out", "x"]
                          if command == "export" else ["spark", command, "--stores-from", str(tmp_path / "none.txt"),
                                                       *(["--key", "x"] if command == "query" else [])])
        assert r.exit_code == 8 and "no such file" in r.stderr, (command, r.output)


def test_a_list_of_stores_that_is_not_utf8_is_one_line_naming_it_exit_4(tmp_path):
    """--stores-from with a byte that is not UTF-8: one line naming the file and the byte's
    offset, exit 4 (not a file of the kind asked for), for every spark command, before Spark
    starts. It was a UnicodeDecodeError traceback, exit 1."""
    listing = tmp_path / "stores.txt"
    listing.write_bytes(b"x # broker-a \xe9\n")
    for command in ("verify", "export", "query", "stats"):
        r = runner.invoke(app, ["spark", command, "--stores-from", str(listing),
                                *({"export": ["--out", str(tmp_path / "out")], "query": ["--key", "x"]}.get(command, []))])
        assert (r.exit_code, r.stdout) == (4, ""), (command, r.output)
        assert r.stderr.startswith(f"rmqtool: error: {listing} at offset 13: --stores-from: not UTF-8 text") and \
            r.stderr.count("\n") == 1, (command, r.stderr)


def test_a_store_path_that_is_not_utf8_is_refused_in_one_line_before_spark_starts(tmp_path):
    """The tables name each file by its path, as UTF-8 text: a store under a directory whose
    name has a byte that is not UTF-8 is refused in one line naming it (exit 2), and nothing is
    written, for every command that exports; spark verify (no tables) reads it as verify does.
    The export stopped in an executor with a Java and Python stack (UnicodeEncodeError), exit 8,
    naming no file."""
    from helpers import writable_copy
    bad = pathlib.Path(os.fsdecode(bytes(tmp_path) + b"/bad\xffdir"))
    store = writable_copy(V4 / "basic" / "store", bad / "store")
    out = tmp_path / "out"
    said = str(store).encode("utf-8", "backslashreplace").decode()  # as every command prints such a path
    for command in ("export", "query", "stats"):
        r = runner.invoke(app, ["spark", command, f"b={store}",
                                *({"export": ["--out", str(out)], "query": ["--key", "x"]}.get(command, []))])
        assert (r.exit_code, r.stdout) == (2, ""), (command, r.output)
        assert r.stderr.count("\n") == 1 and f"{said}: a path that is not UTF-8 (byte 0xff)" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and not out.exists()
    alone = runner.invoke(app, ["verify", str(store), "-f", "jsonl", "--jobs", "1"])
    fleet = spark_cmd("verify", f"b={store}", "-f", "jsonl")
    assert fleet.exit_code == alone.exit_code == 0 and "Traceback" not in fleet.stderr


def test_spark_usage_errors_say_so_before_spark_starts(tmp_path):
    r = runner.invoke(app, ["spark", "query", "--table", str(tmp_path), "--key", "a", "--uniq-key", "b"])
    assert r.exit_code == 2
    r = runner.invoke(app, ["spark", "export", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "no store given" in r.stderr
    r = runner.invoke(app, ["spark", "export", str(tmp_path / "gone"), "--out", str(tmp_path / "o")])
    assert r.exit_code == 8 and "no such file or directory" in r.stderr and not (tmp_path / "o").exists()


def test_an_export_into_a_store_it_reads_is_refused_before_anything_is_written(tmp_path):
    """--out inside a store given (its commit log directory, its root, a disk its broker.properties
    names for its commit log, the same by a file:// URI) is a usage error in one line, exit 2, and
    nothing is written: the export wrote its tables into commitlog/ and a broker's load
    (MappedFileQueue.doLoad) then refused the directory there and did not start."""
    from helpers import split_commit_log, tree_fingerprint, writable_copy
    store = writable_copy(V4 / "basic" / "store", tmp_path / "broker" / "store")
    size = load_truth(V4 / "basic" / "truth.json")["messageStoreConfig"]["effectiveGetterValues"][
        "mappedFileSizeCommitLog"]
    split, disks = split_commit_log(V4 / "basic" / "store", tmp_path / "split", size)
    (split / "config").mkdir(exist_ok=True)
    (split / "config" / "broker.properties").write_text(f"storePathCommitLog={disks[0]},{disks[1]}\n")
    before = {root: tree_fingerprint(root) for root in (store, *disks)}
    for out in (store / "commitlog" / "fleet-export", store / "fleet", _uri(store / "commitlog" / "x"),
                disks[1] / "fleet-export"):
        r = spark_cmd("export", f"b={store}", f"s={split}", "--out", str(out))
        assert r.exit_code == 2, r.output
        assert len(r.stderr.splitlines()) == 1 and "--out lies inside the store" in r.stderr, r.stderr
    assert {root: tree_fingerprint(root) for root in before} == before
    assert not (tmp_path / "broker" / "fleet").exists()


def test_one_bad_store_of_several_is_named_and_the_others_answer(spark, tmp_path):
    """A missing path, a file and a FIFO among stores: export and query answer for the good
    store, name each bad one in a line, and exit with the worst code, as query and spark verify
    do; they stopped before any work."""
    good = (V4 / "basic" / "store").resolve()
    afile, fifo = tmp_path / "afile", tmp_path / "fifo"
    afile.write_text("")
    os.mkfifo(fifo)
    bad = [tmp_path / "gone", afile, fifo]
    codes = [runner.invoke(app, ["info", str(b)]).exit_code for b in bad]  # each one's own code, as every command's
    truth = load_truth(V4 / "basic" / "truth.json")["truth"]["messages"]
    r = spark_cmd("export", f"basic={good}", *map(str, bad), "--out", str(tmp_path / "out"), "-f", "json")
    assert r.exit_code == max(codes), r.output
    assert json.loads(r.stdout)["messages"] == len(truth) and json.loads(r.stdout)["store_names"] == ["basic"]
    errors = [line for line in r.stderr.splitlines() if line.startswith("rmqtool: error:")]
    assert [any(str(b) in line for line in errors) for b in bad] == [True] * len(bad) and len(errors) == len(bad)
    alone = runner.invoke(app, ["query", str(good), *map(str, bad), "--msg-id", truth[5]["msgId"], "-f", "jsonl"])
    fleet = spark_cmd("query", f"basic={good}", *map(str, bad), "--msg-id", truth[5]["msgId"], "-f", "jsonl")
    assert fleet.exit_code == alone.exit_code == max(codes), fleet.output
    offsets = [[r["commit_log_offset"] for r in _jsonl(x.stdout)] for x in (fleet, alone)]
    assert offsets == [[truth[5]["physicalOffset"]]] * 2
    assert len([line for line in fleet.stderr.splitlines() if line.startswith("rmqtool: error:")]) == len(bad)


def test_a_damaged_store_exports_what_dump_reads_and_its_findings(spark, tmp_path):
    """Damage never stops an export: the messages are those dump commitlog reads, and the
    findings table holds the findings dump reports, ranges cut anywhere: those of the records,
    and those of the log's files (a segment cut short: segmentSizeOdd, which the export left
    out, as no task looked at the listing)."""
    from helpers import writable_copy
    from rmqtool.inspect.commitlog_dump import CommitLogDump
    from rmqtool.spark.export import export
    stores = {name: V4 / "crash" / name / "input" / "store" for name in (
        "b2-garbage-tail-of-last-message", "e3-corrupt-body-in-second-to-last-commitlog-file",
        "b1-truncate-last-commitlog-mid-message")}
    cut = writable_copy(V5 / "v2-and-crc" / "store", tmp_path / "cut" / "store")  # a middle segment cut short
    middle = sorted((cut / "commitlog").iterdir())[1]
    os.truncate(middle, middle.stat().st_size // 2)
    stores["m-middle-segment-cut-short"] = cut
    result = export(spark, [StoreSpec(n.split("-")[0], str(p)) for n, p in stores.items()], tmp_path / "out",
                    split_size=30_000)
    messages, findings = _table(tmp_path / "out", "messages"), _table(tmp_path / "out", "findings")
    for name, store in stores.items():
        dump = CommitLogDump(store)
        rows = list(dump.rows())
        short = name.split("-")[0]
        assert sorted(r["commit_log_offset"] for r in messages if r["store_name"] == short) == \
            [r["commit_log_offset"] for r in rows if r["record"] == "message"]
        assert collections.Counter((f["finding"], f["path"], f["offset"]) for f in findings
                                   if f["store_name"] == short and "/commitlog/" in f["path"]) == \
            collections.Counter((f.id, f.path, f.offset) for f in dump.findings)
        assert dump.findings  # the fixture is damaged: there is something to compare
    assert result.finding_count == len(findings)
    r = spark_cmd("export", *[f"{n.split('-')[0]}={p}" for n, p in stores.items()],
                  "--out", str(tmp_path / "cli"), "-f", "json")
    assert r.exit_code == 3 and json.loads(r.stdout)["finding_count"] == len(findings) and "findings" in r.stderr


def test_without_pyspark_the_pip_command_is_named(monkeypatch):
    import sys as _sys
    monkeypatch.setitem(_sys.modules, "pyspark", None)  # as if the spark extra were not installed
    r = runner.invoke(app, ["spark", "stats", str(V4 / "basic" / "store")])
    assert r.exit_code == 8 and "pip install 'rmqtool[spark]'" in r.stderr


# --- stores behind a URI -------------------------------------------------------------------------

def _uri(path: pathlib.Path) -> str:
    return "file://" + str(path.resolve())


def _comparable(rows: list[dict], root: str, uri: str) -> list[tuple]:
    """Rows with the paths they name put in the store's own terms."""
    out = []
    for r in rows:
        r = dict(r)
        for name in ("file", "store_path", "path"):
            if isinstance(r.get(name), str):
                r[name] = r[name].replace(uri, root)
        r.pop("properties", None)
        out.append(tuple(sorted((k, str(v)) for k, v in r.items())))
    return sorted(out)


CRASHED = [V4 / "crash" / v / "input" / "store" for v in (
    "e3-corrupt-body-in-second-to-last-commitlog-file", "e1-corrupt-body-in-last-commitlog-file",
    "e2-corrupt-body-in-first-commitlog-file", "b3-zeroed-last-3-messages", "c2-delete-last-cq-file")] + \
    [V5 / "crash5" / v / "input" / "store" for v in ("b-garbled-last-message", "c-checkpoint-zeroed")] + \
    [FIXTURES / "crash-made" / v / "input" / "store" for v in (
        "torn-middle-normal", "missing-middle-abnormal", "missing-middle-no-queues", "roll-kill-last-missing")] + \
    [V4 / "crash" / "b1-truncate-last-commitlog-mid-message" / "input" / "store"]  # a segment cut short


@pytest.mark.parametrize("margin", [1_000, 8 << 20])
@pytest.mark.parametrize("store", CRASHED[:1], ids=lambda p: p.parent.parent.name)
def test_tasks_behind_a_uri_stage_what_they_read_and_give_the_local_tables(tmp_path, monkeypatch, margin, store):
    """Each task stages its byte range and a margin (a small one: staged again with more)
    and exports exactly what the same task on the local files does."""
    _export_both(tmp_path, monkeypatch, store, margin)


@pytest.mark.parametrize("store", CRASHED, ids=lambda p: p.parent.parent.name)
def test_the_queues_behind_a_uri_are_cut_where_the_next_start_cuts_them(tmp_path, monkeypatch, store):
    """After a crash the queues task stages what the simulated next start reads (each file's
    first records, the files from its start file on) and cuts the queues where the local
    task does, at info's max_commit_log_offset. It cut them at the clean-start end (the last
    file's good records), keeping units the broker's load drops."""
    local, far, cut = _export_both(tmp_path, monkeypatch, store, 8 << 20, tables=("consume_queue", "findings"))
    assert all(r["commit_log_offset"] + r["size"] <= cut for r in far["consume_queue"])


SIDE_STORES = [V5 / "cqext" / "store", V5 / "cqext-damaged" / "input" / "store", V5 / "compaction" / "store",
               V5 / "timer" / "store"]


@pytest.mark.parametrize("store", SIDE_STORES, ids=lambda p: "/".join(p.relative_to(V5).parts[:-1]))
def test_the_queues_of_a_store_with_side_stores_behind_a_uri_export_as_its_local_path_does(tmp_path, monkeypatch,
                                                                                           store):
    """The queues task stages what reading the queues needs: ConsumeQueueExt too, so a unit's
    tags_code is the tagsCode its ext unit holds (truth.json's iteratorTagsCode, as the local
    export gives it) and an ext lookup that fails is the same finding. consumequeue_ext/ was
    not staged: the raw ext address (-9223372036854775808...) came out as the tags code."""
    from helpers import expand_store
    local, far, _cut = _export_both(tmp_path, monkeypatch, expand_store(store, tmp_path / "store"), 8 << 20,
                                    tables=("consume_queue", "findings"))
    if store.parent.name == "cqext":  # every unit's tags code as the broker's iterator hands it out
        truth = load_truth(store.parent / "truth.json")["consumeQueues"]
        assert sorted((r["topic"], r["queue_id"], r["queue_offset"], r["tags_code"]) for r in far["consume_queue"]) == \
            sorted((q["topic"], q["queueId"], u["queueOffset"], u["iteratorTagsCode"]) for q in truth for u in q["units"])


def test_a_staged_head_holds_what_the_start_reads_of_a_file_it_does_not_walk():
    """remote.HEAD_BYTES: the first records the rules that wrote the store are told from, and
    the header that gives the abnormal start a file's first store time."""
    from rmqtool.store.message import HEADERS
    from rmqtool.recovery.semantics import SAMPLE_BYTES
    from rmqtool.spark import remote
    assert remote.HEAD_BYTES >= max(SAMPLE_BYTES, HEADERS[-1].size)


def _export_both(tmp_path, monkeypatch, store, margin, tables=("messages", "consume_queue", "findings")):
    """The store exported by the tasks from its local path and from its file:// URI: the
    tables read back, each side's (local, remote), and info's max_commit_log_offset."""
    from rmqtool.spark import remote
    from rmqtool.spark.export import export_queues_task, export_segment_task
    monkeypatch.setattr(remote, "STAGE_MARGIN", margin)
    monkeypatch.setattr(remote, "STAGE_GUARD", 16)
    root, uri = str(store.resolve()), _uri(store)
    for name, spec in (("local", StoreSpec("s", root)), ("remote", StoreSpec("s", uri))):
        tasks = plan_tasks([spec], 30_000)
        assert all((t.remote is not None) == (name == "remote") for t in tasks)
        if "messages" in tables:
            for t in tasks:
                export_segment_task(t, str(tmp_path / name))
        export_queues_task(spec, str(tmp_path / name))
    cut = json.loads(runner.invoke(app, ["info", root, "-f", "json"]).stdout)["commitlog"]["max_commit_log_offset"]
    local, far = ({t: _table(tmp_path / side, t) if (tmp_path / side / t).exists() else [] for t in tables}
                  for side in ("local", "remote"))
    for table in tables:
        assert local[table] or table != "messages"  # a store may have no queue, or none showing damage
        assert _comparable(far[table], root, uri) == _comparable(local[table], root, root), table
        assert all(uri in (r.get("file") or r.get("path") or "") for r in far[table])
    return local, far, cut


def test_spark_export_and_verify_of_a_store_behind_a_uri(spark, tmp_path):
    from rmqtool.spark.export import export
    d = V5 / "v2-and-crc"
    result = export(spark, [StoreSpec("u", _uri(d / "store"))], tmp_path / "out", split_size=50_000)
    truth = load_truth(d / "truth.json")["truth"]["messages"]
    rows = _table(tmp_path / "out", "messages")
    assert result.messages == len(truth)
    assert sorted((r["commit_log_offset"], r["msg_id"]) for r in rows) == \
        sorted((t["physicalOffset"], t["msgId"]) for t in truth)
    fleet = spark_cmd("verify", f"u={_uri(d / 'store')}", "-f", "jsonl")
    alone = runner.invoke(app, ["verify", str(d / "store"), "-f", "jsonl", "--jobs", "1"])
    mine = [r for r in _jsonl(fleet.stdout) if "finding" in r]
    for r in mine:
        r.pop("store_name")
        r["path"] = r["path"].replace(_uri(d / "store"), str(d / "store"))
    assert fleet.exit_code == alone.exit_code and mine == _jsonl(alone.stdout)


def test_spark_verify_rows_of_a_store_behind_a_uri_name_the_uri_in_every_field():
    """Every field of a finding row names the URI, not the staged copy (gone once the task
    ends): the message and the redispatch_command too, as verify of the local path names it.
    Only ``path`` was renamed: a queue directory gone gave "rmqtool redispatch
    /tmp/rmqtool-stage-.../ --cq"."""
    from rmqtool.spark.verify import verify_store_task
    store = V4 / "crash" / "c1-delete-cq-queue-dir" / "input" / "store"
    root, uri = str(store.resolve()), _uri(store)
    alone = _jsonl(runner.invoke(app, ["verify", root, "-f", "jsonl", "--jobs", "1"]).stdout)
    assert any("redispatch_command" in r for r in alone)  # the case: a row that names a command to run
    fleet = verify_store_task(StoreSpec("u", uri))["rows"]
    assert not [r for r in fleet if "rmqtool-stage-" in json.dumps(r)]
    assert [json.loads(json.dumps({k: v for k, v in r.items() if k != "store_name"}).replace(uri, root))
            for r in fleet] == alone


def _store_of_topics(root: pathlib.Path, topics: list[str]) -> pathlib.Path:
    """A store the engine writes: one message a topic, its key named after it."""
    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.store import Store
    with Store.open(root, writable=True, commitlog_size=1 << 20) as store:
        for t in topics:
            store.append(producer_message(t, b"x", keys=f"k-{t}"))
    return root


def test_topic_names_round_trip_through_the_partitions(spark, tmp_path):
    """Retry and dead-letter topics (%, |) and topics in Chinese come back from the partition
    directories whole, through Spark and through pyarrow, and spark query finds each."""
    from rmqtool.spark.export import export
    topics = ["%RETRY%order_group", "%DLQ%pay|group", "Plain-Topic_1", "123", "订单 主题", "café.événement"]
    root = _store_of_topics(tmp_path / "broker" / "store", topics)
    export(spark, [StoreSpec("broker", str(root))], tmp_path / "out")
    assert sorted(r["topic"] for r in _table(tmp_path / "out", "messages")) == sorted(topics)
    got = spark.read.parquet(str(tmp_path / "out" / "messages")).select("topic").collect()
    assert sorted(r["topic"] for r in got) == sorted(topics)
    from rmqtool.spark.query import condition, find_messages
    for topic in topics[-2:]:
        rows, _more = find_messages(spark, str(tmp_path / "out"), condition(topic=topic))
        assert [r["topic"] for r in rows] == [topic], topic


def test_under_spark_submit(tmp_path):
    """spark-submit runs rmqtool/spark/submit.py (it runs files, not console scripts): the
    same export, under the session spark-submit made."""
    import os
    import subprocess
    import sys
    from rmqtool.cli import spark_submit as submit
    from rmqtool.spark.session import LOCAL_JVM_OPTIONS  # what a local session's JVM gets: a third less CPU here
    spark_submit = pathlib.Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           "PATH": f"{pathlib.Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    p = subprocess.run([str(spark_submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
                        "--driver-java-options", LOCAL_JVM_OPTIONS, submit.__file__, "spark", "export",
                        str(V4 / "basic" / "store"), "--out", str(tmp_path / "out"), "-f", "json"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    truth = load_truth(V4 / "basic" / "truth.json")["truth"]["messages"]
    assert json.loads(p.stdout)["messages"] == len(truth) == len(_table(tmp_path / "out", "messages"))


def test_an_export_to_a_uri_and_a_query_of_it(spark, tmp_path):
    """--out and --table take URIs (pyarrow writes the parts, Spark reads them back)."""
    from rmqtool.spark.export import export
    out = _uri(tmp_path / "fleet")  # file://...: the same path any other filesystem goes through
    d = V4 / "basic"
    result = export(spark, [StoreSpec("b", str(d / "store"))], out, split_size=200_000)
    truth = load_truth(d / "truth.json")["truth"]["messages"]
    assert result.out_dir == out and result.messages == len(truth) == len(_table(tmp_path / "fleet", "messages"))
    key = next(k for t in truth for k in (t["keys"] or "").split())
    r = spark_cmd("query", "--table", out, "--key", key, "-f", "jsonl")
    assert r.exit_code == 0 and {x["commit_log_offset"] for x in _jsonl(r.stdout)} == \
        {t["physicalOffset"] for t in truth if key in (t["keys"] or "").split() or t["uniqKey"] == key}
    again = spark_cmd("export", f"b={d / 'store'}", "--out", out)
    assert again.exit_code == 2 and "never overwrites" in again.stderr


# --- QMQ stores (spark/qmq/export.py) ---------------------------------------------------------------

QMQ = {"qbasic": V4.parent / "qmq" / "basic", "qv2": V4.parent / "qmq" / "v2-consumerlog"}
QMQ_DAMAGED = V4.parent / "qmq" / "crash" / "d-flipped-payload-byte-mid-log" / "input"


@pytest.fixture(scope="module")
def qmq_exported(spark, tmp_path_factory):
    """Two QMQ stores (their files trimmed: QMQ reads a short file as zero-extended), a damaged
    one, and a RocketMQ store, in one export."""
    from rmqtool.spark.export import export
    out = tmp_path_factory.mktemp("qmq-fleet") / "export"
    specs = [*(StoreSpec(n, str((d / "store").resolve())) for n, d in QMQ.items()),
             StoreSpec("qdamaged", str(QMQ_DAMAGED.resolve())), StoreSpec("basic", str((V4 / "basic" / "store").resolve()))]
    return out, export(spark, specs, out)


def test_a_qmq_export_holds_every_record_and_unit_of_truth(qmq_exported):
    out, result = qmq_exported
    messages, units = _table(out, "messages"), _table(out, "consume_queue")
    assert result.messages == len(messages) and result.consume_queue_units == len(units)
    assert {r["family"] for r in messages if r["store_name"] == "basic"} == {"rocketmq"}
    for name, d in QMQ.items():
        truth = load_truth(d / "truth.json")["readBack"]
        mine = sorted((r for r in messages if r["store_name"] == name), key=lambda r: r["message_log_offset"])
        assert [(r["family"], r["topic"], r["subject"], r["sequence"], r["message_log_offset"], r["store_size"],
                 r["store_timestamp"], r["payload_crc_ok"], r["message_id"], r["tag_list"]) for r in mine] == \
            [("qmq", t["subject"], t["subject"], t["sequence"], t["offset"], t["size"], t["timestamp"],
              t["payloadCrcOk"], t["payload"]["messageId"], t["payload"]["tags"]) for t in truth["messageLog"]["records"]]
        assert all(r["commit_log_offset"] is None and r["queue_id"] is None for r in mine)  # QMQ has neither
        expected = sorted((subject, u["sequence"], u["wroteOffset"], u["wroteBytes"])
                          for subject, log in truth["consumerLogs"].items() for u in log["units"]
                          if u["type"] == "MESSAGE_LOG_INDEX")
        assert sorted((r["topic"], r["sequence"], r["message_log_offset"], r["size"])
                      for r in units if r["store_name"] == name) == expected
        assert {r["family"] for r in units if r["store_name"] == name} == {"qmq"}


def test_a_damaged_qmq_store_exports_its_records_and_verify_s_findings_of_them(qmq_exported):
    out, _ = qmq_exported
    found = [f for f in _table(out, "findings") if f["store_name"] == "qdamaged"]
    alone = _jsonl(runner.invoke(app, ["verify", str(QMQ_DAMAGED), "-f", "jsonl"]).stdout)
    scanned = {"messageRecordInvalid", "payloadCrcMismatch"}
    assert sorted((f["finding"], f["path"], f["offset"]) for f in found) == \
        sorted((f["finding"], f["path"], f["offset"]) for f in alone if f["finding"] in scanned)
    assert found and {f["family"] for f in found} == {"qmq"}
    rows = list(__import__("rmqtool.inspect.qmq.dumps", fromlist=["x"]).dump_rows(QMQ_DAMAGED, "messagelog", body="none"))
    assert sorted(r["message_log_offset"] for r in _table(out, "messages") if r["store_name"] == "qdamaged") == \
        [r["message_log_offset"] for r in rows if r["record"] == "message"]


def test_spark_query_and_verify_of_a_qmq_store_agree_with_query_and_verify(qmq_exported):
    out, _ = qmq_exported
    store = (QMQ["qbasic"] / "store").resolve()
    record = load_truth(QMQ["qbasic"] / "truth.json")["readBack"]["messageLog"]["records"][7]
    message_id = record["payload"]["messageId"]
    fleet = spark_cmd("query", "--table", str(out), "--msg-id", message_id, "-f", "jsonl")
    alone = runner.invoke(app, ["query", str(store), "--msg-id", message_id, "-f", "jsonl"])
    assert fleet.exit_code == alone.exit_code == 0, fleet.stderr
    mine, theirs = _jsonl(fleet.stdout), _jsonl(alone.stdout)
    assert [r.pop("store_name") for r in mine] == ["qbasic"] * len(theirs)
    for m, t in zip(mine, theirs):
        assert m.pop("store_path") == str(store)
        assert {k: v for k, v in m.items() if k != "payload_crc_ok"} == \
            {k: t[k] for k in m if k != "payload_crc_ok"}
    from rmqtool.spark.verify import verify_store_task  # what each executor runs (Spark's part is tested above)
    for store in (QMQ["qbasic"] / "store", QMQ_DAMAGED):
        alone = runner.invoke(app, ["verify", str(store), "-f", "jsonl"])
        task = verify_store_task(StoreSpec("s", str(store)))
        assert task["exit_code"] == alone.exit_code and task["error"] is None
        assert [{k: v for k, v in r.items() if k != "store_name"} for r in task["rows"]] == _jsonl(alone.stdout)


def test_spark_query_of_a_qmq_message_whose_payload_crc_fails_exits_3_as_query_does(qmq_exported):
    """A QMQ message found whose payload CRC fails (a payload byte flipped): exit 3, as query
    exits on it; spark query exited 0."""
    out, _ = qmq_exported
    flipped = load_truth(QMQ_DAMAGED.parent / "truth.json")["mutation"]["record"]
    found = runner.invoke(app, ["query", str(QMQ_DAMAGED), "--subject", flipped["subject"], "--sequence",
                                str(flipped["sequence"]), "-f", "jsonl"])
    message_id = _jsonl(found.stdout)[0]["message_id"]
    alone = runner.invoke(app, ["query", str(QMQ_DAMAGED), "--msg-id", message_id, "-f", "jsonl"])
    assert alone.exit_code == 3 and [r["payload_crc_ok"] for r in _jsonl(alone.stdout)] == [False]
    fleet = spark_cmd("query", "--table", str(out), "--msg-id", message_id, "-f", "jsonl")
    assert fleet.exit_code == 3, fleet.output
    assert [(r["store_name"], r["sequence"], r["payload_crc_ok"]) for r in _jsonl(fleet.stdout)] == \
        [("qdamaged", flipped["sequence"], False)]



def test_spark_query_of_a_damaged_qmq_message_names_it_and_shows_it_as_query_does(qmq_exported):
    """The damaged QMQ message found is named on stderr by its file and offset in query's
    words, and its table shows query's QMQ columns (subject, sequence, message id, message log
    offset) with query's values. spark query said nothing of it and showed RocketMQ's columns,
    empty."""
    from helpers import table_sections
    out, _ = qmq_exported
    flipped = load_truth(QMQ_DAMAGED.parent / "truth.json")["mutation"]["record"]
    store = str(QMQ_DAMAGED.resolve())
    found = runner.invoke(app, ["query", store, "--subject", flipped["subject"], "--sequence",
                                str(flipped["sequence"]), "-f", "jsonl"])
    message_id = _jsonl(found.stdout)[0]["message_id"]
    alone = runner.invoke(app, ["query", store, "--msg-id", message_id])
    fleet = spark_cmd("query", "--table", str(out), "--msg-id", message_id)
    assert fleet.exit_code == alone.exit_code == 3, fleet.output
    said = [line for line in alone.stderr.splitlines() if "is damaged" in line]
    assert said and said == [line for line in fleet.stderr.splitlines() if "is damaged" in line]
    (names, rows), = table_sections(alone.stdout)
    (fleet_names, fleet_rows), = table_sections(fleet.stdout)
    assert {"subject", "sequence", "message_id", "message_log_offset"} <= set(names) <= set(fleet_names)
    assert [{n: r[n] for n in names} for r in fleet_rows] == rows


def test_an_export_task_that_stops_on_an_error_is_one_line_not_an_executor_traceback(tmp_path):
    """A task that cannot write its Parquet part (here: a file size limit, as a full disk stops
    it) ends the export with one line naming the part, exit 8; without the task's own catch
    the executor's traceback came through Spark (and the driver's own after it)."""
    import resource
    import subprocess
    import sys

    # above what the driver writes (parallelize's file of the tasks), below the messages parts
    # of a 1 MiB range (tens of KB a topic): tasks stop, the driver does not
    limit = 64 << 10

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    out = tmp_path / "export"
    p = subprocess.run([sys.executable, "-m", "rmqtool", "spark", "export", str(V4 / "basic" / "store"),
                        "--out", str(out), "--split-size", str(1 << 20), "--no-progress", *SMALL],
                       capture_output=True, text=True, preexec_fn=limited, timeout=300)
    assert p.returncode == 8, p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("rmqtool: error:")]
    assert len(errors) == 1, p.stderr[-2000:]
    assert ".parquet: cannot write the Parquet part" in errors[0] and "the export is incomplete" in errors[0]
    assert str(out) in errors[0]


def test_an_export_whose_task_failed_is_refused_by_table_not_read_as_whole(spark, tmp_path):
    """A segment gone between the plan and its task: the export stops (exit 8, the export is
    incomplete) with what the other tasks wrote left in place, and no completion record;
    --table refuses it in one line (exit 4). It was read as a whole export: stats exit 0 with
    the messages of the gone file missing, and no word of it."""
    from helpers import writable_copy
    from rmqtool.errors import TasksFailed
    from rmqtool.spark.export import export
    from rmqtool.spark.stores import open_stores
    store = writable_copy(V4 / "basic" / "store", tmp_path / "b" / "store")
    specs = [StoreSpec("b", str(store))]
    _found, views, _bad = open_stores(specs)
    planned = views["b"].commit_log.segments  # listed: the gone file is planned for
    planned[-2].path.unlink()
    out = tmp_path / "out"
    with pytest.raises(TasksFailed) as failed:
        export(spark, specs, out, views=views)
    assert failed.value.exit_code == 8 and "the export is incomplete" in str(failed.value)
    assert (out / "messages").is_dir() and _table(out, "messages")  # what the other tasks wrote stays
    for command in (["stats"], ["query", "--key", "x"]):
        r = spark_cmd(*command, "--table", str(out))
        assert (r.exit_code, r.stdout) == (4, ""), r.output
        assert r.stderr.startswith(f"rmqtool: error: {out}: no _SUCCESS, the record an export writes") and r.stderr.count("\n") == 1


def test_an_export_of_a_live_store_reads_to_its_written_end_and_says_so_as_dump_does(spark, tmp_path):
    """A store a running broker holds (its lock held by another process), a record half copied
    at its written end with a queue unit pointing at it: export says the store is live, as dump
    commitlog does, and reads to the written end (messages: dump's rows; the moving tail no
    finding; exit as dump's). It reported the half record as damage (exit 3) without a word of
    the lock."""
    from helpers import lock_held_elsewhere
    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.store import Store
    from test_live import SMALL as LIVE_SIZES, _tear_tail
    root = tmp_path / "store"
    store = Store.open(root, writable=True, **LIVE_SIZES)
    results = [store.append(producer_message("LiveTopic", b"m%03d" % i * 20, keys=f"k{i}")) for i in range(30)]
    store.close()
    end = _tear_tail(root, results)
    (root / "abort").write_bytes(b"")  # a running broker keeps it
    out = tmp_path / "out"
    with lock_held_elsewhere(root / "lock") as pid:
        dump = runner.invoke(app, ["dump", "commitlog", str(root), "-f", "jsonl"])
        r = spark_cmd("export", f"live={root}", "--out", str(out), "-f", "json")
    assert f"PID {pid} holds its lock" in dump.stderr and f"commit log offset {end}" in dump.stderr
    assert r.exit_code == dump.exit_code == 0, r.output
    assert f"PID {pid} holds its lock" in r.stderr and f"commit log offset {end}" in r.stderr
    assert sorted(m["commit_log_offset"] for m in _table(out, "messages")) == \
        [d["commit_log_offset"] for d in _jsonl(dump.stdout) if d["record"] == "message"]
    assert _table(out, "findings") == []
    assert all(u["commit_log_offset"] < end for u in _table(out, "consume_queue"))


def test_a_task_whose_store_is_gone_returns_its_error(tmp_path):
    """Executor side without Spark: a store gone between the plan and its task is the task's
    one line and exit code, returned (spark/export.py run_task), not raised."""
    from rmqtool.spark.export import QUEUES_TASK, QueuesTask, run_task

    result = run_task(QueuesTask(StoreSpec("gone", str(tmp_path / "gone"))), str(tmp_path / "out"))
    assert (result.store, result.task, result.exit_code) == ("gone", QUEUES_TASK, 8)
    assert str(tmp_path / "gone") in result.error


def test_spark_verify_says_an_os_error_as_verify_does(tmp_path, monkeypatch):
    """A store verify cannot read (an I/O error the OS gives) is its summary's error and
    exit 8, as ``verify`` exits on it, not an executor traceback."""
    from rmqtool.spark import verify as spark_verify

    def unreadable(path, now_ms=None):
        raise OSError(5, "Input/output error", str(tmp_path / "commitlog" / "00000000000000000000"))

    monkeypatch.setattr(spark_verify, "_local_verify", unreadable)
    result = spark_verify.verify_store_task(StoreSpec("eio", str(tmp_path)))
    assert result["exit_code"] == 8
    assert result["error"] == f"{tmp_path / 'commitlog' / '00000000000000000000'}: Input/output error"


def test_stores_with_no_message_export_empty_tables_that_query_and_stats_read(spark, tmp_path):
    """A store a broker started and never wrote to (its first segment all zeros): the export
    has the three tables, empty, and query and stats read them (no message: exit 1; no
    rows: exit 0). Spark found no schema in an absent table and stopped with a traceback."""
    store = tmp_path / "idle" / "store"
    (store / "commitlog").mkdir(parents=True)
    with open(store / "commitlog" / f"{0:020d}", "wb") as f:
        f.truncate(1 << 20)
    out = tmp_path / "export"
    r = spark_cmd("export", str(store), "--out", str(out), "-f", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["messages"] == 0
    from rmqtool.spark.parts import COMPLETE_FILE
    assert sorted(p.name for p in out.iterdir()) == sorted([COMPLETE_FILE, "consume_queue", "findings", "messages"])
    for source in ([str(store)], ["--table", str(out)]):
        r = spark_cmd("query", *source, "--key", "any", "-f", "jsonl")
        assert (r.exit_code, r.stdout) == (1, ""), r.output
        assert "Traceback" not in r.output
        r = spark_cmd("stats", *source, "-f", "jsonl")
        assert (r.exit_code, r.stdout) == (0, ""), r.output


def test_a_master_spark_refuses_is_one_line_exit_8_not_py4j_tracebacks(tmp_path):
    """A master URL Spark cannot use stops the session: one rmqtool line, exit 8; Spark's own
    log says it in two lines (its exception's first line, no Java stack). Py4J's traceback and
    the Java stack came through before. A URL spark-submit's rule refuses is a usage error
    before Spark starts."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "rmqtool", "spark", "verify", str(V4 / "basic" / "store"),
                        "--master", "local[abc]", "-f", "jsonl", "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    assert (p.returncode, p.stdout) == (8, ""), p.stderr[-2000:]
    assert "Traceback" not in p.stderr and "\tat " not in p.stderr, p.stderr[-2000:]
    assert p.stderr.splitlines()[-1] == ("rmqtool: error: Spark stopped: org.apache.spark.SparkException: "
                                         "Could not parse Master URL: 'local[abc]'")
    r = runner.invoke(app, ["spark", "verify", str(V4 / "basic" / "store"), "--master", "nosuch://x"])
    assert r.exit_code == 2 and "--master must be yarn or start with spark, k8s or local" in r.stderr


def test_names_a_uri_must_escape_are_read_behind_a_uri(spark, tmp_path):
    """A retry topic's %, a space, a topic in Chinese: the files behind a URI are named by
    percent-encoded URIs (they did not parse: every store with consumers has %RETRY% queues),
    and the export behind the URI holds what the local one holds. A QMQ store behind a URI is
    verified (staged whole); its export, whose tasks read local files, is refused in one line."""
    import urllib.parse

    from helpers import expand_store
    from rmqtool.spark.export import export

    topics = ["%RETRY%order_group", "%DLQ%pay|group", "订单 主题", "Plain#1"]
    root = _store_of_topics(tmp_path / "broker" / "store", topics)
    export(spark, [StoreSpec("local", str(root))], tmp_path / "local")
    export(spark, [StoreSpec("remote", _uri(root))], tmp_path / "remote")
    for table in ("messages", "consume_queue"):
        local = [{**r, "store_name": None} for r in _table(tmp_path / "local", table)]
        far = [{**r, "store_name": None, "file": urllib.parse.unquote(r["file"])}  # a URI, its names encoded
               for r in _table(tmp_path / "remote", table)]
        assert len(local) == len(topics)
        assert _comparable(far, str(root), _uri(root)) == _comparable(local, str(root), _uri(root)), table
    queue_files = {r["file"] for r in _table(tmp_path / "remote", "consume_queue")}
    assert {urllib.parse.unquote(f) for f in queue_files} == {
        f"{_uri(root)}/consumequeue/{t}/0/{0:020d}" for t in topics}

    qmq = expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "qmq")
    r = spark_cmd("verify", f"q={_uri(qmq)}", "-f", "jsonl")
    alone = runner.invoke(app, ["verify", str(qmq), "-f", "jsonl", "--jobs", "1"])
    summary = next(row for row in _jsonl(r.stdout) if row.get("record") == "verify_summary")
    assert (summary["error"], summary["exit_code"], summary["finding_count"]) == (
        None, alone.exit_code, len(_jsonl(alone.stdout)))
    r = spark_cmd("export", _uri(qmq), "--out", str(tmp_path / "q-out"))
    assert r.exit_code == 4 and "a QMQ store behind a URI" in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = spark_cmd("export", _uri(empty), "--out", str(tmp_path / "e-out"))
    assert r.exit_code == 4 and "not a store: none of commitlog/" in r.stderr  # it exported nothing, exit 0


@pytest.mark.parametrize("crash", [V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file",
                                   V5 / "crash5" / "b-garbled-last-message"])
def test_a_crashed_stores_queues_export_as_the_broker_loads_them(spark, tmp_path, crash):
    """The consume_queue table holds each queue as the engine's own load after the crash left
    it (truth.json's consumeQueues): units past the recovery's cut are not there. The export
    cut them where a clean start would end the log, keeping units the broker drops."""
    from rmqtool.spark.export import export
    truth = load_truth(crash / "truth.json")["truth"]["consumeQueues"]
    export(spark, [StoreSpec("crashed", str((crash / "input" / "store").resolve()))], tmp_path / "out")
    got: dict = {}
    for r in _table(tmp_path / "out", "consume_queue"):
        got.setdefault((r["topic"], str(r["queue_id"])), []).append(
            [r["queue_offset"], r["commit_log_offset"], r["size"], r["tags_code"]])
    # a queue the broker made and never wrote to has no unit to export; 5.x entries carry batchNum
    want = {(topic, qid): [e[:4] for e in q["entries"]]
            for topic, queues in truth.items() for qid, q in queues.items() if q["entries"]}
    assert {k: sorted(v) for k, v in got.items()} == want


@pytest.mark.parametrize("args, cause", [
    (["--master", "yarn"], "org.apache.spark.SparkException: When running with master 'yarn' either HADOOP_CONF_DIR "
                           "or YARN_CONF_DIR must be set in the environment."),
    (["--conf", "spark.driver.memory=abc"], "Invalid maximum heap size: -Xmxabc")])
def test_a_jvm_that_does_not_start_is_said_by_its_first_line_without_its_java_stack(args, cause):
    """A JVM that exits before it serves (yarn without HADOOP_CONF_DIR, a heap size it refuses):
    the last line carries the first line it gave, and its Java stack stays off the terminal.
    The JVM's stack came through, then "Spark stopped: [JAVA_GATEWAY_EXITED] Java gateway
    process exited before sending its port number"."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("HADOOP_CONF_DIR", "YARN_CONF_DIR")}
    p = subprocess.run([sys.executable, "-m", "rmqtool", "spark", "verify", str(V4 / "basic" / "store"), *args,
                        "--no-progress"], capture_output=True, text=True, timeout=300, env=env)
    assert (p.returncode, p.stdout) == (8, ""), p.stderr[-2000:]
    assert "\tat " not in p.stderr and "Exception in thread" not in p.stderr, p.stderr[-2000:]
    assert p.stderr.splitlines()[-1] == f"rmqtool: error: Spark stopped: {cause}"


def test_an_executors_python_error_is_said_by_its_last_line():
    """A job Spark aborts for an executor's Python error: its one line ends with the error the
    executor's traceback ends with, not "Traceback (most recent call last):"."""
    from py4j.protocol import Py4JJavaError

    from rmqtool.spark.session import spark_failure

    class JavaException:  # what Py4J hands over: toString() of the Java exception
        _target_id = "o2"  # Py4J's name of the object in the JVM

        def toString(self):
            return ("org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed "
                    "1 times, most recent failure: Lost task 0.0 in stage 1.0 (TID 1) (127.0.0.1 executor driver): "
                    "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
                    '  File "/x/worker.py", line 1, in main\n    process()\nKeyError: \'k\'\n\n'
                    "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)\n"
                    "Driver stacktrace:\n")

    failed = spark_failure(Py4JJavaError("An error occurred while calling o1.collect.\n", JavaException()))
    assert failed.one_line() == (
        "Spark stopped: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 "
        "failed 1 times, most recent failure: Lost task 0.0 in stage 1.0 (TID 1) (127.0.0.1 executor driver): "
        "org.apache.spark.api.python.PythonException: KeyError: 'k'")
    assert spark_failure(KeyError("not Spark's")) is None


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/"),
                        min_size=1, max_size=12).filter(lambda n: n not in (".", "..")), min_size=1, max_size=3))
def test_a_child_uri_parses_back_to_its_names(names):
    """Any file name (%, #, ?, a space, CJK) under a directory's URI parses to that name's path,
    and a staged copy's path is named by the same URI."""
    import pyarrow.fs as pafs

    from rmqtool.spark.remote import child, local_name
    relative = "/".join(names)
    uri = child("file:///data/store", relative)
    assert pafs.FileSystem.from_uri(uri)[1] == "/data/store/" + relative
    assert local_name("/tmp/stage", "/tmp/stage/" + relative, "file:///data/store") == uri


def test_an_ext_stores_queue_units_export_the_tags_codes_the_broker_hands_out(spark, tmp_path):
    """enableConsumeQueueExt: a unit's tagsCode field is an ext address; the consume_queue
    table holds the tagsCode ConsumeQueue's iterator hands getMessage (truth.json's
    iteratorTagsCode, read back through the engine), as dump consumequeue shows it; the
    export gave the raw address."""
    from helpers import expand_store
    from rmqtool.spark.export import export
    truth = load_truth(V5 / "cqext" / "truth.json")["consumeQueues"]
    store = expand_store(V5 / "cqext" / "store", tmp_path / "store")
    export(spark, [StoreSpec("ext", str(store))], tmp_path / "out")
    got = sorted((r["topic"], r["queue_id"], r["queue_offset"], r["tags_code"])
                 for r in _table(tmp_path / "out", "consume_queue"))
    want = sorted((q["topic"], q["queueId"], u["queueOffset"], u["iteratorTagsCode"]) for q in truth for u in q["units"])
    assert any(u["isExtAddr"] for q in truth for u in q["units"])  # the case: units that point into the ext
    assert got == want


def test_queues_of_a_store_without_commit_log_files_export_as_the_start_leaves_them(tmp_path):
    """No commit log file: the broker's start destroys every queue, info shows them empty; the
    local task exported them whole (the staged one, behind a URI, already cut them at 0)."""
    from helpers import writable_copy
    from rmqtool.spark.export import export_queues_task
    store = writable_copy(V4 / "basic" / "store", tmp_path / "store")
    for f in (store / "commitlog").iterdir():
        f.unlink()
    info = json.loads(runner.invoke(app, ["info", str(store), "-f", "json"]).stdout)
    assert info["consume_queues"] and all(q["messages"] == 0 for q in info["consume_queues"])
    for name, path in (("local", str(store)), ("remote", _uri(store))):
        export_queues_task(StoreSpec("s", path), str(tmp_path / name))
        assert _table(tmp_path / name, "consume_queue") == [], name


def test_a_part_that_cannot_be_written_is_named_with_the_uri_query_at_its_end(tmp_path):
    """The one line names the part's URI: the query string (``?region=``) after the part's
    names, where it read ``...?x=1/messages/...``."""
    import pyarrow as pa

    from rmqtool.errors import StoreAccessError
    from rmqtool.spark.parts import write_part
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    with pytest.raises(StoreAccessError) as err:
        write_part(pa.table({"a": [1]}), f"{_uri(blocker)}?x=1", "messages", "p.parquet")
    assert str(err.value).startswith(f"{_uri(blocker)}/messages/p.parquet?x=1: cannot write the Parquet part")


def test_an_export_whose_findings_are_warnings_only_exits_0_as_dump_does(spark, tmp_path):
    """An empty file after the last segment and a stray name in commitlog/: warnings that dump
    commitlog says and exits 0 on. The export listed them and exited 3 (damage); now it lists
    them, counts them apart from errors, and exits as dump does."""
    from helpers import writable_copy
    store = writable_copy(V5 / "v2-and-crc" / "store", tmp_path / "s")
    segments = sorted((store / "commitlog").iterdir())
    (store / "commitlog" / f"{int(segments[-1].name) + segments[0].stat().st_size:020d}").touch()
    (store / "commitlog" / "README.txt").write_text("notes")
    dump = runner.invoke(app, ["dump", "commitlog", str(store), "-f", "jsonl"])
    said = [line for line in dump.stderr.splitlines() if line.startswith("warning:")]
    assert dump.exit_code == 0 and said, dump.stderr
    r = runner.invoke(app, ["spark", "export", str(store), "--out", str(tmp_path / "o"), "-f", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["error_count"] == 0 and doc["finding_count"] == len(said)


def test_spark_stats_says_the_damage_it_read_as_dump_stats_does(spark, tmp_path):
    """A zeroed record in the middle of a segment: dump commitlog --stats names it and exits 3;
    spark stats counted around it, said nothing and exited 0."""
    from helpers import writable_copy
    store = writable_copy(V4 / "basic" / "store", tmp_path / "s")
    rows = [json.loads(x) for x in runner.invoke(app, ["dump", "commitlog", str(store), "-f", "jsonl", "--body",
                                                       "none"]).stdout.splitlines()]
    victim = rows[len(rows) // 2]
    with open(victim["file"], "r+b") as f:
        f.seek(victim["file_position"])
        f.write(bytes(victim["store_size"]))
    dump = runner.invoke(app, ["dump", "commitlog", str(store), "--stats", "-f", "json"])
    said = {line.split(": ")[1] for line in dump.stderr.splitlines() if line.startswith("error:")}
    assert dump.exit_code == 3 and said, dump.stderr
    r = runner.invoke(app, ["spark", "stats", str(store), "-f", "json"])
    assert r.exit_code == 3, r.output
    assert {line.split(": ")[1] for line in r.stderr.splitlines() if line.startswith("error:")} == said


def test_a_name_inside_a_store_that_is_not_utf8_ends_its_task_in_one_line(spark, tmp_path):
    """A topic directory whose name is not UTF-8 (dump shows it escaped): Parquet's text holds
    UTF-8 only, so the task stops, naming the file, exit 4, where an executor's traceback
    ended the job (exit 8, no file named)."""
    from helpers import writable_copy
    store = writable_copy(V4 / "basic" / "store", tmp_path / "s")
    topic = sorted((store / "consumequeue").iterdir())[0]
    bad = topic.with_name(os.fsdecode(b"bad\xff" + os.fsencode(topic.name)))
    topic.rename(bad)
    r = runner.invoke(app, ["spark", "export", str(store), "--out", str(tmp_path / "o")])
    assert r.exit_code == 4, r.output
    assert "its name is not UTF-8" in r.stderr and os.fsencode(bad.name).decode("utf-8", "backslashreplace") in r.stderr


def test_py4j_tracebacks_on_ctrl_c_are_not_printed(spark):
    """Ctrl-C during a Spark job: py4j logged two tracebacks through the root logger (a
    KeyboardInterrupt while sending a command, a reentrant read of its socket) before rmqtool's
    own "interrupted". Those records are dropped once rmqtool's session exists; others pass."""
    import logging
    from rmqtool.spark.session import spark_session
    spark_session("local[1]")  # the session the commands take (getOrCreate)
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.pathname)
    keep = Keep()
    root = logging.getLogger()
    root.addHandler(keep)
    try:
        for where in ("/v/site-packages/py4j/java_gateway.py", "/v/site-packages/rmqtool/x.py"):
            root.handle(logging.LogRecord("root", logging.ERROR, where, 1, "Exception while sending command.",
                                          None, None))
    finally:
        root.removeHandler(keep)
    assert seen == ["/v/site-packages/rmqtool/x.py"]
