"""One vocabulary: every field of every command's real JSON output is listed in
docs/vocabulary.md, and every table column of a command is a field of its JSON."""
from __future__ import annotations

import json
import pathlib
import re

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, REPO, V4, V5
from helpers import copy_tree, expand_store
from rmqtool.cli.app import app
from rmqtool.report.columns import VIEWS

DOC = REPO / "docs" / "vocabulary.md"
STORE = V4 / "basic" / "store"
CRASH = V5 / "crash5" / "b-garbled-last-message" / "input" / "store"
OFFSETS_STORE = FIXTURES / "config" / "out-of-range" / "store"
# objects whose keys are data, not field names
DATA_OBJECTS = ("properties", "document", "queues", "counts", "missing_queue_offsets", "queue_offsets_kept",
                "a", "b",  # diff: a value on each side (a config object's own keys)
                "state_after_load",  # recover's timer: the engine's own field names, as the truth files hold them
                "files", "units_put",  # recover's consume_queue_ext: by TOPIC/QUEUE
                "topics")  # verify timerMetricsDrift's details: by topic


def documented() -> tuple[set[str], list[str]]:
    """(field names, suffix patterns such as ``_time``) from the first column of the doc's field table."""
    text = DOC.read_text(encoding="utf-8")
    fields_part = text.split("## Fields", 1)[1]  # and the renamed fields' old names after it
    names, suffixes = set(), []
    for line in fields_part.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            for name in re.findall(r"`([^`]+)`", first):
                if name.startswith("*"):
                    suffixes.append(name[1:])
                else:
                    names.add(name)
    return names, suffixes


def keys_of(obj, out: set[str]) -> set[str]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(k)
            if k not in DATA_OBJECTS or isinstance(v, list):  # a list of rows under such a name has fields
                keys_of(v, out)
    elif isinstance(obj, list):
        for x in obj:
            keys_of(x, out)
    return out


def invoke(*args, columns: int = 80):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": str(columns)})


def json_rows(*args) -> list:
    r = invoke(*args, "--format", "jsonl")
    assert r.exit_code in (0, 1, 3), (args, r.stdout, r.stderr)
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def table_headers(text: str) -> list[list[str]]:
    """The header line of each table (the line above a rule of dashes)."""
    lines = text.splitlines()
    return [lines[i - 1].split() for i, line in enumerate(lines)
            if i and line and set(line.replace(" ", "")) == {"-"}]


