"""The intent record: a repair (or an undo) says what it is doing before its first change to a
store and clears that after its last, so that a kill in between is seen and can be finished
or undone.

``begin`` writes ``intent.json`` into the backup directory (forced), then the marker
``.rmqtool-unfinished`` into the store root naming the backup (forced, the directory
forced); ``end`` removes the marker, then the record. Every command reads the marker
(``store/unfinished.py``): readers say so on stderr, writers refuse, and the command named in
it finishes the work (a repair rolls back to the backup and runs again; an undo runs again).

``RMQTOOL_KILL_AFTER=N`` (tests only) makes the process kill itself with SIGKILL at the N-th
change step (:func:`step`), to prove that every point of a repair is finishable.
"""
from __future__ import annotations

import errno
import json
import os
import pathlib
import shlex
import signal

from rmqtool.errors import StoreAccessError
from rmqtool.recovery.manifest import remove_forced, sync_dir
from rmqtool.store.paths import StorePaths
from rmqtool.store.unfinished import Unfinished, read_unfinished

INTENT_NAME = "intent.json"
_steps = 0


def step() -> None:
    """One change to a store is about to be made (the fault-injection point of the kill tests)."""
    global _steps
    limit = os.environ.get("RMQTOOL_KILL_AFTER")
    if limit is None:
        return
    _steps += 1
    if _steps >= int(limit):
        os.kill(os.getpid(), signal.SIGKILL)


def begin(backup_dir: str | os.PathLike, root: str | os.PathLike, operation: str, finish: str, undo: str) -> None:
    """Record the intent in the backup, then mark the store; both on disk before the first change."""
    backup, root = pathlib.Path(backup_dir).resolve(), pathlib.Path(root)
    doc = {"operation": operation, "store": str(root.resolve()), "backup_dir": str(backup), "finish": finish,
           "undo": undo}
    try:
        _write(backup / INTENT_NAME, doc, keep_full=True)
    except OSError as exc:
        # a full disk under an undo of a repair it stopped: that repair's record stays, and says a
        # truth still (its undo is this one, which puts back the same bytes if run again; its
        # finish rolls back to this backup first)
        if operation != "undo" or pending(backup) is None:
            raise StoreAccessError(f"cannot write the intent record ({exc.strerror})", backup / INTENT_NAME) from None
    marker = StorePaths(root).unfinished
    try:
        _write(marker, doc, keep_full=True)
    except OSError as exc:
        # a full disk (what a repair stopped on): the store's marker of this backup's repair stays,
        # and says the truth still: its finish rolls back to this backup first, its undo is this one
        held = read_unfinished(root)
        if held is None or pathlib.Path(held.backup_dir).resolve() != backup:
            raise StoreAccessError(f"cannot write the intent record ({exc.strerror})", marker) from None


def mark_copy(copy: pathlib.Path, to: pathlib.Path, source: pathlib.Path, finish: str) -> None:
    """recover --to: the copy (still at its temporary name) marked, before it is renamed ``to``,
    as a copy of ``source`` whose repair has not begun: readers of ``to`` say so, the repair
    takes the marker over (:func:`roll_back_unfinished` finds nothing to roll back), and
    ``finish`` (the same command) finds its own copy and makes it again. The copy's provenance
    stays until the repair is done (:func:`end_copy`)."""
    _write(StorePaths(copy).copy_of, {"source": str(source.resolve())})
    undo = shlex.join(["rm", "-r", os.path.abspath(to)])  # the store copied is as it was
    _write(StorePaths(copy).unfinished, {"operation": "recover", "store": str(to), "backup_dir": "", "finish": finish,
                                          "undo": undo})


def copy_source(root: str | os.PathLike) -> str | None:
    """The store ``root`` is an unfinished recover --to copy of (:func:`mark_copy`), or None."""
    try:
        return str(json.loads(StorePaths(root).copy_of.read_text(encoding="utf-8"))["source"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def end_copy(root: str | os.PathLike) -> None:
    """A recover --to copy repaired: its marks go (the repair's own marker is gone already
    when it changed anything; when it changed nothing, the copy's is removed here)."""
    for path in (StorePaths(root).unfinished, StorePaths(root).copy_of):
        remove_forced(path, "remove rmqtool's mark")


def end(backup_dir: str | os.PathLike, root: str | os.PathLike) -> None:
    """The last change is on disk: clear the marker, then the record."""
    for path in (StorePaths(root).unfinished, pathlib.Path(backup_dir) / INTENT_NAME):
        remove_forced(path, "remove the intent record")


def never_began(backup_dir: str | os.PathLike, root: str | os.PathLike, manifest) -> bool:
    """Whether the repair this backup was made for was stopped between its intent record and
    the store's marker (:func:`begin`): it never changed the store. Its intent record (or the
    one being written) is a repair's, of this store, the store holds no marker of it, and the
    manifest records no state the repair left (``after``: written once its last change is on
    disk)."""
    record = pending(backup_dir)
    if record is None and not (pathlib.Path(backup_dir) / (INTENT_NAME + ".tmp")).exists():
        return False  # no intent begun (nor is a finished repair's: it is cleared at its end)
    if manifest.after is not None or (record is not None and record.get("operation") in ("undo", "repair")):
        return False
    root = pathlib.Path(root)
    if pathlib.Path(manifest.store).resolve() != root.resolve() or \
            record is not None and pathlib.Path(record.get("store", "")).resolve() != root.resolve():
        return False
    marker = read_unfinished(root)
    return marker is None or pathlib.Path(marker.backup_dir).resolve() != pathlib.Path(backup_dir).resolve()


def pending(backup_dir: str | os.PathLike) -> dict | None:
    """The intent record a backup holds (a repair or undo that did not finish), or None."""
    try:
        return json.loads((pathlib.Path(backup_dir) / INTENT_NAME).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"operation": "repair"}


def unfinished(root: str | os.PathLike) -> Unfinished | None:
    return read_unfinished(root)


def _write(path: pathlib.Path, doc: dict, keep_full: bool = False) -> None:
    """``doc`` as ``path``, whole or not at all. ``keep_full``: a full disk (ENOSPC, EDQUOT) is
    raised as the OSError, for the caller to judge."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        sync_dir(path.parent)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if keep_full and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise StoreAccessError(f"cannot write the intent record ({exc.strerror})", path) from None
