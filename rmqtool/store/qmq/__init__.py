"""The read side of QMQ's store (``formats/qmq/``): segments, the message log, consumer
logs, the action log, pull logs and checkpoints, read without writing a byte."""
