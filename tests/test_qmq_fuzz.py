"""Random damage to QMQ stores never crashes a command and never changes an input byte.

Hypothesis damages a QMQ store DefaultStorage wrote (basic, and a crash input): bytes of a
written file flipped, overwritten or zeroed, a file cut short or deleted, a stray name
added; then every command that reads a QMQ store runs (info, verify, each dump kind, the
recover plan, report, a query, salvage to a file outside the store) through CliRunner. Whatever the damage: no traceback, an exit code from the
README's table, and not one byte changed (``recover`` without ``--apply`` writes nothing).
The store is expanded once a module (its 1 GiB segments are sparse) and every damage is
undone after its example, so a case costs its commands, not a copy.
"""
from __future__ import annotations

import contextlib
import os
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from helpers import cli_runner, copy_tree, examples, expand_store, tree_fingerprint
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode
from rmqtool.store.extents import data_end

QMQ = FIXTURES / "qmq"
SOURCES = {"basic": QMQ / "basic" / "store", "crash-a": QMQ / "crash" / "a-as-is" / "input"}
COMMANDS = (["info"], ["verify"], ["dump", "messagelog", "--body", "none"], ["dump", "consumerlog"],
            ["dump", "actionlog"], ["dump", "pulllog"], ["dump", "checkpoint"], ["recover"], ["report"],
            ["query", "--subject", "order.created", "--sequence", "3"], ["salvage"],
            ["check", "--now", "1900000000000"], ["offsets"], ["diff"])
EXIT_CODES = {int(code) for code in ExitCode}


@pytest.fixture(scope="module", params=sorted(SOURCES))
def store(request, tmp_path_factory):
    return expand_store(SOURCES[request.param], tmp_path_factory.mktemp(request.param) / "store")


@pytest.fixture(scope="module")
def undamaged(store, tmp_path_factory):
    """The same store, left as it is: what diff compares the damaged one with."""
    return copy_tree(store, tmp_path_factory.mktemp("undamaged") / "store")


def _written_files(root: pathlib.Path) -> list[pathlib.Path]:
    """Files with written bytes (damage inside a hole would only make a sparse file dense)."""
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.stat().st_blocks:
            out.append(p)
    return out


def _written_bytes(path: pathlib.Path, start: int = 0) -> bytes:
    """The file's bytes from ``start`` up to the end of its last written extent (the hole after
    it reads as zeros): a 1 GiB sparse segment is not read whole. A failing example's frames
    are kept while Hypothesis shrinks; holding whole segments in them once ran a worker out of
    memory (22 GB) and lost the example."""
    with open(path, "rb") as f:
        end = data_end(f.fileno(), os.fstat(f.fileno()).st_size)
        f.seek(start)
        return f.read(max(0, end - start))


class Damage:
    """One damage, and how to take it back."""

    def __init__(self, root: pathlib.Path):
        self.root = root
        self.undo = []

    def bytes_at(self, path: pathlib.Path, position: int, data: bytes) -> None:
        size = path.stat().st_size
        with open(path, "r+b") as f:
            f.seek(position)
            before = f.read(len(data))
            f.seek(position)
            f.write(data)
        self.undo.append(lambda: self._put(path, position, before, size))

    @staticmethod
    def _put(path, position, data, size):
        with open(path, "r+b") as f:
            f.seek(position)
            f.write(data)
            f.truncate(size)  # a write past the end grew it

    def cut(self, path: pathlib.Path, size: int) -> None:
        whole, before = path.stat().st_size, _written_bytes(path, size)
        with open(path, "r+b") as f:
            f.truncate(size)

        def back():
            with open(path, "r+b") as f:
                f.seek(size)
                f.write(before.rstrip(b"\0"))  # the zeros come back as a hole
                f.truncate(whole)
        self.undo.append(back)

    def remove(self, path: pathlib.Path) -> None:
        data, size = _written_bytes(path), path.stat().st_size
        path.unlink()

        def back():
            with open(path, "wb") as f:
                f.write(data.rstrip(b"\0"))
                f.truncate(size)
        self.undo.append(back)

    def add(self, path: pathlib.Path, data: bytes) -> None:
        path.write_bytes(data)
        self.undo.append(path.unlink)

    def take_back(self) -> None:
        for step in reversed(self.undo):
            step()


# Headroom a command gets over what the worker has mapped when it starts (the stores' 1 GiB
# segments are mapped whole, several at once). A command that runs away on some damage then
# fails here with a MemoryError naming the damage, instead of the kernel's OOM killer taking
# the whole pytest worker (seen once: 22 GB, the example lost with it).
COMMAND_HEADROOM = 10 << 30


@contextlib.contextmanager
def _address_space_cap():
    try:
        import resource
        with open("/proc/self/status") as f:
            size = next(int(line.split()[1]) << 10 for line in f if line.startswith("VmSize:"))
    except (ImportError, OSError, StopIteration):  # not Linux: no cap, the command runs as it is
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = size + COMMAND_HEADROOM
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# (kind, which file, where in it, bytes): the file drawn apart from the position, so that small
# positions reach every file, not the few a small number picks; and small positions often (a
# file cut inside its first record, a first header's fields: what found a reader's IndexError)
damages = st.lists(st.tuples(st.sampled_from(("flip", "write", "zero", "cut", "delete", "stray")),
                             st.integers(0, 255), st.one_of(st.integers(0, 300), st.integers(0, 1 << 30)),
                             st.binary(min_size=1, max_size=64)),
                   min_size=1, max_size=3)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=damages)
def test_no_command_crashes_or_writes(store, undamaged, plan, tmp_path_factory):
    before = tree_fingerprint(store)
    files = _written_files(store)
    d = Damage(store)
    try:
        for kind, which, where, data in plan:
            path = files[which % len(files)]
            if not path.exists():  # deleted by an earlier damage of this example
                continue
            written = max(1, min(path.stat().st_size, path.stat().st_blocks * 512))
            at = where % written
            if kind == "flip":
                with open(path, "rb") as f:
                    f.seek(at)
                    byte = f.read(1)
                d.bytes_at(path, at, bytes([byte[0] ^ 0xFF]) if byte else b"\1")
            elif kind == "write":
                d.bytes_at(path, at, data)
            elif kind == "zero":
                d.bytes_at(path, at, bytes(len(data)))
            elif kind == "cut" and path.exists():
                d.cut(path, at)
            elif kind == "delete" and path.exists():
                d.remove(path)
            elif kind == "stray" and not (path.parent / (path.name + ".bak")).exists():
                d.add(path.parent / (path.name + ".bak"), data)
        damaged = tree_fingerprint(store)
        for command in COMMANDS:
            args = [*command, str(store), "-f", "jsonl"]
            if command[0] == "salvage":  # its messages to a file of its own, outside the store
                out = tmp_path_factory.mktemp("salvage") / "kept.jsonl"
                args = ["salvage", str(store), "--out", str(out), "-f", "json"]
            elif command[0] == "diff":
                args = ["diff", str(undamaged), str(store), "-f", "jsonl"]
            with _address_space_cap():
                r = cli_runner().invoke(app, args)
            assert r.exit_code in EXIT_CODES, (command, plan, r.exception, r.stderr[-500:])
            assert not isinstance(r.exception, Exception) or isinstance(r.exception, SystemExit), \
                (command, plan, repr(r.exception))
            assert "Traceback" not in r.stderr, (command, plan, r.stderr[-800:])
        assert tree_fingerprint(store) == damaged, plan  # nothing written without --apply
    finally:
        d.take_back()
    assert tree_fingerprint(store) == before
