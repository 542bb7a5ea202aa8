"""Issue 20, items 12 and 18: one exit-code table for every command, and no traceback.

Every command of the typer app (listed from the app, so a new one is covered the day it is
added) runs as the operator runs it, in a subprocess, against the same mistakes: a missing
path (8), a regular file that is not a store (4), an empty directory (4), a damaged store
(the code its README section documents), and a reader that closed the pipe (0). Errors are
one line on stderr, never a traceback.
"""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import typer

from conftest import V4, load_truth
from helpers import writable_copy
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode

DAMAGED = V4 / "crash" / "e2-corrupt-body-in-first-commitlog-file"  # one body byte flipped (truth: mutation)
DAMAGED_AT = load_truth(DAMAGED / "truth.json")["mutation"]["messagePhysicalOffset"]


def leaf_commands(group=None, path=()):
    """(name path, click command) of every command the app has, subcommands included; a group's
    hidden default command (`rmqtool offsets STORE`) under the group's name."""
    group = group or typer.main.get_command(app)
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):
            yield from leaf_commands(command, (*path, name))
        else:
            yield (path if command.hidden and path else (*path, name)), command


COMMANDS = {" ".join(name): command for name, command in leaf_commands()}

# Arguments a command needs besides its path to do its ordinary job (they add no check of their own)
EXTRA = {
    "query": ["--offset", str(DAMAGED_AT)],
    "salvage": ["--out", "{tmp}/salvaged.jsonl"],
    "append": ["--topic", "T", "--body", "b"],
    "spark export": ["--out", "{tmp}/fleet"],
    "spark query": ["--key", "k"],
    "diff": [str(V4 / "basic" / "store")],  # STORE_B: another store
    "offsets reset": ["--group", "order_group", "--topic", "CrashTopic", "--to-latest"],
}
# What a damaged store (DAMAGED: a crash with one flipped body byte in its first file) gives,
# as each command's README section documents it
ON_DAMAGED = {
    "info": ExitCode.OK,  # info reads no body
    "query": ExitCode.CORRUPT,  # the message found has a bad body CRC
    "verify": ExitCode.CORRUPT,
    "offsets": ExitCode.OK,  # no consumerOffset.json: nothing to compare
    "offsets reset": ExitCode.NOT_FOUND,  # no consumerOffset.json: the group has no offset to reset
    "check": ExitCode.OK,  # Nagios OK: the flipped byte lies in the first file, before the tail check reads
    "diff": ExitCode.CORRUPT,  # against another store: they differ
    "report": ExitCode.CORRUPT,  # verify's findings: the flipped body byte is an error
    "recover": ExitCode.CORRUPT,  # the plan changes something
    "redispatch": ExitCode.OK,  # the rebuilt queues and index equal the store's
    "salvage": ExitCode.CORRUPT,  # a message is lost
    "append": ExitCode.CORRUPT,  # refused: the store needs recovery first
    "undo": ExitCode.BAD_INPUT,  # a store is not a backup
    "dump commitlog": ExitCode.CORRUPT,
    "dump consumequeue": ExitCode.OK,
    "dump cqext": ExitCode.OK,  # the damaged store has no consumequeue_ext: no rows
    "dump dledger": ExitCode.BAD_INPUT,  # the damaged store has no dledger-<selfId>/: not a DLedger store
    "dump index": ExitCode.OK,
    "dump checkpoint": ExitCode.OK,
    "dump config": ExitCode.OK,
    # the 5.x compaction store's kinds: the damaged store has none, so nothing to show
    "dump compactionlog": ExitCode.OK,
    "dump compactioncq": ExitCode.OK,
    "dump positioncheckpoint": ExitCode.OK,
    # the 5.x timer store's kinds: a store without a timer dumps nothing (said on stderr)
    "dump timerwheel": ExitCode.OK,
    "dump timerlog": ExitCode.OK,
    "dump timercheck": ExitCode.OK,
    "dump timermetrics": ExitCode.OK,
    # controller mode's epoch file: a store not in controller mode has none (said on stderr)
    "dump epochfile": ExitCode.OK,
    # the 5.x RocksDB kinds: a store without a RocksDB consume queue or config store dumps nothing (said on stderr)
    "dump rocksdbcq": ExitCode.OK,
    "dump rocksdbconfig": ExitCode.OK,
    # QMQ's dump kinds: a RocketMQ store is not a QMQ store
    "dump messagelog": ExitCode.BAD_INPUT,
    "dump consumerlog": ExitCode.BAD_INPUT,
    "dump actionlog": ExitCode.BAD_INPUT,
    "dump pulllog": ExitCode.BAD_INPUT,
}
QMQ_KINDS = {"dump messagelog", "dump consumerlog", "dump actionlog", "dump pulllog"}
QMQ_STORE = V4.parent / "qmq" / "basic" / "store"  # read only: the dump kinds print from it as it is
# Each of these starts a Spark session (about 20 s of JVM start on this machine kind) once its
# arguments pass: they take part in the argument checks, which fail before Spark starts
SPARK_STARTS = {"spark export", "spark query", "spark stats", "spark verify"}
SPARK_ALWAYS = {"spark verify"}  # a store that is not there is a row of its own, after Spark starts
NAGIOS = {"check"}  # a Nagios probe: a store it cannot read is UNKNOWN (3) on its status line (tests/test_check.py)


