"""``rmqtool offsets reset``: an offline resetOffsetByTime for a stopped broker.

The plan: for each queue a group committed an offset in (``topic@group`` of
``config/consumerOffset.json``, as the broker loads it: ``store/consumer_offsets.py``), the
committed offset and the new one. The new offset is, by target:

* a time: the queue offset ``ConsumeQueue.getOffsetInQueueByTime`` gives for it (what
  ``rmqtool query --time`` answers; ``query/by_time.offset_by_time``, handed in by the caller
  since recovery/ does not import query/), as the broker's ``Broker2Client.resetOffset`` asks;
* earliest / latest: the queue's min / max offset as the store's load leaves the queue
  (``getMinOffsetInQueue`` / ``getMaxOffsetInQueue``);
* an offset: that offset, clamped to [min, max] (a pull outside them is moved back anyway).

A queue without a consume queue answers 0 for all of them (``findConsumeQueue`` makes an
empty one). Only the queues the group's entry holds are reset, as the broker's reset asks
``queryOffset`` for each queue and refuses a group with none.

The apply writes the file as ``ConfigManager.persist`` does: the document the broker loaded
with the new offsets, rendered by fastjson's pretty form (``formats/config.dumps_fastjson``),
the previous main file's bytes kept as ``consumerOffset.json.bak`` (``MixAll.string2File``;
a missing main file leaves the .bak as it is), each swapped in by a rename. The files are
staged in the backup rather than as ``config/consumerOffset.json.tmp`` (a .tmp the broker
would find there is a persist cut short), and swapped in by ``recovery/apply.apply_file_changes``:
the same backup, manifest, intent record and ``rmqtool undo`` as every repair; a store a
process holds (a running broker persists this file every 5 s) is refused.
"""
from __future__ import annotations

import copy
import dataclasses
import os
import pathlib
import shlex
from typing import Callable

from rmqtool.errors import CorruptData, NothingFound, StoreAccessError, StoreLocked, UsageError
from rmqtool.findings import CONSUMER_OFFSET_TABLE_INVALID, Finding
from rmqtool.formats.config import BAK_SUFFIX, INTEGER_BITS, dumps_fastjson, fastjson_number, topic_group
from rmqtool.store.config import read_config_bytes
from rmqtool.store.consumer_offsets import CONSUMER_OFFSET_FILE, ConsumerOffsets, consumer_offsets
from rmqtool.store.paths import CONFIG_DIR
from rmqtool.recovery.loaded_end import loaded_queues, simulate_for_info
from rmqtool.store.view import StoreView, as_view

EARLIEST, LATEST, OFFSET, TIME = "earliest", "latest", "offset", "time"
OPERATION = "offsets reset"  # the intent record's name for an interrupted apply


@dataclasses.dataclass(frozen=True, slots=True)
class ResetTarget:
    """Where the group goes: EARLIEST, LATEST, OFFSET (``value``: a queue offset) or TIME
    (``value``: epoch ms)."""
    kind: str
    value: int | None = None

    @classmethod
    def of(cls, *, to_time: int | None = None, to_offset: int | None = None, to_earliest: bool = False,
           to_latest: bool = False) -> "ResetTarget":
        given = [t for t in (to_time is not None and cls(TIME, to_time),
                             to_offset is not None and cls(OFFSET, to_offset),
                             to_earliest and cls(EARLIEST), to_latest and cls(LATEST)) if t]
        if len(given) != 1:
            raise UsageError("give one of --to-time, --to-offset, --to-earliest, --to-latest")
        if given[0].kind == OFFSET and to_offset < 0:
            raise UsageError(f"--to-offset: {to_offset} is below 0")
        return given[0]

    def words(self) -> list[str]:
        """The options that ask for this target (the command that finishes an interrupted apply)."""
        return [f"--to-{self.kind}"] + ([str(self.value)] if self.value is not None else [])


@dataclasses.dataclass(frozen=True, slots=True)
class QueueReset:
    """One queue of the group: its committed offset and the offset the reset gives it."""
    group: str
    topic: str
    queue_id: int
    committed_offset: int
    new_offset: int
    min_queue_offset: int | None  # None: no consume queue on disk
    max_queue_offset: int | None
    note: str  # how the new offset was found

    @property
    def changed(self) -> bool:
        return self.new_offset != self.committed_offset

    def record(self) -> dict:
        row = dataclasses.asdict(self)
        row["changed"] = self.changed
        return row


