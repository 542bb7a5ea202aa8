"""What QMQ's ``DefaultStorage`` does at its next start on a store, simulated from the files.

``simulate_start(store)`` follows ``new DefaultStorage(...)`` then ``start()`` (qunarcorp/qmq
5abc92f4) and writes nothing:

1. ``CheckpointManager``: the highest message and action checkpoint snapshots that parse
   (``store/qmq/checkpoints.py``).
2. ``ConsumerLogManager``: each subject's consumer log, cut to the message checkpoint's max
   sequence (``consumer_logs.py``).
3. ``MessageLog``: its ``LogManager`` loads and recovers (``logs.py``, ``validators.py``);
   then consumer logs' min sequences from the first segment's ``.offset`` file;
   ``PullLogManager``: legacy pull logs cut to each consumer's pull in the action checkpoint.
4. ``ActionLog``: the same for the action log; ``SortedPullLogTable`` validates the tablets
   and gives the action replay state (``tablets.py``).
5. ``start()``: the message log replayed from the message checkpoint's offset into the
   consumer logs, the action log from the replay state (or the action checkpoint's offset
   when it is 0) into consumer progress (``replay.py``, ``progress.py``); then the consumer
   logs' next sequences are what it serves.

Where the Java throws out of the constructor the start is refused (``refusal``); where a
replay cannot reach its log's end ``start()`` never returns (``hang``).
"""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib

import numpy as np

from rmqtool.findings import OPERATOR_ACTIONS, STORE_NOT_LOADABLE
from rmqtool.formats.qmq.actionlog import PER_SEGMENT_FILE_SIZE as ACTION_SEGMENT_SIZE
from rmqtool.formats.qmq.checkpoint import ActionCheckpoint, MessageCheckpoint
from rmqtool.formats.qmq.consumerlog import CONSUMER_LOG_UNIT_BYTES, SEGMENT_SIZE_V1
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE as MESSAGE_SEGMENT_SIZE
from rmqtool.formats.qmq.pulllog import PULL_LOG_SIZE, PULL_LOG_UNIT_BYTES
from rmqtool.recovery.qmq.consumer_logs import FILL_IN_FILE, ConsumerLog, FillTooFar, open_consumer_log
from rmqtool.recovery.qmq.javabuf import JavaException, int64
from rmqtool.recovery.qmq.logs import Log, load_log
from rmqtool.recovery.qmq.progress import apply_action, progress_of, progress_rows
from rmqtool.recovery.qmq.replay import Replay, replay_action_log, replay_message_log
from rmqtool.recovery.qmq.tablets import TabletLoad, load_tablets
from rmqtool.recovery.qmq.validators import (max_sequence_validator, message_segment_validator,
                                             validate_action_segment)
from rmqtool.store.qmq import messagelog as message_scan
from rmqtool.store.qmq.checkpoints import action_checkpoints, message_checkpoints
from rmqtool.store.qmq.consumerlog import subjects as consumer_log_subjects
from rmqtool.store.qmq.consumerlog import has_breaking_whitespace, subject_directory, unit_bytes_of
from rmqtool.store.qmq.record_kernel import LogColumns, LogColumnsBuilder, SubjectTable, members
from rmqtool.store.qmq.segments import list_log

Ranges = tuple[tuple[int, int], ...]


@dataclasses.dataclass(frozen=True)
class Refusal:
    kind: str  # "refused" (an exception out of new DefaultStorage), "hangs" (start() never returns)
    exception: str  # the Java exception class ("" for a replay that stops without one)
    message: str
    file: str | None  # the file it was reading
    where: str  # "new DefaultStorage(...)", "start(): message log replay", "start(): action log replay"
    offset: int | None = None  # where in ``file``, when one record is the cause

    @property
    def text(self) -> str:
        """What stops the start, as one line (the exception, its message, where)."""
        return f"{self.exception or 'the replay stops'}: {self.message} (in {self.where})"


@dataclasses.dataclass(frozen=True)
class LostRecord:
    offset: int
    subject: str
    sequence: int


