"""Reading the store root's shutdown state: ``checkpoint``, ``abort``, ``abort.bak`` and ``lock``.

Together they say how the last broker stopped and where recovery would start: an
``abort`` file means no clean shutdown (abnormal recovery), and the checkpoint's
timestamps choose the commit log file recovery rescans from. Read-only: files are
read with plain reads, never opened for writing, never locked; ``lock`` is read and
asked about only through ``store/lock.py`` (opening it here could drop a lock this
process holds).
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

from rmqtool.errors import FormatError, StoreNotFound
from rmqtool.findings import (ABORT_FILE_PRESENT, ABORT_FILE_UNEXPECTED, CHECKPOINT_INVALID, LOCK_FILE_UNEXPECTED,
                              TRAILING_GARBAGE, Finding)
from rmqtool.formats.checkpoint import (CHECKPOINT_FILE_SIZE, Checkpoint4, Checkpoint5, min_timestamp,
                                        min_timestamp_index)
from rmqtool.formats.derive import struct_of
from rmqtool.formats.markers import LOCK_CONTENT, parse_pid
from rmqtool.store.lock import is_locked, read_lock_file
from rmqtool.store.paths import StorePaths
from rmqtool.store.small_file import read_head

CHECKPOINT = struct_of(Checkpoint5)


# abort, abort.bak and lock hold a PID or "lock": a larger file is damage, and its first
# bytes say all its content can (memory never follows a damaged file's size).
MARKER_READ_LIMIT = 4096


def _read_file(path: pathlib.Path, limit: int = MARKER_READ_LIMIT) -> bytes:
    """The file's bytes, at most the first ``limit`` of them."""
    return read_head(path, limit, what=f"{path.name} file")[0]


@dataclasses.dataclass(slots=True, frozen=True)
class StoreCheckpoint:
    path: str
    physic_msg_timestamp: int
    logics_msg_timestamp: int
    index_msg_timestamp: int
    master_flushed_offset: int  # 5.x; 0 in a 4.x file
    confirm_phy_offset: int  # 5.x; 0 in a 4.x file
    first_40_bytes: bytes
    findings: tuple[Finding, ...]

    @property
    def min_timestamp(self) -> int:
        return min_timestamp(self.physic_msg_timestamp, self.logics_msg_timestamp)

    @property
    def min_timestamp_index(self) -> int:
        return min_timestamp_index(self.physic_msg_timestamp, self.logics_msg_timestamp,
                                   self.index_msg_timestamp)

    @property
    def has_5x_fields(self) -> bool:
        """Whether bytes 24..40 hold anything: only a 5.x broker writes them (a 5.x file
        may still hold zeros there, e.g. when it never recovered)."""
        return any(self.first_40_bytes[Checkpoint4.sizeof():])


def parse_checkpoint(data: bytes, path: str | os.PathLike = "checkpoint") -> StoreCheckpoint:
    """Decode the checkpoint file's bytes; a file of any size but 4096 is a FormatError."""
    if len(data) != CHECKPOINT_FILE_SIZE:
        raise FormatError(f"checkpoint is {len(data)} bytes, not {CHECKPOINT_FILE_SIZE}", path)
    fields = CHECKPOINT.unpack_from(data, 0)
    findings = []
    padding = data[CHECKPOINT.size:]
    if any(padding):
        first = CHECKPOINT.size + len(padding) - len(padding.lstrip(b"\0"))
        findings.append(Finding(TRAILING_GARBAGE, os.fspath(path), first,
                                "non-zero bytes after the checkpoint fields (the broker leaves them zero)"))
    return StoreCheckpoint(os.fspath(path), *fields, data[:CHECKPOINT.size], tuple(findings))


def read_checkpoint(path: str | os.PathLike) -> StoreCheckpoint:
    """Read a checkpoint file (``<store>/checkpoint``)."""
    path = pathlib.Path(path)
    # read at most one byte past the page: a larger file is refused by its size, unread
    data, size = read_head(path, CHECKPOINT_FILE_SIZE + 1)
    if len(data) != CHECKPOINT_FILE_SIZE:
        actual = size if len(data) > CHECKPOINT_FILE_SIZE else len(data)
        raise FormatError(f"checkpoint is {actual} bytes, not {CHECKPOINT_FILE_SIZE}", path)
    return parse_checkpoint(data, path)


