"""benchmarks/launch.py: a command's peak RSS is its own, not the pages of the (large) process that
started it, and its exit code, CPU time and output come back as it gave them."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchmarks.launch import MIB, launch, own_peak

CHILD_MIB = 40
# the child touches every page of CHILD_MIB MiB, then exits with code 3
CHILD = f"x = bytearray({CHILD_MIB} << 20)\nfor i in range(0, len(x), 4096): x[i] = 1\nprint('done')\nraise SystemExit(3)"


def test_the_peak_is_the_commands_own_however_large_the_parent():
    ballast = bytearray(200 * MIB)
    for i in range(0, len(ballast), 4096):  # this process's peak: at least 200 MiB
        ballast[i] = 1
    assert own_peak() > 200 * MIB
    # started straight from here, the child's ru_maxrss carries this process's peak over (the bug)
    direct = subprocess.Popen([sys.executable, "-c", "pass"])
    assert os.wait4(direct.pid, 0)[2].ru_maxrss * 1024 > 200 * MIB
    got = launch([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, check=False)
    del ballast
    assert got.code == 3 and got.stdout == "done\n"
    assert CHILD_MIB * MIB < got.peak < (CHILD_MIB + 60) * MIB, got.peak_mib
    assert 0 < got.cpu and 0 < got.wall
    with pytest.raises(RuntimeError, match="exited 3"):
        launch([sys.executable, "-c", "raise SystemExit(3)"])
