"""Every check over a store, as registered findings (see run.py)."""

# what --only picks from
AREAS = ("commitlog", "consumequeue", "index", "checkpoint", "config", "compaction", "timer", "controller",
         "rocksdbcq")
