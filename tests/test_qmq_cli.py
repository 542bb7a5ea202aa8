"""The commands on QMQ stores, as an operator runs them: info, dump's QMQ kinds, verify,
recover (plan, --apply, a second plan, undo), exit codes and JSON, on stores QMQ's
DefaultStorage wrote (expanded to the sizes the engine left)."""
from __future__ import annotations

import json
import os

import pytest

from conftest import FIXTURES, load_truth
from helpers import cli_runner, expand_store, table_sections, tree_fingerprint
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode

QMQ = FIXTURES / "qmq"
CRASH = QMQ / "crash"


def run(*args):
    return cli_runner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def basic(tmp_path_factory):
    return expand_store(QMQ / "basic" / "store", tmp_path_factory.mktemp("basic") / "store")


def test_info_names_the_family_and_the_ends(basic):
    truth = load_truth(QMQ / "basic" / "truth.json")["generation"]["inMemoryBeforeShutdown"]
    r = run("info", basic, "-f", "json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["store"]["family"] == "qmq" and doc["message_log"]["written_end"] == truth["messageLogMaxOffset"]


@pytest.mark.parametrize("command", ["info", "check", "verify", "recover"])
@pytest.mark.parametrize("flag", ["--commitlog-path", "--readonly-commitlog-path"])
def test_commit_log_paths_are_refused_on_a_qmq_store(basic, tmp_path, command, flag):
    """A QMQ store has no commit log to look for elsewhere: every command refuses the option in
    one line (info and check passed over it before), and reads nothing."""
    before = tree_fingerprint(basic)
    r = run(command, basic, flag, tmp_path)
    assert r.exit_code == ExitCode.USAGE, (r.exit_code, r.stderr)
    assert flag in r.stderr and "a QMQ store takes none" in r.stderr and r.stdout == ""
    assert tree_fingerprint(basic) == before


@pytest.mark.parametrize("kind, count", [
    ("messagelog", lambda t: len(t["readBack"]["messageLog"]["records"])),
    ("consumerlog", lambda t: sum(len(c["units"]) for c in t["readBack"]["consumerLogs"].values())),
    ("actionlog", lambda t: len(t["readBack"]["actionLog"]["records"])),
    ("checkpoint", lambda t: len(t["checkpointFiles"])),
])
def test_dump_kinds_give_a_row_per_record(basic, kind, count):
    r = run("dump", kind, basic, "-f", "jsonl")
    assert r.exit_code == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(rows) == count(load_truth(QMQ / "basic" / "truth.json")) and all(x["family"] == "qmq" for x in rows)


def test_checkpoint_table_tells_message_and_action_checkpoints_apart(basic):
    """At 80 columns each checkpoint's record (message_checkpoint or action_checkpoint) is shown, and
    its file never cut into its name: the two kinds of checkpoint file never look alike."""
    rows = [json.loads(line) for line in run("dump", "checkpoint", basic, "-f", "jsonl").stdout.splitlines()]
    assert {r["record"] for r in rows} == {"message_checkpoint", "action_checkpoint"}
    text = cli_runner().invoke(app, ["dump", "checkpoint", str(basic)], env={"COLUMNS": "80"}).stdout
    (names, cells), = table_sections(text)
    assert [c["record"] for c in cells] == [r["record"] for r in rows]
    assert all(c["file"].endswith("/" + os.path.basename(r["file"])) for c, r in zip(cells, rows))
    assert max(map(len, text.splitlines())) <= 80


def test_dump_of_one_consumer_log_file(basic):
    f = next((basic / "consumerlog" / "order.created").iterdir())
    units = load_truth(QMQ / "basic" / "truth.json")["readBack"]["consumerLogs"]["order.created"]["units"]
    r = run("dump", "consumerlog", f, "-f", "jsonl")
    assert [json.loads(x)["sequence"] for x in r.stdout.splitlines()] == [u["sequence"] for u in units]


def test_zero_units_inside_a_consumer_log_hide_none_after_them(tmp_path):
    """A run of zero units before written ones (a page lost in a crash): QMQ's start keeps the
    units to the checkpoint's max sequence, so those after the run are still served. dump and
    query give them (truth's units); verify names the zeroed ones only; --served-only says what
    a zero unit serves (0 bytes at offset 0), never the record of another subject there."""
    truth = load_truth(QMQ / "basic" / "truth.json")["readBack"]["consumerLogs"]["order.created"]
    units, width = truth["units"], truth["unitBytes"]
    store = expand_store(QMQ / "basic" / "store", tmp_path / "store")
    first, last = 10, 20
    with open(store / "consumerlog" / "order.created" / f"{0:020d}", "r+b") as f:
        f.seek(first * width)
        f.write(bytes((last - first + 1) * width))
    rows = [json.loads(x) for x in run("dump", "consumerlog", store, "-s", "order.created", "-f", "jsonl").stdout.splitlines()]
    assert [r["sequence"] for r in rows] == [u["sequence"] for u in units]
    after = units[last + 1]
    found = run("query", store, "--subject", "order.created", "--sequence", after["sequence"], "-f", "json")
    assert found.exit_code == 0 and json.loads(found.stdout)[0]["message_log_offset"] == after["wroteOffset"]
    findings = [json.loads(x) for x in run("verify", store, "-f", "jsonl").stdout.splitlines()]
    missing = next(f for f in findings if f["finding"] == "messageNotInConsumerLog")
    assert f"sequences {first}-{last} " in missing["message"] and missing["sequences"] == last - first + 1, missing
    served = run("query", store, "--subject", "order.created", "--sequence", first + 1, "--served-only")
    assert served.exit_code == ExitCode.NOT_FOUND and "SUCCESS with 0 bytes at message log offset 0" in served.stderr


def _flip(path, at, count=1):
    with open(path, "r+b") as f:
        f.seek(at)
        old = f.read(count)
        f.seek(at)
        f.write(bytes(b ^ 0xFF for b in old))


@pytest.mark.parametrize("damage, kind", [(lambda s: _flip(next((s / "actionlog").iterdir()), 1988, 44),
                                           "actionRecordInvalid"),
                                          (lambda s: _flip(next((s / "pulllog_smt").iterdir()), 40),
                                           "pullLogTabletInvalid")], ids=["action", "tablet"])
def test_info_says_the_damage_the_start_stops_at_in_the_action_log_and_tablets(tmp_path, damage, kind):
    """A damaged action (the start cuts the action log there) or tablet (the load destroys it):
    info says it as verify does (the same finding, file and offset), exit 3, as it does for the
    message log's damage."""
    store = expand_store(QMQ / "basic" / "store", tmp_path / "store")
    damage(store)
    said = [json.loads(x) for x in run("verify", store, "-f", "jsonl").stdout.splitlines()]
    info = run("info", store, "-f", "json")
    assert info.exit_code == ExitCode.CORRUPT, info.output
    shown = [f for f in json.loads(info.stdout)["findings"] if f["finding"] == kind]
    assert shown and shown == [f for f in said if f["finding"] == kind][:1]


def test_a_segment_named_off_its_place_is_named_and_nothing_is_rewritten_on_it(tmp_path):
    """A message-log segment renamed 100 bytes on: QMQ never names one so and places its bytes
    at offset % size, rmqtool's readers by its name, so every unit would look wrong to them.
    verify names the file; recover shows its plan but carries nothing out (exit 3), even
    with --apply: the consumer logs are not rewritten to offsets of a guess."""
    store = expand_store(CRASH / "a-as-is" / "input", tmp_path / "store")
    first = store / "messagelog" / f"{0:020d}"
    first.rename(first.with_name(f"{100:020d}"))
    before = tree_fingerprint(store)
    said = [json.loads(x) for x in run("verify", store, "-f", "jsonl").stdout.splitlines()]
    (misaligned,) = [f for f in said if f["finding"] == "logSegmentNameMisaligned"]
    assert misaligned["path"] == str(first.with_name(f"{100:020d}"))
    for args in ([], ["--apply", "--backup-dir", tmp_path / "backup"]):
        r = run("recover", store, *args)
        assert r.exit_code == ExitCode.CORRUPT and "not a multiple of its log's segment size" in r.stderr, r.output
    assert tree_fingerprint(store) == before and not (tmp_path / "backup").exists()


def test_a_consumer_log_segment_named_off_its_place_does_not_stop_qmq(tmp_path):
    """LogManager.loadLogs takes any name it parses: QMQ starts with a consumer log segment
    renamed a unit on (recover's own start says so), so the finding says no start refused."""
    store = expand_store(QMQ / "basic" / "store", tmp_path / "store")
    first = next(p for p in sorted((store / "consumerlog").iterdir())[0].iterdir() if p.name.isdigit())
    first.rename(first.with_name(f"{int(first.name) + 22:020d}"))
    said = [json.loads(x) for x in run("verify", store, "-f", "jsonl").stdout.splitlines()]
    (misaligned,) = [f for f in said if f["finding"] == "logSegmentNameMisaligned"]
    assert json.loads(run("recover", store, "-f", "json").stdout)["broker_start"]["started"]
    assert misaligned["consequence"] != "wontStart"


def test_verify_a_clean_store_exits_0(basic):
    r = run("verify", basic, "-f", "jsonl")
    assert r.exit_code == 0, r.stdout + r.stderr


def test_a_rocketmq_dump_kind_on_a_qmq_store_and_back(basic):
    assert run("dump", "commitlog", basic).exit_code == ExitCode.BAD_INPUT
    r = run("dump", "messagelog", FIXTURES / "rocketmq-4.9.8" / "basic" / "store")
    assert r.exit_code == ExitCode.BAD_INPUT and "not in a QMQ store" in r.stderr


def test_rocketmq_options_are_refused_on_a_qmq_store(basic):
    r = run("recover", basic, "--semantics", "4.9")
    assert r.exit_code == ExitCode.USAGE and "a QMQ store takes none" in r.stderr


def test_recover_apply_plan_again_and_undo(tmp_path):
    """crash/d: one flipped payload byte. The plan says what QMQ does (the cut, sequences served
    empty); --apply repairs it (exit 3: the records past the cut are lost); the store then
    verifies clean, a second plan changes nothing, and undo gives back every byte."""
    variant = CRASH / "d-flipped-payload-byte-mid-log"
    truth = load_truth(variant / "truth.json")
    store = expand_store(variant / "input", tmp_path / "store")
    before = tree_fingerprint(store)
    plan = run("recover", store, "-f", "json")
    assert plan.exit_code == ExitCode.CORRUPT
    doc = json.loads(plan.stdout)
    assert doc["broker_start"]["message_log"]["cut_at"] == truth["messageLog"]["cutAt"]
    assert len(doc["records_dropped"]) == len(truth["messageLog"]["recordsLost"])
    assert tree_fingerprint(store) == before  # a plan writes nothing
    applied = run("recover", store, "--apply", "--backup-dir", tmp_path / "backup", "-f", "json")
    assert applied.exit_code == 0, applied.stderr  # applied, as a RocketMQ store's; what was lost is said
    assert json.loads(applied.stdout)["applied"]["backup_dir"] == str(tmp_path / "backup")
    assert len(json.loads(applied.stdout)["records_dropped"]) == len(truth["messageLog"]["recordsLost"])
    assert run("verify", store).exit_code == 0
    again = run("recover", store, "-f", "json")
    assert again.exit_code == 0 and json.loads(again.stdout)["actions"] == []
    undone = run("undo", tmp_path / "backup")
    assert undone.exit_code == 0, undone.stderr
    assert tree_fingerprint(store) == before


def _writer_holding(store):
    """Another process in the middle of an rmqtool repair of ``store``: it holds what every
    rmqtool writer holds while it works (QMQ takes no lock file) until its stdin closes."""
    import subprocess
    import sys
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from rmqtool.recovery.store_lock import held_for\n"
                               "with held_for(sys.argv[1]):\n print('held', flush=True); sys.stdin.read()", str(store)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_writer_is_refused_while_one_works(tmp_path):
    """Two rmqtool writers on one QMQ store: while one works, a recover --apply or an undo of
    the store is refused (exit 5, naming the writer) before it writes; once it is done they run."""
    variant = CRASH / "d-flipped-payload-byte-mid-log"
    store = expand_store(variant / "input", tmp_path / "store")
    before = tree_fingerprint(store)
    holder = _writer_holding(store)
    try:
        second = run("recover", store, "--apply", "--backup-dir", tmp_path / "backup")
        assert second.exit_code == ExitCode.LOCKED, second.output
        assert f"another rmqtool writer (process {holder.pid})" in second.stderr
        assert tree_fingerprint(store) == before and not (tmp_path / "backup").exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    assert run("recover", store, "--apply", "--backup-dir", tmp_path / "backup").exit_code == 0
    repaired = tree_fingerprint(store)
    holder = _writer_holding(store)
    try:
        undone = run("undo", tmp_path / "backup")
        assert undone.exit_code == ExitCode.LOCKED and tree_fingerprint(store) == repaired, undone.output
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    assert run("undo", tmp_path / "backup").exit_code == 0 and tree_fingerprint(store) == before


def test_a_store_qmq_refuses_is_repaired_so_that_it_starts(tmp_path):
    """crash/b: a stray name stops QMQ's start; --apply moves it into the backup."""
    store = expand_store(CRASH / "b-stray-file-in-messagelog" / "input", tmp_path / "store")
    assert run("recover", store).exit_code == ExitCode.CORRUPT
    assert run("recover", store, "--apply", "--backup-dir", tmp_path / "backup").exit_code == 0
    assert not (store / "messagelog" / "00000000000000000000.bak").exists()
    assert (tmp_path / "backup" / "manifest.json").is_file()
    assert run("recover", store).exit_code == 0


def test_query_by_subject_and_sequence_gives_what_get_message_served(basic):
    logs = load_truth(QMQ / "basic" / "truth.json")["readBack"]["consumerLogs"]
    subject = "order.created"
    served = next(g for g in logs[subject]["getMessage"] if g["messageNum"] == 1)
    r = run("query", basic, "--subject", subject, "--sequence", served["sequence"], "-f", "jsonl", "--body", "none")
    assert r.exit_code == 0, r.stderr
    (row,) = [json.loads(x) for x in r.stdout.splitlines()]
    (payload_offset, payload_size), = served["payloadOffsetAndSize"]
    assert row["message_log_offset"] + row["header_size"] == payload_offset and row["payload_length"] == payload_size
    missing = run("query", basic, "--subject", subject, "--sequence", logs[subject]["maxSequence"] + 5)
    assert missing.exit_code == ExitCode.NOT_FOUND


def test_query_by_message_id_and_by_time(basic):
    records = load_truth(QMQ / "basic" / "truth.json")["readBack"]["messageLog"]["records"]
    wanted = records[11]
    r = run("query", basic, "--msg-id", wanted["payload"]["messageId"], "-f", "jsonl", "--body", "none")
    assert r.exit_code == 0 and [json.loads(x)["message_log_offset"] for x in r.stdout.splitlines()] == \
        [x["offset"] for x in records if x["payload"]["messageId"] == wanted["payload"]["messageId"]]
    at = run("query", basic, "--subject", wanted["subject"], "--time", wanted["timestamp"], "-f", "jsonl")
    first = next(x for x in records if x["subject"] == wanted["subject"] and x["timestamp"] >= wanted["timestamp"])
    assert [json.loads(x)["message_log_offset"] for x in at.stdout.splitlines()] == [first["offset"]]


def test_qmq_query_options_on_a_rocketmq_store_are_refused():
    r = run("query", FIXTURES / "rocketmq-4.9.8" / "basic" / "store", "--subject", "T", "--sequence", "1")
    assert r.exit_code == ExitCode.BAD_INPUT and "not a QMQ store" in r.stderr


def test_salvage_keeps_what_qmq_would_drop(tmp_path):
    """crash/d: QMQ's start drops every record from the flipped one on; salvage keeps all but
    that one, says where the cut is, and exits 3 (the flipped record is lost for good)."""
    variant = CRASH / "d-flipped-payload-byte-mid-log"
    truth = load_truth(variant / "truth.json")
    store = expand_store(variant / "input", tmp_path / "store")
    r = run("salvage", store, "--out", tmp_path / "kept.jsonl", "-f", "json")
    assert r.exit_code == ExitCode.CORRUPT, r.stderr
    doc = json.loads(r.stdout)
    flipped = truth["mutation"]["record"]
    assert doc["messages_kept"] == truth["messageLog"]["recordsBeforeCrash"] - 1
    assert doc["kept_past_recovered_end"] == len(truth["messageLog"]["recordsLost"]) - 1
    assert [(x["subject"], x["sequence"]) for x in doc["messages_rejected"]] == [(flipped["subject"],
                                                                               flipped["sequence"])]
    rows = [json.loads(x) for x in (tmp_path / "kept.jsonl").read_text().splitlines()]
    assert len(rows) == doc["messages_kept"] and flipped["offset"] not in {x["message_log_offset"] for x in rows}


def test_salvage_of_a_clean_store_loses_nothing(basic, tmp_path):
    r = run("salvage", basic, "--out", tmp_path / "all.jsonl", "-f", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["lost_anything"] is False
    records = load_truth(QMQ / "basic" / "truth.json")["readBack"]["messageLog"]["records"]
    assert len((tmp_path / "all.jsonl").read_text().splitlines()) == len(records)


@pytest.mark.parametrize("step", [2, 5, 9])
def test_a_repair_killed_is_finished_by_running_it_again_or_undone(tmp_path, step):
    """kill -9 at a step of recover --apply on crash/d (RMQTOOL_KILL_AFTER, recovery/intent.py):
    running the command again finishes it (the next plan finds nothing); undo instead gives
    back the tree as it was, byte for byte."""
    import os
    import subprocess
    import sys
    variant = CRASH / "d-flipped-payload-byte-mid-log"
    for finish in (True, False):
        store = expand_store(variant / "input", tmp_path / f"store-{finish}")
        before = tree_fingerprint(store)
        backup = tmp_path / f"backup-{finish}"
        killed = subprocess.run([sys.executable, "-m", "rmqtool", "recover", str(store), "--apply", "--backup-dir",
                                 str(backup)], env={**os.environ, "RMQTOOL_KILL_AFTER": str(step)},
                                capture_output=True, text=True)
        assert killed.returncode == -9, killed.stderr
        if finish:
            again = run("recover", store, "--apply", "-f", "json")
            assert again.exit_code in (0, ExitCode.CORRUPT), again.stderr
            assert json.loads(run("recover", store, "-f", "json").stdout)["actions"] == []
        else:
            assert run("undo", backup).exit_code == 0
            assert tree_fingerprint(store) == before


@pytest.mark.parametrize("kind, where, extra, said, code", [
    ("consumerlog", "messagelog/00000000000000000000", [], "not in consumerlog/", ExitCode.BAD_INPUT),
    ("pulllog", "pulllog_smt", [], "not in pulllog/", ExitCode.BAD_INPUT),
    ("checkpoint", "messagelog", [], "not in checkpoint/", ExitCode.BAD_INPUT),
    ("messagelog", "", ["-s", "any"], "--subject narrows dump consumerlog only", ExitCode.USAGE),
])
def test_dump_refuses_another_kinds_files_and_options_it_would_ignore(kind, where, extra, said, code):
    """Rows of nothing and exit 0 would read as an empty log: the command says what it reads.
    A file of another kind is exit 4 (not a file of the kind asked for), as RocketMQ's dumps."""
    path = QMQ / "basic" / "store" / where
    r = cli_runner().invoke(app, ["dump", kind, str(path), *extra])
    assert r.exit_code == code and said in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert code == ExitCode.USAGE or str(path) in r.stderr


@pytest.mark.parametrize("fmt, empty", [("json", []), ("jsonl", None), ("table", None)])
def test_a_subject_with_no_consumer_log_dumps_no_rows(fmt, empty):
    """As `dump consumequeue -t Nope` on a RocketMQ store: a filter that matches nothing is an
    empty result (`[]` in JSON), exit 0; stderr names the subjects the store has."""
    subjects = load_truth(QMQ / "basic" / "truth.json")["readBack"]["consumerLogs"]
    r = run("dump", "consumerlog", QMQ / "basic" / "store", "-s", "no.such.subject", "-f", fmt)
    assert r.exit_code == 0, r.stderr
    if empty is not None:
        assert json.loads(r.stdout) == empty
    elif fmt == "jsonl":
        assert r.stdout == ""
    assert "no consumer log for subject 'no.such.subject'" in r.stderr and sorted(subjects)[0] in r.stderr


def test_info_table_shows_values_not_data_structures(basic):
    """At 80 columns: each group's consumers as words (not a Python dict's repr), one `store`
    section (the document's own lines are in it), long lines wrapped whole, lists a name a line."""
    doc = json.loads(run("info", basic, "-f", "json").stdout)
    r = cli_runner().invoke(app, ["info", str(basic)], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.stderr
    text = r.stdout
    assert "{'" not in text and '["' not in text
    assert [line for line in text.splitlines() if line == "store"] == ["store"]
    assert all(len(line) <= 80 for line in text.splitlines() if not line.startswith(("-", " ")))
    words = " ".join(text.split())
    assert doc["last_shutdown"] in words  # wrapped, never cut
    for name in doc["message_log"].get("skipped_files", []):
        assert f"    {name}" in text.splitlines()
    wide = run("info", basic, "--wide").stdout
    for group in doc["groups"]:
        for c in group["consumers"]:
            assert f"consumer_id={c['consumer_id']} pull={c['pull']} ack={c['ack']}" in wide


def test_salvage_counts_what_the_consumer_logs_name_and_the_log_lost(tmp_path):
    """crash/i: the message log cut short; its records past the cut are gone from the file but
    the consumer logs still name them: they are the missing sequences, as truth's recordsLost
    (salvage counted only gaps below the highest record left, 1 of 81). A segment emptied: every
    message the consumer logs name is missing, and salvage says something is lost (exit 3)."""
    variant = CRASH / "i-short-messagelog-segment"
    truth = load_truth(variant / "truth.json")
    store = expand_store(variant / "input", tmp_path / "store")
    r = run("salvage", store, "--out", tmp_path / "kept.jsonl", "-f", "json")
    assert r.exit_code == ExitCode.CORRUPT, r.stderr
    missing = {(s, q) for s, runs in json.loads(r.stdout)["missing_sequences"].items()
               for a, b in runs for q in range(a, b + 1)}
    assert missing == {(x["subject"], x["sequence"]) for x in truth["messageLog"]["recordsLost"]}
    empty = expand_store(QMQ / "basic" / "store", tmp_path / "empty")
    for segment in (empty / "messagelog").iterdir():
        segment.write_bytes(b"")
    r = run("salvage", empty, "--out", tmp_path / "none.jsonl", "-f", "json")
    doc = json.loads(r.stdout)
    assert r.exit_code == ExitCode.CORRUPT and doc["messages_kept"] == 0 and doc["lost_anything"] is True
    named = load_truth(QMQ / "basic" / "truth.json")["readBack"]["consumerLogs"]
    assert sum(b - a + 1 for runs in doc["missing_sequences"].values() for a, b in runs) == sum(
        1 for c in named.values() for u in c["units"] if u.get("kind", "message") == "message")


@pytest.fixture(scope="module")
def crash_stores(tmp_path_factory):
    """Every crash variant's input, expanded once for this module."""
    base = tmp_path_factory.mktemp("crash")
    return {v.name: expand_store(v / "input", base / v.name) for v in sorted(CRASH.iterdir()) if v.is_dir()}


def test_verify_columns_are_the_fields_of_the_familys_rows(basic, crash_stores):
    """--columns takes every field a QMQ store's verify rows carry (subject, sequence, ...), and
    not spark verify's store_name, which verify never gives (nor on a RocketMQ store)."""
    fields = set()
    for store in (basic, *crash_stores.values()):
        fields |= {k for line in run("verify", store, "-f", "jsonl").stdout.splitlines() for k in json.loads(line)}
    assert {"subject", "sequence", "message_log_offset"} <= fields
    store = crash_stores["d-flipped-payload-byte-mid-log"]
    r = cli_runner().invoke(app, ["verify", str(store), "--columns", ",".join(sorted(fields))],
                            env={"COLUMNS": "400"})
    assert r.exit_code == ExitCode.CORRUPT, r.stderr
    flipped = load_truth(CRASH / "d-flipped-payload-byte-mid-log" / "truth.json")["mutation"]["record"]
    r = cli_runner().invoke(app, ["verify", str(store), "--columns", "finding,subject,sequence"],
                            env={"COLUMNS": "120"})
    assert r.exit_code == ExitCode.CORRUPT, r.stderr
    assert r.stdout.splitlines()[0].split() == ["finding", "subject", "sequence"]
    assert ["payloadCrcMismatch", flipped["subject"], str(flipped["sequence"])] in \
        [line.split() for line in r.stdout.splitlines()]
    for other in (store, FIXTURES / "rocketmq-4.9.8" / "basic" / "store"):
        r = run("verify", other, "--columns", "finding,store_name")
        assert r.exit_code == ExitCode.USAGE and "unknown column store_name" in r.stderr


@pytest.mark.parametrize("variant", ["d-flipped-payload-byte-mid-log", "j-torn-last-record"])
def test_a_damaged_record_dumped_or_found_is_named_on_stderr(crash_stores, variant):
    """As on a RocketMQ store (dump commitlog's findings, query's note): the damaged record's
    file and position on stderr, exit 3 (it said only "1 damaged record(s)", or nothing)."""
    damaged = load_truth(CRASH / variant / "truth.json")["mutation"]
    record = damaged.get("record") or damaged["records"][0]
    store = crash_stores[variant]
    segment = store / damaged["file"]
    position = record["offset"] - int(segment.name)
    r = run("dump", "messagelog", store, "-f", "jsonl")
    assert r.exit_code == ExitCode.CORRUPT
    assert f"payloadCrcMismatch: {segment} at offset {position}:" in r.stderr, r.stderr
    r = run("query", store, "--subject", record["subject"], "--sequence", record["sequence"], "-f", "jsonl")
    assert r.exit_code == ExitCode.CORRUPT and json.loads(r.stdout)["message_log_offset"] == record["offset"]
    assert f"rmqtool: {segment}: offset {position}: payload CRC mismatch: the message at message log offset " \
           f"{record['offset']} is damaged" in r.stderr.splitlines(), r.stderr


def test_damaged_actions_dumped_are_named_on_stderr(tmp_path):
    records = load_truth(QMQ / "basic" / "truth.json")["readBack"]["actionLog"]["records"]
    store = expand_store(QMQ / "basic" / "store", tmp_path / "store")
    segment = next(p for p in (store / "actionlog").iterdir() if p.name.isdigit())
    with open(segment, "r+b") as f:  # the second action's magic overwritten
        f.seek(records[1]["offset"] - int(segment.name))
        f.write(b"\xee" * 4)
    r = run("dump", "actionlog", store, "-f", "jsonl")
    assert r.exit_code == ExitCode.CORRUPT
    assert f"actionRecordInvalid: {segment} at offset {records[1]['offset'] - int(segment.name)}:" in r.stderr


VARIANTS = sorted(v.name for v in CRASH.iterdir() if v.is_dir())


@pytest.mark.parametrize("variant", VARIANTS)
def test_info_says_what_the_next_start_does(crash_stores, variant):
    """info gives the message log's recovered end beside its written end, as RocketMQ's info
    gives the commit log's, and says what QMQ's start does as verify says it: a damaged record
    it stops at, named by its file and position, the records it drops, the sequences it serves
    empty, a start refused; exit 3 when it loses anything (truth.json: the restarted engine)."""
    truth = load_truth(CRASH / variant / "truth.json")
    store = crash_stores[variant]
    r = run("info", store, "-f", "json")
    doc = json.loads(r.stdout)
    log, found = doc["message_log"], doc["findings"]
    verified = [json.loads(x) for x in run("verify", store, "-f", "jsonl").stdout.splitlines()]
    assert [f for f in found if f not in verified] == []  # what info says of the start, verify says alike
    if not truth["started"]:
        assert r.exit_code == ExitCode.CORRUPT and log["recovered_end"] is None
        assert "storeNotLoadable" in {f["finding"] for f in found}
        return
    summary = truth["summary"]
    loses = summary["recordsLost"] or any(summary["servedSuccessWithoutMessage"].values())
    assert r.exit_code == (ExitCode.CORRUPT if loses else ExitCode.OK), r.stderr
    assert log["recovered_end"] == truth["messageLog"]["maxOffsetAfterRestart"]
    cut = truth["messageLog"].get("cutAt")
    cuts = [f for f in found if f["finding"] == "recoveryCutsMessageLog"]
    if cut is None:
        assert log["recovery_cut_reason"] is None and not cuts
        return
    assert [f["message_log_offset"] for f in cuts] == [cut] and log["recovery_cut_reason"]
    segment = max((p for p in (store / "messagelog").iterdir() if p.name.isdigit() and int(p.name) <= cut),
                  key=lambda p: int(p.name))
    assert {"finding": "payloadCrcMismatch", "path": str(segment), "offset": cut - int(segment.name)}.items() <= \
        next(f for f in found if f["finding"] == "payloadCrcMismatch").items()
    in_files = [x for x in truth["messageLog"]["recordsLost"] if x["offset"] < log["written_end"]]
    assert cuts[0]["records"] == len(in_files)


def test_info_of_a_store_a_process_holds_does_not_simulate_its_start(crash_stores):
    """A running broker's store starts again only once it stops: recovered_end null, as on a
    live RocketMQ store, and nothing said of that start."""
    import subprocess
    import sys
    store = crash_stores["j-torn-last-record"]
    segment = store / "messagelog" / f"{0:020d}"
    holder = subprocess.Popen([sys.executable, "-c", f"f = open({str(segment)!r}, 'rb'); print('open', flush=True); "
                               "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        r = run("info", store, "-f", "json")
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    doc = json.loads(r.stdout)
    assert doc["store"]["live"] and doc["message_log"]["recovered_end"] is None and doc["findings"] == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_recover_json_has_a_rocketmq_plans_keys_meaning_the_same(crash_stores, variant):
    """The README's crash triage, `jq '{loadable, reason, lost: (.lost_messages | length)}'`,
    reads a QMQ plan as a RocketMQ one: whether QMQ starts on the store as it is (and why not),
    every record the repair loses (truth.json: the records QMQ's start drops); store_path names
    the store (store, its old name, kept one release) and each action has its kind."""
    truth = load_truth(CRASH / variant / "truth.json")
    store = crash_stores[variant]
    r = run("recover", store, "-f", "json")
    doc = json.loads(r.stdout)
    assert doc["store_path"] == doc["store"] == str(store)
    assert doc["loadable"] is truth["started"] and (doc["reason"] is None) is truth["started"]
    if not truth["started"]:
        assert truth["summary"]["exception"] in doc["reason"] and doc["advice"]
    assert all(a["kind"] == a["action"] for a in doc["actions"])
    lost = doc["lost_messages"]
    assert [(m["message_log_offset"], m["subject"], m["sequence"]) for m in lost] == sorted(
        [(x["message_log_offset"], x["subject"], x["sequence"]) for x in doc["records_dropped"] + doc["records_unserved"]])
    assert all(m["reason"] == "log cut" for m in lost if m["message_log_offset"] in
               {x["message_log_offset"] for x in doc["records_dropped"]})
    if truth["started"]:
        in_files = [(x["offset"], x["subject"], x["sequence"]) for x in truth["messageLog"]["recordsLost"]
                    if x["offset"] < doc["broker_start"]["written_end"]]
        assert [(m["message_log_offset"], m["subject"], m["sequence"]) for m in lost] == in_files
    damaged = truth["mutation"]  # where it names the records it damaged, those alone salvage cannot keep
    flipped = [x["offset"] for x in [damaged.get("record"), *damaged.get("records", [])] if x]
    if flipped:
        assert [m["message_log_offset"] for m in lost if not m["readable"]] == flipped


def test_the_readmes_crash_triage_on_a_qmq_store(crash_stores):
    variant = "d-flipped-payload-byte-mid-log"
    summary = load_truth(CRASH / variant / "truth.json")["summary"]
    doc = json.loads(run("recover", crash_stores[variant], "-f", "json").stdout)
    assert {"loadable": doc["loadable"], "reason": doc["reason"], "lost": len(doc["lost_messages"])} == \
        {"loadable": summary["started"], "reason": None, "lost": summary["recordsLost"]}
