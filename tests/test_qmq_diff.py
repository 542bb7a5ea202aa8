"""rmqtool diff on two QMQ stores: equal copies, a slave behind (its logs cut where a record
starts), a flipped payload byte, the crash fixtures' short segment and zeroed action log tail
against the store they were made from, each against what QMQ's own read-back says."""
from __future__ import annotations

import json
import os

import pytest

from conftest import FIXTURES, load_truth
from helpers import cli_runner, copy_tree, expand_store, table_sections
from rmqtool.cli.app import app

QMQ = FIXTURES / "qmq"
CRASH = QMQ / "crash"


def _diff(a, b, *more):
    out = cli_runner().invoke(app, ["diff", str(a), str(b), *map(str, more), "-f", "jsonl"])
    return [json.loads(line) for line in out.stdout.splitlines()], out


@pytest.fixture(scope="module", params=("basic", "v2-consumerlog"))
def clean(request, tmp_path_factory):
    work = tmp_path_factory.mktemp(request.param)
    return expand_store(QMQ / request.param / "store", work / "store"), load_truth(QMQ / request.param / "truth.json")


def _copy(store, dst):
    return copy_tree(store, dst)


def _zero_from(path, offset: int) -> None:
    """The file's bytes from ``offset`` on made zeros, its size kept (a slave's segment, mapped full size)."""
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(offset)
        f.truncate(size)


def test_a_store_and_its_copy_are_equal(clean, tmp_path):
    store, _ = clean
    rows, out = _diff(store, _copy(store, tmp_path / "copy"))
    assert out.exit_code == 0, out.stderr
    assert [r["record"] for r in rows] == ["summary"] and rows[0]["equal"] is True


