"""The column paths timer verify runs on (benchmarks/bench_timer.py): the recovery walk's
clean-record windows, checked against what the real brokers did (truth.json).

The recovery walk (recovery/commitlog_walk.walk) lets the clean-record kernel vouch for the
records no dispatch request is asked of and sends the rest through check_message; where it
ends must still be where the broker's recovery ended the log.
"""
from __future__ import annotations

import pytest

from conftest import V4, V5, load_truth
from rmqtool.recovery import commitlog_walk
from rmqtool.recovery.plan import plan_recovery

# crash fixtures the broker recovered (loadOk): clean, torn, zeroed, a corrupt body (the
# CRC check), a garbled last message; normal and abnormal recovery, 4.9.8 and 5.3.3
WALKED = [(V4 / "crash", v) for v in ("a-as-is", "b2-garbage-tail-of-last-message", "b3-zeroed-last-3-messages",
                                      "e1-corrupt-body-in-last-commitlog-file")] + \
         [(V5 / "crash5", v) for v in ("a-as-is", "b-garbled-last-message", "c-checkpoint-zeroed",
                                       "d-abort-removed-garbled-last-message")]


@pytest.mark.parametrize("base,variant", WALKED, ids=lambda x: x if isinstance(x, str) else x.name)
def test_the_walk_ends_where_the_broker_did_with_the_kernel_vouching(base, variant, monkeypatch):
    truth = load_truth(base / variant / "truth.json")
    calls = []
    real = commitlog_walk.check_at

    def counted(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(commitlog_walk, "check_at", counted)
    plan = plan_recovery(base / variant / "input" / "store")
    assert plan.commit_log_end == truth["truth"]["commitlog"]["maxPhyOffset"]
    walked = plan.outcome.walk.records
    if plan.abnormal:  # every record is dispatched: each one through check_message
        assert len(calls) >= walked
    else:  # the kernel vouched for the records before the queues' reach: check_message saw few
        assert walked > 10 and len(calls) < walked / 2
