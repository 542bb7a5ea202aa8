"""What two processes cost beyond the work (issue 27): what crosses between them, that no
child outlives its call, the items held ahead of a band, and that verify with two processes
gives what one gives, on a fixture and on a damaged copy of it."""
from __future__ import annotations

import os
import pathlib
import pickle
import struct
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import V4
from helpers import copy_tree, examples
from rmqtool.store import parallel
from rmqtool.store.indexfile import list_index_files
from rmqtool.store.parallel import iter_parallel
from rmqtool.verify import commitlog as verify_commitlog
from rmqtool.verify import lookups
from rmqtool.verify.lookups import OffsetLookups
from rmqtool.verify.run import Verify, VerifyOptions

BIG = 300_000  # int64s: 2.4 MB, more than a pipe holds


def _wait_for(marker: pathlib.Path) -> None:
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.005)


def _shared_job(parent: int, marker: str, job: int) -> dict:
    """A job whose result has arrays; the parent's jobs wait until a child has taken one, so both work."""
    if os.getpid() == parent:
        _wait_for(pathlib.Path(marker))
    else:
        part = pathlib.Path(f"{marker}.{os.getpid()}")
        part.write_text(str(os.getpid()))
        part.rename(marker)  # whole when it appears: the parent reads it as soon as it is there
    return {"job": job, "pid": os.getpid(), "big": np.arange(BIG + job, dtype=np.int64),
            "strided": np.arange(40, dtype=np.int32)[::3], "bools": np.ones(7, bool), "text": f"job {job}"}


def test_results_cross_with_their_arrays(tmp_path):
    """Every job's result arrives whole and in order, arrays (contiguous or not) equal, of
    their dtype and writable, whichever process made it."""
    jobs = list(range(6))
    got = list(iter_parallel(jobs, _partial(os.getpid(), tmp_path / "child"), workers=2))
    assert [g["job"] for g in got] == jobs
    assert {g["pid"] for g in got} - {os.getpid()}, "a child took a job"
    for job, g in zip(jobs, got):
        assert g["big"].dtype == np.int64 and np.array_equal(g["big"], np.arange(BIG + job))
        assert g["strided"].tolist() == list(range(0, 40, 3)) and g["strided"].dtype == np.int32
        assert g["bools"].all() and g["text"] == f"job {job}"
        assert g["big"].flags.writeable  # the verify checks relabel a band's columns in place


def _partial(parent: int, marker: pathlib.Path):
    import functools
    return functools.partial(_shared_job, parent, str(marker))


def test_arrays_go_out_of_band():
    """A child's result is framed as a small pickle followed by its arrays' own bytes (pickle
    protocol 5): the arrays are not copied into the pickle, nor out of it again on arrival."""
    read_fd, write_fd = os.pipe()
    value = {"offset": np.arange(BIG, dtype=np.int64), "size": np.full(BIG, 7, np.int32)}
    try:
        out = parallel._Outbox(write_fd)
        out.send((3, True, value))
        with os.fdopen(read_fd, "rb", closefd=False) as pipe:
            total, pickled, buffers = struct.unpack("<qqq", pipe.read(24))
            body = pipe.read(total)
        out.close()
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert buffers == 2 and pickled < 1024  # the 3.6 MB of arrays went beside the pickle
    assert struct.unpack_from("<2q", body) == (value["offset"].nbytes, value["size"].nbytes)
    at = 8 * buffers + pickled
    for array in value.values():  # each at the next multiple of _ALIGN: the arrays made on arrival are aligned
        at += -at % parallel._ALIGN
        assert body[at:at + array.nbytes] == array.tobytes()
        at += array.nbytes
    assert total == at == len(body)



