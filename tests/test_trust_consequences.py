"""Issue 20, items 8, 10 and 11: what verify, info and recover tell an operator about the
broker's next start: the commit log's two ends under one name each, the consequence of every
finding, the messages the next start drops, and those it will no longer serve."""
from __future__ import annotations

import json
import pathlib
import time


from conftest import FIXTURES, V4, V5, load_truth
from helpers import cli_runner
from rmqtool.cli.app import app
from rmqtool.findings import CONSEQUENCES, REGISTRY, Consequence
from rmqtool.recovery.outcome import Settings, simulate

BASIC = V4 / "basic"
CRASH_FAST_E2 = V4 / "crash-fast" / "e2-corrupt-body-in-first-commitlog-file"
CRASH_E2 = V4 / "crash" / "e2-corrupt-body-in-first-commitlog-file"
MISSING_MIDDLE = FIXTURES / "crash-made" / "missing-middle-abnormal"


def run(*args):
    runner = cli_runner()
    return runner.invoke(app, [str(a) for a in args])


def verify_rows(store, *extra):
    r = run("verify", store, "--format", "jsonl", "--no-progress", "--jobs", "1", *extra)
    assert r.exit_code in (0, 3), r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()], r


def document(*args) -> dict:
    r = run(*args, "--format", "json")
    assert r.exit_code in (0, 3), r.stderr
    return json.loads(r.stdout)


def one(rows, finding_id) -> dict:
    found = [x for x in rows if x["finding"] == finding_id]
    assert len(found) == 1, (finding_id, found)
    return found[0]


# --- item 11: one commit log end ---------------------------------------------------------------

