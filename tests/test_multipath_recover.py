"""recover --apply and append --recover on a commit log over two disks (storePathCommitLog with
two directories, MultiPathMappedFileQueue), found from the store's config/broker.properties:
crash-made torn-middle-normal (a body byte flipped in the fourth of six files; 4.9.8's normal
recovery cuts there) split where tryCreateMappedFile puts each file (file i in sorted path
i mod 2). The plan is the plain store's but for the files' paths; applied, the log ends where
the real 4.9.8 broker's recovery ended it (truth.json), each file truncated or deleted on its
own disk and none moved; undo puts every byte and name back at its path on its disk."""
from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from conftest import FIXTURES, load_truth
from helpers import cli_runner, split_commit_log, tree_fingerprint, writable_copy
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode
from rmqtool.recovery.manifest import read_manifest

TORN = FIXTURES / "crash-made" / "torn-middle-normal"
TRUTH = load_truth(TORN / "truth.json")
V4 = TRUTH["engines"]["4.9.8"]
SIZE = int(TRUTH["sizes"][0])  # the commit log file size the store was written with
SEMANTICS = ("--semantics", "4.9")


def _run(*argv, code=0):
    r = cli_runner().invoke(app, [str(a) for a in argv])
    assert code is None or r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    return r


def _split(base: pathlib.Path) -> tuple[pathlib.Path, list[pathlib.Path]]:
    """A copy of the store with its commit log on disk-a and disk-b by the broker's rule, named by
    config/broker.properties (in the order written, not sorted: the rule sorts them)."""
    store, disks = split_commit_log(TORN / "input" / "store", base, SIZE)
    (store / "config").mkdir()
    (store / "config" / "broker.properties").write_text(f"storePathCommitLog={disks[1]},{disks[0]}\n")
    return store, disks


def _tree(*dirs: pathlib.Path) -> dict:
    """Every file under the directories, by absolute path: its bytes."""
    return {str(p): p.read_bytes() for d in dirs for p in sorted(d.rglob("*")) if p.is_file()}


def _as_plain(doc, store: pathlib.Path, disks, plain: pathlib.Path):
    """A split store's JSON with each disk file's path as the plain store's commitlog/ path."""
    text = json.dumps(doc)
    for disk in disks:
        text = text.replace(f"{disk}/", f"{plain}/commitlog/")
    return json.loads(text.replace(str(store), str(plain)))


def _verify(store: pathlib.Path) -> list[dict]:
    r = _run("verify", store, "-f", "jsonl", "--no-progress", "--jobs", "1", code=None)
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def recovered(tmp_path_factory):
    """The split store planned, applied, planned again, verified, its manifest read, undone; and
    the plain store's plan; each command run once."""
    base = tmp_path_factory.mktemp("multipath-recover")
    plain = writable_copy(TORN / "input" / "store", base / "plain")
    store, disks = _split(base)
    out = {"store": store, "disks": disks, "plain": plain}
    out["plain_plan"] = json.loads(_run("recover", plain, *SEMANTICS, "-f", "json", code=int(ExitCode.CORRUPT)).stdout)
    out["plan"] = json.loads(_run("recover", store, *SEMANTICS, "-f", "json", code=int(ExitCode.CORRUPT)).stdout)
    out["before"] = _tree(store, *disks)
    backup = base / "backup"
    out["applied"] = json.loads(_run("recover", store, *SEMANTICS, "--apply", "--backup-dir", backup,
                                     "-f", "json").stdout)
    out["after"] = _tree(store, *disks)
    out["again"] = json.loads(_run("recover", store, *SEMANTICS, "-f", "json").stdout)
    out["verify"] = _verify(store)
    out["plain_applied"] = json.loads(_run("recover", plain, *SEMANTICS, "--apply", "--backup-dir",
                                           base / "plain-backup", "-f", "json").stdout)
    out["plain_verify"] = _verify(plain)
    out["manifest"] = read_manifest(backup)
    out["undo"] = _run("undo", backup)
    out["undone"] = _tree(store, *disks)
    return out


def test_plan_is_the_plain_stores_but_for_paths(recovered):
    r = recovered
    assert _as_plain(r["plan"], r["store"], r["disks"], r["plain"]) == r["plain_plan"]
    cuts = [a for a in r["plan"]["actions"] if not a["file"].startswith(str(r["store"]))]
    assert {pathlib.Path(a["file"]).parent for a in cuts} == set(r["disks"])  # the log's files on both disks


