"""``rmqtool info`` on a QMQ store: its logs, subjects, groups, checkpoints and tablets.

Read with headers only (no payload CRC): the message log's written end, each subject's
consumer-log range beside the sequence the loaded message checkpoint records, each group's
progress as the loaded action checkpoint records it, and whether the message checkpoint
stands at the written end (as ``DefaultStorage.destroy`` leaves it) or behind it (the next
start replays the rest).
"""
from __future__ import annotations

import os
import pathlib

from rmqtool.formats.qmq import actionlog as actionlog_format
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.recovery.qmq.javabuf import JavaException
from rmqtool.recovery.qmq.tablets import load_tablets
from rmqtool.store.qmq import actionlog, checkpoints, consumerlog, messagelog, tablets
from rmqtool.store.qmq.segments import LogDirectory, list_log


def _segments(log: LogDirectory) -> list[dict]:
    return [{"file": seg.path.name, "base_offset": seg.base_offset, "size": seg.size, "file_size": seg.file_size}
            for seg in log.segments]


def _message_log(root: pathlib.Path) -> tuple[dict, int]:
    log = list_log(root / "messagelog", PER_SEGMENT_FILE_SIZE)
    records = damaged = 0
    end = log.segments[0].base_offset if log.segments else 0
    for seg in log.segments:
        for item in messagelog.scan_segment(seg, check_crc=False):
            if isinstance(item, messagelog.MessageRecord):
                records += 1
                end = item.offset + item.size
            elif isinstance(item, messagelog.Damage):
                damaged += 1
    doc = {"segments": _segments(log), "written_end": end, "records": records, "damaged_regions": damaged,
           "skipped_files": [p.name for p in log.skipped], "unreadable_names": [p.name for p in log.unparsable]}
    return doc, end


def _action_log(root: pathlib.Path) -> dict:
    log = list_log(root / "actionlog", actionlog_format.PER_SEGMENT_FILE_SIZE)
    actions = damaged = 0
    end = log.segments[0].base_offset if log.segments else 0
    for seg in log.segments:
        for item in actionlog.scan_segment(seg):
            if isinstance(item, actionlog.ActionRecord):
                actions += 1
                end = item.end_offset
            else:
                damaged += 1
    return {"segments": _segments(log), "written_end": end, "actions": actions, "damaged_regions": damaged,
            "unreadable_names": [p.name for p in log.unparsable]}


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
    root = pathlib.Path(root)
    message_log, written_end = _message_log(root)
    message_cps = checkpoints.message_checkpoints(root)
    action_cps = checkpoints.action_checkpoints(root)
    recorded = message_cps.loaded.value.max_sequences if message_cps.loaded else {}
    subjects = []
    for subject in consumerlog.subjects(root):
        directory, unit = consumerlog.open_consumer_log(root, subject)
        units = list(consumerlog.read_units(directory, unit, subject)) if unit else []
        subjects.append({"subject": subject, "unit_bytes": unit,
                         "first_sequence": units[0].sequence if units else None,
                         "next_sequence": units[-1].sequence + 1 if units else None,
                         "fill_units": sum(u.kind == "fill" for u in units),
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
    else:
        shutdown = (f"the message checkpoint ({checkpoint_offset}) is behind the written end ({written_end}): "
                    f"the last stop was not clean, the next start replays {written_end - checkpoint_offset} bytes")
    return {
        "store": {"path": str(root), "family": "qmq", "live": live_pid is not None, "locked_by_pid": live_pid},
        "message_log": message_log,
        "action_log": _action_log(root),
        "subjects": subjects,
        "groups": groups,
        "checkpoints": {"message": _snapshot_doc(message_cps), "action": _snapshot_doc(action_cps)},
        "pull_log_tablets": [{"file": t.path.name, "tablet_id": t.tablet_id, "valid": t.valid, "reason": t.error,
                              "begin_offset": t.header.begin_offset if t.header else None,
                              "end_offset": t.header.end_offset if t.header else None} for t in loaded_tablets],
        "action_replay_from": _action_replay_from(root, action_cps),
        "last_shutdown": shutdown,
    }