def _frames(fd: int, count: int) -> list:
    """``count`` frames read from ``fd`` as the parent reads them: their (index, ok, value)."""
    got = []
    with os.fdopen(fd, "rb", closefd=False) as pipe:
        for _ in range(count):
            head = pipe.read(24)
            total, pickled, buffers = struct.unpack("<qqq", head)
            body = pipe.read(total)
            lengths = struct.unpack_from(f"<{buffers}q", body)
            at = 8 * buffers + pickled
            parts = []
            for n in lengths:
                at += -at % parallel._ALIGN
                parts.append(body[at:at + n])
                at += n
            got.append(pickle.loads(body[8 * buffers:8 * buffers + pickled], buffers=parts))
    return got


@settings(max_examples=examples(10), deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 3, 20_000, BIG]), min_size=1, max_size=6))
def test_frames_arrive_in_order_whoever_writes_them(sizes):
    """Small results go straight into the pipe, what it has no room for goes by the thread:
    whichever writes a frame, and a frame cut between them, the parent reads them whole and
    in the order they were sent."""
    import threading
    read_fd, write_fd = os.pipe()
    got: list = []

    def read():
        try:
            got.extend(_frames(read_fd, len(sizes)))
        except Exception as exc:  # a frame cut or out of order: seen below
            got.append(exc)
            while os.read(read_fd, 1 << 16):  # drained, so the writer is never left waiting
                pass

    reader = threading.Thread(target=read)
    reader.start()
    try:
        out = parallel._Outbox(write_fd)
        for i, n in enumerate(sizes):
            out.send((i, True, np.arange(n, dtype=np.int64)))
        out.close()
    finally:
        os.close(write_fd)  # the reader's end of the frames, whatever it read
        reader.join()
        os.close(read_fd)
    assert [i for i, _, _ in got] == list(range(len(sizes)))
    for (i, ok, value), n in zip(got, sizes):
        assert ok and np.array_equal(value, np.arange(n, dtype=np.int64))

def _pid_job(parent: int, marker: str, job: int) -> int:
    if os.getpid() == parent:  # held until a child has taken a job
        _wait_for(pathlib.Path(marker))
    else:
        part = pathlib.Path(f"{marker}.{os.getpid()}")
        part.write_text(str(os.getpid()))
        part.rename(marker)  # whole when it appears: the parent reads it as soon as it is there
        time.sleep(0.05)  # may still be at it when the caller stops
    return os.getpid()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("stop_early", [False, True])
def test_no_child_outlives_its_call(tmp_path, stop_early):
    """A call's children are stopped when it ends (all results given, or the caller stopped
    early) and waited for, then or at the next call or at exit: no zombie piles up."""
    import functools
    marker = tmp_path / "child"
    results = iter_parallel([0, 1, 2, 3], functools.partial(_pid_job, os.getpid(), str(marker)), workers=2)
    next(results)
    if stop_early:
        results.close()
    else:
        assert len(list(results)) == 3
    child = int(marker.read_text())
    assert child != os.getpid()
    parallel._reap(block=True)
    assert not parallel._unreaped
    assert _gone(child)


