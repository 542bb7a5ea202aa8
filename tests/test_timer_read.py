"""The timer store's read side (rmqtool.store.timer) against the real 5.3.3 engine's reads.

Every timer log unit and blank, every used wheel slot, every chain, timercheck and
timermetrics field of fixtures/rocketmq-5.3.3/timer and of each timer-crash variant (the
files before the engine's load, ``onDiskBeforeLoad``, and after its run, ``onDiskAfterShutdown``)
equals truth.json. Fixture stores are kept trimmed; each is expanded once a module.
"""
from __future__ import annotations

import pathlib

import pytest

from conftest import V5, load_truth
from helpers import copy_tree, expand_store
from rmqtool.formats.timerlog import BLANK_MAGIC_CODE, MAGIC_DEFAULT, MAGIC_DELETE, MAGIC_ROLL, is_magic_ok
from rmqtool.formats.timerwheel import SLOT_SIZE, SLOTS_TOTAL, slot_index, wheel_length
from rmqtool.store.timer.chain import walk_chain, walk_chains
from rmqtool.store.timer.files import find_timer_store
from rmqtool.store.timer.timercheck import read_timercheck
from rmqtool.store.timer.timerlog import scan_timer_log
from rmqtool.store.timer.timermetrics import read_timermetrics
from rmqtool.store.timer.wheel import read_wheel

TIMER = V5 / "timer"
CRASH = V5 / "timer-crash"
VARIANTS = sorted(p.name for p in CRASH.iterdir() if (p / "truth.json").is_file())
# (fixture dir, store under it, the truth's part that describes that store's timer files)
CASES = [("timer", TIMER, "store", ("timer",))]
CASES += [(f"{v}/input", CRASH / v, "input/store", ("onDiskBeforeLoad", "timer")) for v in VARIANTS]
CASES += [(f"{v}/expected", CRASH / v, "expected/store", ("onDiskAfterShutdown", "timer")) for v in VARIANTS]


def _truth_part(case_dir: pathlib.Path, keys: tuple[str, ...]) -> dict:
    part = load_truth(case_dir / "truth.json")
    for key in keys:
        part = part[key]
    return part


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Every case's store expanded once (sparse wheel), by case name."""
    root = tmp_path_factory.mktemp("timer-stores")
    return {name: expand_store(case_dir / sub, root / name.replace("/", "-"))
            for name, case_dir, sub, _ in CASES}


def _truth_end(end: str) -> tuple[str, int | None]:
    """The truth's chain end ("minusOne", "loop", "badUnitAt4772", ...) as (end, position)."""
    for prefix, name in (("badUnitAt", "badUnit"), ("beyondReadPositionAt", "beyondReadPosition")):
        if end.startswith(prefix):
            return name, int(end[len(prefix):])
    return end, None


def test_constants_are_the_engines():
    assert wheel_length(SLOTS_TOTAL) == 38_707_200 and SLOT_SIZE == 32
    assert BLANK_MAGIC_CODE == -875286124 and (MAGIC_DEFAULT, MAGIC_ROLL, MAGIC_DELETE) == (1, 2, 4)
    assert is_magic_ok(7) and not is_magic_ok(BLANK_MAGIC_CODE) and not is_magic_ok(16)
    assert slot_index(-1500, 1000, 10) == -1  # Java's % keeps the sign


