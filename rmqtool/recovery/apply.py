"""Carrying out a recovery plan, every byte it changes or removes backed up first.

Order: refuse a store another process holds; copy each range to be zeroed and each file to
be deleted into the backup directory; write and force the manifest (``manifest.py``);
then the intent record (``intent.py``); only then change the store (zeros written and
forced, files deleted and their directory forced). Once the last change is on disk the
manifest gets the state the repair left (``manifest.record_after``: undo refuses a store
changed since) and the intent record is cleared. Re-dispatching from the plan's start is
the engine's job: it asks for ``finish=False`` and calls :func:`finish_apply` after its close.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import errno
import os
import pathlib
import shlex
import shutil

from rmqtool.errors import CorruptData, NotAStore, RmqError, StoreAccessError, StoreLocked, UsageError
import rmqtool.recovery.intent as intent
from rmqtool.recovery.manifest import (MANIFEST_NAME, RESTORE, REWRITE, TAIL, COPIES_DIR, Entry, Manifest, copy_range,
                                       entry_name, copy_sparse, outside_directories, read_manifest, record_after,
                                       store_listing, remove_forced, sync_dir, write_manifest)
from rmqtool.recovery.dispatch_reach import dispatched_topics, file_state, first_written, queue_last_files
from rmqtool.recovery.plan import DELETE, ZERO, Action, RecoveryPlan
from rmqtool.recovery.store_lock import directory_held, held_for
from rmqtool.findings import SEGMENT_AFTER_END
from rmqtool.formats.markers import LOCK_CONTENT
from rmqtool.store.lock import held_descriptor, is_locked, read_lock_file
from rmqtool.store.paths import LOCK_FILE, StorePaths
from rmqtool.store.unfinished import undo_command

ZERO_CHUNK = 1 << 22


@dataclasses.dataclass(frozen=True)
class Applied:
    """What an apply did, and where its backup is."""
    plan: RecoveryPlan
    backup_dir: pathlib.Path
    manifest: pathlib.Path
    bytes_zeroed: int
    files_deleted: int
    bytes_deleted: int

    def to_json(self) -> dict:
        return {"backup_dir": str(self.backup_dir), "manifest": str(self.manifest), "bytes_zeroed": self.bytes_zeroed,
                "files_deleted": self.files_deleted, "bytes_deleted": self.bytes_deleted}


def default_backup_dir(store_root: str | os.PathLike, now: datetime.datetime | None = None) -> pathlib.Path:
    """Beside the store, named by the time: ``<store>.recovery-20261122T024742.136Z``."""
    root = pathlib.Path(store_root).resolve()
    now = now or datetime.datetime.now(datetime.timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%S.") + f"{now.microsecond // 1000:03d}Z"
    candidate = root.parent / f"{root.name}.recovery-{stamp}"
    n = 1
    while candidate.exists():  # two recoveries in one millisecond
        candidate = root.parent / f"{root.name}.recovery-{stamp}-{n}"
        n += 1
    return candidate


STAGING_DIR = "staging"  # inside the backup: where redispatch builds files before they are swapped in



def finish_apply(backup: pathlib.Path, root: pathlib.Path) -> None:
    """The repair's last change is on disk: record the state it left, clear the intent. A
    queue file the backup does not hold that was written all the same is an error here (the
    intent stays: undo refuses it too), never a repair called done that undo cannot take back."""
    written = first_written(read_manifest(backup).left_alone)
    if written is not None:
        raise StoreAccessError(f"the repair is not finished: {written}; undo cannot take that write back", root)
    record_after(backup, root)
    intent.end(backup, root)


@dataclasses.dataclass(frozen=True)
class Rewrite:
    """Bytes written over a range of a file before the plan's changes (recover
    --keep-past-damage: a damaged record replaced by one of the same size); backed up as a
    range, as a zeroed one is."""
    path: str
    start: int
    data: bytes


def apply_plan(plan: RecoveryPlan, backup_dir: str | os.PathLike | None = None, *, finish: bool = True,
               before_change=None, command: str | None = None, made_here: tuple[str, ...] = (),
               rewrites: tuple[Rewrite, ...] = (), replan=None, commit_log_directories=(),
               on_written=None, lock_marked: bool = False) -> Applied:
    """Back up, then carry out ``plan``. The caller holds the store lock (the engine does) or
    no one does; a store another process holds is refused. ``before_change`` is called once
    the backup and the intent record are on disk, before the first change (the engine
    writes its abort marker there, so the listing undo restores is the store's own);
    ``finish=False`` leaves the intent record for the caller's :func:`finish_apply`;
    ``command`` is the one that finishes an interrupted apply (default: ``rmqtool recover
    STORE --apply``); ``made_here``: names the caller made just before (the engine's lock
    file on a store that had none), left out of the listing so that undo removes them.
    ``rewrites`` are written first (backed up, in the same manifest); ``replan()`` then gives
    the plan of the store as they left it, which is carried out in place of ``plan``.
    ``commit_log_directories``: where the commit log is when not in ROOT/commitlog (several
    disks): the backup names those files by their path on their disk, and lists those disks.
    ``on_written(n)``: told the bytes written as they are, backup copies, rewrites and zeros
    (recover --apply's progress bar). ``lock_marked``: ``before_change`` marks the lock file
    (``lock`` at position 0, as the broker does), so a lock file holding other bytes is kept."""
    written = on_written or (lambda n: None)
    root = pathlib.Path(plan.store)
    if plan.refusal:
        raise CorruptData(f"not recovered: {plan.refusal}", root)
    holder = is_locked(StorePaths(root).lock)
    if holder is not None and holder != os.getpid():
        who = f"process {holder}" if holder else "another process"
        raise StoreLocked(f"the store is locked by {who}: not recovering it under a running writer",
                          StorePaths(root).lock)
    with contextlib.ExitStack() as stack:
        try:
            backup, made = stack.enter_context(create_backup_dir(root, backup_dir))
        except BaseException:  # refused (another writer's, or not empty): the names made for this run go
            for name in made_here:
                (root / name).unlink(missing_ok=True)
            raise
        stack.enter_context(removed_unless_begun(backup, root, made, made_here))
        refuse_links([a.path for a in plan.actions if a.kind == DELETE])
        return _back_up_and_carry_out(plan, root, backup, finish, before_change, command, made_here, rewrites,
                                      replan, commit_log_directories, written, lock_marked)


def _back_up_and_carry_out(plan, root, backup, finish, before_change, command, made_here, rewrites, replan,
                           commit_log_directories, written, lock_marked) -> Applied:
    """:func:`apply_plan`'s work, into the backup directory made for it."""
    entries = []
    outside = outside_directories(root, commit_log_directories)
    listing, directories = store_listing(root, outside)
    listing = tuple(n for n in listing if n not in made_here)
    begun = False
    if rewrites:
        for i, rewrite in enumerate(rewrites):
            path = pathlib.Path(rewrite.path)
            copy = f"{COPIES_DIR}/r{i:04d}.bin"
            end = rewrite.start + len(rewrite.data)
            st = os.stat(path)
            digest = copy_range(path, rewrite.start, end, backup / copy)
            written(end - rewrite.start)
            entries.append(Entry(REWRITE, entry_name(path, root), rewrite.start, end,
                                 digest, copy, st.st_mode & 0o7777, st.st_mtime_ns))
        sync_dir(backup / COPIES_DIR)
        _begin(root, backup, plan, entries, listing, directories, command, None, outside)
        begun = True
        for rewrite in rewrites:
            intent.step()
            write_bytes(pathlib.Path(rewrite.path), rewrite.start, rewrite.data)
            written(len(rewrite.data))
        if replan is not None:  # before the caller's marker: the store as it was, but for the rewrites
            plan = replan()
    appended, left_alone = _appended_later(root, plan, commit_log_directories)
    actions = list(plan.actions) + appended
    if lock_marked:
        actions += _marked_later(root, made_here)
    if rewrites:  # the writer drops them (truncateDirtyFiles) even when the plan is otherwise empty
        named = {a.path for a in actions}
        actions += [Action(DELETE, p, 0, os.stat(p).st_size, SEGMENT_AFTER_END, "made ahead and never written")
                    for p in plan.made_ahead if p not in named and os.path.exists(p)]
    entries += _backed_up(actions, root, backup, written)
    if begun:  # the rewrites are on disk: the manifest now names the plan's changes too
        manifest = write_manifest(backup, Manifest(str(root.resolve()), _now(), plan.to_json(), tuple(entries),
                                                   listing, directories, commit_log_directories=outside,
                                                   left_alone=left_alone, command=_command(command, root)))
        if before_change is not None:
            intent.step()
            before_change()
    else:
        manifest = _begin(root, backup, plan, entries, listing, directories, command, before_change, outside,
                          left_alone)

    zeroed, deleted, deleted_bytes = _carry_out(root, entries, written)
    if finish:
        finish_apply(backup, root)
    return Applied(plan, backup, manifest, zeroed, deleted, deleted_bytes)


def _backed_up(actions: list, root: pathlib.Path, backup: pathlib.Path, written) -> list:
    """Each action's bytes copied into the backup (a deleted file's whole), synced; their entries."""
    entries = []
    for i, action in enumerate(actions):
        path = pathlib.Path(action.path)
        copy = f"{COPIES_DIR}/{i:04d}.bin"
        try:
            st = os.stat(path)
        except OSError as exc:
            raise StoreAccessError(f"cannot back up ({exc.strerror})", path) from None
        end = st.st_size if action.kind == DELETE else action.end  # a deleted file is copied whole
        digest = copy_range(path, action.start, end, backup / copy, fd=held_descriptor(path))
        written(end - action.start)
        entries.append(Entry(action.kind, entry_name(path, root), action.start, end, digest, copy,
                             st.st_mode & 0o7777, st.st_mtime_ns))
    sync_dir(backup / COPIES_DIR)
    return entries


def _carry_out(root: pathlib.Path, entries: list, written) -> tuple[int, int, int]:
    """The zeros and deletions of the backed-up entries, each a journal step; (bytes zeroed,
    files deleted, their bytes)."""
    zeroed = deleted = deleted_bytes = 0
    for entry in entries:
        path = root / entry.file  # an absolute name: a commit log file on another disk
        if entry.action in (RESTORE, REWRITE, TAIL):
            continue  # only kept: dispatch changes it later
        intent.step()
        if entry.action == ZERO:
            write_zeros(path, entry.start, entry.end)
            zeroed += entry.end - entry.start
            written(entry.end - entry.start)
        else:
            delete_file(path)
            deleted += 1
            deleted_bytes += entry.end
    return zeroed, deleted, deleted_bytes


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def _command(command: str | None, root: pathlib.Path, operation: str = "recover") -> str:
    """The command that makes (and finishes) the repair: the caller's, else the bare one."""
    return command or f"rmqtool {operation} {shlex.quote(os.path.abspath(root))} --apply"


def _begin(root, backup, plan, entries, listing, directories, command, before_change, outside,
           left_alone=None) -> pathlib.Path:
    """The manifest written and forced, the intent recorded, and the caller's step before the
    first change (the engine's abort marker): nothing in the store has changed yet."""
    manifest = write_manifest(backup, Manifest(str(root.resolve()), _now(), plan.to_json(), tuple(entries),
                                               listing, directories, commit_log_directories=outside,
                                               left_alone=left_alone, command=_command(command, root)))
    intent.begin(backup, root, "recover", _command(command, root), undo_command(backup))
    if before_change is not None:
        intent.step()
        before_change()
    return manifest


def refuse_links(paths) -> None:
    """NotAStore (a layout rmqtool does not write), before anything is written, for a file to
    delete or replace that is a symbolic link: a delete or a rename over its name drops the
    link, and undo would put a file back where the link was (a file written through a link, in
    place, keeps it)."""
    for path in paths:
        if os.path.islink(path):
            raise NotAStore(f"not written: a symbolic link (to {os.readlink(path)}), which this repair would "
                             f"delete or replace and undo could not put back as it was: move the file it points "
                             f"to in place of the link first", path)


@contextlib.contextmanager
def create_backup_dir(root: pathlib.Path, backup_dir: str | os.PathLike | None, *, staged: bool = False):
    """(the backup directory, whether it was made here) for the block: the one given, or one
    beside the store named by the time, with its ``copies/`` (:func:`claimed_backup_dir`)."""
    backup = pathlib.Path(backup_dir) if backup_dir is not None else default_backup_dir(root)
    with claimed_backup_dir(backup, root, staged=staged) as made:
        try:
            (backup / COPIES_DIR).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if made:
                shutil.rmtree(backup, ignore_errors=True)
            raise StoreAccessError(f"cannot create the backup directory ({exc.strerror})", backup) from None
        yield backup, made


@contextlib.contextmanager
def claimed_backup_dir(backup: pathlib.Path, root, *, staged: bool = False):
    """A repair's backup directory made or taken, outside the store at ``root`` (inside it, undo
    would take the backup's own files for files the repair made), and held (flock) while the
    block runs, so that two writers never share one; whether it was made here. It must be new
    or empty (``staged``: but for the ``staging/`` this run built its files in), or hold only
    what a run of a repair killed before its manifest left there (no live writer holds it),
    which is cleared: that run changed nothing in the store."""
    from rmqtool.store.output_path import store_holding
    held = store_holding(backup, [root])  # the root, an entry linked from another disk, a commit log path elsewhere
    if held is not None:
        raise UsageError(f"the backup directory is inside the store ({held[1]}: undo would take its files for files "
                         f"the repair made, and the broker's load would take it for one of the store's): give one "
                         f"outside it", backup)
    made = not backup.exists()
    if not made and not backup.is_dir():
        raise UsageError("the backup directory exists and is not empty", backup)
    try:
        backup.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreAccessError(f"cannot create the backup directory ({exc.strerror})", backup) from None
    with directory_held(backup, "backup directory", "is writing into this backup directory"):
        if any(not (staged and p.name == STAGING_DIR) for p in backup.iterdir()):
            if not _left_before_its_manifest(backup) and not _left_before_its_marker(backup, root):
                if made:
                    backup.rmdir()
                raise UsageError("the backup directory exists and is not empty", backup)
            for child in backup.iterdir():
                if not (staged and child.name == STAGING_DIR):
                    shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        yield made


def _left_before_its_marker(backup: pathlib.Path, root) -> bool:
    """What a repair of this store killed after its manifest, before the store's marker, leaves:
    its intent record (intent.never_began), or not yet one (no record, no state after, no
    marker naming it, and the store as the backup found it). It changed nothing in the store,
    and the same command runs again over it."""
    names = {p.name for p in backup.iterdir()}
    if not names <= {COPIES_DIR, STAGING_DIR, MANIFEST_NAME, MANIFEST_NAME + ".tmp", intent.INTENT_NAME,
                     intent.INTENT_NAME + ".tmp"} or MANIFEST_NAME not in names:
        return False
    try:
        manifest = read_manifest(backup)
    except RmqError:
        return False
    if intent.never_began(backup, root, manifest):
        return True
    from rmqtool.recovery.undo import as_before
    marker = intent.unfinished(root)
    return (not names & {intent.INTENT_NAME, intent.INTENT_NAME + ".tmp"} and manifest.after is None
            and pathlib.Path(manifest.store).resolve() == pathlib.Path(root).resolve()
            and (marker is None or pathlib.Path(marker.backup_dir).resolve() != backup.resolve())
            and as_before(manifest, root))


def _left_before_its_manifest(backup: pathlib.Path) -> bool:
    """What a repair killed while it filled its backup directory leaves there: its copies
    (``copies/NNNN.bin``), its staging, a manifest not yet renamed in; no manifest, so no intent
    record, so no change to the store (:func:`removed_unless_begun` takes such a directory back
    itself when it is stopped by an error, not a kill)."""
    try:
        names = {p.name for p in backup.iterdir()}
        copies = backup / COPIES_DIR
        return bool(names) and names <= {COPIES_DIR, STAGING_DIR, MANIFEST_NAME + ".tmp"} and \
            (STAGING_DIR not in names or (backup / STAGING_DIR).is_dir()) and \
            (COPIES_DIR not in names or all(p.is_file() and p.name.endswith(".bin") and p.name[:-4].isdigit()
                                            for p in copies.iterdir()))
    except OSError:
        return False


@contextlib.contextmanager
def removed_unless_begun(backup: pathlib.Path, root: pathlib.Path, made: bool, made_here: tuple[str, ...] = ()):
    """Until the store's marker names the backup (``intent.begin``), nothing in the store has
    changed but the names the caller made just before (``made_here``: the engine's lock file
    on a store that had none): a run stopped before that (a full disk, a file it cannot read)
    removes those and takes back what it put into the backup, which would fill the disk and
    block the next run, and says the store is as it was. After it, the backup is what undo
    and a re-run need, and stays."""
    try:
        yield
    except BaseException as exc:
        held = intent.unfinished(root)
        if held is not None and pathlib.Path(held.backup_dir).resolve() == backup.resolve():
            raise
        if made:
            shutil.rmtree(backup, ignore_errors=True)
        else:  # it was empty (or held only a redispatch's staging, built again by a new run)
            for child in list(backup.iterdir()) if backup.is_dir() else ():
                shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
        for name in made_here:
            (root / name).unlink(missing_ok=True)
        if isinstance(exc, RmqError):
            exc.message += " (nothing in the store was changed)"
        raise


def delete_file(path: pathlib.Path) -> None:
    """Remove a file a repair backed up (gone already: a re-run), its directory forced."""
    remove_forced(path)


def write_bytes(path: pathlib.Path, start: int, data: bytes) -> None:
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError as exc:
        raise StoreAccessError(f"cannot open for writing ({exc.strerror})", path) from None
    try:
        os.pwrite(fd, data, start)
        os.fsync(fd)
    except OSError as exc:
        raise StoreAccessError(f"cannot write ({exc.strerror})", path, start) from None
    finally:
        os.close(fd)


def write_zeros(path: pathlib.Path, start: int, end: int) -> None:
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError as exc:
        raise StoreAccessError(f"cannot open for writing ({exc.strerror})", path) from None
    try:
        pos = start
        while pos < end:
            n = min(ZERO_CHUNK, end - pos)
            os.pwrite(fd, bytes(n), pos)
            pos += n
        os.fsync(fd)
    except OSError as exc:
        raise StoreAccessError(f"cannot write ({exc.strerror})", path, start) from None
    finally:
        os.close(fd)


def _appended_later(root: pathlib.Path, plan: RecoveryPlan, commit_log_directories=()) -> tuple[list, dict | None]:
    """Whole files that dispatching again after the plan appends to or rewrites: the
    checkpoint, the abort marker, the last index file the plan keeps, and the last file of
    each queue (a 5.x batch consume queue's too, and the ext's: the ext units dispatch puts)
    whose topic dispatch reads a record of (every queue's when that is not known) or that the
    plan itself changes. Kept (as RESTORE entries; a consume queue's file the plan does not
    change as the TAIL range after its last unit) so that undo gives the store back exactly.
    With them, the state of the other queues' last files, which nothing writes ({path: [size,
    written end]}; None when every queue's is kept)."""
    paths = StorePaths(root)
    gone = {pathlib.Path(a.path).resolve() for a in plan.actions if a.kind == DELETE}
    acted = {pathlib.Path(a.path).resolve() for a in plan.actions}  # the plan's own ranges change these
    topics = dispatched_topics(plan, commit_log_directories)
    keep = [paths.checkpoint, paths.abort]
    if paths.index.is_dir():
        keep += sorted(p for p in paths.index.iterdir() if p.is_file() and p.resolve() not in gone)[-1:]
    left_alone = None if topics is None else {}
    out = []
    for plain, topic, last in queue_last_files(root):
        if last.resolve() in gone:  # the plan deletes it: the file before it is the queue's last
            files = sorted(p for p in last.parent.iterdir() if p.is_file() and p.resolve() not in gone)
            last = files[-1] if files else None
        if last is None:
            continue
        real = last.resolve()
        if real in acted:
            keep.append(last)
        elif topics is not None and topic not in topics:
            left_alone[str(real)] = file_state(last)
        elif plain:
            # units are appended where the walk ended, which is the last non-zero byte's unit here
            # (anything after it would be the plan's to zero, and the file kept whole above)
            size, end = file_state(last)
            out.append(Action(TAIL, str(last), end, size, "", "dispatch appends units after the last"))
        else:
            keep.append(last)
    for p in keep:
        if p.is_file():
            out.append(Action(RESTORE, str(p), 0, p.stat().st_size, "", "dispatch changes it after the plan"))
    return out, left_alone


def _marked_later(root: pathlib.Path, made_here: tuple[str, ...]) -> list[Action]:
    """The lock file, when the writer's mark changes a byte of it (a file of other bytes, or
    shorter): kept whole (RESTORE), so that undo gives back what it held."""
    lock = StorePaths(root).lock
    if LOCK_FILE in made_here:
        return []  # undo removes it
    held = read_lock_file(lock, len(LOCK_CONTENT))
    if held is None or held == LOCK_CONTENT:
        return []
    return [Action(RESTORE, str(lock), 0, os.stat(lock).st_size, "", "the writer marks it as the broker does")]


CREATE = "create"
REPLACE = "replace"


def apply_file_changes(root: str | os.PathLike, changes, backup_dir: str | os.PathLike | None,
                       plan_doc: dict, command: str | None = None, operation: str = "redispatch") -> Applied:
    """Swap whole files into a store (redispatch): ``changes`` are (kind, target, staged) with
    kind create, replace or delete. Every file replaced or deleted is copied into the backup
    first, with the store's listing, so that ``rmqtool undo`` gives the store back. Staged
    files in the backup's ``staging/`` are moved in (a rename: nothing half-written is ever
    in a directory the broker loads); others are copied beside the backup, then moved.
    ``operation``: the intent record's name for it (``offsets reset`` swaps config files too)."""
    root = pathlib.Path(root)
    with held_for(root):  # taken, not only asked: no writer starts between the listing and the swap
        with create_backup_dir(root, backup_dir, staged=True) as (backup, made), \
                removed_unless_begun(backup, root, made):
            refuse_links([target for kind, target, _staged in changes if kind != CREATE])
            return _swap_in(root, changes, backup, plan_doc, command, operation)


def _swap_in(root: pathlib.Path, changes, backup: pathlib.Path, plan_doc: dict, command: str | None,
             operation: str) -> Applied:
    """:func:`apply_file_changes`' work, into the backup directory made for it."""
    listing, directories = store_listing(root)
    entries = []
    for i, (kind, target, _staged) in enumerate(changes):
        if kind == CREATE:
            continue
        path = pathlib.Path(target)
        st = os.stat(path)
        copy = f"{COPIES_DIR}/{i:04d}.bin"
        digest = copy_range(path, 0, st.st_size, backup / copy)
        entries.append(Entry(DELETE if kind == DELETE else RESTORE, entry_name(path, root),
                             0, st.st_size, digest, copy, st.st_mode & 0o7777, st.st_mtime_ns))
    # every staged file forced, in the backup, before the intent: a re-run or undo never needs them
    incoming = backup / STAGING_DIR / "incoming"
    incoming.mkdir(parents=True, exist_ok=True)
    moves = []
    for i, (kind, target, staged) in enumerate(changes):
        if kind == DELETE:
            moves.append((kind, pathlib.Path(target), None))
            continue
        ready = incoming / f"{i:06d}"
        try:
            if backup.resolve() in pathlib.Path(staged).resolve().parents:
                os.replace(staged, ready)  # built inside the backup: moved, not copied
            else:
                shutil.copyfile(staged, ready)
            with open(ready, "rb+") as f:
                os.fsync(f.fileno())
        except OSError as exc:
            raise StoreAccessError(f"cannot stage ({exc.strerror})", ready) from None
        moves.append((kind, pathlib.Path(target), ready))
    sync_dir(incoming)
    sync_dir(backup / COPIES_DIR)
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
    command = _command(command, root, operation)
    manifest = write_manifest(backup, Manifest(str(root.resolve()), created, plan_doc, tuple(entries), listing,
                                               directories, command=command))
    intent.begin(backup, root, operation, command, undo_command(backup))
    deleted = deleted_bytes = 0
    for kind, path, ready in moves:
        intent.step()
        try:
            if kind == DELETE:
                deleted_bytes += os.stat(path).st_size
                os.unlink(path)
                deleted += 1
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                move_in(ready, path)
            sync_dir(path.parent)
        except OSError as exc:
            raise StoreAccessError(f"cannot write ({exc.strerror})", path) from None
    shutil.rmtree(backup / STAGING_DIR, ignore_errors=True)
    finish_apply(backup, root)
    return Applied(None, backup, manifest, 0, deleted, deleted_bytes)


def move_in(ready: pathlib.Path, target: pathlib.Path) -> None:
    """A rename when the backup is on the store's file system (atomic); else the bytes copied
    over the target and forced (the backup holds the original, the intent record the rest)."""
    try:
        os.replace(ready, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        copy_sparse(ready, target)

