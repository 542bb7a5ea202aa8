"""Timer verify with a worker (recovery/timer/start.plain_units_beside): while this process
walks the commit log as the broker's recovery does, a forked worker reads every timer unit's
record; what it found is bounded here by the recovered range. On the timer fixture and every
timer-crash variant (e: units past the truncated commit log's end) the findings with two jobs
are the ones with one, the worker's mask was taken, and it equals the in-process one; a
worker's mask of other units is not taken.
"""
from __future__ import annotations

import os
import pathlib
import signal
import time

import pytest

from conftest import load_truth
from helpers import expand_store
from test_timer_verify import CASES, _clock  # the timer stores and each one's clock
from rmqtool.errors import StoreAccessError
from rmqtool.recovery.outcome import Settings, simulate
from rmqtool.recovery.timer import start as timer_start_module
from rmqtool.recovery.timer.start import ReadBeside, plain_units_beside, timer_start
from rmqtool.store.timer.records import UNBOUNDED, plain_units, within
from rmqtool.store.timer.timerlog import scan_timer_log
from rmqtool.verify.run import Verify, VerifyOptions


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("plain-beside")
    return {name: (expand_store(src / sub, root / name), _clock(load_truth(src / "truth.json")))
            for name, (src, sub) in CASES.items()}


def _findings(store, clock, jobs):
    return [f.to_json() for f in Verify(store, VerifyOptions(only=("timer",), jobs=jobs, now_ms=clock)).findings()]


@pytest.mark.parametrize("name", sorted(CASES))
def test_two_jobs_find_what_one_finds_with_the_workers_mask(stores, name, monkeypatch):
    store, clock = stores[name]
    taken = []
    real_take = timer_start_module.PlainUnits.take

    def take(self, read):
        real_take(self, read)
        taken.append(read is not None and self._disk is not None)
    monkeypatch.setattr(timer_start_module.PlainUnits, "take", take)
    one = _findings(store, clock, 1)
    two = _findings(store, clock, 2)
    assert two == one and one
    assert taken == [False, True]  # one job: nothing read beside; two: the worker's mask taken


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_workers_mask_bounded_is_the_bounded_one(stores, name):
    store, clock = stores[name]
    box = []
    read = plain_units_beside(store, lambda: box.append(simulate(store, Settings())), 2)
    start = timer_start(store, box[0], clock)
    cols = start.disk_log.columns
    assert read is not None and read.matches(cols)
    low, end = start.plain.low, start.plain.end
    here = plain_units(store, cols["offset_py"], cols["size_py"], cols["hash_code_of_real_topic"], low, end)
    bounded = read.mask & within(cols["offset_py"], cols["size_py"], low, end)
    assert bounded.tolist() == here.tolist() == start.plain.disk().tolist()
    # any range: the unbounded mask within it is plain_units over it (records ending past it dropped)
    offsets = sorted(set(cols["offset_py"].tolist()))
    if len(offsets) > 2:
        low, end = offsets[1], offsets[-2] + 1
        here = plain_units(store, cols["offset_py"], cols["size_py"], cols["hash_code_of_real_topic"], low, end)
        assert (read.mask & within(cols["offset_py"], cols["size_py"], low, end)).tolist() == here.tolist()
        assert (read.mask & ~here).any()  # the range dropped some plain unit


def test_a_mask_of_other_units_is_not_taken(stores):
    store, clock = stores["timer"]
    cols = scan_timer_log(store / "timerlog").columns
    mask = plain_units(store, cols["offset_py"], cols["size_py"], cols["hash_code_of_real_topic"], *UNBOUNDED)
    right = ReadBeside.of(cols, mask)
    assert right.matches(cols)
    fewer = ReadBeside.of(cols[1:], mask[1:])
    shifted = cols.copy()
    shifted["offset_py"][0] += 1
    assert not fewer.matches(cols) and not right.matches(shifted)
    start = timer_start(store, simulate(store, Settings()), clock, plain=fewer)
    assert start.plain._disk is None or start.plain.disk().tolist() == plain_units(
        store, cols["offset_py"], cols["size_py"], cols["hash_code_of_real_topic"], start.plain.low,
        start.plain.end).tolist()


def _children() -> list[int]:
    pids = []
    for task in pathlib.Path("/proc/self/task").iterdir():
        pids += [int(p) for p in (task / "children").read_text().split()]
    return pids


def test_a_killed_worker_leaves_the_mask_to_this_process(stores, monkeypatch, tmp_path):
    """kill -9 of the worker while the recovery walk runs: no error, no mask taken, and the
    findings are the ones of one job (the mask read here when asked for)."""
    store, clock = stores["a-as-is"]
    parent = os.getpid()
    real = timer_start_module.plain_units
    busy = tmp_path / "worker-busy"

    def slow_in_the_worker(*args):
        if os.getpid() != parent:
            busy.touch()
            time.sleep(30)
        return real(*args)
    monkeypatch.setattr(timer_start_module, "plain_units", slow_in_the_worker)
    killed = []

    def compute():
        deadline = time.monotonic() + 30
        while not busy.exists() and time.monotonic() < deadline:  # the worker is in its first job
            time.sleep(0.01)
        for pid in _children():
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    assert plain_units_beside(store, compute, 2) is None and killed
    monkeypatch.undo()
    assert _findings(store, clock, 2) == _findings(store, clock, 1)


def test_the_walks_own_error_is_raised(stores):
    store, _ = stores["a-as-is"]

    def compute():
        raise StoreAccessError("cannot read", store / "commitlog", 0)
    with pytest.raises(StoreAccessError, match="cannot read"):
        plain_units_beside(store, compute, 2)
