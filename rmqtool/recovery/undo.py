"""Undoing a repair (recover, append --recover, redispatch): the store given back exactly as it
was before, every name and every byte, from its backup's manifest.

Refused, changing nothing, when the store is no longer as the repair left it (the manifest's
``after``: a file made or removed since, a covered file of another size or digest): what was
written since would be destroyed (e2undo refuses the same way); ``force`` overrides. Each copy
is checked against the digest the manifest recorded before anything is written. Then, under an
intent record (``intent.py``: a kill is finished by running undo again): files made since the
repair go, ranges that were zeroed get their bytes back, files deleted or rewritten come back
whole with their permission bits (and every file its mtime), directories made since go and those removed come back.
A commit log file on another disk (several commit log paths) comes back at the path on its
disk the manifest names; a disk that is no longer there is refused before anything is written
when the repair changed, made or removed a file on it (else nothing of it is to put back).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import shlex
import stat

from rmqtool.errors import (CorruptData, RepairUnfinished, StoreAccessError, StoreChangedSince, StoreLocked,
                            StoreNotFound)
import rmqtool.recovery.intent as intent
from rmqtool.recovery.dispatch_reach import first_written
from rmqtool.recovery.manifest import (DIGEST_PREFIX, LOCK_NAME, REWRITE, TAIL, content_digest, copy_into,
                                       digest_matches, first_change_since, read_manifest, restore_range,
                                       store_listing, sync_dir)
from rmqtool.recovery.plan import ZERO
from rmqtool.recovery.store_lock import directory_held, held_for
from rmqtool.store.lock import held_descriptor, is_locked
from rmqtool.store.paths import UNFINISHED_FILE, StorePaths
from rmqtool.store.unfinished import read_unfinished, undo_command

_RANGES = (ZERO, REWRITE, TAIL)  # a range of a file put back (the others: whole files)


@dataclasses.dataclass(frozen=True)
class Restored:
    store: pathlib.Path
    ranges_restored: int
    files_restored: int
    bytes_restored: int
    files_removed: int = 0  # files the repair made (none was there before it), gone again
    already_as_before: bool = False  # nothing to put back: an undo of this backup ran already

    def to_json(self) -> dict:
        return {"store_path": str(self.store), "ranges_restored": self.ranges_restored,
                "files_restored": self.files_restored, "bytes_restored": self.bytes_restored,
                "files_removed": self.files_removed, "already_as_before": self.already_as_before}


def undo(backup_dir: str | os.PathLike, store_root: str | os.PathLike | None = None, *,
         force: bool = False) -> Restored:
    """Give the store back as it was before the repair backed up in ``backup_dir`` (the store
    the manifest names, or ``store_root`` when it has moved). The store must not be open for
    writing; one written since the repair is refused unless ``force``."""
    backup = pathlib.Path(backup_dir)
    # a repair filling it (no manifest yet) is said as such, not as no backup
    with directory_held(backup, "backup directory", "is writing into this backup directory") \
            if backup.is_dir() else contextlib.nullcontext():
        manifest = read_manifest(backup)
        root = pathlib.Path(store_root) if store_root is not None else pathlib.Path(manifest.store)
        with held_for(root):  # taken, not only asked: no writer starts while the bytes go back
            return _undo(backup, manifest, root, force)


def _undo(backup: pathlib.Path, manifest, root: pathlib.Path, force: bool) -> Restored:
    if intent.never_began(backup, root, manifest):
        _stray_marker_removed(root)  # the one name it may have left in the store
        raise StoreChangedSince("not undone: the repair this backup was made for was stopped before it changed the "
                                "store (the store was never marked): there is nothing of it to take back, and what "
                                "the store holds now is not its to put back; the same command with this backup "
                                "directory runs the repair again", backup)
    pending = intent.pending(backup)
    marker = read_unfinished(root)
    cut_short = pending is not None and pending.get("operation") == "undo" and (
        marker is None or pathlib.Path(marker.backup_dir).resolve() == backup.resolve())
    if (pending is None and marker is None or cut_short) and as_before(manifest, root):
        if cut_short:  # an undo killed after its last byte: its modes, times and lock, then its records
            _put_back_metadata(manifest, root)
            intent.end(backup, root)
        _stray_marker_removed(root)  # an undo (or roll back) killed writing its marker: that name too
        return Restored(root, 0, 0, 0, already_as_before=True)  # undone already: its bytes are all back
    if manifest.after is None and pending is None and marker is None and not force:
        # no state it left, no record of it under way: stopped before its intent record (it changed
        # nothing), or undone already; either way the store's bytes now are another's
        raise StoreChangedSince("not undone: the repair this backup was made for is neither finished nor under way "
                                "(stopped before it changed the store, or undone already), and the store is not as "
                                "it found it: what the store holds now is not its to put back (--force undoes all "
                                "the same)", backup)
    _check_undoable(backup, manifest, root, force)
    repair = pending if pending and pending.get("operation") != "undo" else None  # an apply cut short: its command
    again = (repair or {}).get("finish") or manifest.command or _repair_command(manifest, root)
    intent.begin(backup, root, "undo", undo_command(backup), again)
    removed = 0
    if manifest.listing is not None:  # files made since the apply go first
        removed = _remove_files_made_since(manifest, root, backup)
    for name in manifest.directories or ():  # a directory the repair removed comes back
        (root / name).mkdir(parents=True, exist_ok=True)
    ranges = files = total = 0
    for entry in reversed(manifest.entries):
        intent.step()
        _restore(backup, root, entry)
        if entry.action in _RANGES:
            ranges += 1
        else:
            files += 1
        total += entry.end - entry.start
    _put_back_metadata(manifest, root)
    intent.end(backup, root)
    return Restored(root, ranges, files, total, removed)


def _stray_marker_removed(root: pathlib.Path) -> None:
    """A marker half written (``.rmqtool-unfinished.tmp``: a run killed before its rename) goes;
    held here, it is no writer's now, and no store file has its name."""
    StorePaths(root).unfinished.with_name(UNFINISHED_FILE + ".tmp").unlink(missing_ok=True)