NOT_A_PATH = {"finding_id"}  # `rmqtool findings [ID]`: its argument names a finding, not a store


def takes_path(command) -> bool:
    return any(p.param_type_name == "argument" and p.name not in NOT_A_PATH for p in command.params)


# Runs rmqtool once per job, each in its own process forked from one that has imported the CLI
# already: a real process each (its own descriptors, exit code and interpreter shutdown, where
# "Exception ignored" would show), without paying the imports a hundred times, nor (gc.freeze)
# a collection of everything imported at each child's exit.
DRIVER = r"""
import gc, json, os, sys
import typer.main
from rmqtool.cli.app import app, main
import rmqtool.engine.store, rmqtool.recovery.plan, rmqtool.verify.run  # noqa: what commands load, loaded once
command, build = typer.main.get_command(app), typer.main.get_command  # and the click command main() runs, built once
typer.main.get_command = lambda typer_app: command if typer_app is app else build(typer_app)
gc.freeze()  # the modules loaded above stay out of each child's collections (its exit copied every page they sit on)
jobs = json.load(open(sys.argv[1]))
results = []
for n, job in enumerate(jobs):
    out_path, err_path = f"{sys.argv[2]}.{n}.out", f"{sys.argv[2]}.{n}.err"
    if job["stdout"] == "closed":  # the reader is gone before the first byte
        read_end, out_fd = os.pipe()
        os.close(read_end)
    else:
        out_fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    err_fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    pid = os.fork()
    if pid == 0:  # the child: rmqtool as the shell starts it; main() ends in sys.exit
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        sys.argv = ["rmqtool", *job["args"]]
        main()
        os._exit(99)  # main() returned: never expected
    os.close(out_fd)
    os.close(err_fd)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    stdout = open(out_path, encoding="utf-8", errors="replace").read() if job["stdout"] != "closed" else ""
    results.append({"code": status, "stdout": stdout,
                    "stderr": open(err_path, encoding="utf-8", errors="replace").read()})
json.dump(results, open(sys.argv[3], "w"))
"""


