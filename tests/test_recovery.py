"""The recovery seam: a pure plan, an apply that backs up every byte first, undo, and the
engine's writable open that asks for the plan (refusing, changing nothing, or recovering).

Expected ends come from the broker's own recovery of the crash fixtures (truth.json).
"""
from __future__ import annotations


import hashlib
import json
import os
import pathlib
import shutil

import pytest
from typer.testing import CliRunner

from conftest import V4, V5, load_truth
from helpers import copy_tree, read_at, writable_copy
from rmqtool.cli.app import app
from rmqtool.engine.producer import producer_message
from rmqtool.formats.consumequeue import BATCH_CQ_STORE_UNIT_SIZE
from rmqtool.engine.store import Store
from rmqtool.errors import RecoveryNeeded
import rmqtool.recovery.apply as apply_module
from rmqtool.recovery.apply import apply_plan
from rmqtool.recovery.plan import plan_recovery
from rmqtool.recovery.undo import undo
from rmqtool.recovery.manifest import read_manifest
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.consumequeue import find_queue_end, open_consume_queues
from rmqtool.store.message import Message
from rmqtool.store.lock import is_locked
from rmqtool.store.segments import discover
from rmqtool.store.unfinished import read_unfinished

SMALL = dict(commitlog_size=32 * 1024, cq_size=400, index_slots=32, index_entries=120)

# (fixture dir, variant): input stores whose damage lies where the plan looks (the last
# segment holding data, the consume queues); the broker recovered each (loadOk) and its
# truth.json holds the commit log's max offset afterwards. e2/e3 put damage further back,
# and b1/c3 hold files the broker refuses to load.
CRASH = [(V4 / "crash", v) for v in ("a-as-is", "b2-garbage-tail-of-last-message", "b3-zeroed-last-3-messages",
                                     "c1-delete-cq-queue-dir", "c2-delete-last-cq-file", "c4-delete-first-cq-file",
                                     "d-remove-index-dir", "e1-corrupt-body-in-last-commitlog-file")] + \
        [(V4 / "crash-fast", v) for v in ("a-as-is", "c1-delete-cq-queue-dir", "d-remove-index-dir")] + \
        [(V5 / "crash5", v) for v in ("a-as-is", "b-garbled-last-message", "c-checkpoint-zeroed",
                                      "d-abort-removed-garbled-last-message")]
DAMAGED = [c for c in CRASH if c[1].startswith(("b", "e", "d-abort"))]


def _hashes(root: pathlib.Path) -> dict:
    """Every file's sha256 and permission bits."""
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mode)
            for p in sorted(root.rglob("*")) if p.is_file()}


def _state(root: pathlib.Path) -> dict:
    """Every file's and directory's bytes (files), size and mtime: what a refusal must not touch."""
    out = {}
    for p in sorted([root, *root.rglob("*")]):
        st = p.stat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
        out[str(p.relative_to(root))] = (digest, st.st_size if p.is_file() else None, st.st_mtime_ns, st.st_mode)
    return out


def _max_offset(root: pathlib.Path) -> int:
    with Store.open(root) as s:
        return s.max_offset


@pytest.mark.parametrize("base,variant", CRASH, ids=lambda x: x if isinstance(x, str) else x.name)
def test_plan_and_apply_end_the_commit_log_where_the_broker_did(base, variant, tmp_path):
    truth = load_truth(base / variant / "truth.json")
    root = writable_copy(base / variant / "input" / "store", tmp_path / "store")
    before = _hashes(root)
    plan = plan_recovery(root)
    assert _hashes(root) == before  # planning writes nothing
    assert plan.abnormal == truth["abortFileExistedBeforeLoad"] and not plan.is_empty
    assert plan.commit_log_end == truth["truth"]["commitlog"]["maxPhyOffset"]
    json.dumps(plan.to_json())  # printable as it is
    applied = apply_plan(plan, tmp_path / "backup")
    assert applied.bytes_zeroed == plan.bytes_zeroed and applied.files_deleted == plan.files_deleted
    assert _max_offset(root) == truth["truth"]["commitlog"]["maxPhyOffset"]
    again = plan_recovery(root)  # only the abort marker is left: re-dispatch is the engine's
    assert not again.actions and again.commit_log_end == plan.commit_log_end
    assert [f.id for f in again.findings] == (["abortFilePresent"] if plan.abnormal else [])


