"""rmqtool: forensic and recovery tool for Apache RocketMQ broker store directories."""

__version__ = "0.1.0"
