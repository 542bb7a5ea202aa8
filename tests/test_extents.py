"""store/extents.py: the one SEEK_DATA / SEEK_HOLE loop every sparse-file reader uses."""
from __future__ import annotations

import errno
import os

import pytest
from hypothesis import given, strategies as st

from rmqtool.errors import StoreAccessError
from rmqtool.store import extents
from rmqtool.store.extents import data_end, data_extents, next_extent

BLOCK = 4096


def _sparse(path, size: int, writes) -> bytes:
    """A file of ``size`` bytes, holes but for ``writes`` ((position, bytes)); its contents."""
    contents = bytearray(size)
    with open(path, "wb") as f:
        f.truncate(size)
        for at, data in writes:
            data = data[:max(0, size - at)]
            f.seek(at)
            f.write(data)
            contents[at:at + len(data)] = data
    return bytes(contents)


writes = st.lists(st.tuples(st.integers(0, 64 * BLOCK), st.binary(min_size=1, max_size=3 * BLOCK)), max_size=6)


@given(writes=writes, size=st.integers(0, 70 * BLOCK), lo=st.integers(0, 70 * BLOCK), span=st.integers(0, 70 * BLOCK))
def test_extents_hold_every_written_byte(tmp_path_factory, writes, size, lo, span):
    path = tmp_path_factory.mktemp("extents") / "file"
    contents = _sparse(path, size, writes)
    hi = min(size, lo + span)
    with open(path, "rb") as f:
        found = list(data_extents(f.fileno(), lo, hi, path))
        end = data_end(f.fileno(), size, path)
    covered = bytearray(max(size, 1))
    last = lo
    for start, stop in found:  # in order, apart, inside [lo, hi)
        assert last <= start < stop <= hi
        covered[start:stop] = b"\1" * (stop - start)
        last = stop
    # a byte outside every extent is a hole's: zero
    assert all(contents[i] == 0 for i in range(lo, hi) if not covered[i])
    nonzero = [i for i, b in enumerate(contents) if b]
    assert end <= size and (not nonzero or end > nonzero[-1])


@given(writes=writes, size=st.integers(0, 70 * BLOCK), lo=st.integers(0, 70 * BLOCK),
       window=st.sampled_from([1, 7, BLOCK, 1 << 20]))
def test_last_nonzero_is_the_plain_read_stripped(tmp_path_factory, writes, size, lo, window):
    """Just past the last non-zero byte from ``lo`` on, whatever the window: the file read
    whole and stripped of its zeros says the same; the holes are never read."""
    path = tmp_path_factory.mktemp("lastnz") / "file"
    contents = _sparse(path, size, writes)
    reads = []
    with open(path, "rb") as f:
        def read(at, n):
            reads.append((at, n))
            return os.pread(f.fileno(), n, at)
        found = extents.last_nonzero(f.fileno(), lo, size, read, window, path)
        spans = list(data_extents(f.fileno(), lo, size, path))
    stripped = len(contents[lo:].rstrip(b"\0")) if lo < size else 0
    assert found == (lo + stripped if stripped else None)
    assert all(any(a <= at and at + n <= b for a, b in spans) for at, n in reads)  # data only


def test_a_hole_to_the_end_gives_nothing(tmp_path):
    path = tmp_path / "file"
    _sparse(path, 16 * BLOCK, [(0, b"x")])
    with open(path, "rb") as f:
        first = next_extent(f.fileno(), 0, 16 * BLOCK, path)
        assert first is not None and first[0] == 0
        if first[1] < 16 * BLOCK:  # the file system reports holes
            assert next_extent(f.fileno(), first[1], 16 * BLOCK, path) is None
        assert next_extent(f.fileno(), 16 * BLOCK, 16 * BLOCK, path) is None


@pytest.mark.parametrize("code", [errno.EINVAL, errno.EOPNOTSUPP])
def test_without_hole_support_everything_is_data(tmp_path, monkeypatch, code):
    path = tmp_path / "file"
    _sparse(path, 8 * BLOCK, [(BLOCK, b"x")])

    def refuse(fd, pos, how):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(extents.os, "lseek", refuse)
    with open(path, "rb") as f:
        assert list(data_extents(f.fileno(), 100, 5 * BLOCK, path)) == [(100, 5 * BLOCK)]
        assert data_end(f.fileno(), 8 * BLOCK, path) == 8 * BLOCK


def test_an_io_error_names_the_file_and_position(tmp_path, monkeypatch):
    path = tmp_path / "file"
    _sparse(path, 8 * BLOCK, [(0, b"x")])

    def fail(fd, pos, how):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(extents.os, "lseek", fail)
    with open(path, "rb") as f, pytest.raises(StoreAccessError) as caught:
        list(data_extents(f.fileno(), 3 * BLOCK, 8 * BLOCK, path))
    assert caught.value.path == str(path) and caught.value.offset == 3 * BLOCK