def run_all(jobs: list[dict], tmp_path: pathlib.Path) -> list[dict]:
    """Each job {"args": [...], "stdout": "capture" | "closed"} run as rmqtool; its code, stdout, stderr."""
    spec, out = tmp_path / "jobs.json", tmp_path / "results.json"
    spec.write_text(json.dumps(jobs))
    done = subprocess.run([sys.executable, "-c", DRIVER, str(spec), str(tmp_path / "job"), str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def run(args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from rmqtool.cli.app import main; main()", *args],
                          capture_output=True, text=True, timeout=120)


def argv(name: str, path, tmp_path) -> list[str]:
    extra = [a.replace("{tmp}", str(tmp_path)) for a in EXTRA.get(name, [])]
    return [*name.split(), *([str(path)] if takes_path(COMMANDS[name]) else []), *extra]


def one_clean_line(stderr: str) -> bool:
    lines = stderr.strip().splitlines()
    return (len(lines) == 1 and lines[0].startswith("rmqtool") and "Traceback" not in stderr
            and "Exception ignored" not in stderr)


def mistake(kind: str, tmp_path: pathlib.Path) -> pathlib.Path:
    if kind == "missing":
        return tmp_path / "no-such-store"
    if kind == "file":
        path = tmp_path / "passwd"
        path.write_text("root:x:0:0:root:/root:/bin/sh\n")
        return path
    path = tmp_path / "empty"
    path.mkdir()
    return path


PATH_COMMANDS = sorted(n for n, c in COMMANDS.items() if takes_path(c))


def test_every_command_is_classified():
    """A new command needs its documented code on a damaged store (and EXTRA if it needs arguments)."""
    assert "findings" in COMMANDS and "dump commitlog" in COMMANDS and "spark verify" in COMMANDS
    missing = set(PATH_COMMANDS) - set(ON_DAMAGED) - SPARK_STARTS
    assert not missing, f"add the exit code on a damaged store of: {sorted(missing)}"


@pytest.mark.parametrize("kind, code", [("missing", ExitCode.OPERATIONAL), ("file", ExitCode.BAD_INPUT),
                                        ("empty", ExitCode.BAD_INPUT)])
def test_the_same_mistake_gives_the_same_code_in_every_command(kind, code, tmp_path):
    """A missing path is 8, a file or an empty directory where a store belongs 4: one line
    on stderr naming the path, and nothing made at a mistyped path."""
    path = mistake(kind, tmp_path)
    names = sorted(set(PATH_COMMANDS) - SPARK_ALWAYS - NAGIOS)
    results = run_all([{"args": argv(n, path, tmp_path), "stdout": "capture"} for n in names], tmp_path)
    wrong = {n: (r["code"], r["stderr"]) for n, r in zip(names, results)
             if r["code"] != code or not one_clean_line(r["stderr"]) or str(path) not in r["stderr"]}
    assert not wrong, wrong
    assert path.exists() == (kind != "missing")
    if kind == "empty":
        assert not any(path.iterdir())


def test_a_damaged_store_gives_the_documented_code(tmp_path):
    names = sorted(set(PATH_COMMANDS) - SPARK_STARTS)
    jobs = [{"args": argv(n, writable_copy(DAMAGED / "input" / "store", tmp_path / f"store-{i}"), tmp_path),
             "stdout": "capture"} for i, n in enumerate(names)]
    results = run_all(jobs, tmp_path)
    wrong = {n: (r["code"], r["stderr"][-500:]) for n, r in zip(names, results)
             if r["code"] != ON_DAMAGED[n] or "Traceback" in r["stderr"]}
    assert not wrong, wrong


def closed_pipe_argv(name: str, tmp_path: pathlib.Path) -> list[str]:
    """Arguments with which ``name`` prints something, on a copy of the damaged store of its own."""
    store = writable_copy(DAMAGED / "input" / "store", tmp_path / "store")
    if name == "undo":  # a backup, as recover --apply writes it
        done = run(["recover", str(store), "--apply"])
        assert done.returncode in (ExitCode.OK, ExitCode.CORRUPT), done.stderr
        backups = sorted(tmp_path.glob("store.recovery-*"))
        assert len(backups) == 1, done.stderr
        return ["undo", str(backups[0])]
    if name == "append":  # a damaged store is refused before anything is printed: recover it first
        return [*argv(name, store, tmp_path), "--recover"]
    if name == "offsets reset":  # the damaged store has no consumerOffset.json: one with a group's offsets
        return argv(name, writable_copy(V4.parent / "config" / "consumers" / "store", tmp_path / "config-store"),
                    tmp_path)
    if name in QMQ_KINDS:  # QMQ's files: a QMQ store
        return argv(name, QMQ_STORE, tmp_path)
    if name == "dump dledger":  # DLedger's entry log: a store run with enableDLegerCommitLog (read only)
        return argv(name, V4.parent / "rocketmq-5.3.3" / "dledger" / "store", tmp_path)
    return argv(name, store, tmp_path)


# the commands closed_pipe_argv runs that write (a store, a file): their output is the record of it
WRITING = {"append", "salvage", "undo"}


@pytest.mark.parametrize("fmt", ["table", "jsonl", "json"])
def test_a_closed_pipe_is_exit_0_in_every_command(fmt, tmp_path):
    """stdout's reader is gone before the first byte (as `| head -c1` leaves it, without the
    race): a reader exits 0, no traceback, no "Exception ignored", whatever it would have
    exited with otherwise (verify and dump here: 3); a writer exits 8, its one line naming
    <stdout> and what it changed, never a silent 0."""
    names = sorted(set(COMMANDS) - SPARK_STARTS)
    jobs = []
    for n in names:
        work = tmp_path / n.replace(" ", "-")
        work.mkdir()
        jobs.append({"args": [*closed_pipe_argv(n, work), "--format", fmt], "stdout": "closed"})
    results = run_all(jobs, tmp_path)
    bad_text = ("Traceback", "Exception ignored", "BrokenPipeError", "Broken pipe")
    wrong = {n: (r["code"], r["stderr"][-500:]) for n, r in zip(names, results)
             if r["code"] != (ExitCode.OPERATIONAL if n in WRITING else ExitCode.OK)
             or any(t in r["stderr"] for t in bad_text)
             or n in WRITING and not r["stderr"].splitlines()[-1].startswith(
                 "rmqtool: error: <stdout>: closed by its reader: ")}
    assert not wrong, wrong


@pytest.mark.parametrize("option", [["--group", "nosuch_group"], ["--topic", "NoSuchTopic"]])
def test_offsets_for_a_group_or_topic_not_there_is_not_found(option):
    """The README's table: 1 is a lookup that found nothing (today: "(no rows)", exit 0)."""
    store = V4.parent / "config" / "consumers" / "store"
    done = run(["offsets", str(store), *option])
    assert done.returncode == ExitCode.NOT_FOUND, done.stderr
    assert one_clean_line(done.stderr) and option[1] in done.stderr


def test_offsets_for_a_group_there_is_found():
    store = V4.parent / "config" / "consumers" / "store"
    everything = run(["offsets", str(store), "--format", "jsonl"])
    group = json.loads(everything.stdout.splitlines()[0])["group"]
    done = run(["offsets", str(store), "--group", group, "--format", "jsonl"])
    assert done.returncode != ExitCode.NOT_FOUND and done.stdout


# Item 18: stores that raised a traceback. Each command gives what the broker does with the
# store, or one line naming the file, with a code from the table.

V5 = V4.parent / "rocketmq-5.3.3"
READERS = ("info", "verify", "dump commitlog", "dump consumequeue", "offsets")  # no traceback, whatever they find


def run_commands(store: pathlib.Path, names, tmp_path: pathlib.Path, fmt: str = "json", more=None) -> dict:
    """Each command on ``store`` (``more``: further arguments by command)."""
    more = more or {}
    jobs = [{"args": [*argv(n, store, tmp_path), *more.get(n, ()), "--format", fmt], "stdout": "capture"}
            for n in names]
    results = dict(zip(names, run_all(jobs, tmp_path)))
    tracebacks = {n: r["stderr"][-800:] for n, r in results.items()
                  if "Traceback" in r["stderr"] or r["code"] not in set(ExitCode)}
    assert not tracebacks, tracebacks
    return results


def only_file_empty(src: pathlib.Path, tmp_path: pathlib.Path, topic: str, queue_id: int) -> tuple:
    store = writable_copy(src, tmp_path / "store")
    directory = store / "consumequeue" / topic / str(queue_id)
    for f in directory.iterdir():
        f.unlink()
    empty = directory / "00000000000000000000"
    empty.write_bytes(b"")  # : > consumequeue/T/1/00000000000000000000
    return store, empty


def test_a_queue_whose_only_file_is_empty_on_4_9_8(tmp_path):
    """MappedFileQueue.load (4.9.8) refuses a file whose length is not mappedFileSizeConsumeQueue,
    and 0 bytes never is: the broker does not start. recover says so naming the file; append
    refuses in one line (3, as for any store that needs recovery); redispatch --cq rebuilds the
    queue, replacing the file (it refused, as append does); readers go on."""
    store, empty = only_file_empty(V4 / "basic" / "store", tmp_path, "AuditLogTopic", 1)
    # a cleanly shut down 4.9.8 store shows no version (nothing 5.x-only, no abort file), and
    # here the versions' rules differ: append asks for it
    undecided = run_commands(store, ["append"], tmp_path)["append"]
    assert undecided["code"] == ExitCode.USAGE and "--semantics" in undecided["stderr"], undecided["stderr"]
    rules = ("--semantics", "4.9")
    results = run_commands(store, ["recover", "redispatch", "append", "salvage", *READERS], tmp_path,
                           more={"recover": rules, "redispatch": rules, "append": rules})
    plan = json.loads(results["recover"]["stdout"])
    assert results["recover"]["code"] == ExitCode.CORRUPT
    assert plan["loadable"] is False and str(empty) in plan["reason"] and plan["actions"] == []
    assert results["append"]["code"] == ExitCode.CORRUPT, results["append"]["stderr"]
    assert one_clean_line(results["append"]["stderr"]), results["append"]["stderr"]
    messages = load_truth(V4 / "basic" / "truth.json")["truth"]["messages"]
    units = sum(1 for m in messages if (m["topic"], m["queueId"]) == ("AuditLogTopic", 1))
    rebuilt = json.loads(results["redispatch"]["stdout"])
    assert results["redispatch"]["code"] == ExitCode.CORRUPT  # the rebuilt queue differs from the store's
    assert ("replace", str(empty)) in {(c["kind"], c["file"]) for c in rebuilt["changes"]}
    assert sum(c["units"] for c in rebuilt["changes"] if c["kind"] != "same" and "/AuditLogTopic/1/" in c["file"]) \
        == units


def test_a_queue_whose_only_file_is_empty_on_5_3_3(tmp_path):
    """5.3.3's MappedFileQueue.doLoad deletes an empty last file ("size is 0, auto delete") and
    loads the store: recover plans from there; redispatch rebuilds the queue's file with every
    unit the broker's queue had (truth.json)."""
    src = V5 / "v2-and-crc"
    store, empty = only_file_empty(src / "store", tmp_path, "OrderTopic", 1)
    results = run_commands(store, ["recover", "redispatch", "salvage", *READERS], tmp_path)
    assert results["recover"]["code"] in (ExitCode.OK, ExitCode.CORRUPT)
    plan = json.loads(results["recover"]["stdout"])
    assert plan["loadable"] is True and plan["semantics"] == "5.3"
    messages = load_truth(src / "truth.json")["truth"]["messages"]
    units = sum(1 for m in messages if (m["topic"], m["queueId"]) == ("OrderTopic", 1))
    assert units > 0
    rebuilt = json.loads(results["redispatch"]["stdout"])
    assert results["redispatch"]["code"] == ExitCode.CORRUPT  # the rebuilt queue differs from the store's
    assert {(c["kind"], c["file"], c["units"]) for c in rebuilt["changes"] if c["kind"] != "same"} == \
        {("replace", str(empty), units)}


@pytest.mark.parametrize("name", [f"{1 << 63:020d}", "99999999999999999999"])
def test_a_segment_named_past_a_java_long(name, tmp_path):
    """MappedFile.init parses the name with Long.parseLong: 2^63 and above fail, the load fails
    and the broker does not start. recover says so naming the file; the readers skip the file
    with a segmentNameInvalid finding naming it (no OverflowError)."""
    store = writable_copy(V4 / "basic" / "store", tmp_path / "store")
    size = load_truth(V4 / "basic" / "truth.json")["messageStoreConfig"]["effectiveGetterValues"][
        "mappedFileSizeCommitLog"]
    odd = store / "commitlog" / name
    odd.write_bytes(bytes(range(256)) * (size // 256))
    names = ["recover", "redispatch", "append", "salvage", "query", "dump index", *READERS]
    results = run_commands(store, names, tmp_path, fmt="jsonl")
    plan = json.loads(results["recover"]["stdout"])
    assert results["recover"]["code"] == ExitCode.CORRUPT
    assert plan["loadable"] is False and str(odd) in plan["reason"] and "not an offset" in plan["reason"]
    for command in ("redispatch", "append"):
        assert results[command]["code"] == ExitCode.CORRUPT and one_clean_line(results[command]["stderr"])
        assert str(odd) in results[command]["stderr"]
    findings = [json.loads(line) for line in results["verify"]["stdout"].splitlines()]
    assert any(f["finding"] == "segmentNameInvalid" and f["path"] == str(odd) for f in findings), findings


@pytest.mark.parametrize("src", [V4 / "batch", V5 / "batchcq"])
def test_a_deleted_segment_and_a_short_garbage_one_far_past_the_end(src, tmp_path):
    """The last segment deleted and 100 bytes of garbage named three files further: the
    broker's load refuses the short file (its length is not mappedFileSizeCommitLog); recover
    names it (not the intact first file), and no command stops on a StopIteration. (batchcq
    has one segment: with it gone no file shows the mapped file size, so only the codes are
    checked there.)"""
    store = writable_copy(src / "store", tmp_path / "store")
    size = load_truth(src / "truth.json")["messageStoreConfig"]["effectiveGetterValues"]["mappedFileSizeCommitLog"]
    segments = sorted((store / "commitlog").iterdir())
    segments[-1].unlink()
    garbage = store / "commitlog" / f"{int(segments[-1].name) + 3 * size:020d}"
    garbage.write_bytes(bytes(range(100)))
    results = run_commands(store, ["recover", "salvage", "redispatch", "append", *READERS], tmp_path)
    plan = json.loads(results["recover"]["stdout"])
    assert results["recover"]["code"] == ExitCode.CORRUPT
    for command in ("redispatch", "append"):
        assert results[command]["code"] == ExitCode.CORRUPT and one_clean_line(results[command]["stderr"])
    assert results["salvage"]["code"] == ExitCode.CORRUPT  # the deleted file's messages are lost
    if len(segments) > 1:  # another file shows the mapped file size: the short one is the one refused
        assert plan["loadable"] is False
        assert plan["reason"].startswith(f"{garbage}: 100 bytes, not the mapped file size {size}"), plan["reason"]


def test_out_of_memory_is_one_line_and_the_operational_code(monkeypatch):
    """A MemoryError (the machine's memory, or a ulimit -v cap) goes through the one error
    boundary as any operational error: one line, exit 8, no traceback."""
    from helpers import cli_runner
    import rmqtool.verify.qmq.run as qmq_run

    def out_of_memory(root):
        raise MemoryError()
        yield  # a generator, as check_store is

    monkeypatch.setattr(qmq_run, "check_store", out_of_memory)
    r = cli_runner().invoke(app, ["verify", str(QMQ_STORE), "-f", "jsonl"])
    assert r.exit_code == ExitCode.OPERATIONAL, (r.exit_code, r.stderr)
    assert one_clean_line(r.stderr) and "out of memory" in r.stderr and "Traceback" not in r.stderr
