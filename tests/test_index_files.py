"""Index files as the reader meets them, and dump refusing what is not an index."""
from __future__ import annotations

from typer.testing import CliRunner

from conftest import V4
from rmqtool.cli.app import app


# --- dump ------------------------------------------------------------------------------------

def test_dump_index_refuses_a_directory_that_is_no_store_or_index_dir():
    commitlog = V4 / "basic" / "store" / "commitlog"
    r = CliRunner().invoke(app, ["dump", "index", str(commitlog)])
    assert r.exit_code == 4 and r.stdout == ""
    assert str(commitlog) in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = CliRunner().invoke(app, ["dump", "index", str(V4 / "basic" / "store" / "index"), "--headers-only"])
    assert r.exit_code == 0 and r.stdout.strip()
