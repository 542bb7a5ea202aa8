"""A full disk under a repair: the engine's writes through its maps are allocated first, so a
full file system is one error line (not a SIGBUS that kills the process without a word); a
repair stopped there says the store is half changed and both ways out; undo gets the store
back on a disk still full; a backup that fails before the first change is taken back; a file
moved in across file systems keeps its holes."""
from __future__ import annotations

import errno
import json
import os
import pathlib
import shutil

import pytest

from conftest import FIXTURES, V4, load_truth
from helpers import cli_runner, copy_tree, tree_fingerprint, writable_copy
from rmqtool.cli.app import app
from rmqtool.engine.store import Store
from rmqtool.errors import ExitCode, StoreAccessError
import rmqtool.recovery.apply as apply_module
import rmqtool.recovery.intent as intent
from rmqtool.store.paths import UNFINISHED_FILE
from rmqtool.engine.producer import producer_message

BASIC = V4 / "basic"
runner = cli_runner()


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _sizes() -> list[str]:
    """The sizes the broker that wrote the basic store ran with (its truth file)."""
    config = load_truth(BASIC / "truth.json")["messageStoreConfig"]["effectiveGetterValues"]
    return ["--cq-size", config["mappedFileSizeConsumeQueue"], "--index-slots", config["maxHashSlotNum"],
            "--index-entries", config["maxIndexNum"]]


def _store_to_dispatch(tmp_path) -> pathlib.Path:
    """The basic store without its consume queues and index: recover --apply writes them all again."""
    root = writable_copy(BASIC / "store", tmp_path / "store")
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    return root


def _full_after(monkeypatch, allowed: int) -> None:
    """The file system fills after ``allowed`` allocations."""
    real = os.posix_fallocate
    calls = [0]

    def allocate(fd, offset, length):
        calls[0] += 1
        if calls[0] > allowed:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, offset, length)
    monkeypatch.setattr(os, "posix_fallocate", allocate)


@pytest.mark.parametrize("allowed", [0, 5, 40])
def test_recover_stopped_by_a_full_disk_says_so_then_is_undone_or_finished(tmp_path, monkeypatch, allowed):
    root = _store_to_dispatch(tmp_path)
    before = tree_fingerprint(root)
    backup = tmp_path / "backup"
    _full_after(monkeypatch, allowed)
    r = _run("recover", root, "--apply", "--backup-dir", backup, *_sizes())
    assert r.exit_code == ExitCode.OPERATIONAL, r.output
    lines = r.stderr.splitlines()
    assert "Traceback" not in r.output and len(lines) == 2, r.stderr
    assert lines[0].startswith(f"rmqtool: error: {root}/") and "No space left on device" in lines[0]
    assert "half changed" in lines[1] and f"rmqtool undo {backup}" in lines[1]
    assert (root / UNFINISHED_FILE).exists()
    saved = tmp_path / "saved"
    copy_tree(root, saved)
    monkeypatch.undo()  # room again
    u = _run("undo", backup)
    assert u.exit_code == 0, u.output
    assert tree_fingerprint(root) == before
    shutil.rmtree(root)
    copy_tree(saved, root)
    again = _run("recover", root, "--apply", *_sizes())
    assert again.exit_code == 0, again.output
    assert _run("recover", root, *_sizes()).exit_code == 0  # nothing left to do
    assert _run("undo", backup).exit_code == 0 and tree_fingerprint(root) == before


def _full_for(*names):
    """json as intent.py uses it, on a disk with no room for records named ``names``."""
    class Full:
        loads = staticmethod(json.loads)

        @staticmethod
        def dump(doc, f, **kw):
            if pathlib.Path(f.name).name.startswith(names):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            json.dump(doc, f, **kw)
    return Full


@pytest.mark.parametrize("full", [(UNFINISHED_FILE,), (UNFINISHED_FILE, intent.INTENT_NAME)],
                         ids=["store", "store-and-backup"])
