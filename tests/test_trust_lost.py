"""Issue 20, item 8: recover's plan lists every message the broker will no longer serve,
also those of a queue whose units vanished without trace (its first or last files deleted,
its whole directory gone) while the start's dispatch begins after them; verify calls the
same messages unreachable. Expected values come from the real broker's truth."""
from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from conftest import V4, load_truth
from helpers import cli_runner
from rmqtool.cli.app import app
from rmqtool.recovery.outcome import Settings, simulate

CRASH = V4 / "crash"


def run(*args):
    runner = cli_runner()
    return runner.invoke(app, [str(a) for a in args])


def plan(store) -> dict:
    r = run("recover", store, "--format", "json")
    assert r.exit_code in (0, 3), r.stderr
    return json.loads(r.stdout)


def verify_rows(store) -> list[dict]:
    r = run("verify", store, "--format", "jsonl", "--no-progress", "--jobs", "1")
    assert r.exit_code in (0, 3), r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def message_offsets() -> dict:
    """(topic, queue id, queue offset) -> commit log offset of every message the crash stores hold."""
    messages = load_truth(CRASH / "a-as-is" / "truth.json")["truth"]["messages"]
    return {(m["topic"], m["queueId"], m["queueOffset"]): m["physicalOffset"] for m in messages}


def unreachable_in_verify(store) -> set[int]:
    """The commit log offsets of the messages verify's findings call unreachable (runs of queue offsets)."""
    where = message_offsets()
    found = set()
    for x in verify_rows(store):
        if x["consequence"] == "unreachable" and "queue_offset" in x and "messages" in x:
            found |= {where[(x["topic"], x["queue_id"], qo)]
                      for qo in range(x["queue_offset"], x["queue_offset"] + x["messages"])}
    return found


def lost_in_truth(variant: str) -> list[tuple]:
    """(commit log offset, topic, queue id, queue offset) of what the broker no longer served after its start."""
    diff = load_truth(CRASH / variant / "truth.json")["diffVsPreCrash"]
    assert diff["lostFromCommitLog"] == []
    return sorted((m["physicalOffset"], *key.split("/")[:1], int(key.split("/")[1]), m["queueOffset"])
                  for key, ms in diff["preCrashOffsetsNotReachableViaConsumeQueue"].items() for m in ms
                  if not m["inConsumeQueue"] and not m["readableViaGetMessage"])


def listed(p: dict) -> list[tuple]:
    return [(m["commit_log_offset"], m["topic"], m["queue_id"], m["queue_offset"]) for m in p["lost_messages"]]


@pytest.mark.parametrize("variant", ["c1-delete-cq-queue-dir", "c2-delete-last-cq-file", "c4-delete-first-cq-file"])
def test_the_plan_lists_exactly_what_the_broker_no_longer_served(variant):
    """c1: CrashTopic/1's directory gone, the abnormal start rebuilds it from commit log file
    131072 only (queue offsets 0..135 no longer served); c2: the last file of CrashTopic/0 gone,
    the start dispatches its messages again (nothing lost); c4: its first file gone (0..49)."""
    store = CRASH / variant / "input" / "store"
    expected = lost_in_truth(variant)
    p = plan(store)
    assert listed(p) == expected
    assert {m["reason"] for m in p["lost_messages"]} <= {"unit lost"}
    assert unreachable_in_verify(store) == {e[0] for e in expected}


def deleted_tail_store(tmp_path) -> tuple[pathlib.Path, list[tuple]]:
    """A cleanly shut down crash store with the last consume queue file of CrashTopic/0 (queue
    offsets 300..349) deleted and no abort file: the normal start recovers that queue to 300,
    and 4.9.8's start() dispatches from the queues' max physic offset (the largest offset+size
    of a last unit, README of fixtures/rocketmq-4.9.8), after those messages: every message of
    the deleted file before it is served no more."""
    from helpers import writable_copy
    store = writable_copy(CRASH / "a-as-is" / "expected" / "store", tmp_path / "store")
    assert not (store / "abort").exists()
    (store / "consumequeue" / "CrashTopic" / "0" / "00000000000000006000").unlink()
    queues = load_truth(CRASH / "a-as-is" / "truth.json")["truth"]["consumeQueues"]
    kept = {(t, int(q)): [e for e in qs["entries"] if not (t == "CrashTopic" and q == "0" and e[0] >= 300)]
            for t, by in queues.items() for q, qs in by.items()}
    reput = max(e[-1][1] + e[-1][2] for e in kept.values() if e)
    lost = sorted((e[1], "CrashTopic", 0, e[0]) for e in queues["CrashTopic"]["0"]["entries"]
                  if e[0] >= 300 and e[1] < reput)
    return store, lost


def test_a_deleted_last_queue_file_on_a_clean_store_is_listed(tmp_path):
    store, expected = deleted_tail_store(tmp_path)
    assert expected  # the fixture's last message is CrashTopic/1's: all of 300..309 lie before the reput
    p = plan(store)
    assert listed(p) == expected
    assert {m["reason"] for m in p["lost_messages"]} == {"unit lost"}
    assert all(m["readable"] and m["keys"] for m in p["lost_messages"])
    assert unreachable_in_verify(store) == {e[0] for e in expected}
    text = run("recover", store).stdout.replace("\n    ", " ")
    assert f"{len(expected)} messages lost" in text and "clean shutdown leaves it" not in text


