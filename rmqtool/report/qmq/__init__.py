"""QMQ's result rows, in the same vocabulary as RocketMQ's (docs/vocabulary.md)."""
