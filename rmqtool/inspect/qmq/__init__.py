"""What ``info`` and ``dump`` compute for a QMQ store."""