def test_after_apply_verify_calls_unreachable_what_the_plan_said_lost(tmp_path):
    """recover --apply does what the broker's start does: what the plan listed lost, verify
    then calls unreachable (and the redispatch it names brings them back)."""
    store, expected = deleted_tail_store(tmp_path)
    lost = {m["commit_log_offset"] for m in plan(store)["lost_messages"]}
    r = run("recover", store, "--apply", "--backup-dir", tmp_path / "backup")
    assert r.exit_code == 0, r.stderr
    assert unreachable_in_verify(store) == lost == {e[0] for e in expected}
    r = run("redispatch", store, "--cq", "--topic", "CrashTopic", "--queue", "0", "--apply",
            "--backup-dir", tmp_path / "backup2")
    assert r.exit_code == 0, r.stderr
    assert unreachable_in_verify(store) == set()
    assert plan(store)["lost_messages"] == []


def test_a_queue_directory_gone_after_apply_is_what_the_plan_said(tmp_path):
    from helpers import writable_copy
    variant = "c1-delete-cq-queue-dir"
    store = writable_copy(CRASH / variant / "input" / "store", tmp_path / "store")
    lost = {m["commit_log_offset"] for m in plan(store)["lost_messages"]}
    r = run("recover", store, "--apply", "--backup-dir", tmp_path / "backup")
    assert r.exit_code == 0, r.stderr
    assert unreachable_in_verify(store) == lost == {e[0] for e in lost_in_truth(variant)}


def test_a_healthy_store_loses_nothing():
    """Every queue's tail is read (from where its units reach to where dispatch starts):
    on a healthy store every message there is served."""
    for store in (V4 / "basic" / "store", CRASH / "a-as-is" / "input" / "store",
                  CRASH / "a-as-is" / "expected" / "store"):
        assert simulate(store, Settings()).lost_messages == []


def test_units_zeroed_to_the_end_of_a_queue_file_on_a_clean_store_are_listed(tmp_path):
    """The last units of OrderTopic/2 zeroed (its file's tail left no trace), no abort file:
    the normal start cuts the queue at the zeros and dispatches from the other queues' max
    physic offset, after those messages: nothing serves them again. Expected from the truth's
    queue entries."""
    from helpers import writable_copy
    base = V4 / "basic"
    store = writable_copy(base / "store", tmp_path / "store")
    queues = load_truth(base / "truth.json")["truth"]["consumeQueues"]
    entries = queues["OrderTopic"]["2"]["entries"]
    zeroed = entries[-5:]
    directory = store / "consumequeue" / "OrderTopic" / "2"
    files = sorted(directory.iterdir())
    size = files[0].stat().st_size
    for qo, *_ in zeroed:
        path = directory / f"{qo * 20 // size * size:020d}"
        with open(path, "r+b") as f:
            f.seek(qo * 20 % size)
            f.write(bytes(20))
    reput = max(e[-1][1] + e[-1][2] for t, by in queues.items() for q, e in
                ((q, qs["entries"] if (t, q) != ("OrderTopic", "2") else entries[:-5]) for q, qs in by.items()) if e)
    expected = sorted((e[1], "OrderTopic", 2, e[0]) for e in zeroed if e[1] < reput)
    assert expected
    p = plan(store)
    assert listed(p) == expected and {m["reason"] for m in p["lost_messages"]} == {"unit lost"}
    unreachable = {x["queue_offset"] + i for x in verify_rows(store)
                   if x["consequence"] == "unreachable" and x.get("topic") == "OrderTopic" and x.get("queue_id") == 2
                   and "messages" in x for i in range(x["messages"])}
    assert unreachable == {qo for _, _, _, qo in expected}


def test_a_queue_directory_gone_on_a_clean_store_with_consumer_offsets(tmp_path):
    """fixtures/config/consumers (the store the broker left after c4, clean shutdown, with the
    consumers' committed offsets) with OtherTopic/0's directory deleted: the normal start
    dispatches from the other queues' max physic offset, after every OtherTopic message, and
    nothing makes that queue again. consumerOffset.json says a group read from it, so the plan
    looks for its messages; those of CrashTopic/0 below 50 stay unserved as after c4."""
    from helpers import writable_copy
    base = V4.parent / "config" / "consumers"
    store = writable_copy(base / "store", tmp_path / "store")
    shutil.rmtree(store / "consumequeue" / "OtherTopic" / "0")
    truth = load_truth(base / "truth.json")
    queues = truth["truth"]["consumeQueues"]
    reput = max(qs["entries"][-1][1] + qs["entries"][-1][2] for t, by in queues.items() for q, qs in by.items()
                if qs["entries"] and t != "OtherTopic")
    expected = sorted([(e[1], "OtherTopic", 0, e[0]) for e in queues["OtherTopic"]["0"]["entries"] if e[1] < reput]
                      + [(m["physicalOffset"], "CrashTopic", 0, m["queueOffset"]) for m in
                         truth["diffVsPreCrash"]["preCrashOffsetsNotReachableViaConsumeQueue"]["CrashTopic/0"]])
    assert len(expected) == 152 + 50
    p = plan(store)
    assert listed(p) == expected
    assert {m["reason"] for m in p["lost_messages"]} == {"unit lost"}
    assert unreachable_in_verify(store) == {e[0] for e in expected}
