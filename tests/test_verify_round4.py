"""Issue 27, fourth round: verify's cheaper band bookkeeping gives what the sorting version gave."""
from __future__ import annotations

import functools
import os
import time

import numpy as np
from hypothesis import given, settings, strategies as st

from rmqtool.store import commitlog, parallel
from rmqtool.verify.commitlog import small_unique

from tests.helpers import examples


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.integers(0, 1 << 40), min_size=0, max_size=60), st.integers(0, 3))
def test_small_unique_is_np_unique(values, spread):
    """Counted where the codes span few values, sorted where they do not: np.unique's answer either way."""
    a = np.array([v >> (10 * spread) for v in values], np.int64)
    uniq, inverse = small_unique(a)
    want_uniq, want_inverse = np.unique(a, return_inverse=True)
    assert np.array_equal(uniq, want_uniq)
    assert np.array_equal(np.asarray(inverse).reshape(-1), np.asarray(want_inverse).reshape(-1))
    if len(a):
        assert np.array_equal(uniq[np.asarray(inverse).reshape(-1)], a)


def test_column_window_buffer_is_reused(tmp_path):
    """A column scan's window buffer goes back to the pool when the window closes and the next
    window of its size takes it; a window still open never shares it."""
    path = tmp_path / "f"
    path.write_bytes(bytes(range(256)) * (3 * commitlog.COLUMN_WINDOW // 256))
    size = path.stat().st_size
    commitlog._SPARES.clear()
    first = commitlog._FileWindow(str(path), size, commitlog.COLUMN_WINDOW)
    buf, i = first.get(0, 16)
    spare = first.spare
    assert spare is not None and buf is spare and bytes(buf[i:i + 4]) == bytes(range(4))
    second = commitlog._FileWindow(str(path), size, commitlog.COLUMN_WINDOW)
    buf2, j = second.get(commitlog.COLUMN_WINDOW + 1, 16)
    assert second.spare is not spare and bytes(buf2[j:j + 2]) == bytes((1, 2))
    first.close()
    third = commitlog._FileWindow(str(path), size, commitlog.COLUMN_WINDOW)
    buf3, k = third.get(2, 16)
    assert third.spare is spare and bytes(buf3[k:k + 2]) == bytes((2, 3))
    assert bytes(buf2[j:j + 2]) == bytes((1, 2))  # the open window's bytes untouched
    second.close()
    third.close()


def _arrays_job(job: int, parent: int = 0) -> dict:
    if os.getpid() == parent:
        time.sleep(0.05)  # the child takes the next jobs meanwhile
    return {"flag": np.arange(job + 3, dtype=np.int8), "offset": np.arange(job + 5, dtype=np.int64) * 1001,
            "tq": np.arange(job + 1, dtype=np.int32) - 3, "pid": os.getpid()}


def test_arrays_from_a_child_arrive_aligned_and_whole():
    """The parent's arrays made on a frame's body are the child's, aligned whatever the sizes
    before them (an int8 array of odd length, the pickle)."""
    got = list(parallel.iter_parallel(list(range(6)), functools.partial(_arrays_job, parent=os.getpid()),
                                      workers=2, ahead=2))
    assert any(r["pid"] != os.getpid() for r in got)  # some came from the child
    for job, r in enumerate(got):
        want = _arrays_job(job)
        for name in ("flag", "offset", "tq"):
            assert r[name].flags.aligned and r[name].dtype == want[name].dtype
            assert np.array_equal(r[name], want[name])
