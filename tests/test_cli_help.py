"""Every command's --help ends with runnable examples, and each example uses only options
that command has (an example that drifted from the options would teach a wrong flag)."""
from __future__ import annotations

import re
import shlex

import pytest
from typer.testing import CliRunner

from rmqtool.cli.app import app

COMMANDS = [["info"], ["query"], ["verify"], ["offsets"], ["offsets", "reset"], ["append"], ["undo"], ["findings"],
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


def test_help_into_a_closed_pipe_prints_no_traceback():
    import subprocess
    import sys

    done = subprocess.run(["bash", "-c", f"'{sys.executable}' -m rmqtool.cli.app --help | head -c 10 >/dev/null"],
                          capture_output=True, text=True, env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"})
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr


def test_topic_and_queue_complete_from_the_store_named(tmp_path):
    import typer

    from conftest import V4, load_truth
    from rmqtool.cli.params import complete_queue, complete_topic

    store = V4 / "basic" / "store"
    # the queues the broker holds units for (it also lists SCHEDULE_TOPIC_XXXX's empty ones, which have no files)
    queues = {t: qs for t, qs in load_truth(V4 / "basic" / "truth.json")["truth"]["consumeQueues"].items()
              if any(q["entries"] for q in qs.values())}
    ctx = typer.Context(typer.main.get_command(app))
    ctx.params = {"store": str(store)}
    assert complete_topic(ctx, "") == sorted(queues)
    assert complete_topic(ctx, sorted(queues)[0][:3]) == [t for t in sorted(queues) if t.startswith(sorted(queues)[0][:3])]
    topic = sorted(queues)[0]
    ctx.params = {"path": str(store / "consumequeue"), "topic": topic}  # a path inside the store works too
    assert complete_queue(ctx, "") == [str(q) for q in sorted(int(q) for q in queues[topic])]
    ctx.params = {"store": str(tmp_path)}  # no store: nothing to offer, no error
    assert complete_topic(ctx, "") == [] and complete_queue(ctx, "") == []


def test_completion_can_be_installed():
    r = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert "--install-completion" in r.stdout


def test_help_into_a_pipe_closed_early_exits_0():
    """rich answers a closed pipe with exit 1; `rmqtool --help | head -1` is not a failure."""
    import subprocess
    import sys
    for args in (["--help"], ["dump", "--help"]):
        p = subprocess.run(f"{sys.executable} -m rmqtool {' '.join(args)} | head -1; exit ${{PIPESTATUS[0]}}",
                           shell=True, executable="/bin/bash", capture_output=True, timeout=60)
        assert p.returncode == 0, (args, p.stderr)
