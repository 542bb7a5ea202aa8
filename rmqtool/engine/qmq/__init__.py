"""The write side for QMQ stores: carrying out a recovery plan, with its backup."""
