"""rmqtool check (issue 24): the monitoring probe's measures against the fixtures' truth.json,
its thresholds and Nagios exit codes, the status line, check_measure rows, the Prometheus
textfile read back, and that it reads tails and headers only."""
from __future__ import annotations

import json
import os
import re

import pytest

from conftest import FIXTURES, V4
from helpers import cli_runner, writable_copy
from rmqtool.cli.app import app
from rmqtool.inspect.check import run_check

BASIC = V4 / "basic"
TRUTH = json.loads((BASIC / "truth.json").read_text())
QUEUES = {(topic, int(qid)): q for topic, queues in TRUTH["truth"]["consumeQueues"].items()
          for qid, q in queues.items() if q["maxOffset"] > 0}
COMMIT_LOG = TRUTH["truth"]["commitlog"]
MESSAGES = {m["physicalOffset"]: m for m in TRUTH["truth"]["messages"]}
NEWEST = max(m["storeTimestamp"] for m in MESSAGES.values())
CHECKPOINT = TRUTH["onDiskAfterShutdown"]["checkpoint"]
NOW = NEWEST + 1000  # the clock is passed in: never today's date


def invoke(*args):
    return cli_runner().invoke(app, ["check", *map(str, args), "--now", str(NOW)])


def rows_of(result) -> dict:
    return {(r["measure"], r["topic"], r["queue_id"], r["group"]): r
            for r in map(json.loads, result.stdout.splitlines()) if r["record"] == "check_measure"}


@pytest.fixture(scope="module")
def clean():
    return run_check([BASIC / "store"], now=NOW)


def test_a_clean_store_measures_as_its_truth(clean):
    (store,) = clean.stores
    m = {(r.measure, r.topic, r.queue_id): r.value for r in store.measures}
    assert m[("written_end", None, None)] == COMMIT_LOG["maxPhyOffset"]
    assert m[("dispatch_lag_bytes", None, None)] == m[("index_lag_bytes", None, None)] == 0
    assert m[("unflushed_ms", None, None)] == NEWEST - CHECKPOINT["physicMsgTimestamp"]
    assert m[("newest_age_ms", None, None)] == 1000
    # the abnormal start: the last file whose first message was stored at or before the checkpoint's min time
    bases = sorted(int(f["path"].split("/")[1]) for f in TRUTH["onDiskAfterShutdown"]["files"]
                   if f["path"].startswith("commitlog/"))
    start = max((b for b in bases if b in MESSAGES and MESSAGES[b]["storeTimestamp"] <= CHECKPOINT["minTimestamp"]),
                default=bases[0])
    assert m[("recovery_bytes", None, None)] == COMMIT_LOG["maxPhyOffset"] - start
    for (topic, qid), q in QUEUES.items():
        assert m[("queue_dispatch_lag_bytes", topic, qid)] == COMMIT_LOG["maxPhyOffset"] - q["maxPhysicOffset"]
    assert m[("tail_errors", None, None)] == 0 and 0 < m[("disk_used_ratio", None, None)] < 1
    assert clean.exit_code == 0 and clean.status_line().startswith("RMQTOOL CHECK OK - ")


def test_thresholds_give_each_nagios_code(tmp_path):
    unflushed = NEWEST - CHECKPOINT["physicMsgTimestamp"]
    warn = invoke(BASIC / "store", "--warn", f"unflushed_ms={unflushed}")
    crit = invoke(BASIC / "store", "--warn", "unflushed_ms=1", "--crit", f"unflushed_ms={unflushed}")
    below = invoke(BASIC / "store", "--crit", f"unflushed_ms={unflushed + 1}")
    gone = invoke(tmp_path / "no-such-store")
    assert (warn.exit_code, crit.exit_code, below.exit_code, gone.exit_code) == (1, 2, 0, 3)
    assert warn.stdout.startswith(f"RMQTOOL CHECK WARNING - {BASIC / 'store'}: WARNING unflushed_ms={unflushed} | ")
    assert crit.stdout.startswith("RMQTOOL CHECK CRITICAL - ") and "CRITICAL unflushed_ms" in crit.stdout
    assert re.search(rf"\| .*\bunflushed_ms={unflushed}ms\b", below.stdout) and len(below.stdout.splitlines()) == 1
    assert gone.stdout.startswith("RMQTOOL CHECK UNKNOWN - ") and "no-such-store" in gone.stdout
    bad = invoke(BASIC / "store", "--warn", "nosuch=1")
    assert bad.exit_code == 2 and "MEASURE=VALUE" in bad.stderr


