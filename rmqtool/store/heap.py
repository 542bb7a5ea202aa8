"""Keeping freed memory in this process's heap between a worker's jobs.

A parallel dump's worker frees all of a job's windows and rows when the job ends. glibc then
gives the heap's free top back to the system (trim), and the next job's first windows take it
back a page fault at a time: ~1,000 faults a 16 MiB job, which made a 2-process dump spend
more system time than the one-process dump, whose heap never empties. Raising the trim and
mmap thresholds once (mallopt) keeps those pages for the next job; peak memory is unchanged
(it is what one job holds). Elsewhere than glibc this does nothing.
"""
from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest: a window or a job's rows below it come from the heap
TRIM_THRESHOLD = 64 << 20  # free top kept: more than a job holds at once

_kept = False


def keep_freed_memory() -> bool:
    """Keep freed memory in the heap from now on (glibc's mallopt); whether it was set."""
    global _kept
    if _kept:
        return True
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): the allocator's own ways
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # the mmap threshold first: setting either turns glibc's own adjustment of both off
    _kept = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _kept
