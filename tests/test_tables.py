"""Tables for people: in a real terminal (tmux) at 80 and 120 columns no row wraps and every
header is whole; COLUMNS is honoured off a terminal; --wide and --columns; cells for people."""
from __future__ import annotations

import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import datetime
import fcntl
import json
import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import FIXTURES, REPO, V4, V5, load_truth
from helpers import examples, table_sections
from rmqtool.cli.app import app
from rmqtool.report.columns import VIEWS, cut, fit, human_size, iso_ms
from rmqtool.report.records import human_time, with_human_times

STORE = V4 / "basic" / "store"
CRASH = V5 / "crash5" / "b-garbled-last-message" / "input" / "store"
ALL_COLUMN_NAMES = {c.name for cols in VIEWS.values() for c in cols}

SCREENS = {
    "dump commitlog": ["dump", "commitlog", str(STORE), "--limit", "30"],
    "dump commitlog damaged": ["dump", "commitlog", str(CRASH)],
    "dump commitlog --stats": ["dump", "commitlog", str(STORE), "--stats"],
    "dump consumequeue": ["dump", "consumequeue", str(STORE), "--limit", "30"],
    "dump index": ["dump", "index", str(STORE), "--limit", "30"],
    "info": ["info", str(CRASH)],
    "verify": ["verify", str(CRASH)],
    "offsets": ["offsets", str(FIXTURES / "config" / "out-of-range" / "store")],
    "findings": ["findings"],
}


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = str(REPO)
    env["TERM"] = "xterm-256color"
    return env


def _in_tmux(args: list[str], width: int) -> list[str]:
    """The lines the command shows in a tmux window ``width`` columns wide, wrapped lines
    joined back (capture-pane -J), so a line longer than ``width`` is a row that wrapped.
    Each call runs its own tmux server on a private socket: a shared default server is
    killed or busied by whatever else runs tmux on the machine."""
    session = f"rmqtool-test-{uuid.uuid4().hex[:8]}"
    done = f"__done_{session}__"
    cmd = " ".join([sys.executable, "-m", "rmqtool", *args]) + f" 2>/dev/null; echo {done}; sleep 60"
    with tempfile.TemporaryDirectory(prefix="rmqtool-tmux-") as private:
        tmux = ["tmux", "-f", os.devnull, "-S", os.path.join(private, "socket")]
        subprocess.run([*tmux, "new-session", "-d", "-s", session, "-x", str(width), "-y", "50", cmd],
                       env=_env(), check=True)
        try:
            deadline = time.monotonic() + 60
            while True:
                out = subprocess.run([*tmux, "capture-pane", "-p", "-J", "-S", "-", "-t", session],
                                     capture_output=True, text=True, check=True).stdout
                if done in out or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert done in out, out
            return out.split(done)[0].rstrip("\n").splitlines()
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True)


