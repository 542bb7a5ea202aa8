"""A command loads only itself (issue 27, start-up): ``rmqtool`` builds the command it runs, and
``rmqtool --help`` lists every command without importing any (cli/app.py's COMMANDS).

The reference is the app as it was built before: every command module imported and
registered on one typer app. Each help it renders, each usage error and exit code, must be
what the lazy app gives; and a command run in a fresh process leaves in ``sys.modules``
only what it needs.
"""
from __future__ import annotations

import enum
import importlib
import inspect
import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from conftest import FIXTURES, V4
from helpers import expand_store
from rmqtool.cli import app as app_module
from rmqtool.cli import common

# the modules as cli/app.py imported them (alphabetically), and the order it registered them in
IMPORTED = ("append", "check", "diff", "dump", "dump_rocksdb", "dump_timer", "findings", "info", "offsets", "query",
            "recover", "redispatch", "report", "salvage", "spark", "undo", "verify")
REGISTERED = ("info", "dump", "dump_timer", "dump_rocksdb", "query", "verify", "offsets", "check", "diff", "report",
              "recover", "redispatch", "salvage", "append", "undo", "findings", "spark")
ENV = {"COLUMNS": "100"}


@pytest.fixture(scope="module")
def eager():
    """The app with every command module imported and registered, as cli/app.py built it before."""
    modules = {name: importlib.import_module(f"rmqtool.cli.{name}") for name in IMPORTED}
    reference = typer.Typer(**app_module.SETTINGS)
    reference.callback()(app_module._root)
    for name in REGISTERED:
        modules[name].register(reference)
    return reference


def _paths(group, path=()):
    """Every command path of a click group: groups, their commands, hidden ones included."""
    for name in group.list_commands(None):
        command = group.get_command(None, name)
        yield (*path, name)
        if hasattr(command, "commands"):
            yield from _paths(command, (*path, name))


def _help(app, args) -> tuple[int, str]:
    r = CliRunner().invoke(app, [*args, "--help"], env=ENV)
    return r.exit_code, r.output


# helps compared as rendered: the root (its listing from COMMANDS), the groups, a few commands
RENDERED = ((), ("dump",), ("offsets",), ("spark",), ("offsets", "reset"), ("dump", "commitlog"), ("verify",),
            ("check",))


def _plain(value, depth=0):
    """A value as plain data: what two separately built commands must share."""
    if value is None or isinstance(value, (str, int, float, bool)) and not isinstance(value, enum.Enum):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
    if hasattr(value, "__dict__") and depth < 8 and not isinstance(value, enum.Enum):
        return {"class": type(value).__name__, **_plain(vars(value), depth + 1)}
    return repr(value)


def _described(command) -> dict:
    """All a command's help is rendered from: its attributes and its params' (not its subcommands)."""
    return _plain({k: v for k, v in vars(command).items() if k != "commands"})


def test_every_help_is_the_one_the_eager_app_renders(eager):
    """The root's listing (from COMMANDS, no module imported) and the groups' helps as rendered;
    every command reached through the lazy root and described as the eager app's is."""
    lazy_root, eager_root = typer.main.get_command(app_module.app), typer.main.get_command(eager)
    paths = list(_paths(eager_root))
    assert [p[0] for p in paths if len(p) == 1] == list(app_module.COMMANDS)
    assert len(paths) > 40
    for path in RENDERED:
        mine = _help(app_module.app, path)
        assert mine[0] == 0 and mine == _help(eager, path), path
    ctx = typer.Context(eager_root, info_name="rmqtool")
    for name, (_, summary) in app_module.COMMANDS.items():  # the listing's line: its help's first paragraph
        command = eager_root.get_command(ctx, name)
        assert summary == inspect.cleandoc(command.short_help or command.help).split("\n\n")[0], name
    for path in paths:
        mine, theirs = lazy_root, eager_root
        for name in path:
            mine, theirs = mine.get_command(ctx, name), theirs.get_command(ctx, name)
        assert mine is not None, path  # reachable
        assert _described(mine) == _described(theirs), path