def test_undo_on_a_disk_still_full_keeps_the_repairs_marker(tmp_path, monkeypatch, full):
    """The undo cannot write its own marker (nor, with the backup on the same disk, its own
    record in the backup): the repair's (of the same backup) stay, and the undo goes on,
    freeing the room the repair took."""
    root = _store_to_dispatch(tmp_path)
    before = tree_fingerprint(root)
    backup = tmp_path / "backup"
    _full_after(monkeypatch, 5)
    assert _run("recover", root, "--apply", "--backup-dir", backup, *_sizes()).exit_code == ExitCode.OPERATIONAL
    monkeypatch.undo()
    monkeypatch.setattr(intent, "json", _full_for(*full))
    u = _run("undo", backup)
    assert u.exit_code == 0, u.output
    assert tree_fingerprint(root) == before  # the marker and its temporary file gone too
    assert sorted(p.name for p in backup.iterdir()) == ["copies", "manifest.json"]  # the record gone, no .tmp


def test_a_backup_that_fails_before_the_first_change_is_taken_back(tmp_path, monkeypatch):
    from rmqtool.recovery.manifest import copy_range
    root = writable_copy(V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file" / "input" / "store",
                         tmp_path / "store")
    before = tree_fingerprint(root)
    copies = [0]

    def full(*args, **kwargs):
        copies[0] += 1
        if copies[0] > 2:
            raise apply_module.StoreAccessError("cannot back up (No space left on device)", args[3])
        return copy_range(*args, **kwargs)
    monkeypatch.setattr(apply_module, "copy_range", full)
    for backup, made in ((tmp_path / "new-backup", True), (tmp_path / "empty-backup", False)):
        if not made:
            backup.mkdir()
        r = _run("recover", root, "--apply", "--backup-dir", backup)
        assert r.exit_code == ExitCode.OPERATIONAL, r.output
        assert "nothing in the store was changed" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
        assert tree_fingerprint(root) == before
        assert (not backup.exists()) if made else not any(backup.iterdir())
    (root / "lock").unlink()  # the engine makes one: gone again with the rest
    before = tree_fingerprint(root)
    copies[0] = 0
    r = _run("recover", root, "--apply", "--backup-dir", tmp_path / "third-backup")
    assert r.exit_code == ExitCode.OPERATIONAL and "nothing in the store was changed" in r.stderr, r.output
    assert tree_fingerprint(root) == before


def test_a_file_moved_in_across_file_systems_keeps_its_holes(tmp_path, monkeypatch):
    source, target = tmp_path / "ready", tmp_path / "target"
    size, at, data = 64 << 20, (5 << 20) + 3, b"units"
    with open(source, "wb") as f:
        f.truncate(size)
        f.seek(at)
        f.write(data)
    target.write_bytes(b"\x07" * (1 << 20))  # the file it replaces

    def cross_device(src, dst):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
    monkeypatch.setattr(os, "replace", cross_device)
    apply_module.move_in(source, target)
    monkeypatch.undo()
    assert target.stat().st_size == size
    with open(target, "rb") as f:
        assert f.read(at) == bytes(at) and f.read(len(data)) == data and f.read() == bytes(size - at - len(data))
    assert target.stat().st_blocks * 512 < 1 << 20  # 64 MiB, almost all of it holes


def _allocations(monkeypatch, kernel: str) -> dict:
    """Every posix_fallocate the engine calls from here on, recorded as it passes through:
    {(device, inode): [(offset, end), ...]}; with the native kernel or the Python paths
    (``kernel``: "native" or "pure")."""
    from rmqtool import native
    if kernel == "pure":
        monkeypatch.setattr(native, "kernel", None)
    real = os.posix_fallocate
    allocated: dict[tuple[int, int], list] = {}

    def allocate(fd, offset, length):
        st = os.fstat(fd)
        allocated.setdefault((st.st_dev, st.st_ino), []).append((offset, offset + length))
        return real(fd, offset, length)
    monkeypatch.setattr(os, "posix_fallocate", allocate)
    return allocated