@pytest.mark.parametrize("base,variant", DAMAGED, ids=lambda x: x if isinstance(x, str) else x.name)
def test_apply_then_undo_gives_every_byte_back(base, variant, tmp_path):
    root = writable_copy(base / variant / "input" / "store", tmp_path / "store")
    before = _hashes(root)
    plan = plan_recovery(root)
    assert plan.actions
    applied = apply_plan(plan, tmp_path / "backup")
    assert _hashes(root) != before
    manifest = read_manifest(applied.backup_dir)
    changed = [e for e in manifest.entries if e.action not in ("restore", "tail")]  # kept for dispatch
    assert len(changed) == len(plan.actions) and manifest.plan == plan.to_json()
    restored = undo(applied.backup_dir)
    assert _hashes(root) == before
    assert restored.bytes_restored == sum(e.end - e.start for e in manifest.entries)


def test_undo_puts_deleted_files_back_and_checks_its_copies(tmp_path):
    """e1: the damaged record's consume queue units go, whole files with them; undo brings
    the files back, and refuses a backup whose copy no longer matches its sha256."""
    root = writable_copy(V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file" / "input" / "store", tmp_path / "store")
    before = _hashes(root)
    plan = plan_recovery(root)
    assert plan.files_deleted and plan.queue_cuts
    applied = apply_plan(plan, tmp_path / "backup")
    assert not all(pathlib.Path(a.path).exists() for a in plan.actions if a.kind == "delete")
    copy = applied.backup_dir / read_manifest(applied.backup_dir).entries[0].copy
    good = copy.read_bytes()
    copy.write_bytes(b"\x01" + good[1:])
    from rmqtool.errors import CorruptData
    with pytest.raises(CorruptData):
        undo(applied.backup_dir)
    copy.write_bytes(good)
    undo(applied.backup_dir)
    assert _hashes(root) == before


def test_the_manifest_is_written_before_the_store_changes(tmp_path, monkeypatch):
    """An apply cut short after the manifest can be undone to the last byte."""
    import rmqtool.recovery.apply as apply_module
    root = writable_copy(V4 / "crash" / "b2-garbage-tail-of-last-message" / "input" / "store", tmp_path / "store")
    before = _hashes(root)
    plan = plan_recovery(root)
    calls = []

    def fail_after_first(path, start, end):
        if calls:
            raise OSError("cut short")
        calls.append(path)
        real(path, start, end)
    real = apply_module.write_zeros
    monkeypatch.setattr(apply_module, "write_zeros", fail_after_first)
    assert sum(a.kind == "zero" for a in plan.actions) >= 2
    with pytest.raises(OSError):
        apply_plan(plan, tmp_path / "backup")
    assert _hashes(root) != before
    undo(tmp_path / "backup")
    assert _hashes(root) == before


@pytest.mark.parametrize("base,variant", CRASH, ids=lambda x: x if isinstance(x, str) else x.name)
def test_recover_twice_the_second_finds_nothing(base, variant, tmp_path):
    """As e2fsck's tests do: after a recovering open and a clean close the plan is empty,
    and a plain writable open works."""
    truth = load_truth(base / variant / "truth.json")
    config = truth["messageStoreConfig"]["effectiveGetterValues"]
    root = writable_copy(base / variant / "input" / "store", tmp_path / "store")
    # the broker's index geometry: d-remove-index-dir has no index file left to show it
    with Store.open(root, writable=True, recover=True, backup_dir=tmp_path / "backup",
                    index_slots=config["maxHashSlotNum"], index_entries=config["maxIndexNum"]) as store:
        assert store.recovery is not None and store.max_offset == truth["truth"]["commitlog"]["maxPhyOffset"]
        assert store.dispatch_behind_bytes == 0
    plan = plan_recovery(root)
    assert plan.is_empty, plan.summary()
    with Store.open(root, writable=True) as store:
        assert store.recovery is None


@pytest.mark.parametrize("base,variant", [CRASH[0], CRASH[2], CRASH[-1]], ids=lambda x: x if isinstance(x, str)
                         else x.name)
def test_a_refused_open_changes_nothing(base, variant, tmp_path):
    root = writable_copy(base / variant / "input" / "store", tmp_path / "store")
    before = _state(root)
    with pytest.raises(RecoveryNeeded) as err:
        Store.open(root, writable=True)
    assert err.value.exit_code == 3 and err.value.plan.findings
    res = CliRunner().invoke(app, ["append", str(root), "--topic", "T", "--body", "x"])
    assert res.exit_code == 3 and "--recover" in res.stderr
    assert _state(root) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]  # no backup made either
    (root / "lock").unlink()  # a store without a lock file: refused before one is made
    before = _state(root)
    with pytest.raises(RecoveryNeeded):
        Store.open(root, writable=True)
    assert _state(root) == before


