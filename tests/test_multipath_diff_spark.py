"""diff and spark on a commit log over several directories (storePathCommitLog=/disk-a,/disk-b,
MultiPathMappedFileQueue): fixtures/rocketmq-4.9.8/basic's twelve files split over two disks where
tryCreateMappedFile puts them (file i in sorted path i mod 2), found from the store's own
config/broker.properties with no option, or given per side to diff; the one log the plain store
holds, checked against the plain store and its truth.json."""
from __future__ import annotations

import json
import pathlib

import pytest

from conftest import V4, load_truth
from helpers import cli_runner, copy_tree, split_commit_log
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode

BASIC = V4 / "basic"
TRUTH = load_truth(BASIC / "truth.json")
SIZE = TRUTH["messageStoreConfig"]["effectiveGetterValues"]["mappedFileSizeCommitLog"]
MESSAGES = TRUTH["truth"]["messages"]


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    """A split store whose config/broker.properties names its disks (read with no option)."""
    store, disks = split_commit_log(BASIC / "store", tmp_path_factory.mktemp("found"), SIZE)
    (store / "config").mkdir(exist_ok=True)
    (store / "config" / "broker.properties").write_text(f"storePathCommitLog={disks[1]},{disks[0]}\n")
    return store, disks


def _diff(*argv, code):
    r = cli_runner().invoke(app, ["diff", *[str(a) for a in argv], "-f", "jsonl"])
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def test_diff_reads_each_side_across_its_disks(found, tmp_path):
    """Found with no option, the split store diffs equal to the plain one (its broker.properties
    is one more config file: not a config_entry, diff compares the *.json tables); given by hand
    per side (--commitlog-path-b, --broker-config-a), a file lost from disk-b is the difference,
    at the file's base offset."""
    store, disks = found
    rows = _diff(BASIC / "store", store, code=0)
    [summary] = [r for r in rows if r["record"] == "summary"]
    assert summary["equal"] is True and summary["differences"] == 0

    lost = 3 * SIZE  # file 3: disk-b's (3 mod 2)
    other = [tmp_path / f"copy-{c}" for c in "ab"]
    for src, dst in zip(disks, other):
        copy_tree(src, dst)
    (other[1] / f"{lost:020d}").unlink()
    conf = tmp_path / "broker-a.conf"
    conf.write_text(f"storePathCommitLog={disks[0]},{disks[1]}\n")
    rows = _diff(store, store, "--broker-config-a", conf, "--commitlog-path-b", f"{other[0]},{other[1]}",
                 code=int(ExitCode.CORRUPT))
    [div] = [r for r in rows if r["record"] == "commit_log_divergence"]
    assert div["commit_log_offset"] == lost
    only_a = sorted(r["commit_log_offset"] for r in rows if r["record"] == "message_only_in" and r["side"] == "a")
    assert only_a == [m["physicalOffset"] for m in MESSAGES if lost <= m["physicalOffset"] < lost + SIZE]
    assert not any(r["record"] == "message_only_in" and r["side"] == "b" for r in rows)


@pytest.fixture(scope="module")
def spark():
    """The session tests/test_spark.py starts (getOrCreate, the same settings): started once a run."""
    from rmqtool.spark.session import spark_session
    return spark_session("local[1]", {"spark.driver.memory": "512m", "spark.sql.shuffle.partitions": "1"})