@dataclasses.dataclass(slots=True)
class ResetPlan:
    store: pathlib.Path
    group: str
    topic: str
    target: ResetTarget
    queue: int | None  # the one queue asked for (None: every queue of the group's entry)
    rows: list[QueueReset]
    source: pathlib.Path  # the file the broker loads the offsets from (main or .bak)
    document: object  # that file's fastjson document, as loaded
    findings: list[Finding]
    rocksdb: pathlib.Path | None = None  # config/consumerOffsets as a RocksDB config store: not written here

    @property
    def changes(self) -> list[QueueReset]:
        return [r for r in self.rows if r.changed]

    def to_json(self) -> dict:
        return {"operation": OPERATION, "group": self.group, "topic": self.topic, "target": self.target.kind,
                "value": self.target.value, "queues": [r.record() for r in self.rows]}

    def new_document(self) -> object:
        """The loaded document with the new offsets, every other entry and field as it was."""
        doc = copy.deepcopy(self.document)
        new = {row.queue_id: row.new_offset for row in self.rows}
        for key, queues in doc["offsetTable"].items():
            if topic_group(key) != (self.topic, self.group):
                continue
            for raw_queue_id in queues:  # the key as written, the queue id as fastjson casts it
                queue_id = fastjson_number(raw_queue_id, INTEGER_BITS)
                if queue_id in new:
                    queues[raw_queue_id] = new[queue_id]
        return doc


@dataclasses.dataclass(frozen=True, slots=True)
class ResetRun:
    """What the command shows: the plan, and where the apply's backup went (None: not applied)."""
    plan: ResetPlan
    backup_dir: pathlib.Path | None
    written: pathlib.Path | None
    bak_written: bool = False  # the previous main file's bytes kept as the .bak (none: it was missing)

    def notices(self) -> list[str]:
        """The lines for people after the rows."""
        plan = self.plan
        lines = [f.one_line() for f in plan.findings]
        if plan.rocksdb is not None:
            lines.append(f"note: {plan.rocksdb} is a RocksDB config store: a broker with storeType defaultRocksDB "
                         f"loads its offsets from it, which --apply does not write (it refuses; use mqadmin "
                         f"resetOffsetByTime on the running broker)")
        changed = len(plan.changes)
        if not changed:
            lines.append(f"nothing to change: every queue of {plan.topic}@{plan.group} is at its new offset")
        elif self.written is None:
            lines.append(f"plan only: {changed} of {len(plan.rows)} queue offsets change; --apply writes "
                         f"{plan.store / CONFIG_DIR / CONSUMER_OFFSET_FILE} (the broker must be stopped)")
        else:
            kept = (f" (the previous file kept as {self.written.name}{BAK_SUFFIX})" if self.bak_written else
                    f" (made from its {BAK_SUFFIX}, which stays as it was)")
            lines.append(f"applied: {changed} queue offsets reset in {self.written}{kept}; backup in "
                         f"{self.backup_dir}; undo: rmqtool undo {shlex.quote(str(self.backup_dir))}")
        return lines


def plan_offset_reset(store: str | os.PathLike | StoreView, group: str, topic: str, target: ResetTarget, *,
                      queue: int | None = None, offset_by_time: Callable | None = None) -> ResetPlan:
    """Each queue's committed and new offset (see the module doc). NothingFound when the group
    has no committed offset for the topic (or that queue); CorruptData when the broker could
    load no offsets from the file."""
    view = as_view(store)
    queues = loaded_queues(view)
    progress: ConsumerOffsets = consumer_offsets(view, group=group, topic=topic, queues=queues)
    path = view.root / CONFIG_DIR / CONSUMER_OFFSET_FILE
    if progress.config is None or any(f.id == CONSUMER_OFFSET_TABLE_INVALID for f in progress.findings) \
            and not progress.rows:
        raise CorruptData("the broker loads no committed offsets from it (see rmqtool offsets): nothing to reset",
                          path)
    rows = [p for p in progress.rows if queue is None or p.queue_id == queue]
    if not rows:
        where = f" queue {queue}" if queue is not None else ""
        why = "" if progress.config.source is not None else " (no consumerOffset.json nor .bak in config/)"
        raise NothingFound(f"no committed offset for group {group!r} on topic {topic!r}{where}{why}: "
                           f"nothing to reset", path)
    if target.kind == TIME and offset_by_time is None:
        raise UsageError("--to-time needs the time lookup (query/by_time.offset_by_time)")
    resets = []
    for p in rows:
        low, high = (p.min_offset, p.max_offset) if p.min_offset is not None else (0, 0)
        new, note = _new_offset(view, queues, p.topic, p.queue_id, low, high, target, offset_by_time)
        if p.min_offset is None:
            note = f"no consume queue: the broker's queue is empty; {note}"
        resets.append(QueueReset(p.group, p.topic, p.queue_id, p.committed_offset, new, p.min_offset, p.max_offset,
                                 note))
    return ResetPlan(view.root, group, topic, target, queue, resets, pathlib.Path(progress.config.path),
                     progress.config.document, list(progress.findings), progress.rocksdb)


