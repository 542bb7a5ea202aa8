"""rmqtool offsets on QMQ stores: each group's progress as QMQ's own start has it (its
read-back after the start), the consumer logs' ranges, the lag; lookups, refusals, a start
that stops."""
from __future__ import annotations

import json
import os

import pytest

from conftest import FIXTURES, load_truth
from helpers import cli_runner, expand_store
from rmqtool.cli.app import app

QMQ = FIXTURES / "qmq"
CRASH = QMQ / "crash"


def _run(*args):
    return cli_runner().invoke(app, [str(a) for a in args])


def _rows(*args) -> tuple[list[dict], object]:
    out = _run("offsets", *args, "-f", "jsonl")
    return [json.loads(line) for line in out.stdout.splitlines()], out


@pytest.fixture(scope="module", params=("basic", "v2-consumerlog"))
def clean(request, tmp_path_factory):
    store = expand_store(QMQ / request.param / "store", tmp_path_factory.mktemp(request.param) / "store")
    return store, load_truth(QMQ / request.param / "truth.json")["readBack"]


def _expected_lag(progress: dict, log: dict, stamp: dict) -> tuple:
    units = {u["sequence"]: u for u in log["units"] if u["type"] == "MESSAGE_LOG_INDEX"}
    newest = stamp[units[max(units)]["wroteOffset"]]
    if progress["broadcast"]:
        return None, None, None, newest
    lag = max(log["maxSequence"] - 1 - progress["pull"], 0)  # maxSequence: the next sequence
    following = stamp[units[progress["pull"] + 1]["wroteOffset"]] if lag else None
    return lag, (newest - following if lag else 0), following, newest


def test_each_groups_progress_is_what_qmqs_start_has(clean):
    store, rb = clean
    rows, out = _rows(store)
    assert out.exit_code == 0, out.stderr
    stamp = {r["offset"]: r["timestamp"] for r in rb["messageLog"]["records"]}
    want = rb["consumerProgressAfterStart"]
    assert [(r["subject"], r["group"]) for r in rows] == [(p["subject"], p["group"]) for p in want]
    for row, p in zip(rows, want):
        log = rb["consumerLogs"][p["subject"]]
        assert (row["broadcast"], row["pull"]) == (p["broadcast"], p["pull"])
        assert {c: [v["pull"], v["ack"]] for c, v in row["consumers"].items()} == p["consumers"]
        assert all(v["unacked"] == max(v["pull"] - v["ack"], 0) for v in row["consumers"].values())
        assert (row["first_sequence"], row["next_sequence"]) == (log["minSequence"], log["maxSequence"])
        assert (row["lag_messages"], row["lag_ms"], row["next_store_timestamp"], row["newest_store_timestamp"]) == \
            _expected_lag(p, log, stamp)


def test_lookups_and_the_options_of_the_other_family(clean):
    store, rb = clean
    p = rb["consumerProgressAfterStart"][0]
    rows, out = _rows(store, "-g", p["group"], "-s", p["subject"])
    assert out.exit_code == 0 and [(r["subject"], r["group"]) for r in rows] == [(p["subject"], p["group"])]
    rows, out = _rows(store, "-g", p["group"] + ".none")
    assert out.exit_code == 1 and rows == [] and "no group progress for group" in out.stderr
    out = _run("offsets", store, "-t", p["subject"])
    assert out.exit_code == 2 and "--subject" in out.stderr


def test_a_rocketmq_store_refuses_subject(tmp_path):
    store = expand_store(FIXTURES / "rocketmq-4.9.8" / "basic" / "store", tmp_path / "store")
    out = _run("offsets", store, "-s", "x")
    assert out.exit_code == 2 and "--topic" in out.stderr


def test_a_restart_that_loses_progress_shows_the_progress_it_has(tmp_path):
    """k: the clean restart with a pull-log tablet replays the action log from past the tablet's
    end: groups go back, one goes away. offsets shows what consumers get after that start."""
    variant = "k-clean-restart-with-pulllog-tablet"
    truth = load_truth(CRASH / variant / "truth.json")
    rows, out = _rows(expand_store(CRASH / variant / "input", tmp_path / "store"))
    assert out.exit_code == 0, out.stderr
    assert [(r["subject"], r["group"], r["pull"], {c: [v["pull"], v["ack"]] for c, v in r["consumers"].items()})
            for r in rows] == [(p["subject"], p["group"], p["pull"], p["consumers"])
                               for p in truth["consumerProgressAfterRestart"]]


def test_a_store_qmq_does_not_load_says_so_and_exits_3(tmp_path):
    variant = "b-stray-file-in-messagelog"
    truth = load_truth(CRASH / variant / "truth.json")
    rows, out = _rows(expand_store(CRASH / variant / "input", tmp_path / "store"))
    assert out.exit_code == 3 and rows == []
    assert "storeNotLoadable" in out.stderr and truth["exception"]["class"] in out.stderr


def test_a_torn_last_unit_names_no_record_and_the_lag_is_the_units_before_it(clean, tmp_path):
    """A consumer log cut inside its last unit (a crash while the unit was written): QMQ maps
    the segment at full size, so the unit reads as a message-log index of offset 0 and 0 bytes,
    which names no record. The subject's newest message is the one its last whole unit names;
    the lag in ms is never from another subject's record at offset 0 (a negative lag)."""
    from helpers import copy_tree
    from rmqtool.store.qmq.consumerlog import subject_directory
    store, rb = clean
    store = copy_tree(store, tmp_path / "store")
    stamp = {r["offset"]: r["timestamp"] for r in rb["messageLog"]["records"]}
    p = next(p for p in rb["consumerProgressAfterStart"] if not p["broadcast"] and p["subject"] in rb["consumerLogs"]
             and rb["consumerLogs"][p["subject"]]["maxSequence"] - 1 - p["pull"] > 1)
    log = rb["consumerLogs"][p["subject"]]
    (segment,) = sorted(subject_directory(store, p["subject"]).iterdir())
    os.truncate(segment, (log["maxSequence"] - 1) * log["unitBytes"] + 7)
    rows, out = _rows(store, "-g", p["group"], "-s", p["subject"])
    assert out.exit_code == 0, out.stderr
    (row,) = rows
    whole = {u["sequence"]: u for u in log["units"] if u["type"] == "MESSAGE_LOG_INDEX"
             and u["sequence"] < log["maxSequence"] - 1}
    newest = stamp[whole[max(whole)]["wroteOffset"]]
    following = stamp[whole[p["pull"] + 1]["wroteOffset"]]
    assert row["next_sequence"] == log["maxSequence"] and row["lag_messages"] == log["maxSequence"] - 1 - p["pull"]
    assert (row["newest_store_timestamp"], row["next_store_timestamp"], row["lag_ms"]) == \
        (newest, following, newest - following)
