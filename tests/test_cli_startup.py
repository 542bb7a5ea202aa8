"""Every command starts without loading what only some commands need: the write-side engine
(append) and numpy (verify) load when those commands run, not for `rmqtool dump`."""
from __future__ import annotations

import subprocess
import sys


def test_loading_the_cli_loads_neither_the_engine_nor_numpy():
    code = ("import sys, rmqtool.cli.app; "
            "print(sorted(m for m in sys.modules if m == 'numpy' or m.startswith('rmqtool.engine')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