@pytest.mark.parametrize("name,case_dir,sub,keys", CASES, ids=[c[0] for c in CASES])
def test_timer_files_equal_truth(stores, name, case_dir, sub, keys):
    truth = _truth_part(case_dir, keys)
    timer = find_timer_store(stores[name])
    assert (timer.wheel is not None, timer.timercheck is not None, timer.timermetrics is not None) == (
        truth["timerwheelExists"], truth["timercheckExists"], truth["timermetricsExists"])

    # the wheel: every used slot
    wheel = read_wheel(timer.wheel)
    assert wheel.file_size == truth["wheelFileSize"] == wheel.expected_size
    assert wheel.slot_count == 2 * SLOTS_TOTAL
    slots = wheel.slots
    assert [dict(index=s.index, timeMs=s.time_ms, storedTimeValue=s.time_value, firstPos=s.first_pos,
                 lastPos=s.last_pos, num=s.num, magic=s.magic, indexMatchesTime=s.index_matches_time)
            for s in slots] == truth["wheelSlots"]
    assert [slots[0].index, slots[-1].index] == truth["wheelUsedIndexRange"]

    # the timer log: files, units, blanks
    log = scan_timer_log(timer.timer_log_dir)
    assert [dict(file=f.name, fileFromOffset=f.base_offset, fileSize=log.file_size, scanEnd=f.end,
                 scanEndReason=f.end_reason, nonZeroBytesAfterScanEnd=f.non_zero_after_end) for f in log.files] == [
        {k: f[k] for k in ("file", "fileFromOffset", "fileSize", "scanEnd", "scanEndReason",
                           "nonZeroBytesAfterScanEnd")} for f in truth["timerLogFiles"]]
    fields = ("position", "size", "prevPos", "magic", "magicFlags", "isMagicOK", "currWriteTime", "delayedTime",
              "delayedTimeAbsolute", "offsetPy", "sizePy", "hashCodeOfRealTopic", "reserved", "slotIndex")
    assert [dict(zip(fields, (u.position, u.size, u.prev_pos, u.magic, u.magic_flags, u.is_magic_ok,
                              u.curr_write_time, u.delayed_time, u.deliver_time_ms, u.offset_py, u.size_py,
                              u.hash_code_of_real_topic, u.reserved, u.slot_index()))) for u in log.units] == [
        {k: u[k] for k in fields} for u in truth["timerLogUnits"]]
    assert [dict(position=b.position, size=b.size, prevPos=b.prev_pos, magic=b.magic) for b in log.blanks] == \
        truth["timerLogBlanks"]

    # the chains, as dequeue walks them from each used slot's lastPos
    by_index = {s.index: s for s in slots}
    for chain_truth in truth["chains"]:
        slot = by_index[chain_truth["index"]]
        assert slot.time_ms == chain_truth["timeMs"]
        chain = walk_chain(log, slot.last_pos, slot_index=slot.index)
        end, at = _truth_end(chain_truth["end"])
        assert (list(chain.positions), chain.end, chain.loops_back_to, chain.units_of_other_slots) == (
            chain_truth["chain"], end, chain_truth["loopsBackTo"], chain_truth["unitsOfOtherSlots"]), slot.index
        if at is not None:
            assert chain.end_position == at
    assert len(truth["chains"]) == len(slots)
    assert walk_chains(log, [s.last_pos for s in slots], slot_indexes=[s.index for s in slots]) == [
        walk_chain(log, s.last_pos, slot_index=s.index) for s in slots]

    # timercheck
    if truth["timercheck"] is None:
        assert timer.timercheck is None
    else:
        check = read_timercheck(timer.timercheck)
        assert check.file_size == truth["timercheckFileSize"]
        assert dict(lastReadTimeMs=check.last_read_time_ms, lastTimerLogFlushPos=check.last_timer_log_flush_pos,
                    lastTimerQueueOffset=check.last_timer_queue_offset,
                    masterTimerQueueOffset=check.master_timer_queue_offset,
                    dataVersionStateVersion=check.data_version_state_version,
                    dataVersionTimestamp=check.data_version_timestamp,
                    dataVersionCounter=check.data_version_counter) == truth["timercheck"]

    # timermetrics, as TimerMetrics.load reads it
    loaded = read_timermetrics(timer.config_dir)
    assert (loaded.metrics is not None) == truth["timermetricsLoad"]
    m = loaded.metrics
    assert dict(timingCount={t.topic: dict(count=t.count, timeStamp=t.time_stamp) for t in m.timing_count},
                dataVersionStateVersion=m.data_version_state_version, dataVersionTimestamp=m.data_version_timestamp,
                dataVersionCounter=m.data_version_counter) == truth["timermetrics"]
    assert timer.timermetrics.read_text() == truth["timermetricsText"]
    assert timer.timermetrics_bak.read_text() == truth["timermetricsBakText"]


