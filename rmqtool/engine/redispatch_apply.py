"""redispatch as the command does it: the commit log's end settled first, the files built in
a staging directory (a temporary one for a plan; inside the backup for ``apply``, outside
every directory the broker loads), compared with the store's, and with ``apply`` swapped in
by recovery/apply with a backup."""
from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import shutil
import tempfile

from rmqtool.errors import RecoveryNeeded, UsageError
from rmqtool.recovery.store_lock import held_for, refuse_held
from rmqtool.store.view import StoreView
from rmqtool.store.rocksdb_cq import configured_store_type, rocksdb_only


@dataclasses.dataclass
class RedispatchRun:
    """The plan's document, the sizes files were built in, whether they differ from the
    store's, and the error to end with after the plan is shown (a size --apply refuses)."""
    doc: dict
    sizes: object
    differs: bool
    refusal: Exception | None = None


@dataclasses.dataclass
class _Stage:
    """Where one redispatch builds its files (``path``): a temporary directory for a plan; for
    ``apply``, the staging directory inside the backup, outside every directory the broker
    loads (``backup``; ``made``: created by this run)."""
    root: pathlib.Path
    path: pathlib.Path
    backup: pathlib.Path | None = None
    made: bool = False

    def discard(self) -> None:
        """Nothing is swapped in: the staging goes, and the backup directory if made here."""
        if self.backup is not None:
            shutil.rmtree(self.backup if self.made else self.path, ignore_errors=True)

    @contextlib.contextmanager
    def discarded_on_error(self):
        """A build that fails has changed nothing: its staging goes with it."""
        try:
            yield
        except BaseException:
            self.discard()
            raise

    def swap_in(self, run: RedispatchRun, changes: list, refused: str | None, command: str) -> RedispatchRun:
        """The run's end: with ``apply``, the differing files swapped in with a backup
        (recovery/apply), unless a size is ``refused`` (then ``run.refusal``) or none differs."""
        from rmqtool.recovery.apply import apply_file_changes
        if self.backup is not None and (refused or not run.differs):
            self.discard()
        if refused:
            run.refusal = UsageError(f"not applied: {refused}", self.root)
            return run
        if self.backup is not None and run.differs:
            todo = [(c.kind, c.path, c.staged) for c in changes if c.kind != "same"]
            applied = apply_file_changes(self.root, todo, self.backup, run.doc, command=command)
            run.doc["applied"] = {"backup_dir": str(applied.backup_dir), "manifest": str(applied.manifest)}
        return run


@contextlib.contextmanager
def _staging(root: pathlib.Path, apply: bool, backup_dir: pathlib.Path | None):
    """The stage of a run: inside ``backup_dir`` (or the default backup directory, which must be
    new or empty) to apply; a temporary directory, removed after, for a plan."""
    from rmqtool.recovery.apply import STAGING_DIR, claimed_backup_dir, default_backup_dir
    if not apply:
        with tempfile.TemporaryDirectory(prefix="rmqtool-redispatch-") as tmp:
            yield _Stage(root, pathlib.Path(tmp))
        return
    backup = backup_dir or default_backup_dir(root)
    # from the build to the swap: no other writer changes what is compared, or fills the backup
    with held_for(root), claimed_backup_dir(backup, root) as made:
        yield _Stage(root, backup / STAGING_DIR, backup, made)


