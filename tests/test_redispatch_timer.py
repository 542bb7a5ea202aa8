"""rmqtool redispatch --timer: the timer log, wheel and timercheck rebuilt from the commit log.

Expected values come from the 5.3.3 fixtures' truth files: the pending set is the truth's
``notDelivered`` labels (timer/: at the clean stop; timer-crash/: at the halt, less what the
truncated commit log of variant e lost); after --apply the rebuilt files, read back with
rmqtool/store/timer, hold a chain per slot that ends at -1, every pending message on its
slot's chain and no delivered one; undo gives every file back byte for byte.
"""
from __future__ import annotations

import json
import subprocess
import sys
import pathlib

import pytest

from conftest import V5, load_truth
from helpers import cli_runner, expand_store, tree_fingerprint
from rmqtool.cli.app import app
from rmqtool.engine.store_sizes import OPTION, Size
from rmqtool.engine.timer_rebuild import build_timer
from rmqtool.errors import ExitCode
from rmqtool.formats.timerlog import MAGIC_DEFAULT, MAGIC_DELETE, MAGIC_ROLL, UNIT_SIZE
from rmqtool.store.timer.chain import END_MINUS_ONE, walk_chains
from rmqtool.store.timer.timercheck import read_timercheck
from rmqtool.store.timer.timerlog import END_BLANK, scan_timer_log
from rmqtool.store.timer.wheel import read_wheel
from rmqtool.store.view import open_store

CRASH = V5 / "timer-crash"
VARIANTS = sorted(p.name for p in CRASH.iterdir() if (p / "truth.json").is_file())
runner = cli_runner()


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _labels(outcomes: dict, outcome: str) -> set[str]:
    return {label for label, o in outcomes.items() if o.get("outcome") == outcome}


def _expected(variant: str | None) -> dict:
    """Pending, delivered and overdue labels from the truth. A truncated commit log (variant e)
    loses the messages whose timer records lie past its end, and makes overdue the delivered
    ones whose deliveries all lie past it (the read time passed them: not pending again)."""
    if variant is None:
        o = load_truth(V5 / "timer" / "truth.json")["outcomes"]
        return {"pending": _labels(o, "notDelivered"), "delivered": _labels(o, "delivered"),
                "recalled": _labels(o, "recalledNotDelivered"), "overdue": set(),
                "superseded": {lab for lab in o if o[lab].get("rolledRecords")}}
    o = load_truth(CRASH / "pre-crash-truth.json")["outcomesBeforeHalt"]
    cut = load_truth(CRASH / variant / "truth.json")["mutation"].get("cutAtCommitLogOffset")
    pending, delivered = _labels(o, "notDelivered"), _labels(o, "delivered")
    overdue = set()
    if cut is not None:
        pending = {lab for lab in pending if any(r < cut for r in o[lab]["timerRecords"])}
        overdue = {lab for lab in delivered if all(d[0] >= cut for d in o[lab]["deliveredRecords"])}
        delivered -= overdue
    return {"pending": pending, "delivered": delivered, "recalled": _labels(o, "recalledNotDelivered"),
            "overdue": overdue, "superseded": {lab for lab in o if o[lab].get("rolledRecords")}}


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    """Every store's plan (-f json), by name: timer/ and each timer-crash variant's input."""
    root = tmp_path_factory.mktemp("timer-plans")
    stores = {"timer": V5 / "timer" / "store"} | {v: CRASH / v / "input" / "store" for v in VARIANTS}
    out = {}
    for name, src in stores.items():
        store = expand_store(src, root / name)
        r = _run("redispatch", store, "--timer", "-f", "json")
        assert r.exit_code == ExitCode.CORRUPT, r.output  # the rebuilt files differ from the store's
        out[name] = (store, json.loads(r.stdout))
    return out


@pytest.mark.parametrize("name", ["timer", *VARIANTS])
def test_plan_pending_and_dropped_equal_the_truth(plans, name):
    _store, doc = plans[name]
    want = _expected(None if name == "timer" else name)
    t = doc["timer"]
    keys = lambda records: {r["keys"] for r in records}  # noqa: E731
    assert keys(t["pending"]) == want["pending"]
    assert keys(t["dropped"]["delivered"]) == want["delivered"]
    assert keys(t["dropped"]["recalled"]) == want["recalled"]
    assert keys(t["dropped"]["overdue"]) == want["overdue"]
    assert keys(t["dropped"]["superseded"]) == want["superseded"]
    fires = [r["fire_timestamp"] for r in t["pending"]]
    assert fires == sorted(fires)
    # a unit a pending message, plus at most the anchor at the timer queue's last record
    assert len(t["units"]) - sum(u["anchor"] for u in t["units"]) == len(t["pending"])
    assert doc["sizes"]["mapped_file_size_timer_log"]["taken_from"] == "files"