def test_after_recover_chains_end_beyond_the_read_position(stores):
    """b: recover cut the log at the first zeroed unit; the slots still pointing past it end there."""
    truth = load_truth(CRASH / "b-timerlog-tail-zeroed" / "truth.json")
    timer = find_timer_store(stores["b-timerlog-tail-zeroed/input"])
    log = scan_timer_log(timer.timer_log_dir)
    wheel = read_wheel(timer.wheel)
    cut = log.readable_end
    assert (cut, log.end_reason) == (truth["onDiskBeforeLoad"]["timer"]["timerLogFiles"][-1]["scanEnd"], "zeroUnit")
    by_index = {s.index: s for s in wheel.slots}
    for chain_truth in truth["timerAfterLoad"]["chains"]:
        end, at = _truth_end(chain_truth["end"])
        if end != "beyondReadPosition":
            continue
        chain = walk_chain(log, by_index[chain_truth["index"]].last_pos, read_end=cut)
        assert (list(chain.positions), chain.end, chain.end_position) == (chain_truth["chain"], end, at)


def test_bak_stands_in_for_a_missing_timermetrics(stores, tmp_path):
    config = tmp_path / "config"
    copy_tree(stores["timer"] / "config", config)
    (config / "timermetrics").unlink()
    loaded = read_timermetrics(config)
    assert loaded.config.source == "bak" and loaded.metrics is not None
    (config / "timermetrics.bak").unlink()
    assert read_timermetrics(config).metrics is None


# --- the dump commands ----------------------------------------------------------------------

def _jsonl(*args) -> tuple[int, list[dict], str]:
    import json

    from typer.testing import CliRunner

    from rmqtool.cli.app import app
    r = CliRunner().invoke(app, [str(a) for a in args] + ["--format", "jsonl"])
    return r.exit_code, [json.loads(line) for line in r.stdout.splitlines() if line.strip()], r.stderr


