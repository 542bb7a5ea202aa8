"""``rmqtool info`` on a QMQ store: its logs, subjects, groups, checkpoints and tablets.

Read with headers only (no payload CRC, but for a record whose payload would run past the
written bytes: whether it ends there is the written end): the message log's written end,
each subject's consumer-log range beside the sequence the loaded message checkpoint records, each group's
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
from rmqtool.recovery.qmq.start import consumer_progress
from rmqtool.store.qmq import actionlog, checkpoints, consumerlog, messagelog, record_kernel, tablets
from rmqtool.store.qmq.segments import LogDirectory, ZeroExtended, list_log


def _segments(log: LogDirectory) -> list[dict]:
    return [{"file": seg.path.name, "base_offset": seg.base_offset, "size": seg.size, "file_size": seg.file_size}
            for seg in log.segments]


def _message_log(root: pathlib.Path) -> tuple[dict, int]:
    log = list_log(root / "messagelog", PER_SEGMENT_FILE_SIZE)
    records = damaged = 0
    end = log.segments[0].base_offset if log.segments else 0
    subjects = record_kernel.SubjectTable()
    for seg in log.segments:  # the kernel's runs counted as columns: no object a record
        with ZeroExtended(seg) as data:
            for piece in messagelog.scan_pieces(data, subjects, check_crc=False):
                if isinstance(piece, record_kernel.MessageRun):
                    records += len(piece)
                elif isinstance(piece, messagelog.MessageRecord):
                    records += 1
                    if piece.payload_crc_ok is False:  # its size may be the damage (a header-only read
                        # takes the CRC of a record past the written bytes): the records its claim covers
                        # count where a CRC proves them, as every reader's scan gives them
                        records += sum(1 for _ in messagelog.records_within(data, piece.position + 1,
                                                                            piece.position + piece.size))
                elif isinstance(piece, messagelog.Damage):
                    damaged += 1
                end = max(end, messagelog.item_end(data, piece) or end)
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
        "action_log": _action_log(root),
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
    }
