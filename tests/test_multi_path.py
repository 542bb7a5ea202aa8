"""info takes several stores: one document each, a store that cannot be read named on
stderr while the others still print, and the exit code the worst of them."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from conftest import V4, V5, load_truth
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode

STORES = [V4 / "basic", V5 / "v2-and-crc"]


def test_info_of_several_stores_jsonl_and_json():
    runner = CliRunner()
    paths = [str(d / "store") for d in STORES]
    lines = runner.invoke(app, ["info", *paths, "-f", "jsonl"]).stdout.splitlines()
    docs = [json.loads(line) for line in lines]
    assert [d["store"]["path"] for d in docs] == paths
    for doc, d in zip(docs, STORES):  # each document is that store's: its commit log ends where the broker's did
        truth = load_truth(d / "truth.json")["truth"]
        assert doc["commitlog"]["max_commit_log_offset"] == truth["commitlog"]["maxPhyOffset"]
    array = json.loads(runner.invoke(app, ["info", *paths, "-f", "json"]).stdout)
    assert array == docs
    single = json.loads(runner.invoke(app, ["info", paths[0], "-f", "json"]).stdout)
    assert single == docs[0]  # one store: one object, as before


def test_a_missing_store_among_several(tmp_path):
    paths = [str(STORES[0] / "store"), str(tmp_path / "gone"), str(STORES[1] / "store")]
    r = CliRunner().invoke(app, ["info", *paths, "-f", "jsonl"])
    assert r.exit_code == int(ExitCode.OPERATIONAL)
    assert [json.loads(line)["store"]["path"] for line in r.stdout.splitlines()] == [paths[0], paths[2]]
    assert str(tmp_path / "gone") in r.stderr


def _rows(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_query_across_stores_rows_carry_their_store(tmp_path):
    """A key looked up in several stores: each store's own answer, in the order given, each
    row naming its store; a store that cannot be read is named and the others still answer."""
    runner = CliRunner()
    truth = load_truth(V4 / "basic" / "truth.json")
    key = next(k for m in truth["truth"]["messages"] for k in (m.get("keys") or "").split() if k)
    paths = [str(V4 / "basic" / "store"), str(V5 / "v2-and-crc" / "store")]
    alone = [_rows(runner.invoke(app, ["query", p, "--key", key, "-f", "jsonl"]).stdout) for p in paths]
    both = runner.invoke(app, ["query", *paths, "--key", key, "-f", "jsonl"])
    assert both.exit_code == 0 and alone[0]
    rows = _rows(both.stdout)
    assert [r.pop("store_path") for r in rows] == [p for p, a in zip(paths, alone) for _ in a]
    assert rows == alone[0] + alone[1]
    gone = str(tmp_path / "gone")
    partial = runner.invoke(app, ["query", paths[0], gone, "--key", key, "-f", "jsonl"])
    assert partial.exit_code == int(ExitCode.OPERATIONAL) and gone in partial.stderr
    assert [r["store_path"] for r in _rows(partial.stdout)] == [paths[0]] * len(alone[0])


def test_time_lookup_across_stores_gives_a_row_each():
    runner = CliRunner()
    truth = load_truth(V4 / "basic" / "truth.json")["truth"]
    m = truth["messages"][0]
    paths = [str(V4 / "basic" / "store")] * 2
    r = runner.invoke(app, ["query", *paths, "--time", str(m["storeTimestamp"]), "-t", m["topic"],
                            "-q", str(m["queueId"]), "-f", "jsonl"])
    assert r.exit_code == 0
    rows = _rows(r.stdout)
    assert [row["store_path"] for row in rows] == paths and rows[0]["queue_offset"] == rows[1]["queue_offset"]
