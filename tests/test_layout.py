"""The layout is the architecture: each folder imports only what ARCHITECTURE.md allows.

The read side (store/) never imports the write side (engine/), nor anything built on top of
it; no library module imports the CLI. Walks every import statement, the lazy ones inside
functions too.
"""
from __future__ import annotations

import ast
import functools
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BASE = {"formats", "errors", "findings", "native"}
# package -> the rmqtool packages (and top-level modules) it may import
ALLOWED = {
    "formats": {"formats", "errors"},
    "native": {"formats", "native"},  # the optional C kernel: layouts come from formats/
    "errors": set(),
    "findings": set(),
    "store": BASE | {"store"},
    "dispatch": BASE | {"store", "dispatch"},
    "recovery": BASE | {"store", "dispatch", "recovery"},
    "engine": BASE | {"store", "dispatch", "recovery", "engine"},
    "query": BASE | {"store", "query"},
    "verify": BASE | {"store", "dispatch", "query", "recovery", "verify"},
    "report": BASE | {"store", "report"},
    "inspect": BASE | {"store", "query", "recovery", "report", "inspect"},
    "spark": BASE | {"store", "verify", "query", "report", "inspect", "spark"},
    "families": BASE | {"store", "dispatch", "recovery", "engine", "query", "verify", "inspect", "report", "families"},
}


def _package(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT)
    if rel.parts[0] == "formats":
        return "formats"
    return rel.parts[1].removesuffix(".py")


def _imported(tree: ast.AST) -> set[str]:
    """The rmqtool package of every import in a module."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] if node.module != "rmqtool" else [f"rmqtool.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "rmqtool" and len(parts) > 1:
                out.add(parts[1])
    return out


@functools.lru_cache(maxsize=None)
def _tree(path: pathlib.Path) -> ast.AST:
    """A module's syntax tree, parsed once a worker (each test walks every module)."""
    return ast.parse(path.read_text(), str(path))


def _modules():
    files = sorted((ROOT / "rmqtool").rglob("*.py")) + sorted((ROOT / "formats").rglob("*.py"))
    return [f for f in files if _package(f) in ALLOWED]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_layout(path):
    package = _package(path)
    imported = _imported(_tree(path))
    assert imported <= ALLOWED[package], (
        f"{path.relative_to(ROOT)} ({package}/) imports {sorted(imported - ALLOWED[package])}")


def test_no_relative_imports_hide_a_dependency():
    for path in _modules():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.level and _package(path) != "formats":
                pytest.fail(f"{path.relative_to(ROOT)} uses a relative import")


def test_nothing_outside_the_cli_imports_it():
    for path in (ROOT / "rmqtool").rglob("*.py"):
        rel = path.relative_to(ROOT / "rmqtool")
        if rel.parts[0] in ("cli", "__main__.py"):
            continue
        assert "cli" not in _imported(_tree(path)), f"{rel} imports the CLI"


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT)
    if rel.parts[0] == "formats":
        parts = ("rmqtool", "formats", *rel.parts[1:])
    else:
        parts = rel.parts
    name = ".".join(parts).removesuffix(".py")
    return name.removesuffix(".__init__")


def test_no_two_modules_import_each_other():
    """Not even lazily inside a function: a cycle means two concepts that are one, or one
    that sits in the wrong module."""
    modules = {_module_name(p): p for p in _modules()}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                deps.add(node.module)
                deps.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        graph[name] = {d for d in deps if d in modules and d != name}
    cycles = []
    state: dict[str, int] = {}

    def visit(n, stack):
        state[n] = 1
        for d in graph[n]:
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d, stack + [d])
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n, [n])
    assert not cycles, cycles


LONG_FUNCTION = 80  # lines (issue 21): a longer function says why in a comment just above it
LONG_REASON = "# Over 80 lines"


def test_no_long_function_without_its_reason():
    long = []
    for path in sorted((ROOT / "rmqtool").rglob("*.py")) + sorted((ROOT / "formats").rglob("*.py")):
        lines = path.read_text().splitlines()
        for node in ast.walk(_tree(path)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if node.end_lineno - node.lineno + 1 <= LONG_FUNCTION:
                continue
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            above = lines[max(0, first - 3):first - 1]  # the comment may run to two lines
            if not any(line.strip().startswith(LONG_REASON) for line in above):
                long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} "
                            f"({node.end_lineno - node.lineno + 1} lines)")
    assert not long, long
