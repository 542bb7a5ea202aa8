"""A measured command's own peak memory, wall and CPU time: the one place a bench takes them.

Linux carries a process's peak RSS (``ru_maxrss``) across ``fork`` and ``exec``: a command
started straight from the bench process (a gigabyte of Python after the big store's build)
reports the bench's peak, not its own. So :func:`launch` starts a small launcher
(``python benchmarks/launch.py RESULT -- CMD ...``, about 10 MiB) which starts the command
and reaps it with ``os.wait4``: the command's peak is then its own (or the launcher's few
MiB, whichever is more), and the largest of its own children's (a ``--jobs 2`` worker's),
as the kernel reports them for a reaped process. Its CPU time is the command's and its
reaped children's, user + system. :func:`own_peak` is ``VmHWM`` of the calling process, for
a measurement made inside a fresh interpreter (its own address space, whatever started it).
"""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20


@dataclasses.dataclass(frozen=True)
class Launched:
    """One run of a command: exit code, wall and CPU seconds, peak RSS in bytes, its stderr (and
    its stdout, when :func:`launch` was asked to keep it)."""
    code: int
    wall: float
    cpu: float
    peak: int
    stderr: str
    stdout: str | None = None

    @property
    def peak_mib(self) -> float:
        return self.peak / MIB


def own_peak() -> int:
    """This process's peak RSS in bytes (``VmHWM``: the address space's own, reset by exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def launch(cmd: list[str], stdout=subprocess.DEVNULL, env: dict | None = None, check: bool = True) -> Launched:
    """Run ``cmd`` through the launcher; its exit code, times, peak RSS and stderr (and stdout, as
    text, when ``stdout`` is ``subprocess.PIPE``). ``check`` raises when the command exits other than 0."""
    with tempfile.NamedTemporaryFile("r", prefix="rmqtool-bench-", suffix=".json") as result:
        done = subprocess.run([sys.executable, __file__, result.name, "--", *cmd],  # stdlib only: no import
                              stdout=stdout, stderr=subprocess.PIPE, env=env)
        text = pathlib.Path(result.name).read_text()
    stderr = done.stderr.decode(errors="replace")
    if not text:
        raise RuntimeError(f"the launcher failed (exit {done.returncode}): {stderr.strip()[-500:]}")
    got = json.loads(text)
    out = done.stdout.decode(errors="replace") if stdout == subprocess.PIPE else None
    launched = Launched(got["code"], got["wall"], got["cpu"], got["peak"], stderr, out)
    if check and launched.code != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {launched.code}: {stderr.strip()[-500:]}")
    return launched


def _main(argv: list[str]) -> int:
    """The launcher: ``RESULT -- CMD ...``; writes {code, wall, cpu, peak} to RESULT as JSON."""
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m benchmarks.launch RESULT -- CMD ...", file=sys.stderr)
        return 2
    result, cmd = argv[0], argv[2:]
    started = time.perf_counter()
    pid = os.posix_spawnp(cmd[0], cmd, os.environ)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    doc = {"code": os.waitstatus_to_exitcode(status), "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
           "peak": usage.ru_maxrss * 1024}  # KiB on Linux
    pathlib.Path(result).write_text(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
