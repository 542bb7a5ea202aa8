"""make demo's script: every command it shows exits as it should (the crash copy's plan with
3, the rest with 0), on the store it builds."""
from __future__ import annotations

from rmqtool import demo


def test_the_demo_runs_clean(tmp_path, capsys):
    assert demo.main(["--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("(exit code 0)") >= 11 and out.count("(exit code 3)") == 1
    assert "nothing to recover" in out
    assert "RMQTOOL CHECK" in out and (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
