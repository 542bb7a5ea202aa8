"""``rmqtool dump messagelog|consumerlog|actionlog|pulllog|checkpoint`` on a QMQ store: rows.

Each kind walks its files in log order and yields the rows of ``report/qmq/records.py``;
damage is a ``corrupt`` row where it lies and the walk goes on. ``only`` narrows a kind to
one file (a segment, a subject's log, a checkpoint) when the operator names one.
"""
from __future__ import annotations

import os
import pathlib
from typing import Iterator

from rmqtool.formats.qmq import actionlog as actionlog_format
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.formats.qmq.pulllog import FILL_MESSAGE_SEQUENCE, PULL_LOG_SIZE, PULL_LOG_UNIT_BYTES
from rmqtool.report.qmq.records import action_row, consumer_log_row, message_log_row
from rmqtool.store.qmq import actionlog, checkpoints, consumerlog, messagelog
from rmqtool.store.qmq.segments import ZeroExtended, list_log

DUMP_KINDS = ("messagelog", "consumerlog", "actionlog", "pulllog", "checkpoint")


def _wanted(path: pathlib.Path, only: pathlib.Path | None) -> bool:
    return only is None or path.resolve() == only.resolve() or only.resolve() in path.resolve().parents


def message_log_rows(root: pathlib.Path, body: str = "base64", only: pathlib.Path | None = None,
                     findings: list | None = None) -> Iterator[dict]:
    """Every item of the message log as a row; ``findings``: what each damaged one says is
    wrong, naming its file and position (as dump commitlog's)."""
    for seg in list_log(root / "messagelog", PER_SEGMENT_FILE_SIZE).segments:
        if _wanted(seg.path, only):
            for item in messagelog.scan_segment(seg):
                if findings is not None:
                    findings += messagelog.findings_of(item)
                yield message_log_row(item, body)


def consumer_log_rows(root: pathlib.Path, subject: str | None = None, only: pathlib.Path | None = None) -> Iterator[dict]:
    for name in consumerlog.subjects(root):
        if subject is not None and name != subject:
            continue
        directory, unit = consumerlog.open_consumer_log(root, name)
        if unit is None:
            continue
        for u in consumerlog.read_units(directory, unit, name):
            if _wanted(pathlib.Path(u.path), only):
                yield consumer_log_row(u)


def action_log_rows(root: pathlib.Path, only: pathlib.Path | None = None,
                    findings: list | None = None) -> Iterator[dict]:
    for seg in list_log(root / "actionlog", actionlog_format.PER_SEGMENT_FILE_SIZE).segments:
        if _wanted(seg.path, only):
            for item in actionlog.scan_segment(seg):
                if findings is not None:
                    findings += actionlog.findings_of(item)
                yield action_row(item)


def pull_log_rows(root: pathlib.Path, only: pathlib.Path | None = None) -> Iterator[dict]:
    """The legacy pull logs: ``pulllog/<consumerId>/<group>@<subject>/``, a message sequence per pull."""
    base = root / "pulllog"
    if not base.is_dir():
        return
    for consumer_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        for gs_dir in sorted(p for p in consumer_dir.iterdir() if p.is_dir()):
            group, _, subject = gs_dir.name.partition("@")
            for seg in list_log(gs_dir, PULL_LOG_SIZE).segments:
                if not _wanted(seg.path, only):
                    continue
                with ZeroExtended(seg) as data:  # zeros after the last pull are unwritten units
                    units = data.take(0, data.written + (-data.written % PULL_LOG_UNIT_BYTES))
                for pos in range(0, len(units), PULL_LOG_UNIT_BYTES):
                    value = int.from_bytes(units[pos:pos + PULL_LOG_UNIT_BYTES], "big", signed=True)
                    yield {"record": "pull", "family": "qmq", "consumer_id": consumer_dir.name, "group": group,
                           "subject": subject, "pull_sequence": (seg.base_offset + pos) // PULL_LOG_UNIT_BYTES,
                           "sequence": None if value == FILL_MESSAGE_SEQUENCE else value,
                           "file": str(seg.path), "file_position": pos}


