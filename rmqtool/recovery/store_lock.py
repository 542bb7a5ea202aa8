"""Taking a store's ``lock`` file: one writer at a time, a running broker included.

The broker holds ``FileChannel.tryLock(0, 1, false)`` on ``<store>/lock`` while it runs,
which the JDK takes on Linux with ``fcntl(F_SETLK)``: a POSIX record lock, so the lock
taken here is the same kind (``fcntl.lockf``, not ``flock``, which would not see the
broker's). Once the store may be written, :meth:`StoreLock.mark` writes the 4 bytes
``lock`` at position 0, as the broker does; a writer that is refused after taking the
lock (a store that needs recovery) has changed no byte and no mtime.

A process never conflicts with its own POSIX locks, and closing any descriptor of the file
drops them: so every lock taken here is entered in the read side's registry
(``store/lock.py``), which keeps writers in this process apart and lets readers ask who
holds the lock without opening the file.

A store without a ``lock`` file (every QMQ store: QMQ takes none; a RocketMQ store never
started) still has one writer at a time: every rmqtool writer also holds ``flock`` on the
store root directory. That makes no name a kill would leave, goes with the process, and is
not a lock any broker takes (a running QMQ broker is seen by its open files instead,
``store/qmq/live.py``). A writer holds its backup directory the same way while it works:
two repairs never fill one.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pathlib

from rmqtool.errors import FormatError, StoreAccessError, StoreLocked
from rmqtool.formats.markers import LOCK_CONTENT, LOCK_REGION_LENGTH, LOCK_REGION_START
from rmqtool.store.paths import LOCK_FILE
from rmqtool.store import lock as registry
from rmqtool.store.small_file import not_a_file


@contextlib.contextmanager
def held_for(root: str | os.PathLike):
    """The store's lock held while a writer that writes no lock bytes of its own works (a swap
    of whole files, an undo): another holder refuses it (StoreLocked) before anything is read
    for it, and nobody gets in while it works. A store without a lock file (a QMQ store, a
    RocketMQ one never started) is not given one: no name is made that a kill would leave; the
    root's flock (:func:`root_held`) keeps other rmqtool writers out."""
    path = pathlib.Path(root) / LOCK_FILE
    if not path.exists():
        with root_held(root):
            yield None
        return
    key = registry.file_key(path)
    held = _stores.get(key)
    if held is not None:  # taken again by the writer holding it (a redispatch's swap, a roll back)
        held[1] += 1
        try:
            yield held[0]
        finally:
            held[1] -= 1
        return
    lock = StoreLock(path)
    lock.acquire()
    _stores[key] = [lock, 1]
    try:
        yield lock
    finally:
        del _stores[key]
        lock.release()


# (st_dev, st_ino) of a lock file -> [the StoreLock held_for took, its holds in this process]
_stores: dict[tuple[int, int], list] = {}


# (st_dev, st_ino) of a directory held (a store root, a backup) -> [descriptor holding flock on it,
# how many holds in this process]
_roots: dict[tuple[int, int], list[int]] = {}


def root_held(root: str | os.PathLike):
    """``flock`` on the store root directory, for as long as a writer works: another rmqtool
    writer (which takes it too) is refused (StoreLocked, exit 5). Taken again in this process
    (a repair that first rolls back one cut short), it is already held. A filesystem that has
    no flock leaves the writer's other checks to stand."""
    return directory_held(pathlib.Path(root), "store directory", "is changing the store")


@contextlib.contextmanager
def directory_held(directory: pathlib.Path, what: str, busy: str):
    """``flock`` on ``directory`` (a store root, a backup directory a repair fills) while the
    block runs: another rmqtool writer is refused (StoreLocked, saying the holder ``busy``);
    a hold this process has already counts once more."""
    key = _hold_directory(directory, what, busy)
    try:
        yield
    finally:
        with registry.guard:
            held = _roots[key]
            held[1] -= 1
            if not held[1]:
                del _roots[key]
                if held[0] >= 0:
                    os.close(held[0])  # the flock goes with its last descriptor