@pytest.mark.parametrize("kernel", ["native", "pure"])
@pytest.mark.parametrize("many", [False, True])
def test_every_byte_the_engine_writes_through_a_map_was_allocated_first(tmp_path, monkeypatch, kernel, many):
    """Appends one at a time (the record through the commit log's map) or many at once (pwrite),
    dispatched to consume queues and the index, then closed (the checkpoint), by the native
    kernel and by the Python paths: each file's non-zero bytes lie in ranges allocated before
    (a write into a hole of a full disk is a SIGBUS)."""
    allocated = _allocations(monkeypatch, kernel)
    root = tmp_path / "store"
    with Store.open(root, writable=True, commitlog_size=1 << 20, cq_size=6000) as store:
        messages = [producer_message(f"T{i % 3}", b"x" * (i % 700), keys=f"k{i}") for i in range(3000)]
        if many:
            store.append_many(messages)
        else:
            for m in messages:
                store.append(m)
    files = [p for p in root.rglob("*") if p.is_file() and p.name not in ("lock", "abort")]
    tops = [p.relative_to(root).parts[0] for p in files]
    assert set(tops) >= {"commitlog", "consumequeue", "index", "checkpoint"} and tops.count("consumequeue") >= 3
    for path in files:
        if many and path.parent.name == "commitlog":
            continue  # its records written with pwrite, which allocates as it writes
        st = path.stat()
        # the blocks (of 4 KiB here) that hold any byte of each range
        ranges = [(lo - lo % 4096, hi) for lo, hi in allocated.get((st.st_dev, st.st_ino), [])]
        data = path.read_bytes()
        for page in range(0, len(data), 4096):
            if data[page:page + 4096].count(0) != len(data[page:page + 4096]):
                assert any(lo <= page and page + min(4096, len(data) - page) <= hi for lo, hi in ranges), \
                    (path, page)


