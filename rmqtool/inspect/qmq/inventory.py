"""``rmqtool info`` on a QMQ store: its logs, subjects, groups, checkpoints and tablets, and
what its next start does to them.

Read in one pass over the message log (its records as columns, payload CRCs taken: QMQ's
start validates them), then QMQ's start simulated on those columns (``recovery/qmq/start.py``,
as ``recover`` plans it): the message log's written end and where the start's recovery ends
it (``recovered_end``, and why: ``recovery_cut_reason``), each subject's consumer-log range
beside the sequence the loaded message checkpoint records, each group's progress as the loaded
action checkpoint records it, and whether the message checkpoint stands at the written end (as
``DefaultStorage.destroy`` leaves it) or behind it (the next start replays the rest). What the
start does is said as findings, as verify says it: the damaged record it stops at (its file and
position), a start refused, records dropped, sequences served empty or not served. A store a
running broker holds is not simulated (its next start comes after the broker stops).
"""
from __future__ import annotations

import os
import pathlib

from rmqtool.findings import Finding
from rmqtool.formats.qmq import actionlog as actionlog_format
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.recovery.qmq.javabuf import JavaException
from rmqtool.recovery.qmq.next_start import as_the_start_takes, next_start_findings
from rmqtool.recovery.qmq.plan import message_log_cut
from rmqtool.recovery.qmq.tablets import load_tablets
from rmqtool.recovery.qmq.start import StartOutcome, consumer_progress, simulate_start
from rmqtool.store.qmq import actionlog, checkpoints, consumerlog, messagelog, record_kernel, tablets
from rmqtool.store.qmq.segments import LogDirectory, list_log


def _segments(log: LogDirectory) -> list[dict]:
    return [{"file": seg.path.name, "base_offset": seg.base_offset, "size": seg.size, "file_size": seg.file_size}
            for seg in log.segments]


class _MessageLog:
    """The message log read once: its records as columns (the kernel's runs: no object a
    record), its damaged regions, and what each damaged item says (findings_of)."""

    def __init__(self, root: pathlib.Path):
        self.log = list_log(root / "messagelog", PER_SEGMENT_FILE_SIZE)
        builder = record_kernel.LogColumnsBuilder(record_kernel.SubjectTable())
        self.damage: list = []  # messagelog.Damage, in log order
        self.findings: list[Finding] = []
        for data, piece in messagelog.log_pieces(self.log.segments, builder):
            self.findings += messagelog.piece_findings(data, piece, builder.subjects)
            if isinstance(piece, messagelog.Damage):
                self.damage.append(piece)
        self.records = builder.build()

    def doc(self) -> dict:
        log = self.log
        return {"segments": _segments(log), "written_end": self.records.written_end, "records": len(self.records),
                "damaged_regions": len(self.damage), "skipped_files": [p.name for p in log.skipped],
                "unreadable_names": [p.name for p in log.unparsable]}

    def at_the_stop(self, start: StartOutcome) -> list[Finding]:
        """The damage findings where the start stops: the record its load throws at (it does not
        start), else the one where its recovery cuts the log (as RocketMQ's info names the damage
        that ends its walk)."""
        refusal, log = start.refusal, start.message_log
        if refusal is not None and refusal.kind == "refused":
            return [as_the_start_takes(f, refusal) for f in self.findings if (f.path, f.offset) ==
                    (refusal.file, refusal.offset)]
        cut = log.cut_at if log is not None else None
        return [f for f in self.findings if cut is not None and (f.details or {}).get("message_log_offset") == cut]

    def cut_reason(self, start: StartOutcome) -> str | None:
        """Why the start's recovery ends the log before its written end (recover's plan's reason)."""
        if start.recovered_end is None or start.message_log.cut_at is None:
            return None
        stop = message_log_cut(start, self.log, self.records, self.damage)
        return stop.reason if stop is not None else None


def _action_log(root: pathlib.Path) -> tuple[dict, list, list[Finding]]:
    """The action log's section, its actions (the next start's replay skips some), and the
    finding of the damaged action its start stops at (the first: the log is cut there)."""
    log = list_log(root / "actionlog", actionlog_format.PER_SEGMENT_FILE_SIZE)
    actions, damaged, stop = [], 0, []
    end = log.segments[0].base_offset if log.segments else 0
    for seg in log.segments:
        for item in actionlog.scan_segment(seg):
            if isinstance(item, actionlog.ActionRecord):
                actions.append(item)
                end = item.end_offset
            else:
                damaged += 1
                stop = stop or actionlog.findings_of(item)
    return {"segments": _segments(log), "written_end": end, "actions": len(actions), "damaged_regions": damaged,
            "unreadable_names": [p.name for p in log.unparsable]}, actions, stop


