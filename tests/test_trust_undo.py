"""Issue 20, items 3, 4, 14, 15, 16: undo refuses a store written since the repair and
otherwise gives back the whole tree; an empty plan writes nothing; redispatch settles in one
run; an interrupted repair is said, finished by running it again, or undone."""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, REPO, V4, V5, load_truth
from helpers import aged_files, copy_tree, expand_store, file_mtimes, tree_fingerprint, writable_copy
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode, StoreChangedSince
from rmqtool.recovery.manifest import read_manifest
from rmqtool.store.paths import UNFINISHED_FILE

CRASH = V4 / "crash"
E1 = CRASH / "e1-corrupt-body-in-last-commitlog-file" / "input" / "store"
B3 = CRASH / "b3-zeroed-last-3-messages" / "input" / "store"
runner = CliRunner()


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def tree(root: pathlib.Path) -> dict:
    """The whole tree: every directory and file by name, a file's bytes by sha256."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


def _append(root, body: str):
    r = _run("append", root, "--topic", "CrashTopic", "--body", body, "--keys", body)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# --- item 3: undo refuses a store written after the repair ------------------------------------

def test_undo_after_recover_and_three_appends_is_refused_and_changes_nothing(tmp_path):
    root = writable_copy(E1, tmp_path / "store")
    before = tree(root)
    backup = tmp_path / "backup"
    r = _run("recover", root, "--apply", "--backup-dir", backup)
    assert r.exit_code == 0, r.output
    rows = [_append(root, f"after-{i}") for i in range(3)]
    appended = tree(root)
    u = _run("undo", backup)
    assert u.exit_code == ExitCode.LOCKED == 5, u.output
    left = read_manifest(backup).after  # the message names the first file that changed since
    changed = [n for n in sorted(left["files"]) if appended.get(n) != left["files"][n][1]]
    assert changed and f"not undone: {changed[0]} " in u.stderr, u.stderr
    assert tree(root) == appended  # exactly as the appends left it
    f = _run("undo", backup, "--force")
    assert f.exit_code == 0, f.output
    assert tree(root) == before  # forced: the appended messages go, the store is as before the apply
    assert rows[0]["commit_log_offset"] == json.loads(_run("recover", root, "-f", "json").stdout)[
        "commit_log"]["max_offset_after"]  # the first append went where the recovery cut the log


def test_undo_right_after_recover_gives_back_the_whole_tree(tmp_path):
    root = writable_copy(E1, tmp_path / "store")
    before = tree(root)
    backup = tmp_path / "backup"
    assert _run("recover", root, "--apply", "--backup-dir", backup).exit_code == 0
    assert read_manifest(backup).after is not None  # the state the apply left
    u = _run("undo", backup)
    assert u.exit_code == 0, u.output
    assert tree(root) == before


def test_undo_after_append_recover_is_refused(tmp_path):
    """append --recover: the recovery's state is recorded before the first message is appended."""
    root = writable_copy(E1, tmp_path / "store")
    r = _run("append", root, "--recover", "--topic", "CrashTopic", "--body", "x")
    assert r.exit_code == 0, r.output
    (backup,) = tmp_path.glob("store.recovery-*")
    written = tree(root)
    u = _run("undo", backup)
    assert u.exit_code == 5 and "not undone" in u.stderr, u.output
    assert tree(root) == written
    assert _run("undo", backup, "--force").exit_code == 0


# --- item 4: undo gives back exactly the listing and bytes before the apply -------------------

@pytest.mark.parametrize("variant", ["e1-corrupt-body-in-last-commitlog-file", "b3-zeroed-last-3-messages",
                                     "c2-delete-last-cq-file", "d-remove-index-dir"])
def test_undo_of_a_crash_without_abort_gives_back_the_whole_tree(variant, tmp_path):
    """The abort file removed: undo must not make one (the broker's next start would then
    recover abnormally and destroy index files). Every path and byte, not only the manifest's."""
    root = writable_copy(CRASH / variant / "input" / "store", tmp_path / "store")
    (root / "abort").unlink()
    before = tree(root)
    backup = tmp_path / "backup"
    # the broker's index geometry: d-remove-index-dir has no index file left to show it
    config = load_truth(CRASH / variant / "truth.json")["messageStoreConfig"]["effectiveGetterValues"]
    aged = aged_files(root)
    r = _run("recover", root, "--apply", "--from-checkpoint", "--backup-dir", backup,
             "--index-slots", config["maxHashSlotNum"], "--index-entries", config["maxIndexNum"])
    assert r.exit_code == 0, r.output
    changed = {e.file for e in read_manifest(backup).entries}
    assert changed and any(file_mtimes(root).get(n) != aged[n] for n in changed)  # the repair wrote them
    u = _run("undo", backup)
    assert u.exit_code == 0, u.output
    assert not (root / "abort").exists()
    assert tree(root) == before
    # the broker ages commit log files out by their mtime; the lock's is the writer's, which
    # marks it as a broker's start does
    assert file_mtimes(root) == {n: t if n != "lock" else file_mtimes(root)[n] for n, t in aged.items()}



def test_a_repair_warms_no_page_ahead_an_append_does(tmp_path, monkeypatch):
    """The warmer populates the zeros after the last file's write position (dirtying pages of a
    file the repair did not back up, and bumping its mtime, which undo could not give back): a
    repair's open appends nothing and starts none; an open for appending does."""
    from rmqtool.engine import store as engine_store
    started = []
    monkeypatch.setattr(engine_store.WarmAheadService, "start", lambda self: started.append(self))
    root = writable_copy(E1, tmp_path / "store")
    r = _run("recover", root, "--apply", "--backup-dir", tmp_path / "b")
    assert r.exit_code == 0 and (tmp_path / "b").is_dir(), r.output
    assert started == []
    engine_store.Store.open(root, writable=True).close()
    assert len(started) == 1


def test_the_undo_command_an_apply_prints_runs_as_printed(tmp_path):
    """A store path with spaces: the printed undo command was not quoted for a shell."""
    import shlex
    root = writable_copy(E1, tmp_path / "a store")
    before = tree(root)
    r = _run("recover", root, "--apply", "--no-progress")
    assert r.exit_code == 0, r.output
    text = ""  # as wrapped for the terminal, joined again: a break after a "/" took no space
    for line in r.stdout.splitlines():
        text += ("" if not text or text.endswith("/") else " ") + line.strip()
    (backup,) = tmp_path.glob("a store.recovery-*")
    assert f"rmqtool undo {shlex.quote(str(backup))} puts it back" in text, text
    assert _run(*shlex.split(text.split("(rmqtool ")[-1].split(" puts it back")[0])).exit_code == 0
    assert tree(root) == before


# --- item 15: an empty plan changes nothing; undo keeps directories that were there -----------

BASIC = V4 / "basic" / "store"


