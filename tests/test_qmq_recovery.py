"""QMQ's next start simulated (rmqtool/recovery/qmq/) against what DefaultStorage did on the
same stores: every crash variant (fixtures/qmq/crash/*/truth.json: started or refused, the
message log's end, per subject what is served, consumer progress, the checkpoints in memory)
and the clean restarts of basic and v2-consumerlog (readBack, the action replay one byte past
the tablet's end). Expected values come from the truth files."""
from __future__ import annotations

import hashlib
import json
import pathlib
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, load_truth
from helpers import copy_tree, examples
from rmqtool.engine.qmq.apply import apply_qmq_plan
from rmqtool.recovery.qmq import simulate_start
from rmqtool.recovery.qmq.plan import plan_recovery
from rmqtool.store.qmq.consumerlog import subjects as consumerlog_subjects
from rmqtool.verify.qmq.checks import check_store

QMQ = FIXTURES / "qmq"
CRASH = QMQ / "crash"
VARIANTS = sorted(p.name for p in CRASH.iterdir() if p.is_dir())
_cache: dict = {}


def outcome(store: pathlib.Path):
    if store not in _cache:
        _cache[store] = simulate_start(store)
    return _cache[store]


def crash(variant):
    return outcome(CRASH / variant / "input"), load_truth(CRASH / variant / "truth.json")


def runs(ranges) -> list[list[int]]:
    return [list(r) for r in ranges]


def started(variant) -> bool:
    return load_truth(CRASH / variant / "truth.json")["started"]


STARTED = [v for v in VARIANTS if started(v)]
REFUSED = [v for v in VARIANTS if not started(v)]


def test_every_variant_is_covered():
    assert len(VARIANTS) == len(load_truth(CRASH / "summary.json")) and STARTED and REFUSED


@pytest.mark.parametrize("variant", VARIANTS)
def test_started_or_refused(variant):
    got, truth = crash(variant)
    assert got.started == truth["started"]
    if truth["started"]:
        assert got.refusal is None
        return
    assert got.refusal.kind == "refused" and got.refusal.where == truth["failedIn"]
    assert got.refusal.exception == truth["exception"]["class"]
    # the file named is the one the mutation made bad, and the message is the Java one where it names it
    assert pathlib.Path(got.refusal.file) == CRASH / variant / "input" / truth["mutation"]["file"]
    if truth["mutation"]["file"].rsplit("/", 1)[-1] in truth["exception"]["message"]:
        assert got.refusal.message == truth["exception"]["message"]


@pytest.mark.parametrize("variant", STARTED)
def test_message_log_end_and_records_lost(variant):
    got, truth = crash(variant)
    expected = truth["messageLog"]
    assert got.message_log.max_offset == expected["maxOffsetAfterRestart"]
    assert got.message_log.cut_at == expected["cutAt"]
    # the records lost that the input's files still hold (a file cut short no longer has the rest)
    held = (CRASH / variant / "input" / "messagelog" / "00000000000000000000").stat().st_size
    assert [(r.offset, r.subject, r.sequence) for r in got.message_log.records_lost] == \
        [(r["offset"], r["subject"], r["sequence"]) for r in expected["recordsLost"] if r["offset"] < held]
    if expected["writtenEndBeforeCrash"] <= held:
        assert got.message_log.written_end == expected["writtenEndBeforeCrash"]
        assert len(got.message_log.records_lost) == len(expected["recordsLost"])


@pytest.mark.parametrize("variant", STARTED)
def test_per_subject_what_is_served_after_the_start(variant):
    got, truth = crash(variant)
    subjects = {s.subject: s for s in got.subjects}
    assert set(subjects) == set(truth["perSubject"])
    held_all = truth["messageLog"]["writtenEndBeforeCrash"] <= \
        (CRASH / variant / "input" / "messagelog" / "00000000000000000000").stat().st_size
    for name, expected in truth["perSubject"].items():
        s = subjects[name]
        assert list(s.consumer_log) == expected["consumerLogAfterRestart"], name
        assert runs(s.served_with_message) == expected["servedWithMessage"], name
        assert runs(s.served_success_without_message) == expected["servedSuccessWithoutMessage"], name
        assert runs(s.units_pointing_past_log_end) == expected["unitsPointingPastLogEnd"], name
        assert {k: runs(v) for k, v in s.other_statuses} == expected["otherStatuses"], name
        if held_all:
            assert s.sequences_in_files == expected["sequencesWrittenBeforeCrash"], name
        # what is written and neither served with a message nor as SUCCESS is not served at all
        served = {q for a, b in expected["servedWithMessage"] + expected["servedSuccessWithoutMessage"]
                  for q in range(a, b + 1)}
        assert [q for a, b in s.not_served for q in range(a, b + 1)] == \
            [q for q in range(s.sequences_in_files) if q not in served], name


