"""Every command's --help ends with runnable examples, and each example uses only options
that command has (an example that drifted from the options would teach a wrong flag)."""
from __future__ import annotations

import re
import shlex

import pytest
from typer.testing import CliRunner

from rmqtool.cli.app import app

COMMANDS = [["info"], ["query"], ["verify"], ["offsets"], ["append"], ["undo"], ["findings"],
            ["dump", "commitlog"], ["dump", "consumequeue"], ["dump", "index"], ["dump", "checkpoint"],
            ["dump", "config"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_has_examples_using_the_commands_own_options(command):
    r = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    help_text = r.stdout
    assert "Examples:" in help_text
    examples = [line.strip()[2:] for line in help_text.splitlines() if line.strip().startswith("$ rmqtool ")]
    assert len(examples) >= 1
    mine = [e for e in examples if e.split("|")[0].split()[1:1 + len(command)] == command]
    assert mine, examples
    for example in mine:
        words = shlex.split(example.split(" | ")[0])
        for flag in (w for w in words if re.fullmatch(r"--?[a-z][a-z-]*", w)):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text), (flag, example)
