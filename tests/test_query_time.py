"""Queue offset by time (getOffsetInQueueByTime) against the 4.9.8 broker's answers, and
the exact (lower bound) mode against the store timestamps truth.json lists."""
from __future__ import annotations

import bisect
import os

import pytest

from conftest import V4, V5, load_truth
from rmqtool.query.by_time import java_long_div, offset_by_time
from rmqtool.query.explain import Trace

TIMEKEY = V4 / "timekey"
BASIC = V4 / "basic"


def _queue_times(truth: dict, topic: str, queue_id: int) -> list[tuple[int, int]]:
    """(queue offset, store timestamp) of every unit of a queue, from truth alone."""
    stored = {m["physicalOffset"]: m["storeTimestamp"] for m in truth["truth"]["messages"]}
    cq = truth["truth"]["consumeQueues"][topic][str(queue_id)]
    return [(e[0], stored[e[1]]) for e in cq["entries"]]


def _first_at_or_after(units: list[tuple[int, int]], ts: int) -> int | None:
    times = [t for _, t in units]
    i = bisect.bisect_left(times, ts)
    return units[i][0] if i < len(units) else None


def test_every_recorded_broker_answer_is_reproduced():
    truth = load_truth(TIMEKEY / "truth.json")
    cases = truth["getOffsetInQueueByTime"]
    assert len(cases) >= 80
    for case in cases:
        result = offset_by_time(TIMEKEY / "store", case["topic"], case["queueId"], case["timestamp"])
        assert result.queue_offset == case["getOffsetInQueueByTime"], case["label"]
        known = case["topic"] in truth["truth"]["consumeQueues"] and \
            str(case["queueId"]) in truth["truth"]["consumeQueues"][case["topic"]]
        assert result.found is known
        if not known:
            assert any("broker answers 0" in n for n in result.notes)


def test_answer_carries_the_store_timestamp_of_its_message():
    truth = load_truth(TIMEKEY / "truth.json")
    units = dict(_queue_times(truth, "TimeTopic", 0))
    result = offset_by_time(TIMEKEY / "store", "TimeTopic", 0, 1700000010334)
    assert result.store_timestamp == units[result.queue_offset] == 1700000010334
    assert result.record() == {"topic": "TimeTopic", "queue_id": 0, "time": 1700000010334,
                               "queue_offset": result.queue_offset, "store_timestamp": 1700000010334}


def test_exact_is_the_first_offset_stored_at_or_after():
    truth = load_truth(TIMEKEY / "truth.json")
    store = TIMEKEY / "store"
    differs = 0
    for case in truth["getOffsetInQueueByTime"]:
        if str(case["queueId"]) not in truth["truth"]["consumeQueues"].get(case["topic"], {}):
            continue
        units = _queue_times(truth, case["topic"], case["queueId"])
        expected = _first_at_or_after(units, case["timestamp"])
        result = offset_by_time(store, case["topic"], case["queueId"], case["timestamp"], exact=True)
        if expected is None:
            assert not result.found and result.store_timestamp is None
            assert result.queue_offset == units[-1][0] + 1
        else:
            assert result.found and result.queue_offset == expected, case["label"]
            assert result.store_timestamp == dict(units)[expected] >= case["timestamp"]
            if expected > 0:
                assert dict(units)[expected - 1] < case["timestamp"]
        differs += result.queue_offset != case["getOffsetInQueueByTime"]
    assert differs >= 10  # the broker lands inside runs of equal milliseconds


def test_exact_on_shared_millisecond():
    """Where several messages of a queue share the millisecond, the broker's search lands
    inside the run; exact answers its first message."""
    truth = load_truth(TIMEKEY / "truth.json")
    store = TIMEKEY / "store"
    units = _queue_times(truth, "TimeTopic", 0)
    times = [t for _, t in units]
    shared = [c for c in truth["getOffsetInQueueByTime"] if c["topic"] == "TimeTopic" and c["queueId"] == 0
              and times.count(c["timestamp"]) > 1 and c["getOffsetInQueueByTime"] != times.index(c["timestamp"])]
    assert shared
    for case in shared:
        assert offset_by_time(store, "TimeTopic", 0, case["timestamp"]).queue_offset == case["getOffsetInQueueByTime"]
        exact = offset_by_time(store, "TimeTopic", 0, case["timestamp"], exact=True)
        assert exact.queue_offset == times.index(case["timestamp"]) < case["getOffsetInQueueByTime"]


