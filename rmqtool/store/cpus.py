"""How many processes a parallel scan uses by default: a module of its own so that a command
asks it (``--jobs``' default) without loading the commit log scanner (store/parallel.py)."""
from __future__ import annotations

import os


def default_workers() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
