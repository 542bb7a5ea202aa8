"""Lookups in QMQ stores (rmqtool/query/qmq/) against what DefaultStorage served (truth.json)."""
from __future__ import annotations

import pytest

from conftest import FIXTURES, load_truth
from helpers import cli_runner
from rmqtool.cli.app import app
from rmqtool.query.qmq.lookup import QmqLookup

QMQ = FIXTURES / "qmq"


def test_every_sequence_gives_the_payload_the_engine_served():
    truth = load_truth(QMQ / "basic" / "truth.json")["readBack"]["consumerLogs"]
    look = QmqLookup(QMQ / "basic" / "store")
    for subject, log in truth.items():
        for served in log["getMessage"]:
            found = look.by_sequence(subject, served["sequence"])
            if served["messageNum"] == 0:
                assert found.record is None
                continue
            (offset, size), = served["payloadOffsetAndSize"]
            assert found.reason is None and (found.record.payload_offset, found.record.payload_size) == (offset, size)


def test_a_message_id_finds_its_records():
    records = load_truth(QMQ / "basic" / "truth.json")["readBack"]["messageLog"]["records"]
    look = QmqLookup(QMQ / "basic" / "store")
    wanted = records[7]["payload"]["messageId"]
    assert [r.offset for r in look.by_message_id(wanted)] == \
        [r["offset"] for r in records if r["payload"]["messageId"] == wanted]


def test_by_time_gives_the_first_record_appended_at_or_after():
    records = load_truth(QMQ / "basic" / "truth.json")["readBack"]["messageLog"]["records"]
    look = QmqLookup(QMQ / "basic" / "store")
    subject = records[0]["subject"]
    mine = [r for r in records if r["subject"] == subject]
    for r in mine[::5]:
        assert look.by_time(subject, r["timestamp"]).record.offset == \
            next(x["offset"] for x in mine if x["timestamp"] >= r["timestamp"])
    assert look.by_time(subject, mine[-1]["timestamp"] + 1) is None


@pytest.mark.parametrize("args, said", [
    (["--subject", "../messagelog", "--sequence", "0"], "outside consumerlog/"),
    (["--subject", "{subject}", "--sequence", "0", "--msg-id", "x"], "--msg-id and --sequence"),
    (["--subject", "{subject}", "--sequence", "0", "--time", "1"], "--sequence and --time"),
    (["--subject", "{subject}", "--msg-id", "{id}"], "not with --subject"),
    (["--subject", "{subject}", "--sequence", "0", "--served-only"], "--served-only is not modelled for QMQ"),
])
def test_a_query_that_asks_two_questions_or_leaves_consumerlog_is_refused(args, said):
    record = load_truth(QMQ / "basic" / "truth.json")["readBack"]["messageLog"]["records"][0]
    args = [a.format(subject=record["subject"], id=record["payload"]["messageId"]) for a in args]
    r = cli_runner().invoke(app, ["query", str(QMQ / "basic" / "store"), *args])
    assert r.exit_code == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1
