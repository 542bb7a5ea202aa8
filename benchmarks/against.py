"""``python -m benchmarks --against REV [NAME ...]``: the same bench lines, measured for REV and for
this tree in the same run, and which of this tree's are worse.

REV is checked out (``git worktree add --detach``) under the work directory as
``against-<short hash>`` (kept for the next run; ``git worktree remove`` it when done), with its
C kernel built there as ``make native`` builds it (without it REV's lines would be the pure-Python
path's: 6.9 M headers/s where REV hops 60 M). Module
by module, REV's own benchmark module and this tree's run in turns, each in a fresh
``python -m benchmarks NAME`` with its own tree first on ``PYTHONPATH`` and the same work
directory (the stores are built once, for both); the side that goes first alternates, so a
change in the machine's load falls on both. A module only one side has runs on that side
alone.

Both runs' verdict lines are read back by label (verdict.parse). For each label both have,
the two values are printed and the current one is called a regression when it is worse
(lower for a ``>=`` target, higher for ``<=``) beyond the spread of the runs: each value
stands for the range its line's spread gives (the ``min ..., max ...`` of its runs or
rounds; the value alone when the line has none), widened by :data:`TOLERANCE` of the value
on each side, and a regression is a current range wholly on the worse side of REV's.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES

from benchmarks.verdict import parse

REPO = pathlib.Path(__file__).resolve().parent.parent
TOLERANCE = 0.05  # a single run's value stands for +-5%: the noise of one run on a quiet machine
_MIN_MAX = re.compile(r"min (?P<min>-?[\d,]*\.?\d+)[^,;]*, max (?P<max>-?[\d,]*\.?\d+)")


@dataclasses.dataclass(frozen=True)
class Compared:
    label: str
    before: dict  # REV's parsed line
    after: dict  # the current tree's
    regression: bool

    @property
    def line(self) -> str:
        word = "REGRESSION" if self.regression else "ok"
        b, a = self.before, self.after
        return (f"{self.label.strip()}: {_value_text(b)} -> {_value_text(a)} "
                f"(target {a['comparison']} {a['target']:,g}{a['unit']}): {word}")


def _value_text(line: dict) -> str:
    low, high = value_range(line)
    spread = "" if low == high == line["value"] else f" ({low:,g}..{high:,g})"
    return f"{line['value']:,g}{line['unit']}{spread}"


def value_range(line: dict) -> tuple[float, float]:
    """The range a parsed verdict line's value stands for: its spread's min and max, or the value."""
    m = _MIN_MAX.search(line.get("spread") or "")
    if m is None:
        return line["value"], line["value"]
    low, high = (float(m[k].replace(",", "")) for k in ("min", "max"))
    return min(low, high, line["value"]), max(low, high, line["value"])


def is_regression(before: dict, after: dict, tolerance: float = TOLERANCE) -> bool:
    """After is worse than before beyond both runs' spreads (the rule in the module's docstring)."""
    (b_low, b_high), (a_low, a_high) = value_range(before), value_range(after)
    b_low, b_high = b_low - abs(before["value"]) * tolerance, b_high + abs(before["value"]) * tolerance
    a_low, a_high = a_low - abs(after["value"]) * tolerance, a_high + abs(after["value"]) * tolerance
    if after["comparison"] == ">=":  # higher is better
        return a_high < b_low
    return a_low > b_high


def verdict_lines(printed: str) -> dict[str, dict]:
    """A run's verdict lines by label."""
    lines = {}
    for text in printed.splitlines():
        got = parse(text)
        if got is not None:
            lines[got["label"]] = got
    return lines


def compare(before: str, after: str) -> tuple[list[Compared], list[str], list[str]]:
    """Both runs' outputs compared: the labels both have, then the labels only REV's has and only
    the current one's."""
    b, a = verdict_lines(before), verdict_lines(after)
    both = [Compared(label, b[label], a[label], is_regression(b[label], a[label])) for label in a if label in b]
    return both, [label for label in b if label not in a], [label for label in a if label not in b]


