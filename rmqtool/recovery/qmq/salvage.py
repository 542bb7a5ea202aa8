"""Salvage on a QMQ store: every record that proves itself, wherever it lies (past where
QMQ's recovery cuts the message log, inside damaged segments), and what is lost for good.

A record is kept when its header reads, its lengths fit, its subject is UTF-8 and its payload
matches its CRC (a V1 record has none: kept as it reads), also one that starts inside the
bytes a record failing its CRC claims (its size may be the damage: ``records_within``).
Reported: the regions no record could be read from, the records that fail their CRC, the
records whose sequence lies apart from their subject's others (the CRC does not cover it:
recover's rule, ``plan.hanging_run``), and per subject the sequences no kept record has,
between 0 (or the first sequence its consumer log still holds) and the highest of those
that hang together.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

import numpy as np

from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.recovery.qmq.plan import hanging_run, sequence_slack
from rmqtool.recovery.qmq.start import simulate_start
from rmqtool.store.qmq import consumerlog, messagelog
from rmqtool.store.qmq.segments import list_log


@dataclasses.dataclass
class QmqSalvage:
    store: str
    kept: list = dataclasses.field(default_factory=list)  # MessageRecords
    cut_at: int | None = None  # where QMQ's next start ends the message log (None: it keeps it whole)
    damaged: list = dataclasses.field(default_factory=list)
    rejected: list = dataclasses.field(default_factory=list)
    missing: dict = dataclasses.field(default_factory=dict)  # subject -> [[first, last], ...]
    sequence_apart: list = dataclasses.field(default_factory=list)  # MessageRecords, kept or rejected

    @property
    def lost_anything(self) -> bool:
        return bool(self.damaged or self.rejected or self.missing)

    def to_json(self) -> dict:
        return {
            "family": "qmq", "store": self.store, "messages_kept": len(self.kept),
            "bytes_kept": sum(r.size for r in self.kept), "recovered_end": self.cut_at,
            "kept_past_recovered_end": sum(self.cut_at is not None and r.offset >= self.cut_at for r in self.kept),
            "damaged_regions": [{"message_log_offset": d.offset, "file": d.path, "file_position": d.position,
                                 "bytes": d.size, "reason": d.reason} for d in self.damaged],
            "messages_rejected": [{"subject": r.subject, "sequence": r.sequence, "message_log_offset": r.offset,
                                   "file": r.path, "file_position": r.position,
                                   "reason": "the payload does not match its CRC"} for r in self.rejected],
            "missing_sequences": self.missing,
            "sequences_apart": [{"subject": r.subject, "sequence": r.sequence, "message_log_offset": r.offset,
                                 "file": r.path, "file_position": r.position, "reason": SEQUENCE_APART}
                                for r in self.sequence_apart],
            "lost_anything": self.lost_anything,
        }


def salvage_qmq(store: str | os.PathLike) -> QmqSalvage:
    root = pathlib.Path(store)
    start = simulate_start(root)
    result = QmqSalvage(str(root), cut_at=start.message_log.cut_at if start.message_log else None)
    for seg in list_log(root / "messagelog", PER_SEGMENT_FILE_SIZE).segments:
        for item in messagelog.scan_segment(seg):
            if isinstance(item, messagelog.Damage):
                result.damaged.append(item)
            elif isinstance(item, messagelog.MessageRecord):
                (result.rejected if item.payload_crc_ok is False else result.kept).append(item)
    unreadable = sum(d.size for d in result.damaged) + sum(r.size for r in result.rejected)
    by_subject = _by_subject(result.kept + result.rejected)
    for subject in sorted(set(by_subject) | set(consumerlog.subjects(root))):
        records = by_subject.get(subject, [])
        top = -1
        if records:
            sequences = np.unique(np.fromiter((r.sequence for r in records), np.int64, len(records)))
            lo, hi = hanging_run(sequences, sequence_slack(subject, unreadable, len(sequences)))
            together = sequences[lo:hi]
            result.sequence_apart += [r for r in records if not together[0] <= r.sequence <= together[-1]]
            top = int(together[-1])
        first, named = _consumer_log_sequences(root, subject)
        # the consumer log names messages past the last the log holds (their bytes gone: a segment
        # cut short or emptied): lost too, up to the last it names
        top = max([top, *named[-1:]])
        gaps = missing_runs({r.sequence for r in records if r.payload_crc_ok is not False}, first, top)
        if gaps:
            result.missing[subject] = gaps
    result.sequence_apart.sort(key=lambda r: r.offset)
    return result


# why a record is listed in ``sequences_apart``
SEQUENCE_APART = ("its sequence lies further from its subject's others than the unreadable bytes of the log "
                  "explain: its sequence field is damaged (the CRC covers only the payload)")


def _consumer_log_sequences(root: pathlib.Path, subject: str) -> tuple[int, list[int]]:
    """(the subject's first sequence in its consumer log, 0 without one; the sequences of its
    units that name a message, not a fill)."""
    directory, unit = consumerlog.open_consumer_log(root, subject)
    if not unit:
        return 0, []
    units = list(consumerlog.read_units(directory, unit, subject))
    return (units[0].sequence if units else 0), [u.sequence for u in units if u.kind == "message"]


def _by_subject(records: list) -> dict[str, list]:
    out: dict[str, list] = {}
    for r in records:
        out.setdefault(r.subject, []).append(r)
    return out


def missing_runs(have, first: int, top: int) -> list[list[int]]:
    """The runs [from, to] of the sequences from ``first`` to ``top`` not in ``have``, in order.
    Walked over the sequences held, not over the range: a damaged sequence field can make
    ``top`` billions (a loop over the range once never ended)."""
    runs: list[list[int]] = []
    expect = first
    for q in sorted(q for q in have if first <= q <= top):
        if q > expect:
            runs.append([expect, q - 1])
        expect = q + 1
    if expect <= top:
        runs.append([expect, top])
    return runs

