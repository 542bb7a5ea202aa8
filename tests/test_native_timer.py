"""The native kernel's timer part (rmqtool/native/timer.c) against the pure paths it copies and
the fixtures' truth: the timer log's units unpacked (timerlog.leading_units), the chains' walk
(chain.walk_chain_set), REAL_TOPIC's sure hash (records.real_topic_hashes) and so the units
that point at their own record (records.plain_units); then verify's timer findings, JSON and
exit code, on the timer stores, the timer-crash variants and a damaged copy, with the kernel
and without it (``native.kernel`` None in process, ``RMQTOOL_NATIVE=0`` for a CLI run).
Without a built kernel both sides take the pure path (and still hold against the truth)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO, V5, load_truth
from helpers import cli_runner, examples, expand_store, kernel_and_pure
from rmqtool import native
from rmqtool.formats.indexfile import java_string_hash
from rmqtool.formats.properties import (NAME_VALUE_SEPARATOR, PROPERTY_REAL_TOPIC, PROPERTY_SEPARATOR,
                                        bytes_to_properties)
from rmqtool.formats.timerlog import UNIT_SIZE
from rmqtool.store.timer import records
from rmqtool.store.timer.chain import walk_chain_set
from rmqtool.store.timer.timerlog import leading_units, read_file, scan_timer_log
from rmqtool.store.timer.wheel import read_wheel

pytestmark = pytest.mark.usefixtures("native_built")

KERNEL = native.kernel
CRASH = V5 / "timer-crash"
CASES = {"timer": (V5 / "timer", "store")}
CASES.update({v.name: (v, "input/store") for v in sorted(CRASH.iterdir()) if (v / "truth.json").is_file()})
PRECISION_MS = 1000  # the fixtures' timerPrecisionMs (the broker's default)


def _clock(truth: dict) -> int:
    after = truth["timerAfterLoad"]["state"] if "timerAfterLoad" in truth else truth["reload"]["timerAfterLoad"]
    return after["fakeNowMs"]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Each timer store expanded once, with its clock; and a damaged copy of timer/: one record's
    REAL_TOPIC value changed (its unit no longer plain), one pending unit's prevPos its own position."""
    root = tmp_path_factory.mktemp("native-timer")
    out = {}
    for name, (source, sub) in CASES.items():
        truth = load_truth(source / "truth.json")
        out[name] = expand_store(source / sub, root / name), _clock(truth)
    truth = load_truth(V5 / "timer" / "truth.json")
    damaged = expand_store(V5 / "timer" / "store", root / "damaged")
    units = truth["timer"]["timerLogUnits"]
    u = units[5]
    commit_log = sorted((damaged / "commitlog").iterdir())[0]
    raw = bytearray(commit_log.read_bytes())
    at = raw.index(b"REAL_TOPIC\x01", u["offsetPy"], u["offsetPy"] + u["sizePy"]) + len("REAL_TOPIC\x01")
    raw[at] ^= 0x20  # a letter's case: the value's hash changes, the record stays whole
    commit_log.write_bytes(raw)
    size = truth["timer"]["timerLogFiles"][0]["fileSize"]
    read_ms = truth["timer"]["timercheck"]["lastReadTimeMs"]
    u = next(u for u in units if u["delayedTimeAbsolute"] >= read_ms)  # a pending unit: dequeue walks its chain
    log_file = damaged / "timerlog" / f"{u['position'] - u['position'] % size:020d}"
    raw = bytearray(log_file.read_bytes())
    rel = u["position"] % size
    raw[rel + 4:rel + 12] = u["position"].to_bytes(8, "big", signed=True)  # prevPos: itself, a loop
    log_file.write_bytes(raw)
    out["damaged"] = damaged, _clock(truth)
    return out


