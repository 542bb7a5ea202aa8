"""The commands stay thin (issue 21): every cli/ module parses options, makes its library
call and hands rows to the one sink (report/sink.py).

Walks rmqtool/cli/*.py with ``ast`` and fails on
- a direct write to stdout or stderr (print, typer/click echo, sys.stdout, sys.stderr): the
  sink and report/ write output, ``warn`` the lines for people;
- a ``try`` outside cli/common.py: errors become exits at the one boundary (``common.boundary``);
- a command function (one ``@boundary`` wraps) whose body, from its first statement after the
  docstring, runs over MAX_COMMAND_BODY lines;
and checks that the store size options are declared once (cli/sizes.py) for every command
that writes files.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

CLI = pathlib.Path(__file__).resolve().parent.parent / "rmqtool" / "cli"
BOUNDARY = "common.py"  # the one module of cli/ that catches exceptions and owns the process's streams

# The longest thin command is query at 35 lines (its two kinds of rows: a queue offset by
# time, or messages with their CRC notes), then salvage and dump commitlog at 31: 40 leaves a
# few lines for another option's check, while any workflow moved back in (redispatch's staging,
# recover --to's copy, query's filters: 20 to 60 lines each before issue 21) goes over it.
MAX_COMMAND_BODY = 40


def _modules():
    return sorted(CLI.glob("*.py"))


def _tree(path: pathlib.Path) -> ast.AST:
    return ast.parse(path.read_text(), str(path))


def _is_boundary(decorator: ast.expr) -> bool:
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(node, ast.Name) and node.id == "boundary"


def _commands(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(_is_boundary(d) for d in node.decorator_list):
            yield node


def _body_lines(fn: ast.FunctionDef) -> int:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return body[-1].end_lineno - body[0].lineno + 1 if body else 0


def _stream_writes(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            found.append((node.lineno, "print()"))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "sys" and node.attr in ("stdout", "stderr"):
                found.append((node.lineno, f"sys.{node.attr}"))
            elif node.value.id in ("typer", "click") and node.attr in ("echo", "secho"):
                found.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_no_command_writes_to_a_stream_itself(path):
    if path.name == BOUNDARY:
        return
    writes = _stream_writes(_tree(path))
    assert not writes, f"cli/{path.name} writes itself (use the sink, report/ or warn): {writes}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_errors_are_caught_only_at_the_boundary(path):
    if path.name == BOUNDARY:
        return
    tries = [node.lineno for node in ast.walk(_tree(path)) if isinstance(node, (ast.Try, ast.TryStar))]
    assert not tries, f"cli/{path.name} catches exceptions at lines {tries} (common.boundary does that)"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_command_functions_are_short(path):
    long = [(fn.name, _body_lines(fn)) for fn in _commands(_tree(path)) if _body_lines(fn) > MAX_COMMAND_BODY]
    assert not long, f"cli/{path.name}: command bodies over {MAX_COMMAND_BODY} lines: {long}"


def test_every_command_goes_through_the_boundary():
    """Every function a module registers with typer is wrapped by common.boundary."""
    for path in _modules():
        tree = _tree(path)
        wrapped = {fn.name for fn in _commands(tree)}
        for node in ast.walk(tree):
            registered = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Call):  # app.command("x", ...)(fn)
                inner = node.func.func
                if isinstance(inner, ast.Attribute) and inner.attr == "command" and node.args \
                        and isinstance(node.args[0], ast.Name):
                    registered = node.args[0].id
            if registered is not None:
                assert registered in wrapped, f"cli/{path.name}: {registered} is not wrapped by @boundary"
        for fn in ast.walk(tree):  # @x_app.command(...) on a function
            if isinstance(fn, ast.FunctionDef) and any(
                    isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "command"
                    for d in fn.decorator_list):
                assert fn.name in wrapped, f"cli/{path.name}: {fn.name} is not wrapped by @boundary"


SIZE_FLAGS = ("--cq-size", "--batch-cq-size", "--index-slots", "--index-entries", "--broker-config",
              "--assume-defaults")
WRITING_COMMANDS = ("append.py", "recover.py", "redispatch.py", "salvage.py")


def _string_constants(tree: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_size_options_are_declared_once():
    """The option blocks `duplicates` found repeated in append, recover and redispatch (and
    salvage's --index-slots/--index-entries) are one definition: cli/sizes.py declares every
    size option; the commands name it (``@size_options``) and declare none of them."""
    assert set(SIZE_FLAGS) <= _string_constants(_tree(CLI / "sizes.py"))
    for name in WRITING_COMMANDS:
        tree = _tree(CLI / name)
        declared = [s for s in _string_constants(tree) if s in SIZE_FLAGS]
        assert not declared, f"cli/{name} declares size options itself: {declared}"
        params = {a.arg for fn in _commands(tree) for a in fn.args.args}
        # the six-option block is gathered by @size_options (salvage takes only the two index
        # sizes, declared in cli/sizes.py as well)
        assert not params & {"cq_size", "batch_cq_size", "broker_config", "assume_defaults"}, \
            f"cli/{name} repeats the size parameters: {sorted(params)}"


def test_size_options_reach_the_command_once_gathered():
    """typer sees the six options where ``sizes`` stood, and the command gets them gathered."""
    import inspect

    from rmqtool.cli import append, recover, redispatch
    from rmqtool.cli.sizes import SizeOptions

    for fn in (append.append, recover.recover, redispatch.redispatch):
        names = list(inspect.signature(fn).parameters)
        assert "sizes" not in names
        i = names.index("cq_size")
        assert names[i:i + 6] == ["cq_size", "batch_cq_size", "index_slots", "index_entries", "broker_config",
                                  "assume_defaults"]
    assert SizeOptions(cq_size=6000).given().consume_queue == 6000