def _store_with_torn_last_record(root: pathlib.Path):
    """Three messages; the last one's header kept (totalSize, magic), the rest zeroed: what a
    crash leaves when only the first page of a record reached the disk."""
    with Store.open(root, writable=True, **SMALL) as store:
        rs = [store.append(producer_message("T", b"message %d" % i, keys=f"k{i}")) for i in range(3)]
    seg = root / "commitlog" / "00000000000000000000"
    with open(seg, "r+b") as f:
        f.seek(rs[-1].wrote_offset + 8)
        f.write(bytes(rs[-1].wrote_bytes - 8))
    return rs


def test_append_refuses_a_torn_last_record(tmp_path):
    """The bug: append wrote after a torn last record and exited 0, and the broker's recovery
    (CRC checked, checkCRCOnRecover) would then cut the log at the torn record, losing what
    was appended. Refused now, changing nothing; --recover cuts where the broker cuts."""
    root = tmp_path / "store"
    rs = _store_with_torn_last_record(root)
    before = _state(root)
    runner = CliRunner()
    res = runner.invoke(app, ["append", str(root), "--topic", "T", "--body", "after"])
    assert res.exit_code == 3, res.output
    assert "recordTorn" in res.stderr and f"rmqtool append {root} --recover" in res.stderr
    assert _state(root) == before
    res = runner.invoke(app, ["append", str(root), "--topic", "T", "--body", "after", "--recover"])
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout)
    assert row["commit_log_offset"] == rs[-1].wrote_offset and row["queue_offset"] == 2
    messages = [m for m in CommitLog(root / "commitlog").scan() if isinstance(m, Message)]
    assert [m.body for m in messages] == [b"message 0", b"message 1", b"after"]
    assert all(m.body_crc_ok for m in messages)
    assert plan_recovery(root).is_empty
    (backup,) = tmp_path.glob("store.recovery-*")  # beside the store, named by the time
    from rmqtool.errors import StoreChangedSince
    with pytest.raises(StoreChangedSince):  # the append came after the recovery: undo would destroy it
        undo(backup)
    undo(backup, force=True)
    assert read_at(CommitLog(root / "commitlog"), rs[0].wrote_offset).body == b"message 0"


def test_units_past_the_commit_log_are_cut_and_dispatched_again(tmp_path):
    """A clean store whose consume queue points past the commit log's end (the broker's load
    truncates such units): planned, refused, then recovered and re-dispatched."""
    root = tmp_path / "store"
    rs = _store_with_torn_last_record(root)
    plan = plan_recovery(root)
    (cut,) = plan.queue_cuts
    assert (cut.topic, cut.max_offset_before, cut.max_offset) == ("T", 3, 2)
    assert cut.max_physic_offset == rs[1].wrote_offset + rs[1].wrote_bytes
    with Store.open(root, writable=True, recover=True, backup_dir=tmp_path / "b") as store:
        r = store.append(producer_message("T", b"again", keys="k9"))
    cq = open_consume_queues(root).find("T", 0)
    assert [u.commit_log_offset for u in cq.iter_units()] == [rs[0].wrote_offset, rs[1].wrote_offset, r.wrote_offset]