@pytest.mark.parametrize("kernel", ["native", "pure"])
def test_what_is_allocated_ahead_stays_in_proportion_to_what_is_written(tmp_path, monkeypatch, kernel):
    """Many queues of a few units each, and one of many: each file's allocated ranges end
    within twice its written bytes, ALLOCATE_AHEAD past them at most, in whole pages. A MiB
    ahead of every queue file made a store of 8,000 small queues take 8 GB, and every reader
    read each file's MiB of zeros."""
    from rmqtool.engine.mapped_file import ALLOCATE_AHEAD, OS_PAGE_SIZE
    allocated = _allocations(monkeypatch, kernel)
    root = tmp_path / "store"
    cq_size = 300_000 * 20  # the broker's default consume queue file
    with Store.open(root, writable=True, commitlog_size=64 << 20, cq_size=cq_size) as store:
        store.append_many([producer_message(f"Small{i}", b"x" * 100, queue_id=0) for i in range(40)])
        # 1.1 MB of units: past the cap
        store.append_many([producer_message("Big", b"y" * 100, queue_id=0) for _ in range(55_000)])
    queues = sorted((root / "consumequeue").rglob("0" * 20))
    assert len(queues) == 41
    for path in queues:
        st = path.stat()
        written = len(path.read_bytes().rstrip(b"\0"))
        limit = min(cq_size, -(-min(2 * written, written + ALLOCATE_AHEAD) // OS_PAGE_SIZE) * OS_PAGE_SIZE)
        assert 0 < max(hi for _lo, hi in allocated[(st.st_dev, st.st_ino)]) <= limit, (path, written)
        assert st.st_blocks * 512 <= limit


def test_append_many_stopped_by_a_full_disk_lists_what_it_appended(tmp_path, monkeypatch):
    """The run's first group goes in; the disk fills in the second (a new index file). One
    line says so and how many were appended, and every one of them was listed (the rows are
    flushed, and the store's close, failing on the same full disk, does not hide the error)."""
    messages = tmp_path / "messages.jsonl"
    messages.write_text("".join(json.dumps({"topic": "T", "body": "x" * 100, "keys": f"k{i}"}) + "\n"
                                for i in range(3000)))
    calls = [0]
    real_many = Store.append_many

    def counted(self, *args, **kwargs):
        calls[0] += 1
        return real_many(self, *args, **kwargs)
    real = os.posix_fallocate

    def allocate(fd, offset, length):
        if calls[0] >= 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, offset, length)
    monkeypatch.setattr(Store, "append_many", counted)
    monkeypatch.setattr(os, "posix_fallocate", allocate)
    root = tmp_path / "store"
    r = _run("append", root, "--create", "--from-jsonl", messages, "--index-slots", 100, "--index-entries", 1500)
    monkeypatch.undo()
    assert r.exit_code == ExitCode.OPERATIONAL, r.output
    assert len(r.stderr.splitlines()) == 1 and "No space left on device" in r.stderr, r.stderr
    listed = [json.loads(line) for line in r.stdout.splitlines()]
    assert f"; {len(listed)} message(s) were appended and listed before it" in r.stderr
    assert len(listed) == 1000  # the first group: its rows all out
    dumped = _run("dump", "commitlog", root, "--body", "none", "-f", "jsonl")
    in_log = {json.loads(line)["commit_log_offset"] for line in dumped.stdout.splitlines()}
    assert {row["commit_log_offset"] for row in listed} <= in_log


def test_recover_to_a_new_directory_keeps_holes_and_a_failed_copy_leaves_nothing(tmp_path, monkeypatch):
    """QMQ's segments are 1 GiB files mostly of holes: the copy --to repairs keeps them holes.
    A copy that fails half way (its disk full) leaves neither TO nor its partial copy."""
    from helpers import expand_store
    import rmqtool.recovery.manifest as manifest
    store = expand_store(FIXTURES / "qmq" / "crash" / "e-deleted-consumerlog-file" / "input", tmp_path / "store")
    apparent = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    to = tmp_path / "repaired"
    r = _run("recover", store, "--apply", "--to", to)
    assert r.exit_code == 0, r.output
    on_disk = sum(p.stat().st_blocks * 512 for p in to.rglob("*") if p.is_file())
    assert apparent > 1 << 30 and on_disk < apparent // 1000, (on_disk, apparent)
    real, copies = manifest.copy_sparse, [0]

    def full(source, target):
        copies[0] += 1
        if copies[0] > 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(source, target)
    monkeypatch.setattr(manifest, "copy_sparse", full)
    failed = tmp_path / "full"
    r = _run("recover", store, "--apply", "--to", failed)
    assert r.exit_code == ExitCode.OPERATIONAL, r.output
    assert len(r.stderr.splitlines()) == 1 and "No space left on device" in r.stderr, r.stderr
    assert not failed.exists() and not list(tmp_path.glob("full*"))


def test_salvage_to_a_new_store_stopped_by_a_full_disk_leaves_nothing(tmp_path, monkeypatch):
    store = writable_copy(V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file" / "input" / "store",
                          tmp_path / "store")
    _full_after(monkeypatch, 3)
    to = tmp_path / "salvaged"
    r = _run("salvage", store, "--to-store", to)
    assert r.exit_code == ExitCode.OPERATIONAL, r.output
    assert len(r.stderr.splitlines()) == 1 and "No space left on device" in r.stderr, r.stderr
    assert not list(tmp_path.glob("salvaged*"))
    monkeypatch.undo()
    again, whole = _run("salvage", store, "--to-store", to), _run("salvage", store, "--to-store", tmp_path / "whole")
    assert again.exit_code == whole.exit_code != ExitCode.OPERATIONAL, again.output
    assert tree_fingerprint(to / "commitlog") == tree_fingerprint(tmp_path / "whole" / "commitlog")


def test_a_qmq_backup_that_fails_before_the_first_change_is_taken_back(tmp_path, monkeypatch):
    from helpers import expand_store
    import rmqtool.engine.qmq.apply as qmq_apply
    store = expand_store(FIXTURES / "qmq" / "crash" / "e-deleted-consumerlog-file" / "input", tmp_path / "store")
    before = tree_fingerprint(store)

    def full(ready, parts, size):  # the rebuilt consumer log, staged in the backup
        raise apply_module.StoreAccessError("cannot stage (No space left on device)", ready)
    monkeypatch.setattr(qmq_apply, "_write_file", full)
    backup = tmp_path / "backup"
    r = _run("recover", store, "--apply", "--backup-dir", backup)
    assert r.exit_code == ExitCode.OPERATIONAL, r.output
    assert "nothing in the store was changed" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert tree_fingerprint(store) == before and not backup.exists()


def test_a_manifest_that_cannot_be_written_leaves_no_temporary_file(tmp_path, monkeypatch):
    """A full disk at the manifest (the repair's last record, after every change): its
    temporary file stayed, holding the room an undo or a finish on that disk needs."""
    import rmqtool.recovery.manifest as manifest

    class Full:
        @staticmethod
        def dump(doc, f, **kw):
            f.write("{")  # the room taken, then no more
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    root = _store_to_dispatch(tmp_path)
    backup = tmp_path / "backup"
    r = _run("recover", root, "--apply", "--backup-dir", backup, *_sizes())
    assert r.exit_code == 0, r.output
    written = manifest.read_manifest(backup)
    monkeypatch.setattr(manifest, "json", Full)
    with pytest.raises(StoreAccessError, match="cannot write the manifest"):
        manifest.write_manifest(backup, written)
    assert not (backup / "manifest.json.tmp").exists()
