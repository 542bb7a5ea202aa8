"""The store's ``lock`` file: one writer at a time, a running broker included.

The broker holds ``FileChannel.tryLock(0, 1, false)`` on ``<store>/lock`` for as long as it
runs. On Linux the JDK implements that with ``fcntl(F_SETLK)``, a POSIX record lock, so the
lock taken here is the same kind (``fcntl.lockf``, not ``flock``, which would not see the
broker's). Then, like the broker, the 4 bytes ``lock`` are written at position 0.

POSIX record locks belong to a process, not to a file descriptor, and a process never
conflicts with itself; so writers in this process are also kept apart with a registry.
Note also that closing *any* descriptor of the lock file drops the process's lock: nothing
in rmqtool opens the lock file except this module.
"""
from __future__ import annotations

import errno
import fcntl
import os
import pathlib
import struct
import threading

from rmqtool.errors import StoreAccessError, StoreLocked
from rmqtool.formats.markers import LOCK_CONTENT, LOCK_REGION_LENGTH, LOCK_REGION_START

_held: dict[tuple[int, int], "StoreLock"] = {}
_held_guard = threading.Lock()

# struct flock on Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
_FLOCK = struct.Struct("hhqqi4x")


class StoreLock:
    """An exclusive lock on a store's ``lock`` file, released by :meth:`release` or exit."""

    def __init__(self, path: str | os.PathLike):
        self.path = pathlib.Path(path)
        self.fd: int | None = None
        self._key: tuple[int, int] | None = None

    def acquire(self) -> None:
        """Take the lock or raise StoreLocked (naming the holder's PID when the OS says it)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreAccessError(f"cannot open the lock file ({exc.strerror})", self.path) from None
        try:
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino)
            with _held_guard:
                if key in _held:
                    raise StoreLocked("the store is already open for writing in this process", self.path)
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, LOCK_REGION_LENGTH, LOCK_REGION_START)
                except OSError as exc:
                    if exc.errno not in (errno.EACCES, errno.EAGAIN):
                        raise StoreAccessError(f"cannot lock ({exc.strerror})", self.path) from None
                    pid = holder_pid(fd)
                    who = f"process {pid}" if pid else "another process"
                    raise StoreLocked(f"the store is locked by {who} (a running broker or another writer)",
                                      self.path) from None
                _held[key] = self
            self.fd, self._key = fd, key
        except BaseException:
            if self.fd is None:
                os.close(fd)
            raise
        try:
            os.pwrite(fd, LOCK_CONTENT, 0)  # as the broker does, then forces it
            os.fsync(fd)
        except OSError as exc:
            self.release()
            raise StoreAccessError(f"cannot write the lock file ({exc.strerror})", self.path) from None

    def release(self) -> None:
        if self.fd is None:
            return
        with _held_guard:
            _held.pop(self._key, None)
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, LOCK_REGION_LENGTH, LOCK_REGION_START)
        finally:
            os.close(self.fd)
            self.fd = None

    @property
    def held(self) -> bool:
        return self.fd is not None

    def __enter__(self) -> "StoreLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def holder_pid(fd: int) -> int | None:
    """The PID holding a conflicting lock on the broker's byte, if the OS tells (F_GETLK)."""
    try:
        query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, LOCK_REGION_START, LOCK_REGION_LENGTH, 0)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
        l_type, _, _, _, pid = _FLOCK.unpack(answer)
    except (OSError, struct.error):
        return None
    return pid if l_type != fcntl.F_UNLCK and pid > 0 else None


def is_locked(path: str | os.PathLike) -> int | None:
    """Whether the store lock is held: the holder's PID (0 when the OS does not say), None
    when free. Never creates the file, and never opens it when this process holds it (closing
    that descriptor would drop the lock)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreAccessError(f"cannot stat the lock file ({exc.strerror})", path) from None
    with _held_guard:
        if (st.st_dev, st.st_ino) in _held:
            return os.getpid()
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise StoreAccessError(f"cannot open the lock file ({exc.strerror})", path) from None
    try:
        query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, LOCK_REGION_START, LOCK_REGION_LENGTH, 0)
        l_type, _, _, _, pid = _FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_GETLK, query))
    except OSError:
        return None
    finally:
        os.close(fd)
    return None if l_type == fcntl.F_UNLCK else max(pid, 0)
