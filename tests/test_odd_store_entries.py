"""Entries of a store that are not what belongs there: a FIFO (a socket, a device) where a file
belongs (every command says so or reads past it, never waits on it for ever: an open for
reading of a FIFO blocks until a writer comes), a file where a directory belongs, a store
directory with nothing in it to read.

Each command runs in-process under an alarm: a hang fails the test (an open blocked on the
FIFO is interrupted by the alarm's exception, which no command catches)."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import signal

import pytest

from conftest import FIXTURES, V4
from helpers import cli_runner, expand_store, writable_copy

DOCUMENTED = {0, 1, 2, 3, 4, 5, 8}
CHECK_CODES = {0, 1, 2, 3}  # Nagios's


class Hung(BaseException):
    """A command still running when the alarm went off (BaseException: no boundary catches it)."""


@dataclasses.dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _alarm(seconds: int):
    def hung(_signum, _frame):
        raise Hung(f"still running after {seconds} s")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _rmqtool(*args) -> Ran:
    from rmqtool.cli.app import app
    with _alarm(60):
        r = cli_runner().invoke(app, [str(a) for a in args])
    escaped = r.exception is not None and not isinstance(r.exception, SystemExit)  # a process would print it
    return Ran(r.exit_code, r.stdout, r.stderr + (f"\nTraceback: {r.exception!r}" if escaped else ""))


def _fifo_at(store, name: str) -> None:
    path = store / name
    if path.exists():
        path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize("name", ["lock", "checkpoint", "abort", "config/consumerOffset.json",
                                  "commitlog/00000000000099999999"])
def test_a_fifo_in_a_rocketmq_store(tmp_path, name):
    store = writable_copy(V4 / "basic" / "store", tmp_path / "store")
    (store / "config").mkdir(exist_ok=True)
    _fifo_at(store, name)
    for command in (("info",), ("verify",), ("recover",), ("offsets",), ("report",), ("query", "--key", "k"),
                    ("check",)):
        r = _rmqtool(*command, store)
        assert r.returncode in (CHECK_CODES if command == ("check",) else DOCUMENTED), (command, r.stderr)
        assert "Traceback" not in r.stderr, (command, r.stderr)
        errors = [line for line in r.stderr.splitlines() if line.startswith("rmqtool: error")]
        assert len(errors) <= 1 and all("FIFO" in line for line in errors), (command, r.stderr)
    writer = _rmqtool("append", store, "--topic", "T", "--body", "x")
    assert writer.returncode in DOCUMENTED - {0} or name != "lock", writer.stderr
    if name == "lock":
        assert "FIFO where the lock file should be" in writer.stderr


def test_a_fifo_for_a_qmq_checkpoint(tmp_path):
    store = expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "store")
    newest = sorted(p.name for p in (store / "checkpoint").iterdir() if p.name.startswith("message-checkpoint"))[-1]
    _fifo_at(store, f"checkpoint/{newest}")
    for command in ("info", "verify", "recover", "report"):
        r = _rmqtool(command, store)
        assert r.returncode in DOCUMENTED and "Traceback" not in r.stderr, (command, r.stderr)


@pytest.mark.parametrize("kind", ["commitlog", "checkpoint", "consumequeue", "index", "config", "timerlog",
                                  "timercheck"])
def test_a_fifo_given_as_the_path(tmp_path, kind):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = _rmqtool("dump", kind, fifo)
    assert r.returncode == 4 and r.stderr.count("\n") == 1 and "a FIFO" in r.stderr, r.stderr


@pytest.mark.parametrize("directory", ["index", "consumequeue"])
def test_a_file_where_a_store_directory_belongs(tmp_path, directory):
    """index/ or consumequeue/ a regular file: the commands read the store without it (an index
    lookup scans the commit log, a key lookup without queue directories names the topic it
    needs), as the broker loads nothing from it; never 'not a directory' for the whole store."""
    import json
    from conftest import load_truth
    store = writable_copy(V4 / "basic" / "store", tmp_path / "store")
    import shutil
    shutil.rmtree(store / directory)
    (store / directory).write_text("x")
    keyed = next(m for m in load_truth(V4 / "basic" / "truth.json")["truth"]["messages"] if m.get("keys"))
    key = keyed["keys"].split()[0] if isinstance(keyed["keys"], str) else keyed["keys"][0]
    for command in (("info",), ("verify",), ("dump", "index"), ("query", "--key", key, "-t", keyed["topic"], "-f", "jsonl")):
        r = _rmqtool(*command, store)
        assert r.returncode in (0, 3) and "not a directory" not in r.stderr, (command, r.stderr)
    found = _rmqtool("query", store, "--key", key, "-t", keyed["topic"], "-f", "jsonl")
    assert keyed["physicalOffset"] in [json.loads(x)["commit_log_offset"] for x in found.stdout.splitlines()]
    scanned = _rmqtool("query", store, "--key", key, "--no-index", "-f", "jsonl")
    assert scanned.returncode == 0, scanned.stderr


def test_a_store_with_nothing_to_read_is_not_a_usage_error(tmp_path):
    """An empty commitlog/ given to redispatch, a directory holding only a lock file given to
    dump commitlog --served-only: data conditions, exit 4 as for every command, not 2."""
    empty = tmp_path / "empty"
    (empty / "commitlog").mkdir(parents=True)
    (empty / "consumequeue").mkdir()
    r = _rmqtool("redispatch", empty)
    assert r.returncode == 4 and "no commit log file" in r.stderr, r.stderr
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "lock").write_bytes(b"")
    r = _rmqtool("dump", "commitlog", bare, "--served-only")
    assert r.returncode == 4 and "not a RocketMQ store" in r.stderr, r.stderr


def test_a_symlink_loop_is_unknown_to_check_and_one_line_to_the_rest(tmp_path):
    """Two segment names linked to each other: check (a Nagios probe) says UNKNOWN (3), never
    rmqtool's 8; the other commands give one line, exit 8 (an I/O error)."""
    store = writable_copy(V4 / "basic" / "store", tmp_path / "store")
    a, b = store / "commitlog" / f"{99999998:020d}", store / "commitlog" / f"{99999999:020d}"
    a.symlink_to(b.name)
    b.symlink_to(a.name)
    r = _rmqtool("check", store)
    assert r.returncode == 3 and r.stdout.startswith("RMQTOOL CHECK UNKNOWN"), (r.stdout, r.stderr)
    for command in ("info", "verify"):
        r = _rmqtool(command, store)
        assert r.returncode in DOCUMENTED and "Traceback" not in r.stderr, (command, r.stderr)


