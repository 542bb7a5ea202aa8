"""benchmarks/readme.py: README's performance section is one whole `make bench` run's verdict lines,
read from what benchmarks/__main__.py printed, with the machine named; the rest of README is
left as it was, and a partial or failed run is refused."""
from __future__ import annotations

import pytest

import benchmarks.__main__ as bench_main
from benchmarks import readme
from benchmarks.verdict import parse, report, verdict

README = f"# rmqtool\n\nintro\n\n## Performance\n\nwhy\n\n{readme.BEGIN}\nold numbers\n{readme.END}\n\n## Install\nrest\n"


def _fake_run(monkeypatch, capsys, tmp_path, modules: list[str], total: list[str], fail: bool = False) -> str:
    """benchmarks/__main__.py's real output, over fake modules printing known verdict lines."""
    import types
    lines = {"bench_a": [verdict("a rate (issue 27)", 1_612_345.4, ">=", 500_000, " rows/s", digits=0,
                                 spread="median of 3 runs; min 600,000 rows/s, max 630,000 rows/s; load 1.00 before, "
                                        "1.50 after")],
             "bench_b": [verdict("b | ratio", 1.234, "<=", 1.0, "x")]}
    for name in total:
        def run(workdir, name=name):
            if fail:
                raise RuntimeError("broken")
            return {"verdicts": [report(v) for v in lines[name]]}
        monkeypatch.setitem(__import__("sys").modules, f"benchmarks.{name}", types.SimpleNamespace(run=run))
    monkeypatch.setattr(bench_main, "discover", lambda names: [m for m in total if not names or m in names])
    bench_main.main([*modules, "--workdir", str(tmp_path)])
    return capsys.readouterr().out


def test_the_section_is_the_runs_lines_and_the_rest_stays(monkeypatch, capsys, tmp_path):
    printed = _fake_run(monkeypatch, capsys, tmp_path, [], ["bench_a", "bench_b"])
    text = readme.rewrite(README, printed)
    before, _, after = README.partition(readme.BEGIN)
    assert text.startswith(before) and text.endswith(README.partition(readme.END)[2])
    section = text[len(before):len(text) - len(README.partition(readme.END)[2])]
    assert section.startswith(readme.BEGIN) and section.endswith(readme.END) and "old numbers" not in section
    assert readme.machine_kind() in section and "1 of 2 PASS" in section  # a million or more: no exponent
    rows = [line for line in section.splitlines() if line.startswith("| bench_")]
    assert rows == [
        "| bench_a | a rate (issue 27) | 1,612,345 rows/s | >= 500,000 rows/s | PASS | median of 3 runs; min 600,000 "
        "rows/s, max 630,000 rows/s; load 1.00 before, 1.50 after |",
        "| bench_b | b \\| ratio | 1.23x | <= 1x | MISS |  |"]
    assert readme.rewrite(text, printed) == text  # the markers survive: run it again, the same
    for line in printed.splitlines():  # every verdict printed is in the table
        if parse(line):
            assert parse(line)["label"].replace("|", "\\|") in section


def test_a_partial_or_failed_run_or_a_readme_without_markers_is_refused(monkeypatch, capsys, tmp_path):
    partial = _fake_run(monkeypatch, capsys, tmp_path, ["bench_a"], ["bench_a", "bench_b"])
    with pytest.raises(readme.RunError, match="some modules"):
        readme.rewrite(README, partial)
    failed = _fake_run(monkeypatch, capsys, tmp_path, [], ["bench_a", "bench_b"], fail=True)
    with pytest.raises(readme.RunError, match="failed"):
        readme.rewrite(README, failed)
    whole = _fake_run(monkeypatch, capsys, tmp_path, [], ["bench_a", "bench_b"])
    with pytest.raises(readme.RunError, match="no section"):
        readme.rewrite("# README without markers\n", whole)
    with pytest.raises(readme.RunError, match="not a whole"):
        readme.rewrite(README, "a: 1.00x (target <= 2x): PASS\n")


def test_the_command_writes_the_file(monkeypatch, capsys, tmp_path):
    run = tmp_path / "last-run.txt"
    run.write_text(_fake_run(monkeypatch, capsys, tmp_path, [], ["bench_a", "bench_b"]))
    target = tmp_path / "README.md"
    target.write_text(README)
    assert readme.main([str(run), str(target)]) == 0
    assert "| bench_a | a rate (issue 27) |" in target.read_text()
    run.write_text("nothing\n")
    assert readme.main([str(run), str(target)]) == 2
    assert "| bench_a |" in target.read_text()  # a refused run leaves README as it was