def redispatch_store(view: StoreView, *, cq: bool, index: bool, topics: tuple[str, ...] = (),
                     queue: int | None = None, skip_unknown_topics: bool = False, from_offset: int | None = None,
                     given=None, semantics: str | None = None, apply: bool = False,
                     backup_dir: pathlib.Path | None = None, command: str = "", timer: bool = False,
                     progress=None) -> RedispatchRun:
    """Rebuild the consume queues and/or index files of the store the command opened (``view``)
    from its commit log and compare them with the store's; ``apply`` swaps the differing ones
    in (``command``: the command line that finishes a run cut short). ``timer``: the timer
    store instead (:func:`redispatch_timer`; not with queues, index or a selection). ``progress``:
    a bar of the commit log bytes dispatched (``engine/redispatch.build``)."""
    if timer:
        if cq or index or topics or queue is not None or from_offset is not None or skip_unknown_topics:
            raise UsageError("--timer rebuilds the timer store alone: not with --cq, --index, -t, -q, "
                             "--from-offset or --skip-unknown-topics")
        return redispatch_timer(view, given=given, semantics=semantics, apply=apply, backup_dir=backup_dir,
                                command=command)
    from rmqtool.engine.redispatch import Selection, build, compare
    from rmqtool.recovery.undo import roll_back_unfinished
    from rmqtool.store.config import known_topics

    root = view.root
    if index and (topics or queue is not None or skip_unknown_topics):
        # the broker's index is one for the store (IndexService.buildIndex takes every record dispatched):
        # built from a selection, it lost every other topic's keys
        raise UsageError("-t, -q and --skip-unknown-topics choose consume queues; the index holds every topic's "
                         "keys and is rebuilt whole: give --cq with them, --index alone", root)
    if cq and rocksdb_only(root, store_type=configured_store_type(given)):
        raise UsageError("not redispatched: its consume queues are in RocksDB only (storeType=defaultRocksDB): "
                         "--cq would write file consume queues the broker never reads (--index rebuilds the "
                         "index alone; rmqtool dump rocksdbcq reads the queues)", root)
    if apply:
        refuse_held(view)
    # a run cut short: rolled back before the view reads a file (it reads each on first use)
    again = roll_back_unfinished(root, "redispatch") if apply else None
    known = None
    if skip_unknown_topics:
        known = known_topics(view.paths.config)
        if known is None:
            raise UsageError("--skip-unknown-topics: config/topics.json (or its .bak) cannot be read", root)
    selection = Selection(tuple(topics), queue, frozenset(known) if known is not None else None)
    _require_settled_end(view, semantics, selection if cq else None)
    with _staging(root, apply, backup_dir or again) as stage:
        with stage.discarded_on_error():
            built = build(view, stage.path / "built", cq=cq, index=index, selection=selection,
                          from_offset=from_offset, sizes=given, progress=progress)
        # multi-dispatch queues not built here (a selection, the ext) keep their files as they are
        kept = frozenset() if built.multi_dispatch_built else built.multi_dispatch_queues
        changes = compare(view, built, cq=cq, index=index, selection=selection, kept=kept)
        doc = {"store_path": str(root), "from_offset": built.from_offset, "to_offset": built.to_offset,
               "multi_dispatch_queues_kept": sorted(kept),
               "multi_dispatch_queues_built": sorted(built.multi_dispatch_queues) if built.multi_dispatch_built else [],
               "records_dispatched": built.records, "consume_queue_file_size": built.cq_size,
               "index_geometry": list(built.index_geometry) if built.index_geometry else None,
               "consume_queues": cq, "index": index,
               "sizes": built.sizes.to_json(), "sizes_unknown": built.unknown_sizes,
               "consume_queue_ext_file_size": {"value": built.ext_file_size[0], "taken_from": built.ext_file_size[1]}
               if built.ext_file_size else None,
               "changes": [{"kind": c.kind, "file": c.path, "units": c.units} for c in changes],
               "counts": {k: sum(1 for c in changes if c.kind == k) for k in ("create", "replace", "delete", "same")}}
        run = RedispatchRun(doc, built.sizes, any(c.kind != "same" for c in changes))
        refused = (built.sizes.refusal(built.unknown_sizes) or _ext_size_refusal(built, changes, given)) \
            if apply and run.differs else None
        return stage.swap_in(run, changes, refused, command)


def _ext_size_refusal(built, changes, given) -> str | None:
    """Ext files to write in a size nothing shows (their files gone, no config naming it):
    the broker's load refuses a file of another length than it runs with
    (MappedFileQueue.load), and so the whole store (ConsumeQueue.load ands the ext's in)."""
    from rmqtool.store.paths import CONSUMEQUEUE_EXT_DIR
    if built.ext_file_size is None or built.ext_file_size[1] != "default" or \
            (given is not None and given.assume_defaults):
        return None
    written = [c for c in changes if c.kind in ("create", "replace") and f"/{CONSUMEQUEUE_EXT_DIR}/" in c.path]
    if not written:
        return None
    return (f"nothing in the store shows mappedFileSizeConsumeQueueExt ({built.ext_file_size[0]}, the broker's "
            f"default) for the {len(written)} ext file(s) to write: a broker run with another size refuses "
            f"them at load. Give --broker-config FILE (the broker's broker.conf), or --assume-defaults")