@pytest.mark.parametrize("variant", STARTED)
def test_records_the_cut_drops_are_the_cuts_not_unserved_ones(variant):
    """Sequences not served after the start, less those whose records the cut drops (truth's
    recordsLost): messagesNotServed named the dropped ones too, as "recover --apply rebuilds"."""
    got, truth = crash(variant)
    lost = {(r["subject"], r["sequence"]) for r in (truth.get("messageLog") or {}).get("recordsLost", [])}
    for s in got.subjects:
        not_served = {q for a, b in s.not_served for q in range(a, b + 1)}
        assert [q for a, b in s.not_served_kept for q in range(a, b + 1)] == \
            sorted(q for q in not_served if (s.subject, q) not in lost), s.subject


@pytest.mark.parametrize("variant", STARTED)
def test_consumer_progress_and_checkpoints_after_the_start(variant):
    got, truth = crash(variant)
    assert list(got.consumer_progress) == sorted(truth["consumerProgressAfterRestart"],
                                                 key=lambda g: (g["subject"], g["group"]))
    expected = truth["checkpointsAfterStart"]
    cp = got.checkpoints
    assert cp.message_checkpoint_offset == expected["messageCheckpointOffset"]
    assert dict(cp.message_max_sequences) == expected["messageMaxSequences"]
    assert cp.action_checkpoint_offset == expected["actionCheckpointOffset"]
    assert got.action_log.replay_state == truth["sortedPullLogTableActionReplayState"]
    assert got.action_log.max_offset == truth["actionLog"]["maxOffsetAfterRestart"]


@pytest.mark.parametrize("variant", STARTED)
def test_every_replayed_record_is_a_unit_rebuilt_or_skipped(variant):
    got, _ = crash(variant)
    count = sum(b - a + 1 for s in got.subjects for a, b in (*s.rebuilt_units, *s.replay_skipped))
    assert count == got.message_log.records_replayed


@pytest.mark.parametrize("variant", STARTED)
def test_offset_files_after_the_start(variant):
    got, truth = crash(variant)
    written = {pathlib.Path(f).name: dict(v) for f, v in got.offset_files_written}
    for f in truth["recovered"]["offsetFiles"]:
        name = f["file"].rsplit("/", 1)[-1]
        before = json.loads((CRASH / variant / "input" / f["file"]).read_text(encoding="utf-8"))
        assert written.get(name, before) == json.loads(f["text"]), name


@pytest.mark.parametrize("variant", STARTED)
def test_the_checkpoint_loaded_is_the_highest_that_parses(variant):
    got, truth = crash(variant)
    parsed = [f for f in truth["checkpointFilesInInput"]
              if f["file"].startswith("message-checkpoint.") and "parsedOffset" in f]
    loaded = got.checkpoints.message_checkpoint_file
    if not parsed:
        assert loaded is None
    else:
        assert pathlib.Path(loaded).name == max(parsed, key=lambda f: f["parsedOffset"])["file"]
    skipped = {pathlib.Path(f).name for f, _ in got.checkpoints.skipped_files}
    assert skipped == {f["file"] for f in truth["checkpointFilesInInput"] if "parsedOffset" not in f}


@pytest.mark.parametrize("scenario", ["basic", "v2-consumerlog"])
def test_clean_restart_replays_the_action_log_from_one_byte_past_the_tablet(scenario):
    truth = load_truth(QMQ / scenario / "truth.json")["readBack"]
    got = outcome(QMQ / scenario / "store")
    assert got.started
    state = truth["pullLogs"]["sortedPullLogTableActionReplayState"]
    assert got.action_log.replay_state == state == truth["pullLogTablets"][-1]["endOffset"] + 1
    assert got.action_log.replay_from == state and got.action_log.actions_replayed == 0
    assert list(got.consumer_progress) == sorted(truth["consumerProgressAfterStart"],
                                                 key=lambda g: (g["subject"], g["group"]))
    cp = got.checkpoints
    assert cp.message_checkpoint_offset == truth["checkpointsAfterStart"]["messageCheckpointOffset"]
    assert dict(cp.message_max_sequences) == truth["checkpointsAfterStart"]["messageMaxSequences"]
    assert cp.action_checkpoint_offset == truth["checkpointsAfterStart"]["actionCheckpointOffset"]
    assert got.message_log.max_offset == truth["messageLog"]["maxOffset"] and not got.message_log.records_lost