def _put_back_metadata(manifest, root: pathlib.Path) -> None:
    """After the bytes: modes, modification times, the directories made since gone, and a lock
    file the repair's writer made removed."""
    _put_back_modes(manifest, root)
    _put_back_mtimes(manifest, root)
    if manifest.directories is not None:  # directories made since go (deepest first); those before stay
        _remove_directories_made_since(manifest, root)
    lock = StorePaths(root).lock
    if manifest.listing is not None and LOCK_NAME not in manifest.listing and lock.exists() \
            and is_locked(lock) in (None, os.getpid()):  # the repair's writer made it (held here: by this undo)
        os.unlink(lock)


def as_before(manifest, root: pathlib.Path) -> bool:
    """Whether the store is as it was before the repair: the same files and directories, and
    each range the backup holds the bytes it holds (a second undo of one backup finds it so).
    False when the manifest cannot tell (an older backup)."""
    if manifest.listing is None or manifest.directories is None:
        return False
    files, dirs = store_listing(root, manifest.commit_log_directories, manifest.through_links)
    if set(files) - {LOCK_NAME} != set(manifest.listing) - {LOCK_NAME} or set(dirs) != set(manifest.directories):
        return False
    for entry in manifest.entries:
        if not entry.sha256.startswith(DIGEST_PREFIX):
            return False
        path = root / entry.file
        try:
            size = path.stat().st_size
        except OSError:
            return False
        whole = entry.action not in _RANGES
        if size < entry.end or (whole and size != entry.end) or \
                content_digest(path, entry.start, entry.end) != entry.sha256:
            return False
    return True


