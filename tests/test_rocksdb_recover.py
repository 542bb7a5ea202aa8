"""recover, redispatch and dump consumequeue on a RocksDB-only store (storeType=defaultRocksDB:
the consume queues live only in the RocksDB database flat in consumequeue/, no file queue).

The store is the real 5.3.3 broker's v2-and-crc store with its file queues removed and their
units (truth.json) written to RocksDB as tests/test_rocksdb_cq.py builds it."""
from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from conftest import V5, load_truth
from helpers import cli_runner, tree_fingerprint, writable_copy
from rmqtool.errors import ExitCode
from rocksdb_store import truth_units, write_rocksdb_cq

SOURCE = V5 / "v2-and-crc"
GARBAGE = b"not a record, past the last one"


def _cli(*args):
    from rmqtool.cli.app import app
    return cli_runner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def truth() -> dict:
    return load_truth(SOURCE / "truth.json")


def _rocksdb_only(truth, dst: pathlib.Path) -> pathlib.Path:
    root = writable_copy(SOURCE / "store", dst)
    shutil.rmtree(root / "consumequeue")
    write_rocksdb_cq(root, truth_units(truth))
    return root


@pytest.fixture(scope="module")
def clean(tmp_path_factory, truth) -> pathlib.Path:
    return _rocksdb_only(truth, tmp_path_factory.mktemp("rdb-clean") / "store")


@pytest.fixture(scope="module")
def crashed(tmp_path_factory, truth) -> pathlib.Path:
    """Bytes after the commit log's last record and the abort file: the start cuts the log."""
    root = _rocksdb_only(truth, tmp_path_factory.mktemp("rdb-crashed") / "store")
    end = truth["truth"]["commitlog"]["maxPhyOffset"]
    size = truth["messageStoreConfig"]["effectiveGetterValues"]["mappedFileSizeCommitLog"]
    with open(root / "commitlog" / f"{end // size * size:020d}", "r+b") as f:
        f.seek(end % size)
        f.write(GARBAGE)
    (root / "abort").write_bytes(b"")
    return root


def test_the_store_answers_rocksdb_only_from_its_files_and_broker_conf(clean):
    from rmqtool.store.rocksdb_cq import rocksdb_only
    assert rocksdb_only(clean)
    assert rocksdb_only(clean, store_type="defaultRocksDB")
    assert not rocksdb_only(clean, store_type="default")  # broker.conf says the file queues are the broker's
    assert not rocksdb_only(SOURCE / "store")  # file queues, no database


def test_recover_plans_the_commit_log_says_rocksdb_and_refuses_apply(crashed, truth):
    before = tree_fingerprint(crashed)
    result = _cli("recover", crashed, "-f", "json")
    assert result.exit_code == ExitCode.CORRUPT, result.stderr
    doc = json.loads(result.stdout)
    cq = crashed / "consumequeue"
    assert doc["rocksdb_consume_queue"]["path"] == str(cq)
    assert "RocksDB only" in doc["rocksdb_consume_queue"]["what_the_broker_does"]
    assert doc["queues"] == {} and doc["consume_queues"] == []  # no file queue is planned
    assert not [a for a in doc["actions"] if pathlib.Path(a["file"]).is_relative_to(cq)]
    end = truth["truth"]["commitlog"]["maxPhyOffset"]
    assert doc["commit_log"]["recovered_end"] == end  # the commit log part is planned as before
    assert any(a["finding"] == "trailingGarbage" for a in doc["actions"])
    assert "RocksDB only" in doc["apply_refused"]

    table = _cli("recover", crashed)
    assert "consume queues are in RocksDB only" in table.stdout and "--apply refuses this store" in table.stdout
    assert "queue OrderTopic/" not in table.stdout  # no file queue line

    applied = _cli("recover", crashed, "--apply", "--assume-defaults")
    assert applied.exit_code == ExitCode.CORRUPT
    lines = [line for line in applied.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "RocksDB only" in lines[0] and "file consume queues" in lines[0]
    assert tree_fingerprint(crashed) == before  # not a byte written, no file queue, no backup


def test_recover_apply_on_a_clean_rocksdb_only_store_writes_nothing(clean):
    before = tree_fingerprint(clean)
    result = _cli("recover", clean, "--apply", "--assume-defaults", "-f", "json")
    assert result.exit_code == ExitCode.OK, result.stderr
    doc = json.loads(result.stdout)
    assert doc["applied"]["backup_dir"] is None and doc["apply_refused"] is None
    assert tree_fingerprint(clean) == before


def test_redispatch_cq_is_refused_index_is_not(clean):
    before = tree_fingerprint(clean)
    for args in (["--cq"], []):  # the default is queues and index
        result = _cli("redispatch", clean, *args, "--assume-defaults")
        assert result.exit_code == ExitCode.USAGE
        assert "RocksDB only" in result.stderr and "file consume queues the broker never reads" in result.stderr
    index = _cli("redispatch", clean, "--index", "--assume-defaults", "-f", "json")
    assert index.exit_code in (ExitCode.OK, ExitCode.CORRUPT), index.stderr
    assert json.loads(index.stdout)["consume_queues"] is False
    assert tree_fingerprint(clean) == before


def test_dump_consumequeue_names_dump_rocksdbcq(clean):
    for path in (clean, clean / "consumequeue"):
        result = _cli("dump", "consumequeue", path, "-f", "jsonl")
        assert result.exit_code == ExitCode.OK
        assert result.stdout.strip() == ""
        assert f"rmqtool dump rocksdbcq {clean}" in result.stderr
    plain = _cli("dump", "consumequeue", SOURCE / "store", "--limit", "1", "-f", "jsonl")
    assert "rocksdbcq" not in plain.stderr


def test_broker_conf_store_type_decides_over_the_files(truth, tmp_path):
    """storeType=defaultRocksDB in broker.conf: file queues left from before the switch are not
    the broker's, so recover plans none; storeType=default: they are, and the plan has them."""
    root = writable_copy(SOURCE / "store", tmp_path / "store")  # file queues and the database (double write)
    write_rocksdb_cq(root, truth_units(truth))
    rocksdb, default = tmp_path / "rocksdb.conf", tmp_path / "default.conf"
    rocksdb.write_text("storeType=defaultRocksDB\n")
    default.write_text("storeType=default\n")
    doc = json.loads(_cli("recover", root, "--broker-config", rocksdb, "-f", "json").stdout)
    assert doc["rocksdb_consume_queue"]["path"] == str(root / "consumequeue") and doc["queues"] == {}
    doc = json.loads(_cli("recover", root, "--broker-config", default, "-f", "json").stdout)
    assert "rocksdb_consume_queue" not in doc
    assert sorted(doc["queues"]) == sorted(f"{t}/{q}" for t, qs in truth["truth"]["consumeQueues"].items() for q in qs)
    refused = _cli("redispatch", root, "--cq", "--broker-config", rocksdb)
    assert refused.exit_code == ExitCode.USAGE and "RocksDB only" in refused.stderr
    blank = tmp_path / "blank.conf"  # only 5.x has storeType, and its properties2Object trims a String setting
    for text in ("storeType=defaultRocksDB \n", "storeType=DEFAULTROCKSDB\n"):  # isEnableRocksDBStore: any case
        blank.write_text(text)
        doc = json.loads(_cli("recover", root, "--broker-config", blank, "-f", "json").stdout)
        assert doc["rocksdb_consume_queue"]["path"] == str(root / "consumequeue") and doc["queues"] == {}, text
