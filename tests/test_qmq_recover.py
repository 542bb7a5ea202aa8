"""recover on QMQ stores: the plan (recovery/qmq/plan.py), its apply with a backup
(engine/qmq/apply.py) and undo, on every crash variant QMQ's DefaultStorage left:
after the apply QMQ's start (simulated) loses nothing the files held, a second plan finds
nothing, and undo gives back the whole tree byte for byte."""
from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, load_truth
from helpers import aged_files, expand_store, file_mtimes, tree_fingerprint as tree
from rmqtool.engine.qmq import consumer_log_writer
from rmqtool.engine.qmq.apply import apply_qmq_plan
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.recovery.qmq.plan import plan_recovery
from rmqtool.recovery.qmq.next_start import served_empty
from rmqtool.recovery.qmq.start import simulate_start
from rmqtool.recovery.undo import undo
from rmqtool.store.qmq import consumerlog, messagelog
from rmqtool.store.qmq.segments import list_log

QMQ = FIXTURES / "qmq"
CRASH = QMQ / "crash"
VARIANTS = sorted(p.name for p in CRASH.iterdir() if p.is_dir())


@pytest.fixture(scope="module", params=VARIANTS)
def repaired(request, tmp_path_factory):
    variant = request.param
    work = tmp_path_factory.mktemp(variant)
    store = expand_store(CRASH / variant / "input", work / "store")
    before = tree(store), aged_files(store)
    plan = plan_recovery(store)
    applied = apply_qmq_plan(plan, work / "backup") if plan.changes_anything else None
    return variant, store, before, plan, applied


def test_the_plan_says_what_qmq_does(repaired):
    variant, store, _, plan, _ = repaired
    truth = load_truth(CRASH / variant / "truth.json")
    assert plan.broker.started == truth["started"]
    if truth["started"]:
        assert plan.broker.message_log.cut_at == truth["messageLog"]["cutAt"]


def test_after_the_apply_qmq_starts_and_serves_every_record_the_files_held(repaired):
    variant, store, _, plan, applied = repaired
    after = simulate_start(store)
    assert after.started and after.message_log.cut_at is None
    kept = {(s, q) for _, s, q in plan.records_dropped}
    for subject in after.subjects:
        assert not served_empty(subject), (subject.subject, served_empty(subject))
        assert not subject.not_served, (subject.subject, subject.not_served)
    dropped_truth = load_truth(CRASH / variant / "truth.json").get("messageLog") or {}
    # what the apply drops is what QMQ's own start drops, as far as the files show it
    assert {(r["subject"], r["sequence"]) for r in dropped_truth.get("recordsLost", [])} >= kept


STARTED = [v for v in VARIANTS if load_truth(CRASH / v / "truth.json")["started"]]


@pytest.mark.parametrize("variant", STARTED)
def test_after_the_apply_each_subjects_next_sequence_is_where_qmqs_start_and_its_groups_have_it(variant, tmp_path):
    """Units past the kept log become fill units, not nothing: a next sequence below the one
    QMQ's own start keeps (truth: its consumer log after the restart) gives new messages the
    sequences a group has already pulled past (it resumes at pull + 1), and they are skipped.
    crash/d: crash.order went back to 32 where QMQ's start keeps 57 and a group pulled to 39."""
    truth = load_truth(CRASH / variant / "truth.json")
    store = expand_store(CRASH / variant / "input", tmp_path / "store")
    plan = plan_recovery(store)
    if plan.changes_anything:
        apply_qmq_plan(plan, tmp_path / "backup")
    after = {s.subject: s.consumer_log[1] for s in simulate_start(store).subjects}
    for subject, rows in truth["perSubject"].items():
        kept = rows["consumerLogAfterRestart"][1]
        assert after.get(subject, 0) >= kept, (subject, after.get(subject), kept)
    for row in truth["consumerProgressAfterRestart"]:
        # a group's pull is a consumer log sequence; a consumer's is its pull log's, but for a broadcast group's
        pulled = max([row["pull"], *(c[0] for c in row["consumers"].values() if row["broadcast"])])
        assert after.get(row["subject"], 0) > pulled, row


def test_a_second_plan_finds_nothing(repaired):
    _, store, _, _, _ = repaired
    assert not plan_recovery(store).changes_anything


def test_undo_gives_back_the_tree_byte_for_byte(repaired):
    _, store, before, _, applied = repaired
    if applied is None:
        assert (tree(store), file_mtimes(store)) == before
        return
    undo(applied.backup_dir)
    assert (tree(store), file_mtimes(store)) == before  # the mtimes too: logs are aged out by them