def test_recover_apply_with_nothing_planned_changes_nothing(tmp_path):
    """A clean store with a segment made ahead (all zeros, as AllocateMappedFileService leaves
    one): nothing is planned, so nothing is written: not the segment, not the checkpoint."""
    root = writable_copy(BASIC, tmp_path / "store")
    segments = sorted((root / "commitlog").iterdir())
    size = segments[-1].stat().st_size
    ahead = root / "commitlog" / f"{int(segments[-1].name) + size:020d}"
    with open(ahead, "wb") as f:
        f.truncate(size)
    plan = _run("recover", root, "-f", "json")
    assert plan.exit_code == 0 and json.loads(plan.stdout)["needs_recovery"] is False, plan.output
    before = tree(root)
    r = _run("recover", root, "--apply", "-f", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["applied"]["backup_dir"] is None
    assert tree(root) == before
    assert not list(tmp_path.glob("store.recovery-*"))


def test_undo_of_a_redispatch_keeps_a_directory_that_was_there_empty(tmp_path):
    root = writable_copy(BASIC, tmp_path / "store")
    queue = next(d for d in sorted((root / "consumequeue").glob("*/*")) if d.is_dir())
    for f in queue.iterdir():
        f.unlink()
    before = tree(root)
    r = _run("redispatch", root, "--cq", "--apply", "--backup-dir", tmp_path / "b")
    assert r.exit_code == 0, r.output
    assert any(queue.iterdir())
    u = _run("undo", tmp_path / "b")
    assert u.exit_code == 0, u.output
    assert queue.is_dir() and tree(root) == before


# --- item 16: redispatch --index settles in one run -------------------------------------------

def test_redispatch_index_settles_in_one_run(tmp_path):
    """The earliest index file zeroed: the rebuilt one takes its name (the order of names is
    what IndexService.load goes by), so a second run finds every file as built."""
    root = writable_copy(BASIC, tmp_path / "store")
    first = sorted((root / "index").iterdir())[0]
    with open(first, "r+b") as f:
        f.write(bytes(first.stat().st_size))
    aged = aged_files(root)
    r = _run("redispatch", root, "--index", "--apply", "--backup-dir", tmp_path / "b1", "-f", "json")
    assert r.exit_code == 0, r.output
    settled = tree(root)
    again = _run("redispatch", root, "--index", "-f", "json")
    assert again.exit_code == 0, again.output
    assert {c["kind"] for c in json.loads(again.stdout)["changes"]} == {"same"}
    assert _run("redispatch", root, "--index", "--apply", "--backup-dir", tmp_path / "b2").exit_code == 0
    assert tree(root) == settled
    assert not (tmp_path / "b2").exists()  # nothing to change: no backup
    assert _run("undo", tmp_path / "b1").exit_code == 0  # undone, the index files get their mtimes back
    assert file_mtimes(root) == aged


# --- item 14: kill -9 at a few points of a repair or an undo ------------------------------------

def _killed(*args, after: int) -> subprocess.CompletedProcess:
    """Run rmqtool in a process that SIGKILLs itself at its ``after``-th change step."""
    env = dict(os.environ, RMQTOOL_KILL_AFTER=str(after), PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "rmqtool", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=120)


def _says_unfinished(root: pathlib.Path, backup: pathlib.Path, finish: str) -> None:
    """Every command says so (one line on stderr) and writers refuse, naming both ways out."""
    info = _run("info", root)
    notes = [line for line in info.stderr.splitlines() if "interrupted" in line]
    assert len(notes) == 1 and finish in notes[0] and f"rmqtool undo {backup}" in notes[0], info.stderr
    w = _run("append", root, "--topic", "CrashTopic", "--body", "x")
    assert w.exit_code == 5 and finish in w.stderr and "undo" in w.stderr, w.output


def _kill_points() -> list:
    """Before the abort marker, half way through the plan, after dispatching again; every step
    of the apply with RMQTOOL_KILL_EVERY_STEP=1 (the harness run)."""
    from rmqtool.recovery.plan import plan_recovery
    actions = len(plan_recovery(E1).actions)
    if os.environ.get("RMQTOOL_KILL_EVERY_STEP"):
        return list(range(1, actions + 3))
    return [1, 1 + actions // 2, actions + 2]


@pytest.mark.parametrize("after", _kill_points())
def test_recover_apply_killed_then_run_again_or_undone(after, tmp_path):
    root = writable_copy(E1, tmp_path / "store")
    before = tree(root)
    backup = tmp_path / "backup"
    k = _killed("recover", root, "--apply", "--backup-dir", backup, after=after)
    assert k.returncode == -9, k.stderr
    assert (root / UNFINISHED_FILE).exists() and (backup / "intent.json").exists()
    assert not list(root.rglob("*rmqtool-tmp*")) and not list(tmp_path.glob(".rmqtool-*"))
    _says_unfinished(root, backup, f"rmqtool recover {root} --apply")
    assert _run("recover", root).exit_code == 3  # a half-changed store is not called clean
    saved = tmp_path / "killed"
    copy_tree(root, saved)
    # either way out: undo gives back every original byte...
    u = _run("undo", backup)
    assert u.exit_code == 0, u.output
    assert tree(root) == before and not (backup / "intent.json").exists()
    # ...or the same command again finishes it (from the killed state)
    shutil.rmtree(root)
    copy_tree(saved, root)
    r = _run("recover", root, "--apply", "-f", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["applied"]["backup_dir"] == str(backup)  # the same backup, made again
    assert not (root / UNFINISHED_FILE).exists()
    assert _run("recover", root).exit_code == 0  # recovered: nothing left to do
    assert _run("undo", backup).exit_code == 0 and tree(root) == before  # and no original byte lost


@pytest.mark.parametrize("command", ["recover", "redispatch"])
def test_the_ways_out_of_a_repair_given_relative_paths_run_from_anywhere(command, tmp_path):
    """A repair started with paths relative to its directory and killed: the command that
    finishes it and the one that undoes it name the store and the backup by absolute paths
    (they were the killed process's relative ones, which name nothing, or another store, from
    where the next command runs); each, run from another directory, does what it says."""
    import shlex

    from rmqtool.store.unfinished import read_unfinished

    work = tmp_path / "work"
    root = writable_copy(E1 if command == "recover" else BASIC, work / "store")
    if command == "redispatch":
        for d in sorted((root / "consumequeue").glob("*/*"))[:2]:
            shutil.rmtree(d)
    before = tree(root)
    env = dict(os.environ, RMQTOOL_KILL_AFTER="1", PYTHONPATH=str(REPO))
    args = ["store", "--apply", "--backup-dir", "bk"] + (["--cq"] if command == "redispatch" else [])
    k = subprocess.run([sys.executable, "-m", "rmqtool", command, *args], env=env, cwd=work, capture_output=True,
                       text=True, timeout=120)
    assert k.returncode == -9, k.stderr
    marker = read_unfinished(root)
    assert shlex.split(marker.finish)[:3] == ["rmqtool", command, str(root)]
    assert marker.undo == f"rmqtool undo {work / 'bk'}"
    saved = tmp_path / "killed"
    copy_tree(work, saved)  # the store and its backup as the kill left them
    elsewhere = {k: v for k, v in env.items() if k != "RMQTOOL_KILL_AFTER"}
    for way in (marker.finish, marker.undo):
        shutil.rmtree(work)
        copy_tree(saved, work)
        run = subprocess.run([sys.executable, "-m", "rmqtool", *shlex.split(way)[1:]], env=elsewhere, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert not (root / UNFINISHED_FILE).exists()
    assert tree(root) == before  # undone


def test_an_apply_killed_between_two_deletions_is_finished(tmp_path):
    """kill -9 after the apply deleted a commit log file and before it deleted the (made ahead)
    file after it: planned as it is, the half-changed store shows a missing middle file, and
    the command that finishes the repair was refused ('a commit log file is missing before
    it'). It gives the store back first and plans that, so it finishes; undo then gives every
    original byte back."""
    source = tmp_path / "source"
    copy_tree(CRASH / "a-as-is" / "input" / "store", source)
    segments = sorted((source / "commitlog").iterdir())
    assert len(segments) >= 3
    with open(segments[-3], "r+b") as f:  # recovery ends at this file's start: the two after it go
        f.write(bytes(64))
    for after in range(1, 20):  # the step at which one is gone and the last is not
        root = tmp_path / f"store{after}"
        copy_tree(source, root)
        before = tree(root)
        backup = tmp_path / f"backup{after}"
        assert _killed("recover", root, "--apply", "--backup-dir", backup, after=after).returncode == -9
        if segments[-2].name not in {p.name for p in (root / "commitlog").iterdir()} and \
                (root / "commitlog" / segments[-1].name).exists():
            break
    else:
        pytest.fail("no step left a gap")
    r = _run("recover", root, "--apply", "-f", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["applied"]["backup_dir"] == str(backup)  # the same backup, made again
    assert not (root / UNFINISHED_FILE).exists()
    assert _run("undo", backup).exit_code == 0 and tree(root) == before


@pytest.mark.parametrize("after", [1, 3])
def test_redispatch_apply_killed_then_run_again_or_undone(after, tmp_path):
    root = writable_copy(BASIC, tmp_path / "store")
    for d in sorted((root / "consumequeue").glob("*/*"))[:2]:
        shutil.rmtree(d)
    before = tree(root)
    backup = tmp_path / "backup"
    k = _killed("redispatch", root, "--cq", "--apply", "--backup-dir", backup, after=after)
    assert k.returncode == -9, k.stderr
    assert not list(root.rglob("*rmqtool-tmp*")) and not list(tmp_path.glob(".rmqtool-*"))
    _says_unfinished(root, backup, f"rmqtool redispatch {root} --cq --apply")
    saved = tmp_path / "killed"
    copy_tree(root, saved)
    assert _run("undo", backup).exit_code == 0 and tree(root) == before
    shutil.rmtree(root)
    copy_tree(saved, root)
    r = _run("redispatch", root, "--cq", "--apply")
    assert r.exit_code == 0, r.output
    assert _run("redispatch", root, "--cq").exit_code == 0  # finished: the files are as built
    assert _run("undo", backup).exit_code == 0 and tree(root) == before


def test_undo_killed_then_run_again(tmp_path):
    root = writable_copy(E1, tmp_path / "store")
    before = tree(root)
    backup = tmp_path / "backup"
    assert _run("recover", root, "--apply", "--backup-dir", backup).exit_code == 0
    k = _killed("undo", backup, after=3)
    assert k.returncode == -9, k.stderr
    _says_unfinished(root, backup, f"rmqtool undo {backup}")
    u = _run("undo", backup)
    assert u.exit_code == 0, u.output
    assert tree(root) == before


def test_append_recover_killed_is_finished_by_recover_or_undone(tmp_path):
    from rmqtool.recovery.plan import plan_recovery
    root = writable_copy(E1, tmp_path / "store")
    before = tree(root)
    k = _killed("append", root, "--recover", "--topic", "CrashTopic", "--body", "x",
                after=len(plan_recovery(root).actions) + 2)
    assert k.returncode == -9, k.stderr
    (backup,) = tmp_path.glob("store.recovery-*")
    _says_unfinished(root, backup, f"rmqtool recover {root} --apply")
    saved = tmp_path / "killed"
    copy_tree(root, saved)
    assert _run("undo", backup).exit_code == 0 and tree(root) == before
    shutil.rmtree(root)
    copy_tree(saved, root)
    assert _run("recover", root, "--apply").exit_code == 0
    assert _run("append", root, "--topic", "CrashTopic", "--body", "x").exit_code == 0


def test_salvage_to_store_killed_then_run_again(tmp_path):
    """The new store is written beside NEWDIR and renamed once closed: a kill leaves no NEWDIR,
    and the same command again writes it whole (the input is only read)."""
    before = tree(E1)
    ref = _run("salvage", E1, "--to-store", tmp_path / "ref", "-f", "json")
    k = _killed("salvage", E1, "--to-store", tmp_path / "new", after=1)
    assert k.returncode == -9, k.stderr
    assert not (tmp_path / "new").exists()
    again = _run("salvage", E1, "--to-store", tmp_path / "new", "-f", "json")
    assert again.exit_code == ref.exit_code, again.output
    assert json.loads(again.stdout)["messages_kept"] == json.loads(ref.stdout)["messages_kept"]
    log = lambda root: {k: v for k, v in tree(root).items() if not k.startswith("index")}  # noqa: E731
    assert log(tmp_path / "new") == log(tmp_path / "ref")  # index files are named by their creation time
    assert not list(tmp_path.glob("*.salvage-partial")) and tree(E1) == before


# --- repair and undo over random damage ----------------------------------------------------------

import hypothesis.strategies as st  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

from helpers import damage, examples  # noqa: E402

RANDOM_SOURCES = (CRASH / "a-as-is" / "input" / "store", V5 / "batchcq" / "store",
                  REPO / "fixtures" / "crash-made" / "roll-kill-next-zeroed" / "input" / "store")


@pytest.fixture(scope="module")
def pristines(tmp_path_factory):
    return [writable_copy(src, tmp_path_factory.mktemp("pristine") / "store") for src in RANDOM_SOURCES]


@settings(max_examples=examples(12), deadline=None,
          phases=[Phase.explicit, Phase.reuse, Phase.generate],  # a whole repair an example: no shrinking
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_repair_appends_and_undo_refuse_or_give_back_the_whole_tree(pristines, tmp_path_factory, data):
    """Random damage, recover --apply (the engine's, with its after-state) or redispatch --apply,
    appends or none, undo:
    either undo refuses and the store is exactly as the appends left it, or the whole tree is
    the input's, byte for byte."""
    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.store import Store
    from rmqtool.errors import RmqError
    from rmqtool.recovery.plan import plan_recovery
    from rmqtool.recovery.undo import undo

    root = tmp_path_factory.mktemp("case") / "store"
    copy_tree(data.draw(st.sampled_from(pristines)), root)
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.stat().st_size and p.name != "lock")
    target = data.draw(st.sampled_from(files))
    target.write_bytes(bytes(damage(bytearray(target.read_bytes()), data, kinds=("flip", "zero", "garbage", "int"))))
    if data.draw(st.booleans()):
        (root / "abort").unlink(missing_ok=True)
    before = tree(root)
    backup = root.parent / "backup"
    if data.draw(st.booleans()):  # redispatch --apply
        r = _run("redispatch", root, "--apply", "--backup-dir", backup)
        if r.exit_code != 0 or not backup.exists():  # refused (the store needs recovery first), or nothing to do
            assert tree(root) == before, r.output
            return
    else:
        try:
            plan = plan_recovery(root)
            if plan.is_empty or plan.refusal:
                return
            Store.recover(root, backup_dir=backup)
        except RmqError as exc:
            assert exc.path is not None, exc.one_line()
            return
    appends = data.draw(st.integers(0, 3))
    if appends:
        try:
            with Store.open(root, writable=True) as s:
                for i in range(appends):
                    s.append(producer_message("T", b"after %d" % i, keys=f"after-{i}"))
        except RmqError as exc:  # a recovered store a writer still refuses: a clean error
            assert exc.path is not None, exc.one_line()
    written = tree(root)
    try:
        undo(backup)
    except StoreChangedSince:
        assert written != tree(root) or appends, "refused although nothing was written"
        assert tree(root) == written
        return
    assert tree(root) == before


def test_a_stale_intent_record_does_not_let_undo_destroy_appends(tmp_path):
    """Killed between clearing the store's marker and the backup's record: the repair was
    finished (its state recorded), so undo still refuses a store written since."""
    root = writable_copy(E1, tmp_path / "store")
    backup = tmp_path / "backup"
    assert _run("recover", root, "--apply", "--backup-dir", backup).exit_code == 0
    (backup / "intent.json").write_text(json.dumps({"operation": "recover", "finish": "x", "undo": "y"}))
    _append(root, "after")
    written = tree(root)
    assert _run("undo", backup).exit_code == 5 and tree(root) == written


@pytest.mark.parametrize("command", [["info"], ["verify", "--no-progress"], ["dump", "commitlog", "--limit", "1"],
                                     ["dump", "checkpoint"], ["query", "--key", "nothing"], ["offsets"],
                                     ["recover"], ["redispatch"]])
def test_every_command_says_a_repair_is_unfinished(command, tmp_path):
    from rmqtool.recovery.intent import begin
    root = writable_copy(E1, tmp_path / "store")
    (tmp_path / "b").mkdir()
    begin(tmp_path / "b", root, "recover", f"rmqtool recover {root} --apply", f"rmqtool undo {tmp_path / 'b'}")
    r = runner.invoke(app, [command[0], *command[1:2 if command[0] == "dump" else 0], str(root),
                            *command[2 if command[0] == "dump" else 1:]])
    notes = [line for line in r.stderr.splitlines() if "interrupted recover" in line]
    assert len(notes) == 1 and f"rmqtool recover {root} --apply" in notes[0], r.stderr
    assert f"rmqtool undo {tmp_path / 'b'}" in notes[0]


def _named(files: dict) -> dict:
    """A tree with index files named by their place (their names are the clock's when made)."""
    index = sorted(k for k in files if k.startswith("index/"))
    return {(f"index/#{index.index(k)}" if k in index else k): v for k, v in files.items()}


@pytest.mark.parametrize("after", [None, *_kill_points()])
def test_recover_to_killed_is_finished_by_the_same_command(after, tmp_path):
    """recover --apply --to NEW cut short (after=None: between the copy's rename and its repair's
    first write, the copy as copy_store leaves it): readers of NEW say it is unfinished and name
    the same command, which finishes it (NEW made again from the store, left as it was), and no
    backup of the cut-short run is left; a directory that is no copy of the store is never taken."""
    from rmqtool.engine.recover_store import copy_store
    root = writable_copy(E1, tmp_path / "store")
    before = tree(root)
    new = tmp_path / "new"
    command = ["recover", root, "--apply", "--to", new]
    reference = tmp_path / "reference"
    assert _run("recover", root, "--apply", "--to", reference).exit_code == 0
    if after is None:
        with copy_store(root, new, f"rmqtool recover {root} --apply --to {new}"):
            pass
    else:
        assert _killed(*command, after=after).returncode == -9
    assert tree(root) == before  # the store given is never written
    notes = [line for line in _run("info", new).stderr.splitlines()
             if "interrupted" in line or "a recover --to copy of another store, not repaired yet" in line]
    # before the repair's first write the copy's mark names the same command; after it, the repair's
    # own marker names the repair of the copy in place (which rolls back and runs again): both finish it
    said = f"rmqtool recover {root} --apply --to {new}" if after is None else f"rmqtool recover {new} "
    assert len(notes) == 1 and said in notes[0], notes
    r = _run(*command, "-f", "json")
    assert r.exit_code == 0, r.output
    assert _named(tree(new)) == _named(tree(reference)) and tree(root) == before
    assert _run("recover", new).exit_code == 0
    # the finishing run's backup alone (as the reference run's), no partial copy
    assert len(list(tmp_path.glob("new.*"))) == len(list(tmp_path.glob("reference.*"))) == 1
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep").write_text("not a copy")
    refused = _run("recover", root, "--apply", "--to", other)
    assert refused.exit_code == 2 and (other / "keep").read_text() == "not a copy"


def test_recover_to_refuses_a_store_a_running_broker_holds(tmp_path):
    """--to copies: a store a broker writes is no store to copy; refused for the lock (exit 5),
    nothing made at NEW (the lock is held by another process, as a broker's)."""
    from helpers import lock_held_elsewhere
    root = writable_copy(E1, tmp_path / "store")
    with lock_held_elsewhere(root / "lock"):
        r = _run("recover", root, "--apply", "--to", tmp_path / "new")
        assert r.exit_code == 5 and "locked by" in r.stderr, r.output
        assert not list(tmp_path.glob("new*"))


@pytest.mark.parametrize("held", ["copy", "backup", "partial"])
def test_recover_to_refuses_a_copy_another_run_holds_and_removes_nothing(held, tmp_path):
    """Two recover --apply --to NEW at once: while the first holds NEW (repairing it), the backup
    its repair fills, or NEW.copy-partial (copying the store there), the second is refused (exit
    5, naming that process) and removes nothing. It removed the first's copy and backup (the
    first then failed, exit 8, and NEW was the second's), or emptied the partial copy the first
    was making. Once the first is gone, the same command finishes NEW."""
    root = writable_copy(E1, tmp_path / "store")
    new, backup, partial = tmp_path / "new", tmp_path / "bkA", tmp_path / "new.copy-partial"
    assert _killed("recover", root, "--apply", "--to", new, "--backup-dir", backup, after=1).returncode == -9
    if held == "partial":
        partial.mkdir()
        (partial / "checkpoint").write_bytes(b"the first run's copy")
    target = {"copy": new, "backup": backup, "partial": partial}[held]
    first = _holder(target, "directory", "holds it")
    try:
        assert first.stdout.readline().strip() == "held"
        before = tree_fingerprint(tmp_path)
        r = _run("recover", root, "--apply", "--to", new, "--backup-dir", tmp_path / "bkB")
        assert r.exit_code == 5 and f"process {first.pid}" in r.stderr, r.output
        assert tree_fingerprint(tmp_path) == before
    finally:
        first.stdin.close()
        first.wait(timeout=10)
    assert _run("recover", root, "--apply", "--to", new, "--backup-dir", tmp_path / "bkB").exit_code == 0
    assert _run("recover", new).exit_code == 0 and not partial.exists() and not backup.exists()


def test_recover_to_never_copies_through_a_link_at_its_partial_name(tmp_path):
    """NEW.copy-partial a link to a directory: refused (exit 2), what it points to kept (the copy
    now takes over a partial directory a run cut short left, emptying it first)."""
    root = writable_copy(E1, tmp_path / "store")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("not a copy")
    (tmp_path / "new.copy-partial").symlink_to(elsewhere)
    r = _run("recover", root, "--apply", "--to", tmp_path / "new")
    assert r.exit_code == 2 and "in the way of the copy" in r.stderr, r.output
    assert [p.name for p in elsewhere.iterdir()] == ["keep"] and not (tmp_path / "new").exists()


def test_recover_to_holds_the_copy_from_its_making_to_its_repair(tmp_path, monkeypatch):
    """The copy is held (flock) from before it is renamed NEW until its repair is done: between
    the rename and the engine's lock nobody held it, and another --to run took it for one cut
    short and removed it under the repair."""
    import rmqtool.engine.recover_store as recover_store
    from rmqtool.store.lock import root_writer_pid
    root = writable_copy(E1, tmp_path / "store")
    new = tmp_path / "new"
    holders = []
    real = recover_store._apply

    def watched(target, *args, **kwargs):
        holders.append(root_writer_pid(target))
        return real(target, *args, **kwargs)
    monkeypatch.setattr(recover_store, "_apply", watched)
    assert _run("recover", root, "--apply", "--to", new).exit_code == 0
    assert holders == [os.getpid()]


# a process that SIGKILLs itself where the repair would mark the store (intent.begin): its backup made
_KILLED_BEFORE_MARKING = ("import os, signal, sys; from rmqtool.recovery import intent; "
                          "intent.begin = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL); "
                          "from rmqtool.cli.app import app; app(sys.argv[1:])")


@pytest.mark.parametrize("family", ["rocketmq", "qmq"])
def test_recover_to_killed_before_its_repair_marks_the_copy_is_finished_by_the_same_command(family, tmp_path):
    """The copy's own marker (it names the command that makes it again) stays until the repair's
    replaces it. It was removed first, and a kill before the repair's marker left NEW
    unmarked, half a repair's backup beside it: nothing named it unfinished, and the same
    command refused NEW as a directory not empty (exit 2). The copy it finishes is the one an
    uninterrupted run makes."""
    source = (writable_copy(E1, tmp_path / "store") if family == "rocketmq" else
              expand_store(FIXTURES / "qmq" / "crash" / "d-flipped-payload-byte-mid-log" / "input", tmp_path / "store"))
    reference, new = tmp_path / "reference", tmp_path / "new"
    assert _run("recover", source, "--apply", "--to", reference).exit_code == 0
    killed = subprocess.run([sys.executable, "-c", _KILLED_BEFORE_MARKING, "recover", str(source), "--apply",
                             "--to", str(new)], env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
                            text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    info = _run("info", new)
    notes = [line for line in info.stderr.splitlines() if "a recover --to copy of another store, not repaired" in line]
    finish = f"--apply --to {new}"
    assert len(notes) == 1 and finish in notes[0], info.stderr
    again = _run("recover", source, "--apply", "--to", new)
    assert again.exit_code == 0, again.output
    made = ("lock", "index/")  # the lock's holder, and index files named for the clock when they were made
    assert ({n: h for n, h in tree_fingerprint(new).items() if not n.startswith(made)} ==
            {n: h for n, h in tree_fingerprint(reference).items() if not n.startswith(made)})
    assert _run("info", new).stderr == _run("info", reference).stderr == ""


def test_an_undo_killed_names_what_finishes_it_and_what_makes_the_repair_again(tmp_path):
    """An undo of a recover cut short: every command names `rmqtool undo B` as what finishes it
    and the recover that was undone (not a redispatch, not as a way to undo the undo) as what
    then makes the repair again; both commands, run in that order, work."""
    root = writable_copy(E1, tmp_path / "store")
    before = tree(root)
    backup = tmp_path / "backup"
    assert _run("recover", root, "--apply", "--backup-dir", backup, "--semantics", "4.9").exit_code == 0
    assert _killed("undo", backup, after=1).returncode == -9
    notes = [line for line in _run("info", root).stderr.splitlines() if "interrupted" in line]
    again = f"rmqtool recover {root} --semantics 4.9 --apply"
    assert len(notes) == 1 and f"`rmqtool undo {backup}` finishes it; `{again}` then makes the repair again" \
        in notes[0], notes
    assert _run("undo", backup).exit_code == 0 and tree(root) == before
    assert _run(*again.split()[1:]).exit_code == 0
    assert _run("recover", root).exit_code == 0


@pytest.mark.parametrize("after", _kill_points())
def test_recover_to_killed_and_finished_in_place_is_the_operators_store(after, tmp_path):
    """recover --apply --to NEW cut short, then finished by the command NEW's marker names (the
    repair of NEW in place): NEW is what an uninterrupted run makes, marks and all gone, and the
    --to command run again later never takes it for its own unfinished copy (it held the
    operator's writes since)."""
    from rmqtool.store.unfinished import read_unfinished
    root = writable_copy(E1, tmp_path / "store")
    new = tmp_path / "new"
    reference = tmp_path / "reference"
    assert _run("recover", root, "--apply", "--to", reference).exit_code == 0
    assert _killed("recover", root, "--apply", "--to", new, after=after).returncode == -9
    finish = read_unfinished(new).finish
    assert finish.startswith(f"rmqtool recover {new} "), finish
    r = _run(*finish.split()[1:])
    assert r.exit_code == 0, r.output
    assert _named(tree(new)) == _named(tree(reference))
    assert _run("append", new, "--topic", "CrashTopic", "--body", "written since").exit_code == 0
    since = tree(new)
    refused = _run("recover", root, "--apply", "--to", new)
    assert refused.exit_code == 2 and tree(new) == since


def test_a_repair_clears_its_marker_before_it_lets_the_lock_go(tmp_path, monkeypatch):
    """recover --apply: the marker and the intent record go while the lock is still held (a
    writer waiting on the lock found the marker of a repair still running, and 'finished' it);
    redispatch's swap and undo hold the lock while they work (they only asked who held it)."""
    import rmqtool.recovery.apply as apply_module
    import rmqtool.recovery.undo as undo_module
    from rmqtool.store.lock import is_locked
    root = writable_copy(E1, tmp_path / "store")
    held = []
    for module in (apply_module, undo_module):
        real = module.intent

        class Watched:
            def __getattr__(self, name, real=real):
                return getattr(real, name)

            def end(self, backup, store, real=real):
                held.append(("end", is_locked(pathlib.Path(store) / "lock")))
                return real.end(backup, store)

            def begin(self, backup, store, *args, real=real):
                held.append(("begin", is_locked(pathlib.Path(store) / "lock")))
                return real.begin(backup, store, *args)
        monkeypatch.setattr(module, "intent", Watched())
    backup = tmp_path / "backup"
    assert _run("recover", root, "--apply", "--backup-dir", backup).exit_code == 0
    assert _run("undo", backup).exit_code == 0
    clean = writable_copy(CRASH.parent / "basic" / "store", tmp_path / "clean")
    shutil.rmtree(next(clean.glob("consumequeue/*")))  # something for redispatch to swap in
    assert _run("redispatch", clean, "--cq", "--apply", "--semantics", "4.9", "--backup-dir", tmp_path / "b2").exit_code == 0
    assert held and all(pid == os.getpid() for _step, pid in held), held


def test_recover_refuses_a_store_an_undo_cut_short_left(tmp_path):
    """An undo killed half way: recover --apply in place refuses for the marker (exit 5, naming
    the undo that finishes it), where it planned the half-restored store and refused it as
    damaged (exit 3); nothing is written."""
    root = writable_copy(E1, tmp_path / "store")
    backup = tmp_path / "backup"
    assert _run("recover", root, "--apply", "--backup-dir", backup).exit_code == 0
    assert _killed("undo", backup, after=2).returncode == -9
    before = tree(root)
    r = _run("recover", root, "--apply")
    assert r.exit_code == 5 and f"rmqtool undo {backup}" in r.stderr, r.output
    assert tree(root) == before


def test_a_second_undo_of_one_backup_says_the_store_is_as_before(tmp_path):
    """The first undo gave every byte back: a second finds the store as it was before the repair
    and says so (exit 0, nothing written). It said the abort file "was made since, after the
    repair" and exited 5, though nothing had written to the store. A store written after the
    undo is still refused."""
    root = writable_copy(E1, tmp_path / "store")
    before = tree(root)
    backup = tmp_path / "backup"
    assert _run("recover", root, "--apply", "--backup-dir", backup).exit_code == 0
    first = json.loads(_run("undo", backup, "-f", "json").stdout)
    assert first["bytes_restored"] > 0 and first["already_as_before"] is False
    mtimes = file_mtimes(root)
    again = _run("undo", backup, "-f", "json")
    assert again.exit_code == 0, again.output
    doc = json.loads(again.stdout)
    assert doc["already_as_before"] is True and doc["bytes_restored"] == doc["files_restored"] == 0
    assert tree(root) == before and file_mtimes(root) == mtimes
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "written-after-the-undo.json").write_text("{}")
    assert _run("undo", backup).exit_code == ExitCode.LOCKED


def test_a_repair_that_would_delete_or_replace_a_linked_file_is_refused_before_it_writes(tmp_path):
    """A commit log file (recover deletes it) or a consume queue file (redispatch replaces it)
    that is a symbolic link to another disk: deleting or renaming over the name drops the link
    (recover removed the target too), and undo put back a file where the link was, or the
    target only, leaving a gap. Refused (exit 4) before anything is written, naming the link."""
    root = writable_copy(E1, tmp_path / "recover")
    plan = json.loads(_run("recover", root, "-f", "json").stdout)
    deleted = next(a["file"] for a in plan["actions"] if a["kind"] == "delete")
    other = tmp_path / "disk2"
    other.mkdir()
    shutil.move(deleted, other / pathlib.Path(deleted).name)
    os.symlink(other / pathlib.Path(deleted).name, deleted)
    before = tree(root) | {"link": os.readlink(deleted)}
    r = _run("recover", root, "--apply", "--backup-dir", tmp_path / "b1")
    assert r.exit_code == ExitCode.BAD_INPUT and deleted in r.stderr and "symbolic link" in r.stderr
    assert tree(root) | {"link": os.readlink(deleted)} == before and (other / pathlib.Path(deleted).name).exists()

    root = writable_copy(BASIC, tmp_path / "redispatch")
    queue_file = sorted((root / "consumequeue").glob("*/0/*"))[0]
    with open(queue_file, "r+b") as f:  # a unit zeroed: redispatch replaces the file
        f.seek(20)
        f.write(bytes(20))
    shutil.move(queue_file, other / "cq")
    os.symlink(other / "cq", queue_file)
    before = tree(root)
    r = _run("redispatch", root, "--cq", "--apply", "--backup-dir", tmp_path / "b2")
    assert r.exit_code == ExitCode.BAD_INPUT and str(queue_file) in r.stderr, r.output
    assert tree(root) == before and queue_file.is_symlink()


def test_undo_gives_a_read_only_file_its_mode_after_all_its_bytes(tmp_path, monkeypatch):
    """A read-only consume queue file (0444) that the repair cut (a range) and dispatched into
    (put back whole): undo gave it 0444 with its whole copy, then could not open it to put the
    range back (EACCES for anyone but root) and stopped half done. The mode now comes back
    last. The suite may run as root, which no mode stops: an open for writing of a file
    without its owner's write bit is refused here as the kernel refuses it to its owner."""
    import stat as st_mode

    root = writable_copy(E1, tmp_path / "store")
    plan = json.loads(_run("recover", root, "-f", "json").stdout)
    cut = next(a["file"] for a in plan["actions"] if a["kind"] == "zero" and "/consumequeue/" in a["file"])
    os.chmod(cut, 0o444)
    before = tree(root)
    backup = tmp_path / "backup"
    assert _run("recover", root, "--apply", "--backup-dir", backup).exit_code == 0
    entries = [e for e in read_manifest(backup).entries if str(root / e.file) == cut or e.file == cut]
    assert {e.action for e in entries} >= {"zero", "restore"}  # the case: a range and the whole file
    os.chmod(cut, 0o644)  # the operator makes it writable to undo
    real_open = os.open

    def owner_open(path, flags, mode=0o777, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR) and os.path.exists(path) and \
                not os.stat(path).st_mode & st_mode.S_IWUSR:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", owner_open)
    u = _run("undo", backup)
    monkeypatch.undo()
    assert u.exit_code == 0, u.output
    assert tree(root) == before and os.stat(cut).st_mode & 0o777 == 0o444


def test_an_undo_killed_after_its_last_byte_is_finished_by_running_it_again(tmp_path):
    """Killed between its last restore and clearing its records: the store is as before, the
    intent record and the store's marker are left. Run again it said "abort was made since,
    after the repair" (exit 5); it clears them and says the store is as before (exit 0)."""
    from rmqtool.recovery import intent
    from rmqtool.store.unfinished import undo_command

    root = writable_copy(E1, tmp_path / "store")
    before = tree(root)
    backup = tmp_path / "backup"
    assert _run("recover", root, "--apply", "--backup-dir", backup).exit_code == 0
    assert _run("undo", backup).exit_code == 0
    intent.begin(backup, root, "undo", undo_command(backup), f"rmqtool recover {root} --apply")  # as the kill left it
    again = _run("undo", backup, "-f", "json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["already_as_before"] is True
    assert tree(root) == before and not (backup / "intent.json").exists()


def test_a_manifest_field_of_the_wrong_type_is_refused_before_undo_writes(tmp_path):
    """An entry's start as a string: a TypeError traceback half way through the undo (the
    entries after it in reverse order already written back). One line, exit 4, nothing written."""
    root = writable_copy(E1, tmp_path / "store")
    backup = tmp_path / "backup"
    assert _run("recover", root, "--apply", "--backup-dir", backup).exit_code == 0
    repaired = tree(root)
    doc = json.loads((backup / "manifest.json").read_text())
    doc["entries"][0]["start"] = str(doc["entries"][0]["start"])
    (backup / "manifest.json").write_text(json.dumps(doc))
    u = _run("undo", backup)
    assert u.exit_code == ExitCode.BAD_INPUT and "manifest" in u.stderr, u.output
    assert tree(root) == repaired


def test_undo_refuses_a_qmq_store_a_process_holds(tmp_path):
    """A QMQ store has no lock file: a broker holds it by its files open. recover --apply saw
    that and refused; undo wrote its bytes back under the running broker and exited 0."""
    from conftest import FIXTURES

    root = expand_store(FIXTURES / "qmq" / "crash" / "d-flipped-payload-byte-mid-log" / "input", tmp_path / "q")
    backup = tmp_path / "backup"
    assert _run("recover", root, "--apply", "--backup-dir", backup).exit_code in (0, 3)
    repaired = tree_fingerprint(root)  # hole-aware: QMQ segments are 1 GiB, mostly holes
    holder = subprocess.Popen([sys.executable, "-c", "import mmap,sys,time; f=open(sys.argv[1],'r+b'); "
                               "m=mmap.mmap(f.fileno(), 4096); print('held', flush=True); time.sleep(60)",
                               str(next((root / "messagelog").glob("0*")))], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        u = _run("undo", backup)
        assert u.exit_code == ExitCode.LOCKED and str(holder.pid) in u.stderr, u.output
        assert tree_fingerprint(root) == repaired
    finally:
        holder.kill()
        holder.wait()
    assert _run("undo", backup).exit_code == 0


def _holder(path, what: str, doing: str) -> subprocess.Popen:
    """A process holding ``path`` as a live rmqtool writer holds it (directory_held) until its
    stdin closes; it prints "held" once it does."""
    return subprocess.Popen([sys.executable, "-c", "import pathlib, sys\n"
                             "from rmqtool.recovery.store_lock import directory_held\n"
                             "with directory_held(pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]):\n"
                             " print('held', flush=True); sys.stdin.read()", str(path), what, doing],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_a_repair_still_running_is_said_to_be_under_way_not_interrupted(tmp_path):
    """The marker is there from a repair's first change to its last. While its process holds the
    store (here: a holder of the root, as every rmqtool writer holds it, over a marker a killed
    run left), every command called it "an interrupted recover" and told the operator to finish
    or undo what was still running. Said as under way, naming the process; interrupted once
    nobody holds it."""
    store = writable_copy(E1, tmp_path / "store")
    assert _killed("recover", store, "--apply", "--backup-dir", tmp_path / "backup", after=2).returncode == -9
    holder = _holder(store, "store", "is repairing it")
    try:
        assert holder.stdout.readline().strip() == "held"
        for args in (("info", store), ("append", store, "--topic", "CrashTopic", "--body", "x")):
            r = _run(*args)
            said = [line for line in r.stderr.splitlines() if "half changed" in line]
            assert said and all(f"a recover under way (process {holder.pid})" in line and "interrupted" not in line
                                for line in said), r.stderr
        assert r.exit_code == ExitCode.LOCKED
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    assert "an interrupted recover left this store half changed" in _run("info", store).stderr


_KILLED_WHILE_COPYING = """
import os, signal, sys
import rmqtool.recovery.manifest as manifest
real = manifest.copy_range
def copy_then_die(*args, **kwargs):
    real(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)  # the first copy whole on disk, the rest never made
for name in ("rmqtool.recovery.apply", "rmqtool.engine.qmq.apply"):
    __import__(name)
    sys.modules[name].copy_range = copy_then_die
from rmqtool.cli.app import app
app(sys.argv[1:])
"""


@pytest.mark.parametrize("command, store", [("recover", "rocketmq"), ("recover", "qmq"), ("redispatch", "rocketmq")])
def test_a_repair_killed_while_it_fills_its_backup_is_run_again_as_it_was(tmp_path, command, store):
    """Killed after its first backup copy, before its manifest: the store is as it was, and the
    same command (the same --backup-dir) runs again, over what the killed run left there."""
    if store == "qmq":
        root = expand_store(V4.parent / "qmq" / "crash" / "d-flipped-payload-byte-mid-log" / "input", tmp_path / "q")
    else:
        root = writable_copy(E1 if command == "recover" else CRASH / "c3-truncate-cq-file" / "input" / "store",
                             tmp_path / "store")
    before = tree_fingerprint(root)
    backup = tmp_path / "backup"
    args = [command, str(root), "--apply", "--backup-dir", str(backup)]
    killed = subprocess.run([sys.executable, "-c", _KILLED_WHILE_COPYING, *args], capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    assert tree_fingerprint(root) == before and list((backup / "copies").iterdir())  # a copy made, nothing changed
    again = _run(*args)
    assert again.exit_code == 0, again.output
    assert _run("undo", backup).exit_code == 0 and tree_fingerprint(root) == before


@pytest.mark.parametrize("held", [["notes.txt"], ["copies/0000.bin", "manifest.json"], ["copies/mine.txt"]])
def test_a_backup_directory_holding_anything_else_is_refused_and_kept(tmp_path, held):
    """A directory with anything but what a run killed before its manifest leaves (a file of
    the operator's, a backup with its manifest) is refused as it is, exit 2."""
    root = writable_copy(E1, tmp_path / "store")
    backup = tmp_path / "backup"
    for name in held:
        (backup / name).parent.mkdir(parents=True, exist_ok=True)
        (backup / name).write_text("kept")
    before = tree_fingerprint(backup), tree_fingerprint(root)
    r = _run("recover", root, "--apply", "--backup-dir", backup)
    assert r.exit_code == ExitCode.USAGE and "not empty" in r.stderr, r.output
    assert (tree_fingerprint(backup), tree_fingerprint(root)) == before


def test_a_backup_directory_a_live_repair_fills_is_not_taken_by_another(tmp_path):
    """Two repairs given one --backup-dir: while the first fills it (copies made, no manifest
    yet) the second, of another store, is refused (exit 5) and the first's copies stay; it
    took them for a killed run's leftovers, deleted them, and the first's clean-up then
    deleted the second's finished backup. Once the first is gone, its leftovers are cleared."""
    backup = tmp_path / "backup"
    (backup / "copies").mkdir(parents=True)
    (backup / "copies" / "0000.bin").write_bytes(b"the first repair's copy")
    first = _holder(backup, "backup directory", "fills it")
    root = writable_copy(E1, tmp_path / "store")
    before = tree_fingerprint(root)
    try:
        assert first.stdout.readline().strip() == "held"
        r = _run("recover", root, "--apply", "--backup-dir", backup)
        assert r.exit_code == 5 and f"process {first.pid}" in r.stderr, r.output
        assert (backup / "copies" / "0000.bin").read_bytes() == b"the first repair's copy"
        assert tree_fingerprint(root) == before
    finally:
        first.stdin.close()
        first.wait(timeout=10)
    assert _run("recover", root, "--apply", "--backup-dir", backup).exit_code == 0
    assert _run("undo", backup).exit_code == 0 and tree_fingerprint(root) == before


def test_redispatch_holds_the_store_from_its_build_to_its_swap(tmp_path, monkeypatch):
    """An append between redispatch's build and its swap was overwritten by the files built
    before it (its unit lost); now the append is refused while redispatch works (exit 5)."""
    import rmqtool.engine.redispatch as redispatch
    root = writable_copy(CRASH / "c3-truncate-cq-file" / "input" / "store", tmp_path / "store")
    real, tried = redispatch.build, []

    def build_then_append(*args, **kwargs):
        built = real(*args, **kwargs)
        tried.append(subprocess.run([sys.executable, "-m", "rmqtool", "append", str(root), "-t", "CrashTopic",
                                     "--body", "probe", "--assume-defaults"], capture_output=True, text=True))
        return built
    monkeypatch.setattr(redispatch, "build", build_then_append)
    r = _run("redispatch", root, "--cq", "--apply", "--backup-dir", tmp_path / "backup")
    assert r.exit_code == 0, r.output
    assert tried and tried[0].returncode == 5, tried[0].stderr


def test_undo_keeps_the_store_locked_while_it_puts_the_lock_file_back(tmp_path, monkeypatch):
    """A lock file that held other bytes is restored whole by undo: it was opened and closed by
    path, which dropped the POSIX lock undo holds (any close does), so a broker could start on
    the half-restored store. A process asking for the lock while undo works is refused."""
    import rmqtool.recovery.undo as undo_module
    root = writable_copy(CRASH / "b2-garbage-tail-of-last-message" / "input" / "store", tmp_path / "store")
    (root / "lock").write_bytes(b"")
    before = tree_fingerprint(root)
    backup = tmp_path / "backup"
    assert _run("recover", root, "--apply", "--backup-dir", backup).exit_code == 0
    assert any(e.file == "lock" for e in read_manifest(backup).entries)
    real, asked = undo_module._put_back_modes, []

    def ask_then_put_back(*args):
        asked.append(subprocess.run([sys.executable, "-c", "import fcntl, os, sys\n"
                                     "fd = os.open(sys.argv[1], os.O_RDWR)\n"
                                     "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)", str(root / "lock")],
                                    capture_output=True, text=True).returncode)
        return real(*args)
    monkeypatch.setattr(undo_module, "_put_back_modes", ask_then_put_back)
    assert _run("undo", backup).exit_code == 0
    assert asked and asked[0] != 0  # the lock was still held
    assert tree_fingerprint(root) == before


def test_a_backup_directory_inside_the_store_is_refused(tmp_path):
    """Inside the store, the backup's own files were in the listing the repair took: undo
    --force deleted its copies as files the repair made, then failed half done."""
    root = writable_copy(E1, tmp_path / "store")
    before = tree_fingerprint(root)
    r = _run("recover", root, "--apply", "--backup-dir", root / "bk")
    assert r.exit_code == ExitCode.USAGE and "inside the store" in r.stderr, r.output
    assert tree_fingerprint(root) == before
    # nor inside a directory of it linked from another disk (its real path is not under the root)
    elsewhere = tmp_path / "other-disk" / "index"
    shutil.move(root / "index", elsewhere)
    (root / "index").symlink_to(elsewhere)
    before = tree_fingerprint(tmp_path)
    r = _run("recover", root, "--apply", "--backup-dir", elsewhere / "bk")
    assert r.exit_code == ExitCode.USAGE and "inside the store" in r.stderr, r.output
    assert tree_fingerprint(tmp_path) == before


def test_undo_of_a_backup_a_repair_is_filling_names_the_repair(tmp_path):
    """While a repair fills its backup (no manifest yet), undo of it said "not a recovery
    backup" (exit 4), which reads as a lost backup; now it names the writer (exit 5)."""
    backup = tmp_path / "backup"
    (backup / "copies").mkdir(parents=True)
    first = _holder(backup, "backup directory", "fills it")
    try:
        assert first.stdout.readline().strip() == "held"
        r = _run("undo", backup)
        assert r.exit_code == 5 and f"process {first.pid}" in r.stderr, r.output
    finally:
        first.stdin.close()
        first.wait(timeout=10)


def test_a_refused_repair_leaves_no_lock_file_it_made(tmp_path):
    """A store with no lock file, a --backup-dir that is not empty: the repair is refused (exit
    2) and the lock file the engine made for it goes again (it stayed, a 0-byte file undo
    later put back whole, and whose restore dropped undo's own lock)."""
    root = writable_copy(E1, tmp_path / "store")
    (root / "lock").unlink()
    before = tree_fingerprint(root)
    backup = tmp_path / "backup"
    backup.mkdir()
    (backup / "notes.txt").write_text("kept")
    r = _run("recover", root, "--apply", "--backup-dir", backup)
    assert r.exit_code == ExitCode.USAGE, r.output
    assert tree_fingerprint(root) == before and not (root / "lock").exists()


def test_undo_never_removes_its_own_backup_kept_inside_the_store(tmp_path):
    """A backup moved into the store (or made there before repairs refused it): its files are
    not in the listing the repair took, and undo --force removed them as files made since,
    then failed with its copies gone."""
    root = writable_copy(E1, tmp_path / "store")
    before = tree_fingerprint(root)
    assert _run("recover", root, "--apply", "--backup-dir", tmp_path / "backup").exit_code == 0
    inside = root / "bk"
    shutil.move(tmp_path / "backup", inside)
    r = _run("undo", inside, "--force")
    assert r.exit_code == 0, r.output
    assert (inside / "manifest.json").is_file()
    shutil.rmtree(inside)
    assert tree_fingerprint(root) == before


def _exits_at(args: list[str], patch: str) -> int:
    """``rmqtool ARGS`` in a child that ``patch`` (Python run before it) makes exit as a kill
    does (os._exit: no cleanup runs) at a chosen step; its exit code."""
    code = f"{patch}\nfrom rmqtool.cli.app import app\napp({[str(a) for a in args]!r})"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120).returncode


def test_a_repair_killed_before_its_marker_runs_again_and_its_backup_undoes_nothing(tmp_path):
    """Killed after its manifest and intent record, before the store's marker: the repair
    changed nothing. The same command with the same --backup-dir ran into "exists and is not
    empty" (exit 2); an undo of that backup put its old bytes back over what was written since
    (another repair, an append), unasked."""
    store = writable_copy(CRASH / "b2-garbage-tail-of-last-message" / "input" / "store", tmp_path / "store")
    before, backup = tree_fingerprint(store), tmp_path / "backup"
    patch = (f"import os, rmqtool.recovery.intent as i\nw = i._write\n"
             f"i._write = lambda p, d, keep_full=False: os._exit(137) if p.name == {UNFINISHED_FILE!r} else "
             f"w(p, d, keep_full)")
    assert _exits_at(["recover", store, "--apply", "--backup-dir", backup], patch) == 137
    assert (backup / "manifest.json").is_file() and tree_fingerprint(store) == before
    undone = runner.invoke(app, ["undo", str(backup)])
    assert undone.exit_code == ExitCode.LOCKED and "stopped before it changed the store" in undone.stderr
    assert tree_fingerprint(store) == before
    # killed at the marker's rename: its .tmp is the one name the run left in the store, which undo
    # left there too (saying the store was not changed); it goes
    (store / (UNFINISHED_FILE + ".tmp")).write_text('{"operation": "recover"')
    undone = runner.invoke(app, ["undo", str(backup)])
    assert undone.exit_code == ExitCode.LOCKED and tree_fingerprint(store) == before
    again = runner.invoke(app, ["recover", str(store), "--apply", "--backup-dir", str(backup)])
    assert again.exit_code == 0, again.stderr
    assert runner.invoke(app, ["undo", str(backup)]).exit_code == 0 and tree_fingerprint(store) == before


@pytest.mark.parametrize("command", ["recover", "redispatch"])
def test_a_repair_killed_before_its_intent_record_runs_again_into_the_same_backup(command, tmp_path):
    """Killed between its manifest and its intent record: the store unchanged, the backup holding
    copies and a manifest but no intent record. The same command with the same --backup-dir was
    refused for good ("exists and is not empty", exit 2, after an undo too); it runs again over
    it, and its undo gives back the original."""
    store = writable_copy(CRASH / "b2-garbage-tail-of-last-message" / "input" / "store", tmp_path / "store")
    if command == "redispatch":
        assert _run("recover", store, "--apply", "--backup-dir", tmp_path / "settled").exit_code == 0
        shutil.rmtree(next(p for p in (store / "consumequeue").iterdir() if p.is_dir()))
    before, backup = tree_fingerprint(store), tmp_path / "backup"
    args = [command, store, "--apply", "--backup-dir", backup, *(("--semantics", "4.9") if command == "redispatch"
                                                                 else ())]  # b2 is 4.9.8's
    patch = "import os, rmqtool.recovery.intent as i\ni.begin = lambda *a, **k: os._exit(137)"
    assert _exits_at(args, patch) == 137
    assert (backup / "manifest.json").is_file() and not (backup / "intent.json").exists()
    assert tree_fingerprint(store) == before
    again = runner.invoke(app, [str(a) for a in args])
    assert again.exit_code == 0, again.output
    assert runner.invoke(app, ["undo", str(backup)]).exit_code == 0 and tree_fingerprint(store) == before


@pytest.mark.parametrize("left", ["killed before its intent record", "cut short, then undone"])
def test_an_undo_of_a_backup_no_repair_holds_refuses_a_store_written_since(left, tmp_path):
    """A backup whose repair left no state (``after``), no intent record and no store marker:
    killed between its manifest and its intent record (it changed nothing), or cut short and
    undone already. Undo put its old bytes back over what another repair and an append wrote
    since, removing the appended file. Refused (exit 5), the store as it is; --force undoes."""
    store = writable_copy(CRASH / "b2-garbage-tail-of-last-message" / "input" / "store", tmp_path / "store")
    before, backup = tree_fingerprint(store), tmp_path / "backup"
    if left == "killed before its intent record":
        patch = "import os, rmqtool.recovery.intent as i\ni.begin = lambda *a, **k: os._exit(137)"
        assert _exits_at(["recover", store, "--apply", "--backup-dir", backup], patch) == 137
    else:
        assert _killed("recover", store, "--apply", "--backup-dir", backup, after=2).returncode == -9
        assert runner.invoke(app, ["undo", str(backup)]).exit_code == 0
    assert read_manifest(backup).after is None and tree_fingerprint(store) == before
    assert runner.invoke(app, ["recover", str(store), "--apply", "--backup-dir", str(tmp_path / "b2")]).exit_code == 0
    _append(store, "written-since")
    since = tree_fingerprint(store)
    undone = runner.invoke(app, ["undo", str(backup)])
    assert undone.exit_code == ExitCode.LOCKED and "neither finished nor under way" in undone.stderr, undone.output
    assert tree_fingerprint(store) == since
    assert runner.invoke(app, ["undo", str(backup), "--force"]).exit_code == 0
    assert tree_fingerprint(store) == before


def test_an_undo_killed_writing_its_marker_leaves_no_name_once_run_again(tmp_path):
    """A repair killed after its marker, before its first change; its undo killed writing its own
    marker (the .tmp on disk, not renamed). Run again, the undo found every byte back ("already
    as before", exit 0) and left .rmqtool-unfinished.tmp in the store root."""
    store = writable_copy(CRASH / "b2-garbage-tail-of-last-message" / "input" / "store", tmp_path / "store")
    before, backup = tree_fingerprint(store), tmp_path / "backup"
    assert _killed("recover", store, "--apply", "--backup-dir", backup, after=1).returncode == -9
    patch = ("import json, os, rmqtool.recovery.intent as i\nw = i._write\n"
             "def k(p, d, keep_full=False):\n"
             f"    if p.name == {UNFINISHED_FILE!r} and d.get('operation') == 'undo':\n"
             "        p.with_name(p.name + '.tmp').write_text(json.dumps(d)); os._exit(137)\n"
             "    return w(p, d, keep_full)\n"
             "i._write = k")
    assert _exits_at(["undo", backup], patch) == 137
    assert (store / (UNFINISHED_FILE + ".tmp")).exists()
    again = runner.invoke(app, ["undo", str(backup), "-f", "json"])
    assert again.exit_code == 0 and json.loads(again.stdout)["already_as_before"] is True, again.output
    assert tree_fingerprint(store) == before


@pytest.mark.parametrize("family", ["rocketmq", "qmq"])
def test_recover_to_killed_clearing_its_marks_is_finished_by_the_same_command(family, tmp_path):
    """Killed after the copy's repair, before its provenance mark went (.rmqtool-copy-of): the
    same command refused the copy as a directory not empty (exit 2), the mark there for good.
    It plans the repaired copy again in place (nothing to change) and clears the mark; the copy
    is the one an uninterrupted run makes, and is never removed."""
    source = (writable_copy(E1, tmp_path / "store") if family == "rocketmq" else
              expand_store(FIXTURES / "qmq" / "crash" / "d-flipped-payload-byte-mid-log" / "input", tmp_path / "store"))
    reference, new = tmp_path / "reference", tmp_path / "new"
    assert _run("recover", source, "--apply", "--to", reference).exit_code == 0
    patch = "import os, rmqtool.recovery.intent as i\ni.end_copy = lambda root: os._exit(137)"
    assert _exits_at(["recover", source, "--apply", "--to", new], patch) == 137
    assert (new / ".rmqtool-copy-of").exists() and not (new / UNFINISHED_FILE).exists()
    again = _run("recover", source, "--apply", "--to", new)
    assert again.exit_code == 0, again.output
    assert not (new / ".rmqtool-copy-of").exists()
    made = ("lock", "index/")  # the lock's holder, and index files named for the clock when they were made
    assert ({n: h for n, h in tree_fingerprint(new).items() if not n.startswith(made)} ==
            {n: h for n, h in tree_fingerprint(reference).items() if not n.startswith(made)})


def test_an_undo_killed_after_its_bytes_is_finished_with_modes_and_times(tmp_path):
    """An undo killed at its first mtime put back: run again, it found every byte back and
    stopped there ("already as before"), leaving the repair's mtimes and modes on the files."""
    store = writable_copy(CRASH / "b2-garbage-tail-of-last-message" / "input" / "store", tmp_path / "store")
    aged_files(store)
    before, times, backup = tree_fingerprint(store), file_mtimes(store), tmp_path / "backup"
    assert runner.invoke(app, ["recover", str(store), "--apply", "--backup-dir", str(backup)]).exit_code == 0
    patch = "import os\nos.utime = lambda *a, **k: os._exit(137)"
    assert _exits_at(["undo", backup], patch) == 137
    assert runner.invoke(app, ["undo", str(backup)]).exit_code == 0
    assert tree_fingerprint(store) == before
    assert {k: v for k, v in file_mtimes(store).items() if k != "lock"} == {k: v for k, v in times.items()
                                                                            if k != "lock"}