@pytest.fixture(scope="module")
def cut(tmp_path_factory):
    """The basic store with the last unit of every consume queue zeroed: dispatch lags."""
    store = writable_copy(BASIC / "store", tmp_path_factory.mktemp("cut") / "store")
    for topic, qid in QUEUES:
        files = sorted((store / "consumequeue" / topic / str(qid)).iterdir())
        data = bytearray(files[-1].read_bytes())
        end = len(data.rstrip(b"\0")) + (-len(data.rstrip(b"\0")) % 20)
        data[end - 20:end] = bytes(20)
        files[-1].write_bytes(bytes(data))
    prom = store.parent / "check.prom"
    r = invoke(store, "-f", "jsonl", "--prometheus", prom, "--crit", "dispatch_lag_bytes=1")
    return store, r, prom


def test_cut_queues_lag_and_go_critical(cut):
    store, r, _ = cut
    assert r.exit_code == 2, r.stderr
    rows = rows_of(r)
    # the reput position the queues show: the newest record a queue still holds after the cut
    ends = {}
    for topic, qid in QUEUES:
        held = sorted(m["physicalOffset"] for m in MESSAGES.values() if m["topic"] == topic and m["queueId"] == qid)
        ends[(topic, qid)] = held[-2] + MESSAGES[held[-2]]["storeSize"]
    reput = max(ends.values())
    lag = rows[("dispatch_lag_bytes", None, None, None)]
    assert lag["value"] == COMMIT_LOG["maxPhyOffset"] - reput and lag["state"] == "CRITICAL" and lag["unit"] == "bytes"
    assert rows[("dispatch_lag_ms", None, None, None)]["value"] == NEWEST - MESSAGES[reput]["storeTimestamp"]
    for (topic, qid), end in ends.items():
        assert rows[("queue_dispatch_lag_bytes", topic, qid, None)]["value"] == COMMIT_LOG["maxPhyOffset"] - end
        # the time of the oldest record not dispatched to the queue: the first one from its dispatched
        # end on (past an end-of-file blank: the next file's first)
        after = MESSAGES[min(o for o in MESSAGES if o >= end)]["storeTimestamp"]
        assert rows[("queue_dispatch_lag_ms", topic, qid, None)]["value"] == NEWEST - after
    assert rows[("index_lag_bytes", None, None, None)]["value"] == 0  # the index is whole
    assert all(set(row) == {"record", "store_path", "measure", "topic", "queue_id", "group", "value", "unit", "state"}
               and row["record"] == "check_measure" for row in rows.values())


def test_the_prometheus_file_reads_back(cut):
    store, r, prom = cut
    text = prom.read_text()
    assert [p.name for p in prom.parent.iterdir() if p.name != "store"] == ["check.prom"]  # no temp file left
    helps = set(re.findall(r"^# HELP (\S+) ", text, re.M))
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    samples = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.fullmatch(r'(rmqtool_check_[a-z_]+)\{((?:[a-z_]+="[^"]*",?)+)\} (-?[0-9.e+]+)', line)
        assert m, line
        labels = dict(re.findall(r'([a-z_]+)="([^"]*)"', m.group(2)))
        samples[(m.group(1), labels.get("topic"), labels.get("queue"))] = float(m.group(3))
        assert labels["store"] == str(store) and m.group(1) in helps and types[m.group(1)] == "gauge"
    rows = rows_of(r)
    for (measure, topic, qid, group), row in rows.items():
        if row["value"] is not None and group is None:
            assert samples[(f"rmqtool_check_{measure}", topic, None if qid is None else str(qid))] == row["value"]
    assert samples[("rmqtool_check_state", None, None)] == 2


