"""kill -9 at a point of a QMQ repair (recover --apply), of its undo, or of a recover --to:
the store is never left so that neither way out brings it back. Running the same command
again leaves it byte for byte as a run never killed does; ``rmqtool undo BACKUP`` gives back
every name, byte, mode and mtime it had before the repair; and every command on the half
changed store says so in one line, naming both (the RocketMQ side: test_trust_undo.py).

The kill points (RMQTOOL_KILL_AFTER, recovery/intent.py) are a few of each plan's: crash/d's
plan moves checkpoints out, zeroes the message log's tail, swaps five consumer logs in and
writes a checkpoint last; crash/e's rewrites one consumer log; crash/j's cuts a torn record.
Undo's "as it was" holds for names too: a file the repair would replace that is a symbolic
link is refused before anything is written."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys

import pytest

from conftest import FIXTURES, REPO
from helpers import aged_files, cli_runner, copy_tree, expand_store, file_mtimes, tree_fingerprint
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode
from rmqtool.store.paths import UNFINISHED_FILE
from rmqtool.store.unfinished import read_unfinished

CRASH = FIXTURES / "qmq" / "crash"
D, E, J = "d-flipped-payload-byte-mid-log", "e-deleted-consumerlog-file", "j-torn-last-record"
runner = cli_runner()


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _killed(*args, after: int) -> subprocess.CompletedProcess:
    """rmqtool in a process that SIGKILLs itself at its ``after``-th change step."""
    env = dict(os.environ, RMQTOOL_KILL_AFTER=str(after), PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "rmqtool", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=120)


def tree(root: pathlib.Path) -> dict:
    """Every name under ``root``: a file's size and bytes (tree_fingerprint), and every mode."""
    return {name: (print_, stat.S_IMODE((root / name).lstat().st_mode))
            for name, print_ in tree_fingerprint(root).items()}


def _store(variant: str, at: pathlib.Path) -> tuple[pathlib.Path, tuple]:
    """The variant's store as QMQ left it, its files aged (undo gives mtimes back); (root, its state)."""
    root = expand_store(CRASH / variant / "input", at)
    aged_files(root)
    return root, (tree(root), file_mtimes(root))


@pytest.fixture(scope="module")
def repaired(tmp_path_factory):
    """Each variant's store as a recover --apply never killed leaves it."""
    done = {}

    def get(variant: str) -> dict:
        if variant not in done:
            root, _ = _store(variant, tmp_path_factory.mktemp(variant[:1]) / "store")
            r = _run("recover", root, "--apply", "--backup-dir", root.parent / "backup")
            assert r.exit_code == 0, r.stderr
            done[variant] = tree(root)
        return done[variant]
    return get


def _says_unfinished(root: pathlib.Path, operation: str, finish: str, undo: str) -> None:
    """A read command says it in one line, naming the command that finishes it and the one that undoes it."""
    for args in (["info", root], ["verify", root], ["recover", root]):
        r = _run(*args)
        notes = [line for line in r.stderr.splitlines() if f"interrupted {operation}" in line]
        assert len(notes) == 1 and finish in notes[0] and undo in notes[0], (args, r.stderr)


