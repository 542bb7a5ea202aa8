"""A QMQ record whose subject has a damaged byte (the CRC covers only the payload) reads as a
record of another subject. Its own subject's consumer log unit still points exactly at it (its
offset, size, header size and sequence), and QMQ serves it through that unit (getMessage reads
no subject): recover's plan keeps that unit, where it once wrote a fill unit and lost the
message for the subject's consumers."""
from __future__ import annotations

import json

import pytest

from conftest import FIXTURES
from helpers import busiest_subject, cli_runner, expand_store, qmq_records
from rmqtool.cli.app import app
from rmqtool.formats.qmq.messagelog import RecordPrefix
from rmqtool.recovery.qmq.plan import plan_recovery
from rmqtool.store.qmq import consumerlog

SUBJECT_AT = RecordPrefix.sizeof() + 8 + 2  # the subject follows the prefix, the sequence and its length



def _unit_at(store, subject: str, sequence: int):
    directory, unit = consumerlog.open_consumer_log(store, subject)
    for block in consumerlog.unit_columns(directory, unit):
        hit = (block.sequence == sequence).nonzero()[0]
        if len(hit):
            k = int(hit[0])
            return int(block.kind[k]), int(block.wrote_offset[k]), int(block.wrote_bytes[k])
    return None


@pytest.mark.parametrize("damage", [b"Z", b"\xff"], ids=["utf8", "not-utf8"])
def test_the_unit_that_proves_its_record_is_kept(tmp_path, damage):
    """Also for a byte that leaves the subject no UTF-8 (QMQ reads it with a replacement
    character: its validator checks the payload's CRC only): the plan once took it for
    damage and cut the message log there, the records after it and the record's unit lost.
    The subject so spelled holds that record's sequence only: it was once said to hold every
    sequence from 0 to it, none served (messagesNotServed)."""
    store = expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "store")
    records = qmq_records(store)
    subject, ours = busiest_subject(records)
    record = ours[len(ours) // 2]
    before = _unit_at(store, subject, record.sequence)
    assert before == (consumerlog.MESSAGE, record.offset, record.size)
    with open(record.path, "r+b") as f:  # one subject byte changed: no NUL, same length
        f.seek(record.position + SUBJECT_AT)
        first = f.read(1)
        f.seek(record.position + SUBJECT_AT)
        f.write(damage if first != damage else b"Y")
    plan = plan_recovery(store)
    assert not [z for z in plan.zero if "messagelog" in z.path] and not plan.records_dropped
    # the record now of a subject so spelled holds one sequence of it: not the ones before it too
    garbled = [g for g in plan.broker.subjects if g.subject not in {r.subject for r in records}]
    assert [(g.not_served, g.sequences_in_files) for g in garbled] == \
        [(((record.sequence, record.sequence),), record.sequence + 1)]
    rows = cli_runner().invoke(app, ["dump", "messagelog", str(store / "messagelog"), "-f", "jsonl"]).stdout
    row = next(r for r in map(json.loads, rows.splitlines()) if r["message_log_offset"] == record.offset)
    assert row.get("subject_utf8_ok", True) is (damage == b"Z")
    for rewrite in plan.consumer_logs:
        if rewrite.subject == subject:
            kept = [u for u in rewrite.units if u.sequence == record.sequence]
            assert not kept or (kept[0].wrote_offset, kept[0].wrote_bytes) == (record.offset, record.size)
    applied = cli_runner().invoke(app, ["recover", str(store), "--apply", "-f", "json"])
    assert applied.exit_code in (0, 3) and "Traceback" not in applied.stderr, applied.stderr
    assert json.loads(applied.stdout)["records_unserved"] == []
    assert _unit_at(store, subject, record.sequence) == before
