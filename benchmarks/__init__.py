"""Benchmarks: ``python -m benchmarks`` (``make bench``) runs every ``bench_*.py`` module.

Each module has ``run(workdir: pathlib.Path) -> dict``; it prints its own lines, with
ratios against a baseline measured in the same run, and returns its numbers with its
``"verdicts"``: each target judged and printed PASS or MISS by ``verdict.py``.
Large inputs (``gen.py``) are built once under ``.bench/`` and reused.
"""
