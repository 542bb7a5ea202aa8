"""rmqtool report's speed work: Outcome.served answers by binary search on a queue's rising
units (recovery/outcome._members), the same answer np.isin gives, units in order or not; the
written end verify's scan found is kept on the view, and it is the view's own answer."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import FIXTURES
from helpers import examples
from rmqtool.families.rocketmq import ROCKETMQ_TOOLS
from rmqtool.recovery.outcome import _members
from rmqtool.store.view import StoreView
from rmqtool.verify.base import VerifyOptions

offsets = st.lists(st.integers(-3, 60), max_size=30)


@settings(max_examples=examples(40), deadline=None)
@given(values=offsets, units=offsets, rising=st.booleans())
def test_members_is_isin(values, units, rising):
    v = np.array(values, np.int64)
    u = np.array(sorted(units) if rising else units, np.int64)
    assert _members(v, u).tolist() == np.isin(v, u).tolist()


@pytest.mark.parametrize("store", ["crash-made/torn-middle-normal/input/store",
                                   "crash-made/roll-kill-last-missing/input/store", "rocketmq-4.9.8/basic/store"])
def test_verify_hands_the_view_the_written_end_the_view_would_find(store):
    """report reads the written end from the view after verify ran on it: the value verify's scan
    keeps there is the one store/commitlog_end finds on a view of its own."""
    root = FIXTURES / store
    view = ROCKETMQ_TOOLS.open_view(root, purpose="report")
    list(ROCKETMQ_TOOLS.verify(view, VerifyOptions(now_ms=0)).findings())
    assert "written_end" in view.__dict__  # kept, not found again
    assert view.written_end == StoreView(root).written_end