def test_dump_commands_show_the_truth(stores):
    store = stores["timer"]
    truth = load_truth(TIMER / "truth.json")["timer"]
    code, units, _ = _jsonl("dump", "timerlog", store)
    assert code == 0
    assert [(r["record"], r["timer_log_offset"], r["prev_timer_log_offset"], r["magic"], r["magic_flags"],
             r["commit_log_offset"], r["size"], r["write_timestamp"], r["deliver_timestamp"],
             r["real_topic_hash"], r["slot_index"], r["file_position"]) for r in units] == [
        ("unit", u["position"], u["prevPos"], u["magic"], u["magicFlags"], u["offsetPy"], u["sizePy"],
         u["currWriteTime"], u["delayedTimeAbsolute"], u["hashCodeOfRealTopic"], u["slotIndex"],
         u["position"] % 2048) for u in truth["timerLogUnits"]]
    assert [pathlib.Path(r["file"]).name for r in units] == [
        f"{u['position'] - u['position'] % 2048:020d}" for u in truth["timerLogUnits"]]

    code, pointed, _ = _jsonl("dump", "timerlog", store, "--records")
    assert code == 0 and [(r["record_topic"], r["real_topic"], r["uniq_key"], r["keys"], r["record_error"])
                          for r in pointed] == [
        (u["commitLogRecord"]["topic"], u["commitLogRecord"]["realTopic"], u["commitLogRecord"]["uniqKey"],
         [] if u["commitLogRecord"]["label"].startswith("recall:") else [u["commitLogRecord"]["label"]], None)
        for u in truth["timerLogUnits"]]  # a recall's record has no KEYS (truth labels it by what it recalls)

    code, blanks, _ = _jsonl("dump", "timerlog", store / "timerlog" / "00000000000000002048", "--show-blank")
    assert code == 0 and blanks[-1]["record"] == "blank"
    assert (blanks[-1]["timer_log_offset"], blanks[-1]["unit_size"]) == (truth["timerLogBlanks"][1]["position"],
                                                                       truth["timerLogBlanks"][1]["size"])
    assert all(2048 <= r["timer_log_offset"] < 4096 for r in blanks)

    code, slots, _ = _jsonl("dump", "timerwheel", store)
    assert code == 0
    assert [(r["slot_index"], r["slot_timestamp"], r["time_value"], r["first_timer_log_offset"],
             r["last_timer_log_offset"], r["num"], r["magic"], r["file_position"]) for r in slots] == [
        (s["index"], s["timeMs"], s["storedTimeValue"], s["firstPos"], s["lastPos"], s["num"], s["magic"],
         s["index"] * 32) for s in truth["wheelSlots"]]

    code, (check,), _ = _jsonl("dump", "timercheck", store)
    t = truth["timercheck"]
    assert code == 0 and (check["last_read_timestamp"], check["last_timer_log_flush_offset"],
                          check["last_timer_queue_offset"], check["master_timer_queue_offset"],
                          check["data_version_counter"]) == (
        t["lastReadTimeMs"], t["lastTimerLogFlushPos"], t["lastTimerQueueOffset"], t["masterTimerQueueOffset"],
        t["dataVersionCounter"])

    code, metrics, _ = _jsonl("dump", "timermetrics", store)
    assert code == 0 and {r["topic"]: (r["count"], r["metric_timestamp"]) for r in metrics} == {
        k: (v["count"], v["timeStamp"]) for k, v in truth["timermetrics"]["timingCount"].items()}
    assert {r["source"] for r in metrics} == {"main"}


def test_a_store_without_a_timer_dumps_nothing_and_says_so():
    store = V5 / "v2-and-crc" / "store"
    for kind in ("timerwheel", "timerlog", "timercheck", "timermetrics"):
        code, rows, err = _jsonl("dump", kind, store)
        assert (code, rows) == (0, []) and "no " in err and "timer" in err, (kind, err)


def test_a_unit_that_is_no_unit_ends_the_log_there(tmp_path):
    """A bad magic in the middle of the second file: its units end there (recover cuts the
    log there), dump says so with a corrupt row and exit 3, and a chain through it ends there."""
    store = expand_store(TIMER / "store", tmp_path / "s")
    truth = load_truth(TIMER / "truth.json")["timer"]
    victim = next(u for u in truth["timerLogUnits"] if u["position"] >= 2048 + 3 * 52)
    at = victim["position"]
    with open(store / "timerlog" / "00000000000000002048", "r+b") as f:
        f.seek(at - 2048 + 12)  # the magic
        f.write((0x7F00).to_bytes(4, "big"))
    log = scan_timer_log(store / "timerlog")
    assert (log.readable_end, log.end_reason) == (at, "badUnit")
    assert [u.position for u in log.units] == [u["position"] for u in truth["timerLogUnits"]
                                             if not at <= u["position"] < 4096]
    wheel = read_wheel(store / "timerwheel")
    through = next(c for c in truth["chains"] if at in c["chain"])
    chain = walk_chain(log, wheel.slot_at(through["index"]).last_pos)
    assert (chain.end, chain.end_position, chain.positions[-1]) == ("badUnit", at, at)

    code, rows, err = _jsonl("dump", "timerlog", store)
    assert code == 3
    corrupt = [r for r in rows if r["record"] == "corrupt"]
    assert [(r["timer_log_offset"], r["file_position"]) for r in corrupt] == [(at, at - 2048)]