def _run(app, args, capsys, monkeypatch) -> tuple[int, str, str]:
    """main()'s boundary (common.run) around ``app``: exit code, stdout, stderr."""
    monkeypatch.setattr(sys, "argv", ["rmqtool", *args])
    with pytest.raises(SystemExit) as exit_:
        common.run(app)
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


@pytest.mark.parametrize("args", [["nosuch"], ["verfy", "/x"], ["dump", "nosuch"], [], ["--version"],
                                  ["offsets", "reset"], ["check"]], ids=" ".join)
def test_errors_and_exit_codes_are_unchanged(eager, args, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    mine = _run(app_module.app, args, capsys, monkeypatch)
    assert mine == _run(eager, args, capsys, monkeypatch)
    assert mine[0] == (0 if args == ["--version"] else 2)


# Each child runs rmqtool as the shell starts it, forked from one interpreter that imported
# only cli/app.py, and says which modules it ended with.
DRIVER = r"""
import json, os, sys
from rmqtool.cli.app import main
results = []
for args in json.loads(sys.argv[1]):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        sys.argv = ["rmqtool", *args]
        code = 0
        end, me = os._exit, os.getpid()

        def read_only_end(code):  # common.run's end of a read-only command: the modules are asked after it
            if os.getpid() != me:  # a worker process the command forked ends as it does
                end(code)
            raise SystemExit(code)
        os._exit = read_only_end
        try:
            main()
        except SystemExit as exc:
            code = exc.code
        os.write(write, json.dumps([code, sorted(sys.modules)]).encode())
        end(0)
    os.close(write)
    with os.fdopen(read) as f:
        results.append(json.loads(f.read()))
    os.waitpid(pid, 0)
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """{command: (exit code, the modules loaded)} of --help, check and verify (QMQ) in fresh processes."""
    tmp = tmp_path_factory.mktemp("startup")
    store = expand_store(V4 / "basic" / "store", tmp / "v4")
    qmq = expand_store(FIXTURES / "qmq" / "basic" / "store", tmp / "qmq")
    runs = {"help": ["--help"], "check": ["check", str(store)], "verify qmq": ["verify", str(qmq)],
            "version": ["--version"]}
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(list(runs.values()))], capture_output=True,
                          text=True, timeout=120, env={**ENV, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return {name: (code, set(modules)) for name, (code, modules) in zip(runs, json.loads(done.stdout))}


def _commands_loaded(modules: set[str]) -> set[str]:
    every = {m for names in app_module.COMMANDS.values() for m in names[0]}
    return {m.removeprefix("rmqtool.cli.") for m in modules if m.removeprefix("rmqtool.cli.") in every}


def test_help_and_version_load_no_command(loaded):
    for name in ("help", "version"):
        code, modules = loaded[name]
        assert code == 0
        assert not _commands_loaded(modules), name
        assert not {"numpy", "construct"} & modules, name  # no store is read: no layout, no columns


def test_check_loads_only_check(loaded):
    """check reads records (construct's layouts) and queue units (numpy): those it loads; no
    other command, no write side, no verify, no parallel scan, no help renderer."""
    code, modules = loaded["check"]
    assert code == 0
    assert _commands_loaded(modules) == {"check"}
    assert not {m for m in modules if m.startswith(("rmqtool.engine", "rmqtool.verify", "rmqtool.query",
                                                     "rmqtool.inspect.dump", "rich", "multiprocessing"))}


def test_verify_of_a_qmq_store_loads_no_rocketmq_reader(loaded):
    code, modules = loaded["verify qmq"]
    assert code == 0
    assert _commands_loaded(modules) == {"verify"}
    assert not {"rmqtool.store.commitlog", "rmqtool.store.view", "rmqtool.store.consumequeue",
                "rmqtool.families.rocketmq", "rmqtool.verify.run", "multiprocessing"} & modules