@pytest.mark.parametrize("scenario", ["basic", "v2-consumerlog"])
def test_clean_restart_serves_every_sequence_as_the_engine_did(scenario):
    truth = load_truth(QMQ / scenario / "truth.json")["readBack"]["consumerLogs"]
    got = {s.subject: s for s in outcome(QMQ / scenario / "store").subjects}
    assert set(got) == set(truth)
    for name, log in truth.items():
        s = got[name]
        assert list(s.consumer_log) == [log["minSequence"], log["maxSequence"]], name
        with_message = [g["sequence"] for g in log["getMessage"] if g["status"] == "SUCCESS" and g["messageNum"]]
        without = [g["sequence"] for g in log["getMessage"] if g["status"] == "SUCCESS" and not g["messageNum"]]
        assert [q for a, b in s.served_with_message for q in range(a, b + 1)] == with_message, name
        assert [q for a, b in s.served_success_without_message for q in range(a, b + 1)] == without, name
        others = {}
        for g in log["getMessage"]:
            if g["status"] != "SUCCESS":
                others.setdefault(g["status"], []).append(g["sequence"])
        assert {k: [q for a, b in v for q in range(a, b + 1)] for k, v in s.other_statuses} == others, name


def test_legacy_pull_logs_are_cut_to_the_action_checkpoint():
    truth = load_truth(QMQ / "basic" / "truth.json")["readBack"]["pullLogs"]["legacyPullLogs"]
    got = outcome(QMQ / "basic" / "store").pull_logs
    assert [(p.consumer_id, p.group_and_subject, list(p.sequences)) for p in got] == \
        [(p["consumerId"], p["groupAndSubject"], [p["minSequence"], p["maxSequence"]]) for p in truth]


def test_a_tablet_failing_its_crc_sends_the_action_replay_back_to_the_action_checkpoint(store_copy):
    """k's tablet with a payload byte flipped: the replay state is 0, so the replay runs from
    the action checkpoint (a record boundary) and every later action is applied again: the
    progress the broker had before the shutdown comes back, and the tablet is destroyed."""
    truth = load_truth(CRASH / "k-clean-restart-with-pulllog-tablet" / "truth.json")
    store = store_copy(CRASH / "k-clean-restart-with-pulllog-tablet" / "input")
    tablet = truth["recovered"]["pullLogTablets"][0]
    path = store / tablet["file"]
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    got = simulate_start(store)
    assert got.started and got.action_log.replay_state == 0
    assert got.action_log.replay_from == truth["checkpointsAfterStart"]["actionCheckpointOffset"]
    assert got.action_log.tablets_destroyed == (str(path),)
    assert list(got.consumer_progress) == sorted(truth["consumerProgressBeforeCrash"],
                                                 key=lambda g: (g["subject"], g["group"]))


@pytest.mark.parametrize("directory", ["actionlog", "consumerlog/crash.order", "pulllog_smt"])
def test_a_stray_name_in_any_log_directory_refuses_the_start_as_in_the_message_log(store_copy, directory):
    b = load_truth(CRASH / "b-stray-file-in-messagelog" / "truth.json")
    stray = pathlib.Path(b["mutation"]["file"]).name
    store = store_copy(CRASH / "a-as-is" / "input")
    (store / directory).mkdir(parents=True, exist_ok=True)
    (store / directory / stray).write_bytes((CRASH / "b-stray-file-in-messagelog" / "input" /
                                             b["mutation"]["file"]).read_bytes())
    got = simulate_start(store)
    assert not got.started and got.refusal.where == b["failedIn"]
    assert (got.refusal.exception, got.refusal.message) == (b["exception"]["class"], b["exception"]["message"])
    assert pathlib.Path(got.refusal.file) == store / directory / stray
    # verify names it, and recover --apply moves it out so that QMQ starts (pulllog_smt/: neither did)
    assert [f.path for f in check_store(store) if f.id == "logSegmentNameInvalid"] == [str(store / directory / stray)]
    apply_qmq_plan(plan_recovery(store), store.parent / "backup")
    assert not (store / directory / stray).exists() and simulate_start(store).started