def test_find_queue_end_agrees_with_the_readers_and_the_broker():
    """Where each queue's units end, and where the broker's load cuts them, on the crash
    inputs: the same as the reader's ends; after the cut, the broker's max offsets."""
    for base, variant in CRASH[:8]:
        root = base / variant / "input" / "store"
        truth = load_truth(base / variant / "truth.json")
        end = truth["truth"]["commitlog"]["maxPhyOffset"]
        for q in open_consume_queues(root, end).queues:
            qe = find_queue_end(discover(q.directory).segments, q.mapped_file_size, end)
            assert (qe.written_end, qe.end) == (q.recovered_end, q.end), (variant, q.topic, q.queue_id)
            assert qe.units_cut == (q.recovered_end - q.end) // 20
            if qe.end > 0:
                assert 0 < qe.max_physic_offset <= end


def test_abnormal_redispatch_starts_where_the_broker_rescans(tmp_path):
    """crash/c1: the broker rebuilt the deleted queue from the segment its abnormal recovery
    rescanned (fill units up to the first message of that segment): the plan starts there."""
    root = V4 / "crash" / "c1-delete-cq-queue-dir" / "input" / "store"
    plan = plan_recovery(root)
    truth = load_truth(V4 / "crash" / "c1-delete-cq-queue-dir" / "truth.json")
    entries = truth["truth"]["consumeQueues"]["CrashTopic"]["1"]["entries"]
    first_real = next(e[1] for e in entries if e[2] != 2**31 - 1)
    size = truth["messageStoreConfig"]["effectiveGetterValues"]["mappedFileSizeCommitLog"]
    assert plan.redispatch_from == first_real - first_real % size > 0
    assert "abnormal" in plan.redispatch_reason
    fast = plan_recovery(V4 / "crash-fast" / "a-as-is" / "input" / "store")
    assert fast.redispatch_from == 0 and "from the first file" in fast.redispatch_reason