@pytest.mark.parametrize("variant, after", [(D, 4), (D, 7), (D, 10), (E, 2), (J, 2)])
def test_a_killed_apply_is_finished_by_running_it_again_or_undone(variant, after, repaired, tmp_path):
    root, before = _store(variant, tmp_path / "store")
    backup = tmp_path / "backup"
    k = _killed("recover", root, "--apply", "--backup-dir", backup, after=after)
    assert k.returncode == -9, k.stderr
    assert (root / UNFINISHED_FILE).exists() and (backup / "intent.json").exists()
    _says_unfinished(root, "recover", f"rmqtool recover {root} --apply", f"rmqtool undo {backup}")
    saved = tmp_path / "killed"
    copy_tree(tmp_path, saved, ignore=shutil.ignore_patterns("killed"))
    # the same command again finishes it: the store as a run never killed leaves it...
    r = _run("recover", root, "--apply", "-f", "json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["applied"]["backup_dir"] == str(backup)
    assert tree(root) == repaired(variant) and read_unfinished(root) is None
    assert _run("undo", backup).exit_code == 0  # and its backup holds every original byte still
    assert (tree(root), file_mtimes(root)) == before
    # ...or undo (from the killed state) gives it back as it was
    for name in ("store", "backup"):
        shutil.rmtree(tmp_path / name)
        copy_tree(saved / name, tmp_path / name)
    u = _run("undo", backup)
    assert u.exit_code == 0, u.stderr
    assert (tree(root), file_mtimes(root)) == before
    assert read_unfinished(root) is None and not (backup / "intent.json").exists()


@pytest.mark.parametrize("after", [1, 6])
def test_a_killed_undo_is_finished_by_undoing_again(after, tmp_path):
    root, before = _store(D, tmp_path / "store")
    backup = tmp_path / "backup"
    assert _run("recover", root, "--apply", "--backup-dir", backup).exit_code == 0
    k = _killed("undo", backup, after=after)
    assert k.returncode == -9, k.stderr
    _says_unfinished(root, "undo", f"rmqtool undo {backup}", f"rmqtool recover {root} --apply")
    again = _run("recover", root, "--apply")  # not a repair over a half undone store
    assert again.exit_code == ExitCode.LOCKED and f"rmqtool undo {backup}" in again.stderr
    assert "Traceback" not in again.stderr
    assert "rmqtool: error: " in again.stderr and "not recovered: " in again.stderr  # as RocketMQ's says it
    u = _run("undo", backup)
    assert u.exit_code == 0, u.stderr
    assert (tree(root), file_mtimes(root)) == before and read_unfinished(root) is None


@pytest.mark.parametrize("after", [1, 6])
def test_a_killed_recover_to_is_finished_by_the_same_command(after, repaired, tmp_path):
    root, before = _store(D, tmp_path / "store")
    copy = tmp_path / "copy"
    k = _killed("recover", root, "--apply", "--to", copy, after=after)
    assert k.returncode == -9, k.stderr
    assert tree(root) == before[0]  # the store itself is never written
    marker = read_unfinished(copy)
    assert marker is not None and marker.operation == "recover"
    r = _run("recover", root, "--apply", "--to", copy)
    assert r.exit_code == 0, r.stderr
    assert tree(copy) == repaired(D) and tree(root) == before[0]


def test_a_diff_of_a_half_changed_store_says_so(tmp_path):
    """diff reads two stores: one an interrupted repair left half changed is no store to compare
    as it is (its bytes are neither the store before nor after): it says so as every reader does."""
    root, _ = _store(D, tmp_path / "store")
    other = expand_store(CRASH / D / "input", tmp_path / "other")
    backup = tmp_path / "backup"
    assert _killed("recover", root, "--apply", "--backup-dir", backup, after=7).returncode == -9
    for args in ([root, other], [other, root]):
        r = _run("diff", *args)
        notes = [line for line in r.stderr.splitlines() if "interrupted recover" in line]
        assert len(notes) == 1 and f"rmqtool undo {backup}" in notes[0], r.stderr


@pytest.mark.parametrize("linked", ["consumerlog/crash.order/00000000000000000000",
                                    "checkpoint/message-checkpoint.00000000000000105527"])
def test_a_file_the_repair_would_replace_or_move_out_that_is_a_symbolic_link_is_refused(linked, tmp_path):
    """crash/d's repair swaps a new crash.order consumer log in and moves the latest checkpoints
    out. Either one a symbolic link (a file kept on another disk): the rename or the move dropped
    the link, and undo put the original bytes back at the link's target, not in the store, which
    kept the repaired consumer log (or lost the checkpoint's name), undo saying it was done.
    Refused before anything is written, as a RocketMQ repair refuses it (recovery/apply.py)."""
    root, _ = _store(D, tmp_path / "store")
    kept = tmp_path / "disk" / "file"
    kept.parent.mkdir()
    shutil.move(root / linked, kept)
    os.symlink(kept, root / linked)
    before = tree(root), tree(kept.parent)
    r = _run("recover", root, "--apply", "--backup-dir", tmp_path / "backup")
    assert r.exit_code == ExitCode.BAD_INPUT, r.stderr
    assert "symbolic link" in r.stderr and str(root / linked) in r.stderr and "Traceback" not in r.stderr
    assert (tree(root), tree(kept.parent)) == before and not (tmp_path / "backup").exists()
