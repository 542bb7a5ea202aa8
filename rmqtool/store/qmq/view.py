"""A QMQ store, opened once: its root checked, whether a process holds it, and whether an
interrupted repair left it half changed. What the commands read of it (logs, checkpoints,
tablets) is read by the family's own modules from this view's root."""
from __future__ import annotations

import dataclasses
import functools
import os
import pathlib

from rmqtool.errors import NotAStore, StoreNotFound
from rmqtool.store.family import QMQ, Family
from rmqtool.store.lock import root_writer_pid
from rmqtool.store.qmq.live import holder_pid
from rmqtool.store.unfinished import Unfinished, read_unfinished


@dataclasses.dataclass(frozen=True)
class LiveQmqStore:
    root: pathlib.Path
    pid: int
    writer: bool = False  # the holder is an rmqtool writer (its flock on the root), not a broker

    @property
    def holder(self) -> str:
        return f"an rmqtool writer (PID {self.pid})" if self.writer else f"PID {self.pid} (a running QMQ broker?)"

    def note(self) -> str:
        return (f"rmqtool: {self.root} is live: {self.holder} has its files open; "
                f"what it writes while rmqtool reads may show as damage at the logs' ends")

    def is_moving(self, finding) -> bool:
        return False  # QMQ keeps no written end a reader could take: nothing is left out


class QmqView:
    """One QMQ store root, read once (answers kept)."""

    family: Family = QMQ

    def __init__(self, root: pathlib.Path):
        self.root = root

    def __repr__(self) -> str:
        return f"QmqView({str(self.root)!r})"

    @functools.cached_property
    def live(self) -> LiveQmqStore | None:
        writer = root_writer_pid(self.root)
        if writer is not None and writer != os.getpid():
            return LiveQmqStore(self.root, writer, writer=True)
        pid = holder_pid(self.root)
        return LiveQmqStore(self.root, pid) if pid is not None else None

    @functools.cached_property
    def unfinished(self) -> Unfinished | None:
        return read_unfinished(self.root)


def open_qmq_store(path: str | os.PathLike) -> QmqView:
    """The view of the QMQ store at ``path`` (a missing path exit 8; not a QMQ store root exit 4)."""
    root = pathlib.Path(path)
    if not root.exists():
        raise StoreNotFound("no such directory", root)
    if not root.is_dir() or not QMQ.holds(root):
        raise NotAStore("not a QMQ store root: no messagelog/, consumerlog/ or actionlog/", root)
    return QmqView(root)


def qmq_root_of(path: str | os.PathLike) -> pathlib.Path | None:
    """The QMQ store root ``path`` is or lies in (the root, a log directory, a file), or None."""
    path = pathlib.Path(path)
    for candidate in (path, *path.parents):
        if candidate.is_dir() and QMQ.holds(candidate):
            return candidate
    return None


def require_qmq_root(path: str | os.PathLike, command: str) -> pathlib.Path:
    """The root of the QMQ store ``path`` lies in (a missing path exit 8; none exit 4)."""
    path = pathlib.Path(path)
    if not path.exists():
        raise StoreNotFound("no such file or directory", path)
    root = qmq_root_of(path)
    if root is None:
        raise NotAStore(f"not in a QMQ store ({command} reads QMQ's messagelog/, consumerlog/, actionlog/)", path)
    return root
