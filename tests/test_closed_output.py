"""Standard streams that fail or are closed: a writer whose stdout fails (a reader gone, a
full disk) says so with what it changed, exit 8, never a silent 0; an error of stdout names
<stdout>; a closed stdin or stderr is /dev/null, a closed stdout exit 8; no traceback."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

from conftest import REPO, V4
from helpers import writable_copy

STORE = V4 / "basic" / "store"
CRASHED = V4 / "crash" / "b3-zeroed-last-3-messages" / "input" / "store"


def env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="120")


def shell(line: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """``line`` in bash, R standing for rmqtool (redirections such as >&- need a shell)."""
    r = f"{sys.executable} -m rmqtool"
    return subprocess.run(["bash", "-c", line.replace("R ", r + " ")], capture_output=True, text=True, env=env(),
                          timeout=timeout)


def messages(path, n: int) -> None:
    body = base64.b64encode(b"x" * 100).decode()
    path.write_text("".join(json.dumps({"topic": "T0", "queue_id": 0, "body": body, "keys": f"k{i}"}) + "\n"
                            for i in range(n)))


def stored(store) -> int:
    p = shell(f"R dump commitlog {store} -f jsonl --body none")
    return len(p.stdout.splitlines())


def test_append_into_a_pipe_closed_early_stops_and_says_how_many_were_appended(tmp_path):
    messages(tmp_path / "m.jsonl", 5000)
    store = tmp_path / "ap"
    p = shell(f"R append {store} --create --from-jsonl {tmp_path / 'm.jsonl'} --commitlog-size 16777216 "
              f"--assume-defaults | head -1; exit ${{PIPESTATUS[0]}}")
    assert p.returncode == 8, p.stderr
    assert "Traceback" not in p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("rmqtool: error: <stdout>: closed by its reader: stopped after "), line
    appended = int(line.split("stopped after ")[1].split()[0])
    assert 0 < appended < 5000
    assert stored(store) == appended  # the line says what the store holds


def test_recover_apply_into_a_full_disk_says_the_repair_was_made_and_where_its_backup_is(tmp_path):
    store = writable_copy(CRASHED, tmp_path / "r2")
    p = shell(f"R recover {store} --apply >/dev/full")
    assert p.returncode == 8
    line = p.stderr.strip()
    assert line.startswith("rmqtool: error: <stdout>: No space left on device: the repair was made in "), line
    backup = line.split("its backup is ")[1].split(" (")[0]
    assert os.path.isfile(os.path.join(backup, "manifest.json"))
    again = shell(f"R recover {store} --apply >/dev/full")  # nothing left to do: said as such
    assert again.returncode == 8 and again.stderr.strip().endswith(": nothing was changed"), again.stderr


def test_a_reader_whose_stdout_is_full_names_stdout():
    for fmt in ("table", "jsonl", "json"):
        p = shell(f"R dump commitlog {STORE} -n 2 -f {fmt} >/dev/full")
        assert (p.returncode, p.stderr) == (8, "rmqtool: error: <stdout>: No space left on device\n")


def test_help_and_version_into_a_full_disk_are_one_line():
    for args in ("--help", "--version"):
        p = shell(f"R {args} >/dev/full")
        assert (p.returncode, p.stderr) == (8, "rmqtool: error: <stdout>: No space left on device\n")


def test_a_closed_stdout_is_an_io_error_before_anything_runs(tmp_path):
    p = shell("R findings >&-")
    assert p.returncode == 8 and p.stderr.startswith("rmqtool: error: <stdout>: closed"), p.stderr
    p = shell(f"R append {tmp_path / 'ap'} --create -t T --body x --assume-defaults >&-")
    assert p.returncode == 8 and "Traceback" not in p.stderr
    assert not (tmp_path / "ap").exists()  # nothing was run


def test_a_closed_stderr_or_stdin_is_dev_null(tmp_path):
    p = shell(f"R dump commitlog {STORE} -n 2 2>&-")
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 4  # header, rule, two rows
    p = shell(f"R append {tmp_path / 'ap7'} --create --from-jsonl - --assume-defaults <&-")
    assert p.returncode == 0 and p.stdout == "" and "Traceback" not in p.stderr, p.stderr


def test_ctrl_c_in_an_append_lists_every_message_it_appended(tmp_path):
    """Ctrl-C part way through an append --from-jsonl: each chunk appended has its rows out
    (Ctrl-C is held while a chunk is appended and listed), so the rows are the store's
    messages, one each; they were ~1,000 short (a chunk's rows, and the sink's buffer, lost)."""
    import signal
    import time

    source, store, out = tmp_path / "m.jsonl", tmp_path / "store", tmp_path / "rows.jsonl"
    messages(source, 60_000)
    with open(out, "wb") as rows:
        p = subprocess.Popen([sys.executable, "-m", "rmqtool", "append", str(store), "--create", "--from-jsonl",
                              str(source), "--commitlog-size", str(16 << 20), "--assume-defaults", "--no-progress"],
                             stdout=rows, stderr=subprocess.PIPE, env=env())
        deadline = time.monotonic() + 60
        while out.stat().st_size == 0 and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)  # the first chunk's rows are out: the run is under way
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    listed = out.read_text().splitlines()
    assert p.returncode in (0, 130), err
    assert all(json.loads(line)["topic"] == "T0" for line in listed)
    assert len(listed) == stored(store) > 0, err


def test_ctrl_c_stops_an_append_whose_stdout_is_blocked(tmp_path):
    """Its reader stopped (a paused pager): the rows cannot go out, and Ctrl-C still ends the
    run (exit 130). Holding Ctrl-C while a chunk's rows were written hung it for good."""
    import signal
    import time

    source = tmp_path / "m.jsonl"
    messages(source, 20_000)
    p = subprocess.Popen([sys.executable, "-m", "rmqtool", "append", str(tmp_path / "store"), "--create",
                          "--from-jsonl", str(source), "--commitlog-size", str(16 << 20), "--assume-defaults",
                          "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    time.sleep(3)  # far more rows than a pipe holds: its writes block, nobody reads
    p.send_signal(signal.SIGINT)
    try:
        code = p.wait(timeout=20)
    finally:
        p.kill()
    assert code == 130
