"""Whether a running QMQ broker holds a store.

QMQ takes no lock file: ``LogSegment`` keeps a file channel open on every segment it maps
for as long as the broker runs. So a store is held when a process has one of its files
open or mapped, as ``/proc/<pid>/fd`` and ``/proc/<pid>/maps`` show (Linux; elsewhere this
says nothing and the writers' other checks stand). Only this process's own descriptors are
left out: a reader of the store is not its holder.
"""
from __future__ import annotations

import os
import pathlib

PROC = pathlib.Path("/proc")


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _holds(pid_dir: pathlib.Path, root: str) -> bool:
    try:
        for fd in os.scandir(pid_dir / "fd"):
            try:
                if _under(os.readlink(fd.path), root):
                    return True
            except OSError:
                continue
    except OSError:
        pass
    try:
        with open(pid_dir / "maps", encoding="utf-8", errors="replace") as maps:
            text = maps.read()
    except OSError:
        return False
    if root not in text:  # most processes: no line can name a file under root
        return False
    for line in text.split("\n"):
        parts = line.split(None, 5)
        if len(parts) == 6 and _under(parts[5].removesuffix(" (deleted)"), root):
            return True
    return False


def holder_pid(root: str | os.PathLike) -> int | None:
    """A process that has a file of the store open or mapped (not this one), or None."""
    if not PROC.is_dir():
        return None
    real = os.path.realpath(root)
    me = os.getpid()
    for entry in os.scandir(PROC):
        if entry.name.isdigit() and int(entry.name) != me and _holds(pathlib.Path(entry.path), real):
            return int(entry.name)
    return None
