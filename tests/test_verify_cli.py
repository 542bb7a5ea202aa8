"""rmqtool verify through typer's CliRunner: options, exit codes, stdout and stderr apart."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import REPO, V4, V5, load_truth
from helpers import cli_runner
from rmqtool.cli.app import app
from rmqtool.findings import CONSEQUENCES, OPERATOR_ACTIONS, REGISTRY

CLEAN = V4 / "basic" / "store"
E1 = V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file"
B3 = V4 / "crash" / "b3-zeroed-last-3-messages"


def invoke(*args):
    runner = cli_runner()
    return runner.invoke(app, ["verify", *map(str, args)])


def rows(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_clean_store_exits_0_jsonl_rows_on_stdout():
    result = invoke(CLEAN, "--format", "jsonl", "--no-progress", "--jobs", "1")
    assert result.exit_code == 0, result.stderr
    found = rows(result)
    assert found and all(set(r) >= {"finding", "severity", "path", "offset", "message"} for r in found)
    assert {r["severity"] for r in found} <= {"info", "warning"}
    assert result.stderr == ""


def test_damage_exits_3_and_rows_carry_their_fields():
    truth = load_truth(E1 / "truth.json")
    result = invoke(E1 / "input" / "store", "-f", "jsonl", "--jobs", "2")
    assert result.exit_code == 3
    (crc,) = [r for r in rows(result) if r["finding"] == "bodyCrcMismatch"]
    assert crc["severity"] == "error" and crc["commit_log_offset"] == truth["mutation"]["messagePhysicalOffset"]
    assert {"topic", "queue_id", "queue_offset"} <= set(crc)
    assert "error" in result.stderr  # the closing count, on stderr only


def test_json_is_one_array_and_jobs_do_not_change_the_rows():
    one = invoke(B3 / "input" / "store", "--format", "json", "--jobs", "1")
    two = invoke(B3 / "input" / "store", "--format", "json", "--jobs", "3")
    assert one.exit_code == two.exit_code == 3
    assert json.loads(one.stdout) == json.loads(two.stdout)


def test_skip_and_severity_overrides():
    store = E1 / "input" / "store"
    # the damaged record and what the next start does about it (it cuts the log there)
    skipped = invoke(store, "-f", "jsonl", "--skip", "bodyCrcMismatch", "--skip", "commitLogEnd",
                     "--skip", "recoveryCutsCommitLog")
    assert skipped.exit_code == 0
    assert not {"bodyCrcMismatch", "commitLogEnd"} & {r["finding"] for r in rows(skipped)}
    lowered = invoke(store, "-f", "jsonl", "--severity", "bodyCrcMismatch=warning",
                     "--severity", "recoveryCutsCommitLog=warning")
    assert lowered.exit_code == 0
    assert [r["severity"] for r in rows(lowered) if r["finding"] == "bodyCrcMismatch"] == ["warning"]
    raised = invoke(CLEAN, "-f", "jsonl", "--severity", "commitLogEnd=error")
    assert raised.exit_code == 3


def test_unknown_id_or_level_is_a_usage_error():
    for args in (["--skip", "noSuchFinding"], ["--severity", "bodyCrcMismatch=fatal"], ["--only", "everything"]):
        result = invoke(CLEAN, *args)
        assert result.exit_code == 2 and result.stdout == ""
        # one line naming the command and where to look, as every command's usage errors
        assert result.stderr.startswith("rmqtool verify: error:") and result.stderr.count("\n") == 1
        assert result.stderr.rstrip().endswith("(try rmqtool verify --help)")


def test_only_reports_the_areas_asked_for():
    result = invoke(B3 / "input" / "store", "-f", "jsonl", "--only", "consumequeue")
    assert result.exit_code == 0  # the index errors are not asked for; the queues only have warnings
    assert {r["finding"] for r in rows(result)} == {"consumeQueueBeyondCommitLog"}
    result = invoke(B3 / "input" / "store", "-f", "jsonl", "--only", "index", "--only", "checkpoint")
    assert result.exit_code == 3
    assert {r["finding"] for r in rows(result)} >= {"indexEntryNoRecord", "abortFilePresent", "recoveryStartFile"}


def test_max_errors_stops_and_says_so():
    truth = load_truth(B3 / "truth.json")
    lost = truth["diffVsPreCrash"]["lostFromCommitLog"]
    assert len(lost) > 1
    result = invoke(B3 / "input" / "store", "-f", "jsonl", "--max-errors", "1")
    assert result.exit_code == 3
    assert [r["severity"] for r in rows(result)].count("error") == 1
    assert "--max-errors" in result.stderr


def test_summary_counts_by_id_on_stderr():
    result = invoke(B3 / "input" / "store", "-f", "jsonl", "--summary")
    found = rows(result)
    entries = sum(1 for r in found if r["finding"] == "indexEntryNoRecord")
    assert re.search(rf"indexEntryNoRecord[\s│]*error[\s│]*{entries}\b", result.stderr)
    assert "indexEntryNoRecord" not in result.stdout.replace('"finding":"indexEntryNoRecord"', "")


def test_progress_goes_to_stderr_only():
    result = invoke(CLEAN, "-f", "jsonl", "--progress")
    assert result.exit_code == 0
    assert all(line.startswith("{") for line in result.stdout.splitlines())


@pytest.mark.parametrize("path,why,code", [("no/such/store", "no such directory", 8),
                                           ("README.md", "not a store directory", 4)])
def test_a_store_that_cannot_be_checked_exits_8_or_4(tmp_path, path, why, code):
    """A missing path is 8, a file where the store belongs 4: the codes every command gives (issue 20)."""
    target = REPO / path if path == "README.md" else tmp_path / path
    result = invoke(target)
    assert result.exit_code == code
    assert result.stdout == "" and why in result.stderr and result.stderr.count("\n") == 1


def test_table_output_and_subprocess_smoke():
    result = subprocess.run([sys.executable, "-m", "rmqtool", "verify", str(V5 / "batchcq" / "store"), "-j", "2"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "commitLogEnd" in result.stdout and "Traceback" not in result.stderr


# --- the README documents every finding ------------------------------------------------------

def findings_table() -> str:
    """The README's findings table, made from the registry."""
    lines = ["| finding | default severity | default consequence | what it means | what to do |",
             "| --- | --- | --- | --- | --- |"]
    for finding_id, (severity, meaning) in REGISTRY.items():
        lines.append(f"| `{finding_id}` | {severity.value} | {CONSEQUENCES[finding_id].value} | {meaning} | "
                     f"{OPERATOR_ACTIONS[finding_id]} |")
    return "\n".join(lines)


def test_every_finding_has_an_action():
    assert set(OPERATOR_ACTIONS) == set(REGISTRY)


def test_readme_lists_every_finding_as_the_registry_says():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert findings_table() in readme, ("README's findings table is not the registry's; regenerate it with "
                                        "python -c 'import tests.test_verify_cli as t; print(t.findings_table())'")