def test_the_first_segments_offset_file_is_read_as_checkpoint_store_reads_it(store_copy):
    """adjustConsumerLogMinOffset reads messagelog/.<base>.offset through CheckpointStore:
    a file it cannot read (here a directory) gives way to its .backup, and with no backup
    the storage's constructor throws. A directory stopped verify, report and recover
    (exit 8, "Is a directory")."""
    truth = load_truth(CRASH / "a-as-is" / "truth.json")
    subject, (low, high) = max(((s, tuple(v["consumerLogAfterRestart"])) for s, v in truth["perSubject"].items()),
                               key=lambda item: item[1][1])
    raised = {subject: high // 2}  # the max sequence before the segment: the min becomes one past it
    name = ".00000000000000000000.offset"

    def bounds(store):
        got = simulate_start(store)
        assert got.started, got.refusal
        return {s.subject: s.consumer_log for s in got.subjects}

    as_file = store_copy(CRASH / "a-as-is" / "input")
    (as_file / "messagelog" / name).write_text(json.dumps(raised), encoding="utf-8")
    expected = bounds(as_file)
    assert expected[subject] == (high // 2 + 1, high) and low < high // 2 + 1
    shutil.rmtree(as_file)
    as_backup = store_copy(CRASH / "a-as-is" / "input")
    (as_backup / "messagelog" / name).unlink(missing_ok=True)
    (as_backup / "messagelog" / name).mkdir()
    (as_backup / "messagelog" / (name + ".backup")).write_text(json.dumps(raised), encoding="utf-8")
    assert bounds(as_backup) == expected
    (as_backup / "messagelog" / (name + ".backup")).unlink()
    got = simulate_start(as_backup)
    assert not got.started and got.refusal.kind == "refused"
    assert (got.refusal.exception, got.refusal.message) == ("java.lang.RuntimeException",
                                                           f"Load checkpoint failed. filename={name}")


@pytest.mark.parametrize("value,thrown", [
    (True, "java.lang.RuntimeException"),  # no Long: Jackson fails the map
    (1 << 63, "java.lang.RuntimeException"),  # past a long: Jackson fails the map
    (None, "java.lang.NullPointerException"),  # a null Long, unboxed for + 1
    ((1 << 63) - 1, None)])  # + 1 wraps to Long.MIN_VALUE: no min sequence is raised
def test_an_offset_file_value_the_broker_cannot_take(store_copy, value, thrown):
    """Values of the first segment's .offset file as Map<String, Long> and adjustConsumerLogMinOffset
    take them (Python's json reads true as 1 and keeps a number past a long)."""
    truth = load_truth(CRASH / "a-as-is" / "truth.json")
    subject = max(truth["perSubject"])
    store = store_copy(CRASH / "a-as-is" / "input")
    (store / "messagelog" / ".00000000000000000000.offset").write_text(json.dumps({subject: value}), encoding="utf-8")
    got = simulate_start(store)
    if thrown is None:
        assert got.started and {s.subject: s.consumer_log for s in got.subjects}[subject] == \
            tuple(truth["perSubject"][subject]["consumerLogAfterRestart"])
    else:
        assert not got.started and got.refusal.exception == thrown


def test_a_header_of_length_minus_one_after_the_action_log_tail_is_caught(store_copy):
    """The message log's validator lets NegativeArraySizeException out (variant c); the action
    log's reads the action behind the size (zeros: no subject, an invalid action) and catches
    any exception of that read: the log just ends at its tail and the start goes on."""
    a = load_truth(CRASH / "a-as-is" / "truth.json")
    store = store_copy(CRASH / "a-as-is" / "input")
    path = store / "actionlog" / "00000000000000000000"
    raw = path.read_bytes()
    assert len(raw) == a["actionLog"]["writtenEndBeforeCrash"]
    record = a["recovered"]["actionLog"]["records"][0]
    head = raw[record["offset"]:record["offset"] + 6]  # magic, record type, action type of a real action
    path.write_bytes(raw + head + (-1).to_bytes(4, "big", signed=True))
    got = simulate_start(store)
    assert got.started
    assert got.action_log.max_offset == a["actionLog"]["maxOffsetAfterRestart"]
    assert list(got.consumer_progress) == sorted(a["consumerProgressAfterRestart"],
                                                 key=lambda g: (g["subject"], g["group"]))


def test_an_action_replay_that_cannot_reach_the_log_end_hangs_the_start(store_copy):
    """An action checkpoint 2 bytes before the action log's end and no tablet: the visitor has
    fewer bytes than a record header, says no more without moving, and start() waits forever."""
    a = load_truth(CRASH / "a-as-is" / "truth.json")
    store = store_copy(CRASH / "a-as-is" / "input")
    end = a["actionLog"]["maxOffsetAfterRestart"]
    (store / "checkpoint" / f"action-checkpoint.{end - 2:020d}").write_text(f"3\n{end - 2}\n", encoding="utf-8")
    got = simulate_start(store)
    assert not got.started and got.refusal.kind == "hangs" and got.refusal.where == "start(): action log replay"
    assert got.action_log.replay_from == end - 2 and got.action_log.actions_replayed == 0
    assert got.refusal.file == str(store / "actionlog" / "00000000000000000000")


def test_a_consumer_log_deleted_with_every_record_before_the_checkpoint_is_never_served(store_copy):
    """A subject whose records all precede the message checkpoint gets no unit from the replay:
    with its consumer-log directory gone, every sequence answers SUBJECT_NOT_FOUND."""
    a = load_truth(CRASH / "a-as-is" / "truth.json")
    loaded = max((f for f in a["checkpointFilesInInput"] if "parsedOffset" in f), key=lambda f: f["parsedOffset"])
    subject = next(s for s, v in sorted(a["perSubject"].items())
                   if loaded["parsedMaxSequences"].get(s, -2) + 1 == v["sequencesWrittenBeforeCrash"])
    store = store_copy(CRASH / "a-as-is" / "input")
    shutil.rmtree(store / "consumerlog" / subject)
    got = {s.subject: s for s in simulate_start(store).subjects}[subject]
    written = a["perSubject"][subject]["sequencesWrittenBeforeCrash"]
    assert got.sequences_in_files == written and not got.served_with_message and not got.rebuilt_units
    assert got.other_statuses == (("SUBJECT_NOT_FOUND", ((0, written - 1),)),)
    assert got.not_served == ((0, written - 1),)


def _digest(root: pathlib.Path) -> dict:
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_simulation_writes_nothing(store_copy):
    store = store_copy(CRASH / "e-deleted-consumerlog-file" / "input")
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    digest = _digest(store)
    got = simulate_start(store)
    assert got.started and got.to_json()["started"]
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before and _digest(store) == digest


_DAMAGEABLE = ["messagelog/00000000000000000000", "actionlog/00000000000000000000",
               "consumerlog/crash.order/00000000000000000000", "checkpoint/message-checkpoint.00000000000000105527"]


@given(st.lists(st.tuples(st.sampled_from(_DAMAGEABLE), st.floats(0, 1), st.binary(min_size=1, max_size=12)),
                min_size=1, max_size=4))
@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_random_damage_gives_an_outcome_never_a_traceback(tmp_path_factory, damages):
    store = tmp_path_factory.mktemp("qmq") / "store"
    copy_tree(CRASH / "a-as-is" / "input", store)
    for name, where, data in damages:
        path = store / name
        raw = bytearray(path.read_bytes())
        at = int(where * len(raw))
        raw[at:at + len(data)] = data
        path.write_bytes(bytes(raw))
    digest = _digest(store)
    got = simulate_start(store)
    assert got.to_json()["started"] == got.started
    assert got.started == (got.refusal is None)
    assert _digest(store) == digest


def test_a_consumer_log_directory_whose_name_qmq_skips_is_neither_judged_nor_written(store_copy):
    """ConsumerLogManager.loadConsumerLogs skips a directory whose name has breaking whitespace:
    QMQ neither truncates nor serves it. verify said the load truncates it (checkpointSubjectMissing)
    and served it empty, and recover wrote it into a new message checkpoint."""
    store = store_copy(QMQ / "basic" / "store")
    before, plan, started = check_store(store), plan_recovery(store), simulate_start(store)
    copy_tree(store / "consumerlog" / consumerlog_subjects(store)[0], store / "consumerlog" / "ghost subject")
    assert [(f.id, f.path) for f in check_store(store)] == [(f.id, f.path) for f in before]
    assert plan_recovery(store).changes_anything == plan.changes_anything
    assert [s.subject for s in simulate_start(store).subjects] == [s.subject for s in started.subjects]