@dataclasses.dataclass(frozen=True)
class MessageLogAfterStart:
    written_end: int  # where the records in the files end (before the start)
    max_offset: int  # the message log's end after recovery
    cut_at: int | None  # max_offset when it is before the written end
    deleted_segments: tuple[str, ...]
    records_lost: tuple[LostRecord, ...]  # records in the files past the end after recovery
    replay_from: int
    records_replayed: int


@dataclasses.dataclass(frozen=True)
class ActionLogAfterStart:
    max_offset: int
    deleted_segments: tuple[str, ...]
    replay_state: int  # SortedPullLogTable.getActionReplayState
    tablets_loaded: tuple[str, ...]
    tablets_destroyed: tuple[str, ...]  # deleted by the load (id at or past the replay state)
    replay_from: int
    actions_replayed: int


@dataclasses.dataclass(frozen=True)
class SubjectAfterStart:
    subject: str
    consumer_log: tuple[int, int]  # (min, max) sequences served after the start; max = next to write
    served_with_message: Ranges
    served_success_without_message: Ranges  # SUCCESS and no message
    units_pointing_past_log_end: Ranges  # units whose payload is not in the message log after recovery
    fill_units: Ranges  # fillPreBlank's units the replay wrote
    rebuilt_units: Ranges  # units the replay wrote from records
    replay_skipped: Ranges  # records replayed whose sequence is below the log's next sequence: no unit written
    other_statuses: tuple[tuple[str, Ranges], ...]
    sequences_in_files: int  # 1 + the highest sequence of this subject's records in the message log files
    not_served: Ranges  # sequences the files' records hold, served neither with nor without a message
    # served with no message through a fill unit of the files where no record of the files is: a
    # message lost before (recover --apply writes them to keep the next sequence), none to serve
    fills_without_record: Ranges = ()
    # of not_served, those whose records the start keeps (the ones past its cut it drops: recoveryCutsMessageLog's)
    not_served_kept: Ranges = ()


@dataclasses.dataclass(frozen=True)
class PullLogAfterStart:
    """A legacy pull log (``pulllog/<consumerId>/<group>@<subject>/``) after its load."""
    consumer_id: str
    group_and_subject: str
    sequences: tuple[int, int]  # (min, max) pull-log sequences kept; max is the next to write
    deleted_segments: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class CheckpointsAfterStart:
    message_checkpoint_file: str | None  # the snapshot loaded; None: none parsed, offset -1
    action_checkpoint_file: str | None
    skipped_files: tuple[tuple[str, str], ...]  # (file, why SnapshotStore skipped it)
    message_checkpoint_offset: int  # in memory after the start's replay
    message_max_sequences: tuple[tuple[str, int], ...]
    action_checkpoint_offset: int


@dataclasses.dataclass(frozen=True)
class StartOutcome:
    store: str
    started: bool
    refusal: Refusal | None
    checkpoints: CheckpointsAfterStart
    unit_bytes: int
    # one past the message log's last record as the files hold it: the data's, whether or not
    # the start gets to read the log (message_log is None when it refuses first)
    written_end: int = 0
    message_log: MessageLogAfterStart | None = None
    action_log: ActionLogAfterStart | None = None
    subjects: tuple[SubjectAfterStart, ...] = ()
    pull_logs: tuple[PullLogAfterStart, ...] = ()
    # messagelog/.<base>.offset files the replay writes (createOffsetFileFor, at a segment's first record)
    offset_files_written: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()
    consumer_progress: tuple[dict, ...] = ()  # per subject/group, as progress_rows gives them

    def to_json(self) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(self)))

    # what every family's plan, info and report say of a start (docs/vocabulary.md: loadable,
    # reason, advice, recovered_end), from this one's outcome

    @property
    def loadable(self) -> bool:
        """Whether QMQ loads the store and finishes starting on it."""
        return self.refusal is None

    @property
    def reason(self) -> str | None:
        """Why QMQ does not load the store or never finishes starting, naming the file (None: it does)."""
        r = self.refusal
        if r is None:
            return None
        where = "" if r.file is None else r.file if r.offset is None else f"{r.file} at offset {r.offset}"
        return f"{where}: {r.text}" if where else r.text

    @property
    def advice(self) -> str | None:
        return None if self.refusal is None else OPERATOR_ACTIONS[STORE_NOT_LOADABLE]

    @property
    def recovered_end(self) -> int | None:
        """Where the start's recovery ends the message log (None: the start is refused or never finishes)."""
        return self.message_log.max_offset if self.message_log is not None and self.refusal is None else None


