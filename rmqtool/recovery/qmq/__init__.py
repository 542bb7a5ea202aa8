"""What QMQ's ``DefaultStorage`` does at its next start on a store, simulated from the files
(``start.py``); nothing here writes a byte."""
from rmqtool.recovery.qmq.start import StartOutcome, simulate_start

__all__ = ["StartOutcome", "simulate_start"]
