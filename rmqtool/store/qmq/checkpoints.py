"""QMQ's checkpoint snapshots as ``SnapshotStore`` loads them (``checkpoint/``).

Every file whose name starts with the prefix is read; one whose version (the number after
the prefix) or text fails to parse is skipped, and the highest remaining version is the one
the broker's start uses. Layouts in ``formats/qmq/checkpoint.py``.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Callable, Generic, TypeVar

from rmqtool.formats.qmq.checkpoint import (ACTION_CHECKPOINT_PREFIX, MESSAGE_CHECKPOINT_PREFIX, ActionCheckpoint,
                                            CheckpointSyntaxError, MessageCheckpoint, parse_action_checkpoint,
                                            parse_message_checkpoint)
from rmqtool.errors import FormatError
from rmqtool.formats.qmq.java import NumberFormatError, java_parse
from rmqtool.store.small_file import open_regular

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot(Generic[T]):
    path: pathlib.Path
    version: int | None  # the file name's number; None when it is not one
    value: T | None  # the parsed checkpoint; None when the serde refuses it
    error: str | None  # why it is skipped


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshots(Generic[T]):
    all: tuple[Snapshot[T], ...]

    @property
    def loaded(self) -> Snapshot[T] | None:
        """``SnapshotStore.latestSnapshot`` after the load: the highest version that parsed."""
        good = [s for s in self.all if s.value is not None and s.version is not None]
        return max(good, key=lambda s: s.version) if good else None

    @property
    def skipped(self) -> tuple[Snapshot[T], ...]:
        return tuple(s for s in self.all if s.error is not None)


def _read(path: pathlib.Path) -> bytes:
    """A checkpoint file's bytes (a FIFO or a directory in its place: FormatError, never waited on)."""
    with open(open_regular(path, "checkpoint file"), "rb") as f:
        return f.read()


def _load(directory: pathlib.Path, prefix: str, parse: Callable[[bytes], T]) -> Snapshots[T]:
    found = []
    if directory.is_dir():
        for path in sorted(directory.iterdir()):
            if not path.name.startswith(prefix):
                continue
            try:
                version = java_parse(path.name[len(prefix):])
            except NumberFormatError as exc:
                found.append(Snapshot(path, None, None, str(exc)))
                continue
            try:
                found.append(Snapshot(path, version, parse(_read(path)), None))
            except (CheckpointSyntaxError, OSError, FormatError) as exc:
                found.append(Snapshot(path, version, None, str(exc)))
    return Snapshots(tuple(found))


def message_checkpoints(store: str | os.PathLike) -> Snapshots[MessageCheckpoint]:
    return _load(pathlib.Path(store) / "checkpoint", MESSAGE_CHECKPOINT_PREFIX, parse_message_checkpoint)


def action_checkpoints(store: str | os.PathLike) -> Snapshots[ActionCheckpoint]:
    return _load(pathlib.Path(store) / "checkpoint", ACTION_CHECKPOINT_PREFIX, parse_action_checkpoint)
