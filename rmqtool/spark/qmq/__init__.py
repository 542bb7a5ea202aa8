"""The fleet pipeline's tasks for QMQ stores (the family's part of ``spark export``)."""
