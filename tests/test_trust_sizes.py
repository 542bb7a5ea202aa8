"""Issue 20 item 7: sizes nobody can read any more.

A store written in small sizes (the engine, 3,000-byte consume queue files, 777 slots and
3,333 entries an index file) loses its index/ or every consume queue: recover --apply,
redispatch and append must write the files again in the store's sizes, taken from what the
store still shows (another queue's files, an index file) or from what the operator gives
(--cq-size, --index-slots/--index-entries, --broker-config); a size that can only be the
broker's default is said in the plan and --apply refuses it until given or --assume-defaults.
Expected sizes are the engine's own files before the damage, read back by the read side.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import time

import pytest
from typer.testing import CliRunner

from conftest import V4, V5, load_truth
from helpers import copy_tree
from rmqtool.cli.app import app
from rmqtool.engine.producer import producer_message
from rmqtool.engine.store import Store
from rmqtool.errors import ExitCode
from rmqtool.formats.broker_conf import java_parse_int, parse_properties
from rmqtool.formats.consumequeue import DEFAULT_CQ_FILE_SIZE
from rmqtool.formats.indexfile import index_file_size
from rmqtool.query.by_key import query_by_key
from rmqtool.store.consumequeue import queue_directories
from rmqtool.engine.index_writer import index_file_name
from rmqtool.store.indexfile import IndexFile, index_file_paths, read_index_header

CQ_FILE = 3000  # 150 units
SLOTS, ENTRIES = 777, 3333
SIZES = dict(commitlog_size=64 * 1024, cq_size=CQ_FILE, index_slots=SLOTS, index_entries=ENTRIES)
CLOCK = 1_700_000_000_000
runner = CliRunner()


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _build(root: pathlib.Path, n: int = 1200) -> pathlib.Path:
    """n keyed messages over two topics and three queues, closed cleanly: queues of
    several 3,000-byte files and index files of 777 slots / 3,333 entries."""
    now = [CLOCK]

    def clock():
        now[0] += 1
        return now[0]

    with Store.open(root, writable=True, clock=clock, **SIZES) as s:
        s.append_many([producer_message(f"T{i % 2}", b"x" * 40, keys=f"k{i}", queue_id=i % 3,
                                            born_timestamp=CLOCK) for i in range(n)])
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> pathlib.Path:
    return _build(tmp_path_factory.mktemp("built") / "store")


@pytest.fixture
def store(built, tmp_path) -> pathlib.Path:
    return pathlib.Path(copy_tree(built, tmp_path / "store"))


def _tree(root: pathlib.Path, under: str = "") -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / under).rglob("*")) if p.is_file()}


def _queue_files(root: pathlib.Path) -> dict:
    return {str(p.relative_to(root)): p.stat().st_size
            for _t, _q, d in queue_directories(root / "consumequeue") for p in sorted(d.iterdir())}


def test_the_built_store_is_what_the_tests_say(built):
    sizes = set(_queue_files(built).values())
    assert sizes == {CQ_FILE} and len(_queue_files(built)) == 12
    paths = index_file_paths(built / "index")
    assert paths and {p.stat().st_size for p in paths} == {index_file_size(SLOTS, ENTRIES)}
    with IndexFile(paths[0]) as f:  # the read side infers the geometry from the entries
        assert (f.hash_slot_num, f.index_num) == (SLOTS, ENTRIES)


# --- index/ gone ---------------------------------------------------------------------------

def test_index_gone_the_plan_says_default_and_apply_refuses(store):
    shutil.rmtree(store / "index")
    (store / "abort").touch()  # an abnormal start dispatches again from the first file: an index gets written
    before = _tree(store)
    r = _run("recover", store, "-f", "json")
    doc = json.loads(r.stdout)
    assert doc["sizes"]["max_hash_slot_num"]["taken_from"] == "default"
    assert doc["sizes"]["max_index_num"]["taken_from"] == "default"
    assert doc["sizes"]["max_hash_slot_num"]["value"] == 5_000_000
    assert doc["sizes"]["mapped_file_size_consume_queue"] == {"value": CQ_FILE, "taken_from": "files",
                                                              "shown_by": doc["sizes"]["mapped_file_size_consume_queue"]["shown_by"]}
    assert doc["sizes_unknown"] == ["max_hash_slot_num", "max_index_num"]
    table = _run("recover", store).stdout
    assert "max_hash_slot_num 5000000: the broker's default" in table and "--apply refuses" in table
    r = _run("recover", store, "--apply", "--backup-dir", store.parent / "b")
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "--index-slots" in r.stderr and "--assume-defaults" in r.stderr and "Traceback" not in r.stderr
    assert _tree(store) == before and not (store / "index").exists() and not (store.parent / "b").exists()


def test_index_gone_redispatch_refuses_the_default_geometry(store):
    shutil.rmtree(store / "index")
    before = _tree(store)
    r = _run("redispatch", store, "--index", "-f", "json")
    assert r.exit_code == ExitCode.CORRUPT
    doc = json.loads(r.stdout)
    assert doc["sizes_unknown"] == ["max_hash_slot_num", "max_index_num"]
    r = _run("redispatch", store, "--index", "--apply", "--backup-dir", store.parent / "b")
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "--index-entries" in r.stderr and "Traceback" not in r.stderr
    assert _tree(store) == before


def _keys_answer(root: pathlib.Path, n: int = 1200) -> None:
    for i in (0, n // 2, n - 1):
        found = query_by_key(root, f"k{i}", topic=f"T{i % 2}", index_only=True)
        assert len(found.messages) == 1 and found.used_index, i


def _index_geometry(root: pathlib.Path) -> set:
    out = set()
    for p in index_file_paths(root / "index"):
        assert p.stat().st_size == index_file_size(SLOTS, ENTRIES)
        with IndexFile(p) as f:
            out.add((f.hash_slot_num, f.index_num))
    return out


def test_index_options_rebuild_files_of_the_stores_geometry(store, tmp_path):
    shutil.rmtree(store / "index")
    (store / "abort").touch()
    r = _run("recover", store, "--apply", "--index-slots", SLOTS, "--index-entries", ENTRIES,
             "--backup-dir", tmp_path / "b", "-f", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["sizes"]["max_hash_slot_num"] == {"value": SLOTS, "taken_from": "option", "shown_by": f"--index-slots {SLOTS}"}
    assert doc["sizes_unknown"] == []
    assert _index_geometry(store) == {(SLOTS, ENTRIES)}
    _keys_answer(store)


def test_redispatch_index_with_the_options_rebuilds_the_same_files(built, store, tmp_path):
    shutil.rmtree(store / "index")
    r = _run("redispatch", store, "--index", "--apply", "--index-slots", SLOTS, "--index-entries", ENTRIES,
             "--backup-dir", tmp_path / "b")
    assert r.exit_code == 0, r.output
    assert _index_geometry(store) == {(SLOTS, ENTRIES)}
    _keys_answer(store)


def test_a_broker_config_gives_the_index_geometry(store, tmp_path):
    shutil.rmtree(store / "index")
    (store / "abort").touch()
    conf = tmp_path / "broker.conf"
    conf.write_text(f"# the broker's own file\nbrokerName = broker-a\nmaxHashSlotNum = {SLOTS}\n"
                    f"maxIndexNum:{ENTRIES // 10}\\\n    {ENTRIES % 10}\n", encoding="latin-1")
    r = _run("recover", store, "--apply", "--broker-config", conf, "--backup-dir", tmp_path / "b", "-f", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["sizes"]["max_index_num"]["taken_from"] == "broker-config"
    assert str(conf) in doc["sizes"]["max_index_num"]["shown_by"]
    assert _index_geometry(store) == {(SLOTS, ENTRIES)}
    _keys_answer(store)


def test_a_writer_reads_its_broker_config_once(store, tmp_path, monkeypatch):
    """The sizes and the commit log paths a writer takes from --broker-config come from one
    reading of the file (two readings could see two files while an operator edits it)."""
    import rmqtool.store.broker_conf as broker_conf

    reads = []
    read = broker_conf.read_broker_config
    monkeypatch.setattr(broker_conf, "read_broker_config", lambda path: reads.append(path) or read(path))
    shutil.rmtree(store / "index")
    conf = tmp_path / "broker.conf"
    conf.write_text(f"maxHashSlotNum = {SLOTS}\nmaxIndexNum = {ENTRIES}\n")
    r = _run("redispatch", store, "--index", "--broker-config", conf, "-f", "json")
    assert r.exit_code in (0, ExitCode.CORRUPT), r.output
    assert json.loads(r.stdout)["sizes"]["max_index_num"]["taken_from"] == "broker-config"
    assert reads == [conf]


def test_geometry_comes_from_a_surviving_index_file(tmp_path):
    root = _build(tmp_path / "store", n=1800)  # two entries a message: a second index file
    files = index_file_paths(root / "index")
    assert len(files) == 2
    original = files[-1].read_bytes()
    files[-1].unlink()
    r = _run("redispatch", root, "--index", "-f", "json")
    doc = json.loads(r.stdout)
    assert doc["sizes"]["max_hash_slot_num"] == {"value": SLOTS, "taken_from": "files", "shown_by": str(files[0])}
    assert doc["sizes_unknown"] == []
    r = _run("redispatch", root, "--index", "--apply", "--backup-dir", tmp_path / "b")
    assert r.exit_code == 0, r.output
    assert _index_geometry(root) == {(SLOTS, ENTRIES)}
    assert index_file_paths(root / "index")[-1].read_bytes() == original


def test_an_index_file_added_back_sorts_after_the_files_kept(tmp_path):
    """The newest index file lost, written by a broker whose clock (or zone) is ahead of the host
    rebuilding it: the rebuilt file was named by this host's clock and sorted first, and
    IndexService.load, which orders the files by name, read the index out of order."""
    ahead = [4_102_444_800_000]  # 2100: names after any clock the suite runs under

    def clock():
        ahead[0] += 1
        return ahead[0]

    root = tmp_path / "store"
    with Store.open(root, writable=True, clock=clock, **SIZES) as s:
        s.append_many([producer_message("T0", b"x" * 40, keys=f"k{i}", born_timestamp=CLOCK) for i in range(1800)])
    files = index_file_paths(root / "index")
    assert len(files) == 2 and files[0].name > index_file_name(int(time.time() * 1000))
    files[-1].unlink()
    r = _run("redispatch", root, "--index", "--apply", "--backup-dir", tmp_path / "b")
    assert r.exit_code == 0, r.output
    after = index_file_paths(root / "index")
    assert after[0] == files[0] and len(after) == 2
    headers = [read_index_header(p) for p in after]
    assert headers[0].end_phy_offset < headers[1].begin_phy_offset  # in name order, in log order
    again = json.loads(_run("redispatch", root, "--index", "-f", "json").stdout)
    assert {c["kind"] for c in again["changes"]} == {"same"}


def test_given_sizes_must_agree_with_the_files(store, tmp_path):
    before = _tree(store)
    r = _run("redispatch", store, "--index-slots", SLOTS + 1, "--index-entries", ENTRIES, "--apply")
    assert r.exit_code == ExitCode.USAGE and f"is {SLOTS}" in r.stderr
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeConsumeQueue=6000000\n")
    r = _run("recover", store, "--apply", "--broker-config", conf)
    assert r.exit_code == ExitCode.USAGE and str(conf) in r.stderr and "Traceback" not in r.stderr
    r = _run("recover", store, "--broker-config", tmp_path / "missing.conf")
    assert r.exit_code == ExitCode.OPERATIONAL and "missing.conf" in r.stderr
    assert _tree(store) == before


# --- every consume queue gone --------------------------------------------------------------

def test_queues_gone_redispatch_refuses_the_default_size(store):
    shutil.rmtree(store / "consumequeue")
    before = _tree(store)
    r = _run("redispatch", store, "--cq", "-f", "json")
    doc = json.loads(r.stdout)
    assert doc["sizes"]["mapped_file_size_consume_queue"]["taken_from"] == "default"
    assert doc["sizes_unknown"] == ["mapped_file_size_consume_queue"]
    r = _run("redispatch", store, "--cq", "--apply", "--backup-dir", store.parent / "b")
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "--cq-size" in r.stderr and "Traceback" not in r.stderr
    assert _tree(store) == before


@pytest.mark.parametrize("how", ["option", "broker-config"])
def test_queues_gone_come_back_in_the_stores_size(built, store, tmp_path, how):
    shutil.rmtree(store / "consumequeue")
    if how == "option":
        given = ["--cq-size", CQ_FILE]
    else:  # the broker rounds mappedFileSizeConsumeQueue up to whole 20-byte units
        conf = tmp_path / "broker.conf"
        conf.write_text(f"mappedFileSizeConsumeQueue={CQ_FILE - 19}\n")
        given = ["--broker-config", conf]
    r = _run("redispatch", store, "--cq", "--apply", *given, "--backup-dir", tmp_path / "b", "-f", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["sizes"]["mapped_file_size_consume_queue"]["value"] == CQ_FILE
    assert _queue_files(store) == _queue_files(built)
    assert _tree(store, "consumequeue") == _tree(built, "consumequeue")
    with Store.open(store) as s, Store.open(built) as b:  # the read side finds every queue's end
        assert s.queue_offsets() == b.queue_offsets()


def test_assume_defaults_writes_the_brokers_default_size(store, tmp_path):
    shutil.rmtree(store / "consumequeue")
    r = _run("redispatch", store, "--cq", "--apply", "--assume-defaults", "--backup-dir", tmp_path / "b")
    assert r.exit_code == 0, r.output
    assert set(_queue_files(store).values()) == {DEFAULT_CQ_FILE_SIZE}


def test_a_surviving_queue_gives_the_size(built, store, tmp_path):
    shutil.rmtree(store / "consumequeue" / "T0")
    r = _run("redispatch", store, "--cq", "-f", "json")
    size = json.loads(r.stdout)["sizes"]["mapped_file_size_consume_queue"]
    assert size["value"] == CQ_FILE and size["taken_from"] == "files" and "/T1/" in size["shown_by"]
    r = _run("redispatch", store, "--cq", "--apply", "--backup-dir", tmp_path / "b")
    assert r.exit_code == 0, r.output
    assert _tree(store, "consumequeue") == _tree(built, "consumequeue")


def test_recover_with_every_queue_gone_refuses_then_applies_with_the_size(built, store, tmp_path):
    shutil.rmtree(store / "consumequeue")
    (store / "abort").touch()
    before = _tree(store)
    r = _run("recover", store, "--apply", "--backup-dir", tmp_path / "b")
    assert r.exit_code == ExitCode.USAGE and "--cq-size" in r.stderr
    assert _tree(store) == before
    r = _run("recover", store, "--apply", "--cq-size", CQ_FILE, "--backup-dir", tmp_path / "b")
    assert r.exit_code == 0, r.output
    assert _tree(store, "consumequeue") == _tree(built, "consumequeue")


# --- append: the engine's writable open asks the same function -------------------------------

def test_append_into_a_store_without_its_sizes_is_refused_until_given(store, tmp_path):
    shutil.rmtree(store / "index")
    shutil.rmtree(store / "consumequeue")
    before = _tree(store)
    r = _run("append", store, "-t", "T0", "--body", "late")
    assert r.exit_code == ExitCode.USAGE and "--cq-size" in r.stderr and "--index-slots" in r.stderr
    assert _tree(store) == before
    conf = tmp_path / "broker.conf"
    conf.write_text(f"mappedFileSizeConsumeQueue={CQ_FILE}\nmaxHashSlotNum={SLOTS}\nmaxIndexNum={ENTRIES}\n")
    r = _run("append", store, "-t", "T0", "--body", "late", "--keys", "late-key", "--broker-config", conf)
    assert r.exit_code == 0, r.output
    assert set(_queue_files(store).values()) == {CQ_FILE}
    assert _index_geometry(store) == {(SLOTS, ENTRIES)}
    assert len(query_by_key(store, "late-key", topic="T0", index_only=True).messages) == 1


def test_a_new_store_takes_the_defaults_or_the_broker_config(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue={CQ_FILE}\n"
                    f"maxHashSlotNum={SLOTS}\nmaxIndexNum={ENTRIES}\n")
    r = _run("append", tmp_path / "new", "--create", "-t", "T", "--body", "b", "--broker-config", conf)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "new" / "commitlog" / f"{0:020d}").stat().st_size == 65536
    assert set(_queue_files(tmp_path / "new").values()) == {CQ_FILE}
    assert _index_geometry(tmp_path / "new") == {(SLOTS, ENTRIES)}


@pytest.mark.parametrize("base", [V4 / "crash", V4 / "crash-fast"], ids=lambda p: p.name)
def test_the_index_a_4_9_8_broker_rebuilt_has_the_size_recover_gives_it(base, tmp_path):
    """d-remove-index-dir: index/ gone from a store of a broker configured for 500 slots and
    1,000 entries (not the default 1:4). The plan says the geometry is only the default and
    --apply refuses; given the broker's own settings (truth.json, as a broker.conf), the
    index files come out the size the broker's own rebuilt ones have (onDiskAfterShutdown)."""
    truth = load_truth(base / "d-remove-index-dir" / "truth.json")
    src = base / "d-remove-index-dir" / "input" / "store"
    r = _run("recover", src, "-f", "json")
    assert json.loads(r.stdout)["sizes_unknown"] == ["max_hash_slot_num", "max_index_num"]
    out = tmp_path / "out"
    assert _run("recover", src, "--apply", "--to", out).exit_code == ExitCode.USAGE and not out.exists()
    conf = tmp_path / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in truth["messageStoreConfig"]["changedFromDefault"].items()))
    r = _run("recover", src, "--apply", "--to", out, "--broker-config", conf)
    assert r.exit_code == 0, r.output
    brokers = {f["fileSize"] for f in truth["onDiskAfterShutdown"]["indexFiles"]}
    assert {p.stat().st_size for p in index_file_paths(out / "index")} == brokers
    settings = truth["messageStoreConfig"]["effectiveGetterValues"]
    for p in index_file_paths(out / "index"):
        with IndexFile(p) as f:
            assert (f.hash_slot_num, f.index_num) == (settings["maxHashSlotNum"], settings["maxIndexNum"])


