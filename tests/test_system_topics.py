"""dump commitlog --decode-system: what a record of a system topic means (store/system_topics.py).

Transactions and delayed messages: the 4.9.8 txdelay fixture (broker-style half and op records,
commits copied to the real topic, rollbacks; SCHEDULE_TOPIC_XXXX), checked against its truth
file's put labels and properties. Timer records: the 5.3.3 engine's own stored properties
(fixtures/rocketmq-5.3.3/system-topics, from the timer fixture). POP's revive log: no fixture
has it, so its records, shaped as the 5.3.3 broker stores them (PopCheckPoint / AckMsg /
BatchAckMsg bodies in fastjson's names), and timer records beside them are written here with
our own engine and dumped whole.
"""
from __future__ import annotations

import json
import re

import pytest

from conftest import V4, V5, load_truth
from helpers import cli_runner
from rmqtool.formats import system_topics as st

TXDELAY = V4 / "txdelay"
TRUTH = load_truth(TXDELAY / "truth.json")


def _dump(path, *args) -> list[dict]:
    from rmqtool.cli.app import app
    r = cli_runner().invoke(app, ["dump", "commitlog", str(path), "--decode-system", "-f", "jsonl", *args])
    assert r.exit_code == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


@pytest.fixture(scope="module")
def txdelay_rows() -> list[dict]:
    return _dump(TXDELAY / "store")


def _expected_half_states() -> dict[int, str]:
    """Half message number -> its outcome, from the put labels (brokerStyle-COMMIT-i, -OP-afterRollback-i)."""
    states = {}
    for p in TRUTH["putResults"]:
        m = re.fullmatch(r"brokerStyle-(HALF|COMMIT|OP-afterRollback)-(\d+)", p["label"])
        if m and m[1] == "HALF":
            states.setdefault(int(m[2]), "open")
        elif m:
            states[int(m[2])] = "committed" if m[1] == "COMMIT" else "rolledBack"
    return states


def test_half_and_op_records_say_their_transaction_state(txdelay_rows):
    truth = {m["physicalOffset"]: m for m in TRUTH["truth"]["messages"]}
    states = _expected_half_states()
    halves = [r for r in txdelay_rows if r["topic"] == st.TRANS_HALF_TOPIC]
    assert len(halves) == len(states)
    by_queue_offset = {}
    for r in halves:
        props = truth[r["commit_log_offset"]]["properties"]
        n = int(props["KEYS"].rsplit("-", 1)[1])
        system = r["system"]
        assert (system["kind"], system["real_topic"], system["real_queue_id"], system["state"]) == \
            ("transactionHalf", props["REAL_TOPIC"], int(props["REAL_QID"]), states[n])
        if states[n] == "committed":  # the copy in the real topic names this half record
            copy = truth[system["commit_commit_log_offset"]]
            assert copy["preparedTransactionOffset"] == r["commit_log_offset"] and copy["topic"] == props["REAL_TOPIC"]
        assert ("op_commit_log_offset" in system) == (states[n] != "open")
        by_queue_offset[r["queue_offset"]] = system
    ops = [r for r in txdelay_rows if r["topic"] == st.TRANS_OP_HALF_TOPIC]
    assert len(ops) == sum(s != "open" for s in states.values())
    for r in ops:
        system = r["system"]
        body = truth[r["commit_log_offset"]]
        assert system["removed"] is (body["tags"] == st.OP_REMOVE_TAG)
        (offset,) = system["half_queue_offsets"]
        half = by_queue_offset[offset]
        assert system["states"] == [half["state"]] and system["real_topic"] == half["real_topic"]
        assert half["op_commit_log_offset"] == r["commit_log_offset"]


def test_delayed_records_say_their_level_and_real_queue(txdelay_rows):
    delayed = [r for r in txdelay_rows if r["topic"] == st.SCHEDULE_TOPIC]
    system_topics = {st.TRANS_HALF_TOPIC, st.TRANS_OP_HALF_TOPIC, st.SCHEDULE_TOPIC}
    assert delayed and all(("system" in r) == (r["topic"] in system_topics) for r in txdelay_rows)
    for r in delayed:
        p = r["properties"]
        assert r["system"] == {"kind": "delayed", "real_topic": p["REAL_TOPIC"], "real_queue_id": int(p["REAL_QID"]),
                               "delay_level": int(p["DELAY"])}
        assert r["queue_id"] == r["system"]["delay_level"] - 1  # ScheduleMessageService.delayLevel2QueueId


