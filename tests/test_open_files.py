"""A store of more queues than an operator's shell lets a process open files: the engine keeps
the last file of each queue it dispatches to open (two descriptors: its own and Python's
mmap's), as the broker keeps each mapped, and raises its soft limit to the hard one as the
broker's JVM does. Where the hard limit is too low all the same, the error says so and what to
do, and the half-changed store is undone or finished as any interrupted repair is."""
from __future__ import annotations

import pathlib
import resource
import shutil
import subprocess
import sys
import textwrap

from helpers import tree_fingerprint

QUEUES = 100  # two descriptors each: more than the soft limit below allows
SOFT = 64


def _python(code: str, soft: int, hard: int | None = None, cwd=None) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter whose open files limit is (soft, hard: this one's when None)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1] if hard is None else hard

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          preexec_fn=limit, cwd=cwd, timeout=300)


def _build(root: pathlib.Path) -> None:
    r = _python(f"""
        from rmqtool.engine.store import Store
        from rmqtool.engine.producer import producer_message
        with Store.open({str(root)!r}, writable=True, commitlog_size=1 << 20, cq_size=6000, index_slots=1000,
                        index_entries=4000) as store:
            store.append_many([producer_message(f"Topic{{i}}", b"x" * 50, keys=f"k{{i}}", queue_id=0)
                               for i in range({QUEUES})])
        """, SOFT)
    assert r.returncode == 0, r.stderr


def test_the_engine_raises_its_soft_limit_to_the_hard_one(tmp_path):
    _build(tmp_path / "store")  # would stop with "Too many open files" at the soft limit
    assert len(list((tmp_path / "store" / "consumequeue").iterdir())) == QUEUES
    r = _python(f"""
        import resource
        from rmqtool.engine.store import Store
        with Store.open({str(tmp_path / "store")!r}, writable=True):
            print(*resource.getrlimit(resource.RLIMIT_NOFILE))
        """, SOFT)
    soft, hard = map(int, r.stdout.split())
    assert soft == hard or hard == resource.RLIM_INFINITY


def test_a_hard_limit_too_low_is_said_and_the_store_is_undone_or_finished(tmp_path):
    root = tmp_path / "store"
    _build(root)
    shutil.rmtree(root / "consumequeue")  # recover --apply dispatches every queue again
    before = tree_fingerprint(root)
    backup = tmp_path / "backup"
    run = f"""
        import sys
        from rmqtool.cli.app import main
        sys.argv = ["rmqtool", "recover", {str(root)!r}, "--apply", "--backup-dir", {str(backup)!r},
                    "--assume-defaults"]
        main()
        """
    r = _python(run, SOFT, SOFT)
    assert r.returncode == 8, r.stderr
    lines = r.stderr.splitlines()
    assert "Too many open files" in lines[0] and "Traceback" not in r.stderr
    assert f"may have {SOFT} files open (hard limit {SOFT})" in lines[1] and "ulimit -Hn" in lines[1]
    assert "half changed" in lines[2] and f"rmqtool undo {backup}" in lines[2]
    finish = f"""
        import sys
        from rmqtool.cli.app import main
        sys.argv = ["rmqtool", "recover", {str(root)!r}, "--apply", "--assume-defaults"]
        main()
        """
    done = _python(finish, SOFT)  # the hard limit raised: the command the line names finishes it
    assert done.returncode == 0, done.stderr
    assert len(list((root / "consumequeue").iterdir())) == QUEUES
    undo = _python(f"""
        import sys
        from rmqtool.cli.app import main
        sys.argv = ["rmqtool", "undo", {str(backup)!r}]
        main()
        """, SOFT, SOFT)
    assert undo.returncode == 0, undo.stderr
    assert tree_fingerprint(root) == before