# --- info -----------------------------------------------------------------------------------

def _info(store) -> dict:
    import json

    from typer.testing import CliRunner

    from rmqtool.cli.app import app
    r = CliRunner().invoke(app, ["info", str(store), "--format", "json"])
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_info_shows_the_timer_state_the_engine_loads(stores):
    """Pending messages from the read time on are the engine's dequeueBehindMessages after a
    load of the same files; the enqueue lag its enqueueBehindMessages."""
    truth = load_truth(TIMER / "truth.json")
    doc = _info(stores["timer"])
    timer, after_load = doc["timer"], truth["reload"]["timerAfterLoad"]
    assert timer["read_timestamp"] == truth["timer"]["timercheck"]["lastReadTimeMs"] == after_load["currReadTimeMs"]
    assert timer["pending_messages"] == after_load["dequeueBehindMessages_allCongestNum"]
    assert timer["enqueue_behind_messages"] == after_load["enqueueBehindMessages"]
    assert timer["timer_queue_max_offset"] == after_load["timerTopicCqMaxOffset"]
    assert timer["timer_log_readable_end"] == after_load["timerLogMaxOffset"]
    assert (timer["timer_log_units"], timer["wheel_used_slots"]) == (len(truth["timer"]["timerLogUnits"]),
                                                                     len(truth["timer"]["wheelSlots"]))
    assert sum(s["num"] for s in timer["pending_by_fire_time"]) == timer["pending_messages"]
    assert max(s["num"] for s in timer["pending_by_fire_time"]) == timer["congestion"][0]["num"]
    assert {t["topic"]: t["count"] for t in timer["timer_metrics"]} == {
        k: v["count"] for k, v in truth["timer"]["timermetrics"]["timingCount"].items()}
    assert [s["name"] for s in doc["side_stores"]] == ["timerwheel", "timerlog", "config/timercheck",
                                                       "config/timermetrics", "compaction"]
    assert [s["read_by"] is not None for s in doc["side_stores"]] == [True] * 5  # compaction: dump compactionlog
    for variant in ("a-as-is", "b-timerlog-tail-zeroed", "d-wheel-slot-zeroed-outside-rescan",
                    "e-commitlog-truncated"):
        state = load_truth(CRASH / variant / "truth.json")["timerAfterLoad"]["state"]
        timer = _info(stores[f"{variant}/input"])["timer"]
        assert timer["read_timestamp"] == state["currReadTimeMs"]
        assert timer["pending_messages"] == state["dequeueBehindMessages_allCongestNum"], variant
    assert _info(stores["c-timercheck-deleted/input"])["timer"]["pending_messages"] is None
    plain = _info(V5 / "v2-and-crc" / "store")
    assert (plain["timer"], plain["side_stores"]) == (None, [])


# --- damage never crashes the read side ------------------------------------------------------

@pytest.fixture(scope="module")
def fuzz_store(tmp_path_factory):
    return expand_store(TIMER / "store", tmp_path_factory.mktemp("timer-fuzz") / "store")


def _read_everything(store: pathlib.Path) -> None:
    """Every timer reader and dump kind, every chain; only RmqError (one clean line) may stop one."""
    from rmqtool.errors import RmqError
    from rmqtool.inspect.timer import dumps, state
    for run in (lambda: list(dumps.wheel_rows(store, dumps.TimerDump())),
                lambda: list(dumps.timer_log_rows(store, dumps.TimerDump(), show_blank=True)),
                lambda: dumps.timercheck_row(store),
                lambda: list(dumps.timermetrics_rows(store, dumps.TimerDump(), [])),
                lambda: state.timer_info(store, 88)):
        try:
            run()
        except RmqError:
            pass
    try:
        log, wheel = scan_timer_log(store / "timerlog"), read_wheel(store / "timerwheel")
    except RmqError:
        return
    for slot in wheel.slots:
        chain = walk_chain(log, slot.last_pos, slot_index=slot.index)
        assert len(chain.positions) <= len(log.columns) + 1


