"""A QMQ subject names its consumer log's directory, and a damaged subject can name one no file
system takes (a NUL in it, a name too long). ``LogManager.createAndValidateLogDir`` then
throws: QMQ's replay of such a record retries forever (the start simulated says it hangs), and
recover's plan gives it no unit (its rewrite would make that directory: once a traceback), lists
it as unserved with why, and exits 3; a second plan changes nothing, and undo gives every byte back."""
from __future__ import annotations

import json
import shutil

import pytest

from conftest import FIXTURES
from helpers import cli_runner, expand_store, qmq_records, tree_fingerprint
from rmqtool.cli.app import app
from rmqtool.formats.qmq.messagelog import RecordPrefix
from rmqtool.recovery.qmq.plan import NO_DIRECTORY, plan_recovery
from rmqtool.recovery.qmq.start import simulate_start
from rmqtool.store.qmq.segments import directory_refusal

SUBJECT_AT = RecordPrefix.sizeof() + 8 + 2  # the subject follows the prefix, the sequence and its length


def test_the_directories_qmq_cannot_make(tmp_path):
    (tmp_path / "a-file").write_bytes(b"x")
    (tmp_path / "there").mkdir()
    assert directory_refusal(tmp_path / "there") is None
    assert directory_refusal(tmp_path / "new" / "deeper") is None  # createDirectories makes both
    for cannot in (tmp_path / "a\0b", tmp_path / ("x" * 300), tmp_path / "a-file" / "sub"):
        assert directory_refusal(cannot).startswith("Failed to create log directory ")
    assert directory_refusal(tmp_path / "a-file").endswith(" is not a readable log directory")



@pytest.fixture()
def damaged(tmp_path):
    """The basic store with a NUL written into one record's subject; (store, that record as it was)."""
    store = expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "store")
    records = qmq_records(store)
    record = max(records, key=lambda r: (len(r.subject.encode()) >= 2, r.offset))
    with open(record.path, "r+b") as f:
        f.seek(record.position + SUBJECT_AT + 1)
        f.write(b"\0")
    return store, record


def test_recover_leaves_it_unserved_and_makes_no_such_directory(damaged):
    store, record = damaged
    plan = plan_recovery(store)
    (unserved,) = [u for u in plan.records_unserved if u[0] == record.offset]
    assert "\0" in unserved[1] and unserved[3].startswith(NO_DIRECTORY)
    assert all("\0" not in c.subject for c in plan.consumer_logs)
    before = tree_fingerprint(store)
    r = cli_runner().invoke(app, ["recover", str(store), "-f", "json"])
    assert r.exit_code == 3, r.stderr
    assert record.offset in [u["message_log_offset"] for u in json.loads(r.stdout)["records_unserved"]]
    applied = cli_runner().invoke(app, ["recover", str(store), "--apply", "-f", "json"])
    assert applied.exit_code == 0 and "Traceback" not in applied.stderr, applied.exception
    assert not any("\0" in p.name for p in (store / "consumerlog").iterdir())
    again = plan_recovery(store)
    assert not again.changes_anything and again.records_unserved == plan.records_unserved
    backup = json.loads(applied.stdout)["applied"]["backup_dir"]
    assert cli_runner().invoke(app, ["undo", backup]).exit_code == 0
    assert tree_fingerprint(store) == before


def test_the_start_hangs_where_its_replay_reaches_it(damaged):
    store, record = damaged
    shutil.rmtree(store / "checkpoint")  # no checkpoint: the replay goes through the whole log
    (store / "checkpoint").mkdir()
    outcome = simulate_start(store)
    assert not outcome.started
    assert outcome.refusal.kind == "hangs" and outcome.refusal.exception == "java.lang.RuntimeException"
    assert outcome.refusal.message.startswith("Failed to create log directory ")


def test_a_subject_names_its_directory_as_java_s_file_does(tmp_path):
    from rmqtool.store.qmq.consumerlog import outside_its_own, subject_directory
    base = tmp_path / "consumerlog"
    assert subject_directory(tmp_path, "/x") == base / "x"  # not /x: Java joins it under its parent
    assert subject_directory(tmp_path, "a//b/") == base / "a" / "b"
    assert subject_directory(tmp_path, "") == subject_directory(tmp_path, "/") == base
    for subject in ("", "/", ".", "..", "../x", "a/../../x"):
        assert outside_its_own(tmp_path, subject_directory(tmp_path, subject)), subject
    for subject in ("a", "a/b", "/x", "a/../b"):
        assert not outside_its_own(tmp_path, subject_directory(tmp_path, subject)), subject


@pytest.mark.parametrize("damage", [b"/", b"../"])
def test_recover_writes_no_consumer_log_outside_the_store(tmp_path, damage):
    """A damaged subject starting "/" is consumerlog/<rest> to QMQ (once: the filesystem's
    root to rmqtool's plan); one starting "../" leaves consumerlog/: its records get no unit."""
    store = expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "store")
    record = max(qmq_records(store), key=lambda r: (len(r.subject.encode()) > len(damage) + 1, r.offset))
    with open(record.path, "r+b") as f:
        f.seek(record.position + SUBJECT_AT)
        f.write(damage)
    plan = plan_recovery(store)
    base = str(store / "consumerlog") + "/"
    assert all(c.directory.startswith(base) for c in plan.consumer_logs)
    unserved = [u for u in plan.records_unserved if u[0] == record.offset]
    assert bool(unserved) == (damage == b"../")
    applied = cli_runner().invoke(app, ["recover", str(store), "--apply", "-f", "json"])
    assert "Traceback" not in applied.stderr and applied.exit_code in (0, 3), applied.stderr
    rest = record.subject[len(damage):]  # what the damaged subject names past its first bytes
    assert not (store / rest).exists() or damage == b"/" and (store / "consumerlog" / rest).is_dir()


def test_a_subject_directory_whose_name_is_not_utf8_is_written_as_java_reads_it(tmp_path):
    """A consumer log directory named with bytes that are not UTF-8: recover --apply writes the
    message checkpoint (a UnicodeEncodeError went out), its subject as Java's File.list decodes
    the name (U+FFFD in place of each bad byte)."""
    import os
    store = expand_store(FIXTURES / "qmq" / "crash" / "a-as-is" / "input", tmp_path / "store")
    name = b"bad\xff\xfename"
    odd = os.path.join(os.fsencode(store / "consumerlog"), name)
    os.mkdir(odd)
    first = sorted((store / "consumerlog" / "crash.order").iterdir())[0]
    with open(os.path.join(odd, os.fsencode(first.name)), "wb") as f:
        f.write(first.read_bytes())
    r = cli_runner().invoke(app, ["recover", str(store), "--apply", "--backup-dir", str(tmp_path / "b")])
    assert r.exit_code == 0 and r.exception is None or isinstance(r.exception, SystemExit), r.exception
    newest = sorted(p for p in (store / "checkpoint").iterdir() if p.name.startswith("message-checkpoint"))[-1]
    assert "bad\ufffd\ufffdname/" in newest.read_bytes().decode("utf-8")