def _basic_queue_with_files():
    truth = load_truth(BASIC / "truth.json")
    topic, queue_id = "OrderTopic", 0
    directory = BASIC / "store" / "consumequeue" / topic / str(queue_id)
    assert len(list(directory.iterdir())) >= 3
    return truth, topic, queue_id, directory


def test_multi_file_queue_picks_the_file_by_store_time_not_mtime(store_copy):
    """basic has several consume queue files per queue. Copying a store loses mtimes:
    rmqtool's answers do not change, and the trace says where the broker would differ."""
    truth, topic, queue_id, _ = _basic_queue_with_files()
    units = _queue_times(truth, topic, queue_id)
    store = store_copy(BASIC / "store")
    directory = store / "consumequeue" / topic / str(queue_id)
    for p in directory.iterdir():
        os.utime(p, (0, 0))  # as after a careless copy: every mtime before every message
    samples = [units[i][1] for i in (0, 7, 99, 100, 101, 250, len(units) - 1)] + [units[150][1] + 1]
    lines = []
    for ts in samples:
        exact = offset_by_time(store, topic, queue_id, ts, exact=True)
        assert exact.queue_offset == _first_at_or_after(units, ts)
        plain = offset_by_time(store, topic, queue_id, ts, trace=Trace(lines.append))
        assert plain.store_timestamp is not None
        # the broker's search within the right file returns a message stored at ts
        # when one is; otherwise the nearer neighbour
        stored_at = dict(units)[plain.queue_offset]
        if any(t == ts for _, t in units):
            assert stored_at == ts
        else:
            below = max(t for _, t in units if t < ts)
            above = min(t for _, t in units if t > ts)
            assert stored_at in (below, above) and abs(stored_at - ts) == min(ts - below, above - ts)
    assert any("the broker would pick file" in line for line in lines)


def test_fill_units_of_a_rebuilt_queue():
    """crash/c1's rebuilt CrashTopic/1 starts with fill units (commitLogOffset 0, size
    Integer.MAX_VALUE) at 100..135, in the same file as the first real units.
    pickupStoreTimestamp cannot read a fill unit, so the broker's search answers 0 when it
    lands on one; the exact mode counts them as earlier than any message."""
    store = V4 / "crash" / "c1-delete-cq-queue-dir" / "expected" / "store"
    truth = load_truth(V4 / "crash" / "c1-delete-cq-queue-dir" / "truth.json")
    cq = truth["truth"]["consumeQueues"]["CrashTopic"]["1"]
    stored = {m["physicalOffset"]: m["storeTimestamp"] for m in truth["truth"]["messages"]}
    real = [(e[0], stored[e[1]]) for e in cq["entries"] if e[2] != 2**31 - 1]
    assert real[0][0] == 136 and cq["minOffset"] == 100
    first_ts = real[0][1]
    exact = offset_by_time(store, "CrashTopic", 1, first_ts, exact=True)
    assert (exact.queue_offset, exact.store_timestamp) == (136, first_ts)
    lines = []
    plain = offset_by_time(store, "CrashTopic", 1, first_ts, trace=Trace(lines.append))
    assert plain.queue_offset == 0 and any("the broker answers 0" in line for line in lines)
    assert not plain.found and plain.store_timestamp is None  # offset 0 is below the queue's min, 100
    later = real[len(real) // 2][1]
    assert offset_by_time(store, "CrashTopic", 1, later, exact=True).queue_offset == _first_at_or_after(real, later)


def test_batch_consume_queue():
    truth = load_truth(V5 / "batchcq" / "truth.json")
    store = V5 / "batchcq" / "store"
    stored = {m["physicalOffset"]: m["storeTimestamp"] for m in truth["truth"]["messages"]}
    entries = truth["truth"]["consumeQueues"]["BatchCQTopic"]["0"]["entries"]
    units = [(e[0], stored[e[1]]) for e in entries]
    for base, ts in units[::3]:
        result = offset_by_time(store, "BatchCQTopic", 0, ts, exact=True)
        assert result.queue_offset == _first_at_or_after(units, ts) and result.store_timestamp == ts
    late = offset_by_time(store, "BatchCQTopic", 0, units[-1][1] + 1, exact=True)
    assert not late.found
    assert offset_by_time(store, "BatchCQTopic", 0, units[-1][1] + 1).queue_offset == units[-1][0]


@pytest.mark.parametrize("a,b,q", [(-1, 20, 0), (-21, 20, -1), (41, 20, 2), (5999999, 20, 299999)])
def test_java_long_division_truncates(a, b, q):
    assert java_long_div(a, b) == q
