"""Memory never follows a file's size: consume queues are read window by window, and the
checkpoint, config files and markers are sized before they are read.

Each class of oversized file (a sparse 2 GiB file costs nothing on disk) is also replayed
through the CLI in a child process whose address space is capped at 1 GiB: a whole-file
read there ends in a MemoryError traceback; a bounded one in a documented exit code and
one-line messages.
"""
from __future__ import annotations

import os
import pathlib
import re
import resource
import subprocess
import sys

import pytest

from conftest import CLEAN_SCENARIOS, REPO, V4, V5, load_truth
from rmqtool.errors import ExitCode, FormatError
from rmqtool.formats.checkpoint import CHECKPOINT_FILE_SIZE
from rmqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE
from rmqtool.store import consumequeue as cq_module
from rmqtool.store.checkpoint import MARKER_READ_LIMIT, read_checkpoint, read_markers
from rmqtool.store.config import BAK, MAX_CONFIG_FILE_SIZE, read_config_bytes, read_config_file
from rmqtool.store.consumequeue import ConsumeQueue, open_consume_queues, queue_id_of

HUGE = 2 << 30  # past the 1 GiB address-space cap of the child processes below
AS_LIMIT = 1 << 30
# what rmqtool writes on stderr: its own lines, and findings (README, "Findings")
STDERR_LINE = re.compile(r"(rmqtool: \S.*|(info|warning|error): [a-z][A-Za-z0-9]+: .*)")
DOCUMENTED_EXIT_CODES = {int(code) for code in ExitCode}


def _sparse(path: pathlib.Path, size: int = HUGE, head: bytes = b"") -> pathlib.Path:
    """A file of `size` bytes that holds only `head` on disk (the rest is a hole)."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)
    return path


def _queue_state(store, commit_log_max_offset=None) -> list:
    """Everything a reader says about a store's queues: units, min/max, findings."""
    cqs = open_consume_queues(store, commit_log_max_offset)
    state = [[(f.id, f.path, f.offset) for f in cqs.findings]]
    for q in cqs.queues:
        units = list(q.iter_units())
        state.append((q.topic, q.queue_id, q.min_offset(), q.min_offset(1), q.max_offset, units,
                      [q.get(u.queue_offset) for u in units[:3]],
                      [(f.id, f.path, f.offset, f.message) for f in q.findings]))
    return state


def _tiny_windows(monkeypatch, seek_data: bool = True):
    from rmqtool.store import commitlog as commitlog_module  # its zero checks serve the queues too
    monkeypatch.setattr(cq_module, "WINDOW_UNITS", 3)  # units straddle nothing, but windows end everywhere
    monkeypatch.setattr(commitlog_module, "WINDOW", 7)
    if not seek_data:  # as on a file system without holes: everything counts as data
        monkeypatch.setattr(commitlog_module._FileWindow, "data_from",
                            lambda self, pos: pos if pos < self.size else None)
        monkeypatch.setattr(commitlog_module._FileWindow, "data_end", lambda self, pos: self.size)


# --- consume queues --------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CLEAN_SCENARIOS))
def test_windowed_queue_reads_equal_truth(monkeypatch, name):
    truth = load_truth(CLEAN_SCENARIOS[name] / "truth.json")["truth"]
    store = CLEAN_SCENARIOS[name] / "store"
    whole = _queue_state(store, truth["commitlog"]["maxPhyOffset"])
    _tiny_windows(monkeypatch)
    windowed = _queue_state(store, truth["commitlog"]["maxPhyOffset"])
    assert windowed == whole
    for topic, queue_id, lo, _, hi, units, _, _ in windowed[1:]:
        tq = truth["consumeQueues"][topic][str(queue_id)]
        assert (lo, hi) == (tq["minOffset"], tq["maxOffset"])
        assert [u.queue_offset for u in units] == [e[0] for e in tq["entries"]]


