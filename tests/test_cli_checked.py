"""Input checked and damage located: a message found by query whose CRC fails is printed
(its bytes are all there is) and named on stderr with its file and offset, exiting 3; options
that contradict each other or a range given backwards are usage errors (2), not empty output."""
from __future__ import annotations


from typer.testing import CliRunner

from conftest import V4, load_truth
from helpers import copy_tree
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode


def test_query_offset_on_a_record_with_a_bad_body_crc(tmp_path):
    truth = load_truth(V4 / "basic" / "truth.json")["truth"]
    m = next(m for m in truth["messages"] if m["bodyLength"] > 0)
    store = tmp_path / "store"
    copy_tree(V4 / "basic" / "store", store)
    segment = sorted((store / "commitlog").iterdir())[0]
    # the body's last byte: after it come topicLength (1 byte, V1), the topic, propertiesLength (2) and the properties
    last_body_byte = (m["physicalOffset"] + m["storeSize"] - 2 - m["propertiesLength"]
                      - len(m["topic"].encode()) - 1 - 1)
    raw = bytearray(segment.read_bytes())
    raw[last_body_byte] ^= 0xFF
    segment.write_bytes(bytes(raw))
    runner = CliRunner()
    clean = runner.invoke(app, ["query", str(V4 / "basic" / "store"), "--offset", str(m["physicalOffset"])])
    assert clean.exit_code == 0, clean.stderr
    r = runner.invoke(app, ["query", str(store), "--offset", str(m["physicalOffset"]), "--format", "jsonl"])
    assert r.exit_code == int(ExitCode.CORRUPT)
    assert '"body_crc_ok":false' in r.stdout
    assert f"{segment}: offset {m['physicalOffset']}: body CRC mismatch" in r.stderr


def test_conflicting_and_reversed_dump_options_are_usage_errors():
    runner = CliRunner()
    store = str(V4 / "basic" / "store")
    for args in (["dump", "index", store, "--headers-only", "--slots"],
                 ["dump", "consumequeue", store, "--from-offset", "5", "--to-offset", "2"]):
        r = runner.invoke(app, args)
        assert r.exit_code == int(ExitCode.USAGE), args
        assert len(r.stderr.strip().splitlines()) == 1 and "error:" in r.stderr


def test_a_consume_queue_unit_pointing_into_a_record_is_damage(tmp_path):
    import struct

    truth = load_truth(V4 / "basic" / "truth.json")["truth"]
    queue_offset, phy, size, _ = truth["consumeQueues"]["OrderTopic"]["0"]["entries"][2]
    store = tmp_path / "store"
    copy_tree(V4 / "basic" / "store", store)
    cq = sorted((store / "consumequeue" / "OrderTopic" / "0").iterdir())[0]
    raw = bytearray(cq.read_bytes())
    struct.pack_into(">q", raw, queue_offset * 20, phy + 10)  # 10 bytes into its record
    cq.write_bytes(bytes(raw))
    r = CliRunner().invoke(app, ["query", str(store), "--topic", "OrderTopic", "--queue", "0",
                                 "--queue-offset", str(queue_offset)])
    assert r.exit_code == int(ExitCode.CORRUPT), r.stderr
    assert str(cq) in r.stderr and f"{phy + 10}" in r.stderr


def test_an_unparseable_config_file_is_damage_not_a_wrong_kind(tmp_path):
    config = tmp_path / "config"
    config.mkdir()
    broken = config / "consumerOffset.json"
    broken.write_text('{"offsetTable":{"T@G":{0:5,')  # cut off mid-write
    r = CliRunner().invoke(app, ["dump", "config", str(broken)])
    assert r.exit_code == int(ExitCode.CORRUPT), r.stderr
    assert "configUnparseable" in r.stderr and str(broken) in r.stderr


def test_info_table_shows_new_names_only_and_json_keeps_the_old_ones():
    import json

    runner = CliRunner()
    store = str(V4 / "basic" / "store")
    table = runner.invoke(app, ["info", store], env={"COLUMNS": "120"}).stdout
    assert "min_commit_log_offset" in table
    assert not [line for line in table.splitlines() if line.split()[:1] in (["min_offset"], ["max_offset"])]
    doc = json.loads(runner.invoke(app, ["info", store, "-f", "json"]).stdout)
    commitlog = doc["commitlog"]
    assert commitlog["min_offset"] == commitlog["min_commit_log_offset"]