def checkout(rev: str, workdir: pathlib.Path, repo: pathlib.Path = REPO) -> tuple[pathlib.Path, str]:
    """REV as a detached worktree under the work directory (made once); its path and short hash."""
    short = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", f"{rev}^{{commit}}"], check=True,
                           capture_output=True, text=True).stdout.strip()
    tree = workdir / f"against-{short}"
    if not (tree / ".git").exists():
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(tree), short], check=True,
                       capture_output=True, text=True)
    # rmqtool.formats is installed from formats/ (pyproject's package-dir): run from source, it needs the link
    link = tree / "rmqtool" / "formats"
    if (tree / "formats").is_dir() and not os.path.lexists(link):
        link.symlink_to(pathlib.Path("..") / "formats")
    build_native(tree)
    return tree, short


def build_native(tree: pathlib.Path) -> None:
    """REV's C kernel built in its worktree, as ``make native`` builds this tree's (the build is
    not in git): without it REV's modules time the pure-Python fallback, not REV."""
    native = tree / "rmqtool" / "native"

    def built() -> bool:
        return any(p.name.endswith(suffix) for p in native.glob("_kernel*") for suffix in EXTENSION_SUFFIXES)

    if not any(native.glob("*.c")) or built():
        return
    done = subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_ext",
                           "--inplace"], cwd=tree, capture_output=True, text=True)
    if done.returncode or not built():
        print(f"# {tree.name}: its native kernel did not build; its lines are the pure-Python path's\n"
              f"{done.stderr[-500:]}", flush=True)


def modules_of(tree: pathlib.Path, names: list[str]) -> list[str]:
    found = sorted(p.stem for p in (tree / "benchmarks").glob("bench_*.py"))
    return [m for m in found if not names or any(n in m for n in names)]


def run_module(tree: pathlib.Path, module: str, workdir: pathlib.Path, tag: str) -> str:
    """One tree's module in a fresh interpreter; its output, echoed as it comes with ``tag`` before each line."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])]))
    p = subprocess.Popen([sys.executable, "-m", "benchmarks", module, "--workdir", str(workdir)], cwd=tree, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    for text in p.stdout:
        out.append(text)
        print(f"{tag} | {text}", end="", flush=True)
    p.wait()
    if p.returncode:
        print(f"{tag} | (exit {p.returncode})", flush=True)
    return "".join(out)


def main(rev: str, names: list[str], workdir: pathlib.Path, current: pathlib.Path = REPO) -> int:
    tree, short = checkout(rev, workdir, current)
    theirs, ours = modules_of(tree, names), modules_of(current, names)
    modules = sorted(set(theirs) | set(ours))
    if not modules:
        print("no benchmark module matches", file=sys.stderr)
        return 2
    from benchmarks.__main__ import compile_bytecode
    for side in (tree, current):  # REV's __main__ may not: both timed alike
        compile_bytecode(side)
    print(f"# against {rev} ({short}, checked out in {tree}): {len(modules)} modules, in turns")
    before, after = [], []
    for i, module in enumerate(modules):
        sides = [(short, tree, before, module in theirs), ("current", current, after, module in ours)]
        for tag, where, outputs, has in (sides if i % 2 == 0 else sides[::-1]):
            print(f"\n## {module}: {tag}", flush=True)
            if has:
                outputs.append(run_module(where, module, workdir, tag))
            else:
                print(f"{tag} | (no such module)")
    both, only_before, only_after = compare("\n".join(before), "\n".join(after))
    print(f"\n# {short} -> current, by label (a regression: worse beyond both runs' min..max, each widened "
          f"by {TOLERANCE:.0%} of its value)")
    for c in both:
        print(c.line)
    for label in only_before:
        print(f"{label.strip()}: only in {short}")
    for label in only_after:
        print(f"{label.strip()}: only in the current tree")
    regressions = sum(c.regression for c in both)
    print(f"\n# regressions against {short}: {regressions} of {len(both)} lines both have")
    return 1 if regressions else 0
