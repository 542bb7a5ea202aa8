"""A commit log over several directories (storePathCommitLog=/disk-a/commitlog,/disk-b/commitlog,
MultiPathMappedFileQueue): fixtures/rocketmq-4.9.8/basic's twelve files, as the real 4.9.8
broker wrote them, split over two disks where tryCreateMappedFile puts each (file i in the
sorted paths' i mod 2, no disk full), read by every command as the one log the broker loads,
and checked against truth.json; the damage only several directories can have found at its file;
the writers that would write the wrong place refuse."""
from __future__ import annotations

import json
import os
import pathlib
import shutil

import pytest

from conftest import V4, V5, load_truth
from helpers import cli_runner, copy_tree, split_commit_log, writable_copy
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode
from rmqtool.findings import (COMMIT_LOG_FILE_DUPLICATED, COMMIT_LOG_FILE_MISPLACED, COMMIT_LOG_FILES_NOT_LOADED,
                              COMMIT_LOG_PATH_MISSING, SEGMENT_GAP)
from rmqtool.store.broker_conf import FIVE_X, BrokerConfig
from rmqtool.store.commitlog_paths import (CommitLogPaths, from_broker_config, from_option, java_sorted,
                                           list_commit_log, split_paths)

BASIC = V4 / "basic"
TRUTH = load_truth(BASIC / "truth.json")
SIZE = TRUTH["messageStoreConfig"]["effectiveGetterValues"]["mappedFileSizeCommitLog"]
MESSAGES = TRUTH["truth"]["messages"]


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    """(store root, [disk-a, disk-b], broker.conf): the commit log moved out of the root."""
    base = tmp_path_factory.mktemp("multipath")
    store, disks = split_commit_log(BASIC / "store", base, SIZE)
    conf = base / "broker.conf"
    conf.write_text(f"storePathRootDir={store}\nstorePathCommitLog={disks[1]},{disks[0]}\n")
    return store, disks, conf


def _run(*argv, code=0):
    r = cli_runner().invoke(app, [str(a) for a in argv])
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    return r


def _jsonl(r) -> list[dict]:
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def _where(disks) -> list[str]:
    return ["--commitlog-path", f"{disks[0]},{disks[1]}"]


def test_the_rule_puts_file_i_in_sorted_path_i_mod_n():
    """tryCreateMappedFile: the writable paths less the read-only ones, sorted as Java sorts
    Strings, indexed by offset / mappedFileSize; the order written does not matter."""
    paths = CommitLogPaths(("/d/b", "/d/a", "/d/c"), readonly=("/d/c",))
    assert paths.creating == ["/d/a", "/d/b"]
    assert [paths.rule_directory(i * SIZE, SIZE) for i in range(4)] == ["/d/a", "/d/b", "/d/a", "/d/b"]
    assert paths.directories == ["/d/b", "/d/a", "/d/c"]  # load reads the read-only ones too
    assert CommitLogPaths(("/r",), ("/r",)).rule_directory(0, SIZE) is None  # nothing writable: the broker cannot create
    assert java_sorted(["\uffff", "\U0001f600"]) == ["\U0001f600", "\uffff"]  # UTF-16 order, not code points
    # String.trim then split(","): trailing empty pieces dropped, the pieces themselves not trimmed
    assert split_paths("  /a,/b,, \n") == ("/a", "/b")
    assert split_paths("/a, /b") == ("/a", " /b")
    assert split_paths("   ") == ()


def test_broker_config_settings(tmp_path):
    """storePathCommitLog without the splitter is one directory and the read-only paths are never
    read (CommitLog takes a plain MappedFileQueue); unset or ROOT/commitlog is the plain store."""
    root = tmp_path / "store"

    def paths(**settings):
        return from_broker_config(BrokerConfig("bc", settings), root, FIVE_X)

    multi = paths(storePathCommitLog="/a,/b", readOnlyCommitLogStorePaths="/c")
    assert (multi.multi, multi.directories, multi.source) == (True, ["/a", "/b", "/c"], "bc: storePathCommitLog")
    single = paths(storePathCommitLog="/a", readOnlyCommitLogStorePaths="/c")
    assert (single.multi, single.directories, single.ignored_readonly) == (False, ["/a"], ["/c"])
    assert paths() is None
    (root / "commitlog").mkdir(parents=True)  # a copy with its own commitlog/: read there, not at the config's one path
    assert paths(storePathCommitLog="/a") is None
    assert paths(storePathCommitLog="/a,/b").directories == ["/a", "/b"]
    assert from_option(["/a", "/b,/c"]).directories == ["/a", "/b", "/c"] and from_option([]) is None