@pytest.mark.parametrize("seek_data", [True, False])
def test_windowed_reads_keep_every_finding(store_copy, monkeypatch, seek_data):
    """Damage of every kind the reader reports, read with whole-file-sized and tiny windows."""
    store = store_copy(V4 / "crash" / "a-as-is" / "input" / "store")
    qdir = store / "consumequeue" / "CrashTopic" / "0"
    with open(qdir / "00000000000000006000", "r+b") as f:  # a unit cut in half
        f.truncate(10 * 20 + 7)
    mid = qdir / "00000000000000003000"
    data = bytearray(mid.read_bytes())
    data[20:40] = bytes(20)  # a hole
    mid.write_bytes(bytes(data))
    other = store / "consumequeue" / "OtherTopic" / "0"
    last = sorted(other.iterdir())[-1]
    data = bytearray(last.read_bytes())
    written = len(data) - len(data.rstrip(b"\0"))
    data[len(data) - 25] = 7  # written bytes after the end of the queue
    last.write_bytes(bytes(data))
    (qdir.parent / "²").mkdir()  # str.isdigit() says yes, int() says no
    whole = _queue_state(store, 10**9)
    _tiny_windows(monkeypatch, seek_data)
    assert _queue_state(store, 10**9) == whole
    ids = {f[0] for q in whole[1:] for f in q[-1]} | {f[0] for f in whole[0]}
    assert {"recordTruncated", "consumeQueueHole", "trailingGarbage", "queueDirInvalid"} <= ids
    assert written  # the file had unwritten space to damage


def test_queue_directory_names_the_broker_skips_are_findings(store_copy):
    """Failed before: a directory named '²' raised ValueError out of open_consume_queues."""
    store = store_copy(V4 / "basic" / "store")
    topic = store / "consumequeue" / "OrderTopic"
    for name in ("²", "x", "1.0", "99999999999", "٣"):
        (topic / name).mkdir()
    (topic / "7").write_bytes(b"")  # a file, not a directory
    cqs = open_consume_queues(store)
    invalid = sorted(pathlib.Path(f.path).name for f in cqs.findings if f.id == "queueDirInvalid")
    assert invalid == sorted(["²", "x", "1.0", "99999999999", "٣", "7"])
    truth = load_truth(V4 / "basic" / "truth.json")["truth"]["consumeQueues"]
    on_disk = {(t, int(q)) for t, queues in truth.items() for q, tq in queues.items() if tq["maxOffset"]}
    assert {(q.topic, q.queue_id) for q in cqs.queues} == on_disk


def test_queue_id_of_is_integer_parse_int():
    assert [queue_id_of(n) for n in ("0", "17", "007", "+3", "-1", "2147483647")] == [0, 17, 7, 3, -1, 2**31 - 1]
    assert [queue_id_of(n) for n in ("2147483648", "", "-", "1e3", " 1", "²", "٣", "0x1")] == [None] * 8


def test_sparse_queue_file_is_read_without_following_its_size(store_copy):
    """A 2 GiB queue file holding written units, a hole and one unit near its end: the units
    are read, the far unit is found (by skipping the hole), nothing is read whole."""
    store = store_copy(V4 / "basic" / "store")
    truth = load_truth(V4 / "basic" / "truth.json")["truth"]["consumeQueues"]["OrderTopic"]["1"]
    head = (store / "consumequeue" / "OrderTopic" / "1" / "00000000000000000000").read_bytes()
    qdir = store / "consumequeue" / "NewTopic" / "0"
    qdir.mkdir(parents=True)
    path = _sparse(qdir / "00000000000000000000", HUGE, head)
    far = (HUGE // 2) // CQ_STORE_UNIT_SIZE * CQ_STORE_UNIT_SIZE
    with open(path, "r+b") as f:
        f.seek(far)
        f.write(b"\x01" * CQ_STORE_UNIT_SIZE)
    queue = ConsumeQueue(qdir, "NewTopic", 0)  # alone: the store's other queues show another file size
    units = len(head) // CQ_STORE_UNIT_SIZE
    assert [(u.queue_offset, u.commit_log_offset, u.size, u.tags_code) for u in queue.iter_units()] == \
        [tuple(e) for e in truth["entries"][:units]]
    assert queue.max_offset == units
    assert ("trailingGarbage", far) in {(f.id, f.offset) for f in queue.findings}


# --- checkpoint, markers, config ------------------------------------------------------------

def test_oversized_checkpoint_is_refused_by_its_size(tmp_path):
    path = _sparse(tmp_path / "checkpoint")
    with pytest.raises(FormatError) as info:
        read_checkpoint(path)
    assert f"{HUGE} bytes, not {CHECKPOINT_FILE_SIZE}" in info.value.one_line()
    _sparse(path, CHECKPOINT_FILE_SIZE + 1)
    with pytest.raises(FormatError) as info:
        read_checkpoint(path)
    assert f"{CHECKPOINT_FILE_SIZE + 1} bytes" in info.value.one_line()


def test_oversized_abort_bak_is_read_only_so_far(tmp_path):
    _sparse(tmp_path / "abort.bak", HUGE, b"9951")
    markers = read_markers(tmp_path)
    assert len(markers.abort_bak.content) == MARKER_READ_LIMIT and markers.abort_bak.pid is None
    assert [f.id for f in markers.findings] == ["abortFileUnexpected"]


def test_oversized_config_file_is_a_finding(tmp_path):
    truth = load_truth(V4 / "basic" / "truth.json")
    _sparse(tmp_path / "topics.json", MAX_CONFIG_FILE_SIZE + 1)
    loaded = read_config_file(tmp_path, "topics.json")
    assert (loaded.source, loaded.document) == (None, None)
    assert [f.id for f in loaded.findings] == ["configTooLarge"]
    with pytest.raises(FormatError) as info:
        read_config_bytes(tmp_path / "topics.json")
    assert str(MAX_CONFIG_FILE_SIZE + 1) in info.value.one_line()
    # a .bak stands in, as it does for a main file that does not load
    changed = truth["messageStoreConfig"]["changedFromDefault"]
    (tmp_path / "topics.json.bak").write_text('{"dataVersion":{"counter":%d}}' % changed["maxIndexNum"])
    loaded = read_config_file(tmp_path, "topics.json")
    assert loaded.source == BAK and loaded.document == {"dataVersion": {"counter": changed["maxIndexNum"]}}
    assert [f.id for f in loaded.findings] == ["configTooLarge", "configBakUsed"]


# --- the CLI under a 1 GiB address-space cap -------------------------------------------------

SUMMARY_LINE = re.compile(r"rmqtool: \d+ finding\(s\), \d+ of them errors.*")


def _cap_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def _run_capped(*args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "rmqtool", *map(str, args)], capture_output=True, text=True,
                          preexec_fn=_cap_address_space, env=env, cwd=REPO, timeout=120)