def _hold_directory(directory: pathlib.Path, what: str, busy: str) -> tuple[int, int]:
    """``flock`` on a directory, entered in ``_roots`` (a hold this process has already counts
    once more); StoreLocked saying the other writer ``busy`` when another process holds it."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise StoreAccessError(f"cannot open the {what} ({exc.strerror})", directory) from None
    st = os.fstat(fd)
    key = (st.st_dev, st.st_ino)
    with registry.guard:
        held = _roots.get(key)
        if held is not None:
            os.close(fd)
            held[1] += 1
            return key
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                pid = registry.root_writer_pid(directory)
                who = f" (process {pid})" if pid else ""
                raise StoreLocked(f"another rmqtool writer{who} {busy}", directory) from None
            fd = -1  # no flock on this filesystem
        _roots[key] = [fd, 1]
    return key


def _forget_roots_in_child() -> None:
    _roots.clear()  # a forked child holds a descriptor of the parent's, not a hold of its own


os.register_at_fork(after_in_child=_forget_roots_in_child)


def refuse_held(view) -> None:
    """A writer's first question, before it reads what the store needs: a store a running broker
    (or another writer) holds is refused as :meth:`StoreLock.acquire` refuses it (exit 5), not
    for what its half-written end shows (taken again, for real, when the writer writes)."""
    pid = view.lock_holder
    if pid is not None:
        who = f"process {pid}" if pid else "another process"
        raise StoreLocked(f"the store is locked by {who} (a running broker or another writer)", view.paths.lock)


class StoreLock:
    """An exclusive lock on a store's ``lock`` file, released by :meth:`release` or exit."""

    def __init__(self, path: str | os.PathLike):
        self.path = pathlib.Path(path)
        self.fd: int | None = None
        self._key: tuple[int, int] | None = None
        self._root = None  # the store root's flock, held with the lock

    def acquire(self) -> None:
        """Take the lock (creating the file when absent) or raise StoreLocked, naming the
        holder's PID when the OS says it. Writes nothing into the file. The store root's flock
        is taken first (:func:`root_held`): a writer on the store before it had a lock file
        keeps it."""
        with contextlib.ExitStack() as stack:
            stack.enter_context(root_held(self.path.parent))
            self._take()
            self._root = stack.pop_all()  # given back by release

    def _take(self) -> None:
        with registry.guard:  # the check, the open and the lock: no other thread between them
            key = registry.file_key(self.path)
            if key is not None and registry.held_fd(key) is not None:
                # refused before opening: closing a descriptor of it would drop the lock held
                raise StoreLocked("the store is already open for writing in this process", self.path)
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise StoreAccessError(f"cannot open the lock file ({exc.strerror})", self.path) from None
            st = os.fstat(fd)
            kind = not_a_file(st.st_mode)
            if kind is not None:  # nothing holds a lock there, and nothing can be written
                os.close(fd)
                raise FormatError(f"{kind} where the lock file should be", self.path)
            key = (st.st_dev, st.st_ino)
            if registry.held_fd(key) is not None:
                # the path was swapped for a link to a file held here since the stat: leave this
                # descriptor open (closing it would drop that lock)
                raise StoreLocked("the store is already open for writing in this process", self.path)
            try:
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, LOCK_REGION_LENGTH, LOCK_REGION_START)
                except OSError as exc:
                    if exc.errno not in (errno.EACCES, errno.EAGAIN):
                        raise StoreAccessError(f"cannot lock ({exc.strerror})", self.path) from None
                    pid = registry.holder_pid(fd)
                    who = f"process {pid}" if pid else "another process"
                    raise StoreLocked(f"the store is locked by {who} (a running broker or another writer)",
                                      self.path) from None
            except BaseException:
                os.close(fd)
                raise
            registry.register(key, fd)
            self.fd, self._key = fd, key

    def mark(self) -> None:
        """Write ``lock`` at position 0 and force it, as the broker does once it holds the lock."""
        try:
            os.pwrite(self.fd, LOCK_CONTENT, 0)
            os.fsync(self.fd)
        except OSError as exc:
            raise StoreAccessError(f"cannot write the lock file ({exc.strerror})", self.path) from None

    def release(self) -> None:
        if self.fd is None:
            return
        with registry.guard:
            registry.unregister(self._key)
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_UN, LOCK_REGION_LENGTH, LOCK_REGION_START)
            finally:
                os.close(self.fd)
                self.fd = None
                root, self._root = self._root, None
                root.close()

    @property
    def held(self) -> bool:
        return self.fd is not None

    def __enter__(self) -> "StoreLock":
        self.acquire()
        self.mark()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