def test_units_and_chains_both_ways_equal_truth(stores):
    truth = load_truth(V5 / "timer" / "truth.json")["timer"]
    store, _ = stores["timer"]
    logs = kernel_and_pure(lambda: scan_timer_log(store / "timerlog"))
    assert logs[0].columns.tobytes() == logs[1].columns.tobytes()
    cols = logs[0].columns
    want = truth["timerLogUnits"]
    for name, key in (("position", "position"), ("prev_pos", "prevPos"), ("magic", "magic"),
                      ("curr_write_time", "currWriteTime"), ("delayed_time", "delayedTime"),
                      ("offset_py", "offsetPy"), ("size_py", "sizePy"),
                      ("hash_code_of_real_topic", "hashCodeOfRealTopic")):
        assert cols[name].tolist() == [u[key] for u in want], name
    used = read_wheel(store / "timerwheel", PRECISION_MS).used
    walked = kernel_and_pure(lambda: list(walk_chain_set(logs[0], used["last_pos"], slot_indexes=used["index"],
                                                         precision_ms=PRECISION_MS)))
    assert walked[0] == walked[1]
    by_index = {c["index"]: c for c in truth["chains"]}
    for index, chain in zip(used["index"].tolist(), walked[0]):
        assert (list(chain.positions), chain.end) == (by_index[index]["chain"], by_index[index]["end"])


def test_plain_units_both_ways_equal_truth(stores):
    for name in ("timer", "damaged"):
        store, _ = stores[name]
        cols = scan_timer_log(store / "timerlog").columns
        plain = kernel_and_pure(lambda: records.plain_units(
            store, cols["offset_py"], cols["size_py"], cols["hash_code_of_real_topic"], 0, 1 << 40))
        assert plain[0].tolist() == plain[1].tolist()
        units = load_truth(V5 / "timer" / "truth.json")["timer"]["timerLogUnits"]
        want = [u["commitLogRecord"]["topic"] == "rmq_sys_wheel_timer" and u["commitLogRecord"]["sizeMatches"]
                and u["commitLogRecord"]["realTopicHashMatches"] for u in units]
        if name == "damaged":
            want[5] = False  # its record's REAL_TOPIC changed
        assert plain[0].tolist() == want


def test_damaged_chain_both_ways(stores):
    store, _ = stores["damaged"]
    log = scan_timer_log(store / "timerlog")
    used = read_wheel(store / "timerwheel", PRECISION_MS).used

    def walk():
        log._cache.clear()
        return list(walk_chain_set(log, used["last_pos"], slot_indexes=used["index"], read_end=log.log_end,
                                   precision_ms=PRECISION_MS))
    walked = kernel_and_pure(walk)
    assert walked[0] == walked[1]
    assert any(c.end == "loop" for c in walked[0])  # the forward step makes its chain loop


def _verify_json(store, clock) -> tuple[int, str]:
    from rmqtool.cli.app import app
    r = cli_runner().invoke(app, ["verify", str(store), "--only", "timer", "--jobs", "1", "--no-progress",
                                  "--format", "json", "--now", str(clock)])
    return r.exit_code, r.stdout


def test_verify_both_ways_and_cli_without_kernel(stores):
    for name, (store, clock) in stores.items():
        both = kernel_and_pure(lambda: _verify_json(store, clock))
        assert both[0] == both[1], name
        assert both[0][0] in (0, 3), name
        if name == "damaged":
            found = json.loads(both[0][1])
            ids = {f["finding"] for f in (found if isinstance(found, list) else found["findings"])}
            assert {"timerUnitRecordMismatch", "timerChainLoops"} <= ids
    store, clock = stores["damaged"]
    env = dict(os.environ, RMQTOOL_NATIVE="0", PYTHONPATH=str(REPO))
    run = subprocess.run([sys.executable, "-m", "rmqtool", "verify", str(store), "--only", "timer", "--jobs", "1",
                          "--no-progress", "--format", "json", "--now", str(clock)], capture_output=True, text=True,
                         env=env)
    assert (run.returncode, run.stdout) == _verify_json(store, clock)


