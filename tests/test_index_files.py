"""Index files as the reader meets them: geometry told from the contents with a few bounded
reads (one implementation, the engine's too), memory that never follows a file's size,
headers that cannot be right, and dump refusing what is not an index."""
from __future__ import annotations

import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from conftest import REPO, V4, load_truth
from rmqtool.cli.app import app
from rmqtool.engine.producer import producer_message
from rmqtool.engine.index_writer import IndexServiceWriter
from rmqtool.engine.store import Store
from rmqtool.engine.store_sizes import OPTION, Size, index_geometry
from rmqtool.errors import FormatError, UsageError
from rmqtool.formats.indexfile import (DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, HEADER_INDEX_COUNT_POSITION,
                                       build_key, entry_position, index_file_size, index_key_hash, slot_position)
from rmqtool.query.by_key import query_by_key
from rmqtool.store import indexfile
from rmqtool.store.indexfile import IndexFile, infer_index_geometry, list_index_files

DEFAULT = (DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM)
T0 = 1_700_000_000_000


def index_sizes(directory, slots, entries) -> tuple[int, int]:
    """index_geometry's values for plain numbers given (or None)."""
    found = index_geometry(directory, Size(slots, OPTION, f"--index-slots {slots}") if slots is not None else None,
                           Size(entries, OPTION, f"--index-entries {entries}") if entries is not None else None)
    return found[0].value, found[1].value


def _store_with_keys(root, n: int = 20, **sizes) -> list[tuple[int, str]]:
    """An engine store of n messages with keys k0..k4, from the commit log's start or after
    some messages with no keys (so the index's first offset is not 0)."""
    now = [T0]
    out = []
    with Store.open(root, writable=True, commitlog_size=64 * 1024, cq_size=20 * 100, clock=lambda: now[0],
                    **sizes) as store:
        store.append(producer_message("T", b"no keys", generate_uniq_key=False))
        for i in range(n):
            now[0] += 1000
            r = store.append(producer_message("T", b"x", keys=f"k{i % 5}", generate_uniq_key=False))
            out.append((r.wrote_offset, f"k{i % 5}"))
    return out


@pytest.fixture(scope="module")
def default_store(tmp_path_factory):
    """A store whose one index file has the broker's default size (420 MB, sparse)."""
    root = tmp_path_factory.mktemp("default") / "store"
    written = _store_with_keys(root)
    (path,) = (root / "index").iterdir()
    assert path.stat().st_size == index_file_size(*DEFAULT)
    return root, path, written