def _snapshot_doc(snaps) -> dict:
    loaded = snaps.loaded
    return {"loaded": loaded.path.name if loaded else None, "offset": loaded.value.offset if loaded else None,
            "files": len(snaps.all), "skipped": [{"file": s.path.name, "reason": s.error} for s in snaps.skipped]}


def _action_replay_from(root: pathlib.Path, action_cps) -> int | None:
    """Where the next start's action replay begins: the tablets' replay state, else the
    loaded action checkpoint's offset (None when the tablets' load refuses the start)."""
    try:
        state = load_tablets(root).replay_state
    except JavaException:
        return None
    return state or (action_cps.loaded.value.offset if action_cps.loaded else 0)


def store_info(root: str | os.PathLike, live_pid: int | None = None) -> dict:
    """The document ``rmqtool info`` prints (its findings, as rows, in ``findings``)."""
    return qmq_info(root, live_pid)[0]


def qmq_info(root: str | os.PathLike, live_pid: int | None = None) -> tuple[dict, list[Finding]]:
    """What ``rmqtool info`` shows of a QMQ store: the document, and the findings in it."""
    root = pathlib.Path(root)
    mlog = _MessageLog(root)
    message_log = mlog.doc()
    written_end = message_log["written_end"]
    action_log, actions, action_stop = _action_log(root)
    findings: list[Finding] = []
    message_log["recovered_end"] = message_log["recovery_cut_reason"] = None
    if live_pid is None:  # a running broker's store starts again only after it stops: not simulated
        start = simulate_start(root, records=mlog.records)
        message_log["recovered_end"] = start.recovered_end
        message_log["recovery_cut_reason"] = mlog.cut_reason(start)
        findings = mlog.at_the_stop(start) + action_stop + tablets.tablet_findings(root) + \
            list(next_start_findings(start, actions))
    message_cps = checkpoints.message_checkpoints(root)
    action_cps = checkpoints.action_checkpoints(root)
    recorded = message_cps.loaded.value.max_sequences if message_cps.loaded else {}
    subjects = []
    for subject in consumerlog.subjects(root):
        directory, unit = consumerlog.open_consumer_log(root, subject)
        first = following = None
        fills = 0
        for chunk in (consumerlog.unit_columns(directory, unit) if unit else ()):  # a chunk of units at a time
            if first is None:
                first = chunk.first_sequence
            following = chunk.first_sequence + len(chunk)
            fills += int((chunk.kind == consumerlog.FILL).sum())
        subjects.append({"subject": subject, "unit_bytes": unit, "first_sequence": first,
                         "next_sequence": following, "fill_units": fills,
                         "checkpoint_max_sequence": recorded.get(subject)})
    groups = []
    if action_cps.loaded:
        for g in action_cps.loaded.value.groups:
            groups.append({"subject": g.subject, "group": g.group, "broadcast": g.broadcast,
                           "max_pulled_sequence": g.max_pulled_message_sequence,
                           "consumers": [{"consumer_id": c.consumer_id, "pull": c.pull, "ack": c.ack}
                                         for c in g.consumers]})
    loaded_tablets = tablets.tablets(root)
    checkpoint_offset = message_cps.loaded.value.offset if message_cps.loaded else None
    if checkpoint_offset is None:
        shutdown = "no message checkpoint: the next start replays the whole message log"
    elif checkpoint_offset == written_end:
        shutdown = "the message checkpoint is at the written end, as a clean stop leaves it"
    elif checkpoint_offset > written_end:  # a segment cut short or gone: nothing to replay, bytes missing
        shutdown = (f"the message checkpoint ({checkpoint_offset}) is past the written end ({written_end}): the "
                    f"message log lost bytes the checkpoint says were written (a file cut short or deleted); "
                    f"rmqtool recover shows where the next start ends it")
    else:
        shutdown = (f"the message checkpoint ({checkpoint_offset}) is behind the written end ({written_end}): "
                    f"the last stop was not clean, the next start replays {written_end - checkpoint_offset} bytes")
    return {
        "store": {"path": str(root), "family": "qmq", "live": live_pid is not None, "locked_by_pid": live_pid},
        "message_log": message_log,
        "action_log": action_log,
        "subjects": subjects,
        "groups": groups,  # as the action checkpoint holds them
        # the progress the next start has: the checkpoint's, then the action log's actions after it
        "consumer_progress": consumer_progress(root),
        "checkpoints": {"message": _snapshot_doc(message_cps), "action": _snapshot_doc(action_cps)},
        "pull_log_tablets": [{"file": t.path.name, "tablet_id": t.tablet_id, "valid": t.valid, "reason": t.error,
                              "begin_offset": t.header.begin_offset if t.header else None,
                              "end_offset": t.header.end_offset if t.header else None} for t in loaded_tablets],
        "action_replay_from": _action_replay_from(root, action_cps),
        "last_shutdown": shutdown,
        "findings": [f.to_json() for f in findings],  # as a RocketMQ store's info: the table shows them
    }, findings
