"""A lone UTF-16 surrogate in a config string (fastjson writes "\\ud800" as it is) reaches
every output format as its escape, never as a UnicodeEncodeError traceback."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize("fmt", ["jsonl", "json", "table"])
def test_lone_surrogate_in_a_config_string(tmp_path, fmt):
    config = tmp_path / "topics.json"
    config.write_text('{"topicConfigTable":{"T\\ud800":{"topicName":"T\\ud800"}}}')
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONIOENCODING="utf-8", COLUMNS="200")
    r = subprocess.run([sys.executable, "-m", "rmqtool", "dump", "config", str(config), "--format", fmt],
                       capture_output=True, env=env, timeout=60)
    assert b"Traceback" not in r.stderr, r.stderr.decode(errors="replace")
    assert r.returncode == 0, r.stderr
    assert b"\\ud800" in r.stdout
    if fmt != "table":  # still JSON, and the escape reads back as the surrogate
        text = r.stdout.decode("utf-8")
        doc = json.loads(text.splitlines()[0]) if fmt == "jsonl" else json.loads(text)
        assert "T\ud800" in json.dumps(doc, ensure_ascii=False)