@pytest.fixture(scope="module")
def applied(plans, tmp_path_factory):
    """timer/, timer-crash b (looping chains) and e (units past the commit log end): the
    store's fingerprint before, --apply, the plan of a second run, undo, the fingerprint after."""
    out = {}
    root = tmp_path_factory.mktemp("timer-applied")
    for name in ("timer", "b-timerlog-tail-zeroed", "e-commitlog-truncated"):
        src, doc = plans[name]
        store = expand_store(src, root / name)  # a fresh copy: the plans' copies stay as they were
        (store / "lock").unlink(missing_ok=True)
        before = tree_fingerprint(store)
        damage = _damage(store)
        backup = root / f"{name}.backup"
        r = _run("redispatch", store, "--timer", "--apply", "--backup-dir", backup, "-f", "json")
        assert r.exit_code == 0, r.output
        read = (scan_timer_log(store / "timerlog"), read_wheel(store / "timerwheel"),
                read_timercheck(store / "config" / "timercheck"))
        again = _run("redispatch", store, "--timer")
        u = _run("undo", backup)
        assert u.exit_code == 0, u.output
        out[name] = (doc, read, again.exit_code, before, tree_fingerprint(store), damage, _damage(store, read))
    return out


def _damage(store: pathlib.Path, read=None) -> tuple[int, int]:
    """(chains of the wheel's slots not ending at -1, units pointing past the commit log's end)."""
    log, wheel = read[:2] if read else (scan_timer_log(store / "timerlog"), read_wheel(store / "timerwheel"))
    slots = wheel.slots
    chains = walk_chains(log, [s.last_pos for s in slots], slot_indexes=[s.index for s in slots])
    end = open_store(store).commit_log_end.end
    past = int(((log.columns["offset_py"] + log.columns["size_py"]) > end).sum())
    return sum(c.end != END_MINUS_ONE for c in chains), past


@pytest.mark.parametrize("name", ["timer", "b-timerlog-tail-zeroed", "e-commitlog-truncated"])
def test_applied_timer_reads_back_sound_and_undo_restores(applied, name):
    doc, (log, wheel, check), again, before, after, damage_before, damage_after = applied[name]
    t = doc["timer"]
    # b: chains into the zeroed tail; e: units past the commit log end; the rebuilt timer has neither
    assert damage_before[0] > 0 if name.startswith("b-") else damage_before[1] > 0 if name.startswith("e-") else True
    assert damage_after == (0, 0)
    # the units and slots the plan showed, read back
    assert [int(p) for p in log.columns["position"]] == [u["timer_log_offset"] for u in t["units"]]
    assert [int(p) for p in log.columns["prev_pos"]] == [u["prev_timer_log_offset"] for u in t["units"]]
    assert [int(m) for m in log.columns["magic"]] == [u["magic"] for u in t["units"]]
    slots = wheel.slots
    assert [(s.index, s.time_value, s.first_pos, s.last_pos, s.num) for s in slots] == \
        [(s["slot_index"], s["time_value"], s["first_timer_log_offset"], s["last_timer_log_offset"], s["num"])
         for s in t["slots"]]
    chains = walk_chains(log, [s.last_pos for s in slots], slot_indexes=[s.index for s in slots])
    assert all(c.end == END_MINUS_ONE for c in chains)  # no loop, nothing past the log
    assert all(c.units_of_other_slots == 0 for c in chains)
    assert sum(len(c.positions) for c in chains) == len(t["units"])  # each unit on one chain, once
    assert all(p < log.readable_end for c in chains for p in c.positions)
    for c, s in zip(chains, slots):
        assert c.positions[-1] == s.first_pos and len(c.positions) == abs(s.num)
    # the chains dequeue will read (slots at or after the read time): every pending message, nothing delivered
    ahead = [c for c, s in zip(chains, slots) if s.time_ms >= check.last_read_time_ms]
    on_chains = {int(log.columns["offset_py"][log.row_of(p)]) for c in ahead for p in c.positions}
    assert on_chains == {r["commit_log_offset"] for r in t["pending"]}
    # only the anchor (a delete, dequeue never reads its slot again) may point at a non-pending record
    for u in t["units"]:
        assert u["magic"] == (MAGIC_DELETE if u["anchor"] else MAGIC_DEFAULT)
        if u["anchor"]:
            assert u["deliver_timestamp"] < check.last_read_time_ms
    assert (check.last_read_time_ms, check.last_timer_log_flush_pos) == (t["write_timestamp"], t["timer_log_end"])
    assert check.last_timer_queue_offset == check.master_timer_queue_offset == t["timer_queue_offset"]
    assert again == 0  # a second run finds every file as built
    assert after == before  # undo: every file back, byte for byte


