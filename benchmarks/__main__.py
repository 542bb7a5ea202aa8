"""``python -m benchmarks [NAME ...]``: run every ``benchmarks/bench_*.py`` module's ``run(workdir)``.

Each module prints its lines, one a target; the run ends with how many targets passed.

The work directory is ``.bench/`` at the repository root (git ignores it). It is kept
between runs, so large inputs are built once; delete it to rebuild them. NAME picks the
modules whose name contains it (``read`` runs bench_read). A module that fails is
reported and the others still run; the exit code is then 1.

``--against REV`` runs REV's benchmark modules and this tree's in turns and compares their
lines by label (benchmarks/against.py); the exit code is then 1 when a line regressed.
"""
from __future__ import annotations

import argparse
import importlib
import os
import pathlib
import sys
import time
import traceback

# as rmqtool's command line does (cli/app.py): in-process measurements then run as its commands do,
# without OpenBLAS's threads spinning while numpy is imported
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_WORKDIR = REPO / ".bench"


def compile_bytecode(tree: pathlib.Path = REPO) -> None:
    """Byte-compile the tree's rmqtool (its __pycache__, git-ignored), as an installed rmqtool is:
    with PYTHONDONTWRITEBYTECODE set and no .pyc, every timed process would compile every module
    it imports again (seconds of a verify's time that no operator's run spends)."""
    import compileall
    for directory in ("rmqtool", "formats", "benchmarks"):
        if (tree / directory).is_dir():
            compileall.compile_dir(str(tree / directory), quiet=1)


def discover(names: list[str]) -> list[str]:
    modules = sorted(p.stem for p in HERE.glob("bench_*.py"))
    if names:
        modules = [m for m in modules if any(n in m for n in names)]
    return modules


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="run only the bench_*.py modules whose name contains one of these")
    ap.add_argument("--workdir", type=pathlib.Path, default=DEFAULT_WORKDIR,
                    help=f"where inputs are built and kept (default {DEFAULT_WORKDIR})")
    ap.add_argument("--list", action="store_true", help="list the modules and exit")
    ap.add_argument("--against", metavar="REV",
                    help="also run REV's own modules (a git worktree under the work directory), in turns with "
                         "these, and print each line both have with the two values and whether it regressed")
    args = ap.parse_args(argv)
    if args.against:
        from benchmarks import against
        workdir = args.workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        return against.main(args.against, args.names, workdir)
    modules = discover(args.names)
    if args.list:
        print("\n".join(modules))
        return 0
    if not modules:
        print("no benchmark module matches", file=sys.stderr)
        return 2
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    from benchmarks import readme

    print(f"# rmqtool benchmarks, work directory {workdir}")
    print(f"{readme.MACHINE}{readme.machine_kind()}")
    print(f"{readme.STARTED}{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{readme.MODULES}{len(modules)} of {len(discover([]))}: {', '.join(modules)}")
    before = f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "unknown"
    print(f"{readme.LOAD_BEFORE}{before} (other work on the machine skews the numbers)")
    run_started = time.perf_counter()
    compile_bytecode()
    failed, verdicts = [], []
    for name in modules:
        print(f"\n## {name}", flush=True)
        started = time.perf_counter()
        try:
            module = importlib.import_module(f"benchmarks.{name}")
            verdicts += module.run(workdir)["verdicts"]
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
        except Exception:  # one broken module must not hide the others' numbers
            traceback.print_exc()
            failed.append(name)
        sys.stdout.flush()
        print(f"## {name}: {time.perf_counter() - started:.1f} s", flush=True)
    after = f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "unknown"
    print(f"\n{readme.LOAD_AFTER}{after} (the run took {time.perf_counter() - run_started:.0f} s)")
    missed = [v.label.strip() for v in verdicts if not v.passed]
    print(f"{readme.TOTAL}{len(verdicts) - len(missed)} of {len(verdicts)} PASS"
          + (f"; not met: {'; '.join(missed)}" if missed else ""))
    if failed:
        print(f"# failed: {', '.join(failed)}", flush=True)
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
