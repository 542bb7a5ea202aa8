"""``python -m benchmarks.profile CMD [--workdir DIR] [--top N]``: cProfile over one command on its
bench store, printing the top functions by cumulative and by own time: where the time goes
(benchmarks/README.md's hot spots are written from these).

CMD is one of :data:`PROFILES`: the CLI commands run in this process as ``rmqtool`` would run
them (one process: ``--jobs 1``; output to /dev/null), the library loops as the benches call
them. The stores are the benches' own (built once under the work directory, as they build
them). Timed in CPU seconds (``time.process_time``: what other work on the machine cannot
inflate); cProfile slows Python calls about twice, so the shares matter, not the seconds.
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pathlib
import pstats
import sys
import time
from typing import Callable

from benchmarks import big_store

DEFAULT_WORKDIR = pathlib.Path(__file__).resolve().parent.parent / ".bench"


def _cli(argv: list[str]) -> None:
    from rmqtool.cli.app import app

    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        try:
            app(argv, standalone_mode=False)
        except SystemExit:
            pass


def _verify(workdir: pathlib.Path) -> Callable[[], object]:
    store = big_store.ensure(workdir)
    return lambda: _cli(["verify", str(store), "--jobs", "1", "--no-progress", "--format", "jsonl"])


def _dump(workdir: pathlib.Path) -> Callable[[], object]:
    store = big_store.ensure(workdir)
    return lambda: _cli(["dump", "commitlog", str(store), "--format", "jsonl", "--body", "none", "--limit",
                         "300000", "--no-progress"])


def _read_log(workdir: pathlib.Path):
    from benchmarks.bench_read import specs
    from benchmarks.gen import ensure_store
    from rmqtool.store.commitlog_end import CommitLog

    return CommitLog(str(ensure_store(workdir / "read-1seg", specs(1024)[0]).commitlog))


def _full_decode(workdir: pathlib.Path) -> Callable[[], object]:
    from benchmarks.bench_read import decode_all

    log = _read_log(workdir)
    return lambda: decode_all(log.scan(check_crc=False))


def _crc_scan(workdir: pathlib.Path) -> Callable[[], object]:
    from rmqtool.store.commitlog import CrcTally

    log = _read_log(workdir)
    return lambda: sum(1 for _ in log.crc_scan(tally=CrcTally()))


def _append(workdir: pathlib.Path) -> Callable[[], object]:
    from benchmarks import bench_append

    messages = bench_append._messages(100_000, os.urandom(bench_append.BODY_SIZE))
    root = workdir / "profile-append-store"
    return lambda: (bench_append._async(root, messages, bulk=False), bench_append._async(root, messages, bulk=True))


def _redispatch(workdir: pathlib.Path) -> Callable[[], object]:
    import shutil

    from rmqtool.engine.redispatch import build

    store = big_store.ensure(workdir)
    staging = workdir / "profile-redispatch-staging"

    def rebuild():
        shutil.rmtree(staging, ignore_errors=True)
        try:
            return build(store, staging)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return rebuild


def _qmq_verify(workdir: pathlib.Path) -> Callable[[], object]:
    from benchmarks import qmq_store

    store = qmq_store.ensure(workdir)
    return lambda: _cli(["verify", str(store), "--jobs", "1", "--no-progress", "--format", "jsonl"])


def _timer_verify(workdir: pathlib.Path) -> Callable[[], object]:
    from benchmarks import timer_store

    store = timer_store.ensure(workdir)
    now = str(timer_store.facts(store)["now_ms"])
    return lambda: _cli(["verify", str(store), "--jobs", "1", "--no-progress", "--format", "jsonl", "--only",
                         "timer", "--now", now])


# name: (what is profiled, a function of the work directory giving the call to profile)
PROFILES: dict[str, tuple[str, Callable[[pathlib.Path], Callable[[], object]]]] = {
    "verify": ("rmqtool verify --jobs 1 on the 1,000,000-message store", _verify),
    "dump-jsonl": ("rmqtool dump commitlog --format jsonl --body none, 300,000 rows", _dump),
    "full-decode": ("CommitLog.scan(check_crc=False), every field read (bench_read.decode_all), 1 GiB segment",
                    _full_decode),
    "crc-scan": ("CommitLog.crc_scan, 1 GiB segment", _crc_scan),
    "append": ("Store.append() then append_many(), 100,000 messages each, async flush", _append),
    "redispatch": ("consume queues and index built again from the 1,000,000-message store", _redispatch),
    "qmq-verify": ("rmqtool verify --jobs 1 on the 1,000,000-message QMQ store", _qmq_verify),
    "timer-verify": ("rmqtool verify --only timer on 1,000,000 timer units", _timer_verify),
}


def _where(key: tuple) -> str:
    path, line, name = key
    if path == "~":  # a built-in
        return name
    resolved = pathlib.Path(path).resolve()
    for root, shown in _PACKAGE_ROOTS:
        if resolved.is_relative_to(root):
            return f"{shown}/{resolved.relative_to(root).as_posix()}:{line}({name})"
    return f"{'/'.join(resolved.parts[-2:])}:{line}({name})"


def _package_roots() -> tuple[tuple[pathlib.Path, str], ...]:
    """Where rmqtool's modules and rmqtool.formats' are (an install maps formats/ in from the
    repository's top level), the deeper first: a function is named by its module's path."""
    import rmqtool
    import rmqtool.formats
    return ((pathlib.Path(rmqtool.formats.__file__).resolve().parent, "rmqtool/formats"),
            (pathlib.Path(rmqtool.__file__).resolve().parent, "rmqtool"))


_PACKAGE_ROOTS = _package_roots()


def hot_spots(stats: pstats.Stats, top: int) -> str:
    """Two tables: the top functions by cumulative time (rmqtool's own, below the command line's
    layers) and by own time (any), each with its share of the whole call."""
    total = max(ct for _, _, _, ct, _ in stats.stats.values())
    rows = [(_where(k), tt, ct) for k, (_, _, tt, ct, _) in stats.stats.items()]
    out = []
    for title, pick, order in (
            ("by cumulative time (rmqtool's functions)", lambda w: w.startswith("rmqtool/") and "/cli/" not in w,
             lambda r: r[2]),
            ("by own time", lambda w: True, lambda r: r[1])):
        out.append(f"\n## top {top} {title}\n{'function':<72} {'cum s':>8} {'cum %':>6} {'own s':>8} {'own %':>6}")
        for where, tt, ct in sorted((r for r in rows if pick(r[0])), key=order, reverse=True)[:top]:
            out.append(f"{where[:72]:<72} {ct:8.2f} {ct / total:6.1%} {tt:8.2f} {tt / total:6.1%}")
    return "\n".join(out) + "\n"


def profile(name: str, workdir: pathlib.Path, top: int = 15) -> str:
    """The report: the call's total time, then the top functions by cumulative and by own time."""
    what, prepare = PROFILES[name]
    call = prepare(workdir)
    profiler = cProfile.Profile(time.process_time)  # CPU time: other work on the machine does not inflate it
    profiler.runcall(call)
    stats = pstats.Stats(profiler, stream=io.StringIO())
    return f"# profile of {name}: {what}; {stats.total_tt:.2f} s of CPU under cProfile\n" + hot_spots(stats, top)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.profile", description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=sorted(PROFILES))
    ap.add_argument("--workdir", type=pathlib.Path, default=DEFAULT_WORKDIR)
    ap.add_argument("--top", type=int, default=15, help="functions listed in each ordering (default 15)")
    args = ap.parse_args(argv)
    print(profile(args.command, args.workdir.resolve(), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
