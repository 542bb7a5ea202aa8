"""Every hint names a command that exists: a refusal's ``try: rmqtool ...`` is run as given."""
from __future__ import annotations

import re
import shlex

import pytest
from typer.testing import CliRunner

from conftest import V4, V5
from rmqtool.cli.app import app

runner = CliRunner()
BASIC = V4 / "basic" / "store"
CRASHED = V4 / "crash" / "a-as-is" / "input" / "store"  # holds an abort file


def _first(directory):
    return sorted(p for p in directory.iterdir() if p.is_file())[0]


CASES = [  # (dump KIND asked for, or info; a path of another kind; the command the hint must name)
    ("commitlog", _first(BASIC / "consumequeue" / "OrderTopic" / "0"), "dump consumequeue"),
    ("commitlog", CRASHED / "abort", "info"),
    ("commitlog", BASIC / "checkpoint", "dump checkpoint"),
    ("index", BASIC / "lock", "info"),
    ("index", BASIC / "checkpoint", "dump checkpoint"),
    ("checkpoint", _first(BASIC / "index"), "dump index"),
    ("config", BASIC / "checkpoint", "dump checkpoint"),
    ("consumequeue", _first(BASIC / "commitlog"), "dump commitlog"),
    ("consumequeue", BASIC / "lock", "info"),
    ("commitlog", _first(V5 / "batchcq" / "store" / "batchconsumequeue" / "BatchCQTopic" / "0"), "dump consumequeue"),
    ("info", _first(BASIC / "index"), "dump index"),
    ("info", CRASHED / "abort", "info"),
]


@pytest.mark.parametrize("kind,path,hinted", CASES, ids=lambda x: getattr(x, "name", x))
def test_each_hint_runs(kind, path, hinted):
    """Before the fix the hints named `rmqtool dump lock` and `rmqtool dump abort`, which do not exist."""
    asked = ["info", str(path)] if kind == "info" else ["dump", kind, str(path)]
    refused = runner.invoke(app, asked)
    assert refused.exit_code == 4, refused.stderr
    match = re.search(r"\(try: (rmqtool [^)]*)\)", refused.stderr)
    assert match, refused.stderr
    argv = shlex.split(match.group(1))
    assert " ".join(argv[1:3]).startswith(hinted)
    ran = runner.invoke(app, argv[1:])
    assert ran.exit_code in (0, 3), (argv, ran.stderr)  # 3: the crashed store is reported unclean
    assert "Traceback" not in ran.stderr and ran.stdout.strip()


def test_no_hint_names_a_kind_as_a_command():
    """No source text hints at `rmqtool dump <kind>` built from a kind name."""
    import pathlib
    root = pathlib.Path(__file__).resolve().parent.parent / "rmqtool"
    for path in root.rglob("*.py"):
        assert "try: rmqtool dump {" not in path.read_text(), path
