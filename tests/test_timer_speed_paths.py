"""The timer start's column paths against the paths they speed up, on the fixtures' stores:

* the wheel model as int64 columns (recovery/timer/wheel_model) against the same model as a
  dict of slots alone (what it becomes when a value does not fit a long);
* the log model's units taken from the disk scan (``seed``) against the units decoded again
  from each file's bytes, as load leaves the log, after a cut and after appends;
* the run's chains kept as arrays (SlotChains over a ChainSet) against the same sums over
  its chains one by one.

Each timer-crash variant's start is simulated at its truth's clock once by each path; the
plan's timer section and verify's timer findings must be the same, and equal to the truth
where test_timer_recovery checks it (this file checks only that both paths agree)."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import V5, load_truth
from helpers import expand_store
from rmqtool.formats.timerlog import UNIT_SIZE
from rmqtool.recovery.outcome import Settings, simulate
from rmqtool.recovery.timer.load import TimerSettings
from rmqtool.recovery.timer.log_model import TimerLogFile, TimerLogModel, pack_unit
from rmqtool.recovery.timer.plan import timer_section
from rmqtool.recovery.timer.start import timer_start
from rmqtool.recovery.timer.wheel_model import WheelModel
from rmqtool.store.timer.chain import END_LOOP
from rmqtool.store.timer.timerlog import read_file, scan_timer_log
from rmqtool.verify.timer.check import TimerChecks

CRASH = V5 / "timer-crash"
FIXTURE_SETTINGS = TimerSettings(roll_window_slots=600)  # the fixtures' timerRollWindowSlot
CASES = {v.name: v for v in sorted(CRASH.iterdir()) if (v / "truth.json").is_file()}


def _clock(truth: dict) -> int:
    after = truth["timerAfterLoad"]["state"] if "timerAfterLoad" in truth else truth["reload"]["timerAfterLoad"]
    return after["fakeNowMs"]


def _dict_only(self) -> bool:  # WheelModel._fold as when a value does not fit a long: the dict alone
    self._to_dict()
    return False


def _outputs(store, outcome, now):
    start = timer_start(store, outcome, now, FIXTURE_SETTINGS)
    findings = [f.to_json() for f in TimerChecks(store, start).findings()]
    return start, timer_section(start), findings


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each variant's start by the column paths and by the dict and decode paths."""
    root = tmp_path_factory.mktemp("timer-speed")
    out = {}
    for name, source in CASES.items():
        store = expand_store(source / "input" / "store", root / name)
        outcome, now = simulate(store, Settings()), _clock(load_truth(source / "truth.json"))
        fast = _outputs(store, outcome, now)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(WheelModel, "_fold", _dict_only)
            mp.setattr(TimerLogModel, "_seeded", lambda self, f, count: None)
            slow = _outputs(store, outcome, now)
        out[name] = store, fast, slow
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_columns_and_dict_paths_plan_and_find_the_same(runs, name):
    _store, (fast, section, findings), (slow, slow_section, slow_findings) = runs[name]
    assert section == slow_section
    assert findings == slow_findings
    assert fast.load.wheel.columns() is not None and slow.load.wheel.columns() is None  # each took its path
    assert [vars(s) for s in fast.load.wheel.used()] == [vars(s) for s in slow.load.wheel.used()]


@pytest.mark.parametrize("name", sorted(CASES))
def test_chain_arrays_are_their_chains_summed(runs, name):
    _store, (fast, _, _), _slow = runs[name]
    run = fast.run
    chains = list(run.chains)
    assert len(chains) == len(run.chains)
    assert [c.index for c in run.chains.loops()] == [c.index for c in chains if c.chain.end == END_LOOP]
    assert run.first_loop == next((c for c in chains if c.chain.end == END_LOOP), None)
    assert run.chains.first_with_units() == next((c for c in chains if c.chain.positions), None)
    for c in chains:
        assert run.chains.units_after(c.time_ms) == sum(len(x.chain.positions) for x in chains if x.time_ms > c.time_ms)
    assert run.walked_again == sum(len(c.chain.positions) for c in chains if c.time_ms < run.write_time_ms)


