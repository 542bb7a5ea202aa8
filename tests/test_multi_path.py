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