def store_unit_bytes(store: pathlib.Path) -> int:
    """``consumerlog.v2.enable`` is a broker setting; the files show it (22 B units by default)."""
    return shown_unit_bytes(store) or CONSUMER_LOG_UNIT_BYTES


def shown_unit_bytes(store: pathlib.Path) -> int | None:
    """The consumer log unit size the store's consumer log files show, None when none does."""
    for subject in consumer_log_subjects(store):
        directory = list_log(subject_directory(store, subject), SEGMENT_SIZE_V1)
        unit = unit_bytes_of(directory)
        if unit:
            return unit
    return None


def _load_consumer_logs(store: pathlib.Path, max_sequences: dict, unit_bytes: int) -> dict[str, ConsumerLog]:
    logs = {}
    root = store / "consumerlog"
    for entry in sorted(root.iterdir()) if root.is_dir() else ():
        if not entry.is_dir() or has_breaking_whitespace(entry.name):
            continue
        logs[entry.name] = open_consumer_log(entry, entry.name, unit_bytes, max_sequences.get(entry.name))
    return logs


def _load_pull_logs(store: pathlib.Path, progress: dict) -> list[PullLogAfterStart]:
    """``PullLogManager``: each ``<consumerId>/<group>@<subject>`` directory holding entries,
    cut by ``MaxSequenceLogSegmentValidator`` to the consumer's pull in the action checkpoint
    (to nothing without one). ``GroupAndSubject.parse`` takes the second ``@`` field: a name
    without one throws."""
    out = []
    root = store / "pulllog"
    for consumer in sorted(root.iterdir()) if root.is_dir() else ():
        if not consumer.is_dir():
            continue
        for directory in sorted(consumer.iterdir()):
            if not directory.is_dir() or not any(directory.iterdir()):
                continue
            fields = directory.name.split("@")
            while fields and fields[-1] == "":
                fields.pop()  # String.split drops trailing empty strings
            if len(fields) < 2:
                raise JavaException("java.lang.ArrayIndexOutOfBoundsException",
                                    f"Index 1 out of bounds for length {len(fields)}", str(directory))
            group = progress.get((fields[1], fields[0]))
            pull = group.consumers.get(consumer.name) if group else None
            log = load_log(directory, PULL_LOG_SIZE, max_sequence_validator(-1 if pull is None else pull[0],
                                                                             PULL_LOG_UNIT_BYTES))
            out.append(PullLogAfterStart(consumer.name, directory.name,
                                         (log.min_offset() // PULL_LOG_UNIT_BYTES,
                                          log.max_offset() // PULL_LOG_UNIT_BYTES),
                                         tuple(str(s.path) for s in log.deleted)))
    return out


def _adjust_min_sequences(message_log: Log, logs: dict[str, ConsumerLog]) -> None:
    """``adjustConsumerLogMinOffset``: the first segment's ``.offset`` file, {subject: max
    sequence before the segment}, read as CheckpointStore.loadCheckpoint reads it."""
    first = message_log.first()
    if first is None:
        return
    path = message_log.directory / f".{first.base_offset:020d}.offset"
    for subject, value in (_load_offset_checkpoint(path) or {}).items():
        log = logs.get(subject)
        if log is None:  # "cannot find consumer log ... while adjust min offset"
            continue
        if value is None:  # Map<String, Long> holds the JSON null: unboxed for + 1, it throws
            raise JavaException("java.lang.NullPointerException", f"the sequence of {subject} is null", str(path))
        adjusted = int64(value + 1)  # a Java long's + 1
        if log.min_offset() < adjusted:
            log.min_sequence = adjusted


def _load_offset_checkpoint(path: pathlib.Path) -> dict | None:
    """CheckpointStore.loadCheckpoint: None when neither the file nor its ``.backup`` exists
    (File.exists(): a directory counts) or the file is empty; the backup when the file
    cannot be read (gone, a directory, no permission); a content that is no {subject:
    sequence} map, or neither file readable, throws out of the storage's constructor."""
    backup = path.with_name(path.name + ".backup")
    if not path.exists() and not backup.exists():
        return None
    try:
        data = path.read_bytes()
    except OSError:  # Files.toByteArray's IOException: "Try load backup checkpoint file instead"
        try:
            data = backup.read_bytes()
        except OSError:
            raise JavaException("java.lang.RuntimeException", f"Load checkpoint failed. filename={path.name}",
                                str(path)) from None
        return _offsets_of(data, backup)
    return _offsets_of(data, path) if data else None


def _offsets_of(data: bytes, path: pathlib.Path) -> dict:
    """ConsumerLogMinOffsetSerde.fromBytes (an empty backup fails it too)."""
    try:
        offsets = json.loads(data)
        if offsets is None:  # Jackson reads the JSON null as no map: nothing to adjust
            return {}
        # a Long each (JSON null too); true, or a number past a long, fails Jackson's read
        if not isinstance(offsets, dict) or not all(v is None or (type(v) is int and int64(v) == v)
                                                    for v in offsets.values()):
            raise ValueError
    except ValueError:
        raise JavaException("java.lang.RuntimeException", "deserialize offset checkpoint failed.", str(path)) from None
    return offsets


def _scan_records(directory: pathlib.Path) -> LogColumns:
    """The message log's records as the files hold them, before any recovery."""
    listing = list_log(directory, MESSAGE_SEGMENT_SIZE)
    builder = LogColumnsBuilder(SubjectTable())
    for _ in message_scan.log_pieces(listing.segments, builder):
        pass
    return builder.build()


def _present_sequences(in_files: LogColumns) -> dict[str, Ranges]:
    """The runs of sequences each subject's records in the files hold (a subject's head gone
    with deleted segments, or a damaged subject's lone record, holds no sequence before it)."""
    if not len(in_files):
        return {}
    order = np.lexsort((in_files.sequence, in_files.subject_id))
    sid, seq = in_files.subject_id[order], in_files.sequence[order]
    new_run = np.ones(len(order), bool)
    new_run[1:] = (sid[1:] != sid[:-1]) | (seq[1:] > seq[:-1] + 1)
    starts = np.flatnonzero(new_run)
    ends = np.append(starts[1:], len(order)) - 1
    out: dict[str, list] = {}
    for a, b in zip(starts.tolist(), ends.tolist()):
        out.setdefault(in_files.subjects.names[int(sid[a])], []).append((int(seq[a]), int(seq[b])))
    return {name: tuple(runs) for name, runs in out.items()}


def _checkpoints(store, mcp, acp, msnaps, asnaps) -> CheckpointsAfterStart:
    loaded_m, loaded_a = msnaps.loaded, asnaps.loaded
    skipped = tuple((str(s.path), s.error) for s in (*msnaps.skipped, *asnaps.skipped))
    return CheckpointsAfterStart(str(loaded_m.path) if loaded_m else None, str(loaded_a.path) if loaded_a else None,
                                 skipped, mcp["offset"], tuple(sorted(mcp["max_sequences"].items())), acp.offset)


@dataclasses.dataclass(frozen=True)
class _Constructed:
    """What ``new DefaultStorage(...)`` holds once its constructor returns."""
    logs: dict[str, ConsumerLog]
    message_log: Log
    pull_logs: list[PullLogAfterStart]
    action_log: Log
    tablets: TabletLoad


def _construct(store: pathlib.Path, max_sequences: dict, acp: ActionCheckpoint, unit: int,
               message_validator) -> _Constructed:
    """The constructor's loads in its order (steps 2 to 4); JavaException where it throws."""
    logs = _load_consumer_logs(store, max_sequences, unit)
    message_log = load_log(store / "messagelog", MESSAGE_SEGMENT_SIZE, message_validator)
    _adjust_min_sequences(message_log, logs)
    pull_logs = _load_pull_logs(store, progress_of(acp))
    action_log = load_log(store / "actionlog", ACTION_SEGMENT_SIZE, validate_action_segment)
    return _Constructed(logs, message_log, pull_logs, action_log, load_tablets(store))


def _refused(exc: JavaException) -> Refusal:
    return Refusal("refused", exc.java_class, exc.message, exc.file, "new DefaultStorage(...)", exc.offset)


@dataclasses.dataclass(frozen=True)
class StartProbe:
    """The next start as far as a probe reads it (:func:`probe_start`)."""
    refusal: Refusal | None  # what the constructor throws, or where the action replay hangs; None: neither
    consumer_progress: tuple[dict, ...]  # progress_rows after the action replay (empty when refused)
    action_replay: tuple[int, int] | None  # (from, to) of the action log replay (None when refused)
    message_checkpoint: int | None = None  # the loaded snapshots' offsets (None: none loads)
    action_checkpoint: int | None = None
    max_sequences: dict = dataclasses.field(default_factory=dict)  # the loaded message checkpoint's, by subject
    # after the load: each consumer log's next sequence (MaxSequenceLogSegmentValidator's cut made), and
    # where the message log begins (its first segment's base); empty and None when the load throws
    loaded_next: dict = dataclasses.field(default_factory=dict)
    message_log_first: int | None = None


def _whole(segment) -> tuple[bool, int]:
    return True, segment.size


def probe_start(store: str | os.PathLike, unit_bytes: int | None = None) -> StartProbe:
    """The constructor's loads but for the message log's record walk (its segments taken whole:
    what damage its tail holds is ``check``'s tail scan), then the action replay: whether the
    start refuses the store from its names, directories, checkpoints, consumer, pull and action
    logs and tablets, and the consumer progress it starts with. No message log record is read."""
    store = pathlib.Path(store)
    msnaps, asnaps = message_checkpoints(store), action_checkpoints(store)
    loaded = msnaps.loaded.value if msnaps.loaded else MessageCheckpoint(-1, {})
    acp = asnaps.loaded.value if asnaps.loaded else ActionCheckpoint(-1, ())
    offsets = tuple(s.loaded.value.offset if s.loaded else None for s in (msnaps, asnaps))
    try:
        built = _construct(store, dict(loaded.max_sequences), acp, unit_bytes or store_unit_bytes(store), _whole)
    except JavaException as exc:
        return StartProbe(_refused(exc), (), None, *offsets, dict(loaded.max_sequences))
    progress, actions = _action_replay(acp, built.action_log, built.tablets.replay_state)
    hang = _hang(actions, built.action_log, "start(): action log replay") if actions.hangs_at is not None else None
    return StartProbe(hang, tuple(progress_rows(progress)), (actions.start, built.action_log.max_offset()), *offsets,
                      dict(loaded.max_sequences), {s: log.next_sequence() for s, log in built.logs.items()},
                      built.message_log.min_offset())


def simulate_start(store: str | os.PathLike, unit_bytes: int | None = None,
                   records: LogColumns | None = None, ask=None) -> StartOutcome:
    """``records``: the message log's records as the files hold them, when the caller has read
    them already (verify's checks): the log is then not read again for them. ``ask``: called
    with the started store's consumer logs (by subject) and message log, before they are let
    go: what the caller wants to ask the started store (:func:`served_answers`)."""
    store = pathlib.Path(store)
    unit = unit_bytes or store_unit_bytes(store)
    msnaps, asnaps = message_checkpoints(store), action_checkpoints(store)
    loaded = msnaps.loaded.value if msnaps.loaded else MessageCheckpoint(-1, {})
    acp = asnaps.loaded.value if asnaps.loaded else ActionCheckpoint(-1, ())
    mcp = {"offset": loaded.offset, "max_sequences": dict(loaded.max_sequences)}

    def outcome(**kw) -> StartOutcome:
        return StartOutcome(str(store), checkpoints=_checkpoints(store, mcp, acp, msnaps, asnaps), unit_bytes=unit,
                            written_end=in_files.written_end or 0, **kw)

    in_files = records if records is not None else _scan_records(store / "messagelog")
    try:
        built = _construct(store, mcp["max_sequences"], acp, unit,
                           message_segment_validator(in_files.validated_prefixes()))
    except JavaException as exc:
        return outcome(started=False, refusal=_refused(exc))
    logs, message_log, pull_logs, action_log, tablet_load = \
        built.logs, built.message_log, built.pull_logs, built.action_log, built.tablets
    state = tablet_load.replay_state

    # start(): the message log replay into the consumer logs (BuildConsumerLogEventListener)
    messages = replay_message_log(message_log, mcp["offset"])
    skipped, offset_files, refusal = _replay_into_consumer_logs(store, messages, message_log, logs, mcp, unit)
    if refusal is None and messages.hangs_at is not None:
        refusal = _hang(messages, message_log, "start(): message log replay")

    progress, actions = _action_replay(acp, action_log, state)
    if refusal is None and actions.hangs_at is not None:
        refusal = _hang(actions, action_log, "start(): action log replay")

    written_end = in_files.written_end
    end = message_log.max_offset()
    deleted = {str(s.path) for s in message_log.deleted}
    lost = _lost_records(in_files, end, deleted)
    present = _present_sequences(in_files)
    dropped: dict[str, set[int]] = {}  # the lost records' sequences by subject
    for r in lost:
        dropped.setdefault(r.subject, set()).add(r.sequence)
    if ask is not None:
        ask(logs, message_log)
    return outcome(
        started=refusal is None, refusal=refusal,
        message_log=MessageLogAfterStart(written_end, end, end if end < written_end else None, tuple(sorted(deleted)),
                                         lost, messages.start, len(messages.events)),
        action_log=ActionLogAfterStart(action_log.max_offset(), tuple(str(s.path) for s in action_log.deleted), state,
                                       tablet_load.valid, tablet_load.destroyed, actions.start, len(actions.events)),
        subjects=tuple(_kept(_served(subject, logs.get(subject), message_log, skipped.get(subject, ()),
                                     present.get(subject, ())), dropped.get(subject, ()))
                       for subject in sorted(set(logs) | set(present))),
        pull_logs=tuple(pull_logs),
        offset_files_written=tuple(sorted(offset_files.items())),
        consumer_progress=tuple(progress_rows(progress)),
    )


def _action_replay(acp: ActionCheckpoint, action_log: Log, replay_state: int) -> tuple[dict, Replay]:
    """start()'s action log replay into consumer progress (MaxSequencesUpdater): the action
    checkpoint's progress, then the actions from where the start replays them (its tablets'
    replay state, else the checkpoint's offset)."""
    progress = progress_of(acp)
    actions = replay_action_log(action_log, replay_state if replay_state != 0 else acp.offset)
    for event in actions.events:
        apply_action(progress, event.action)
    return progress, actions


def consumer_progress(store: str | os.PathLike) -> list[dict] | None:
    """The consumer progress the next start has (progress_rows), read from the action checkpoint
    and the action log alone; None where their load throws (recover says why)."""
    store = pathlib.Path(store)
    asnaps = action_checkpoints(store)
    acp = asnaps.loaded.value if asnaps.loaded else ActionCheckpoint(-1, ())
    try:
        action_log = load_log(store / "actionlog", ACTION_SEGMENT_SIZE, validate_action_segment)
        replay_state = load_tablets(store).replay_state
    except JavaException:
        return None
    return progress_rows(_action_replay(acp, action_log, replay_state)[0])


def served_answers(store: str | os.PathLike, subject: str, sequences) -> tuple[StartOutcome, dict]:
    """getMessage of a subject's ``sequences`` on the started store: (the start, sequence ->
    (status, the unit read or None, whether a message came with it)). A subject without a
    consumer log after the start answers SUBJECT_NOT_FOUND; a start that is refused, nothing."""
    answers = {}

    def ask(logs: dict, message_log: Log) -> None:
        log = logs.get(subject)
        for sequence in sequences:
            if log is None:
                answers[sequence] = ("SUBJECT_NOT_FOUND", None, False)
            else:
                status, unit, has_message, _last = log.get_message(sequence, message_log)
                answers[sequence] = (status, unit, has_message)

    return simulate_start(store, ask=ask), answers


def _replay_into_consumer_logs(store: pathlib.Path, messages: Replay, message_log: Log, logs: dict, mcp: dict,
                               unit: int) -> tuple[dict, dict, Refusal | None]:
    """The replay's records written into the consumer logs (``logs``, a subject's opened when
    its first record comes) and the message checkpoint (``mcp``), as the listener does; the
    sequences replayed onto units already there (by subject), the .offset files written at
    each segment's first record, and the refusal of a consumer log that cannot be opened
    (the replay thread retries it forever)."""
    skipped, offset_files = {}, {}
    offsets = {subject: log.next_sequence() - 1 for subject, log in logs.items()}  # the listener's, at construction
    for record in messages.events:
        if record.wrote_offset == record.base_offset:
            offset_files[str(message_log.directory / f".{record.base_offset:020d}.offset")] = \
                tuple(sorted(offsets.items()))
        offsets[record.subject] = max(offsets.get(record.subject, record.sequence), record.sequence)
        log = logs.get(record.subject)
        if log is None:
            try:
                log = logs[record.subject] = open_consumer_log(subject_directory(store, record.subject),
                                                               record.subject, unit, None)
            except JavaException as exc:  # thrown in the replay thread: it retries, forever
                return skipped, offset_files, Refusal("hangs", exc.java_class, exc.message, exc.file,
                                                      "start(): message log replay")
        try:
            wrote = log.write_message_log_index(record.sequence, record.wrote_offset, record.wrote_bytes,
                                                record.header_size)
        except FillTooFar as exc:
            seg = message_log.locate(record.wrote_offset)
            return skipped, offset_files, Refusal("hangs", "", exc.text(record.wrote_offset),
                                                  str(seg.path) if seg else None, "start(): message log replay",
                                                  record.wrote_offset - seg.base_offset if seg else None)
        if wrote == "skipped":
            skipped.setdefault(record.subject, _Runs()).add(record.sequence, record.sequence)
        seqs = mcp["max_sequences"]
        seqs[record.subject] = max(seqs.get(record.subject, record.sequence), record.sequence)
        mcp["offset"] = record.wrote_offset + record.wrote_bytes
    return skipped, offset_files, None


def _lost_records(in_files: LogColumns, end: int, deleted: set[str]) -> tuple[LostRecord, ...]:
    """The records the files hold that the started log does not: at or past its ``end``, or in
    a segment it deleted."""
    deleted_ids = np.array([i for i, p in enumerate(in_files.paths) if p in deleted], np.int32)
    gone = (in_files.offset >= end) | members(in_files.segment, deleted_ids)
    names = in_files.subjects.names
    return tuple(LostRecord(o, names[s], q) for o, s, q in zip(in_files.offset[gone].tolist(),
                                                                in_files.subject_id[gone].tolist(),
                                                                in_files.sequence[gone].tolist()))


def _kept(served: SubjectAfterStart, dropped) -> SubjectAfterStart:
    """``served`` with its ``not_served_kept``: not_served without the sequences of the records
    the start drops (``dropped``, the subject's)."""
    if not served.not_served:
        return served
    runs = _Runs()
    for q in sorted(dropped):
        runs.add(q, q)
    return dataclasses.replace(served, not_served_kept=ranges_minus(served.not_served, tuple(runs)))


def _hang(replay: Replay, log: Log, where: str) -> Refusal:
    seg = log.locate(replay.hangs_at)
    return Refusal("hangs", replay.hang_exception or "", f"{replay.hang_reason} (replay at offset {replay.hangs_at})",
                   str(seg.path) if seg else None, where)


class _Runs(list):
    """Inclusive [first, last] runs, added in increasing order."""

    def add(self, first: int, last: int) -> None:
        if self and self[-1][1] == first - 1:
            self[-1] = (self[-1][0], last)
        else:
            self.append((first, last))


def ranges_minus(ranges: Ranges, *others: Ranges) -> Ranges:
    """The inclusive runs of ``ranges`` that no run of ``others`` covers."""
    taken = sorted(r for o in others for r in o)
    out = _Runs()
    for first, last in ranges:
        at = first
        for a, b in taken:
            if b < at or a > last:
                continue
            if a > at:
                out.add(at, a - 1)
            at = max(at, b + 1)
        if at <= last:
            out.add(at, last)
    return tuple(out)


def _served(subject: str, log: ConsumerLog | None, message_log: Log, skipped, present: Ranges) -> SubjectAfterStart:
    """Every sequence 0..max as getMessage answers it, a run of identical units at a time; a
    subject with records but no consumer log after the start answers SUBJECT_NOT_FOUND.
    ``present``: the runs of sequences the subject's records in the files hold (what can be
    not served)."""
    known = present[-1][1] + 1 if present else 0  # 1 + the highest sequence of its records in the files
    if log is None:
        nothing = ((0, known - 1),) if known else ()
        return SubjectAfterStart(subject, (0, 0), (), (), (), (), (), tuple(skipped),
                                 (("SUBJECT_NOT_FOUND", nothing),), known, tuple(present))
    try:
        return _served_log(subject, log, message_log, known, skipped, present)
    finally:
        log.log.release()  # a subject at a time: its units' pages are not held while the next is read


def _served_log(subject: str, log: ConsumerLog, message_log: Log, known: int, skipped,
                present: Ranges) -> SubjectAfterStart:
    low, high = log.bound()
    with_message, without, past_end, filled, statuses = _Runs(), _Runs(), _Runs(), _Runs(), {}
    sequence = 0
    while sequence <= high:
        plain = log.plain_answers(sequence, high, message_log)
        if plain is not None:  # SUCCESS each, a message or none (a unit pointing past the log)
            changes = np.flatnonzero(plain[1:] != plain[:-1]) + 1
            for first, last in zip([0, *changes.tolist()], [*changes.tolist(), len(plain)]):
                if plain[first]:
                    with_message.add(sequence + first, sequence + last - 1)
                else:
                    without.add(sequence + first, sequence + last - 1)
                    past_end.add(sequence + first, sequence + last - 1)
            sequence += len(plain)
            continue
        status, unit, has_message, last = log.get_message(sequence, message_log)
        last = max(sequence, last)
        if status == "SUCCESS":
            (with_message if has_message else without).add(sequence, last)
            if unit.kind == "message" and not has_message:
                past_end.add(sequence, last)  # QMQ's fill units point past the log too (offset 0, 2^31-1 bytes)
                if unit.origin == FILL_IN_FILE:
                    filled.add(sequence, last)
        else:
            statuses.setdefault(status, _Runs()).add(sequence, last)
        sequence = last + 1
    rebuilt = _Runs()
    for s in sorted(log.written):
        rebuilt.add(s, s)
    return SubjectAfterStart(
        subject, (low, high), tuple(with_message), tuple(without), tuple(past_end),
        tuple(tuple(r) for r in log.fills), tuple(rebuilt), tuple(skipped),
        tuple((k, tuple(v)) for k, v in sorted(statuses.items())),
        known, ranges_minus(present, with_message, without), ranges_minus(tuple(filled), present))