def appended_store(tmp_path):
    store = tmp_path / "new"
    r = invoke("append", store, "--create", "--topic", "T", "--body", "b", "--keys", "k1", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return store, json.loads(r.stdout)


# Every command, with arguments that make it print rows
COMMANDS = {
    "dump commitlog": ("dump", "commitlog", STORE, "--limit", "50", "--show-blank"),
    "dump commitlog corrupt": ("dump", "commitlog", CRASH),
    "dump commitlog --stats": ("dump", "commitlog", CRASH, "--stats"),
    "dump consumequeue": ("dump", "consumequeue", STORE, "--limit", "20"),
    "dump batchconsumequeue": ("dump", "consumequeue", V5 / "batchcq" / "store", "--limit", "20"),
    "dump index": ("dump", "index", STORE, "--limit", "20", "--slots"),
    "dump index headers": ("dump", "index", STORE, "--headers-only"),
    "dump checkpoint": ("dump", "checkpoint", V5 / "v2-and-crc" / "store"),
    "dump config": ("dump", "config", OFFSETS_STORE),
    "query key": ("query", STORE, "--key", "order-0"),
    "query time": ("query", STORE, "--topic", "OrderTopic", "--queue", "0", "--time", "1"),
    "verify": ("verify", CRASH),
    "offsets": ("offsets", OFFSETS_STORE),
    "offsets reset": ("offsets", "reset", OFFSETS_STORE, "--group", "order_group", "--topic", "CrashTopic",
                      "--to-time", "1795315660905"),
    "check": ("check", OFFSETS_STORE, "--now", "1795315400000"),
    "findings": ("findings",),
    "info": ("info", CRASH),
    "recover": ("recover", CRASH),
    "redispatch": ("redispatch", STORE),
    "salvage": ("salvage", CRASH, "--to-store", "{tmp}/salvaged"),
    "query timer": ("query", V5 / "timer" / "store", "--key", "r1-02", "--timer"),
    "info timer": ("info", V5 / "timer" / "store"),
    "dump timerwheel": ("dump", "timerwheel", V5 / "timer" / "store"),
    "dump timerlog": ("dump", "timerlog", V5 / "timer" / "store" / "timerlog" / "00000000000000000000", "--show-blank"),
    "dump timerlog --records": ("dump", "timerlog", V5 / "timer" / "store" / "timerlog" / "00000000000000000000",
                                "--records"),
    "dump timercheck": ("dump", "timercheck", V5 / "timer" / "store"),
    "dump timermetrics": ("dump", "timermetrics", V5 / "timer" / "store"),
    "diff": ("diff", FIXTURES / "config" / "consumers" / "store", OFFSETS_STORE),
    "report": ("report", CRASH, "--now", "1795315400000"),
    "recover timer": ("recover", V5 / "timer-crash" / "d-wheel-slot-zeroed-outside-rescan" / "input" / "store",
                      "--now", "1796256600000"),
    "recover dledger": ("recover", V5 / "dledger" / "store"),
    "recover cqext": ("recover", V5 / "cqext-damaged" / "input" / "store"),
    "verify timer": ("verify", V5 / "timer" / "store", "--now", "1796256600000"),
    "query several stores": ("query", STORE, V5 / "v2-and-crc" / "store", "--key", "order-0"),
}


def _args(name: str, tmp_path) -> tuple:
    """The command's arguments; a fixture store kept trimmed written out as its engine left it."""
    out = []
    for i, a in enumerate(COMMANDS[name]):
        if isinstance(a, pathlib.Path) and (a / "sizes.json").is_file():
            a = expand_store(a, tmp_path / f"store{i}")
        out.append(str(a).replace("{tmp}", str(tmp_path)))
    return tuple(out)


# documents of numbered plans and reports: printed as text for people, no table columns
PLANS = ("dump checkpoint", "dump timercheck", "recover", "recover timer", "recover dledger", "recover cqext",
         "redispatch", "salvage", "check")  # check: a status line


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_json_field_is_documented(name, tmp_path):
    names, suffixes = documented()
    rows = json_rows(*_args(name, tmp_path))
    assert rows, name
    fields = keys_of(rows, set())
    missing = sorted(f for f in fields if f not in names and not any(f.endswith(s) for s in suffixes))
    assert not missing, f"{name}: not in docs/vocabulary.md: {missing}"


def test_undo_output_is_documented(tmp_path):
    names, _ = documented()
    store = tmp_path / "s"
    copy_tree(V4 / "crash" / "b2-garbage-tail-of-last-message" / "input" / "store", store)
    r = invoke("append", store, "--recover", "--topic", "T", "--body", "b")
    assert r.exit_code == 0, r.stderr
    backup = next(tmp_path.glob("s.recovery-*"))
    rows = json_rows("undo", backup, "--force")  # the append came after the recovery: undo asks for --force
    assert rows and keys_of(rows, set()) <= names
    assert rows[0]["bytes_restored"] > 0


def test_append_output_is_documented_and_names_topic_and_queue(tmp_path):
    names, _ = documented()
    _, row = appended_store(tmp_path)
    assert row["topic"] == "T" and row["queue_id"] == 0
    assert set(row) <= names


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("wide", [False, True])
def test_every_table_column_is_a_json_field(name, wide, tmp_path):
    if name in PLANS:  # one document: name-value lines or a numbered plan, no columns
        return
    args = _args(name, tmp_path)
    fields = keys_of(json_rows(*args), set())
    r = invoke(*args, *(["--wide"] if wide else []), columns=120)
    assert r.exit_code in (0, 1, 3), r.stderr
    headers = table_headers(r.stdout)
    assert headers, r.stdout
    for header in headers:
        assert set(header) <= fields, (name, set(header) - fields)


def test_view_columns_are_documented():
    names, suffixes = documented()
    for kind, columns in VIEWS.items():
        for c in columns:
            assert c.name in names or any(c.name.endswith(s) for s in suffixes), (kind, c.name)


def test_renamed_fields_keep_their_old_names():
    """The old names (documented as deprecated) still come with the same values."""
    entry = next(r for r in json_rows("dump", "index", STORE, "--limit", "5") if r["record"] == "entry")
    assert entry["phy_offset"] == entry["commit_log_offset"]
    header = json_rows("dump", "index", STORE, "--headers-only")[0]
    assert header["begin_phy_offset"] == header["begin_commit_log_offset"]
    unit = json_rows("dump", "consumequeue", STORE, "--limit", "1")[0]
    assert unit["size"] == unit["store_size"]
    info = json.loads(invoke("info", STORE, "--format", "json").stdout)
    assert info["commitlog"]["max_offset"] == info["commitlog"]["max_commit_log_offset"]
    q = info["consume_queues"][0]
    assert (q["min_offset"], q["max_offset"]) == (q["min_queue_offset"], q["max_queue_offset"])
    assert q["messages"] == q["max_queue_offset"] - q["min_queue_offset"]


def test_wide_tables_show_the_new_names_and_columns_may_ask_for_the_old():
    """The renamed fields' old names ride along in the rows until the renaming's release; a table
    shows the new ones, --wide too ("tables show the new ones")."""
    text = DOC.read_text(encoding="utf-8").split("## Renamed fields", 1)[1]
    olds = {n for line in text.splitlines() if line.startswith("| `")
            for n in re.findall(r"`([^`]+)`", line.split("|")[1])}
    assert {"min_offset", "phy_offset", "begin_phy_offset", "size"} <= olds
    for args in (("offsets", OFFSETS_STORE), ("dump", "index", STORE, "--limit", "3"),
                 ("dump", "index", STORE, "--headers-only"), ("dump", "consumequeue", STORE, "--limit", "3")):
        r = invoke(*args, "--wide", columns=400)
        assert r.exit_code in (0, 3), r.stderr
        shown = {name for header in table_headers(r.stdout) for name in header}
        assert shown and not shown & olds, (args, shown & olds)
    r = invoke("offsets", OFFSETS_STORE, "--columns", "group,min_offset")
    assert table_headers(r.stdout) == [["group", "min_offset"]]


def test_offset_names_mean_one_thing_in_info():
    """Commit log offsets are bytes and queue offsets count messages: in info they differ
    in name, and the message counts agree with the consume queue units dumped."""
    info = json.loads(invoke("info", STORE, "--format", "json").stdout)
    units = json_rows("dump", "consumequeue", STORE, "--topic", "OrderTopic", "--queue", "0")
    q = next(x for x in info["consume_queues"] if (x["topic"], x["queue_id"]) == ("OrderTopic", 0))
    assert q["max_queue_offset"] == len(units) == units[-1]["queue_offset"] + 1
    assert info["commitlog"]["max_commit_log_offset"] > q["max_queue_offset"]
    assert all(u["commit_log_offset"] < info["commitlog"]["max_commit_log_offset"] for u in units)