def test_seeded_log_model_is_the_decoded_one(runs, tmp_path):
    """The log model seeded by the disk scan has the units decoding its bytes gives: as load
    leaves it, cut inside a file and at a file's start, after appends (a blank, a new file),
    and for a file shorter than its mapped size ending in a partial unit."""
    store = runs["b-timerlog-tail-zeroed"][0]
    disk = scan_timer_log(store / "timerlog")
    size = disk.file_size

    def models(files, seed):
        parts = [TimerLogFile(f.name, f.base_offset, size, bytearray(files[f.path])) for f in disk.files]
        return TimerLogModel(parts, seed=seed), TimerLogModel(
            [TimerLogFile(f.name, f.base_offset, size, bytearray(files[f.path])) for f in disk.files])

    files = {f.path: read_file(f.path) for f in disk.files}
    seeded, decoded = models(files, disk)
    assert np.array_equal(seeded.columns, decoded.columns) and seeded.columns is disk.columns
    units = disk.columns["position"]
    for cut in (int(units[len(units) // 2]), int(units[-1]) + 7, disk.files[-1].base_offset, 0):
        a, b = models(files, disk)
        a.truncate_dirty_files(cut)
        b.truncate_dirty_files(cut)
        assert np.array_equal(a.columns, b.columns)
        fork_a, fork_b = a.fork(), b.fork()
        for k in range(size // UNIT_SIZE + 2):  # enough to fill a file: a blank, then a new one
            unit = pack_unit(-1, 1, 1_800_000_000_000 + k, 1000, 4096, 300, 7)
            assert fork_a.append(unit) == fork_b.append(unit)
            if k in (0, size // UNIT_SIZE // 2, size // UNIT_SIZE + 1):
                assert np.array_equal(fork_a.columns, fork_b.columns)
        assert np.array_equal(a.columns, b.columns)  # the fork's appends left the model as it was
    # a last file read short, ending in the first bytes of a unit: zeros past them, as mapped
    last = disk.files[-1]
    short = dict(files)
    short[last.path] = files[last.path][:last.end - last.base_offset + UNIT_SIZE // 2]
    shorter = tmp_path / "timerlog"
    shorter.mkdir()
    for f in disk.files:
        (shorter / f.name).write_bytes(bytes(short[f.path]))
    disk_short = scan_timer_log(shorter)
    a = TimerLogModel([TimerLogFile(f.name, f.base_offset, size, bytearray(short[g.path]))
                       for f, g in zip(disk_short.files, disk.files)], seed=disk_short)
    b = TimerLogModel([TimerLogFile(f.name, f.base_offset, size, bytearray(short[g.path]))
                       for f, g in zip(disk_short.files, disk.files)])
    assert np.array_equal(a.columns, b.columns)


@pytest.mark.parametrize("window, batch", [(1, 1 << 16), (700, 3)])
def test_plain_units_window_by_window_is_all_at_once(runs, monkeypatch, window, batch):
    """plain_units reads the commit log a window at a time: windows of one record (however
    long) or of a few give the verdicts one window over the whole log gives."""
    from rmqtool.store.timer import records
    for name in ("a-as-is", "e-commitlog-truncated"):
        store, (fast, _, _), _slow = runs[name]
        cols = fast.disk_log.columns
        args = (store, cols["offset_py"], cols["size_py"], cols["hash_code_of_real_topic"], fast.store.commit_log_min,
                fast.store.commit_log_max)
        whole = records.plain_units(*args)
        with monkeypatch.context() as mp:
            mp.setattr(records, "_WINDOW", window)
            mp.setattr(records, "_BATCH", batch)
            assert np.array_equal(records.plain_units(*args), whole)
        assert whole.any()
