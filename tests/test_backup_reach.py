"""recover --apply copies the last file of a queue only when dispatch after the plan reads a
record of its topic, or the plan itself changes the file (recovery/dispatch_reach.py); the
other queues' last files are recorded by size and written end, and the repair's end and
undo check them. A store of 40 topics whose last message is torn: the backup holds the
checkpoint, the index, the abort marker and the one queue file the plan cuts, not 80 queue
files, and undo still gives back every byte. A write into a file the backup does not hold
stops the repair as unfinished and undo refuses it, unless forced."""
from __future__ import annotations

import json
import pathlib

import pytest

from helpers import cli_runner, tree_fingerprint
from rmqtool.cli.app import app
from rmqtool.engine.producer import producer_message
from rmqtool.engine.store import Store
from rmqtool.formats.properties import PROPERTY_INNER_MULTI_DISPATCH
from rmqtool.recovery.dispatch_reach import dispatched_topics
from rmqtool.recovery.plan import plan_recovery

TOPICS = 40


def _run(*argv, code=0):
    r = cli_runner().invoke(app, [str(a) for a in argv])
    assert code is None or r.exit_code == code, (argv, r.exit_code, r.stdout, r.stderr)
    return r


def _torn(root: pathlib.Path, properties=None) -> pathlib.Path:
    """40 topics x 2 queues written by the engine, the last message torn (its second half flipped)."""
    with Store.open(root, writable=True, commitlog_size=1 << 20, cq_size=6000, index_slots=1000,
                    index_entries=4000) as store:
        for i in range(TOPICS * 4):
            last = store.append(producer_message(f"Topic{i % TOPICS}", b"x" * 200, keys=f"k{i}", queue_id=i % 2,
                                                 user_properties=properties if i == TOPICS * 4 - 1 else None))
    segment = sorted((root / "commitlog").iterdir())[-1]
    with open(segment, "r+b") as f:
        f.seek(last.wrote_offset - int(segment.name) + last.wrote_bytes // 2)
        f.write(b"\xff" * 16)
    return root


def _dispatched(root: pathlib.Path, redispatch_from: int, end: int) -> set:
    """The topics of the records from where dispatch starts to the end, as dump reads them."""
    rows = [json.loads(line) for line in _run("dump", "commitlog", root, "-f", "jsonl", code=None).stdout.splitlines()]
    return {r["topic"] for r in rows if redispatch_from <= r["commit_log_offset"] < end}


def test_only_the_queues_dispatch_reaches_are_copied_and_undo_is_exact(tmp_path):
    root = _torn(tmp_path / "store")
    before = tree_fingerprint(root)
    plan = json.loads(_run("recover", root, "-f", "json", code=3).stdout)
    acted = {a["file"] for a in plan["actions"]}
    _run("recover", root, "--apply", "--backup-dir", tmp_path / "backup")
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    topics = _dispatched(root, plan["redispatch_from"], plan["commit_log_end"])
    queues = sorted(p for p in (root / "consumequeue").glob("*/*"))
    kept = {e["file"] for e in manifest["entries"] if e["file"].startswith("consumequeue/")}
    expected = {str(max(q.iterdir()).relative_to(root)) for q in queues
                if q.parent.name in topics or str(max(q.iterdir())) in acted}
    assert kept == expected and len(kept) < len(queues) // 4
    assert sorted(manifest["left_alone"]) == sorted(str(max(q.iterdir()).resolve()) for q in queues
                                                    if str(max(q.iterdir()).relative_to(root)) not in kept)
    _run("undo", tmp_path / "backup")
    assert tree_fingerprint(root) == before


def test_a_write_into_a_queue_file_the_backup_does_not_hold_is_refused_by_undo(tmp_path):
    root = _torn(tmp_path / "store")
    _run("recover", root, "--apply", "--backup-dir", tmp_path / "backup")
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    name, (size, end) = sorted(manifest["left_alone"].items())[0]
    with open(name, "r+b") as f:  # a unit appended after the repair (a broker that ran)
        f.seek(end)
        f.write(b"\x01" * 20)
    r = _run("undo", tmp_path / "backup", code=5)
    assert name in r.stderr and "--force" in r.stderr
    _run("undo", tmp_path / "backup", "--force")
    assert pathlib.Path(name).read_bytes()[end:end + 20] == b"\x01" * 20  # left as it is, as said


def test_a_dispatch_write_the_backup_does_not_hold_leaves_the_repair_unfinished(tmp_path, monkeypatch):
    """The safety net: a write during the repair into a queue file the backup does not hold
    (were the topics read wrong) and the repair is not called done, nor undone unforced."""
    root = _torn(tmp_path / "store")
    queue = max((root / "consumequeue" / "Topic7" / "1").iterdir())
    real = Store._reput

    def reput_and_stray_write(self, plan):
        real(self, plan)
        end = len(queue.read_bytes().rstrip(b"\0"))
        with open(queue, "r+b") as f:
            f.seek(end)
            f.write(b"\x01" * 20)
    monkeypatch.setattr(Store, "_reput", reput_and_stray_write)
    r = _run("recover", root, "--apply", "--backup-dir", tmp_path / "backup", code=8)
    assert "the repair is not finished" in r.stderr and str(queue) in r.stderr and "half changed" in r.stderr
    r = _run("undo", tmp_path / "backup", code=5)
    assert str(queue) in r.stderr


@pytest.mark.parametrize("properties", [None, {PROPERTY_INNER_MULTI_DISPATCH: "%LMQ%one,%LMQ%two"}])
def test_a_record_dispatched_to_other_queues_too_keeps_every_queue(tmp_path, properties):
    root = _torn(tmp_path / "store")
    with Store.open(root, writable=True, recover=True, backup_dir=tmp_path / "b1") as store:
        store.append(producer_message("Topic0", b"y", user_properties=properties))
    (root / "abort").write_bytes(b"")
    plan = plan_recovery(root)
    topics = dispatched_topics(plan)
    if properties is None:
        assert topics is not None and "Topic0" in topics
    else:
        assert topics is None


def test_a_queue_dispatch_reaches_is_kept_as_the_zeros_after_its_last_unit(tmp_path):
    """An abnormal start dispatches the whole file again: every queue is reached. Each consume
    queue's last file is kept as a "tail" entry, the range after its last non-zero byte (the
    units dispatch appends go there), not whole: its copy holds no data. Undo zeroes the units
    written there and gives back every byte."""
    root = _torn(tmp_path / "store")
    (root / "abort").write_bytes(b"")
    behind = max((root / "consumequeue" / "Topic4" / "0").iterdir())
    end = -(-len(behind.read_bytes().rstrip(b"\0")) // 20) * 20
    with open(behind, "r+b") as f:  # its last unit lost: dispatch appends it again, into the tail
        f.seek(end - 20)
        f.write(bytes(20))
    ends = {str(p.relative_to(root)): len(p.read_bytes().rstrip(b"\0")) for p in (root / "consumequeue").rglob("0" * 20)}
    before = tree_fingerprint(root)
    plan = json.loads(_run("recover", root, "-f", "json", code=3).stdout)
    acted = {a["file"] for a in plan["actions"]}
    _run("recover", root, "--apply", "--backup-dir", tmp_path / "backup")
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    assert manifest["version"] >= 2 and manifest["left_alone"] == {}  # 2: tail entries
    tails = {e["file"]: e for e in manifest["entries"] if e["action"] == "tail"}
    assert set(tails) == {name for name in ends if str(root / name) not in acted}
    for name, e in tails.items():
        assert e["start"] == ends[name]
        assert (tmp_path / "backup" / e["copy"]).stat().st_blocks == 0
    assert str(behind.relative_to(root)) in tails
    assert len(behind.read_bytes().rstrip(b"\0")) > ends[str(behind.relative_to(root))]  # the unit is back
    assert tree_fingerprint(root) != before
    _run("undo", tmp_path / "backup")
    assert tree_fingerprint(root) == before
