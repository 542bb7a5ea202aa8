"""recover --apply's progress bar: bytes written (backup copies, zeros, the re-dispatch's
consume queue units and index entries), on stderr only, its stdout the same as without it."""
from __future__ import annotations

import re

import pytest

from conftest import V4
from helpers import cli_runner, writable_copy

CRASH = V4 / "crash" / "b2-garbage-tail-of-last-message" / "input" / "store"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The crash store applied twice through the CLI (with and without --progress, into a
    pipe), in paths of the same length so the tables wrap alike."""
    from rmqtool.cli.app import app
    out = {}
    for name, extra in (("a", []), ("b", ["--progress"])):
        base = tmp_path_factory.mktemp(f"run{name}", numbered=False)
        store = writable_copy(CRASH, base / "store")
        r = cli_runner().invoke(app, ["recover", str(store), "--apply", "--backup-dir", str(base / "bk"), *extra])
        out[name] = (base, r)
    return out


def test_progress_goes_to_stderr_and_leaves_stdout_alone(runs):
    (base_a, plain), (base_b, barred) = runs["a"], runs["b"]
    assert plain.exit_code == 0 and barred.exit_code == 0, barred.stderr
    assert barred.stdout.replace(str(base_b), str(base_a)) == plain.stdout
    assert "recovering:" not in plain.stderr
    lines = [line for line in barred.stderr.splitlines() if line.startswith("recovering:")]
    assert lines and all(re.fullmatch(r"recovering: [\d.]+ [KMG]?i?B written", line) for line in lines)
    assert "recovering" not in barred.stdout


def _units(root) -> set:
    """Every consume queue unit that holds anything: (file, position)."""
    from rmqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE as U
    out = set()
    for f in (root / "consumequeue").rglob("*"):
        if f.is_file():
            b = f.read_bytes()
            out |= {(str(f.relative_to(root)), i) for i in range(0, len(b) - U + 1, U) if any(b[i:i + U])}
    return out


@pytest.mark.parametrize("case", ["b2-garbage-tail-of-last-message", "c1-delete-cq-queue-dir"])
def test_done_counts_the_bytes_backup_and_apply_wrote(tmp_path, case):
    from rmqtool.engine.store import Store
    from rmqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE as U
    from rmqtool.formats.indexfile import INDEX_SIZE
    from rmqtool.recovery.manifest import read_manifest
    from rmqtool.report.progress import Progress

    store = writable_copy(V4 / "crash" / case / "input" / "store", tmp_path / "store")
    before = _units(store)
    bar = Progress("recovering")
    applied = Store.recover(store, backup_dir=tmp_path / "bk", on_written=bar.advance)
    bar.close()
    manifest = read_manifest(applied.backup_dir)
    copied = sum(e.end - e.start for e in manifest.entries)  # the backup's copies, holes and all
    assert copied == sum((applied.backup_dir / e.copy).stat().st_size for e in manifest.entries)
    zeroed = sum(e.end - e.start for e in manifest.entries if e.action == "zero")
    assert zeroed == applied.bytes_zeroed
    # the units the zeros cut, then those the re-dispatch wrote; the index entries the plan says it puts
    cut = {(e.file, i) for e in manifest.entries if e.action == "zero" and e.file.startswith("consumequeue/")
           for i in range(e.start - e.start % U, e.end, U)}
    units_written = len(_units(store) - (before - cut))
    entries_put = applied.plan.to_json()["index_rebuild"]["entries_put"]
    assert entries_put > 0 and (units_written > 0) == case.startswith("c1")  # c1: a queue dispatched again
    assert bar.done == copied + zeroed + units_written * U + entries_put * INDEX_SIZE


def test_ctrl_c_erases_the_bars_before_its_line(monkeypatch):
    """A terminal's bar still live at Ctrl-C was drawn again after "rmqtool: interrupted" (in
    colour, with no newline): the boundary erases every bar before its line."""
    import io

    import typer

    from rmqtool.cli.common import boundary
    from rmqtool.report import progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    err = Terminal()
    monkeypatch.setattr("sys.stderr", err)
    bar = progress.Progress("verify", total=100)
    bar.advance(10)

    @boundary
    def command():
        raise KeyboardInterrupt

    with pytest.raises(typer.Exit) as stopped:
        command()
    assert stopped.value.exit_code == 130
    assert progress._LIVE == [] and bar._bar is None  # stopped: nothing draws it again
    assert err.getvalue().endswith("rmqtool: interrupted\n")
