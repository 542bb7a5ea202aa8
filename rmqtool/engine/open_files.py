"""The open files limit a writing engine runs with: raised to the hard limit, as the broker's
JVM raises it at its start (HotSpot's MaxFDLimit, on by default).

The engine, like the broker, keeps the last file of every queue it dispatches to mapped, and
Python's mmap holds a descriptor of its own beside the engine's: two a queue. An operator's
shell gives 1,024 (soft); a store of 2,000 topics of 4 queues stopped a recover --apply half
way with "Too many open files", where the broker, started from the same shell, has the hard
limit.
"""
from __future__ import annotations

try:
    import resource
except ImportError:  # not on a Unix
    resource = None

NR_OPEN = "/proc/sys/fs/nr_open"  # the kernel's ceiling when the hard limit is unlimited


def raise_open_files_limit() -> int | None:
    """The soft RLIMIT_NOFILE set to the hard one (or the kernel's ceiling); the limit now in
    force, None where there is no such limit."""
    if resource is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        try:
            with open(NR_OPEN) as f:
                target = int(f.read())
        except (OSError, ValueError):
            return soft
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError):  # a sandbox may refuse: the limit stays, and says so when reached
            return soft
        return target
    return soft