def test_check_reads_tails_and_headers_only(monkeypatch):
    """Counted at the system calls: no commit log file but the last written one is read past its head."""
    opened, read = {}, {}
    real_open, real_pread, real_preadv = os.open, os.pread, os.preadv

    def counting_open(path, *a, **k):
        fd = real_open(path, *a, **k)
        opened[fd] = os.fspath(path)
        return fd

    def counting_pread(fd, n, pos):
        data = real_pread(fd, n, pos)
        read[opened.get(fd)] = read.get(opened.get(fd), 0) + len(data)
        return data

    def counting_preadv(fd, bufs, pos):
        got = real_preadv(fd, bufs, pos)
        read[opened.get(fd)] = read.get(opened.get(fd), 0) + got
        return got

    monkeypatch.setattr(os, "open", counting_open)
    monkeypatch.setattr(os, "pread", counting_pread)
    monkeypatch.setattr(os, "preadv", counting_preadv)
    result = run_check([BASIC / "store"], now=NOW)
    monkeypatch.undo()
    assert result.exit_code == 0
    segments = sorted((BASIC / "store" / "commitlog").iterdir())
    assert len(segments) > 3
    last = max(s for s in segments if s.stat().st_size and s.read_bytes()[:8] != bytes(8))
    for seg in segments:
        if seg != last:
            # heads (the recovery start rule, the version's first records, a dispatched record): never the file
            assert read.get(str(seg), 0) <= seg.stat().st_size // 8, (seg.name, read.get(str(seg)))


def test_a_held_stores_moving_tail_is_not_damage_but_the_same_tail_at_rest_is(tmp_path):
    """A running broker may be copying its next record: check on a held store judges only what
    lies before its last clean record; the same torn bytes in a store nobody holds are critical."""
    import subprocess
    import sys

    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.store import Store
    from test_live import SMALL, _tear_tail

    root = tmp_path / "store"
    store = Store.open(root, writable=True, **SMALL)
    try:
        results = [store.append(producer_message("LiveTopic", b"m%03d" % i * 20, keys=f"k{i}")) for i in range(30)]
        end = _tear_tail(root, results)
        held = subprocess.run([sys.executable, "-m", "rmqtool", "check", str(root), "--now", "0", "-f", "jsonl"],
                              capture_output=True, text=True, timeout=60)
    finally:
        store.close()
    rows = rows_of(held)
    assert held.returncode == 0, held.stdout
    assert rows[("tail_errors", None, None, None)]["value"] == 0
    assert rows[("written_end", None, None, None)]["value"] == end
    at_rest = run_check([root], now=0)
    assert at_rest.exit_code == 2 and "CRITICAL tail_errors=1" in at_rest.status_line()


def test_scripts_get_each_stores_state_and_why_one_could_not_be_read(tmp_path):
    """jsonl ends with a check_state row a store (the exit code's parts); an unreadable store
    has no measure, so its state row says why, and stderr says it too. A missing store and one
    whose lock is a directory gave exit 3 and nothing at all."""
    odd = writable_copy(BASIC / "store", tmp_path / "odd")
    (odd / "lock").unlink()
    (odd / "lock").mkdir()
    r = invoke(BASIC / "store", tmp_path / "gone", odd, "-f", "jsonl")
    assert r.exit_code == 3
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    states = [row for row in rows if row["record"] == "check_state"]
    assert [(s["store_path"], s["state"]) for s in states] == [
        (str(BASIC / "store"), "OK"), (str(tmp_path / "gone"), "UNKNOWN"), (str(odd), "UNKNOWN")]
    assert states[0]["unknown"] is None and "no such file or directory" in states[1]["unknown"]
    assert "a directory where the lock file should be" in states[2]["unknown"]
    assert {row["store_path"] for row in rows if row["record"] == "check_measure"} == {str(BASIC / "store")}
    assert r.stderr.splitlines() == [f"rmqtool: error: {states[1]['unknown']}", f"rmqtool: error: {states[2]['unknown']}"]


