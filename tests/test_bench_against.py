"""benchmarks/against.py: REV's benchmark modules and the current tree's run in turns, their lines
are compared by label, and a line is a regression only when it is worse beyond both runs'
spreads; a module or a label only one side has is said so, not an error."""
from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

from benchmarks import against
from benchmarks.verdict import parse, verdict

BENCH = pathlib.Path(against.__file__).resolve().parent
GIT = ["git", "-c", "user.email=bench@example.com", "-c", "user.name=bench"]


def _line(value, comparison=">=", low=None, high=None):
    spread = None if low is None else f"median of 3 runs; min {low:,} rows/s, max {high:,} rows/s; load 1.00 before"
    return parse(verdict("dump rate", value, comparison, 100, " rows/s", digits=0, spread=spread).line)


@pytest.mark.parametrize("before, after, regression", [
    (_line(1000), _line(800), True),  # lower, beyond 5% of each
    (_line(1000), _line(960), False),  # within the single runs' 5%
    (_line(1000, low=700, high=1100), _line(800, low=750, high=900), False),  # the spreads overlap
    (_line(1000, low=950, high=1100), _line(800, low=750, high=850), True),
    (_line(1000, "<="), _line(1200, "<="), True),  # higher is worse for a <= target
    (_line(1000, "<="), _line(800, "<="), False),
])
def test_a_regression_is_worse_beyond_both_spreads(before, after, regression):
    assert against.is_regression(before, after) is regression


def test_module_by_module_in_turns_against_a_checked_out_revision(tmp_path, capsys):
    """A throwaway repository: REV's bench_fake prints 1,000 rows/s and has bench_gone; the
    current tree's prints 500 rows/s (a regression) and a label and a module REV lacks."""
    repo = tmp_path / "repo"
    (repo / "benchmarks").mkdir(parents=True)
    for name in ("__init__.py", "__main__.py", "verdict.py", "readme.py"):
        shutil.copy(BENCH / name, repo / "benchmarks" / name)

    def module(name: str, *lines: tuple[str, float]) -> None:
        verdicts = ", ".join(f"report(verdict({label!r}, {value}, '>=', 100, ' rows/s', digits=0))"
                             for label, value in lines)
        (repo / "benchmarks" / f"{name}.py").write_text(
            "from benchmarks.verdict import report, verdict\n\n\n"
            f"def run(workdir):\n    print('ran', {name!r}, workdir)\n    return {{'verdicts': [{verdicts}]}}\n")

    module("bench_fake", ("fake rate", 1000), ("steady rate", 300))
    module("bench_gone", ("gone rate", 200))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*GIT, "-C", str(repo), "add", "."], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-qm", "before"], check=True)
    (repo / "benchmarks" / "bench_gone.py").unlink()
    module("bench_fake", ("fake rate", 500), ("steady rate", 300), ("new rate", 400))
    workdir = tmp_path / "work"
    workdir.mkdir()
    assert against.main("HEAD", [], workdir, current=repo) == 1
    out = capsys.readouterr().out
    short = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True,
                           text=True).stdout.strip()
    assert (workdir / f"against-{short}" / "benchmarks" / "bench_gone.py").exists()
    # REV's module ran from REV's tree, the current one from the current tree, in turns, the same work directory
    ran = [line for line in out.splitlines() if " | ran " in line]
    assert ran == [f"{short} | ran bench_fake {workdir}", f"current | ran bench_fake {workdir}",
                   f"{short} | ran bench_gone {workdir}"]
    # the second module's turn starts with the current tree, which has no such module
    assert out.index("current | (no such module)") < out.index(f"{short} | ran bench_gone")
    assert "fake rate: 1,000 rows/s -> 500 rows/s (target >= 100 rows/s): REGRESSION" in out
    assert "steady rate: 300 rows/s -> 300 rows/s (target >= 100 rows/s): ok" in out
    assert "gone rate: only in" in out and "new rate: only in the current tree" in out
    assert out.rstrip().endswith(f"# regressions against {short}: 1 of 2 lines both have")


def test_revs_c_kernel_is_built_in_its_worktree_once(tmp_path, monkeypatch):
    """Without its kernel REV's lines would time the pure-Python fallback (10x slower hops)."""
    native = tmp_path / "rmqtool" / "native"
    native.mkdir(parents=True)
    calls = []

    def build(argv, cwd, **kw):
        calls.append((argv[-2:], cwd))
        (native / "_kernel.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(against.subprocess, "run", build)
    against.build_native(tmp_path)  # no C sources (a revision before the kernel): nothing to build
    assert calls == []
    (native / "scan.c").write_text("")
    against.build_native(tmp_path)
    against.build_native(tmp_path)  # built: not again
    assert calls == [(["build_ext", "--inplace"], tmp_path)]
