"""The QMQ message-log kernel (rmqtool/store/qmq/record_kernel.py) and the fast paths built on
it give what the careful paths give, on every QMQ fixture store (basic, v2-consumerlog and
each crash variant's input, read as trimmed: QMQ zero-extends them): the records and their
fields equal truth.json's; the walk proven from candidate positions gives the same pieces
whatever the candidates (the consumer logs' offsets, a part of them, wrong ones); the segment
validator started past the kernel's run ends where the Java-faithful walk from 0 ends; the
served sequences answered a block at a time equal getMessage asked one sequence at a time."""
from __future__ import annotations

import dataclasses
import pathlib

import numpy as np
import pytest

from conftest import FIXTURES, load_truth
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.recovery.qmq import consumer_logs, simulate_start
from rmqtool.recovery.qmq.logs import Segment, file_bytes
from rmqtool.recovery.qmq.start import _scan_records
from rmqtool.recovery.qmq.validators import message_segment_validator, validate_message_segment
from rmqtool.store.qmq import consumerlog, messagelog, record_kernel
from rmqtool.store.qmq.segments import ZeroExtended, list_log

QMQ = FIXTURES / "qmq"
STORES = [QMQ / "basic" / "store", QMQ / "v2-consumerlog" / "store",
          *sorted(p / "input" for p in (QMQ / "crash").iterdir() if (p / "input").is_dir())]
IDS = [str(s.relative_to(QMQ)) for s in STORES]


def pieces(segment, hints=None) -> list:
    """The scan's pieces with every run's arrays as lists (comparable)."""
    out = []
    with ZeroExtended(segment) as data:
        for piece in messagelog.scan_pieces(data, record_kernel.SubjectTable(), True, hints):
            if isinstance(piece, record_kernel.MessageRun):
                piece = {f.name: getattr(piece, f.name).tolist() if isinstance(getattr(piece, f.name), np.ndarray)
                         else getattr(piece, f.name) for f in dataclasses.fields(piece)}
            out.append(piece)
    return out


def pointed_offsets(store: pathlib.Path) -> np.ndarray:
    found = [np.zeros(0, np.int64)]
    for subject in consumerlog.subjects(store):
        directory, unit = consumerlog.open_consumer_log(store, subject)
        for u in consumerlog.unit_columns(directory, unit) if unit else ():
            found.append(u.wrote_offset[u.kind == consumerlog.MESSAGE])
    return record_kernel.sorted_unique(np.concatenate(found))


@pytest.mark.parametrize("store", STORES, ids=IDS)
def test_the_kernel_and_its_proof_from_candidates(store):
    segments = list_log(store / "messagelog", PER_SEGMENT_FILE_SIZE).segments
    hints = pointed_offsets(store)
    rng = np.random.default_rng(23)
    for seg in segments:
        plain = pieces(seg)
        mine = hints[(hints >= seg.base_offset) & (hints < seg.end_offset)] - seg.base_offset
        assert pieces(seg, mine) == plain
        if len(mine):
            assert pieces(seg, np.sort(rng.choice(mine, len(mine) // 2, replace=False))) == plain
            assert pieces(seg, record_kernel.sorted_unique(mine + rng.integers(0, 3, len(mine)))) == plain
        # the records the pieces give are parse_record's, one by one
        with ZeroExtended(seg) as data:
            for record in messagelog.scan_segment(seg):
                if isinstance(record, messagelog.MessageRecord):
                    assert messagelog.parse_record(data, record.position) == record


@pytest.mark.parametrize("scenario", ["basic", "v2-consumerlog"])
def test_the_columns_are_the_truth(scenario):
    rows = load_truth(QMQ / scenario / "truth.json")["readBack"]["messageLog"]["records"]
    records = _scan_records(QMQ / scenario / "store" / "messagelog")
    assert len(records) == len(rows) > 0
    names = records.subjects.names
    assert [names[s] for s in records.subject_id.tolist()] == [r["subject"] for r in rows]
    for column, field in (("offset", "offset"), ("size", "size"), ("header_size", "headerSize"),
                          ("sequence", "sequence")):
        assert getattr(records, column).tolist() == [r[field] for r in rows]
    assert [f"{m:08x}" for m in records.magic.tolist()] == [r["magicHex"] for r in rows]
    assert records.crc_ok.tolist() == [r["payloadCrcOk"] for r in rows]


@pytest.mark.parametrize("store", STORES, ids=IDS)
def test_the_validator_started_past_the_run_ends_where_the_walk_from_zero_does(store):
    prefixes = _scan_records(store / "messagelog").validated_prefixes()
    assert any(prefixes.values())  # the fast start is taken
    fast = message_segment_validator(prefixes)
    for seg in list_log(store / "messagelog", PER_SEGMENT_FILE_SIZE).segments:
        segment = Segment(seg.path, seg.base_offset, PER_SEGMENT_FILE_SIZE, file_bytes(seg.path), PER_SEGMENT_FILE_SIZE)
        try:
            expected = validate_message_segment(segment)
        except Exception as exc:  # noqa: BLE001 - the same exception, from the same place
            with pytest.raises(type(exc)):
                fast(segment)
            continue
        assert fast(segment) == expected


@pytest.mark.parametrize("store", STORES, ids=IDS)
def test_served_sequences_a_block_at_a_time_equal_one_at_a_time(store, monkeypatch):
    answered = []
    plain = consumer_logs.ConsumerLog.plain_answers
    monkeypatch.setattr(consumer_logs.ConsumerLog, "plain_answers",
                        lambda self, *a: answered.append(plain(self, *a)) or answered[-1])
    fast = simulate_start(store).to_json()
    if fast["started"] and fast["message_log"]["replay_from"] > 0:  # units of the files are served
        assert any(a is not None and len(a) > 1 for a in answered)  # blocks were answered at once
    monkeypatch.setattr(consumer_logs.ConsumerLog, "plain_answers", lambda self, *a: None)
    assert simulate_start(store).to_json() == fast


@pytest.mark.parametrize("length", [1, 27, record_kernel.ROW_BYTES - 1, 100])
def test_a_segment_cut_shorter_than_a_row_reads_alike_with_candidates(tmp_path, length):
    """A file cut to fewer bytes than the kernel's row of a record (QMQ maps it zero-extended):
    the walk from candidates gives the plain walk's pieces (once an IndexError)."""
    store = QMQ / "basic" / "store"
    (seg,) = list_log(store / "messagelog", PER_SEGMENT_FILE_SIZE).segments
    (tmp_path / "messagelog").mkdir()
    (tmp_path / "messagelog" / seg.path.name).write_bytes(seg.path.read_bytes()[:length])
    (cut,) = list_log(tmp_path / "messagelog", PER_SEGMENT_FILE_SIZE).segments
    hints = pointed_offsets(store)
    assert pieces(cut, hints[hints < PER_SEGMENT_FILE_SIZE]) == pieces(cut)