# --- 5.x batch consume queues ----------------------------------------------------------------

def test_batch_queues_gone_come_back_in_the_brokers_batch_size(tmp_path):
    """fixtures/crash-made bcq-all-deleted-abnormal: batchconsumequeue/ gone from a store the
    5.3.3 broker wrote with mapperFileSizeBatchConsumeQueue 736 (its truth.json)."""
    config = load_truth(V5 / "batchcq" / "truth.json")["messageStoreConfig"]["changedFromDefault"]
    store = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "crash-made" / "bcq-all-deleted-abnormal"
    r = _run("recover", store / "input" / "store", "-f", "json")
    doc = json.loads(r.stdout)
    assert doc["sizes_unknown"] == ["mapper_file_size_batch_consume_queue"]
    conf = tmp_path / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    out = tmp_path / "out"
    r = _run("recover", store / "input" / "store", "--apply", "--to", out, "--broker-config", conf)
    assert r.exit_code == 0, r.output
    sizes = {p.stat().st_size for p in (out / "batchconsumequeue").rglob("*") if p.is_file()}
    assert sizes == {config["mapperFileSizeBatchConsumeQueue"]}


# --- the broker config file, as Properties.load and properties2Object read it ---------------------

def test_properties_are_read_as_java_reads_them():
    text = (b"# comment\n  ! another\n\nmaxIndexNum = 3333\nkey\\ with\\:colon : v\\u0041l\\tue\n"
            b"multi=one \\\n     two\\\\\nspaced   value here  \nempty\nlast=x\\")
    assert parse_properties(text) == {"maxIndexNum": "3333", "key with:colon": "vAl\tue", "multi": "one two\\",
                                      "spaced": "value here  ", "empty": "", "last": "x"}
    assert parse_properties(b"a=1\r\na=2\rb\xe9=\xff") == {"a": "2", "b\xe9": "\xff"}