def _check_undoable(backup: pathlib.Path, manifest, root: pathlib.Path, force: bool) -> None:
    """Refuse before writing a byte: a store open for writing, another repair under way, a
    store written since the repair (unless ``force``), a backup copy that is not whole, a commit
    log disk the repair changed files on that is not there (its files have nowhere to go back to)."""
    holder = is_locked(StorePaths(root).lock)
    if holder is None and not StorePaths(root).lock.exists():  # a QMQ store has no lock file: its files open
        from rmqtool.store.qmq.live import holder_pid
        holder = holder_pid(root)
    if holder is not None and holder != os.getpid():  # held here: by this undo (held_for)
        raise StoreLocked(f"the store is open for writing by {f'process {holder}' if holder else 'another process'}: "
                          f"close it before undoing a recovery", StorePaths(root).lock)
    other = read_unfinished(root)
    if other is not None and pathlib.Path(other.backup_dir).resolve() != backup.resolve():
        raise RepairUnfinished(f"another repair's marker: {other.says()}: {other.ways_out()}", root)
    for directory in _disks_written(manifest):
        if not os.path.isdir(directory):
            raise StoreNotFound(f"not undone: the commit log path {directory} this repair changed files in "
                                   f"is not there (mount it where it was)", directory)
    undoing = other is not None and other.operation == "undo"  # an undo of this backup cut short: go on
    if manifest.after is not None and not undoing and not force:  # the repair finished: written since?
        change = first_change_since(manifest, root)
        if change is not None:
            raise StoreChangedSince(f"not undone: {change}, after the repair; undoing would destroy what was "
                                    f"written (--force undoes all the same)", root)
    written = None if force else first_written(manifest.left_alone)  # a write the backup cannot take back
    if written is not None:
        raise StoreChangedSince(f"not undone: {written}; undo would leave it as it is now (--force undoes "
                                f"the rest all the same)", root)
    for entry in manifest.entries:  # every copy whole before the first byte is written
        if not digest_matches(backup / entry.copy, entry.sha256):
            raise CorruptData(f"the backup copy of {entry.file} does not match the manifest's digest",
                              backup / entry.copy)


def _disks_written(manifest) -> list[str]:
    """The commit log's disks outside the root that hold a file undo puts back or takes away:
    one the repair changed or removed (an entry's) or made (in the listing after, not before).
    A disk it wrote nothing on need not be there (a path the broker config names but no disk
    holds). A repair cut short (no ``after``) may have made files on any of them: every one."""
    disks = manifest.commit_log_directories or ()
    if manifest.after is None:
        return list(disks)
    names = {e.file for e in manifest.entries} | (set(manifest.listing or ()) ^ set(manifest.after["listing"]))
    return [d for d in disks if any(pathlib.Path(n).is_relative_to(d) for n in names)]


def _remove_files_made_since(manifest, root: pathlib.Path, backup: pathlib.Path) -> int:
    """The files the store holds that the manifest's listing (taken at the apply) does not,
    removed; how many. A backup kept inside the store (repairs refuse one now) is never among
    them: its copies are what the undo puts back."""
    before = set(manifest.listing)
    made, _dirs = store_listing(root, manifest.commit_log_directories, manifest.through_links)
    own = os.path.realpath(backup)
    removed = 0
    for name in reversed(made):
        if name not in before and name != LOCK_NAME and not pathlib.Path(
                os.path.realpath(root / name)).is_relative_to(own):
            intent.step()
            removed += 1
            p = root / name
            os.unlink(p)
            sync_dir(p.parent)
            if manifest.directories is None:  # an older backup: empty queue directories made since
                parent = p.parent
                while parent != root and not any(parent.iterdir()):
                    parent.rmdir()
                    parent = parent.parent
    return removed


def _restore(backup: pathlib.Path, root: pathlib.Path, entry) -> None:
    """One manifest entry's bytes back in place: a zeroed range over the file, or a whole
    file made again (with its mode)."""
    path = root / entry.file  # an absolute name (a commit log file on another disk) stays as it is
    if entry.action in _RANGES:
        flags = os.O_RDWR  # read too: the range's pages written since are found and zeroed
    else:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        path.parent.mkdir(parents=True, exist_ok=True)
    held = held_descriptor(path)  # the lock file this undo holds: closing a descriptor of it drops the lock
    try:  # writable by its owner until every entry is back (_put_back_modes: a read-only file's own)
        fd = os.open(path, flags, entry.mode | stat.S_IWUSR) if held is None else held
    except OSError as exc:
        raise StoreAccessError(f"cannot open to restore ({exc.strerror})", path) from None
    try:
        if entry.action in _RANGES:  # what the range holds now goes, whatever it is
            restore_range(backup / entry.copy, fd, entry.start, path)
        else:
            if held is not None:
                os.ftruncate(fd, 0)  # as O_TRUNC would
            copy_into(backup / entry.copy, fd, entry.start)
            os.fchmod(fd, entry.mode | stat.S_IWUSR)
        os.fsync(fd)
    except OSError as exc:
        raise StoreAccessError(f"cannot restore ({exc.strerror})", path, entry.start) from None
    finally:
        if held is None:
            os.close(fd)
    if entry.action not in _RANGES:
        sync_dir(path.parent)