def test_units_that_do_not_fit_a_file_leave_a_blank(plans, tmp_path):
    store, _doc = plans["timer"]
    size = 5 * UNIT_SIZE + 30  # 5 units (the 5th: 82 bytes left, a unit + 16 fit), then a 30-byte blank
    built = build_timer(open_store(store), tmp_path / "built", file_size=Size(size, OPTION, "test"))
    lay = built.layout
    assert lay.blanks and all(p % size == 5 * UNIT_SIZE and n == 30 for p, n in lay.blanks)
    assert all(u.position % size + UNIT_SIZE + 16 <= size for u in lay.units)
    log = scan_timer_log(tmp_path / "built" / "timerlog")
    assert [int(p) for p in log.columns["position"]] == [u.position for u in lay.units]
    assert [b.position for b in log.blanks] == [p for p, _n in lay.blanks]
    assert all(f.end_reason == END_BLANK for f in log.files[:-1])


def test_timer_goes_alone(plans):
    store, _doc = plans["timer"]
    r = _run("redispatch", store, "--timer", "--cq")
    assert r.exit_code == ExitCode.USAGE


def test_units_roll_as_do_enqueue_with_the_brokers_window(plans, tmp_path):
    """With the fixture broker's timerRollWindowSlot (truth's messageStoreConfig, given as
    broker.conf), a deliver time a window or more after the write time gets MAGIC_ROLL and goes
    to write + window, or + window/2 when the excess is below window/3 (doEnqueue)."""
    store, _doc = plans["timer"]
    config = load_truth(V5 / "timer" / "truth.json")["messageStoreConfig"]["effectiveGetterValues"]
    window, precision = config["timerRollWindowSlot"], config["timerPrecisionMs"]
    conf = tmp_path / "broker.conf"
    conf.write_text(f"timerRollWindowSlot={window}\nmappedFileSizeTimerLog={config['mappedFileSizeTimerLog']}\n")
    r = _run("redispatch", store, "--timer", "--broker-config", conf, "-f", "json")
    assert r.exit_code == ExitCode.CORRUPT, r.output
    t = json.loads(r.stdout)["timer"]
    assert t["settings"]["timer_roll_window_slot"]["value"] == window
    fire = {r["commit_log_offset"]: r["fire_timestamp"] for r in t["pending"]}
    write, rolled = t["write_timestamp"], 0
    for u in t["units"]:
        if u["anchor"]:
            continue
        excess = fire[u["commit_log_offset"]] - write - window * precision
        if excess >= 0:
            rolled += 1
            assert u["magic"] == MAGIC_DEFAULT | MAGIC_ROLL
            steps = window // 2 if excess < window // 3 * precision else window
            assert u["deliver_timestamp"] == write + steps * precision
        else:
            assert u["magic"] == MAGIC_DEFAULT and u["deliver_timestamp"] == max(fire[u["commit_log_offset"]], write)
    assert rolled  # r1/r2 roll at this window, as they did in the fixture's run
    conf.write_text("mappedFileSizeTimerLog=4096\n")  # the store's files show 2048
    assert _run("redispatch", store, "--timer", "--broker-config", conf).exit_code == ExitCode.USAGE


def test_a_plan_without_settings_takes_the_broker_config_given_for_the_store(tmp_path):
    """plan_timer(view) reads the timer settings as the read side does: from the broker config
    given for the store (``--broker-config``), not the defaults, when none are passed."""
    from rmqtool.engine.timer_rebuild import plan_timer
    from rmqtool.store.broker_conf import given_config, read_broker_config

    config = load_truth(V5 / "timer" / "truth.json")["messageStoreConfig"]["effectiveGetterValues"]
    store = expand_store(V5 / "timer" / "store", tmp_path / "store")
    conf = tmp_path / "broker.conf"
    conf.write_text(f"timerPrecisionMs={config['timerPrecisionMs'] // 2}\n"
                    f"timerRollWindowSlot={config['timerRollWindowSlot']}\n")
    with given_config(store, read_broker_config(conf)):
        settings = plan_timer(open_store(store)).settings
    assert settings.precision_ms.value == config["timerPrecisionMs"] // 2
    assert settings.roll_window.value == config["timerRollWindowSlot"]
    assert settings.roll_window.shown_by.startswith(str(conf))