def _in_pty(args: list[str], width: int) -> list[str]:
    """The same through a pty of ``width`` columns, for a machine without tmux."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, width, 0, 0))
    p = subprocess.Popen([sys.executable, "-m", "rmqtool", *args], stdin=slave, stdout=slave,
                         stderr=subprocess.DEVNULL, env=_env())
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        if not ready:
            break
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=30)
    os.close(master)
    return b"".join(chunks).decode("utf-8").replace("\r\n", "\n").rstrip("\n").splitlines()


def screen(args: list[str], width: int) -> list[str]:
    return _in_tmux(args, width) if shutil.which("tmux") else _in_pty(args, width)


def headers_of(lines: list[str]) -> list[str]:
    return [lines[i - 1] for i, line in enumerate(lines) if i and line and set(line.replace(" ", "")) == {"-"}]


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("name", sorted(SCREENS))
def test_no_row_wraps_and_headers_are_whole_in_a_terminal(name, width):
    lines = screen(SCREENS[name], width)
    assert lines, name
    too_long = [line for line in lines if len(line) > width]
    assert not too_long, f"{name} at {width}: rows wrap: {too_long[:3]}"
    headers = headers_of(lines)
    assert headers or name == "info", lines[:5]
    for header in headers:
        names = header.split()
        assert names and set(names) <= ALL_COLUMN_NAMES, f"cut or unknown headers: {header}"


def test_a_wider_terminal_shows_more_columns():
    narrow = headers_of(screen(SCREENS["dump commitlog"], 80))[0].split()
    wide = headers_of(screen(SCREENS["dump commitlog"], 120))[0].split()
    assert set(narrow) < set(wide)
    assert {"commit_log_offset", "topic", "queue_id", "queue_offset", "store_timestamp"} <= set(narrow)


# ---- off a terminal: COLUMNS, else 80 ----

def run(*args, columns: str | None = None):
    env = {"COLUMNS": columns} if columns is not None else {}
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


@pytest.mark.parametrize("columns", ["80", "120", "200"])
def test_columns_is_honoured_when_stdout_is_not_a_terminal(columns):
    r = run("dump", "commitlog", STORE, "--limit", "20", columns=columns)
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= int(columns)
    assert len(lines) == 20 + 2  # header, rule, one line a row: nothing wrapped


def test_without_columns_a_pipe_gets_80(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(REPO)
    p = subprocess.run([sys.executable, "-m", "rmqtool", "dump", "commitlog", str(STORE), "--limit", "5"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0
    assert max(len(line) for line in p.stdout.splitlines()) <= 80
    assert p.stdout.splitlines()[0].split()[:2] == ["commit_log_offset", "topic"]


def test_a_terminal_of_no_width_gets_80():
    """A terminal that reports 0 columns (stty cols 0) gets the table a pipe gets, not one column."""
    args = ["dump", "commitlog", str(STORE), "--limit", "3", "--no-progress"]
    piped = run(*args, columns="80").stdout.splitlines()
    assert _in_pty(args, 0) == piped



def test_an_offset_is_never_cut(tmp_path):
    """A commit log file named for an offset near 2**63: its records' offsets (19 digits) shown
    whole at 80 columns, the JSON's, where the header is 17 wide."""
    segment = tmp_path / "09223372036854513664"
    shutil.copyfile(STORE / "commitlog" / f"{0:020d}", segment)
    rows = [json.loads(line) for line in run("dump", "commitlog", segment, "-n", 3, "-f", "jsonl").stdout.splitlines()]
    assert len(str(rows[0]["commit_log_offset"])) > len("commit_log_offset")
    (names, cells), = table_sections(run("dump", "commitlog", segment, "-n", 3, columns="80").stdout)
    assert [c["commit_log_offset"] for c in cells] == [str(r["commit_log_offset"]) for r in rows]


# ---- --wide and --columns ----

def test_wide_shows_every_field_and_columns_exactly_those():
    truth = load_truth(V4 / "basic" / "truth.json")["truth"]["messages"][0]
    r = run("dump", "commitlog", STORE, "--limit", "1", "--wide", columns="80")
    header = r.stdout.splitlines()[0].split()
    assert {"msg_id", "born_host", "store_host", "body_crc", "properties"} <= set(header)
    r = run("dump", "commitlog", STORE, "--limit", "1", "--columns", "msg_id,queue_offset", columns="80")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["msg_id", "queue_offset"]
    assert lines[2].split() == [truth["msgId"], str(truth["queueOffset"])]


@pytest.mark.parametrize("command", [
    ("dump", "commitlog", STORE), ("dump", "consumequeue", STORE), ("dump", "index", STORE),
    ("verify", STORE), ("findings",), ("query", STORE, "--key", "order-0")])
def test_unknown_column_is_a_usage_error_naming_the_valid_ones(command):
    r = run(*command, "--columns", "severity,nope" if command == ("findings",) else "commit_log_offset,nope")
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown column nope" in lines[0] and "valid: " in lines[0]
    assert r.stdout == ""


# ---- cells for people ----

def test_times_sizes_and_ellipsis():
    truth = load_truth(V4 / "basic" / "truth.json")["truth"]["messages"][0]
    r = run("dump", "commitlog", STORE, "--limit", "1", "--columns", "store_timestamp,topic", columns="80")
    assert r.stdout.splitlines()[2].split()[0] == human_time(truth["storeTimestamp"])
    assert iso_ms(truth["storeTimestamp"]) == human_time(truth["storeTimestamp"])
    assert (human_size(1023), human_size(1024), human_size(256 << 10), human_size(1 << 30)) == (
        "1023 B", "1.0 KiB", "256.0 KiB", "1.0 GiB")
    assert cut("abcdef", 4) == "abc…" and cut("abc", 4) == "abc"
    assert cut("日本語テキスト", 5) == "日本…"  # wide characters take two cells
    r = run("info", STORE, columns="80")
    assert "256.0 KiB" in r.stdout  # the segments' size