def _assert_clean_exit(r: subprocess.CompletedProcess, expected: int, one_line: bool = False):
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == expected and expected in DOCUMENTED_EXIT_CODES, r.stderr
    lines = r.stderr.splitlines()
    assert lines and all(STDERR_LINE.fullmatch(line) for line in lines), lines
    if one_line:  # one line names the problem; the sink may close with a count of findings
        problems = [line for line in lines if not SUMMARY_LINE.fullmatch(line)]
        assert len(problems) == 1, lines


def _damaged_store(store_copy, kind: str) -> pathlib.Path:
    store = store_copy(V4 / "basic" / "store")
    if kind == "consumequeue":
        qdir = store / "consumequeue" / "OrderTopic" / "0"
        last = sorted(qdir.iterdir())[-1]
        _sparse(last, HUGE, last.read_bytes())
    elif kind == "checkpoint":
        _sparse(store / "checkpoint")
    elif kind == "config":
        (store / "config").mkdir()
        _sparse(store / "config" / "topics.json")
    else:
        _sparse(store / "abort.bak", HUGE, b"9951")
    return store


@pytest.mark.parametrize("kind, command, expected, one_line", [
    ("consumequeue", ("dump", "consumequeue", "{store}/consumequeue/OrderTopic/0"), ExitCode.CORRUPT, False),
    ("consumequeue", ("info", "{store}"), ExitCode.CORRUPT, False),
    ("checkpoint", ("dump", "checkpoint", "{store}"), ExitCode.BAD_INPUT, True),
    ("checkpoint", ("info", "{store}"), ExitCode.OK, True),  # a warning: read as the broker maps it
    ("config", ("dump", "config", "{store}/config/topics.json"), ExitCode.BAD_INPUT, True),
    ("config", ("dump", "config", "{store}"), ExitCode.CORRUPT, False),
    ("abort.bak", ("info", "{store}"), ExitCode.OK, True),  # a warning: the store reads clean
])
def test_oversized_files_under_a_memory_cap(store_copy, kind, command, expected, one_line):
    """Failed before: each of these ended in a MemoryError traceback (exit 1) under the cap."""
    store = _damaged_store(store_copy, kind)
    r = _run_capped(*(part.format(store=store) for part in command), "-f", "json")
    _assert_clean_exit(r, int(expected), one_line)
    assert kind.split(".")[0] in r.stderr


def test_the_capped_cli_still_reads_a_whole_store():
    """The cap leaves room for real work: dump a fixture's queues, checked against truth."""
    truth = load_truth(V5 / "batchcq" / "truth.json")["truth"]["consumeQueues"]
    r = _run_capped("dump", "consumequeue", V5 / "batchcq" / "store", "-f", "jsonl")
    assert r.returncode == 0 and r.stderr == ""
    expected = sum(len(tq["entries"]) for queues in truth.values() for tq in queues.values())
    assert len(r.stdout.splitlines()) == expected