def checkpoint_rows(root: pathlib.Path, only: pathlib.Path | None = None) -> Iterator[dict]:
    for kind, snaps in (("message", checkpoints.message_checkpoints(root)),
                        ("action", checkpoints.action_checkpoints(root))):
        loaded = snaps.loaded
        for s in snaps.all:
            if not _wanted(s.path, only):
                continue
            row = {"record": f"{kind}_checkpoint", "family": "qmq", "file": str(s.path), "version": s.version,
                   "loaded": s is loaded, "reason": s.error}
            if s.value is not None and kind == "message":
                row.update(message_log_offset=s.value.offset, max_sequences=s.value.max_sequences)
            elif s.value is not None:
                row.update(action_log_offset=s.value.offset, groups=[
                    {"subject": g.subject, "group": g.group, "broadcast": g.broadcast,
                     "max_pulled_sequence": g.max_pulled_message_sequence,
                     "consumers": [{"consumer_id": c.consumer_id, "pull": c.pull, "ack": c.ack}
                                   for c in g.consumers]} for g in s.value.groups])
            yield row


def dump_rows(root: str | os.PathLike, kind: str, *, body: str = "base64", only: str | os.PathLike | None = None,
              subject: str | None = None, notes: list | None = None, findings: list | None = None) -> Iterator[dict]:
    """The rows of a dump kind; ``notes``: lines for people (a subject the store has no consumer
    log for: no rows, as a RocketMQ dump's topic that matches nothing, and the subjects it has);
    ``findings``: each damaged record or action the rows show, as it is read."""
    from rmqtool.errors import UsageError
    root = pathlib.Path(root)
    only = pathlib.Path(only) if only is not None else None
    if subject is not None and kind != "consumerlog":
        raise UsageError(f"--subject narrows dump consumerlog only, not dump {kind}")
    home = root / kind  # each kind's files are in the directory of its name
    if subject is not None and notes is not None and subject not in (known := consumerlog.subjects(root)):
        shown = ", ".join(known[:5]) + (f" and {len(known) - 5} more" if len(known) > 5 else "")
        notes.append(f"no consumer log for subject {subject!r} in {home}" + (f" (subjects: {shown})" if known
                                                                             else ": it holds none"))
    if only is not None and not _wanted(only, home):  # another kind's file: it would give no row and no word
        from rmqtool.errors import NotAStore  # not a file of the kind asked for (exit 4, as RocketMQ's dumps)
        raise NotAStore(f"not in {home.name}/: dump {kind} reads {home.name}/'s files", only)
    if kind == "messagelog":
        return message_log_rows(root, body, only, findings)
    if kind == "consumerlog":
        return consumer_log_rows(root, subject, only)
    if kind == "actionlog":
        return action_log_rows(root, only, findings)
    if kind == "pulllog":
        return pull_log_rows(root, only)
    if kind == "checkpoint":
        return checkpoint_rows(root, only)
    raise ValueError(f"no dump kind {kind!r} for a QMQ store: {', '.join(DUMP_KINDS)}")