def loaded_checkpoint(path: str | os.PathLike) -> StoreCheckpoint:
    """The checkpoint's fields as the broker's StoreCheckpoint loads them: it maps the file's
    first 4096 bytes (a shorter file is extended with zeros, a longer one is read there only)
    and reads its fields, so a file of the wrong size still gives them. A missing file:
    StoreNotFound (the broker then makes a zeroed one). verify and info read it with
    :func:`checkpoint_as_loaded`, which also says the wrong size."""
    return _loaded(pathlib.Path(path))[0]


def _loaded(path: pathlib.Path) -> tuple[StoreCheckpoint, int]:
    """:func:`loaded_checkpoint`'s fields, and the file's size on disk."""
    data, size = read_head(path, CHECKPOINT_FILE_SIZE)
    return parse_checkpoint(data.ljust(CHECKPOINT_FILE_SIZE, b"\0"), path), size


def checkpoint_as_loaded(path: str | os.PathLike) -> StoreCheckpoint:
    """verify's and info's reading: the fields as the broker's load takes them
    (:func:`loaded_checkpoint`), and among its findings ``checkpointInvalid`` when the file is
    not the 4096 bytes the broker writes (what it says after a crash follows those fields, as
    the broker's does)."""
    path = pathlib.Path(path)
    cp, size = _loaded(path)
    if size == CHECKPOINT_FILE_SIZE:
        return cp
    note = Finding(CHECKPOINT_INVALID, str(path), None,
                   f"checkpoint is {size} bytes, not {CHECKPOINT_FILE_SIZE}: the broker maps its first "
                   f"{CHECKPOINT_FILE_SIZE} bytes (a shorter file read as zero-extended) and reads its fields there")
    return dataclasses.replace(cp, findings=(*cp.findings, note))


@dataclasses.dataclass(slots=True, frozen=True)
class MarkerFile:
    path: str
    exists: bool
    content: bytes | None  # None when absent

    @property
    def pid(self) -> int | None:
        """The PID a 5.x abort / abort.bak holds (None: absent, empty, or not a number)."""
        return parse_pid(self.content) if self.content else None


@dataclasses.dataclass(slots=True, frozen=True)
class StoreMarkers:
    abort: MarkerFile
    abort_bak: MarkerFile
    lock: MarkerFile
    findings: tuple[Finding, ...]
    locked_by: int | None = None  # the PID holding the lock (0: held, the OS does not say who); None: free

    @property
    def clean_shutdown(self) -> bool:
        """No abort file: the last broker's shutdown() ran to the end (or none ever started)."""
        return not self.abort.exists


def _marker(path: pathlib.Path) -> MarkerFile:
    if not path.exists():
        return MarkerFile(str(path), False, None)
    if path.is_dir():  # File.exists() holds for a directory too: the broker sees the marker
        return MarkerFile(str(path), True, b"")
    return MarkerFile(str(path), True, _read_file(path))


def read_markers(store_root: str | os.PathLike) -> StoreMarkers:
    """Presence and content of abort, abort.bak and lock in a store root, and who holds the lock."""
    paths = StorePaths(store_root)
    if not paths.root.is_dir():
        raise StoreNotFound("no such directory", paths.root)
    abort, abort_bak = _marker(paths.abort), _marker(paths.abort_bak)
    # a directory: the broker's RandomAccessFile cannot open it, and recover says it does not start
    lock_is_dir = paths.lock.is_dir()
    lock_content = b"" if lock_is_dir else read_lock_file(paths.lock)
    lock = MarkerFile(str(paths.lock), lock_content is not None, lock_content)
    findings = []
    if abort.exists:
        findings.append(Finding(ABORT_FILE_PRESENT, abort.path, None,
                                "the last broker did not shut down cleanly; it will recover abnormally"))
    for marker in (abort, abort_bak):
        if pathlib.Path(marker.path).is_dir():
            findings.append(Finding(ABORT_FILE_UNEXPECTED, marker.path, None,
                                    "a directory, not a file: the broker's File.exists() sees it all the same"))
        elif marker.content and marker.pid is None:
            findings.append(Finding(ABORT_FILE_UNEXPECTED, marker.path, 0,
                                    f"content {marker.content[:32]!r} is not a PID"))
    if lock_is_dir:
        findings.append(Finding(LOCK_FILE_UNEXPECTED, lock.path, None,
                                "a directory, not a file: the broker cannot open it (RandomAccessFile) and "
                                "does not start on this store"))
    elif lock.exists and not lock.content.startswith(LOCK_CONTENT):
        findings.append(Finding(LOCK_FILE_UNEXPECTED, lock.path, 0,
                                f"content {lock.content[:32]!r} does not start with {LOCK_CONTENT!r}"))
    return StoreMarkers(abort, abort_bak, lock, tuple(findings), is_locked(paths.lock))