def test_a_wheel_of_another_precision_is_read_with_the_broker_config_given(tmp_path):
    """The wheel holds fire times divided by timerPrecisionMs, which no file shows: rebuilt for a
    broker of 500 ms, info, verify and recover given its config read it as that broker does
    (they read it at 1000: no message pending, and every slot "revised" by a clean start)."""
    config = load_truth(V5 / "timer" / "truth.json")["messageStoreConfig"]["effectiveGetterValues"]
    precision = config["timerPrecisionMs"] // 2
    store = expand_store(V5 / "timer" / "store", tmp_path / "store")
    conf = tmp_path / "broker.conf"
    conf.write_text(f"timerPrecisionMs={precision}\ntimerRollWindowSlot={config['timerRollWindowSlot']}\n"
                    f"mappedFileSizeTimerLog={config['mappedFileSizeTimerLog']}\n")
    r = _run("redispatch", store, "--timer", "--apply", "--broker-config", conf, "--backup-dir", tmp_path / "b",
             "-f", "json")
    assert r.exit_code == 0, r.output
    pending = len(_expected(None)["pending"])
    info = json.loads(_run("info", store, "--broker-config", conf, "-f", "json").stdout)["timer"]
    assert info["pending_messages"] == pending and info["next_fire_timestamp"] % precision == 0
    verify = _run("verify", store, "--broker-config", conf, "-f", "jsonl")
    state = [json.loads(line) for line in verify.stdout.splitlines() if '"timerState"' in line]
    assert len(state) == 1 and state[0]["message"].startswith(f"{pending} pending timer message(s)")
    plan = json.loads(_run("recover", store, "--broker-config", conf, "-f", "json").stdout)
    assert plan["timer"]["slots_revised"] == []


def test_every_plan_field_is_documented(plans):
    from test_vocabulary import documented, keys_of

    names, suffixes = documented()
    _store, doc = plans["timer"]
    missing = sorted(f for f in keys_of(doc, set()) if f not in names and not any(f.endswith(s) for s in suffixes))
    assert not missing, f"not in docs/vocabulary.md: {missing}"


def test_a_lost_timer_log_is_rebuilt_in_the_default_size_only_when_assumed(tmp_path):
    """No timer log file shows mappedFileSizeTimerLog: the plan says the broker's default, and
    --apply refuses (exit 2, nothing changed) until --assume-defaults."""
    store = expand_store(V5 / "timer" / "store", tmp_path / "s")
    (store / "lock").unlink(missing_ok=True)
    for p in (store / "timerlog").iterdir():
        p.unlink()
    before = tree_fingerprint(store)
    r = _run("redispatch", store, "--timer", "--apply", "-f", "json")
    assert r.exit_code == ExitCode.USAGE and tree_fingerprint(store) == before
    doc = json.loads(r.stdout)
    assert doc["sizes"]["mapped_file_size_timer_log"]["taken_from"] == "default"
    assert doc["sizes_unknown"] == ["mapped_file_size_timer_log"]
    r = _run("redispatch", store, "--timer", "--apply", "--assume-defaults", "--backup-dir", tmp_path / "b")
    assert r.exit_code == 0, r.output
    files = list((store / "timerlog").iterdir())
    assert [p.stat().st_size for p in files] == [doc["sizes"]["mapped_file_size_timer_log"]["value"]]
    assert [int(p) for p in scan_timer_log(store / "timerlog").columns["position"]] == \
        [u["timer_log_offset"] for u in doc["timer"]["units"]]


def test_a_store_without_timer_messages_is_refused_and_a_held_store_is_not_changed(tmp_path):
    plain = expand_store(V5 / "v2-and-crc" / "store", tmp_path / "plain")
    before = tree_fingerprint(plain)
    r = _run("redispatch", plain, "--timer", "--apply")
    assert r.exit_code == ExitCode.USAGE and tree_fingerprint(plain) == before  # no timer files made up
    store = expand_store(V5 / "timer" / "store", tmp_path / "s")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time; f = open(sys.argv[1], 'r+b'); fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB); "
        "print('held', flush=True); time.sleep(60)"), str(store / "lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = tree_fingerprint(store)
        r = _run("redispatch", store, "--timer", "--apply", "--backup-dir", tmp_path / "b")
        assert r.exit_code == ExitCode.LOCKED, r.output
        assert tree_fingerprint(store) == before
    finally:
        holder.kill()
        holder.wait()