def _served_record(root: pathlib.Path, look, subject: str, sequence: int):
    """The record the started store's getMessage gives for a subject's sequence (the start
    simulated: recovery/qmq/start.served_answers); NothingFound saying what it answers instead."""
    from rmqtool.errors import NothingFound
    from rmqtool.recovery.qmq.start import served_answers

    start, answers = served_answers(root, subject, [sequence])
    if start.refusal is not None:
        what = "refuses to start" if start.refusal.kind == "refused" else "never finishes starting"
        raise NothingFound(f"QMQ {what} on this store: it serves nothing ({start.refusal.message})", root)
    status, unit, has_message = answers[sequence]
    if status != "SUCCESS" or not has_message:
        said = "SUCCESS with no message" if status == "SUCCESS" else status
        raise NothingFound(f"{subject} sequence {sequence}: the next start's getMessage answers {said}", root)
    record = look.record_at(unit.wrote_offset)
    if isinstance(record, str):
        raise NothingFound(f"{subject} sequence {sequence}: {record}", root)
    if (record.size, record.header_size) != (unit.wrote_bytes, unit.header_size):
        # getMessage serves the unit's bytes, [wrote_offset + header_size, wrote_offset + wrote_bytes):
        # not the payload of the record that starts there
        payload = unit.wrote_bytes - unit.header_size
        raise NothingFound(f"{subject} sequence {sequence}: the next start's getMessage answers SUCCESS with "
                           f"{payload} bytes at message log offset {unit.wrote_offset + unit.header_size}, not a "
                           f"record's payload (the unit: offset {unit.wrote_offset}, {unit.wrote_bytes} bytes, "
                           f"header {unit.header_size}; the record there: {record.subject} sequence "
                           f"{record.sequence}, {record.size} bytes, header {record.header_size})", root)
    return record


def query_rows(root: str | os.PathLike, *, subject: str | None = None, sequence: int | None = None,
               message_id: str | None = None, time_ms: int | None = None, body: str = "base64",
               served_only: bool = False, notes: list | None = None) -> list[dict]:
    """``rmqtool query`` on a QMQ store: the rows of the message a subject's sequence names
    (DefaultStorage.getMessage's walk), of every record with a message id, or of each
    subject's first record appended at or after a time (``subject`` None: every subject).
    NothingFound when none is there; a unit that points nowhere is said in the error.
    ``notes``: a line for each message found whose payload fails its CRC, as RocketMQ's query
    names a damaged one (printed, since its bytes are all there is)."""
    from rmqtool.errors import NothingFound, UsageError
    from rmqtool.query.qmq.lookup import QmqLookup
    root = pathlib.Path(root)
    given = [name for name, value in (("--msg-id", message_id), ("--sequence", sequence), ("--time", time_ms))
             if value is not None]
    if len(given) > 1:  # one question a query: the others would be left unanswered without a word
        raise UsageError(f"{' and '.join(given)} ask different questions: give one of them")
    if subject is not None and message_id is not None:
        raise UsageError("--msg-id finds a message in every subject: not with --subject")
    if subject is not None and not consumerlog.subject_directory(root, subject).resolve().is_relative_to(
            (root / "consumerlog").resolve()):
        raise UsageError(f"{subject!r} names a directory outside consumerlog/: not a subject")
    look = QmqLookup(root)
    if served_only:
        if subject is None or sequence is None:
            raise UsageError("--served-only on a QMQ store: with --subject and --sequence")
        records = [_served_record(root, look, subject, sequence)]
    elif message_id is not None:
        records = list(look.by_message_id(message_id))
    elif sequence is not None:
        if subject is None:
            raise UsageError("--sequence needs --subject")
        found = look.by_sequence(subject, sequence)
        if found.record is None or found.reason is not None:
            raise NothingFound(f"{subject} sequence {sequence}: {found.reason}", root)
        records = [found.record]
    elif time_ms is not None:
        subjects = [subject] if subject is not None else consumerlog.subjects(root)
        hits = [look.by_time(s, time_ms) for s in subjects]
        records = [h.record for h in hits if h is not None and h.record is not None]
    else:
        raise UsageError("on a QMQ store give --subject with --sequence or --time, or --msg-id")
    if not records:
        raise NothingFound("no message matches", root)
    if notes is not None:
        from rmqtool.inspect.lookup import damaged_message_note
        notes += [damaged_message_note(r.path, r.position, "payload CRC", f"message log offset {r.offset}")
                  for r in records if r.payload_crc_ok is False]
    return [message_log_row(r, body) for r in records]
