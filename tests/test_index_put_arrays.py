"""IndexFile.putKey for arrays (put_entry_arrays) writes exactly the bytes of the one-by-one loop
(put_entries): chains, slot table, header fields, file full, a table with damaged values."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import examples
from rmqtool.engine.index_writer import IndexFileWriter


def _pair(tmp_path, name, slots, entries):
    return (IndexFileWriter(tmp_path / f"{name}-a", slots, entries, end_phy_offset=77, end_timestamp=5000),
            IndexFileWriter(tmp_path / f"{name}-b", slots, entries, end_phy_offset=77, end_timestamp=5000))


def _state(f: IndexFileWriter) -> tuple:
    f.write_header()
    return (bytes(f.mm), f.begin_timestamp, f.end_timestamp, f.begin_phy_offset, f.end_phy_offset,
            f.hash_slot_count, f.index_count)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), slots=st.integers(1, 7), capacity=st.integers(2, 40))
def test_arrays_write_what_the_loop_writes(tmp_path_factory, data, slots, capacity):
    tmp = tmp_path_factory.mktemp("idx")
    a, b = _pair(tmp, "f", slots, capacity)
    try:
        if data.draw(st.booleans()):  # damage: slot values pointing anywhere
            for s in range(slots):
                v = data.draw(st.integers(-3, capacity + 3))
                for f in (a, b):
                    f.mm[40 + 4 * s:44 + 4 * s] = v.to_bytes(4, "big", signed=True)
        for _ in range(data.draw(st.integers(1, 4))):  # several batches: the second starts mid-file
            n = data.draw(st.integers(1, 30))
            h = data.draw(st.lists(st.integers(0, 2**31 - 1), min_size=n, max_size=n))
            base = data.draw(st.integers(0, 10**6))
            off = [base + 100 * i for i in range(n)]
            ts = sorted(data.draw(st.lists(st.integers(-2000, 10**7), min_size=n, max_size=n)))
            start = data.draw(st.integers(0, n - 1))
            got_a = a.put_entries(list(zip(h, off, ts)), start)
            got_b = b.put_entry_arrays(np.array(h), np.array(off), np.array(ts), start)
            assert got_a == got_b
            assert _state(a) == _state(b)
    finally:
        a.close()
        b.close()