def test_the_undo_command_puts_back_what_append_recover_changed(tmp_path):
    """The backup a `--recover` append names is undone by the command it names."""
    base, variant = DAMAGED[0]
    root = writable_copy(base / variant / "input" / "store", tmp_path / "store")
    before = _hashes(root)
    plan = plan_recovery(root)
    backup = tmp_path / "backup"
    apply_plan(plan, backup)
    assert _hashes(root) != before
    res = CliRunner().invoke(app, ["undo", str(backup), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["bytes_restored"] == sum(e.end - e.start for e in read_manifest(backup).entries)
    assert _hashes(root) == before
    # a backup that is not one is a clean error, not a traceback
    res = CliRunner().invoke(app, ["undo", str(tmp_path / "nothing-here")])
    assert res.exit_code in (4, 8) and "Traceback" not in res.output


def _holder_seen_by_another_process(lock: pathlib.Path) -> int | None:
    """Who holds the lock, asked by a forked child (which holds none of this process's locks)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write_fd, str(is_locked(lock)).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    answer = os.read(read_fd, 64).decode()
    os.close(read_fd)
    os.waitpid(pid, 0)
    return None if answer == "None" else int(answer)


@pytest.mark.parametrize("held", [b"junk and more", b"", b"lo", b"lock"], ids=["other", "empty", "short", "lock"])
def test_undo_gives_back_the_lock_file_the_writer_marked(held, tmp_path, monkeypatch):
    """recover --apply takes the store as the broker does, writing ``lock`` into the lock
    file: a lock file that held other bytes (or fewer) is backed up first, and undo gives
    every byte back, the lock file's too. One that held ``lock`` costs no backup copy."""
    base, variant = DAMAGED[0]
    root = writable_copy(base / variant / "input" / "store", tmp_path / "store")
    (root / "lock").write_bytes(held)
    before = _hashes(root)
    backup = tmp_path / "backup"
    holders = []
    carry_out = apply_module._carry_out

    def seen_from_outside(*args):  # the backup read the lock file through the descriptor that holds it
        holders.append(_holder_seen_by_another_process(root / "lock"))
        return carry_out(*args)

    monkeypatch.setattr(apply_module, "_carry_out", seen_from_outside)
    res = CliRunner().invoke(app, ["recover", str(root), "--apply", "--assume-defaults", "--backup-dir", str(backup)])
    assert res.exit_code == 0, res.output
    assert holders == [os.getpid()]  # still held when the store changes
    assert (root / "lock").read_bytes()[:4] == b"lock"
    kept = [e for e in read_manifest(backup).entries if e.file == "lock"]
    assert len(kept) == (held != b"lock")
    res = CliRunner().invoke(app, ["undo", str(backup)])
    assert res.exit_code == 0, res.output
    assert _hashes(root) == before


def test_apply_loads_the_queues_from_where_the_broker_s_walk_started(tmp_path):
    """ConsumeQueue.recover walks from the third-last file; when recovery deletes files after
    a queue's end, the third-last of those left is an earlier file, whose zeroed units the
    broker's walk never read. The writer loading the recovered store walks from where recovery
    did: --apply once stopped there half done ("a consume queue file after the end")."""
    base, variant = V5 / "crash5", "a-as-is"
    root = writable_copy(base / variant / "input" / "store", tmp_path / "store")
    queue = root / "consumequeue" / "CrashTopic" / "1"
    files = sorted(queue.iterdir())
    assert len(files) >= 4  # the walk starts past the first file
    with open(files[0], "r+b") as f:  # three units zeroed in the first file: never walked
        f.seek(11 * 20)
        f.write(bytes(60))
    with open(files[-2], "r+b") as f:  # a unit zeroed in the second-last: the queue ends there
        f.seek(5 * 20)
        f.write(bytes(20))
    before = _hashes(root)
    plan = plan_recovery(root)
    assert str(files[-1]) in {a.path for a in plan.actions}  # the last file goes
    want = plan.outcome.queues["CrashTopic/1"].max_offset
    backup = tmp_path / "backup"
    res = CliRunner().invoke(app, ["recover", str(root), "--apply", "--assume-defaults", "--backup-dir", str(backup)])
    assert res.exit_code == 0, res.output
    assert read_unfinished(root) is None  # finished, not stopped half done
    size = files[0].stat().st_size
    walked = find_queue_end(discover(queue, mapped_file_size=size).segments, size,
                            walk_from=plan.outcome.queues_walked_from[("CrashTopic", 1)])
    assert walked.end // 20 == want  # the units the plan said the queue holds after the start
    res = CliRunner().invoke(app, ["undo", str(backup)])
    assert res.exit_code == 0, res.output
    assert _hashes(root) == before


@pytest.mark.parametrize("queue_offset", [1 << 61, -100], ids=["wraps", "negative"])
def test_apply_refuses_a_queue_offset_that_names_no_file(queue_offset, tmp_path):
    """A damaged queueOffset (the body CRC does not cover it) sends a record to a new queue at
    queue offset x 20 past a Java long, or below 0: the broker names that queue's first file by
    a negative offset. rmqtool does not write such a name (it once wrote a 20-digit name past a
    Java long, a store the broker then refused): the plan says why, and --apply changes nothing."""
    base, variant = V5 / "crash5", "a-as-is"
    root = writable_copy(base / variant / "input" / "store", tmp_path / "store")
    first = min((root / "commitlog").iterdir())
    with open(first, "r+b") as f:  # the first record: queueId (at 12) and queueOffset (at 20)
        f.seek(12)
        f.write((7777).to_bytes(4, "big"))
        f.seek(20)
        f.write(queue_offset.to_bytes(8, "big", signed=True))
    before = _state(root)
    plan = plan_recovery(root)
    why = plan.dispatch_refusal
    assert why and f"queueOffset {queue_offset}" in why and "/7777" in why and plan.to_json()["apply_refused"] == why
    res = CliRunner().invoke(app, ["recover", str(root), "--apply", "--assume-defaults",
                                   "--backup-dir", str(tmp_path / "backup")])
    assert res.exit_code == 3 and "Traceback" not in res.output
    assert _state(root) == before


def _batch_queue_unit_zeroed(tmp_path) -> tuple[pathlib.Path, pathlib.Path]:
    """A copy of the 5.x batch queue store whose queue 1 lost a unit in its last file (the
    plan is empty; the start's dispatch writes that file again); the store and that file."""
    root = writable_copy(V5 / "batchcq" / "store", tmp_path / "store")
    last = sorted((root / "batchconsumequeue" / "BatchCQTopic" / "1").iterdir())[-1]
    with open(last, "r+b") as f:
        f.seek(3 * BATCH_CQ_STORE_UNIT_SIZE)
        f.write(bytes(BATCH_CQ_STORE_UNIT_SIZE))
    return root, last


def test_undo_gives_back_a_batch_queue_file_dispatch_rewrote(tmp_path):
    """A 5.x batch consume queue whose last file lost a unit: the plan cuts it there and the
    start's dispatch writes the units after it again, over bytes the file held. The file is
    kept whole before, as a consume queue's last file is, and undo gives every byte back."""
    root, last = _batch_queue_unit_zeroed(tmp_path)
    before = _hashes(root)
    backup = tmp_path / "backup"
    res = CliRunner().invoke(app, ["recover", str(root), "--apply", "--assume-defaults", "--backup-dir", str(backup)])
    assert res.exit_code == 0, res.output
    assert _hashes(root) != before
    assert any(e.file.endswith(last.name) and e.action == "restore" for e in read_manifest(backup).entries)
    res = CliRunner().invoke(app, ["undo", str(backup)])
    assert res.exit_code == 0, res.output
    assert _hashes(root) == before


def test_apply_refuses_a_topic_that_names_no_directory(tmp_path):
    """A damaged topic (the body CRC does not cover it) with a NUL in it names no consume queue
    directory: the plan refuses --apply before a byte is written (the engine's dispatch once
    stopped on it half done, leaving an interrupted repair)."""
    root = writable_copy(V5 / "crash5" / "a-as-is" / "input" / "store", tmp_path / "store")
    first = min((root / "commitlog").iterdir())
    with open(first, "r+b") as f:  # the first record (IPv4 hosts): its topic follows the body
        f.seek(84)
        body = int.from_bytes(f.read(4), "big")
        f.seek(88 + body + 1 + 2)
        f.write(b"\0")
    before = _state(root)
    plan = plan_recovery(root)
    why = plan.dispatch_refusal
    assert why and "commit log offset 0 " in why and "names no consume queue directory" in why
    res = CliRunner().invoke(app, ["recover", str(root), "--apply", "--assume-defaults",
                                   "--backup-dir", str(tmp_path / "backup")])
    assert res.exit_code == 3 and "Traceback" not in res.output
    assert _state(root) == before and read_unfinished(root) is None


def test_a_dispatch_only_apply_killed_is_undone_or_finished(tmp_path):
    """kill -9 inside recover --apply of a store whose plan is empty but whose dispatch writes
    (and whose lock file held other bytes): undo gives every byte back, and the same command
    again finishes it, after which undo still gives every byte back."""
    import subprocess
    import sys
    root, _ = _batch_queue_unit_zeroed(tmp_path)
    (root / "lock").write_bytes(b"other bytes")
    before = _hashes(root)
    backup = tmp_path / "backup"
    env = dict(os.environ, RMQTOOL_KILL_AFTER="2", PYTHONPATH=str(pathlib.Path(__file__).parents[1]))
    killed = subprocess.run([sys.executable, "-m", "rmqtool", "recover", str(root), "--apply", "--assume-defaults",
                             "--backup-dir", str(backup)], env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    assert read_unfinished(root) is not None
    saved = tmp_path / "killed"
    copy_tree(root, saved)
    assert CliRunner().invoke(app, ["undo", str(backup)]).exit_code == 0
    assert _hashes(root) == before
    shutil.rmtree(root)
    copy_tree(saved, root)
    res = CliRunner().invoke(app, ["recover", str(root), "--apply", "--assume-defaults"])
    assert res.exit_code == 0, res.output
    assert read_unfinished(root) is None
    assert CliRunner().invoke(app, ["undo", str(backup)]).exit_code == 0
    assert _hashes(root) == before


@pytest.mark.parametrize("step", [1, 2, 3])
def test_an_append_recover_killed_in_its_recovery_is_finished_by_the_same_command(step, tmp_path):
    """append --recover killed while its recovery changes the store: the same command again was
    refused (exit 5, "an interrupted recover"), though the README says running it again finishes
    it. It gives the store back from the backup, recovers it afresh into the same backup, and
    appends: the messages after are those of a run never killed, and undo gives back the original."""
    import subprocess
    import sys
    source = V4 / "crash" / "b2-garbage-tail-of-last-message" / "input" / "store"
    root, reference = writable_copy(source, tmp_path / "store"), writable_copy(source, tmp_path / "reference")
    before = _hashes(root)
    args = ["append", "--recover", "-t", "CrashTopic", "--body", "after the kill", "--keys", "k1", "-f", "json"]
    env = dict(os.environ, RMQTOOL_KILL_AFTER=str(step), PYTHONPATH=str(pathlib.Path(__file__).parents[1]))
    killed = subprocess.run([sys.executable, "-m", "rmqtool", args[0], str(root), *args[1:]], env=env,
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9 and read_unfinished(root) is not None, killed.stderr
    backup = pathlib.Path(read_unfinished(root).backup_dir)
    again = CliRunner().invoke(app, [args[0], str(root), *args[1:]])
    assert again.exit_code == 0, again.output
    assert read_unfinished(root) is None and f"the backup is in {backup}" in again.stderr
    done = CliRunner().invoke(app, [args[0], str(reference), *args[1:]])
    assert {k: v for k, v in json.loads(again.stdout).items() if k not in ("msg_id", "uniq_key")} == \
        {k: v for k, v in json.loads(done.stdout).items() if k not in ("msg_id", "uniq_key")}
    assert CliRunner().invoke(app, ["undo", str(backup), "--force"]).exit_code == 0
    assert _hashes(root) == before


def test_apply_prints_its_table_without_error(store_copy):
    """--apply's table (what a person sees) names the store and the backup."""
    from typer.testing import CliRunner

    from rmqtool.cli.app import app
    store = store_copy(V4 / "crash" / "b2-garbage-tail-of-last-message" / "input" / "store")
    r = CliRunner().invoke(app, ["recover", str(store), "--apply"])
    assert r.exit_code == 0, r.stderr
    unwrapped = "".join(r.stdout.split())  # a long path folds anywhere (after a "/", or inside a name)
    assert f"appliedto{store};" in unwrapped and "rmqtoolundo" in unwrapped
    backup = next(store.parent.glob("store.recovery-*"))
    u = CliRunner().invoke(app, ["undo", str(backup)])
    assert u.exit_code == 0 and "ranges_restored" in u.stdout and store.name in u.stdout


@pytest.mark.parametrize("size", [925, 4096 + 512])
def test_a_checkpoint_of_the_wrong_size_gives_the_start_its_fields(tmp_path, size):
    """StoreCheckpoint maps a checkpoint's first 4096 bytes (a shorter file extended with
    zeros) and reads its fields: after a crash, a checkpoint cut short or grown keeps the
    recovery's start file and what check measures of it, as the intact one gives them. The
    simulation read such a file as zeros and walked from the first file."""
    base = V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file" / "input" / "store"
    intact = writable_copy(base, tmp_path / "intact")
    odd = writable_copy(base, tmp_path / "odd")
    with open(odd / "checkpoint", "r+b") as f:
        f.truncate(size)
    plans = [json.loads(CliRunner().invoke(app, ["recover", str(s), "--now", "0", "-f", "json"]).stdout)
             for s in (intact, odd)]
    assert [pathlib.Path(p["start_file"]).name for p in plans] == [pathlib.Path(plans[0]["start_file"]).name] * 2
    assert pathlib.Path(plans[0]["start_file"]).name != f"{0:020d}"  # the case: the checkpoint picks a later file
    assert plans[1]["commit_log"]["recovered_end"] == plans[0]["commit_log"]["recovered_end"]
    measures = []
    for s in (intact, odd):
        rows = map(json.loads, CliRunner().invoke(app, ["check", str(s), "--now", "0", "-f", "jsonl"]).stdout.splitlines())
        measures.append({r["measure"]: r["value"] for r in rows if r["record"] == "check_measure" and r["topic"] is None
                         and r["measure"] in ("recovery_bytes", "unflushed_ms", "written_end")})
    assert measures[1] == measures[0] and set(measures[0]) == {"recovery_bytes", "unflushed_ms", "written_end"}
