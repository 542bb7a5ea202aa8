"""``rmqtool recover --apply`` on a QMQ store: the plan carried out, every byte and name it
changes backed up first, with the same manifest, intent record and ``undo`` as RocketMQ's
(``recovery/manifest.py``, ``recovery/intent.py``).

Order: refuse a store a process holds (QMQ keeps its segments open: ``store/qmq/live.py``),
and a file to move or rewrite that is a symbolic link (undo could not put the link back);
copy every range to be zeroed and every file to be moved or rewritten into the backup;
build the rewritten files in the backup's staging directory; write and force the manifest;
write the intent record; then change the store (zeros, moves, rewritten files renamed in,
the checkpoint last), and record the state it left.
"""
from __future__ import annotations

import dataclasses
import datetime
import os
import pathlib
import shlex
import shutil
from typing import Callable, Iterable

from rmqtool.engine.qmq.consumer_log_writer import segment_files
from rmqtool.errors import CorruptData, StoreAccessError, StoreLocked
from rmqtool.formats.qmq.checkpoint import build_message_checkpoint
from rmqtool.formats.qmq.consumerlog import SEGMENT_TOTAL_UNIT
from rmqtool.recovery import intent
from rmqtool.recovery.apply import (STAGING_DIR, create_backup_dir, delete_file, finish_apply, move_in,
                                    refuse_links, removed_unless_begun, undo_command, write_zeros)
from rmqtool.recovery.manifest import (COPIES_DIR, RESTORE, Entry, Manifest, copy_range, entry_name, store_listing,
                                       sync_dir, write_manifest)
from rmqtool.recovery.plan import DELETE, ZERO
from rmqtool.recovery.qmq.plan import QmqPlan
from rmqtool.recovery.store_lock import held_for
from rmqtool.store.qmq.live import holder_pid


@dataclasses.dataclass(frozen=True)
class QmqApplied:
    plan: QmqPlan
    backup_dir: pathlib.Path
    manifest: pathlib.Path
    bytes_zeroed: int
    files_moved: int
    files_written: int

    def to_json(self) -> dict:
        return {**self.plan.to_json(), "applied": {"backup_dir": str(self.backup_dir), "manifest": str(self.manifest),
                                                   "bytes_zeroed": self.bytes_zeroed, "files_moved": self.files_moved,
                                                   "files_written": self.files_written,
                                                   "undo": undo_command(self.backup_dir)}}


def _write_file(ready: pathlib.Path, parts: Iterable[bytes], size: int | None) -> None:
    with open(ready, "wb") as f:
        for data in parts:
            f.write(data)
        if size is not None:
            f.truncate(size)  # the hole QMQ's full-size mapping leaves
        f.flush()
        os.fsync(f.fileno())


def _changes(plan: QmqPlan) -> tuple[list, list]:
    """What the plan changes: (kind, path, start, end) for the manifest (a rewritten file is a
    RESTORE entry: undo puts it back whole), and the files to build and swap in (path, what
    makes its bytes before the hole, in parts, the size the file gets)."""
    changes: list[tuple[str, pathlib.Path, int, int]] = []
    builds: list[tuple[pathlib.Path, Callable[[], Iterable[bytes]], int | None]] = []
    for path, _why in plan.moves:
        changes.append((DELETE, pathlib.Path(path), 0, 0))
    for z in plan.zero:
        changes.append((ZERO, pathlib.Path(z.path), z.start, z.end))
    for rw in plan.consumer_logs:
        writes, removes = segment_files(rw)
        changes += [(DELETE, p, 0, 0) for p in removes]
        for path, data in writes.items():
            if path.exists():
                changes.append((RESTORE, path, 0, 0))
            builds.append((path, data, rw.unit_bytes * SEGMENT_TOTAL_UNIT))
    if plan.checkpoint is not None:
        path = plan.checkpoint_path()
        if path.exists():
            changes.append((RESTORE, path, 0, 0))
        builds.append((path, lambda: (build_message_checkpoint(plan.checkpoint),), None))
    return changes, builds


def apply_qmq_plan(plan: QmqPlan, backup_dir: str | os.PathLike | None = None, *,
                   command: str | None = None) -> QmqApplied:
    root = pathlib.Path(plan.store)
    with held_for(root):  # another rmqtool writer is refused; none starts while this one works
        holder = holder_pid(root)
        if holder is not None:
            raise StoreLocked(f"process {holder} has the store's files open (a running QMQ broker?): "
                              f"not changing it", root)
        if not plan.changes_anything:
            raise CorruptData("nothing to apply: the plan changes nothing", root)
        with create_backup_dir(root, backup_dir) as (backup, made), removed_unless_begun(backup, root, made):
            return _back_up_and_carry_out(plan, root, backup, command)


def _back_up_and_carry_out(plan: QmqPlan, root: pathlib.Path, backup: pathlib.Path, command: str | None) -> QmqApplied:
    """:func:`apply_qmq_plan`'s work, into the backup directory made for it."""
    staging = backup / STAGING_DIR / "incoming"
    try:
        staging.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreAccessError(f"cannot create the backup directory ({exc.strerror})", backup) from None

    changes, builds = _changes(plan)
    # a file moved out or renamed over that is a link: the link would go, and undo put its bytes
    # back at its target (a zeroed range is written through it, in place: the link stays)
    refuse_links([path for kind, path, _, _ in changes if kind != ZERO] + [path for path, _, _ in builds])
    listing, directories = store_listing(root)
    entries = []
    for i, (kind, path, start, end) in enumerate(changes):
        try:
            st = os.stat(path)
        except OSError as exc:
            raise StoreAccessError(f"cannot back up ({exc.strerror})", path) from None
        if kind != ZERO:
            start, end = 0, st.st_size  # a moved or rewritten file is kept whole
        copy = f"{COPIES_DIR}/{i:04d}.bin"
        digest = copy_range(path, start, end, backup / copy)
        entries.append(Entry(kind, entry_name(path, root), start, end, digest, copy,
                             st.st_mode & 0o7777, st.st_mtime_ns))
    ready = []
    for i, (path, build, size) in enumerate(builds):
        staged = staging / f"{i:06d}"
        _write_file(staged, build(), size)  # made here, a part of one file at a time
        ready.append((staged, path))
    sync_dir(backup / COPIES_DIR)
    sync_dir(staging)
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
    command = command or f"rmqtool recover {shlex.quote(str(root))} --apply"
    manifest = write_manifest(backup, Manifest(str(root.resolve()), created, plan.to_json(), tuple(entries),
                                               listing, directories, command=command))
    intent.begin(backup, root, "recover", command, undo_command(backup))
    zeroed = moved = 0
    for kind, path, start, end in changes:
        if kind == ZERO:
            intent.step()
            write_zeros(path, start, end)
            zeroed += end - start
        elif kind == DELETE:
            intent.step()
            delete_file(path)  # its bytes are in the backup: moved out
            moved += 1
    for staged, path in ready:  # the checkpoint is built last: the load takes it once all else is in place
        intent.step()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            move_in(staged, path)
        except OSError as exc:
            raise StoreAccessError(f"cannot write ({exc.strerror})", path) from None
        sync_dir(path.parent)
    shutil.rmtree(backup / STAGING_DIR, ignore_errors=True)
    finish_apply(backup, root)
    return QmqApplied(plan, backup, manifest, zeroed, moved, len(ready))
