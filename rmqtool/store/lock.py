"""Who holds a store's ``lock`` file, read without ever dropping a lock this process holds.

The broker holds ``FileChannel.tryLock(0, 1, false)`` on ``<store>/lock`` for as long as it
runs; on Linux the JDK takes that with ``fcntl(F_SETLK)``, a POSIX record lock (the write
side, ``recovery/store_lock.py``, takes the same kind).

POSIX record locks belong to a process, and closing *any* descriptor of the file drops
every lock the process holds on it. So the locks this process holds are kept in a
registry (by st_dev/st_ino, with the descriptor that holds each): a question about one of
them is answered from the registry and that descriptor, never by opening the file. Only
a file this process holds no lock on is opened (to ask F_GETLK who holds it, or to read
it), and that under the registry's guard, so no lock can be taken meanwhile.
"""
from __future__ import annotations

import fcntl
import os
import struct
import threading

from rmqtool.errors import FormatError, StoreAccessError
from rmqtool.formats.markers import LOCK_REGION_LENGTH, LOCK_REGION_START
from rmqtool.store.small_file import open_regular

# (st_dev, st_ino) -> the descriptor holding this process's lock on that file
_held: dict[tuple[int, int], int] = {}
guard = threading.RLock()  # held while the registry changes, or while a lock file is opened here


def _forget_in_child() -> None:
    """A forked child holds none of its parent's POSIX locks: nor must its registry say so."""
    _held.clear()


os.register_at_fork(after_in_child=_forget_in_child)

# struct flock on Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
_FLOCK = struct.Struct("hhqqi4x")


def register(key: tuple[int, int], fd: int) -> None:
    """The write side took the lock on the file ``key`` with ``fd`` (call with ``guard`` held)."""
    _held[key] = fd


def unregister(key: tuple[int, int]) -> None:
    _held.pop(key, None)


def held_fd(key: tuple[int, int]) -> int | None:
    """The descriptor holding this process's lock on file ``key``, or None."""
    return _held.get(key)


def file_key(path: str | os.PathLike) -> tuple[int, int] | None:
    """(st_dev, st_ino) of a file, None when it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreAccessError(f"cannot stat the lock file ({exc.strerror})", path) from None
    return st.st_dev, st.st_ino


def holder_pid(fd: int) -> int | None:
    """The PID holding a lock on the broker's byte that conflicts with ours (F_GETLK): None
    when nobody does, 0 when the OS does not say who."""
    query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, LOCK_REGION_START, LOCK_REGION_LENGTH, 0)
    try:
        l_type, _, _, _, pid = _FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_GETLK, query))
    except (OSError, struct.error):
        return None
    return None if l_type == fcntl.F_UNLCK else max(pid, 0)


def is_locked(path: str | os.PathLike) -> int | None:
    """Whether the store lock is held: the holder's PID (this one when this process holds
    it; 0 when the OS does not say), None when free. Never creates the file, and never
    opens it when this process holds it."""
    with guard:
        key = file_key(path)
        if key is None:
            return None
        if key in _held:
            return os.getpid()
        try:
            fd = open_regular(path, "lock file")  # a FIFO in its place: not waited on
        except (FileNotFoundError, FormatError):  # none, or no file: nobody holds a lock on it
            return None
        except OSError as exc:
            raise StoreAccessError(f"cannot open the lock file ({exc.strerror})", path) from None
        try:
            return holder_pid(fd)
        finally:
            os.close(fd)  # safe: this process holds no lock on the file


def held_descriptor(path: str | os.PathLike) -> int | None:
    """The descriptor holding this process's lock on ``path`` (read through it, never close
    it), or None: a file this process holds no lock on, safe to open and close."""
    with guard:
        key = file_key(path)
        return None if key is None else _held.get(key)


def read_lock_file(path: str | os.PathLike, limit: int = 4096) -> bytes | None:
    """Up to ``limit`` bytes of the lock file (None when absent): through the descriptor that
    holds this process's lock when there is one, else with a read under the guard."""
    with guard:
        key = file_key(path)
        if key is None:
            return None
        try:
            fd = _held.get(key)
            if fd is not None:
                return os.pread(fd, limit, 0)
            fd = open_regular(path, "lock file")
            try:
                return os.pread(fd, limit, 0)
            finally:
                os.close(fd)
        except (FileNotFoundError, FormatError):
            return None
        except OSError as exc:
            raise StoreAccessError(f"cannot read the lock file ({exc.strerror})", path) from None


def root_writer_pid(root: str | os.PathLike) -> int | None:
    """The rmqtool writer holding ``flock`` on the store root directory (every writer takes it,
    ``recovery/store_lock.root_held``), as /proc/locks says (``N: FLOCK ADVISORY WRITE pid
    maj:min:inode start end``); None when none does or the OS does not say."""
    try:
        st = os.stat(root)
    except OSError:
        return None
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == dev and parts[4].isdigit():
                    return int(parts[4])
    except OSError:
        pass
    return None
