"""Benchmarks: ``python -m benchmarks`` (``make bench``) runs every ``bench_*.py`` module.

Each module has ``run(workdir: pathlib.Path) -> None``; it prints its own lines, with
ratios against a baseline measured in the same run, and targets marked PASS or MISS.
Large inputs (``gen.py``) are built once under ``.bench/`` and reused.
"""