@settings(max_examples=examples(20), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), swaps=st.integers(0, 6), bands=st.integers(1, 40))
def test_items_held_ahead_are_taken_as_one_array_would_give_them(seed, swaps, bands):
    """A band takes exactly the items read so far that point into it, in read order, and
    those behind it go late, whatever the reads' sizes and however the items are out of order:
    what one array of the items held would give (the items are kept in the parts they were read in)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    offsets = np.cumsum(rng.integers(0, 300, n)).astype(np.int64)
    for _ in range(swaps):  # units out of order (damage)
        a, b = rng.integers(0, n, 2)
        offsets[a], offsets[b] = offsets[b], offsets[a]
    items = np.zeros(n, np.dtype([("offset", np.int64), ("n", np.int64)]))
    items["offset"], items["n"] = offsets, np.arange(n)
    at = [0]

    def read(k):
        if at[0] >= n:
            return None
        got = items[at[0]:at[0] + k]
        at[0] += len(got)
        return got

    lookups = OffsetLookups(read)
    edges = np.unique(np.linspace(0, int(offsets.max()) + 1, bands + 1).astype(np.int64))
    held = items[:0]  # one array of the items read and not taken
    late = []
    for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist()):
        before = at[0]
        got = lookups.take(lo, hi)
        pending = np.concatenate([held, items[before:at[0]]])
        want = pending[(pending["offset"] >= lo) & (pending["offset"] < hi)]
        late.append(pending[pending["offset"] < lo])
        held = pending[pending["offset"] >= hi]
        assert (got["n"].tolist() if got is not None else []) == want["n"].tolist()
        assert sorted(lookups.items["n"].tolist() if lookups.items is not None else []) == sorted(held["n"].tolist())
    lookups.finish()
    left = lookups.late_items()
    expect = sorted(np.concatenate(late + [held, items[at[0]:]])["n"].tolist())
    assert sorted([] if left is None else left["n"].tolist()) == expect


def _damage(store: pathlib.Path) -> None:
    """A unit's size changed, two units' offsets swapped (out of order: matched late), an
    index entry pointing where no message starts, a body byte flipped."""
    queue = store / "consumequeue" / "OrderTopic"
    with open(queue / "0" / "00000000000000002000", "r+b") as f:
        f.seek(3 * 20 + 8)
        size = struct.unpack(">i", f.read(4))[0]
        f.seek(3 * 20 + 8)
        f.write(struct.pack(">i", size + 1))
    with open(queue / "1" / "00000000000000000000", "r+b") as f:  # unit 95 points bands behind
        f.seek(5 * 20)
        a = f.read(8)
        f.seek(95 * 20)
        b = f.read(8)
        f.seek(5 * 20)
        f.write(b)
        f.seek(95 * 20)
        f.write(a)
    index = list_index_files(store).open_all()
    target = index[len(index) // 2]
    slots, path = target.hash_slot_num, target.path
    for f in index:
        f.close()
    with open(path, "r+b") as f:
        at = 40 + 4 * slots + 5 * 20 + 4  # entry 6's phyOffset
        f.seek(at)
        phy = struct.unpack(">q", f.read(8))[0]
        f.seek(at)
        f.write(struct.pack(">q", phy + 1))
    segment = sorted((store / "commitlog").iterdir())[2]
    with open(segment, "r+b") as f:
        f.seek(4000)
        byte = f.read(1)
        f.seek(4000)
        f.write(bytes([byte[0] ^ 0xFF]))


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    store = tmp_path_factory.mktemp("overheads") / "store"
    copy_tree(V4 / "basic" / "store", store)
    _damage(store)
    return store


def _findings(store: pathlib.Path, jobs: int) -> list:
    return [(f.id, f.to_json()) for f in Verify(store, VerifyOptions(jobs=jobs)).findings()]


def test_two_processes_give_what_one_gives_on_damage(damaged, monkeypatch):
    """verify --jobs 2 (bands of 128 KiB: both processes checking, the queues' and index's
    items matched band by band, late ones checked again) reports exactly what --jobs 1
    reports, the queue, index and CRC damage included. (Clean stores: tests/test_verify_split.py.)"""
    monkeypatch.setattr(verify_commitlog, "VERIFY_SPLIT", 128 << 10)
    monkeypatch.setattr(lookups, "FIRST_CHUNK", 32)  # items read a few at a time: a unit read after its band is late
    monkeypatch.setattr(lookups, "MAX_CHUNK", 64)
    late = []
    recheck = verify_commitlog.CommitLogCheck.recheck

    def spied(log, consumers):
        late.append(sum(len(c.late_offsets()) for c in consumers))
        return recheck(log, consumers)

    monkeypatch.setattr(verify_commitlog.CommitLogCheck, "recheck", spied)
    one = _findings(damaged, 1)
    assert _findings(damaged, 2) == one
    assert late[0] > 0 and late[1] == late[0]  # a unit matched late, a band checked again
    ids = {i for i, _ in one}
    assert {"consumeQueueUnitMismatch", "indexEntryNoRecord"} <= ids, ids
    assert any("crc" in i.lower() for i in ids), ids