def _new_offset(view: StoreView, queues, topic: str, queue_id: int, low: int, high: int, target: ResetTarget,
                offset_by_time: Callable | None) -> tuple[int, str]:
    if target.kind == EARLIEST:
        return low, "min offset (earliest)"
    if target.kind == LATEST:
        return high, "max offset (latest)"
    if target.kind == OFFSET:
        if target.value < low:
            return low, f"--to-offset {target.value} is below min offset {low}: clamped to it"
        if target.value > high:
            return high, f"--to-offset {target.value} is past max offset {high}: clamped to it"
        return target.value, "as given"
    # the queue the broker searches after its next start (its files cut where its load cuts them
    # and what its dispatch puts back): the files alone would answer past its max, or short of it
    lookup = offset_by_time(view, topic, queue_id, target.value, queues=queues)
    note = f"getOffsetInQueueByTime({target.value})"
    if lookup.notes:
        note += "; " + "; ".join(str(n) for n in lookup.notes)
    return lookup.queue_offset, note


def apply_offset_reset(plan: ResetPlan, backup_dir: str | os.PathLike | None = None) -> ResetRun:
    """Write the new consumerOffset.json (previous main file as .bak) with a backup undo reads;
    nothing is written when nothing changes."""
    from rmqtool.recovery.apply import claimed_backup_dir, default_backup_dir, removed_unless_begun
    from rmqtool.recovery.store_lock import held_for
    from rmqtool.store.lock import is_locked
    from rmqtool.store.paths import StorePaths

    if not plan.changes:
        return ResetRun(plan, None, None)
    root = plan.store
    if plan.rocksdb is not None:  # the broker would load its offsets from there and never see the JSON's
        from rmqtool.store.family import UnsupportedFamily
        raise UnsupportedFamily("a RocksDB config store (RocksDBConsumerOffsetManager): offsets reset writes "
                                "consumerOffset.json only; nothing written", plan.rocksdb)
    holder = is_locked(StorePaths(root).lock)
    if holder is not None:  # before anything is staged: a running broker persists this file every 5 s
        who = f"process {holder}" if holder else "another process"
        raise StoreLocked(f"the store is locked by {who}: a running broker would overwrite the offsets; stop it "
                          f"first (or reset them with mqadmin resetOffsetByTime)", StorePaths(root).lock)
    main = root / CONFIG_DIR / CONSUMER_OFFSET_FILE
    bak = main.with_name(main.name + BAK_SUFFIX)
    backup = pathlib.Path(backup_dir) if backup_dir is not None else default_backup_dir(root)
    # the store, then the backup, held from the staging to the swap (a writer refused stages nothing)
    with held_for(root), claimed_backup_dir(backup, root) as made, removed_unless_begun(backup, root, made):
        bak_written = _stage_and_swap(plan, root, backup, main, bak)
    return ResetRun(plan, backup, main, bak_written)


def _stage_and_swap(plan: ResetPlan, root, backup: pathlib.Path, main: pathlib.Path, bak: pathlib.Path) -> bool:
    """:func:`apply_offset_reset`'s work: the new file (and the .bak) staged in the backup,
    then swapped in with it; whether the previous main file became the .bak."""
    from rmqtool.recovery.apply import CREATE, REPLACE, STAGING_DIR, apply_file_changes
    staging = backup / STAGING_DIR
    text = dumps_fastjson(plan.new_document(), pretty=True)  # string2File writes the string: no newline at the end
    previous = read_config_bytes(main) if main.is_file() else None
    try:
        staging.mkdir(parents=True, exist_ok=True)
        (staging / "new").write_bytes(text.encode("utf-8"))
        if previous is not None:
            (staging / "bak").write_bytes(previous)
    except OSError as exc:
        raise StoreAccessError(f"cannot stage the new files ({exc.strerror})", staging) from None
    changes = []
    if previous is not None:  # string2File: the previous content, whatever it holds, becomes the .bak
        changes.append((REPLACE if bak.exists() else CREATE, str(bak), str(staging / "bak")))
    changes.append((REPLACE if main.exists() else CREATE, str(main), str(staging / "new")))
    queue = ["--queue", str(plan.queue)] if plan.queue is not None else []
    command = shlex.join(["rmqtool", "offsets", "reset", os.path.abspath(root), "--group", plan.group,
                          "--topic", plan.topic, *plan.target.words(), *queue, "--apply"])
    apply_file_changes(root, changes, backup, plan.to_json(), command=command, operation=OPERATION)
    return previous is not None


def reset_offsets(store: str | os.PathLike, group: str, topic: str, target: ResetTarget, *, queue: int | None = None,
                  apply: bool = False, backup_dir: str | os.PathLike | None = None,
                  offset_by_time: Callable | None = None) -> ResetRun:
    """The command's flow: a run cut short rolled back first (``--apply``), then the plan, then
    (``apply``) the write."""
    from rmqtool.recovery.undo import roll_back_unfinished
    from rmqtool.store.view import open_store

    if backup_dir is not None and not apply:
        raise UsageError("--backup-dir goes with --apply")
    view = open_store(store, simulate=simulate_for_info)  # the queues as the next start loads them
    again = roll_back_unfinished(view.root, OPERATION) if apply else None
    plan = plan_offset_reset(view, group, topic, target, queue=queue, offset_by_time=offset_by_time)
    if not apply:
        return ResetRun(plan, None, None)
    return apply_offset_reset(plan, backup_dir or again)
