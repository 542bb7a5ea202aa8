"""Lookups in QMQ stores (rmqtool/query/qmq/) against what DefaultStorage served (truth.json)."""
from __future__ import annotations

import json

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
    (["--subject", "{subject}", "--time", "1", "--served-only"], "with --subject and --sequence"),
])
def test_a_query_that_asks_two_questions_or_leaves_consumerlog_is_refused(args, said):
    record = load_truth(QMQ / "basic" / "truth.json")["readBack"]["messageLog"]["records"][0]
    args = [a.format(subject=record["subject"], id=record["payload"]["messageId"]) for a in args]
    r = cli_runner().invoke(app, ["query", str(QMQ / "basic" / "store"), *args])
    assert r.exit_code == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1


STARTED = [v for v in sorted(p for p in (QMQ / "crash").iterdir() if p.is_dir())
           if load_truth(v / "truth.json").get("started")]


@pytest.mark.parametrize("variant", STARTED, ids=lambda v: v.name)
def test_served_only_answers_as_the_started_engines_get_message(variant, tmp_path):
    """Every sequence the truth asked the restarted engine (getMessage, subject by subject):
    the same status, a message exactly where it gave one, at the payload it gave."""
    from helpers import expand_store
    from rmqtool.recovery.qmq.start import served_answers

    root = expand_store(variant / "input", tmp_path / "store")
    look = QmqLookup(root)
    for subject, log in load_truth(variant / "truth.json")["recovered"]["consumerLogs"].items():
        asked = log["getMessage"]
        start, answers = served_answers(root, subject, [g["sequence"] for g in asked])
        assert start.refusal is None
        for g in asked:
            status, unit, has_message = answers[g["sequence"]]
            assert (status, has_message) == (g["status"], g["messageNum"] > 0), (subject, g)
            if has_message:
                record = look.record_at(unit.wrote_offset)
                assert [[record.payload_offset, record.payload_size]] == g["payloadOffsetAndSize"], (subject, g)


def test_served_only_from_the_command_line(tmp_path):
    """One served sequence and one the engine serves empty (variant d, truth), through query."""
    from helpers import expand_store

    variant = QMQ / "crash" / "d-flipped-payload-byte-mid-log"
    root = expand_store(variant / "input", tmp_path / "store")
    for subject, log in load_truth(variant / "truth.json")["recovered"]["consumerLogs"].items():
        served = [g for g in log["getMessage"] if g["messageNum"] > 0]
        empty = [g for g in log["getMessage"] if g["status"] == "SUCCESS" and g["messageNum"] == 0]
        if served and empty:
            break
    ask = ["query", str(root), "--subject", subject, "--served-only", "-f", "jsonl", "--sequence"]
    found = cli_runner().invoke(app, ask + [str(served[0]["sequence"])])
    (row,) = map(json.loads, found.stdout.splitlines())
    assert found.exit_code == 0 and row["sequence"] == served[0]["sequence"]
    gone = cli_runner().invoke(app, ask + [str(empty[0]["sequence"])])
    assert gone.exit_code == 1 and "SUCCESS with no message" in gone.stderr