def test_a_made_ahead_segment_with_garbage_at_its_start_does_not_move_the_written_end(tmp_path):
    """A segment made ahead and never written, its first bytes overwritten: it holds no record,
    so the written end is where the records before it end, as info (and every command) gives
    it; check gave the garbage segment's base offset."""
    store = writable_copy(FIXTURES / "rocketmq-5.3.3" / "crash5" / "a-as-is" / "input" / "store", tmp_path / "store")
    last = sorted((store / "commitlog").iterdir())[-1]
    before = json.loads(cli_runner().invoke(app, ["info", str(store), "-f", "json"]).stdout)["commitlog"]["written_end"]
    assert before < int(last.name)  # made ahead: the records end in an earlier file
    with open(last, "r+b") as f:
        f.write(b"\x17\x2a\x00\x09")
    info = json.loads(cli_runner().invoke(app, ["info", str(store), "-f", "json"]).stdout)["commitlog"]
    r = invoke(store, "-f", "jsonl")
    assert rows_of(r)[("written_end", None, None, None)]["value"] == info["written_end"] == before


def test_queues_past_the_written_end_are_critical(tmp_path):
    """Units a queue holds past the written end (the crash lost what they name; the broker's
    next start drops them): check measured a lag of 0 and said OK, down to a store whose commit
    log files were all gone."""
    crash = V4 / "crash" / "b3-zeroed-last-3-messages"
    truth = json.loads((crash / "truth.json").read_text())
    lost = truth["diffVsPreCrash"]["lostFromCommitLog"]
    r = invoke(crash / "input" / "store", "-f", "jsonl")
    ahead = rows_of(r)[("dispatch_ahead_bytes", None, None, None)]
    written = truth["afterLoadBeforeStart"]["maxPhyOffset"]
    assert ahead["value"] == max(m["physicalOffset"] + m["storeSize"] for m in lost) - written
    assert ahead["state"] == "CRITICAL" and r.exit_code == 2
    store = writable_copy(BASIC / "store", tmp_path / "store")
    for f in (store / "commitlog").iterdir():
        f.unlink()
    gone = invoke(store)
    held = max(q["maxPhysicOffset"] for q in QUEUES.values())  # where the newest record a queue holds ends
    assert f"CRITICAL dispatch_ahead_bytes={held} " in gone.stdout and gone.exit_code == 2
    doc = json.loads(cli_runner().invoke(app, ["info", str(store), "-f", "json"]).stdout)
    info = doc["commitlog"]
    assert " written_end=0B " in gone.stdout and info["written_end"] == 0  # info said null: one answer now
    # getMaxPhyOffset after the start, which destroys every queue (info showed them whole)
    assert info["max_commit_log_offset"] == 0 and all(q["messages"] == 0 for q in doc["consume_queues"])
    clean_rows = rows_of(invoke(BASIC / "store", "-f", "jsonl"))
    assert clean_rows[("dispatch_ahead_bytes", None, None, None)]["value"] == 0


@pytest.mark.parametrize("damage", ["queue file grown", "stray file in commitlog/", "queue file emptied"])
def test_a_store_the_load_refuses_is_critical(damage, tmp_path):
    """Files the next start's load refuses (recovery/outcome.load_only: another size, a name
    that is no offset): the broker does not start, and check said OK (it reads tails). The
    measure agrees with recover's loadable."""
    store = writable_copy(BASIC / "store", tmp_path / "store")
    queue = store / "consumequeue" / "OrderTopic" / "1"
    first = sorted(queue.iterdir())[0]
    if damage == "queue file grown":
        first.write_bytes(first.read_bytes() + b"garbage")
    elif damage == "queue file emptied":
        first.write_bytes(b"")
    else:
        (store / "commitlog" / "README").write_text("not the broker's")
    r = invoke(store, "-f", "jsonl")
    plan = json.loads(cli_runner().invoke(app, ["recover", str(store), "-f", "json", "--semantics", "4.9"]).stdout)
    assert plan["loadable"] is False
    assert rows_of(r)[("load_refused", None, None, None)]["value"] == 1 and r.exit_code == 2
    assert "CRITICAL load_refused=1" in invoke(store).stdout


