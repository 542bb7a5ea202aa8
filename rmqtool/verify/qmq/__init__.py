"""``rmqtool verify`` on a QMQ store: its checks as registered findings."""