def test_damaged_timer_files_never_crash_a_reader(fuzz_store):
    from hypothesis import given, settings, strategies as st

    from helpers import examples
    files = ["timerwheel", "timerlog/00000000000000000000", "timerlog/00000000000000002048",
             "timerlog/00000000000000004096", "config/timercheck", "config/timermetrics"]

    @settings(max_examples=examples(12), deadline=None)
    @given(name=st.sampled_from(files), where=st.integers(0, 4095), data=st.binary(min_size=1, max_size=64),
           cut=st.booleans())
    def case(name, where, data, cut):
        path = fuzz_store / name
        original = path.read_bytes() if name != "timerwheel" else None
        with open(path, "r+b") as f:
            f.seek(where)
            saved = f.read(len(data))
            f.seek(where)
            f.write(data)
            if cut and original is not None:
                f.truncate(where)
        try:
            _read_everything(fuzz_store)
        finally:
            if original is not None:
                path.write_bytes(original)
            else:
                with open(path, "r+b") as f:
                    f.seek(where)
                    f.write(saved.ljust(len(data), b"\0"))
    case()


# --- query --timer ----------------------------------------------------------------------------

STATE_OF_OUTCOME = {"delivered": "delivered", "notDelivered": "pending", "recalledNotDelivered": "recalled",
                    "storedAsNormalMessage": "storedAsNormal"}


def test_query_timer_says_what_became_of_each_timer_message(stores):
    """One label of each outcome and scenario group (delivered, pending, rolled, recalled, due at
    enqueue, a deliver time in the past) against truth.outcomes: the state, the records, the
    units and the deliveries."""
    from rmqtool.inspect.lookup import Lookup, look_up
    from rmqtool.inspect.timer.query import timer_states
    store = stores["timer"]
    outcomes = load_truth(TIMER / "truth.json")["outcomes"]
    picked = {}
    for label, o in outcomes.items():
        if o.get("outcome") in STATE_OF_OUTCOME and label[:label.index("-")] != "p":
            picked.setdefault((label[:label.index("-")], o["outcome"], bool(o["rolledRecords"])), label)
    assert len(picked) >= 12 and {"delivered", "notDelivered", "recalledNotDelivered", "storedAsNormalMessage"} \
        == {k[1] for k in picked} and any(k[2] for k in picked)
    for label in picked.values():
        o = outcomes[label]
        (row,) = timer_states(store, look_up(store, Lookup("--key", key=label), None, lambda _: None))
        assert (row["keys"], row["timer_state"]) == ([label], STATE_OF_OUTCOME[o["outcome"]]), label
        assert row["timer_record_offsets"] == o["timerRecords"] + [r[0] for r in o["rolledRecords"]], label
        assert row["roll_times"] == max([r[1] for r in o["rolledRecords"]], default=0), label
        assert row["timer_log_offsets"] == o["timerLogUnits"], label
        assert row["delivered_offsets"] == [d[0] for d in o["deliveredRecords"]], label
        assert row["fire_timestamp"] == (int(o["timerOutMs"]) if o["timerOutMs"] else None) or \
            o["outcome"] == "storedAsNormalMessage", label
    code, rows, err = _jsonl("query", store, "--key", "p-00", "--timer")
    assert (code, rows) == (1, []) and "is a timer message" in err


def test_a_file_cut_short_before_the_last_is_damage(tmp_path):
    """Units zeroed from the middle of the first file on (later files follow): the readable
    log ends there, and dump says so (a file before the last always ends with a blank)."""
    store = expand_store(TIMER / "store", tmp_path / "s")
    with open(store / "timerlog" / "00000000000000000000", "r+b") as f:
        f.seek(10 * 52)
        f.write(bytes(2048 - 10 * 52))
    log = scan_timer_log(store / "timerlog")
    assert (log.readable_end, log.end_reason) == (520, "zeroUnit")
    code, rows, _ = _jsonl("dump", "timerlog", store, "--show-blank")
    assert code == 3
    assert [(r["timer_log_offset"], r["reason"].split(":")[0]) for r in rows if r["record"] == "corrupt"] == [
        (520, "zeroUnit")]
    assert [r["timer_log_offset"] for r in rows if r["record"] == "blank"] == [4076]


