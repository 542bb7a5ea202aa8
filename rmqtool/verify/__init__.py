"""Every check over a store, as registered findings (see run.py)."""

AREAS = ("commitlog", "consumequeue", "index", "checkpoint", "config", "compaction", "timer", "controller")  # what --only picks from