def _put_back_modes(manifest, root: pathlib.Path) -> None:
    """Each file put back whole given its mode from before the repair, once every entry is
    back: a read-only file (0444) with a range entry after its whole one was given 0444 first,
    and the range could then not be written (EACCES for all but root)."""
    for entry in manifest.entries:
        if entry.action in _RANGES:
            continue
        path = root / entry.file
        try:
            os.chmod(path, entry.mode)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StoreAccessError(f"cannot set its mode back ({exc.strerror})", path) from None


def _put_back_mtimes(manifest, root: pathlib.Path) -> None:
    """Each file the repair wrote or removed, given back its mtime from before the repair (the
    broker ages commit log files out by it). A file's first entry holds it: entries are taken
    before the change they back up, the first before any change to that file."""
    seen = set()
    for entry in manifest.entries:
        if entry.mtime_ns is None or entry.file in seen:
            continue
        seen.add(entry.file)
        path = root / entry.file
        try:
            os.utime(path, ns=(os.stat(path).st_atime_ns, entry.mtime_ns))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StoreAccessError(f"cannot set its modification time back ({exc.strerror})", path) from None


def _remove_directories_made_since(manifest, root: pathlib.Path) -> None:
    """Empty directories the store holds that it did not at the apply, deepest first."""
    before_dirs = set(manifest.directories)
    _files, dirs = store_listing(root, through_links=manifest.through_links)
    for name in sorted(dirs, key=lambda n: n.count("/"), reverse=True):
        if name not in before_dirs and not any((root / name).iterdir()):
            (root / name).rmdir()
            sync_dir((root / name).parent)


def _repair_command(manifest, root: pathlib.Path) -> str:
    """The command that makes the repair again, once an undo has finished, for a backup from
    before manifests named it: a redispatch's plan has its changes, a recovery's none."""
    verb = "redispatch" if "changes" in manifest.plan and "actions" not in manifest.plan else "recover"
    return f"rmqtool {verb} {shlex.quote(os.path.abspath(root))} --apply"


_NOT_DONE = {"recover": "not recovered", "redispatch": "not redispatched", "offsets reset": "not reset"}


def roll_back_unfinished(root: str | os.PathLike, operation: str) -> pathlib.Path | None:
    """Before a repair runs: if an earlier run of the same repair was cut short, give the store
    back as it was before that run (its backup holds every original byte), then drop that
    backup, whose bytes the store now holds again; its path, for the new run to reuse. An
    interrupted repair of another kind is refused (its own command finishes it)."""
    import shutil

    root = pathlib.Path(root)
    marker = read_unfinished(root)
    if marker is None:
        return None
    if marker.operation != operation:  # said as the repair's every other refusal is: "not recovered: ..."
        raise RepairUnfinished(f"{_NOT_DONE.get(operation, f'no {operation}')}: {marker.says()}: {marker.ways_out()}",
                               root)
    if marker.unchanged_copy:  # a recover --to copy (intent.mark_copy): nothing to roll back. Its marker
        return None  # stays until the repair's own replaces it (intent.begin): a kill between leaves it marked
    backup = pathlib.Path(marker.backup_dir)
    undo(backup, root)
    gone = backup.with_name(backup.name + ".rolled-back")
    os.replace(backup, gone)
    shutil.rmtree(gone, ignore_errors=True)
    return backup
