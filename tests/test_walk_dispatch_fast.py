"""The recovery walk past dispatch_from (recovery/commitlog_walk.sure_requests): records the
kernel vouches for are dispatched with requests built from its parts, not by check_message
one at a time. On every crash store the engines made (4.9.8, 5.3.3, the batch queue and timer
stores, and the made crashes), in small windows so that runs stop and start often, with the
native kernel and without it: the requests dispatched, in order, the walk's end and the plan
are the ones check_message gives, record for record; and the plans still end the log where
the brokers did (truth.json's afterLoadBeforeStart.maxPhyOffset, where a store's truth has it).
Records changed anywhere (hypothesis) give the same requests both ways too.
"""
from __future__ import annotations


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, V5, load_truth
from helpers import copy_tree, examples, expand_store, kernel_and_pure
from rmqtool.recovery import commitlog_walk, outcome
from rmqtool.recovery.plan import plan_recovery

STORES = {f"{p.parent.name}/{p.name}": p for family in ("rocketmq-4.9.8/crash", "rocketmq-4.9.8/crash-fast",
                                                         "rocketmq-5.3.3/crash5", "rocketmq-5.3.3/timer-crash",
                                                         "crash-made")
          for p in sorted((FIXTURES / family).iterdir()) if (p / "input" / "store").is_dir()}
STORES["batchcq"] = V5 / "batchcq"
CLOCK = 1_795_400_000_000  # the timer stores' plans depend on the clock: one for both ways


def _store_dir(src):
    return src / "store" if (src / "store").is_dir() else src / "input" / "store"


def _walked(store, monkeypatch, fast: bool) -> tuple:
    """(every request dispatched in order, the walk's end, the plan's JSON)."""
    seen = []
    real_walk = commitlog_walk.walk

    def walk(segments, start_index, options, delay_levels, on_record=None, **kw):
        def record(request):
            seen.append(request)
            on_record(request)
        return real_walk(segments, start_index, options, delay_levels, None if on_record is None else record, **kw)
    with monkeypatch.context() as m:
        m.setattr(outcome, "walk", walk)
        m.setattr(commitlog_walk, "WINDOW", 1500)
        if not fast:
            m.setattr(commitlog_walk, "sure_requests", lambda buf, records, sure, base: [None] * len(records))
        plan = plan_recovery(store, now_ms=CLOCK)
    return seen, plan.outcome.walk, plan.to_json()


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("walk-dispatch")
    return {name: expand_store(_store_dir(src), root / name.replace("/", "_")) for name, src in STORES.items()}


@pytest.mark.parametrize("name", sorted(STORES))
def test_requests_as_check_message_gives_them(stores, name, monkeypatch):
    store = stores[name]
    careful = _walked(store, monkeypatch, fast=False)
    fast, pure = kernel_and_pure(lambda: _walked(store, monkeypatch, fast=True))
    assert fast == careful and pure == careful
    truth = load_truth(STORES[name] / "truth.json") if (STORES[name] / "truth.json").is_file() else {}
    loaded = truth.get("afterLoadBeforeStart") or {}
    if "maxPhyOffset" in loaded:  # where the broker's recovery ended the log
        assert careful[1].end == loaded["maxPhyOffset"]


def test_the_fast_path_dispatches_most_records(stores, monkeypatch):
    """On a store whose abnormal recovery dispatches many records, most requests come from the
    kernel's parts (the test would pass with check_message alone otherwise)."""
    store = stores["crash/a-as-is"]
    built = []
    real = commitlog_walk.sure_requests

    def counting(buf, records, sure, base):
        out = real(buf, records, sure, base)
        built.extend(r for r in out if r is not None)
        return out
    monkeypatch.setattr(commitlog_walk, "sure_requests", counting)
    seen, _end, _plan = _walked(store, monkeypatch, fast=True)
    assert seen and len(built) >= len(seen) // 2


@settings(max_examples=examples(20), deadline=None)
@given(data=st.data())
def test_changed_bytes_give_the_same_requests(stores, tmp_path_factory, data):
    """A copy of crash/a-as-is with bytes of its last commit log file changed: the walk
    dispatches the same requests, ends at the same place, and plans the same, both ways."""
    src = stores["crash/a-as-is"]
    store = tmp_path_factory.mktemp("changed") / "store"
    copy_tree(src, store)
    segment = sorted((store / "commitlog").iterdir())[-1]
    raw = bytearray(segment.read_bytes())
    used = len(raw.rstrip(b"\0")) or 1
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, used - 1))
        raw[at] = data.draw(st.integers(0, 255))
    segment.write_bytes(bytes(raw))
    with pytest.MonkeyPatch.context() as m:
        careful = _walked(store, m, fast=False)
        fast = _walked(store, m, fast=True)
    assert fast == careful