def _damage(path, position: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(data)


def _damaged_default_store(root, position: int, data: bytes):
    """A new default store (its index file sparse, as the broker leaves it) with bytes changed."""
    written = _store_with_keys(root)
    (index,) = (root / "index").iterdir()
    _damage(index, position, data)
    return index, written


class _CountingPread:
    def __init__(self, real):
        self.real, self.total, self.largest = real, 0, 0

    def __call__(self, fd, n, position):
        data = self.real(fd, n, position)
        self.total += len(data)
        self.largest = max(self.largest, n)
        return data


@pytest.fixture
def reads(monkeypatch):
    counter = _CountingPread(os.pread)
    monkeypatch.setattr(os, "pread", counter)
    return counter


# --- geometry -------------------------------------------------------------------------------

def test_default_file_geometry_takes_a_few_small_reads(default_store, reads):
    root, path, written = default_store
    with IndexFile(path) as f:
        assert (f.hash_slot_num, f.index_num) == DEFAULT and f.findings == []
    assert reads.total < 16 << 10


def test_one_changed_byte_in_entry_0_is_refused_after_bounded_reads(tmp_path, reads):
    """Entry 0 is never written: with it changed no geometry fits, and the search for one
    reads in windows, skips a sparse file's holes and stops where entry 1 can no longer be
    (it used to read the whole file, for every slot count: 44 s for `info`)."""
    index, _ = _damaged_default_store(tmp_path / "store", entry_position(DEFAULT_MAX_HASH_SLOT_NUM, 0) + 7, b"\x01")
    dense = tmp_path / "dense" / index.name  # a copied store: no holes to skip
    dense.parent.mkdir()
    shutil.copyfile(index, dense)
    for path, most in ((index, 4 * indexfile.READ_WINDOW), (dense, indexfile.MAX_SEARCHED + 4 * indexfile.READ_WINDOW)):
        reads.total = reads.largest = 0
        with pytest.raises(FormatError) as info:
            IndexFile(path)
        assert str(path) in info.value.one_line() and "\n" not in info.value.one_line()
        assert reads.largest <= indexfile.READ_WINDOW + 8
        assert reads.total < most
    listing = list_index_files(tmp_path / "store")
    assert listing.open_all() == [] and [f.id for f in listing.findings] == ["indexFileUnreadable"]


def test_iter_slots_and_entries_read_windows_not_the_file(default_store, reads):
    root, path, written = default_store
    with IndexFile(path) as f:
        slots = dict(f.iter_slots())
        entries = list(f.iter_entries())
    assert reads.largest <= indexfile.READ_WINDOW
    assert [e.phy_offset for e in entries] == [o for o, _ in written]
    keys = {k for _, k in written}
    newest = {k: max(n for n, (_, key) in enumerate(written, start=1) if key == k) for k in keys}
    assert slots == {index_key_hash(build_key("T", k)) % DEFAULT_MAX_HASH_SLOT_NUM: n for k, n in newest.items()}


def _limited(code: str, limit: int = 256 << 20) -> subprocess.CompletedProcess:
    """Run code in a child whose address space is capped (a mapped 420 MB file cannot fit)."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], preexec_fn=cap, capture_output=True,
                          text=True, cwd=REPO, timeout=120)


def test_info_and_query_on_a_default_size_index_in_capped_memory(default_store, tmp_path):
    root, path, written = default_store
    damaged = tmp_path / "store"
    _damaged_default_store(damaged, entry_position(DEFAULT_MAX_HASH_SLOT_NUM, 0), b"\xff")
    r = _limited(f"""
        import json, sys
        from typer.testing import CliRunner
        from rmqtool.cli.app import app
        out = {{}}
        for name, store in (("healthy", {str(root)!r}), ("damaged", {str(damaged)!r})):
            info = CliRunner().invoke(app, ["info", store, "--format", "json"])
            query = CliRunner().invoke(app, ["query", store, "--key", "k3", "--topic", "T", "--format", "jsonl"])
            out[name] = [info.exit_code, info.stdout, query.exit_code, query.stdout, query.stderr]
        print(json.dumps(out))
    """)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    expected = [o for o, k in written if k == "k3"]
    for name in ("healthy", "damaged"):
        info_code, info_out, query_code, query_out, query_err = out[name]
        doc = json.loads(info_out)
        found = [json.loads(line)["commit_log_offset"] for line in query_out.splitlines() if line.strip()]
        assert found == expected, (name, query_err)
        if name == "healthy":
            assert [(i["max_hash_slot_num"], i["max_index_num"]) for i in doc["index_files"]] == [DEFAULT]
        else:
            assert doc["index_files"] == []
            assert [x["finding"] for x in doc["findings"]].count("indexFileUnreadable") == 1
            assert "cannot be read" in query_err


def test_geometry_splits_of_the_same_size_are_told_apart_from_a_file_not_starting_at_0(tmp_path):
    """32 slots + 120 entries and 37 slots + 119 entries make files of the same size; here
    the first indexed offset is not 0, so its position locates the entries."""
    written = _store_with_keys(tmp_path / "store", n=30, index_slots=32, index_entries=120)
    (path,) = (tmp_path / "store" / "index").iterdir()
    assert index_file_size(32, 120) == index_file_size(37, 119)
    assert infer_index_geometry(path) == (32, 120)
    with IndexFile(path) as f:
        assert [e.phy_offset for e in f.iter_entries()] == [o for o, _ in written]


def test_geometry_is_refused_when_the_size_cannot_hold_the_header_count(tmp_path):
    path = tmp_path / "20260101000000000"
    header = struct.pack(">qqqqii", T0, T0, 100, 200, 1, 1000)
    path.write_bytes(header + bytes(2000))  # 1000 entries cannot fit in 2000 bytes
    with pytest.raises(FormatError) as info:
        IndexFile(path)
    assert "indexCount 1000" in info.value.message


def test_engine_sizes_come_from_the_same_inference_and_must_agree(tmp_path):
    _store_with_keys(tmp_path / "store", n=10, index_slots=32, index_entries=120)
    directory = tmp_path / "store" / "index"
    assert index_sizes(directory, None, None) == (32, 120)
    assert index_sizes(directory, 32, None) == (32, 120)
    with pytest.raises(UsageError):
        index_sizes(directory, 37, 119)  # the same file size, but not what the entries show
    with pytest.raises(UsageError):
        Store.open(tmp_path / "store", writable=True, index_slots=37, index_entries=119).close()
    writer = IndexServiceWriter(directory, 37, 119)  # the writer on its own asks the same
    with pytest.raises(UsageError):
        writer.load()
    writer = IndexServiceWriter(directory, 32, 120)
    writer.load()
    assert writer.last.index_count == 11
    writer.close()


def test_engine_sizes_of_files_without_entries_come_from_their_size(tmp_path):
    directory = tmp_path / "index"
    directory.mkdir()
    (directory / "20260101000000000").write_bytes(bytes(index_file_size(32, 128)))
    assert index_sizes(directory, None, None) == (32, 128)  # the default 1:4 ratio fits
    assert index_sizes(directory, 37, None) == (37, 127)  # what was given, the rest from the size
    with pytest.raises(UsageError):
        index_sizes(directory, 33, 128)


# --- headers that cannot be right ----------------------------------------------------------

@pytest.mark.parametrize("field,value", [("index_count", -5), ("hash_slot_count", -1), ("hash_slot_count", 500)])
def test_a_header_count_that_cannot_be_right_is_a_finding(store_copy, field, value):
    store = store_copy(V4 / "timekey" / "store")
    victim = sorted((store / "index").iterdir())[-1]
    position = HEADER_INDEX_COUNT_POSITION - (4 if field == "hash_slot_count" else 0)
    with open(victim, "r+b") as f:
        f.seek(position)
        f.write(struct.pack(">i", value))
    with IndexFile(victim) as f:
        assert [x.id for x in f.findings] == ["indexHeaderInvalid"]
        assert f.findings[0].offset == 0 and str(value) in f.findings[0].message
        if field == "index_count":  # the broker loads it as indexCount 1: nothing in it
            assert f.header.loaded_index_count == 1 and list(f.iter_entries()) == []
    listing = list_index_files(store)
    files = listing.open_all()
    assert [x.id for x in listing.findings] == ["indexHeaderInvalid"]  # where info finds it
    for f in files:
        f.close()
    r = CliRunner().invoke(app, ["info", str(store), "--format", "json"])
    assert "indexHeaderInvalid" in [x["finding"] for x in json.loads(r.stdout)["findings"]]


def test_a_negative_index_count_file_is_scanned_in_the_default_mode(store_copy):
    truth = load_truth(V4 / "timekey" / "truth.json")
    store = store_copy(V4 / "timekey" / "store")
    victim = sorted((store / "index").iterdir())[-1]
    with open(victim, "r+b") as f:
        f.seek(HEADER_INDEX_COUNT_POSITION)
        f.write(struct.pack(">i", -1))
    q = next(q for q in truth["queryMessage"] if q["key"] == "Aa" and q["topic"] == "KeyTopic")
    expected = [m["physicalOffset"] for m in truth["truth"]["messages"]
                if m["topic"] == "KeyTopic" and "Aa" in (m.get("keys") or "").split(" ")][-q["maxNum"]:]
    result = query_by_key(store, "Aa", topic="KeyTopic")
    assert [m.commit_log_offset for m in result.messages] == expected
    assert any(victim.name in n and "damaged" in n for n in result.notes)


# --- dump ------------------------------------------------------------------------------------

def test_dump_index_refuses_a_directory_that_is_no_store_or_index_dir():
    commitlog = V4 / "basic" / "store" / "commitlog"
    r = CliRunner().invoke(app, ["dump", "index", str(commitlog)])
    assert r.exit_code == 4 and r.stdout == ""
    assert str(commitlog) in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = CliRunner().invoke(app, ["dump", "index", str(V4 / "basic" / "store" / "index"), "--headers-only"])
    assert r.exit_code == 0 and r.stdout.strip()


def test_slot_and_entry_positions_are_the_formats_arithmetic():
    assert slot_position(0) == 40 and slot_position(3) == 52
    assert entry_position(16, 0) == 40 + 16 * 4 and entry_position(16, 2) == 40 + 64 + 40
    assert index_file_size(16, 400) == entry_position(16, 400) == 8104  # timekey's files