def _moved_log(src: pathlib.Path, base: pathlib.Path, directory: str) -> tuple[pathlib.Path, pathlib.Path]:
    """A copy of the store ``src`` at base/store whose commitlog/ is base/``directory``."""
    store = writable_copy(src, base / "store")
    shutil.move(store / "commitlog", base / directory)
    return store, base / directory


def _read_at(store, conf, *options) -> dict:
    return json.loads(_run("info", store, "--broker-config", conf, *options, "-f", "json").stdout)["commitlog"]


def test_a_blank_after_storePathCommitLog_is_read_as_the_stores_broker_reads_it(tmp_path):
    """5.3.3's properties2Object trims a String setting (``property.trim()``), 4.9.8's hands it
    on as written: ``storePathCommitLog=DIR `` is DIR to a 5.x broker and ``DIR `` to a 4.9 one.
    The store says which (abort.bak: 5.x; an empty abort file and no abort.bak: 4.9); one that
    does not is read where the directory is; the path's source says how it was read."""
    v5_truth = load_truth(V5 / "v2-and-crc" / "truth.json")
    sizes = {k: v5_truth["messageStoreConfig"]["effectiveGetterValues"][k] for k in (
        "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum")}
    store, log = _moved_log(V5 / "v2-and-crc" / "store", tmp_path / "v5", "cl")
    conf = tmp_path / "v5.conf"
    conf.write_text(f"storePathCommitLog={log} \n" + "".join(f"{k}={v}\n" for k, v in sizes.items()))
    cl = _read_at(store, conf)
    assert cl["segment_count"] == 3 and cl["max_commit_log_offset"] == v5_truth["truth"]["commitlog"]["maxPhyOffset"]
    assert "trimmed as 5.x" in cl["commit_log_paths"][0]["source"] and "abort.bak" in cl["commit_log_paths"][0]["source"]
    plan = json.loads(_run("recover", store, "--broker-config", conf, "-f", "json").stdout)
    assert plan["actions"] == [] and plan["files_deleted"] == []  # every queue kept, as the 5.3.3 broker keeps them

    e1 = V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file" / "input" / "store"
    store, log = _moved_log(e1, tmp_path / "v4", "cl ")  # 4.9.8 looks in the directory named with the blank
    conf = tmp_path / "v4.conf"
    conf.write_text(f"storePathCommitLog={log}\n")
    cl = _read_at(store, conf)
    assert cl["segment_count"] == len(list(log.iterdir())) > 0
    assert "untrimmed as 4.9" in cl["commit_log_paths"][0]["source"]
    plan = json.loads(_run("recover", store, "--broker-config", conf, "--semantics", "5.3", "-f", "json",
                           code=int(ExitCode.CORRUPT)).stdout)  # told 5.3: trimmed, a path that is not there
    assert plan["commit_log"]["written_end"] == 0 and plan["files_deleted"], plan["commit_log"]

    store, log = _moved_log(BASIC / "store", tmp_path / "unknown", "cl ")  # no mark of either version
    conf = tmp_path / "unknown.conf"
    conf.write_text(f"storePathCommitLog={log}\n")
    cl = _read_at(store, conf)
    source = cl["commit_log_paths"][0]["source"]
    assert cl["segment_count"] == len(list(log.iterdir())) > 0
    assert "does not say which broker version" in source and "untrimmed as 4.9" in source and "is a directory" in source