_NAMES = st.sampled_from([PROPERTY_REAL_TOPIC, "REAL_QID", "UNIQ_KEY", "XREAL_TOPIC", "REAL_TOPICS", ""])
_VALUES = st.lists(st.sampled_from(["a", "B", "_", "%", NAME_VALUE_SEPARATOR, "\u00e9", "REAL_TOPIC"]),
                   max_size=6).map("".join)


@settings(max_examples=examples(40), deadline=None)
@given(entries=st.lists(st.tuples(_NAMES, _VALUES, st.booleans()), max_size=5), trailing=st.booleans(),
       cut=st.integers(0, 4))
def test_real_topic_hashes_sure_and_as_the_pure_reading(entries, trailing, cut):
    """On properties strings of every shape: where the kernel is sure, its hash is the one the
    broker's reading gives, and it is sure exactly where the pure sure reading is."""
    text = PROPERTY_SEPARATOR.join(n + (NAME_VALUE_SEPARATOR if sep else "") + v for n, v, sep in entries)
    raw = (text + (PROPERTY_SEPARATOR if trailing else "")).encode("utf-8")
    buf = b"\x02\x00" + raw + b"REAL_TO"  # bytes around the range, as a window has them
    starts = np.array([2], np.int64)
    ends = np.array([2 + max(0, len(raw) - cut)], np.int64)
    expected = np.zeros(1, np.int64)
    pure = records._real_topic_hashes(buf, starts, ends, {}, expected)
    if KERNEL is not None:
        codes, known = np.empty(1, np.int64), np.empty(1, bool)
        KERNEL.real_topic_hashes(buf, starts, ends, records._REAL_TOPIC_ENTRY, ord(PROPERTY_SEPARATOR),
                                 ord(NAME_VALUE_SEPARATOR), codes, known)
        assert known.tolist() == pure[1].tolist()
        assert codes[known].tolist() == pure[0][pure[1]].tolist()
    if pure[1][0]:
        real = bytes_to_properties(buf[2:int(ends[0])])[0].get(PROPERTY_REAL_TOPIC)
        assert real is not None and java_string_hash(real) == pure[0][0]


@settings(max_examples=examples(20), deadline=None)
@given(data=st.data())
def test_units_unpacked_both_ways_on_damaged_bytes(stores, data):
    store, _ = stores["timer"]
    raw = bytearray(read_file(sorted((store / "timerlog").iterdir())[0]))
    for _ in range(data.draw(st.integers(0, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    count = data.draw(st.integers(0, len(raw) // UNIT_SIZE))
    got = kernel_and_pure(lambda: leading_units(memoryview(raw)[:count * UNIT_SIZE], 4096, count))
    assert got[0].tobytes() == got[1].tobytes()


@settings(max_examples=examples(15), deadline=None)
@given(data=st.data())
def test_chains_both_ways_on_damaged_links(stores, data):
    """Chains through prevPos values made up (back, forward, onto themselves, nowhere): walked by
    the kernel, batch by batch, as by the array walk and walk_chain."""
    store, _ = stores["timer"]
    log = scan_timer_log(store / "timerlog")
    positions = log.columns["position"].tolist()
    for _ in range(data.draw(st.integers(1, 6))):
        row = data.draw(st.integers(0, len(positions) - 1))
        log.columns["prev_pos"][row] = data.draw(st.one_of(st.sampled_from(positions), st.just(-1),
                                                           st.integers(-100, positions[-1] + 200)))
    used = read_wheel(store / "timerwheel", PRECISION_MS).used
    read_end = data.draw(st.one_of(st.none(), st.sampled_from(positions)))

    def walk():
        log._cache.clear()
        return list(walk_chain_set(log, used["last_pos"], slot_indexes=used["index"], read_end=read_end,
                                   precision_ms=PRECISION_MS))
    walked = kernel_and_pure(walk)
    assert walked[0] == walked[1]
