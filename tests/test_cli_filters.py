"""dump commitlog's filters (--tag, --key, --sys-flag, --msg-id) give exactly the broker's
messages that match, as read back in truth.json."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import V4, V5, load_truth
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode
from rmqtool.formats.sysflag import COMPRESSED_FLAG, TRANSACTION_MASK

TX = {"prepared": 4, "commit": 8, "rollback": 12}


def offsets(store, *args) -> list[int]:
    r = CliRunner().invoke(app, ["dump", "commitlog", str(store), "-f", "jsonl", "--body", "none", *args])
    assert r.exit_code == 0, r.stderr
    return [row["commit_log_offset"] for row in map(json.loads, r.stdout.splitlines()) if row["record"] == "message"]


def keys_of(m) -> list[str]:
    return (m["keys"] or "").split()


@pytest.mark.parametrize("root", [V4 / "txdelay", V4 / "basic", V5 / "v2-and-crc"], ids=lambda p: p.name)
def test_tag_key_msg_id(root):
    messages = load_truth(root / "truth.json")["truth"]["messages"]
    store = root / "store"
    tag = next(m["tags"] for m in messages if m["tags"])
    assert offsets(store, "--tag", tag) == [m["physicalOffset"] for m in messages if m["tags"] == tag]
    key = next(keys_of(m)[0] for m in reversed(messages) if keys_of(m))
    assert offsets(store, "--key", key) == [m["physicalOffset"] for m in messages
                                            if key in keys_of(m) or m["uniqKey"] == key]
    uniq = next(m for m in messages if m["uniqKey"])
    assert offsets(store, "--key", uniq["uniqKey"]) == [m["physicalOffset"] for m in messages
                                                         if m["uniqKey"] == uniq["uniqKey"] or uniq["uniqKey"] in keys_of(m)]
    target = messages[len(messages) // 2]
    assert offsets(store, "--msg-id", target["msgId"].lower()) == [target["physicalOffset"]]


def test_sys_flags_are_the_brokers_transaction_types():
    messages = load_truth(V4 / "txdelay" / "truth.json")["truth"]["messages"]
    store = V4 / "txdelay" / "store"
    for name, code in TX.items():
        want = [m["physicalOffset"] for m in messages if m["sysFlag"] & TRANSACTION_MASK == code]
        assert want and offsets(store, "--sys-flag", name) == want
    both = offsets(store, "--sys-flag", "commit", "--sys-flag", "rollback")
    assert both == [m["physicalOffset"] for m in messages if m["sysFlag"] & TRANSACTION_MASK in (8, 12)]
    assert offsets(store, "--sys-flag", "compressed") == [m["physicalOffset"] for m in messages
                                                          if m["sysFlag"] & COMPRESSED_FLAG]


def test_an_unknown_sys_flag_is_a_usage_error():
    r = CliRunner().invoke(app, ["dump", "commitlog", str(V4 / "basic" / "store"), "--sys-flag", "prepard"])
    assert r.exit_code == int(ExitCode.USAGE) and "prepared|commit|rollback" in r.stderr


def test_sys_flag_batch_is_a_5x_inner_batch():
    from rmqtool.formats.sysflag import INNER_BATCH_FLAG

    messages = load_truth(V5 / "batchcq" / "truth.json")["truth"]["messages"]
    want = [m["physicalOffset"] for m in messages if m["sysFlag"] & INNER_BATCH_FLAG]
    assert want and offsets(V5 / "batchcq" / "store", "--sys-flag", "batch") == want