def test_a_slave_behind_lacks_the_records_after_its_end(clean, tmp_path):
    store, truth = clean
    records = truth["readBack"]["messageLog"]["records"]
    actions = truth["readBack"]["actionLog"]["records"]
    cut, action_cut = records[len(records) * 2 // 3], actions[len(actions) // 2]
    slave = _copy(store, tmp_path / "slave")
    _zero_from(slave / "messagelog" / f"{0:020d}", cut["offset"])
    _zero_from(slave / "actionlog" / f"{0:020d}", action_cut["offset"])
    rows, out = _diff(store, slave)
    assert out.exit_code == 3, out.stderr
    (tail,) = [r for r in rows if r["record"] == "message_log_divergence"]
    assert (tail["side"], tail["reason"], tail["message_log_offset"]) == ("a", "missing_tail", cut["offset"])
    past = [r for r in records if r["offset"] >= cut["offset"]]
    assert tail["messages_past"] == len(past)
    only = [r for r in rows if r["record"] == "message_only_in"]
    assert [(r["side"], r["message_log_offset"], r["subject"], r["sequence"]) for r in only] == \
        [("a", r["offset"], r["subject"], r["sequence"]) for r in past]
    ids = {p["wroteOffset"]: p["messageId"] for p in truth["generation"]["puts"]}
    assert all(r["message_id"] == ids[r["message_log_offset"]] for r in only)
    (acts,) = [r for r in rows if r["record"] == "action_log_divergence"]
    assert (acts["side"], acts["reason"], acts["action_log_offset"]) == ("a", "missing_tail", action_cut["offset"])
    summary = rows[-1]
    assert summary["messages_only_in_a"] == len(past) and summary["messages_only_in_b"] == 0
    assert summary["written_end_b"] == cut["offset"] and summary["message_log_offset"] == cut["offset"]


def test_a_flipped_payload_byte_is_a_different_record(clean, tmp_path):
    store, truth = clean
    put = next(p for p in truth["generation"]["puts"] if p["payloadSize"] > 100)
    copy = _copy(store, tmp_path / "copy")
    with open(copy / "messagelog" / f"{0:020d}", "r+b") as f:
        f.seek(put["wroteOffset"] + put["payloadOffset"] + 50)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    rows, out = _diff(store, copy)
    assert out.exit_code == 3
    (d,) = [r for r in rows if r["record"] == "message_log_divergence"]
    assert (d["reason"], d["message_log_offset"]) == ("different_record", put["wroteOffset"])
    assert d["first_different_byte"] == put["wroteOffset"] + put["payloadOffset"] + 50
    assert d["a"]["payload_crc_ok"] is True and d["b"]["payload_crc_ok"] is False
    assert not [r for r in rows if r["record"] == "message_only_in"]


def test_a_short_segment_lacks_what_qmqs_start_loses(tmp_path):
    """i against the store it was made from (a): the records only a holds are those QMQ's start
    on i loses."""
    a = expand_store(CRASH / "a-as-is" / "input", tmp_path / "a")
    i = expand_store(CRASH / "i-short-messagelog-segment" / "input", tmp_path / "i")
    lost = load_truth(CRASH / "i-short-messagelog-segment" / "truth.json")["messageLog"]["recordsLost"]
    rows, out = _diff(a, i)
    assert out.exit_code == 3
    only = {(r["message_log_offset"], r["subject"], r["sequence"]) for r in rows if r["record"] == "message_only_in"}
    assert only == {(r["offset"], r["subject"], r["sequence"]) for r in lost}
    assert all(r["side"] == "a" for r in rows if r["record"] == "message_only_in")


def test_an_action_log_cut_short_shows_the_progress_each_start_has(tmp_path):
    """l (the action log's last records zeroed) against a: where the action logs part, and the
    groups whose progress after each store's start differs, as QMQ's read-back says."""
    a_truth = load_truth(CRASH / "a-as-is" / "truth.json")
    l_truth = load_truth(CRASH / "l-zeroed-actionlog-tail" / "truth.json")
    a = expand_store(CRASH / "a-as-is" / "input", tmp_path / "a")
    l_store = expand_store(CRASH / "l-zeroed-actionlog-tail" / "input", tmp_path / "l")
    rows, out = _diff(a, l_store)
    assert out.exit_code == 3
    (acts,) = [r for r in rows if r["record"] == "action_log_divergence"]
    assert (acts["side"], acts["action_log_offset"]) == ("a", l_truth["mutation"]["zeroedFrom"])
    before = {(p["subject"], p["group"]): p for p in a_truth["consumerProgressAfterRestart"]}
    after = {(p["subject"], p["group"]): p for p in l_truth["consumerProgressAfterRestart"]}
    differ = {k for k in before.keys() | after.keys()
              if (before.get(k) or {}).get("pull") != (after.get(k) or {}).get("pull")
              or (before.get(k) or {}).get("consumers") != (after.get(k) or {}).get("consumers")}
    assert differ and {(r["subject"], r["group"]) for r in rows if r["record"] == "group_progress"} == differ
    assert not [r for r in rows if r["record"].startswith("message")]
    # at 80 columns the table shows each group's field and both sides' values
    text = cli_runner().invoke(app, ["diff", str(a), str(l_store)], env={"COLUMNS": "80"}).stdout
    (names,) = [names for names, section in table_sections(text) if any(
        c.get("record") == "group_progress" for c in section)]
    assert {"subject", "group", "field", "a", "b"} <= set(names), names
    lines = [line.split() for line in text.splitlines() if line.startswith("group_progress")]
    assert [next(f for f in ("pull", "consumers") if f in words) for words in lines] == \
        [r["field"] for r in rows if r["record"] == "group_progress"]
    assert max(map(len, text.splitlines())) <= 80


def test_stores_of_two_families_and_rocketmq_options(clean, tmp_path):
    store, _ = clean
    rocketmq = expand_store(FIXTURES / "rocketmq-4.9.8" / "basic" / "store", tmp_path / "r")
    for a, b in ((store, rocketmq), (rocketmq, store)):  # either way round, one line saying why
        out = _diff(a, b)[1]
        assert out.exit_code == 4 and "two stores of one family" in out.stderr, out.stderr
        assert "this command reads RocketMQ stores" not in out.stderr  # diff reads QMQ stores too
    _, out = _diff(store, store, "--commitlog-path-a", tmp_path)
    assert out.exit_code == 2 and "--commitlog-path-a" in out.stderr


def test_a_side_whose_start_stops_is_one_row_not_every_group(tmp_path):
    """b (a stray name in messagelog/) loads no progress: one group_progress row says why,
    not a row for every group the other side has."""
    truth = load_truth(CRASH / "b-stray-file-in-messagelog" / "truth.json")
    a = expand_store(CRASH / "a-as-is" / "input", tmp_path / "a")
    b = expand_store(CRASH / "b-stray-file-in-messagelog" / "input", tmp_path / "b")
    rows, out = _diff(a, b)
    assert out.exit_code == 3
    (progress,) = [r for r in rows if r["record"] == "group_progress"]
    assert progress["side"] == "b" and truth["exception"]["class"] in progress["reason"]


def _unit_file(store, subject, unit_bytes, sequence):
    """The consumer log segment holding ``sequence`` and the unit's position in it."""
    from rmqtool.formats.qmq.consumerlog import SEGMENT_TOTAL_UNIT
    base = sequence // SEGMENT_TOTAL_UNIT * SEGMENT_TOTAL_UNIT * unit_bytes
    return store / "consumerlog" / subject / f"{base:020d}", sequence * unit_bytes - base


def test_a_unit_naming_another_record_mid_log_differs_and_a_dispatch_time_does_not(clean, tmp_path):
    """A slave builds its own consumer logs, at its own clock: a unit's timestamp is not a
    difference; a unit in the middle of a log naming another record is, though both logs keep
    their ranges."""
    store, truth = clean
    subject, log = max(truth["readBack"]["consumerLogs"].items(), key=lambda kv: len(kv[1]["units"]))
    units, unit_bytes = log["units"], log["unitBytes"]
    k = len(units) // 2
    copy = _copy(store, tmp_path / "copy")
    path, at = _unit_file(copy, subject, unit_bytes, units[k]["sequence"])
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(bytes.fromhex(units[k + 1]["rawHex"]))  # names the next unit's record
    later = units[k + 2]
    raw = bytearray.fromhex(later["rawHex"])
    stamp = later["timestamp"].to_bytes(8, "big")
    i = raw.index(stamp)
    raw[i:i + 8] = (later["timestamp"] + 12345).to_bytes(8, "big")
    path, at = _unit_file(copy, subject, unit_bytes, later["sequence"])
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(raw)
    rows, out = _diff(store, copy)
    assert out.exit_code == 3, out.stderr
    (row,) = [r for r in rows if r["record"] != "summary"]
    assert (row["record"], row["subject"], row["sequence"]) == ("consumer_log_units", subject, units[k]["sequence"])
    assert row["units_differing"] == 1 and row["last_sequence"] == units[k]["sequence"]
    for side, unit in (("a", units[k]), ("b", units[k + 1])):
        assert (row[side]["wrote_offset"], row[side]["wrote_bytes"], row[side]["header_size"]) == \
            (unit["wroteOffset"], unit["wroteBytes"], unit["headerSize"])


def test_a_checkpoint_lacking_a_subject_is_its_max_sequence(tmp_path):
    """h (a subject's line removed from the latest message checkpoint) against a: the max
    sequence the line said, and none on h's side."""
    mutation = load_truth(CRASH / "h-subject-missing-from-checkpoint" / "truth.json")["mutation"]
    a = expand_store(CRASH / "a-as-is" / "input", tmp_path / "a")
    h = expand_store(CRASH / "h-subject-missing-from-checkpoint" / "input", tmp_path / "h")
    rows, out = _diff(a, h)
    assert out.exit_code == 3
    (line,) = mutation["removedLines"]
    subject, sequence = line.rsplit("/", 1)
    (row,) = [r for r in rows if r["record"] == "checkpoint_field"]
    assert (row["subject"], row["field"], row["a"], row["b"]) == (subject, "max_sequence", int(sequence), None)


def test_every_field_table_shows_both_sides_at_80_columns(tmp_path):
    """a against k (another run of the same producers): subjects' ranges and units, groups'
    progress and the checkpoints all differ. At 80 columns each field table shows the field
    and both sides' values, beside the subject and group where its rows have them: a
    checkpoint's long field name (message_checkpoint_offset) beside the group column left
    the values out. A unit's row names the unit fields that differ."""
    from helpers import table_sections
    a = expand_store(CRASH / "a-as-is" / "input", tmp_path / "a")
    k = expand_store(CRASH / "k-clean-restart-with-pulllog-tablet" / "input", tmp_path / "k")
    rows, out = _diff(a, k)
    assert out.exit_code == 3
    fields = {"subject_range", "consumer_log_units", "group_progress", "checkpoint_field"}
    assert fields <= {r["record"] for r in rows}
    for r in rows:
        if r["record"] == "consumer_log_units":
            assert r["field"].split(", ") == [f for f in r["a"] if r["a"][f] != r["b"][f]], r
    text = cli_runner().invoke(app, ["diff", str(a), str(k)], env={"COLUMNS": "80"}).stdout
    assert max(map(len, text.splitlines())) <= 80
    seen = set()
    for names, section in table_sections(text):
        records = {c.get("record") for c in section} & fields
        if records:
            seen |= records
            assert {"subject", "field", "a", "b"} <= set(names), (records, names)
            assert ("group" in names) == (records == {"group_progress"}), (records, names)
    assert seen == fields
    for record, want in (("checkpoint_field", "message_checkpoint_offset"), ("consumer_log_units", "wrote_")):
        assert any(line.startswith(record) and want in line for line in text.splitlines()), record


def test_both_sides_share_the_room_a_table_has(tmp_path):
    """a and b grow together: at 120 columns the groups' consumers (long on both sides) get
    cells of one width, not a whole one beside a cut one."""
    import re
    a = expand_store(CRASH / "a-as-is" / "input", tmp_path / "a")
    k = expand_store(CRASH / "k-clean-restart-with-pulllog-tablet" / "input", tmp_path / "k")
    text = cli_runner().invoke(app, ["diff", str(a), str(k)], env={"COLUMNS": "120"}).stdout
    lines = text.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.startswith("record") and " group " in line]
    names, rule = lines[at].split(), lines[at + 1]
    widths = dict(zip(names, (len(m.group()) for m in re.finditer(r"-+", rule))))
    assert abs(widths["a"] - widths["b"]) <= 1 and widths["a"] > 8, widths