def test_timer_and_revive_records_written_by_our_engine(tmp_path):
    """No fixture has them: records as a 5.3.3 broker stores them, written by our engine."""
    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.store import Store

    revive = st.REVIVE_TOPIC_PREFIX + "DefaultCluster"
    ck = {"so": 40, "pt": 1_800_000_000_000, "it": 60_000, "bm": 0, "n": 3, "q": 2, "t": "PopTopic", "c": "popGroup",
          "ro": 7, "d": [0, 1, 4], "bn": "broker-a", "rp": 0}
    ack = {"ao": 41, "so": 40, "c": "popGroup", "t": "PopTopic", "q": 2, "pt": 1_800_000_000_000, "bn": "broker-a"}
    batch_ack = {**ack, "aol": [40, 44]}
    timer_props = {st.PROPERTY_TIMER_OUT_MS: "1800000005000", "REAL_TOPIC": "TimerTopic", "REAL_QID": "1",
                   st.PROPERTY_TIMER_ROLL_TIMES: "2"}
    recall_props = {st.PROPERTY_TIMER_OUT_MS: "1800000005000", "REAL_TOPIC": "TimerTopic", "REAL_QID": "1",
                    st.PROPERTY_TIMER_DEL_UNIQKEY: "TimerTopic+C0000202ABCDEF"}
    revive_timer = {st.PROPERTY_TIMER_OUT_MS: "1800000060000", "REAL_TOPIC": revive, "REAL_QID": "0"}
    with Store.open(tmp_path / "s", writable=True) as s:
        for topic, body, tags, props in (
                (st.TIMER_TOPIC, b"t", None, timer_props), (st.TIMER_TOPIC, b"", None, recall_props),
                (revive, json.dumps(ck).encode(), st.POP_CK_TAG, {}),
                (revive, json.dumps(ack).encode(), st.POP_ACK_TAG, {}),
                (revive, json.dumps(batch_ack).encode(), st.POP_BATCH_ACK_TAG, {}),
                (st.TIMER_TOPIC, json.dumps(ck).encode(), st.POP_CK_TAG, revive_timer)):
            s.append(producer_message(topic, body, tags=tags, user_properties=props, compress=None))
    from test_vocabulary import documented, keys_of
    rows = _dump(tmp_path / "s")
    names, suffixes = documented()
    assert not {f for f in keys_of([r["system"] for r in rows], set())
                if f not in names and not any(f.endswith(s) for s in suffixes)}
    timer, recall, ck_row, ack_row, batch_row, waiting = (r["system"] for r in rows)
    assert timer == {"kind": "timer", "real_topic": "TimerTopic", "real_queue_id": 1,
                     "fire_timestamp": 1800000005000, "roll_times": 2}
    assert recall["kind"] == "timerRecall" and (recall["recalled_topic"], recall["recalled_uniq_key"]) == \
        ("TimerTopic", "C0000202ABCDEF")
    pop = {"real_topic": "PopTopic", "real_queue_id": 2, "consumer_group": "popGroup", "start_offset": 40,
           "pop_timestamp": 1_800_000_000_000}
    assert ck_row == {"kind": "popCheckPoint", **pop, "queue_offsets": [40, 41, 44],
                      "revive_timestamp": 1_800_000_060_000}
    assert ack_row == {"kind": "popAck", **pop, "ack_offsets": [41]}
    assert batch_row == {"kind": "popBatchAck", **pop, "ack_offsets": [40, 44]}
    assert waiting["kind"] == "timer" and waiting["real_topic"] == revive and waiting["pop"] == ck_row


def test_system_fields_are_documented(txdelay_rows):
    from test_vocabulary import documented, keys_of
    names, suffixes = documented()
    fields = keys_of([r["system"] for r in txdelay_rows if "system" in r], set())
    assert not {f for f in fields if f not in names and not any(f.endswith(s) for s in suffixes)}


def test_real_timer_records_of_the_5_3_3_engine():
    """The rmq_sys_wheel_timer records the 5.3.3 engine wrote (fixtures/rocketmq-5.3.3/system-topics):
    the real topic and queue, the fire time, rolls and recalls, as their stored properties say."""
    from rmqtool.formats.properties import string_to_properties
    from rmqtool.store.message import Message
    from rmqtool.store.system_topics import describe

    records = load_truth(V5 / "system-topics" / "timer-records.json")["records"]
    kinds = set()
    for r in records:
        raw = r["propertiesString"].encode()
        m = Message(r["physicalOffset"], 0, 0, 0, r["queueId"], 0, r["queueOffset"], r["physicalOffset"], 0, 0,
                    b"\0\0\0\0", 0, 0, b"\0\0\0\0", 0, 0, 0, b"", r["topic"], raw)
        p = string_to_properties(r["propertiesString"])
        system = describe(m)
        kinds.add(system["kind"])
        assert (system["real_topic"], system["real_queue_id"], system["fire_timestamp"]) == \
            (p["REAL_TOPIC"], int(p["REAL_QID"]), int(p["TIMER_OUT_MS"]))
        assert system.get("roll_times") == (int(p["TIMER_ROLL_TIMES"]) if "TIMER_ROLL_TIMES" in p else None)
        if "TIMER_DEL_UNIQKEY" in p:
            assert system["kind"] == "timerRecall" and \
                f"{system['recalled_topic']}+{system['recalled_uniq_key']}" == p["TIMER_DEL_UNIQKEY"]
    assert kinds == {"timer", "timerRecall"}
