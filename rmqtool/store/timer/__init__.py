"""The 5.x timer store's files, read: the wheel, the timer log, timercheck, timermetrics.

Read-only, like the rest of store/. ``find_timer_store(root)`` says which timer files a
store has; each reader takes the file (or directory) it reads:

* ``wheel.read_wheel(path, precision_ms)``: the used (non-zero) slots, read sparse-aware.
* ``timerlog.scan_timer_log(directory, precision_ms)``: every file's units and blank, where
  each file's readable units end and why, and ``unit_at(position)``.
* ``chain.walk_chain(log, last_pos, ...)``: a slot's units from lastPos through prevPos as
  dequeue walks them, and how the walk ends.
* ``timercheck.read_timercheck(path)``, ``timermetrics.read_timermetrics(config_dir)``.
"""
