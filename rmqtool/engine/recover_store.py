"""recover as the command does it: the plan, the sizes files are written with, and with
``apply`` the broker's recovery carried out by the engine's writable open, in place or into
a copy (``--to``: the store is left as it is)."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import shlex
import shutil

from rmqtool.errors import CorruptData, ExitCode, RepairUnfinished, StoreAccessError, UsageError
from rmqtool.store.paths import COPY_OF_FILE, UNFINISHED_FILE


@dataclasses.dataclass(frozen=True)
class RecoverRequest:
    """What the recover command asks, for any family: ``settings``, ``given`` (sizes),
    ``keep_index`` and ``again`` (the options that run it again) are RocketMQ's;
    ``rocketmq_flags`` names those given, for a family that has no use for them to refuse."""
    apply: bool = False
    to: pathlib.Path | None = None
    force: bool = False
    backup_dir: pathlib.Path | None = None
    settings: object = None
    given: object = None
    keep_index: bool = False
    again: tuple[str, ...] = ()
    keep_past_damage: bool = False
    rocketmq_flags: tuple[str, ...] = ()
    on_written: object = None  # --apply: told the bytes written (the command's progress bar)
    now_ms: int | None = None  # when the broker starts next (the timer section's clock; None: the clock)


@dataclasses.dataclass
class RecoverRun:
    """What recover did: ``doc`` (the plan's JSON, with sizes and what was applied) and why
    it stops, if it does: ``refusal`` after the plan is shown (the error to end with)."""
    doc: dict
    plan: object
    sizes: object = None  # StoreSizes, when the plan says which sizes files get
    applied: bool = False
    refusal: Exception | None = None
    exit_code: int = int(ExitCode.OK)


def recover_store(view, settings, *, given, keep_index: bool = False, apply: bool = False,
                  to: pathlib.Path | None = None, force: bool = False, backup_dir: pathlib.Path | None = None,
                  again: tuple[str, ...] = (), keep_past_damage: bool = False, on_written=None,
                  now_ms: int | None = None) -> RecoverRun:
    """Plan the broker's restart recovery of the store ``view`` opened and, with ``apply``, carry it out in the
    sizes ``given`` where the files do not show them. ``again``: the options after the path
    that run this again (what finishes it when it is cut short). ``keep_past_damage``: each
    damaged record where the walk cuts the log, when its extent is proven, is replaced by a
    record of its size the walk accepts (recovery/quarantine.py), so the records after it stay.
    ``on_written(n)``: told the bytes the apply writes (backup, zeros, re-dispatch). ``now_ms``:
    when the broker starts next, for the plan's timer section (None: the clock)."""
    from rmqtool.engine.store import multi_path_refusal, unknown_sizes
    from rmqtool.engine.store_sizes import plan_queue_file_size, store_sizes
    from rmqtool.recovery.plan import plan_recovery
    from rmqtool.store.rocksdb_cq import configured_store_type

    root = view.root
    view, rolled_back = ready_to_apply(view, to) if apply else (view, None)
    missing_file_ok = to is not None or force  # a new directory is the broker's load of the store, the input kept
    plan = plan_recovery(view, consume_queue_file_size=plan_queue_file_size(root, given), settings=settings,
                         keep_index=keep_index, missing_file_ok=missing_file_ok,
                         store_type=configured_store_type(given), now_ms=now_ms)
    doc = plan.to_json()
    rewrites = ()
    if keep_past_damage:
        doc["keep_past_damage"], rewrites = _keep_past_damage(view, plan, settings)
    if apply and plan.semantics_undecided:
        raise UsageError(f"--apply needs --semantics: {plan.semantics_undecided}", root)
    sizes = unknown = None
    if plan.loadable:  # an unloadable store's files may disagree in size: the plan says why
        sizes = store_sizes(view, given)  # the view's listing: the commit log is not listed again
        unknown = unknown_sizes(view, sizes, plan)
        doc["sizes"], doc["sizes_unknown"] = sizes.to_json(), unknown
    doc["index_files_cut_short"] = _index_files_cut_short(view, sizes)
    unfinished = view.unfinished
    run = RecoverRun(doc, plan, sizes)
    if not apply:
        # messages the broker no longer serves are damage found, even when the start changes nothing
        if (not plan.loadable or not plan.is_empty or doc["lost_messages"] or unfinished is not None
                or doc["index_files_cut_short"] or (doc.get("timer") or {}).get("run", {}).get("losses")):
            run.exit_code = int(ExitCode.CORRUPT)
        return run
    if to is not None and unfinished is not None:  # a copy of a half-changed store is no store to repair
        raise RepairUnfinished(f"not copied: {unfinished.says()}: "
                               f"{unfinished.ways_out()}", root)
    if plan.refusal or plan.dispatch_refusal:
        run.refusal = CorruptData(f"not recovered: {plan.refusal or plan.dispatch_refusal}", root)
        return run
    if to is not None and view.commit_log_paths is not None:  # the copy would be of the root, not the disks
        run.refusal = UsageError(f"not recovered: {multi_path_refusal(view.commit_log_paths)}", root)
        return run
    if sizes is not None and sizes.refusal(unknown):
        run.refusal = UsageError(f"not recovered: {sizes.refusal(unknown)}", root)
        return run
    with contextlib.ExitStack() as held:
        target = root
        if to is not None:  # the same command finishes a copy's repair cut short: it makes the copy again
            finish = ["rmqtool", "recover", os.path.abspath(root), *again, "--apply", "--to", os.path.abspath(to)]
            target = held.enter_context(copy_store(root, to, shlex.join(finish)))  # held until it is repaired
        run.applied = True
        if plan.changes_nothing and unfinished is None and not rewrites:  # not even the lock, the abort marker or the checkpoint
            doc["applied"] = {"store_path": str(target), "backup_dir": None, "manifest": None}
            run.sizes = None
            _copy_done(target, to)
            return run
        command = shlex.join(["rmqtool", "recover", os.path.abspath(target), *again, "--apply"])
        applied = _apply(target, settings, keep_index, backup_dir or rolled_back, given, missing_file_ok, command,
                         _moved(rewrites, root, target), on_written)
        _copy_done(target, to)
    doc["applied"] = {"store_path": str(target), **(applied.to_json() if applied is not None else
                                               {"backup_dir": None, "manifest": None})}
    if rewrites and applied is not None:  # the plan carried out is the one made after the replacement
        doc["applied"]["recovered_end"] = applied.plan.commit_log_end
    return run


def ready_to_apply(view, to: pathlib.Path | None):
    """(the view to plan, the backup of an --apply cut short it was rolled back from, or None).
    A running broker's store is refused before anything is read for it, copied or rolled back;
    an --apply cut short gives the store back as it was first, then it is planned (planned half
    changed, a file deleted before the next one looked missing, and the command that finishes
    it was refused). A DLedger store's --apply asks it too (families/rocketmq.py)."""
    from rmqtool.recovery.store_lock import refuse_held
    refuse_held(view)
    other = view.unfinished
    if to is None and other is not None and other.operation != "recover":  # an undo cut short, a redispatch:
        # its own command finishes it; planned half changed, this store only looked damaged (exit 3)
        raise RepairUnfinished(f"not recovered: {other.says()}: {other.ways_out()}", view.root)
    if to is not None or other is None or other.operation != "recover":
        return view, None
    from rmqtool.recovery.undo import roll_back_unfinished
    from rmqtool.store.view import StoreView
    rolled_back = roll_back_unfinished(view.root, "recover")
    return StoreView(view.root, commit_log_paths=view.commit_log_paths), rolled_back


def _copy_done(target: pathlib.Path, to: pathlib.Path | None) -> None:
    """A recover --to copy repaired (by the --to command, or in place by the command its marker
    names): its marks go, so that it is no longer taken for an unfinished copy."""
    from rmqtool.recovery import intent
    if to is not None or intent.copy_source(target) is not None:
        intent.end_copy(target)


def _index_files_cut_short(view, sizes) -> list[dict]:
    """The index files shorter than the size the broker maps them at (its settings' geometry):
    the start keeps and grows them, and the keys of the entries cut off are not found by key."""
    from rmqtool.formats.indexfile import index_file_size
    if sizes is None or not view.paths.index.is_dir():
        return []
    mapped = index_file_size(sizes.index_slots.value, sizes.index_entries.value)
    cut = []
    for path in view.index_files.paths:
        size = os.stat(path).st_size
        if size < mapped:
            cut.append({"file": str(path), "size": size, "mapped_size": mapped})
    return cut


def _apply(target: pathlib.Path, settings, keep_index: bool, backup_dir, given, missing_file_ok: bool,
           command: str, rewrites=(), on_written=None):
    """The engine's writable open carries the plan out and dispatches again, in the sizes
    ``given`` where the files do not show them; its close writes the checkpoint and removes
    the abort file. An earlier run cut short is rolled back first (its backup's path is used
    again), so running the command again finishes it."""
    from rmqtool.engine.store import Store
    from rmqtool.recovery.undo import roll_back_unfinished
    again = roll_back_unfinished(target, "recover")
    if backup_dir is None:
        backup_dir = again
    return Store.recover(target, backup_dir=backup_dir, recovery=settings, keep_index=keep_index, sizes=given,
                         missing_file_ok=missing_file_ok, command=command, rewrites=rewrites,
                         on_written=on_written)


def _keep_past_damage(view, plan, settings) -> tuple[dict | None, tuple]:
    """--keep-past-damage: the records to replace (the plan's section) and their bytes."""
    from rmqtool.engine.quarantine_record import quarantine_record
    from rmqtool.recovery.apply import Rewrite
    from rmqtool.recovery.quarantine import plan_keep_past_damage
    if not plan.loadable or plan.outcome is None:
        return None, ()
    kept = plan_keep_past_damage(view.commit_log_listing().segments, plan.outcome, settings, quarantine_record)
    if kept is None:
        return None, ()
    return kept.to_json(), tuple(Rewrite(q.path, q.position, kept.records[q.offset]) for q in kept.replaced)


def _moved(rewrites, root: pathlib.Path, target: pathlib.Path) -> tuple:
    """The rewrites of ``root``'s files as ``target``'s (--to: the copy is repaired)."""
    import dataclasses
    if target == root:
        return rewrites
    return tuple(dataclasses.replace(r, path=str(target / pathlib.Path(r.path).relative_to(root))) for r in rewrites)


@contextlib.contextmanager
def copy_store(root: pathlib.Path, to: pathlib.Path, finish: str):
    """recover --to: a copy of the store (not its lock) to repair, writable by us, its files'
    holes kept (a 1 GiB segment made ahead, a QMQ segment: a whole copy would take their full
    size). Made as TO.copy-partial, marked as an unrepaired copy of the store (``finish``: the
    command, run again, that finishes it) and renamed, so that a copy cut short (a kill, a
    full disk) is never a store at TO, and a repair of TO cut short is made again from the
    start by the same command; one that fails is removed, and says why in one line. TO is
    yielded held (flock, as a writer holds a store root) from the copy's first byte until the
    block ends: the hold of TO.copy-partial is TO's once renamed (one directory), so another
    run making or repairing TO is refused (exit 5), never given the copy to remove."""
    from rmqtool.recovery import intent
    from rmqtool.recovery.manifest import copy_sparse
    from rmqtool.recovery.store_lock import root_held
    from rmqtool.store.output_path import refuse_output_in_store
    refuse_output_in_store(to, "--to", [root])  # a copy inside its source copies itself, among the store's files
    if _repaired_copy(root, to):  # killed clearing its marks: the repair is done; it is planned again in place
        with root_held(to):
            yield to
        return
    partial = to.with_name(to.name + ".copy-partial")
    with _held_partial(partial):
        try:
            if to.exists() and (not to.is_dir() or any(to.iterdir())) and not _own_copy(root, to):
                raise UsageError("--to: the directory exists and is not empty", to)
            for child in list(partial.iterdir()):  # a copy an earlier run left cut short
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
            shutil.copytree(root, partial, ignore=shutil.ignore_patterns("lock", *_OWN_MARKS),
                            copy_function=copy_sparse, dirs_exist_ok=True)
            for p in [partial, *partial.rglob("*")]:
                os.chmod(p, os.stat(p).st_mode | 0o200)  # the copy is ours to repair
            intent.mark_copy(partial, to, root, finish)
            if to.exists():
                with root_held(to):  # an empty TO another run has made its own is not taken
                    to.rmdir()
            os.replace(partial, to)
        except BaseException as exc:
            shutil.rmtree(partial, ignore_errors=True)  # held here: nobody else's (refused: it was made for nothing)
            if not isinstance(exc, (OSError, shutil.Error)):
                raise
            raise StoreAccessError(f"--to: the store could not be copied ({_copy_failure(exc)}); nothing was "
                                   f"written there", to) from None
        yield to


_OWN_MARKS = (UNFINISHED_FILE, COPY_OF_FILE)  # a store's marks, never its copy's


@contextlib.contextmanager
def _held_partial(partial: pathlib.Path):
    """TO.copy-partial made (or the one a run cut short left, taken over) and held (flock) while
    the block runs. Another run making it is refused (exit 5), as is a name there that is no
    directory (a link's target would be emptied)."""
    from rmqtool.recovery.store_lock import directory_held
    try:
        partial.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        pass  # not a directory: said below
    except OSError as exc:
        raise StoreAccessError(f"--to: the copy cannot be made ({exc.strerror}); nothing was written", partial) \
            from None
    if partial.is_symlink() or not partial.is_dir():
        raise UsageError("--to: in the way of the copy, and not one an earlier run began: move it", partial)
    with directory_held(partial, "copy", "is copying the store there"):
        yield


def _own_copy(root: pathlib.Path, to: pathlib.Path) -> bool:
    """Whether ``to`` is a copy of ``root`` an earlier recover --to left unrepaired (cut short):
    then it and the backup its repair was writing are removed, to be made again. Nothing in
    them is anybody else's: every byte came from ``root``, which is as it was. Both are held
    first: a run still repairing it (or filling that backup) is refused (exit 5), and asked
    again once held (it may have finished, and be the operator's store now)."""
    from rmqtool.recovery.store_lock import directory_held, held_for
    if _unrepaired_copy(root, to) is None:
        return False
    with held_for(to):
        marker = _unrepaired_copy(root, to)
        if marker is None:
            return False
        backup = pathlib.Path(marker.backup_dir) if marker.backup_dir else None
        if backup is not None and backup.is_dir():
            with directory_held(backup, "backup directory", "is writing into this backup directory"):
                shutil.rmtree(backup)
        shutil.rmtree(to)
    return True


def _repaired_copy(root: pathlib.Path, to: pathlib.Path) -> bool:
    """Whether ``to`` is a copy of ``root`` whose repair is done but whose provenance mark a
    kill left (intent.end_copy: the repair's marker gone, ``.rmqtool-copy-of`` not yet):
    finished by planning it again in place, which changes nothing, and clearing the mark.
    Never removed: it is the operator's store now."""
    from rmqtool.recovery import intent
    from rmqtool.store.unfinished import read_unfinished
    source = intent.copy_source(to)
    return source is not None and pathlib.Path(source) == root.resolve() and read_unfinished(to) is None


def _unrepaired_copy(root: pathlib.Path, to: pathlib.Path):
    """The marker of ``to`` when it is a copy of ``root`` whose repair is not done, else None (a
    repaired copy, its marker gone, is the operator's store now)."""
    from rmqtool.recovery import intent
    from rmqtool.store.unfinished import read_unfinished
    source = intent.copy_source(to)
    marker = read_unfinished(to)
    if source is None or pathlib.Path(source) != root.resolve() or marker is None:
        return None
    return marker


def _copy_failure(exc: OSError) -> str:
    """The first reason of a failed copy (shutil.Error holds one (source, target, why) a file)."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) and exc.args[0]:
        source, _target, why = exc.args[0][0]
        return f"{source}: {why.split(':')[0] if why.startswith('[Errno') else why}"
    return exc.strerror or str(exc)