def test_all_chains_at_once_equal_one_at_a_time(tmp_path):
    """walk_chains on a generated log (5,000 units in 400 slots, two files, a self-loop, a
    loop of two, a prevPos between units, one past the log end, one to -2) equals walk_chain
    chain by chain, with and without a read end and slot indexes."""
    import numpy as np

    from rmqtool.formats.timerlog import BLANK_MAGIC_CODE, MIN_BLANK_LEN
    from rmqtool.store.timer.timerlog import UNIT_DTYPE
    rng = np.random.default_rng(22)
    n, per_file, file_size = 5000, 3000, 3000 * 52 + 20
    slot = rng.integers(0, 400, n)
    position = np.arange(n) // per_file * file_size + np.arange(n) % per_file * 52
    prev, last = np.full(n, -1, np.int64), {}
    for i in range(n):
        prev[i], last[int(slot[i])] = last.get(int(slot[i]), -1), int(position[i])
    prev[[10, 20, 30, 40]] = [int(position[10]), int(position[25]) + 7, 10**9, -2]  # self-loop, between, past, -2
    prev[25] = int(position[30])  # 30 -> ... (a forward step from 25)
    units = np.zeros(n, UNIT_DTYPE)
    units["size"], units["prev_pos"], units["magic"] = 52, prev, 1
    units["curr_write_time"], units["delayed_time"] = 1796256014000, slot * 1000
    (tmp_path / "timerlog").mkdir()
    for start in range(0, n, per_file):
        with open(tmp_path / "timerlog" / f"{start // per_file * file_size:020d}", "wb") as f:
            f.write(units[start:start + per_file].tobytes())
            blank = np.array([(file_size - f.tell(), 0, BLANK_MAGIC_CODE)], [("s", ">i4"), ("p", ">i8"), ("m", ">i4")])
            f.write(blank.tobytes() if f.tell() + MIN_BLANK_LEN <= file_size else b"")
            f.truncate(file_size)
    log = scan_timer_log(tmp_path / "timerlog")
    assert len(log.columns) == n
    heads = sorted(last.values()) + [int(position[30]), 7, -1, 10**9]
    wanted = [int(h) % 400 for h in heads]
    for read_end in (None, int(position[n // 2])):
        one = [walk_chain(log, h, slot_index=w, read_end=read_end) for h, w in zip(heads, wanted)]
        assert walk_chains(log, heads, slot_indexes=wanted, read_end=read_end) == one
        assert {c.end for c in one} >= ({"minusOne", "loop", "badUnit", "pastLogEnd", "noFile"} if read_end is None
                                        else {"minusOne", "beyondReadPosition"})


def test_units_pointing_past_a_truncated_commit_log(stores):
    """e: the commit log zeroed from the first s4 record on; --records says no record is there
    for exactly the units pointing at or past the cut, and names the rest."""
    variant = CRASH / "e-commitlog-truncated"
    cut = load_truth(variant / "truth.json")["mutation"]["cutAtCommitLogOffset"]
    code, rows, _ = _jsonl("dump", "timerlog", stores["e-commitlog-truncated/input"] / "timerlog", "--records")
    assert code == 0 and rows
    assert [r["commit_log_offset"] for r in rows if r["record_error"]] == [
        r["commit_log_offset"] for r in rows if r["commit_log_offset"] >= cut]
    assert all(r["record_topic"] == "rmq_sys_wheel_timer" for r in rows if r["commit_log_offset"] < cut)
