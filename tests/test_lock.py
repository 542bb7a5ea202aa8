"""The store lock: taken the way the broker takes it, and never dropped by reading who holds it.

POSIX record locks drop when the process closes any descriptor of the file, and a forked
child holds none of its parent's: each test ends with a forked child that must be refused.
"""
from __future__ import annotations

import os
import pathlib

import pytest

from rmqtool.engine.producer import producer_message
from rmqtool.engine.store import Store
from rmqtool.errors import StoreLocked

SMALL = dict(commitlog_size=32 * 1024, cq_size=400, index_slots=32, index_entries=120)


def _child_cannot_lock(root: pathlib.Path) -> None:
    """A forked child: a second writable open is refused, and so is the lock taken the way
    the broker takes it (fcntl on byte 0)."""
    import fcntl
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with the engine's threads running
        pid = os.fork()
    if pid == 0:
        code = 0
        try:
            try:
                Store.open(root, writable=True)
                code |= 1
            except StoreLocked:
                pass
            fd = os.open(root / "lock", os.O_RDWR)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
                code |= 2
            except OSError:
                pass
        except BaseException:
            code |= 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child could take the lock (1: Store.open, 2: fcntl)"


def test_info_and_read_markers_do_not_drop_the_writers_lock(tmp_path):
    """The bug: read_markers opened and closed the lock file, and closing any descriptor of
    it drops the process's POSIX lock: a second writer could then open the store."""
    from rmqtool.inspect.inventory import store_info
    from rmqtool.store.checkpoint import read_markers
    root = tmp_path / "store"
    with Store.open(root, writable=True, **SMALL) as store:
        store.append(producer_message("T", b"x"))
        markers = read_markers(root)
        assert markers.lock.content == b"lock" and markers.locked_by == os.getpid()
        store_info(root)
        _child_cannot_lock(root)


def test_a_refused_second_writer_in_the_process_does_not_drop_the_lock(tmp_path):
    """A second writable open in the same process used to open the lock file and close it on
    refusal, which dropped the first writer's lock."""
    root = tmp_path / "store"
    with Store.open(root, writable=True, **SMALL):
        with pytest.raises(StoreLocked):
            Store.open(root, writable=True)
        _child_cannot_lock(root)


def test_a_store_without_a_lock_file_has_one_rmqtool_writer_at_a_time(tmp_path):
    """A store with no lock file yet (never started; QMQ takes none): a writer that would make
    one is refused while another rmqtool writer works on the store, and makes no lock file;
    in one process the hold is taken again (a repair rolling back one cut short), not refused."""
    import subprocess
    import sys
    from rmqtool.recovery.store_lock import StoreLock, held_for
    root = tmp_path / "store"
    root.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from rmqtool.recovery.store_lock import held_for\n"
                               "with held_for(sys.argv[1]):\n print('held', flush=True); sys.stdin.read()", str(root)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreLocked, match=f"process {holder.pid}"):
            StoreLock(root / "lock").acquire()
        with pytest.raises(StoreLocked):
            with held_for(root):
                pass
        assert not (root / "lock").exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    with held_for(root):
        with held_for(root):
            lock = StoreLock(root / "lock")
            lock.acquire()
            lock.release()
    with held_for(root):  # every hold given back: taken again
        pass