def _require_settled_end(view: StoreView, semantics: str | None, rebuilt=None) -> None:
    """Dispatching would build on what recovery cuts: the log's end must be settled first.
    ``rebuilt``: the Selection of queues --cq rebuilds; a file of theirs the broker's load
    refuses is one the rebuild replaces, so the end is settled as if their directories
    were moved out of the store."""
    from rmqtool.recovery.outcome import Settings
    from rmqtool.recovery.plan import plan_recovery

    root = view.root
    without: set[str] = set()
    while True:
        recovery = plan_recovery(view, settings=Settings(semantics=semantics, without_queue_dirs=frozenset(without)))
        refused = _rebuilt_queue_refused(view, recovery.outcome, rebuilt)
        if refused is None or refused in without:
            break
        without.add(refused)
    log_dirs = set(view.commit_log_directories)  # several with a multi-path commit log
    cut = [f for f in recovery.findings if f.path and pathlib.Path(f.path).parent in log_dirs]
    if recovery.semantics_undecided:
        raise UsageError(f"the store's end depends on the broker version: {recovery.semantics_undecided}", root)
    outcome = recovery.outcome
    if outcome is not None and not outcome.loadable and outcome.advice:  # recover cannot help: say what does
        raise RecoveryNeeded(f"the broker would not load this store: {outcome.reason}; {outcome.advice}", root)
    if recovery.refusal or cut:
        why = recovery.refusal or f"{cut[0].id}: {cut[0].message}"
        # the code append gives the same store (RecoveryNeeded, 3): not a usage error
        raise RecoveryNeeded(f"the store needs recovery first ({why}); run rmqtool recover", root)


def _rebuilt_queue_refused(view: StoreView, outcome, rebuilt) -> str | None:
    """The queue directory (of those ``rebuilt``) holding the file the load refuses, or None."""
    if rebuilt is None or outcome is None or outcome.loadable or not outcome.refused_path:
        return None
    from rmqtool.store.paths import CONSUMEQUEUE_EXT_DIR
    refused = pathlib.Path(outcome.refused_path)
    paths = view.paths
    # (where the refused file lies, the queue directory its queue is loaded from): an ext file's queue too
    for base, queues in ((paths.consumequeue, paths.consumequeue), (paths.batch_consumequeue, paths.batch_consumequeue),
                         (paths.root / CONSUMEQUEUE_EXT_DIR, paths.consumequeue)):
        try:
            topic, queue_id, _name = refused.relative_to(base).parts
        except ValueError:  # not a file two levels down: a queue directory's own refusal (its type) stands
            continue
        if queue_id.isdigit() and rebuilt.wants(topic, int(queue_id)):
            return str(queues / topic / queue_id)
    return None


def redispatch_timer(view: StoreView, *, given=None, semantics: str | None = None, apply: bool = False,
                     backup_dir: pathlib.Path | None = None, command: str = "") -> RedispatchRun:
    """redispatch --timer: the timer log, wheel and timercheck rebuilt from the commit log for
    the pending timer messages (engine/timer_rebuild.py), compared with the store's; ``apply``
    swaps them in with a backup (the same staging, backup and manifest as queues and index)."""
    from rmqtool.engine.store_sizes import DEFAULT
    from rmqtool.engine.timer_rebuild import build_timer, compare_timer, timer_plan_doc, timer_settings
    from rmqtool.recovery.undo import roll_back_unfinished

    root = view.root
    if apply:
        refuse_held(view)
    again = roll_back_unfinished(root, "redispatch") if apply else None
    _require_settled_end(view, semantics)
    settings = timer_settings(root, given.broker_config if given is not None else None)
    with _staging(root, apply, backup_dir or again) as stage:
        with stage.discarded_on_error():
            built = build_timer(view, stage.path / "built", settings=settings)
        changes = compare_timer(view, built)
        size = settings.file_size
        unknown = ["mapped_file_size_timer_log"] if size.taken_from == DEFAULT else []
        doc = {"store_path": str(root), "timer": timer_plan_doc(built),
               "sizes": {"mapped_file_size_timer_log": size.to_json()}, "sizes_unknown": unknown,
               "changes": [{"kind": c.kind, "file": c.path, "units": None} for c in changes],
               "counts": {k: sum(1 for c in changes if c.kind == k) for k in ("create", "replace", "delete", "same")}}
        run = RedispatchRun(doc, None, any(c.kind != "same" for c in changes))
        assume = given is not None and given.assume_defaults
        refused = None
        if apply and run.differs and unknown and not assume:
            refused = (f"nothing in the store shows mapped_file_size_timer_log ({size.value}, the broker's default): "
                       f"timer log files of another size are read at the wrong places; give --broker-config FILE "
                       f"(mappedFileSizeTimerLog), or --assume-defaults if the broker runs with its default")
        return stage.swap_in(run, changes, refused, command)