def test_info_lists_each_path_and_its_files(split):
    store, disks, _conf = split
    doc = json.loads(_run("info", store, *_where(disks), "-f", "json").stdout)
    cl = doc["commitlog"]
    truth = TRUTH["truth"]["commitlog"]
    assert cl["max_commit_log_offset"] == truth["maxPhyOffset"] and cl["min_commit_log_offset"] == truth["minPhyOffset"]
    assert [s["base_offset"] for s in cl["segments"]] == [i * SIZE for i in range(12)]
    assert all(s["directory"] == str(disks[s["base_offset"] // SIZE % 2]) for s in cl["segments"])
    rows = cl["commit_log_paths"]
    assert [(r["path"], r["role"], r["exists"], r["files"]) for r in rows] == [
        (str(disks[0]), "writable", True, 6), (str(disks[1]), "writable", True, 6)]
    assert (rows[0]["first_file"], rows[1]["last_file"]) == (f"{0:020d}", f"{11 * SIZE:020d}")


def test_every_reader_reads_the_one_log(split):
    """dump commitlog, verify, query (msgId, key, offset) and redispatch's plan across the two
    disks, through the broker config: the plain store's answers, and truth's."""
    store, disks, conf = split
    given = ["--broker-config", conf]
    rows = _jsonl(_run("dump", "commitlog", store, *given, "-f", "jsonl", "--body", "none", "--jobs", "1"))
    assert [(r["commit_log_offset"], r["msg_id"], r["topic"]) for r in rows if r["record"] == "message"] == [
        (m["physicalOffset"], m["msgId"], m["topic"]) for m in MESSAGES]
    assert {pathlib.Path(r["file"]).parent for r in rows} == set(disks)
    found = _jsonl(_run("verify", store, *given, "-f", "jsonl", "--no-progress", "--jobs", "1"))
    assert {f["severity"] for f in found} == {"info"}  # clean, as the broker left it
    end = next(f for f in found if f["finding"] == "commitLogEnd")
    assert (end["path"], end["offset"]) == (str(disks[1] / f"{11 * SIZE:020d}"),
                                            TRUTH["truth"]["commitlog"]["maxPhyOffset"] - 11 * SIZE)
    last_file_message = next(m for m in MESSAGES if m["physicalOffset"] >= 11 * SIZE and m["keys"])  # on disk-b
    for how in (["--msg-id", last_file_message["msgId"]], ["--key", last_file_message["keys"]],
                ["--offset", last_file_message["physicalOffset"]]):
        hits = _jsonl(_run("query", store, *given, *how, "-f", "jsonl"))
        assert [h["commit_log_offset"] for h in hits] == [last_file_message["physicalOffset"]], how
    plan = json.loads(_run("redispatch", store, *given, "-f", "json").stdout)  # dispatch from the two disks
    assert (plan["to_offset"], plan["records_dispatched"]) == (TRUTH["truth"]["commitlog"]["maxPhyOffset"], len(MESSAGES))
    assert {c["kind"] for c in plan["changes"]} == {"same"}  # the queues and index the broker built, again


def test_writers_refuse_and_write_nothing(split, tmp_path):
    """recover --apply --to copies the root, not the disks: with the log elsewhere it refuses
    (usage, exit 2) in one line naming the paths, and no file changes (recover in place and
    append write where the broker would: tests/test_multipath_recover.py,
    tests/test_multipath_diff_spark.py)."""
    store, disks, _conf = split
    before = {p: p.stat().st_mtime_ns for d in (store, *disks) for p in d.rglob("*")}
    r = _run("recover", store, *_where(disks), "--apply", "--to", tmp_path / "copy", "-f", "json",
             code=int(ExitCode.USAGE))
    assert "not recovered" in r.stderr and str(disks[1]) in r.stderr
    assert {p: p.stat().st_mtime_ns for d in (store, *disks) for p in d.rglob("*")} == before
    _run("info", store, BASIC / "store", *_where(disks), code=int(ExitCode.USAGE))  # whose commit log? refused


def test_damage_found_at_its_file(split, tmp_path):
    """On a copy: a file missing from its disk (a gap naming the disk it belongs in), a file in
    the other disk, the same name in both, a path that does not exist, ROOT/commitlog left out."""
    store, disks, _ = split
    copy = [tmp_path / f"disk-{c}" / "commitlog" for c in "ab"]
    for src, dst in zip(disks, copy):
        copy_tree(src, dst)
    (copy[1] / f"{3 * SIZE:020d}").unlink()  # disk-b's file 3 lost
    shutil.move(copy[1] / f"{5 * SIZE:020d}", copy[0] / f"{5 * SIZE:020d}")  # file 5 on the wrong disk
    shutil.copyfile(copy[0] / f"{4 * SIZE:020d}", copy[1] / f"{4 * SIZE:020d}")  # file 4 on both
    root = tmp_path / "root"
    (root / "commitlog").mkdir(parents=True)
    (root / "commitlog" / f"{0:020d}").write_bytes(b"")
    listing = list_commit_log(from_option([f"{copy[1]},{copy[0]}"], [str(tmp_path / "gone")]), root)
    by_id = {}
    for f in listing.findings:
        by_id.setdefault(f.id, []).append(f)
    assert [(f.path, f.message.split(" missing")[0]) for f in by_id[SEGMENT_GAP]] == [
        (str(copy[0] / f"{4 * SIZE:020d}"), f"{3 * SIZE:020d} (it belongs in {copy[1]})")]
    assert [f.path for f in by_id[COMMIT_LOG_FILE_MISPLACED]] == [str(copy[0] / f"{5 * SIZE:020d}")]
    assert [f.path for f in by_id[COMMIT_LOG_FILE_DUPLICATED]] == [str(copy[1] / f"{4 * SIZE:020d}")]
    assert "the same bytes" in by_id[COMMIT_LOG_FILE_DUPLICATED][0].message
    assert [f.path for f in by_id[COMMIT_LOG_PATH_MISSING]] == [str(tmp_path / "gone")]
    assert [f.path for f in by_id[COMMIT_LOG_FILES_NOT_LOADED]] == [str(root / "commitlog")]
    # one segment an offset, the duplicate's copy in the rule's disk kept
    assert [s.base_offset for s in listing.segments] == [i * SIZE for i in range(12) if i != 3]
    assert next(s for s in listing.segments if s.base_offset == 4 * SIZE).path.parent == copy[0]
    assert os.path.isdir(copy[1])


def test_redispatch_apply_rebuilds_a_queue_from_both_disks(split, tmp_path):
    """redispatch writes consume queues and index under the root only, so it runs on a
    multi-path store: a lost queue file is built again from the records on both disks, byte for
    byte the broker's (the fixture's file)."""
    store, _disks, conf = split
    queue = sorted((store / "consumequeue").iterdir())[0] / "0"
    lost = sorted(queue.iterdir())[-1]
    lost.unlink()
    _run("redispatch", store, "--broker-config", conf, "--apply", "--semantics", "4.9", "--backup-dir", tmp_path / "bk")
    assert lost.read_bytes() == (BASIC / "store" / lost.relative_to(store)).read_bytes()


def test_a_5x_store_over_three_disks(tmp_path):
    """5.3.3's V2 records with __CRC32# (fixtures/rocketmq-5.3.3/v2-and-crc, three files) one
    file a disk, the paths written in reverse: the same log, every record's CRCs checked."""
    v5 = V5 / "v2-and-crc"
    truth = load_truth(v5 / "truth.json")
    size = truth["messageStoreConfig"]["effectiveGetterValues"]["mappedFileSizeCommitLog"]
    store = writable_copy(v5 / "store", tmp_path / "store")
    disks = [tmp_path / f"d{i}" for i in range(3)]
    for f in sorted((store / "commitlog").iterdir()):
        disks[int(f.name) // size % 3].mkdir()
        shutil.move(f, disks[int(f.name) // size % 3] / f.name)
    given = ["--commitlog-path", ",".join(str(d) for d in reversed(disks))]
    rows = _jsonl(_run("dump", "commitlog", store, *given, "-f", "jsonl", "--body", "none", "--jobs", "1"))
    messages = [r for r in rows if r["record"] == "message"]
    assert [(r["commit_log_offset"], r["msg_id"], r["magic_code"]) for r in messages] == [
        (m["physicalOffset"], m["msgId"], m["magicCodeHex"]) for m in truth["truth"]["messages"]]
    found = _jsonl(_run("verify", store, *given, "-f", "jsonl", "--no-progress", "--jobs", "1"))
    assert {f["severity"] for f in found} == {"info"}
    assert not any(f["finding"] == "commitLogFileMisplaced" for f in found)


def test_found_without_flags_from_the_stores_broker_properties(split):
    """A broker started without -c persists its config to ~/store/config/broker.properties (the
    default root's config/): a root without commitlog/ whose file names the disks is read across
    them with no option; without the file, the missing commitlog/ says how to point at them."""
    store, disks, _conf = split
    r = _run("info", store, code=int(ExitCode.OPERATIONAL))
    assert "--commitlog-path" in r.stderr and "--broker-config" in r.stderr
    props = store / "config" / "broker.properties"
    made = not props.parent.exists()
    props.parent.mkdir(exist_ok=True)
    props.write_text(f"storePathCommitLog={disks[0]},{disks[1]}\n")
    try:
        doc = json.loads(_run("info", store, "-f", "json").stdout)
        assert doc["commitlog"]["max_commit_log_offset"] == TRUTH["truth"]["commitlog"]["maxPhyOffset"]
        assert {p["source"] for p in doc["commitlog"]["commit_log_paths"]} == {f"{props}: storePathCommitLog"}
        applied = json.loads(_run("recover", store, "--apply", "-f", "json").stdout)  # across the disks:
        assert applied["applied"]["backup_dir"] is None  # as the broker left it, nothing to change
    finally:
        props.unlink()
        if made:
            props.parent.rmdir()


def test_a_root_without_its_commit_log_is_no_store_to_repair_or_diff(split, tmp_path):
    """The disks not named (no option, no broker.properties) or a commitlog link to a disk not
    mounted: recover says how to point at them (exit 8) and writes nothing, where it planned,
    and applied, the start of a store with no commit log: every consume queue deleted, nothing
    said lost. diff says so for its side, where it called every message missing from it."""
    import hashlib
    store, disks, _conf = split
    tree = {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(store.rglob("*")) if p.is_file()}
    for args in (("recover", store), ("recover", store, "--apply", "--backup-dir", tmp_path / "bk")):
        r = _run(*args, code=int(ExitCode.OPERATIONAL))
        assert "--commitlog-path" in r.stderr and "--broker-config" in r.stderr and not r.stdout
    assert {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(store.rglob("*")) if p.is_file()} \
        == tree and not (tmp_path / "bk").exists()
    r = _run("diff", BASIC / "store", store, code=int(ExitCode.OPERATIONAL))
    assert "--commitlog-path-b" in r.stderr and "message_only_in" not in r.stdout
    _run("diff", BASIC / "store", store, *["--commitlog-path-b", f"{disks[0]},{disks[1]}"])
    unmounted = writable_copy(BASIC / "store", tmp_path / "linked")
    shutil.rmtree(unmounted / "commitlog")
    (unmounted / "commitlog").symlink_to(tmp_path / "not-mounted" / "commitlog")
    _run("recover", unmounted, code=int(ExitCode.OPERATIONAL))


def test_load_takes_every_path_sorted_by_name(tmp_path):
    """MultiPathMappedFileQueue.load hands doLoad the files of every path, sorted by name alone:
    a file of the wrong size on either disk stops the load there, and 5.3.3 deletes an empty
    file only when it sorts last of all the paths' files."""
    from rmqtool.recovery.commitlog_walk import V5
    from rmqtool.recovery.outcome import load_refusal

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    for i, d in enumerate((a, b, a)):
        with open(d / f"{i * SIZE:020d}", "wb") as f:
            f.truncate(SIZE)
    assert load_refusal([a, b], SIZE, V5) == (None, None, [])
    (b / f"{3 * SIZE:020d}").touch()  # empty and last: deleted
    assert load_refusal([a, b], SIZE, V5) == (None, None, [b / f"{3 * SIZE:020d}"])
    with open(b / f"{SIZE:020d}", "r+b") as f:
        f.truncate(SIZE - 1)
    refusal, refused, _ = load_refusal([a, b], SIZE, V5)
    assert refusal.startswith(f"{b / f'{SIZE:020d}'}: {SIZE - 1} bytes") and refused == b / f"{SIZE:020d}"