def test_a_file_where_qmqs_message_log_directory_belongs(tmp_path):
    """QMQ's start throws on it (LogManager.createAndValidateLogDir): info says so as verify
    does (it showed an empty log, exit 0)."""
    import json
    import shutil
    store = expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "store")
    shutil.rmtree(store / "messagelog")
    (store / "messagelog").write_bytes(b"\xee" * 100)
    r = _rmqtool("info", store, "-f", "json")
    assert r.returncode == 3, r.stderr
    assert [f["finding"] for f in json.loads(r.stdout)["findings"]] == ["storeNotLoadable"]
    assert _rmqtool("verify", store).returncode == 3


@pytest.mark.parametrize("where", ["commitlog", "consumequeue"])
def test_a_link_to_a_disk_not_mounted_among_the_files_stops_the_load(tmp_path, where):
    """MappedFileQueue.load takes File.length() of each entry: 0 for a link whose target is not
    there, which is never the mapped file size, so the broker does not start. check said OK and
    recover said loadable (the entry was skipped)."""
    import json
    store = writable_copy(V4 / "basic" / "store", tmp_path / "store")
    directory = store / where if where == "commitlog" else next((store / where).glob("*/*"))
    middle = sorted(directory.iterdir())[len(list(directory.iterdir())) // 2]
    middle.unlink()
    middle.symlink_to(tmp_path / "not-mounted" / middle.name)
    plan = json.loads(_rmqtool("recover", store, "-f", "json").stdout)
    assert plan["loadable"] is False and str(middle) in plan["reason"]
    check = _rmqtool("check", store)
    assert check.returncode == 2 and "load_refused=1" in check.stdout


def test_a_commit_log_file_cut_while_it_is_read_is_one_error_naming_it(tmp_path):
    """A file listed at one size and cut shorter before the scan reads it (a writer truncating
    it under a reader): StoreAccessError naming the file and the offset, where the short read
    reached struct.unpack_from and came out as a traceback (exit 1)."""
    from rmqtool.errors import StoreAccessError
    from rmqtool.store.commitlog_end import CommitLog

    store = writable_copy(V4 / "basic" / "store", tmp_path / "store")
    log = CommitLog(store / "commitlog")
    last = log.segments[-1]
    os.truncate(last.path, 100)
    with pytest.raises(StoreAccessError) as raised:
        for _record in log.scan():
            pass
    assert str(last.path) in raised.value.one_line() and "cut it while it was read" in raised.value.one_line()