def test_a_store_the_load_takes_is_not_refused(clean):
    (store,) = clean.stores
    assert {r.measure: r.value for r in store.measures}["load_refused"] == 0


def test_a_store_a_repair_left_half_changed_is_critical(clean, tmp_path):
    """recover --apply killed half way: check said OK (exit 0), the "interrupted" line only on
    stderr, which a Nagios probe does not read; recover and verify exit 3 there. CRITICAL
    repair_unfinished=1 until the repair is finished."""
    import subprocess
    import sys
    from conftest import REPO
    (store,) = clean.stores
    assert {r.measure: r.value for r in store.measures}["repair_unfinished"] == 0
    root = writable_copy(V4 / "crash" / "b2-garbage-tail-of-last-message" / "input" / "store", tmp_path / "store")
    killed = subprocess.run([sys.executable, "-m", "rmqtool", "recover", str(root), "--apply"], capture_output=True,
                            env={**os.environ, "RMQTOOL_KILL_AFTER": "2", "PYTHONPATH": str(REPO)}, timeout=120)
    assert killed.returncode == -9
    r = invoke(root, "-f", "jsonl")
    assert rows_of(r)[("repair_unfinished", None, None, None)]["value"] == 1 and r.exit_code == 2
    assert rows_of(r)[("repair_unfinished", None, None, None)]["state"] == "CRITICAL"
    assert "CRITICAL" in invoke(root).stdout and "repair_unfinished=1" in invoke(root).stdout
    assert cli_runner().invoke(app, ["recover", str(root), "--apply"]).exit_code == 0
    assert rows_of(invoke(root, "-f", "jsonl"))[("repair_unfinished", None, None, None)]["value"] == 0


def test_a_prometheus_file_that_cannot_be_written_still_gives_the_status(tmp_path):
    """A directory that is not there, or a directory at the path: the status line is still
    printed, stderr says the failure in one line naming the path given (not the temporary
    file), and the exit is Nagios's: UNKNOWN, unless a store is CRITICAL (which outranks it)."""
    unflushed = NEWEST - CHECKPOINT["physicMsgTimestamp"]
    (tmp_path / "a-directory").mkdir()
    for prom, why in ((tmp_path / "no-dir" / "x.prom", "No such file or directory"),
                      (tmp_path / "a-directory", "Is a directory")):
        r = invoke(BASIC / "store", "--prometheus", prom)
        assert r.exit_code == 3, r.output
        assert r.stdout.startswith("RMQTOOL CHECK UNKNOWN - ") and len(r.stdout.splitlines()) == 1, r.stdout
        assert r.stderr == f"rmqtool: error: {prom}: cannot write the Prometheus file ({why})\n"
        crit = invoke(BASIC / "store", "--prometheus", prom, "--crit", f"unflushed_ms={unflushed}", "-f", "jsonl")
        assert crit.exit_code == 2 and rows_of(crit)[("unflushed_ms", None, None, None)]["state"] == "CRITICAL"
        assert crit.stderr == r.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["a-directory"] and not any((tmp_path / "a-directory").iterdir())


@pytest.mark.parametrize("option", [("--recovery-rate", "nan"), ("--recovery-rate", "inf"),
                                    ("--warn", "unflushed_ms=nan"), ("--crit", "recovery_seconds=nan"),
                                    ("--crit", "unflushed_ms=inf"), ("--warn", "disk_used_ratio=-inf")])
def test_nan_and_inf_are_bad_values_not_a_threshold_turned_off(option):
    """nan compares false with every value, inf is never reached (a rate of inf estimates 0 s):
    each would turn a threshold off without a word; each is a usage error in one line."""
    r = invoke(BASIC / "store", *option, "--crit", "recovery_seconds=0.001")
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert len(r.stderr.splitlines()) == 1 and option[0] in r.stderr, r.stderr