@settings(max_examples=examples(300), deadline=None)
@given(ms=st.integers(-62135596800000, 253402300799999) | st.integers(-2**63, 2**63 - 1))
def test_times_are_exact_to_the_millisecond(ms):
    """Whole seconds and milliseconds, as the native kernel's rmq_put_time writes them: years
    of four digits, the number itself where no date is (ms / 1000 as a float was a
    millisecond off for some times after about 2240 or before about 1700)."""
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    try:
        t = epoch + datetime.timedelta(milliseconds=ms)
    except OverflowError:
        want = str(ms)
    else:
        want = f"{t.year:04d}-{t:%m-%dT%H:%M:%S}.{t.microsecond // 1000:03d}Z"
    assert human_time(ms) == iso_ms(ms) == want


def test_times_stay_exact_past_the_seconds_kept():
    """The seconds' text is kept by second, a bounded number of them: text made before the
    store of them was cleared, and after, is the same."""
    first = [iso_ms(s * 1000 + s % 1000) for s in range(3000)]
    assert [iso_ms(s * 1000 + s % 1000) for s in range(3000)] == first
    assert first[2999] == human_time(2999 * 1000 + 999) == "1970-01-01T00:49:59.999Z"


_SCALARS = st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=5)
_KEYS = st.sampled_from(["a", "store_timestamp", "store_time", "x_timestamp", "_timestamp", "born"]) | st.text(max_size=12)
_DOCS = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=6),
                     max_leaves=20)


def _twins_ok(doc, out) -> None:
    if isinstance(doc, list):
        assert isinstance(out, list) and len(out) == len(doc)
        for d, o in zip(doc, out):
            _twins_ok(d, o)
        return
    if not isinstance(doc, dict):
        assert out is doc
        return
    # each key in its place with its value, its twin just after it; a key the row has itself
    # keeps its place and its own value
    expected: dict = {}
    for k, v in doc.items():
        expected[k] = (v,)
        if isinstance(k, str) and k.endswith("_timestamp") and isinstance(v, int) and v > 0:
            expected[k[:-len("_timestamp")] + "_time"] = iso_ms(v)
    assert list(out) == list(expected)
    for k, want in expected.items():
        if isinstance(want, tuple):
            _twins_ok(want[0], out[k])
        else:
            assert out[k] == want


@settings(max_examples=examples(300), deadline=None)
@given(doc=_DOCS)
def test_every_positive_timestamp_gains_its_twin_and_nothing_else_moves(doc):
    _twins_ok(doc, with_human_times(doc))


def test_info_reads_top_to_bottom():
    r = run("info", CRASH, columns="80")
    assert r.exit_code == 3
    starts = [line.split()[0] for line in r.stdout.splitlines() if line and not line.startswith((" ", "-"))
              and line.split()[0] in ("store", "commitlog", "consume_queues", "index_files", "checkpoint",
                                      "config", "config:", "findings")]
    assert starts[:3] == ["store", "commitlog", "consume_queues"] and starts[-1] == "findings"
    assert max(len(line) for line in r.stdout.splitlines()) <= 80


@pytest.mark.parametrize("kind", sorted(VIEWS))
def test_a_narrow_table_leaves_out_the_least_important_columns_first(kind):
    """At every width the columns shown are the most important ones, by rank, with no gap: a
    less important column never stands in for one that does not fit (offsets at 40 columns
    showed lag_ms without lag_messages and status, an error row looking caught up)."""
    sized = [(c, max(len(c.name), 6), 40) for c in VIEWS[kind] if not c.old]
    ranked = [c.name for c, _, _ in sorted((s for s in sized if s[0].rank is not None), key=lambda s: s[0].rank)]
    for width in range(20, 201, 7):
        shown = {c.name for c, _ in fit(sized, width)}
        assert shown == set(ranked[:len(shown)]), (kind, width, shown)