def test_an_int_the_broker_cannot_parse_leaves_its_default(tmp_path):
    assert [java_parse_int(t) for t in ("3000", "+3000", "-1", "3000 ", "3_000", "0x10", "2147483648")] == \
        [3000, 3000, -1, None, None, None, None]
    from rmqtool.store.broker_conf import read_broker_config
    conf = tmp_path / "broker.conf"
    conf.write_text("maxHashSlotNum=777 \n")  # a trailing blank: Integer.parseInt throws, the broker keeps 5000000
    value, why = read_broker_config(conf).int_setting("maxHashSlotNum", 5_000_000)
    assert value == 5_000_000 and "default" in why


# --- a queue file cut short ----------------------------------------------------------------

def _cut_to_one_file(store: pathlib.Path, keep: int) -> pathlib.Path:
    """T0/0 left with its first file only, cut to ``keep`` bytes; that file."""
    files = sorted((store / "consumequeue" / "T0" / "0").iterdir())
    for later in files[1:]:
        later.unlink()
    with open(files[0], "r+b") as f:
        f.truncate(keep)
    return files[0]


def test_a_queue_whose_only_file_was_cut_short_is_one_the_load_refuses(built, store):
    """Every queue is loaded with the one mapped file size the store's full files show: the
    queue left with one file cut short does not load (MappedFileQueue.load), where its own
    size once passed for the setting and recover stopped on "queue files of different sizes"."""
    size = _queue_files(built)["consumequeue/T0/0/00000000000000000000"]
    cut = _cut_to_one_file(store, size // 3 + 9)  # mid-unit
    r = _run("recover", store, "-f", "json")
    assert r.exit_code == ExitCode.CORRUPT, r.output
    doc = json.loads(r.stdout)
    assert doc["loadable"] is False
    assert doc["reason"].startswith(f"{cut}: {size // 3 + 9} bytes, not the mapped file size {size}:")
    found = [json.loads(line) for line in _run("verify", store, "-f", "jsonl").stdout.splitlines()]
    (refused,) = [f for f in found if f["finding"] == "storeNotLoadable"]
    # the file the load fails on is the finding's path (it was the recovery's start file)
    assert refused["message"] == doc["reason"] and refused["path"] == str(cut)
    (store / "commitlog" / "README").write_text("not the broker's")
    refused = [json.loads(line) for line in _run("verify", store, "-f", "jsonl").stdout.splitlines()
               if '"storeNotLoadable"' in line]
    assert [f["path"] for f in refused] == [str(store / "commitlog" / "README")]
    (store / "commitlog" / "README").unlink()
    end = next(f for f in found if f["finding"] == "commitLogEnd")
    assert "not simulated" not in end["message"] and "does not load the store" in end["message"]


@pytest.mark.parametrize("units", [3, 2, 1])  # 3: cut to no divisor of the size; 2, 1: to divisors of it
def test_a_first_file_cut_short_with_files_after_it_keeps_the_stores_size(built, store, units):
    """The file names show the size (each is the queue offset in bytes it starts at): a queue's
    first file cut to a few whole units, with full files after it, once passed for the
    setting: every other queue's files were called odd, the plan's reason named a file that
    is whole, and redispatch --cq --apply rewrote every queue in the cut file's size."""
    files = sorted((store / "consumequeue" / "T0" / "0").iterdir())
    size = _queue_files(built)[str(files[0].relative_to(store))]
    assert len(files) >= 2 and int(files[1].name) - int(files[0].name) == size
    os.truncate(files[0], units * 20)
    r = _run("recover", store, "-f", "json")
    doc = json.loads(r.stdout)
    assert doc["loadable"] is False and doc["reason"].startswith(
        f"{files[0]}: {units * 20} bytes, not the mapped file size {size}:"), r.output
    odd = [json.loads(line)["path"] for line in _run("verify", store, "-f", "jsonl").stdout.splitlines()
           if '"segmentSizeOdd"' in line]
    assert odd == [str(files[0])]
    plan = json.loads(_run("redispatch", store, "--cq", "-f", "json").stdout)
    assert [c["file"] for c in plan["changes"] if c["kind"] != "same"] == [str(files[0])]


def test_queues_whose_only_files_disagree_ask_for_the_size(tmp_path):
    """No queue has a file after its first and two first files of whole units disagree: the
    store does not show the setting, and the broker does not start whatever it is. recover
    says which option gives it, and given, plans with it (the other file is the one the load
    refuses)."""
    store = _build(tmp_path / "store", n=60)  # a file a queue
    sizes = _queue_files(store)
    assert len(set(sizes.values())) == 1 and all(len(list(d.iterdir())) == 1
                                                 for _t, _q, d in queue_directories(store / "consumequeue"))
    size = next(iter(sizes.values()))
    cut = _cut_to_one_file(store, size // 2 // 20 * 20)
    r = _run("recover", store)
    assert r.exit_code == ExitCode.CORRUPT and "--cq-size" in r.output and "Traceback" not in r.output
    # whatever the setting, the load refuses the files of the other size: verify, check and
    # report say the broker does not start (they called the store loadable)
    found = [json.loads(line) for line in _run("verify", store, "-f", "jsonl").stdout.splitlines()]
    (refused,) = [f for f in found if f["finding"] == "storeNotLoadable"]
    assert f"{size // 2 // 20 * 20} bytes ({cut})" in refused["message"] and f"{size} bytes" in refused["message"]
    assert "load_refused=1" in _run("check", store).stdout
    assert json.loads(_run("report", store, "-f", "json").stdout)["store"]["loadable"] is False
    r = _run("recover", store, "--cq-size", size, "-f", "json")
    doc = json.loads(r.stdout)
    assert doc["loadable"] is False and doc["reason"].startswith(f"{cut}: {size // 2 // 20 * 20} bytes, not the "
                                                                 f"mapped file size {size}:"), r.output


def test_an_index_file_cut_short_is_planned_with_the_geometry_given_and_grows_as_the_broker_maps_it(tmp_path):
    """Index files of different sizes: recover said only so (no option named, and the options
    given did not help); given, the plan is made, and the apply grew the newest file cut short
    to the geometry's size, as the broker's MappedFile maps it (it stopped half way instead)."""
    store = _build(tmp_path / "store", 2000)  # two index files: 4,000 keys and client ids
    assert len(index_file_paths(store / "index")) == 2
    newest = index_file_paths(store / "index")[-1]
    full = newest.stat().st_size
    with open(newest, "r+b") as f:
        f.truncate(full // 2)
    (store / "abort").touch()  # an abnormal start: it dispatches again, into the newest index file
    before = _tree(store)
    bare = _run("recover", store)
    assert bare.exit_code == ExitCode.CORRUPT and "--index-slots and --index-entries" in bare.stderr
    wrong = _run("recover", store, "--index-slots", SLOTS, "--index-entries", ENTRIES + 1)
    assert wrong.exit_code == ExitCode.USAGE and str(full // 2) in wrong.stderr
    given = ("--index-slots", SLOTS, "--index-entries", ENTRIES)
    plan = json.loads(_run("recover", store, *given, "-f", "json").stdout)
    assert plan["loadable"] is True
    assert plan["index_files_cut_short"] == [{"file": str(newest), "size": full // 2, "mapped_size": full}]
    backup = store.parent / "backup"
    applied = _run("recover", store, *given, "--apply", "--backup-dir", backup)
    assert applied.exit_code == 0, applied.output
    assert newest.stat().st_size == full and not (store / ".rmqtool-unfinished").exists()
    assert _run("undo", backup).exit_code == 0 and _tree(store) == before


def test_a_store_whose_only_index_file_was_cut_short_plans_with_the_geometry_given(store):
    """Its size shows no geometry: recover asked for both settings, and refused them when given
    ("cannot hold 777 slots and 3333 entries: give both"); a geometry larger than the file is
    one the file was cut from."""
    (only,) = index_file_paths(store / "index")
    full = only.stat().st_size
    with open(only, "r+b") as f:
        f.truncate(full // 2)
    (store / "abort").touch()
    before = _tree(store)
    bare = _run("recover", store)
    # the header counts more entries than the half holds: damage, and the options that size it (it asked
    # "give both", exit 2, as for an empty file of no geometry's size)
    assert bare.exit_code == ExitCode.CORRUPT and "cut short" in bare.stderr
    assert "--index-slots and --index-entries" in bare.stderr
    given = ("--index-slots", SLOTS, "--index-entries", ENTRIES)
    planned = _run("recover", store, *given, "-f", "json")
    doc = json.loads(planned.stdout)
    assert doc["loadable"] is True and planned.exit_code == ExitCode.CORRUPT
    # the plan says the file is cut short (it said nothing of it)
    assert doc["index_files_cut_short"] == [{"file": str(only), "size": full // 2, "mapped_size": full}]
    smaller = _run("recover", store, "--index-slots", SLOTS, "--index-entries", 100)  # smaller than the file
    assert smaller.exit_code == ExitCode.USAGE
    backup = store.parent / "backup"
    assert _run("recover", store, *given, "--apply", "--backup-dir", backup).exit_code == 0
    assert only.stat().st_size == full
    assert _run("undo", backup).exit_code == 0 and _tree(store) == before


def test_an_index_file_with_entries_whose_size_fits_no_geometry_is_damage_naming_the_settings(tmp_path):
    """A few bytes cut off the only index file, its entries all still inside: no slot and entry
    counts read it, so recover asked for both as for an empty file ("none with entries to
    tell", exit 2); its header counts the entries put in it, so it is damage (exit 3) naming
    the settings, and given, the plan lists the file cut short."""
    store = _build(tmp_path / "store", 300)  # 600 keys and client ids: one index file, part full
    (only,) = index_file_paths(store / "index")
    full = only.stat().st_size
    with open(only, "r+b") as f:
        f.truncate(full - 7)
    bare = _run("recover", store)
    assert bare.exit_code == ExitCode.CORRUPT and "cut short or damaged" in bare.stderr
    assert "--index-slots and --index-entries" in bare.stderr
    doc = json.loads(_run("recover", store, "--index-slots", SLOTS, "--index-entries", ENTRIES, "-f", "json").stdout)
    assert doc["index_files_cut_short"] == [{"file": str(only), "size": full - 7, "mapped_size": full}]



def test_a_queue_whose_first_file_points_only_at_removed_commit_log_files_starts_at_its_first_message(store):
    """Commit log files removed before the broker's consume queue cleanup ran (a disk-full
    emergency): a queue's first file points only below the log's min offset. Its min is the
    first unit at or past it (where the broker's cleanup corrects it, and where a pull skips
    to); it was taken as the max, the queue as empty, and offsets reset --to-earliest would
    have skipped every message left."""
    segments = sorted((store / "commitlog").iterdir())
    for seg in segments[:-1]:  # the last file holds what the queues' second files point at
        seg.unlink()
    rows = [json.loads(line) for line in _run("dump", "commitlog", store, "-f", "jsonl", "--body", "none").stdout.splitlines()]
    first = {}
    for row in rows:
        first.setdefault((row["topic"], row["queue_id"]), row["queue_offset"])
    log_min = int(segments[-1].name)
    behind = [d for _t, _q, d in queue_directories(store / "consumequeue")
              if int.from_bytes(sorted(d.iterdir())[0].read_bytes()[CQ_FILE - 20:CQ_FILE - 12], "big") < log_min]
    assert behind  # the case: a first file wholly below the log's min offset
    info = json.loads(_run("info", store, "-f", "json").stdout)
    assert {(q["topic"], q["queue_id"]): q["min_queue_offset"] for q in info["consume_queues"]} == first
