"""Lookups in a QMQ store: by subject and sequence, by message id, by time."""