@pytest.mark.parametrize("parts", ["whole", "tiny"])
@pytest.mark.parametrize("source", ["basic", "v2-consumerlog"])
def test_a_deleted_consumer_log_is_written_again_as_qmq_wrote_it(source, parts, tmp_path, monkeypatch):
    """Every file of one subject's consumer log deleted: the rewrite gives back the units QMQ
    wrote (V1 or V2: the same offsets, sizes and header sizes), each with its record's
    timestamp (QMQ's own is the time it wrote the unit, 0-118 ms later here: gone with the files).
    A segment is written in parts (a few units, a few bytes at a time: "tiny") the same."""
    if parts == "tiny":
        monkeypatch.setattr(consumer_log_writer, "PART_UNITS", 7)
        monkeypatch.setattr(consumer_log_writer, "PART_BYTES", 100)
    store = expand_store(QMQ / source / "store", tmp_path / "store")
    logs = sorted(p for p in (store / "consumerlog").iterdir() if p.is_dir())
    victim = max(logs, key=lambda d: sum(f.stat().st_blocks for f in d.iterdir()))  # the subject with most units
    directory, unit = consumerlog.open_consumer_log(store, victim.name)
    before = list(consumerlog.read_units(directory, unit, victim.name))
    for f in victim.iterdir():
        f.unlink()
    plan = plan_recovery(store)
    (rewrite,) = plan.consumer_logs
    assert rewrite.subject == victim.name
    applied = apply_qmq_plan(plan, tmp_path / "backup")
    after = list(consumerlog.read_units(*consumerlog.open_consumer_log(store, victim.name), victim.name))
    assert [(u.sequence, u.kind, u.wrote_offset, u.wrote_bytes, u.header_size) for u in after] == \
        [(u.sequence, u.kind, u.wrote_offset, u.wrote_bytes, u.header_size) for u in before]
    stored = {r.offset: r.timestamp for s in list_log(store / "messagelog", PER_SEGMENT_FILE_SIZE).segments
              for r in messagelog.scan_segment(s) if isinstance(r, messagelog.MessageRecord)}
    assert [u.timestamp for u in after] == [stored[u.wrote_offset] for u in after]
    assert all(0 <= b.timestamp - a.timestamp < 1000 for a, b in zip(after, before))
    assert not plan_recovery(store).changes_anything
    made = sorted(f.name for f in victim.iterdir())
    restored = undo(applied.backup_dir, store)  # the files the rewrite made go again, and undo says so
    assert restored.files_removed == len(made) > 0 and not any(victim.iterdir())


def test_consumer_logs_nothing_shows_the_unit_of_are_written_as_the_broker_config_says(tmp_path):
    """Every consumer log of a V2 store gone: nothing shows consumerlog.v2.enable. --apply wrote
    V1's 22-byte units, silently, which QMQ run with V2 throws on ("illegal consumer log magic
    code"). The plan says the unit is QMQ's default and --apply refuses (exit 2, nothing
    written); with the broker's config (consumerlog.v2.enable=true) the units are V2's, those
    QMQ wrote; --assume-defaults takes V1's."""
    from helpers import cli_runner
    from rmqtool.cli.app import app
    store = expand_store(QMQ / "v2-consumerlog" / "store", tmp_path / "store")
    subjects = sorted(p.name for p in (store / "consumerlog").iterdir() if p.is_dir())
    before = {s: list(consumerlog.read_units(*consumerlog.open_consumer_log(store, s), s)) for s in subjects}
    assert {consumerlog.open_consumer_log(store, s)[1] for s in subjects} == {consumerlog.CONSUMER_LOG_V2_UNIT_BYTES}
    for s in subjects:
        for f in (store / "consumerlog" / s).iterdir():
            f.unlink()
    emptied = tree(store)
    run = cli_runner()
    planned = run.invoke(app, ["recover", str(store), "-f", "json"])
    assert json.loads(planned.stdout)["consumer_log_unit_bytes"] == {
        "value": consumerlog.CONSUMER_LOG_UNIT_BYTES, "taken_from": "default"}
    refused = run.invoke(app, ["recover", str(store), "--apply", "--backup-dir", str(tmp_path / "b0")])
    assert refused.exit_code == 2 and "consumerlog.v2.enable" in refused.stderr, refused.output
    assert tree(store) == emptied
    conf = tmp_path / "broker.properties"
    conf.write_text("consumerlog.v2.enable=true\n", encoding="utf-8")
    done = run.invoke(app, ["recover", str(store), "--apply", "--backup-dir", str(tmp_path / "b1"),
                            "--broker-config", str(conf)])
    assert done.exit_code == 0, done.output
    for s in subjects:
        directory, unit = consumerlog.open_consumer_log(store, s)
        after = list(consumerlog.read_units(directory, unit, s))
        assert unit == consumerlog.CONSUMER_LOG_V2_UNIT_BYTES
        assert [(u.sequence, u.kind, u.wrote_offset, u.wrote_bytes, u.header_size) for u in after] == \
            [(u.sequence, u.kind, u.wrote_offset, u.wrote_bytes, u.header_size) for u in before[s]]
    assert run.invoke(app, ["undo", str(tmp_path / "b1")]).exit_code == 0 and tree(store) == emptied
    assumed = run.invoke(app, ["recover", str(store), "--apply", "--backup-dir", str(tmp_path / "b2"),
                               "--assume-defaults", "-f", "json"])
    assert assumed.exit_code == 0, assumed.output
    assert {consumerlog.open_consumer_log(store, s)[1] for s in subjects} == {consumerlog.CONSUMER_LOG_UNIT_BYTES}


def test_a_checkpoint_name_that_is_a_file_is_refused_before_anything_changes(tmp_path):
    """checkpoint/ made a file: QMQ's SnapshotStore lists nothing in it (the start replays from
    0, as with g's checkpoints all lost), and the repair's message checkpoint could not be
    written there: the apply refuses before it changes a byte, not half way."""
    from helpers import cli_runner
    from rmqtool.cli.app import app
    store = expand_store(CRASH / "g-lost-message-checkpoints" / "input", tmp_path / "store")
    (store / "checkpoint").rename(tmp_path / "checkpoints-aside")
    (store / "checkpoint").write_bytes(b"not a directory\n")
    plan = plan_recovery(store)
    assert plan.broker.started and plan.refusal and "checkpoint is not a directory" in plan.refusal
    before = tree(store)
    r = cli_runner().invoke(app, ["recover", str(store), "--apply", "--assume-defaults"])
    assert r.exit_code == 3 and "not recovered:" in r.stderr and "move it aside" in r.stderr, r.stderr
    assert tree(store) == before and not list(tmp_path.glob("store.recovery-*"))
