"""rmqtool report's speed work: Outcome.served answers by binary search on a queue's rising
units (recovery/outcome._members), the same answer np.isin gives, units in order or not."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from helpers import examples
from rmqtool.recovery.outcome import _members

offsets = st.lists(st.integers(-3, 60), max_size=30)


@settings(max_examples=examples(40), deadline=None)
@given(values=offsets, units=offsets, rising=st.booleans())
def test_members_is_isin(values, units, rising):
    v = np.array(values, np.int64)
    u = np.array(sorted(units) if rising else units, np.int64)
    assert _members(v, u).tolist() == np.isin(v, u).tolist()