def test_apply_ends_the_log_where_the_broker_did(recovered):
    r = recovered
    cl = r["again"]["commit_log"]
    assert cl["recovered_end"] == cl["written_end"] == V4["maxPhyOffset"]
    assert {n: [q["min_offset"], q["max_offset"]] for n, q in r["again"]["queues"].items()} == V4["queues"]
    # verify finds what it finds in the plain store recovered the same way (4.9.8's normal
    # recovery leaves the index entries past the cut: the broker's IndexService keeps them)
    assert _as_plain(r["verify"], r["store"], r["disks"], r["plain"]) == r["plain_verify"]
    end = next(f for f in r["verify"] if f["finding"] == "commitLogEnd")
    assert end["path"] == str(r["disks"][V4["maxPhyOffset"] // SIZE % 2] / f"{V4['maxPhyOffset'] // SIZE * SIZE:020d}")
    done, plain_done = r["applied"]["applied"], r["plain_applied"]["applied"]
    assert done["files_deleted"] > 0 and done["bytes_zeroed"] > 0
    assert {k: v for k, v in done.items() if k not in ("backup_dir", "manifest", "store_path")} == {
        k: v for k, v in plain_done.items() if k not in ("backup_dir", "manifest", "store_path")}
    assert _as_plain({k: v for k, v in r["applied"].items() if k != "applied"}, r["store"], r["disks"], r["plain"]) \
        == {k: v for k, v in r["plain_applied"].items() if k != "applied"}


def test_files_stay_on_their_disks(recovered):
    """Truncated or deleted where they were, no file made in STORE/commitlog or moved."""
    r = recovered
    store, disks = r["store"], r["disks"]
    assert not (store / "commitlog").exists()
    last = V4["maxPhyOffset"] // SIZE
    kept = {str(disks[i % 2] / f"{i * SIZE:020d}") for i in range(last + 1)}
    assert {p for p in r["after"] if "/disk-" in p} == kept
    before = {p for p in r["before"] if "/disk-" in p}
    assert kept < before


def test_backup_names_each_file_on_its_disk(recovered):
    m = recovered["manifest"]
    disks = recovered["disks"]
    assert set(m.commit_log_directories) == {str(d.resolve()) for d in disks}
    # the plan's commit log actions, each by its real path on its disk; every other entry relative to the root
    cuts = [(a["kind"], str(pathlib.Path(a["file"]).resolve()), a["start"]) for a in recovered["plan"]["actions"]
            if not a["file"].startswith(str(recovered["store"]))]
    assert [(e.action, e.file, e.start) for e in m.entries if pathlib.Path(e.file).is_absolute()] == cuts
    assert {str(pathlib.Path(f).parent) for _k, f, _s in cuts} == {str(d.resolve()) for d in disks}
    assert {f for f in m.listing if f.startswith("/")} == {str(pathlib.Path(p).resolve())
                                                           for p in recovered["before"] if "/disk-" in p}


def test_undo_gives_back_every_file_at_its_path(recovered):
    assert recovered["undone"] == recovered["before"]


def test_undo_refuses_when_a_disk_is_gone(recovered, tmp_path):
    """A manifest naming a disk that is not there: refused before anything is written."""
    backup = tmp_path / "backup"
    store, disks = _split(tmp_path)
    _run("recover", store, *SEMANTICS, "--apply", "--backup-dir", backup)
    after = _tree(store)
    shutil.move(disks[1].parent, tmp_path / "unmounted")
    r = _run("undo", backup, code=int(ExitCode.OPERATIONAL))
    assert len(r.stderr.strip().splitlines()) == 1 and str(disks[1].resolve()) in r.stderr
    assert _tree(store) == after


def test_undo_goes_on_over_a_path_the_repair_wrote_nothing_in(tmp_path):
    """A commit log path that does not exist (the log moved away): the repair deletes the queues
    in the root and nothing on that path, so undo need not find it: every file back, exit 0."""
    store = writable_copy(TORN / "input" / "store", tmp_path / "store")
    shutil.move(store / "commitlog", tmp_path / "moved")
    before = tree_fingerprint(store)
    backup, gone, conf = tmp_path / "backup", tmp_path / "no-such-disk", tmp_path / "broker.conf"
    conf.write_text(f"storePathCommitLog={gone}\nmappedFileSizeCommitLog={SIZE}\nmappedFileSizeConsumeQueue="
                    f"{TRUTH['sizes'][1]}\nmaxHashSlotNum={TRUTH['sizes'][2]}\nmaxIndexNum={TRUTH['sizes'][3]}\n")
    applied = json.loads(_run("recover", store, *SEMANTICS, "--broker-config", conf, "--apply", "--backup-dir",
                              backup, "-f", "json").stdout)["applied"]
    assert applied["files_deleted"] > 0 and tree_fingerprint(store) != before
    assert read_manifest(backup).commit_log_directories == (str(gone),)
    _run("undo", backup)
    assert tree_fingerprint(store) == before and not gone.exists()


@pytest.mark.parametrize("disk", [0, 1])
def test_a_backup_directory_on_a_commit_log_disk_is_refused(tmp_path, disk):
    """A --backup-dir inside a commit log directory the broker loads elsewhere: the repair went
    on (only the root was compared), and left a directory among the files the broker's load
    takes for segments (it refuses a file of another size). Refused (exit 2), nothing written."""
    store, disks = _split(tmp_path)
    before = _tree(store, *disks)
    r = _run("recover", store, *SEMANTICS, "--apply", "--backup-dir", disks[disk] / "bk", code=int(ExitCode.USAGE))
    assert "backup directory is inside the store" in r.stderr and str(disks[disk]) in r.stderr, r.stderr
    assert _tree(store, *disks) == before and not (disks[disk] / "bk").exists()


def test_recover_to_a_copy_is_refused(tmp_path):
    """--to copies the root, not the disks: refused after the plan, nothing written."""
    store, disks = _split(tmp_path)
    before = _tree(store, *disks)
    r = _run("recover", store, *SEMANTICS, "--apply", "--to", tmp_path / "copy", "-f", "json",
             code=int(ExitCode.USAGE))
    assert "--to" in r.stderr and str(disks[1]) in r.stderr
    assert _tree(store, *disks) == before and not (tmp_path / "copy").exists()


def test_append_recover(tmp_path):
    """append --recover: recovered as recover --apply does, then the message appended at the end
    the broker reached, in that file's disk; undo refuses (the append came after)."""
    store, disks = _split(tmp_path)
    r = _run("append", store, "--recover", *SEMANTICS, "--topic", "CrashTopic", "--body", "x")
    row = json.loads(r.stdout)
    assert row["commit_log_offset"] == V4["maxPhyOffset"]
    (backup,) = tmp_path.glob("store.recovery-*")
    m = read_manifest(backup)
    assert set(m.commit_log_directories) == {str(d.resolve()) for d in disks}
    last = V4["maxPhyOffset"] // SIZE
    assert sorted(p.name for d in disks for p in d.iterdir()) == [f"{i * SIZE:020d}" for i in range(last + 1)]
    assert all(int(p.name) // SIZE % 2 == i for i, d in enumerate(disks) for p in d.iterdir())
    written = _tree(store, *disks)
    u = _run("undo", backup, code=int(ExitCode.LOCKED))
    assert "not undone" in u.stderr and _tree(store, *disks) == written


def test_a_file_on_both_disks_is_refused(tmp_path):
    """The same file name in both paths: the broker cuts both copies in its HashSet's order,
    rmqtool reads one: refused (exit 3) in one line naming the copy, nothing written."""
    store, disks = _split(tmp_path)
    name = f"{(V4['maxPhyOffset'] // SIZE + 1) * SIZE:020d}"  # a file after the cut, on disk-a by the rule
    shutil.copyfile(disks[0] / name, disks[1] / name)
    before = _tree(store, *disks)
    r = _run("recover", store, *SEMANTICS, "--apply", "--backup-dir", tmp_path / "backup", code=int(ExitCode.CORRUPT))
    assert len(r.stderr.strip().splitlines()) == 1 and str(disks[1] / name) in r.stderr
    assert _tree(store, *disks) == before and not (tmp_path / "backup").exists()


def test_killed_after_cutting_both_disks_is_undone(recovered, tmp_path):
    """Killed once the commit log's files on both disks are cut (the abort marker, then the
    zeroed tail and the deleted files), before the queues: undo puts every file back on its disk."""
    import os
    import subprocess
    import sys
    store, disks = _split(tmp_path)
    before = _tree(store, *disks)
    on_disks = [i for i, a in enumerate(recovered["plan"]["actions"]) if "/disk-" in a["file"]]
    cuts = 1 + on_disks[-1] + 1  # the abort marker, then the plan's actions up to its last on a disk
    env = dict(os.environ, RMQTOOL_KILL_AFTER=str(cuts + 1), PYTHONPATH=str(pathlib.Path(__file__).parents[1]))
    k = subprocess.run([sys.executable, "-m", "rmqtool", "recover", str(store), *SEMANTICS, "--apply", "--backup-dir",
                        str(tmp_path / "backup")], env=env, capture_output=True, text=True, timeout=120)
    assert k.returncode == -9, k.stderr
    assert len([p for d in disks for p in d.iterdir()]) == V4["maxPhyOffset"] // SIZE + 1  # both disks cut
    _run("undo", tmp_path / "backup")
    assert _tree(store, *disks) == before


def test_the_finish_of_a_repair_given_commitlog_paths_names_them(recovered, tmp_path):
    """A split store whose disks only --commitlog-path names, its repair killed: the command
    that finishes it names the disks too (without them it would plan ROOT/commitlog, which is
    not there), and running it finishes the repair."""
    import os
    import shlex
    import subprocess
    import sys

    from rmqtool.store.unfinished import read_unfinished

    store, disks = split_commit_log(TORN / "input" / "store", tmp_path, SIZE)
    paths = ",".join(str(d) for d in (disks[1], disks[0]))
    env = dict(os.environ, RMQTOOL_KILL_AFTER="2", PYTHONPATH=str(pathlib.Path(__file__).parents[1]))
    k = subprocess.run([sys.executable, "-m", "rmqtool", "recover", str(store), *SEMANTICS, "--commitlog-path", paths,
                        "--apply", "--backup-dir", str(tmp_path / "backup")], env=env, capture_output=True, text=True,
                       timeout=120)
    assert k.returncode == -9, k.stderr
    finish = shlex.split(read_unfinished(store).finish)
    assert finish[finish.index("--commitlog-path") + 1] == paths
    _run(*finish[1:])
    assert read_unfinished(store) is None
    again = json.loads(_run("recover", store, *SEMANTICS, "--commitlog-path", paths, "-f", "json").stdout)
    assert again["actions"] == []
