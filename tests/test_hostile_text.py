"""What a broker stored for untrusted producers (topics, keys, group names, file names) never
drives the operator's terminal, the monitoring system or the report page: control characters,
bidirectional controls and lone surrogates come out as escapes, in every place text of the
store is said (tables, check's status line, error lines, the HTML report)."""
from __future__ import annotations

import json
import os

from helpers import cli_runner
from rmqtool.cli.app import app
from rmqtool.report.columns import terminal_safe

runner = cli_runner()
TITLE = "\x1b]0;PWNED\x07\x1b[2J"  # retitles the terminal, clears the screen
FORGED = "\r\nOK - all fine | lag=0"  # a second status line, and perfdata of its own


def _run(*args, **kw):
    return runner.invoke(app, [str(a) for a in args], **kw)


def _store(root, topic="Orders", keys="k"):
    r = _run("append", root, "--create", "--commitlog-size", 65536, "--topic", topic, "--body", "x", "--keys", keys)
    assert r.exit_code == 0, r.output
    return root


def test_bidirectional_controls_are_escaped():
    assert terminal_safe("abc\u202efdp.exe") == "abc\\u202efdp.exe"  # shown reversed: "abcexe.pdf"
    assert all(c not in terminal_safe("\u2066\u2067\u2068\u2069\u200e\u200f\u061c") for c in "\u2066\u200e\u061c")


def test_a_key_with_a_bidi_override_is_escaped_in_a_table(tmp_path):
    root = _store(tmp_path / "s", keys="abc\u202efdp.exe")
    r = _run("dump", "commitlog", root, "--columns", "topic,keys", "--wide")
    assert r.exit_code == 0 and "\u202e" not in r.stdout and "abc\\u202efdp.exe" in r.stdout, r.stdout


def test_checks_status_line_is_one_line_of_escapes_whatever_the_group_is_named(tmp_path):
    root = _store(tmp_path / "s")
    group = f"{TITLE}{FORGED}"
    (root / "config").mkdir()
    (root / "config" / "consumerOffset.json").write_text(json.dumps({"offsetTable": {f"Orders@{group}": {"0": 0}}}))
    r = _run("check", root, "--crit", "lag_messages=1")
    status = r.stdout.rstrip("\n")
    assert "\n" not in status and "\r" not in status and "\x1b" not in status and "\x07" not in status, status
    head, sep, perf = status.partition(" | ")
    assert sep and "|" not in head and "lag=0" not in perf  # the forged perfdata stays in the text
    assert terminal_safe(group).replace("|", "\\x7c") in head


def test_an_error_line_quoting_a_name_from_the_store_is_escaped(tmp_path):
    root = _store(tmp_path / "s")
    (root / "batchconsumequeue" / TITLE).mkdir(parents=True)  # a 5.x batch topic directory: --to-store refuses it
    r = _run("salvage", root, "--to-store", tmp_path / "new")
    assert r.exit_code != 0 and TITLE not in r.stderr and terminal_safe(TITLE) in r.stderr, r.stderr


def test_the_html_report_shows_control_characters_and_odd_file_names_as_escapes(tmp_path):
    root = _store(tmp_path / "s", topic=TITLE)
    odd = os.fsdecode(b"x\xfe")  # a file name that is no UTF-8: a lone surrogate in Python
    (root / "commitlog" / odd).touch()
    page = tmp_path / "report.html"
    r = _run("report", root, "--html", page)
    assert r.exit_code in (0, 3) and "Traceback" not in r.output, r.output
    text = page.read_text(encoding="utf-8")
    assert "\x1b" not in text and "\x07" not in text and terminal_safe(TITLE) in text


def test_a_locale_whose_codec_lacks_a_character_gets_an_escape_not_a_traceback():
    """LC_ALL=C without Python's UTF-8 mode: stdout is ASCII, and a table's "…" (or a key's
    characters) raised UnicodeEncodeError, exit 1 ("not found" to a script)."""
    import subprocess
    import sys
    from conftest import REPO
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LANG", "LC_CTYPE")}
    env.update(LC_ALL="C", PYTHONUTF8="0", PYTHONPATH=str(REPO), COLUMNS="80")
    r = subprocess.run([sys.executable, "-m", "rmqtool", "findings"], env=env, capture_output=True, timeout=120)
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr
    assert b"\\u2026" in r.stdout  # the table's ellipsis, as an escape
