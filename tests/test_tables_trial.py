"""The default tables as an operator meets them at 80 and 120 columns (issue 24): findings
sorted errors first, floods grouped with a count and offset range, paths whole, messages
wrapped, --wide uncut; `findings ID`; segmentGap names the missing file; query --key says
when --max stops it; offsets shows the lag at 80; plans never break a file name; recover on
a live store says so; progress bars erased before a table; --topic/--queue completion."""
from __future__ import annotations

import collections
import io
import json
import re

import pytest

from conftest import FIXTURES, V4, load_truth
from helpers import cli_runner
from rmqtool.cli.app import app
from rmqtool.findings import CONSEQUENCES, OPERATOR_ACTIONS, REGISTRY
from rmqtool.report import progress
from rmqtool.report.finding_table import FindingTable, shape
from rmqtool.report.table import TextTable
from rmqtool.report.wrap import wrap

MISSING = FIXTURES / "crash-made" / "missing-middle-abnormal"
TIMEKEY = V4 / "timekey" / "store"
BASIC = V4 / "basic"
SEVERITY = {"error": 0, "warning": 1, "info": 2}
runner = cli_runner()


def _run(*args, width: int = 80, **kw):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": str(width)}, **kw)


def _rows(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _blocks(text: str) -> list[tuple[list[str], list[str]]]:
    """A findings table's rows: (first-line words, the indented lines under it)."""
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["severity", "finding"] and set(lines[1].replace(" ", "")) == {"-"}
    blocks = []
    for line in lines[2:]:
        if line.startswith(" "):
            blocks[-1][1].append(line)
        else:
            blocks.append((line.split(), []))
    return blocks


@pytest.fixture(scope="module")
def missing_middle():
    """verify of a store with a middle commit log file gone: JSON Lines and the table at 80."""
    store = MISSING / "input" / "store"
    jsonl, table = _run("verify", store, "-f", "jsonl", "-j", 1), _run("verify", store, "-j", 1)
    return store, _rows(jsonl.stdout), jsonl.exit_code, table


def test_a_flood_is_one_row_per_file_with_its_count_and_range_and_jsonl_keeps_each(missing_middle):
    store, rows, code, table = missing_middle
    assert table.exit_code == code == 3  # the exit code does not depend on the format
    groups = collections.defaultdict(list)
    for r in rows:
        groups[(r["finding"], r["path"], shape(r))].append(r)
    blocks = _blocks(table.stdout)
    assert len(blocks) < len(rows) and len(blocks) == len(groups)  # nothing info here: grouped per file
    assert sum(_count(under) for _, under in blocks) == len(rows)
    for words, under in blocks:
        severity, finding, consequence = words[:3]
        path = "".join(line.strip() for line in under[:_path_lines(under)])
        message = re.sub(COUNTED, "", " ".join(s.strip() for s in under[_path_lines(under):]))
        same = groups[(finding, path, shape({"message": message}))]
        assert same and same[0]["message"] == message  # whole, not cut
        assert len(same) == _count(under) and same[0]["severity"] == severity
        assert consequence == CONSEQUENCES[finding].value
        offsets = [r["offset"] for r in same if r["offset"] is not None]
        if offsets:
            low, high = min(offsets), max(offsets)
            assert words[3] == (str(low) if low == high else f"{low}..{high}")
    severities = [SEVERITY[words[0]] for words, _ in blocks]
    assert severities == sorted(severities)  # errors first, info last
    assert [r["severity"] for r in rows] != sorted((r["severity"] for r in rows), key=SEVERITY.get)  # jsonl: scan order
    assert max(map(len, table.stdout.splitlines())) <= 80


COUNTED = r" \[(\d+) findings like it; -f jsonl lists each\]$"


def _count(under: list[str]) -> int:
    """A row's count: said at the end of its message when more than one."""
    found = re.search(COUNTED, " ".join(s.strip() for s in under))
    return int(found.group(1)) if found else 1


def _path_lines(under: list[str]) -> int:
    """How many indented lines hold the path: it is broken only after a "/"."""
    n = 1
    while n < len(under) and under[n - 1].rstrip().endswith("/"):
        n += 1
    return n


def test_segment_gap_names_the_missing_file_in_its_message_and_advice(missing_middle):
    _store, rows, _code, table = missing_middle
    size = int(load_truth(MISSING / "truth.json")["sizes"][0])  # "the third commit log file deleted"
    (gap,) = [r for r in rows if r["finding"] == "segmentGap"]
    assert gap["message"].startswith(f"{2 * size:020d} missing") and f"{1 * size:020d}" in gap["message"]
    assert "restore it" in OPERATOR_ACTIONS["segmentGap"] and "names" in OPERATOR_ACTIONS["segmentGap"]
    assert f"{2 * size:020d} missing" in table.stdout  # the whole message, not cut


def test_info_floods_of_a_clean_store_are_one_line_at_120_columns():
    jsonl = _run("verify", TIMEKEY, "-f", "jsonl", "-j", 1)
    rows = _rows(jsonl.stdout)
    backwards = [r for r in rows if r["finding"] == "storeTimestampBackwards"]
    assert len({r["path"] for r in backwards}) > 1  # several files: still one line
    out = io.StringIO()
    table = FindingTable(out, 120)
    for r in rows:
        table.row(r)
    table.close()
    firsts = [(words, _count(under)) for words, under in _blocks(out.getvalue()) if words[1] == "storeTimestampBackwards"]
    assert firsts == [(["info", "storeTimestampBackwards", "none"], len(backwards))]
    assert max(map(len, out.getvalue().splitlines())) <= 120


def test_wide_prints_every_finding_and_every_text_uncut(missing_middle):
    store, rows, _code, _table = missing_middle
    wide = _run("verify", store, "--wide", "-j", 1)
    lines = wide.stdout.splitlines()
    assert len(lines) == len(rows) + 2
    for r in rows:
        assert r["path"] in wide.stdout and r["message"] in wide.stdout
    listing = _run("findings", "--wide").stdout
    assert all(action in listing for action in OPERATOR_ACTIONS.values())


def test_findings_id_shows_one_finding_whole_at_80_columns():
    one = _run("findings", "segmentGap")
    assert one.exit_code == 0
    text = " ".join(one.stdout.split())
    severity, meaning = REGISTRY["segmentGap"]
    assert text.startswith(f"segmentGap: {severity.value}, consequence {CONSEQUENCES['segmentGap'].value}")
    assert meaning in text and OPERATOR_ACTIONS["segmentGap"] in text
    assert max(map(len, one.stdout.splitlines())) <= 80
    assert json.loads(_run("findings", "segmentGap", "-f", "json").stdout)["action"] == OPERATOR_ACTIONS["segmentGap"]
    typo = _run("findings", "segmentGp")
    assert typo.exit_code == 2 and "segmentGap" in typo.stderr


def test_query_key_says_when_max_stops_it():
    messages = load_truth(BASIC / "truth.json")["truth"]["messages"]
    counts = collections.Counter(k for m in messages for k in (m.get("keys") or "").split())
    key, total = counts.most_common(1)[0]
    cut = _run("query", BASIC / "store", "--key", key, "-n", 5, "-f", "jsonl")
    assert len(_rows(cut.stdout)) == 5 and "5 shown; more exist" in cut.stderr
    whole = _run("query", BASIC / "store", "--key", key, "-n", total, "--no-index", "-f", "jsonl")
    assert len(_rows(whole.stdout)) == total and "shown" not in whole.stderr  # the scan saw them all


def test_offsets_shows_the_lag_at_80_columns():
    table = _run("offsets", FIXTURES / "config" / "out-of-range" / "store")
    header = table.stdout.splitlines()[0].split()
    assert "lag_messages" in header and "lag_ms" in header


def test_plans_never_break_a_file_name():
    size = int(load_truth(MISSING / "truth.json")["sizes"][0])
    plan = _run("recover", MISSING / "input" / "store", width=60)
    lines = plan.stdout.splitlines()
    assert plan.exit_code in (0, 3) and max(map(len, lines)) <= 60
    names = re.findall(r"\d{20}", plan.stdout)
    assert f"{1 * size:020d}" in names and all(len(n) == 20 for n in names)
    # what wraps a plan line: pieces after "/" only, nothing lost
    path = str(MISSING / "input" / "store" / "commitlog" / f"{size:020d}")
    pieces = wrap(f"delete {path} (segmentAfterEnd)", 30, " 1. ", "    ")
    assert "".join(p[4:] for p in pieces).replace(" ", "") == f"delete{path}(segmentAfterEnd)"
    assert all(len(p) <= 30 for p in pieces) and any(p.strip() == f"{size:020d}" for p in pieces)


def test_recover_on_a_live_store_says_it_is_live(tmp_path):
    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.store import Store

    store = Store.open(tmp_path / "store", writable=True, commitlog_size=32 * 1024, cq_size=400, index_slots=32,
                       index_entries=120)
    try:
        store.append(producer_message("LiveTopic", b"live", keys="k"))
        plan = _run("recover", tmp_path / "store")
    finally:
        store.close()
    assert plan.stdout.startswith("LIVE STORE: PID") and "--apply refuses" in plan.stdout  # the plan's header


def test_a_progress_bar_is_erased_before_a_table_starts():
    class Bar:
        stopped = False

        def stop(self):
            self.stopped = True

    p = progress.Progress.__new__(progress.Progress)
    p._bar, p.done = Bar(), 0
    bar = p._bar
    progress._LIVE.append(p)
    table = TextTable(io.StringIO(), "finding_id", width=80)
    table.row({"finding": "segmentGap", "severity": "error"})
    assert not bar.stopped  # still sampling: nothing printed yet
    table.close()
    assert bar.stopped and not progress._LIVE and p._bar is None
    p.close()  # a bar already erased closes quietly


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_topic_and_queue_complete_through_the_shell_protocol(shell):
    queues = {t: qs for t, qs in load_truth(BASIC / "truth.json")["truth"]["consumeQueues"].items()
              if any(q["entries"] for q in qs.values())}
    topic = sorted(queues)[0]

    def complete(*words: str) -> list[str]:
        line = " ".join(["rmqtool", *words])
        env = ({"_RMQTOOL_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(len(words))}
               if shell == "bash" else {"_RMQTOOL_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": line})
        out = runner.invoke(app, [], env=env, prog_name="rmqtool").stdout
        return re.findall(r"[\w%]+", out.replace("_arguments", "")) if shell == "zsh" else out.split()

    store = str(BASIC / "store")
    assert complete("dump", "consumequeue", store, "--topic", "") == sorted(queues)
    assert complete("query", store, "--topic", topic, "--queue", "") == [str(q) for q in sorted(map(int, queues[topic]))]
