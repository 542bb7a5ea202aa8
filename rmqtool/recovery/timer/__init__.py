"""The 5.x timer store's next start, simulated: TimerMessageStore.load/recover (load.py) and
the run after it (next_run.py), on a store (start.py)."""