def test_info_verify_and_recover_name_the_same_two_ends_on_a_damaged_magic_mid_segment(store_copy):
    truth = load_truth(BASIC / "truth.json")["truth"]
    store = store_copy(BASIC / "store")
    segment = sorted((store / "commitlog").iterdir())[-1]  # the last written file (the fixture has none made ahead)
    base = int(segment.name)
    inside = [m for m in truth["messages"] if m["physicalOffset"] >= base]
    victim = inside[len(inside) // 3]  # mid-segment, with records after it
    raw = bytearray(segment.read_bytes())
    raw[victim["physicalOffset"] - base + 4] ^= 0xFF  # the magic code's first byte
    segment.write_bytes(bytes(raw))
    written, recovered = truth["commitlog"]["maxPhyOffset"], victim["physicalOffset"]

    info = document("info", store)["commitlog"]
    assert (info["written_end"], info["recovered_end"]) == (written, recovered)
    assert info["max_commit_log_offset"] == recovered  # getMaxPhyOffset once the broker has started
    rows, _ = verify_rows(store)
    end = one(rows, "commitLogEnd")
    assert (end["written_end"], end["recovered_end"]) == (written, recovered)
    plan = document("recover", store)
    assert (plan["commit_log"]["written_end"], plan["commit_log"]["recovered_end"]) == (written, recovered)

    # the queues are cut where the broker cuts them: at the recovered end, in info and verify alike
    queues = {f"{q['topic']}/{q['queue_id']}": q["max_queue_offset"] for q in document("info", store)["consume_queues"]}
    assert queues == {k: v["max_offset"] for k, v in plan["queues"].items()}
    dropped = {m["commit_log_offset"] for m in plan["lost_messages"]}
    assert recovered in dropped
    for x in rows:  # the messages past the cut are counted as dropped, never as waiting for dispatch
        assert not (x["finding"] == "messageNotDispatched" and x["commit_log_offset"] >= recovered), x


# --- item 10: verify says what the next start does --------------------------------------------

def test_verify_says_the_next_start_drops_what_recover_plans_and_the_engine_dropped():
    truth = load_truth(CRASH_FAST_E2 / "truth.json")
    store = CRASH_FAST_E2 / "input" / "store"
    engine_lost = len(truth["diffVsPreCrash"]["lostFromCommitLog"])
    plan = document("recover", store)
    planned = [m for m in plan["lost_messages"] if m["reason"] == "log cut"]
    assert len(planned) == engine_lost  # the simulation agrees with the engine on this store

    rows, result = verify_rows(store)
    cut = one(rows, "recoveryCutsCommitLog")
    tail = load_truth(CRASH_FAST_E2.parent / "pre-crash-truth.json")["tailPutResultsBeforeHalt"]
    written = max(p["wroteOffset"] + p["wroteBytes"] for p in tail)
    recovered = truth["truth"]["commitlog"]["maxPhyOffset"]
    assert cut["messages"] == engine_lost
    assert (cut["written_end"], cut["recovered_end"], cut["bytes_dropped"]) == (written, recovered,
                                                                                written - recovered)
    assert cut["caused_by"] == "bodyCrcMismatch" and cut["consequence"] == "dropsMessages"
    cause = one(rows, "bodyCrcMismatch")
    assert (cause["commit_log_offset"], cause["path"], cause["offset"]) == (
        truth["mutation"]["messagePhysicalOffset"], cut["path"], cut["offset"])
    assert (f"the next broker start drops {engine_lost} messages: run rmqtool salvage or recover first"
            in result.stderr)
    assert not [x for x in rows if x["finding"] == "messageNotDispatched"]  # dropped, not waiting


def test_a_flipped_body_byte_in_file_0_of_a_5x_crash_store_counts_what_recover_plans(store_copy):
    """The issue's shape on the 5.3.3 crash store: one body byte flipped in file 0, abort file
    present, so the next start re-checks from file 0 and drops every message after it."""
    truth = load_truth(V5 / "crash5" / "a-as-is" / "truth.json")["truth"]["messages"]
    store = store_copy(V5 / "crash5" / "a-as-is" / "input" / "store")
    assert (store / "abort").exists()
    at = 1000
    victim = next(m for m in truth if m["physicalOffset"] <= at < m["physicalOffset"] + m["storeSize"])
    first = store / "commitlog" / "00000000000000000000"
    raw = bytearray(first.read_bytes())
    raw[at] ^= 0xFF
    first.write_bytes(bytes(raw))
    rows, result = verify_rows(store)
    crc = one(rows, "bodyCrcMismatch")
    assert crc["commit_log_offset"] == victim["physicalOffset"]  # the byte is in its body
    expected = sum(1 for m in truth if m["physicalOffset"] >= victim["physicalOffset"])
    plan = document("recover", store)
    lost = [m for m in plan["lost_messages"] if m["reason"] == "log cut"]
    assert len(lost) == expected
    cut = one(rows, "recoveryCutsCommitLog")
    assert (cut["messages"], cut["caused_by"], cut["recovered_end"]) == (expected, "bodyCrcMismatch",
                                                                          victim["physicalOffset"])
    assert f"the next broker start drops {expected} messages: run rmqtool salvage or recover first" in result.stderr
    assert crc["consequence"] == "dropsMessages"


def test_damage_the_recovery_never_reads_drops_nothing_and_says_so():
    """crash/e2: the flipped byte lies before the abnormal recovery's start file: the engine
    lost nothing; verify still reports the damage, with consequence none, and no cut."""
    truth = load_truth(CRASH_E2 / "truth.json")
    assert not truth["diffVsPreCrash"]["lostFromCommitLog"]
    rows, result = verify_rows(CRASH_E2 / "input" / "store")
    assert one(rows, "bodyCrcMismatch")["consequence"] == "none"
    assert not [x for x in rows if x["finding"] == "recoveryCutsCommitLog"]
    assert "the next broker start drops" not in result.stderr


def test_every_finding_id_has_a_default_consequence_shown_in_json():
    assert set(CONSEQUENCES) == set(REGISTRY)
    assert {c.value for c in Consequence} == {"wontStart", "dropsMessages", "unreachable", "rebuilt", "none",
                                              "servedEmpty", "progressLost",  # QMQ's
                                              "redelivers", "strands", "loops"}  # a 5.x timer store's
    listed = [json.loads(line) for line in run("findings", "--format", "jsonl").stdout.splitlines()]
    assert {x["finding"]: x["consequence"] for x in listed} == {k: v.value for k, v in CONSEQUENCES.items()}
    rows, _ = verify_rows(CRASH_FAST_E2 / "input" / "store")
    assert rows and all(x["consequence"] in {c.value for c in Consequence} for x in rows)
    defaults = [x for x in rows if x["finding"] != "bodyCrcMismatch"]
    assert all(x["consequence"] == CONSEQUENCES[x["finding"]].value for x in defaults)


def test_the_simulation_costs_little_on_a_clean_store():
    """verify runs it at most once a run, and on a clean store (no abort file, no damage, no
    message past its queue's end) not at all; run anyway it reads what the broker's start reads."""
    from rmqtool.verify.run import Verify, VerifyOptions

    store = BASIC / "store"
    run = Verify(store, VerifyOptions(jobs=1))
    assert not [f for f in run.findings() if f.severity.value == "error"]
    assert run.next_start is None
    crashed = Verify(CRASH_E2 / "input" / "store", VerifyOptions(jobs=1))  # the abort file: simulated
    list(crashed.findings())
    assert crashed.next_start is not None and crashed.next_start.loadable
    simulate(store, Settings())  # warm the page cache and imports
    began = time.perf_counter()
    out = simulate(store, Settings())
    took = time.perf_counter() - began
    end = load_truth(BASIC / "truth.json")["truth"]["commitlog"]["maxPhyOffset"]
    assert out.recovered_end == out.written_end == end
    assert not out.lost_messages
    assert took < 1.0, took


# --- item 8: every message the broker will no longer serve, and why ---------------------------

def test_a_missing_middle_file_is_listed_as_lost_in_the_plan_and_unreachable_in_verify():
    """The broker loads the store and skips the gone file's messages (the README of
    fixtures/crash-made says so; truth.json: 602 of the base store's messages remain)."""
    truth = load_truth(MISSING_MIDDLE / "truth.json")["engines"]
    base = load_truth(V4 / "crash" / "summary.json")["a-as-is"]["queues"]
    before = sum(q[1] - q[0] for q in base.values())
    assert all(engine["loadOk"] and engine["startReturned"] for engine in truth.values())
    counts = {before - engine["messageCount"] for engine in truth.values()}
    assert len(counts) == 1  # 4.9.8 and 5.3.3 alike
    expected = counts.pop()
    store = MISSING_MIDDLE / "input" / "store"
    plan = document("recover", store)
    missing = [m for m in plan["lost_messages"] if m["reason"] == "file missing"]
    assert len(missing) == len(plan["lost_messages"]) == expected == 170
    text = run("recover", store).stdout.replace("\n    ", " ")
    assert f"{expected} messages lost" in text and "(170 file missing;" in text and "no message is lost" not in text
    rows, result = verify_rows(store)
    assert result.exit_code == 3
    unreachable = one(rows, "messageUnreachable")
    assert (unreachable["messages"], unreachable["severity"], unreachable["consequence"]) == (expected, "error",
                                                                                          "unreachable")


def zeroed_units_store(store_copy):
    """crash/a-as-is (abort file: abnormal recovery from commit log file 131072) with the units
    of OtherTopic/0 from queue offset 60 to its second file's end zeroed: the queue's recovery
    (from its third-last file) stops at 60, the later files go, and the records dispatched
    again from file 131072 land at the write position (the broker logs '[BUG]logic queue
    order maybe wrong'): the messages between are never dispatched again."""
    store = store_copy(V4 / "crash" / "a-as-is" / "input" / "store")
    unit = store / "consumequeue" / "OtherTopic" / "0" / "00000000000000001000"  # queue offsets 50..99
    raw = bytearray(unit.read_bytes())
    raw[(60 - 50) * 20:] = bytes(len(raw) - (60 - 50) * 20)
    unit.write_bytes(bytes(raw))
    messages = load_truth(V4 / "crash" / "a-as-is" / "truth.json")["truth"]["messages"]
    other = sorted((m["queueOffset"], m["physicalOffset"]) for m in messages if m["topic"] == "OtherTopic")
    start = int(pathlib.Path(document("recover", store)["start_file"]).name)
    first_dispatched = min(qo for qo, offset in other if offset >= start)
    lost = [(qo, offset) for qo, offset in other if 60 <= qo < first_dispatched]
    return store, lost


def test_zeroed_units_before_the_recovery_start_are_lost_units_in_the_plan(store_copy):
    store, lost = zeroed_units_store(store_copy)
    assert lost
    plan = document("recover", store)
    listed = [(m["queue_offset"], m["commit_log_offset"]) for m in plan["lost_messages"]]
    assert listed == lost
    assert {(m["topic"], m["queue_id"], m["reason"]) for m in plan["lost_messages"]} == {("OtherTopic", 0, "unit lost")}
    text = run("recover", store).stdout.replace("\n    ", " ")
    assert f"{len(lost)} messages lost" in text and "lost (unit lost)" in text and "no message is lost" not in text


def test_verify_calls_zeroed_units_unreachable_and_gives_the_redispatch_command(store_copy):
    store, lost = zeroed_units_store(store_copy)
    rows, result = verify_rows(store)
    assert result.exit_code == 3
    bad = one(rows, "messageUnreachable")
    command = f"rmqtool redispatch {store} --cq --topic OtherTopic --queue 0 --apply"
    assert (bad["severity"], bad["consequence"], bad["redispatch_command"]) == ("error", "unreachable", command)
    assert (bad["queue_offset"], bad["messages"], bad["commit_log_offset"]) == (lost[0][0], len(lost), lost[0][1])
    assert command in bad["message"]
    for x in rows:  # what the next start dispatches again is still "not dispatched yet", and only that
        if x["finding"] == "messageNotDispatched":
            assert x["queue_offset"] >= lost[-1][0] + 1 and x["consequence"] == "rebuilt"
    # the command does what the finding says: afterwards no message is unreachable
    r = run(*command.split()[1:])
    assert r.exit_code == 0, r.stderr
    after, _ = verify_rows(store)
    assert not [x for x in after if x["finding"] in ("messageUnreachable", "messageNotDispatched")]


def test_info_on_a_clean_store_whose_last_file_fails_a_crc_gives_the_brokers_ends(tmp_path):
    """The stores the real broker left after a start that cut the log at a body CRC failure and
    a clean shutdown (e1, e3: expected/): the damaged record stays on disk, and the next start's
    normal recovery cuts there again. info says the ends and queue maxima the broker had (truth)."""
    from helpers import expand_store
    for variant in ("e1-corrupt-body-in-last-commitlog-file", "e3-corrupt-body-in-second-to-last-commitlog-file"):
        root = V4 / "crash" / variant
        truth = load_truth(root / "truth.json")["truth"]
        store = expand_store(root / "expected" / "store", tmp_path / variant)
        assert not (store / "abort").exists()
        doc = document("info", store)
        assert doc["commitlog"]["max_commit_log_offset"] == doc["commitlog"]["recovered_end"] == \
            truth["commitlog"]["maxPhyOffset"] < doc["commitlog"]["written_end"]
        assert "CRC" in doc["commitlog"]["recovery_cut_reason"]  # why the start cuts there
        assert {(q["topic"], str(q["queue_id"])): q["max_offset"] for q in doc["consume_queues"]} == \
            {(t, q): v["maxOffset"] for t, qs in truth["consumeQueues"].items() for q, v in qs.items() if v["maxOffset"]}