def test_spark_export_and_verify_read_each_file_where_it_lies(found, spark, tmp_path):
    """spark export of the split store (found with no option) holds the plain store's message and
    consume queue rows (the plain one's made by the same executor function in this process: one
    Spark job is enough), each message's file the disk the broker's rule put it on; spark verify's
    executor finds the split store as clean as the broker left it."""
    import pyarrow.dataset as ds

    from rmqtool.spark.export import export, run_task, store_tasks
    from rmqtool.spark.stores import StoreSpec, require_stores
    from rmqtool.spark.verify import verify_store_task

    store, disks = found
    split, plain = StoreSpec("split", str(store)), StoreSpec("plain", str((BASIC / "store").resolve()))
    result = export(spark, [split], tmp_path / "split", views=require_stores([split]))
    assert (result.task_count, result.messages, result.finding_count) == (1 + 12, len(MESSAGES), 0)  # queues + a task a file
    for task in store_tasks([plain], 256 << 20):
        run_task(task, str(tmp_path / "plain"))

    def table(out, name):
        return ds.dataset(tmp_path / out / name, format="parquet", partitioning="hive").to_table().to_pylist()

    where = ("store_name", "store_path", "file", "file_position")
    rows = {out: sorted(table(out, "messages"), key=lambda r: r["commit_log_offset"]) for out in ("split", "plain")}
    assert [{k: v for k, v in r.items() if k not in where} for r in rows["split"]] == \
        [{k: v for k, v in r.items() if k not in where} for r in rows["plain"]]
    assert [r["msg_id"] for r in rows["split"]] == [m["msgId"] for m in sorted(MESSAGES, key=lambda m: m["physicalOffset"])]
    assert [r["file"] for r in rows["split"]] == [str(disks[r["commit_log_offset"] // SIZE % 2] / pathlib.Path(r["file"]).name)
                                                 for r in rows["plain"]]
    units = {out: sorted((r["topic"], r["queue_id"], r["queue_offset"], r["commit_log_offset"], r["size"])
                         for r in table(out, "consume_queue")) for out in ("split", "plain")}
    assert units["split"] == units["plain"] and len(units["split"]) == len(MESSAGES)

    checked = verify_store_task(split)  # what spark verify's executor runs for the store
    assert (checked["error"], checked["exit_code"]) == (None, 0)
    assert {r["severity"] for r in checked["rows"]} == {"info"}


def test_append_puts_the_next_file_where_the_broker_would(tmp_path):
    """append on a split store (found with no option): the records go on from the log's end in
    the last file's disk, and the next file is made where tryCreateMappedFile makes it (file i in
    sorted path i mod n), never in STORE/commitlog; verify finds the grown log clean and query
    finds the new message there. With every path read-only the broker makes no file: refused."""
    store, disks = split_commit_log(BASIC / "store", tmp_path, SIZE)
    (store / "config").mkdir(exist_ok=True)
    (store / "config" / "broker.properties").write_text(f"storePathCommitLog={disks[1]},{disks[0]}\n")
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps({"topic": "MultiPath", "body": f"{i:05d}" * 12000}) + "\n" for i in range(8)))
    r = cli_runner().invoke(app, ["append", str(store), "--from-jsonl", str(lines), "-f", "jsonl"])
    assert r.exit_code == 0, r.stderr
    put = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    end = TRUTH["truth"]["commitlog"]["maxPhyOffset"]
    assert len(put) == 8 and put[0]["commit_log_offset"] == end and put[-1]["commit_log_offset"] >= 12 * SIZE
    rule = sorted(str(d) for d in disks)[12 % 2]  # the writable paths sorted, indexed by the file's number
    assert [str(p.parent) for p in tmp_path.glob(f"disk-*/commitlog/{12 * SIZE:020d}")] == [rule]
    assert not (store / "commitlog").exists() and not list(tmp_path.glob(f"disk-*/commitlog/{13 * SIZE:020d}"))
    r = cli_runner().invoke(app, ["verify", str(store), "-f", "jsonl", "--no-progress", "--jobs", "1"])
    assert r.exit_code == 0 and {json.loads(line)["severity"] for line in r.stdout.splitlines()} == {"info"}
    r = cli_runner().invoke(app, ["query", str(store), "--msg-id", put[-1]["msg_id"], "-f", "jsonl"])
    [hit] = [json.loads(line) for line in r.stdout.splitlines()]
    assert (hit["commit_log_offset"], hit["file"]) == (put[-1]["commit_log_offset"], f"{rule}/{12 * SIZE:020d}")

    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    every = ",".join(str(d) for d in disks)
    r = cli_runner().invoke(app, ["append", str(store), "--commitlog-path", every, "--readonly-commitlog-path", every,
                                  "--topic", "T", "--body", "x"])
    assert r.exit_code == int(ExitCode.USAGE) and len(r.stderr.strip().splitlines()) == 1
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before
