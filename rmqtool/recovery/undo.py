"""Undoing a recovery: every byte its manifest lists put back where it was.

Each copy is checked against the sha256 the manifest recorded before anything is
written; then ranges that were zeroed get their bytes back and deleted files come back
whole, with their permission bits. What was written to the store after the recovery (by
a writer that went on from it) is not undone: its ranges are overwritten.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

from rmqtool.errors import CorruptData, StoreAccessError, StoreLocked
from rmqtool.recovery.manifest import RESTORE, COPY_CHUNK, file_sha256, read_manifest, sync_dir
from rmqtool.recovery.plan import ZERO
from rmqtool.store.lock import is_locked
from rmqtool.store.paths import StorePaths


@dataclasses.dataclass(frozen=True)
class Restored:
    store: pathlib.Path
    ranges_restored: int
    files_restored: int
    bytes_restored: int

    def to_json(self) -> dict:
        return {"store_path": str(self.store), "ranges_restored": self.ranges_restored,
                "files_restored": self.files_restored, "bytes_restored": self.bytes_restored}


def undo(backup_dir: str | os.PathLike, store_root: str | os.PathLike | None = None) -> Restored:
    """Put back every byte the recovery backed up in ``backup_dir`` into the store (the one
    the manifest names, or ``store_root`` when the store has moved). The store must not be
    open for writing, here or elsewhere."""
    backup = pathlib.Path(backup_dir)
    manifest = read_manifest(backup)
    root = pathlib.Path(store_root) if store_root is not None else pathlib.Path(manifest.store)
    holder = is_locked(StorePaths(root).lock)
    if holder is not None:
        who = "this process" if holder == os.getpid() else (f"process {holder}" if holder else "another process")
        raise StoreLocked(f"the store is open for writing by {who}: close it before undoing a recovery",
                          StorePaths(root).lock)
    for entry in manifest.entries:  # every copy whole before the first byte is written
        if file_sha256(backup / entry.copy) != entry.sha256:
            raise CorruptData(f"the backup copy of {entry.file} does not match the manifest's sha256",
                              backup / entry.copy)
    ranges = files = total = 0
    if manifest.listing is not None:  # files made since the apply go first
        before = set(manifest.listing)
        for p in sorted(root.rglob("*"), reverse=True):
            name = str(p.relative_to(root))
            if p.is_file() and name not in before and name != StorePaths(root).lock.name:
                os.unlink(p)
                sync_dir(p.parent)
                parent = p.parent
                while parent != root and not any(parent.iterdir()):  # a queue directory made since
                    parent.rmdir()
                    parent = parent.parent
    for entry in reversed(manifest.entries):
        path = root / entry.file
        if entry.action == ZERO:
            flags = os.O_WRONLY
        elif entry.action == RESTORE:
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, flags, entry.mode)
        except OSError as exc:
            raise StoreAccessError(f"cannot open to restore ({exc.strerror})", path) from None
        try:
            _copy_back(backup / entry.copy, fd, entry.start)
            if entry.action != ZERO:
                os.fchmod(fd, entry.mode)
            os.fsync(fd)
        except OSError as exc:
            raise StoreAccessError(f"cannot restore ({exc.strerror})", path, entry.start) from None
        finally:
            os.close(fd)
        if entry.action == ZERO:
            ranges += 1
        else:
            sync_dir(path.parent)
            files += 1
        total += entry.end - entry.start
    return Restored(root, ranges, files, total)


def _copy_back(copy: pathlib.Path, fd: int, position: int) -> None:
    """The copy's bytes at ``position``; zeros are skipped (a zeroed range holds them already, a
    file made again is extended over them), so a sparse copy stays sparse."""
    with open(copy, "rb") as f:
        while chunk := f.read(COPY_CHUNK):
            if chunk.count(0) != len(chunk):
                os.pwrite(fd, chunk, position)
            position += len(chunk)
    if os.fstat(fd).st_size < position:
        os.ftruncate(fd, position)
