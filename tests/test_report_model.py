"""rmqtool report's model (inspect/report_model.py) and page (report/html_page.py), without a
browser (tests/test_report_html.py opens the pages in one): the document's answers against the
fixture's truth and against the code that gives each answer elsewhere, the JSON and table
output, every datum escaped in the page, the page written whole, a QMQ store refused."""
from __future__ import annotations

import json
import os
import stat

import pytest

from conftest import FIXTURES, V4, load_truth
from helpers import REDISPATCHED, cli_runner, crash_store_with_offsets, expand_store
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode
from rmqtool.findings import (CHECKPOINT_WINDOW, CONSUMER_OFFSET_ABOVE_MAX, CONSUMER_OFFSET_BELOW_MIN,
                              CONSUMER_OFFSET_FOR_MISSING_QUEUE, OPERATOR_ACTIONS)
from rmqtool.report.html_page import render_page, write_page
from rmqtool.store.consumer_offsets import FOUND
import rmqtool.families.rocketmq, rmqtool.inspect.report_model, rmqtool.verify.run  # noqa: F401 - before `calls` wraps
from test_store_view import calls  # noqa: F401 - the counters of store/view.py's one-of-each

NOW = "1795315400000"
E2 = V4 / "crash" / "e2-corrupt-body-in-first-commitlog-file"  # abort; one body byte flipped in file 0
TRUTH = load_truth(E2 / "truth.json")
STORE = E2 / "input" / "store"


@pytest.fixture(scope="module")
def e2():
    """(exit code, document) of ``rmqtool report STORE -f json``, run once."""
    r = cli_runner().invoke(app, ["report", str(STORE), "--now", NOW, "-f", "json"])
    return r.exit_code, json.loads(r.stdout)


def test_the_damage_lies_where_the_truth_flipped_a_byte(e2):
    code, doc = e2
    assert code == ExitCode.CORRUPT
    mutation = TRUTH["mutation"]
    (d,) = doc["damaged_ranges"]
    assert d["file"] == mutation["file"].split("/")[-1] and d["commit_log_offset"] == mutation["messagePhysicalOffset"]
    assert d["file_position"] <= mutation["flippedByteAtFilePosition"] < d["file_position"] + d["bytes"]
    assert d["end_offset"] == d["commit_log_offset"] + d["bytes"]
    first = doc["segments"][0]
    assert first["damaged"] == 1 and sum(s["damaged"] for s in doc["segments"]) == 1


def test_the_next_start_is_the_recovery_simulations(e2):
    _code, doc = e2
    store = doc["store"]
    # the real engine's recovery kept every record: the damage lies before its start file
    assert store["recovered_end"] == store["written_end"] == TRUTH["truth"]["commitlog"]["maxPhyOffset"]
    assert store["bytes_dropped"] == 0 and not any("cut_at" in s for s in doc["segments"])
    assert store["recovery"] == "abnormal" and not store["clean_shutdown"]
    starts = [s["file"] for s in doc["segments"] if s["recovery_start"]]
    assert starts == [store["start_file"]]
    assert int(store["start_file"]) > doc["damaged_ranges"][0]["commit_log_offset"]  # the walk never reads it


def test_the_unflushed_window_is_the_checkpoints(e2):
    """check's unflushed window starts where verify's checkpointWindow (physicMsgTimestamp) says."""
    _code, doc = e2
    store = doc["store"]
    window = next(f for f in doc["findings"] if f["finding"] == CHECKPOINT_WINDOW and "physicMsgTimestamp" in f["message"])
    assert store["unflushed_from"] == window["commit_log_offset"]
    assert store["unflushed_bytes"] == store["written_end"] - store["unflushed_from"] > 0
    last = [s for s in doc["segments"] if "unflushed_from" in s]
    assert [s["unflushed_from"] for s in last] == [store["unflushed_from"]]


def test_findings_carry_what_to_do(e2):
    _code, doc = e2
    assert doc["findings"] and all(f["action"] == OPERATOR_ACTIONS[f["finding"]] for f in doc["findings"])
    assert doc["store"]["errors"] == sum(f["severity"] == "error" for f in doc["findings"])


def test_the_table_shows_the_same_sections(e2):
    _code, doc = e2
    r = cli_runner().invoke(app, ["report", str(STORE), "--now", NOW], env={"COLUMNS": "120"})
    assert r.exit_code == ExitCode.CORRUPT
    for section in ("segments", "damaged_ranges", "consume_queues", "index_files", "findings"):
        assert f"{section} (" in r.stdout, section
    assert str(doc["store"]["written_end"]) in r.stdout


def test_every_datum_is_escaped(e2):
    _code, doc = e2
    hostile = "<script>alert(1)</script>&\"'"
    doc = json.loads(json.dumps(doc))
    doc["store"]["path"] = "/data/" + hostile
    doc["consume_queues"][0]["topic"] = hostile
    doc["findings"][0]["message"] = hostile
    doc["damaged_ranges"][0]["finding"] = hostile
    page = render_page(doc)
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;&#x27;" in page


def test_the_page_is_written_whole(e2, tmp_path):
    _code, doc = e2
    target = write_page(doc, tmp_path / "out.html")
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["out.html"]  # no temporary file left
    r = cli_runner().invoke(app, ["report", str(STORE), "--html", str(tmp_path / "no-dir" / "x.html")])
    assert r.exit_code == ExitCode.OPERATIONAL and len(r.stderr.strip().splitlines()) == 1


def test_a_qmq_store_has_its_message_log_cut_where_the_truth_flipped_a_byte(tmp_path):
    """QMQ: a payload byte flipped 45% into the log (truth: mutation); the message log strip,
    the damaged record at the truth's offset, the next start's cut there, no RocketMQ section."""
    variant = FIXTURES / "qmq" / "crash" / "d-flipped-payload-byte-mid-log"
    mutation = load_truth(variant / "truth.json")["mutation"]
    store = expand_store(variant / "input", tmp_path / "store")
    r = cli_runner().invoke(app, ["report", str(store), "--now", NOW, "-f", "json"])
    assert r.exit_code == ExitCode.CORRUPT, r.stderr
    doc = json.loads(r.stdout)
    record = mutation["record"]
    assert doc["store"]["family"] == "qmq" and set(doc) == {"store", "segments", "damaged_ranges", "consumer_logs",
                                                            "group_progress", "findings"}
    (d,) = doc["damaged_ranges"]
    assert d["file"] == mutation["file"].split("/")[-1] and d["commit_log_offset"] == record["offset"]
    assert doc["store"]["recovered_end"] == record["offset"] < doc["store"]["written_end"]
    (seg,) = doc["segments"]
    assert seg["cut_at"] == record["offset"] and seg["damaged"] == 1
    page = render_page(doc)
    assert "<h2>Message log</h2>" in page and 'id="queues"' not in page and 'class="strip zoom"' in page
    # the checkpoint the start loads lies past the cut: the replay begins at the cut, and replays nothing
    checkpoint = load_truth(variant / "truth.json")["checkpointsAfterStart"]["messageCheckpointOffset"]
    assert checkpoint > record["offset"]
    assert doc["store"]["start_reason"].startswith(f"the message log replay starts at {record['offset']}, its end")


def test_a_qmq_store_without_a_message_checkpoint_replays_from_the_first_offset(tmp_path):
    variant = FIXTURES / "qmq" / "crash" / "g-lost-message-checkpoints"
    assert "every message checkpoint deleted" in load_truth(variant / "truth.json")["mutation"]["what"]
    store = expand_store(variant / "input", tmp_path / "store")
    doc = json.loads(cli_runner().invoke(app, ["report", str(store), "--now", NOW, "-f", "json"]).stdout)
    first = min(int(p.name) for p in (store / "messagelog").iterdir() if p.name.isdigit())
    assert doc["store"]["start_reason"] == f"no message checkpoint loads: the message log replay starts at its " \
                                           f"first offset {first}"


def test_a_live_store_is_read_to_its_written_end_and_its_start_not_predicted(tmp_path):
    """A store a writer holds (this process): no next start, no cut, no damage in its moving
    tail; the page and stderr say it is live."""
    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.store import Store
    from rmqtool.families import tools_at

    root = tmp_path / "store"
    with Store.open(root, writable=True, commitlog_size=32 * 1024, cq_size=400, index_slots=32,
                    index_entries=120) as store:
        results = [store.append(producer_message("LiveTopic", b"m%03d" % i * 20, keys=f"k{i}")) for i in range(30)]
        tools = tools_at(root)
        made = tools.report(tools.open_view(root, purpose="report"), now=int(NOW), html=tmp_path / "live.html")
    end = results[-1].wrote_offset + results[-1].wrote_bytes
    store_section = made.document["store"]
    assert store_section["live"] and store_section["locked_by_pid"] == os.getpid()
    assert store_section["written_end"] == end and store_section["recovered_end"] is None
    assert not made.document["damaged_ranges"] and not any("cut_at" in s for s in made.document["segments"])
    assert [(q["topic"], q["max_queue_offset"]) for q in made.document["consume_queues"]] == [("LiveTopic", 30)]
    assert made.notices and "is live" in made.notices[0]
    assert "A running broker" in (tmp_path / "live.html").read_text()


def test_a_missing_middle_file_is_a_strip_of_its_own_and_not_damage():
    """The third commit log file deleted (truth: mutation): one row names it, missing; the
    whole records after it (their queue offsets skip) are no damaged range."""
    shape = FIXTURES / "crash-made" / "missing-middle-abnormal"
    assert "third commit log file deleted" in load_truth(shape / "truth.json")["mutation"]
    r = cli_runner().invoke(app, ["report", str(shape / "input" / "store"), "--now", NOW, "-f", "json"])
    doc = json.loads(r.stdout)
    rows = doc["segments"]
    size = doc["store"]["mapped_file_size"]
    assert [s.get("missing_files", 0) for s in rows] == [0, 0, 1, 0, 0, 0]
    assert rows[2]["base_offset"] == 2 * size and rows[2]["file"] == f"{2 * size:020d}"
    assert [s["base_offset"] for s in rows] == [i * size for i in range(len(rows))]
    assert not doc["damaged_ranges"]
    page = render_page(doc)
    assert page.count('class="segment missing-file"') == 1 and "5 files, each strip" in page


def test_a_report_opens_the_store_once_and_simulates_its_start_once(calls):
    """One view, one commit log listing, one simulation shared by verify and the model; the
    consume queues opened once a cut (verify's, the next start's, check's uncut probe)."""
    store = FIXTURES / "crash-made" / "torn-middle-normal" / "input" / "store"
    r = cli_runner().invoke(app, ["report", str(store), "--now", NOW, "-f", "json"])
    assert r.exit_code == ExitCode.CORRUPT, r.stderr
    assert calls["StoreView"] == 1 and calls["CommitLog"] == 1 and calls["commit log listed"] == 1
    assert calls["simulate"] == 1 and calls["require_store"] == 1
    assert calls["written_end"] <= 1 and calls["last_file_end"] <= 1
    queues = {k: v for k, v in calls.items() if k.startswith("queue ")}
    assert queues and max(queues.values()) <= calls["open_consume_queues"] <= 3


def test_a_qmq_store_whose_start_refuses_still_shows_where_its_log_is_written_to(tmp_path):
    """QMQ's engine refuses to start this store before it reads the log (a stray file in
    messagelog/: summary.json). The log's bytes are all there: the report gives their written
    end (the engine's own for the same log, a-as-is) in its store section and file strip, as
    info does; it said null and a file written to 0."""
    summary = {v["variant"]: v for v in load_truth(FIXTURES / "qmq" / "crash" / "summary.json")}
    assert summary["b-stray-file-in-messagelog"]["started"] is False
    end = summary["a-as-is"]["messageLogEnd"][0]
    store = expand_store(FIXTURES / "qmq" / "crash" / "b-stray-file-in-messagelog" / "input", tmp_path / "store")
    doc = json.loads(cli_runner().invoke(app, ["report", str(store), "--now", NOW, "-f", "json"]).stdout)
    info = json.loads(cli_runner().invoke(app, ["info", str(store), "-f", "json"]).stdout)
    assert doc["store"]["loadable"] is False and doc["store"]["recovered_end"] is None
    assert doc["store"]["written_end"] == info["message_log"]["written_end"] == end
    assert [s["written_to"] for s in doc["segments"]] == [min(max(end, s["base_offset"]), s["end_offset"])
                                                          for s in doc["segments"]]


def test_a_store_without_commit_log_files_shows_the_start_recover_plans(tmp_path):
    """No commit log file: the broker's start destroys every consume queue, as recover plans;
    the report showed no next start and every queue whole."""
    from helpers import writable_copy
    store = writable_copy(V4 / "basic" / "store", tmp_path / "store")
    for f in (store / "commitlog").iterdir():
        f.unlink()
    doc = json.loads(cli_runner().invoke(app, ["report", str(store), "--now", NOW, "-f", "json"]).stdout)
    plan = json.loads(cli_runner().invoke(app, ["recover", str(store), "-f", "json"]).stdout)
    s = doc["store"]
    assert (s["recovery"], s["start_reason"], s["recovered_end"]) == (plan["mode"], plan["start_reason"],
                                                                      plan["commit_log"]["recovered_end"])
    assert doc["consume_queues"] and all(q["messages"] == 0 for q in doc["consume_queues"])



@pytest.mark.parametrize("scenario, queue_id", REDISPATCHED)
def test_queues_and_lag_are_as_the_next_start_leaves_them(tmp_path, scenario, queue_id):
    """A committed offset past what the queue's files hold but inside what the engine's start
    dispatches back: the report's queues are recover's and the truth's (the files cut at the
    recovered end showed c2's queue ending at 300 and c1's not at all), the lag and the next
    pull are the engine's, and no finding says the offset is past the queue or its queue gone."""
    truth = load_truth(V4 / "crash" / scenario / "truth.json")["truth"]
    queues = truth["consumeQueues"]["CrashTopic"]
    q = queues[str(queue_id)]
    low, high = q["apiMinOffsetInQueue"], q["apiMaxOffsetInQueue"]
    committed = high - 5
    store = crash_store_with_offsets(tmp_path, scenario, queue_id, committed)
    doc = json.loads(cli_runner().invoke(app, ["report", str(store), "--now", NOW, "-f", "json"]).stdout)
    plan = json.loads(cli_runner().invoke(app, ["recover", str(store), "-f", "json"]).stdout)
    shown = {f"{r['topic']}/{r['queue_id']}": (r["min_queue_offset"], r["max_queue_offset"])
             for r in doc["consume_queues"]}
    assert shown == {name: (r["min_offset"], r["max_offset"]) for name, r in plan["queues"].items()}
    engine = {f"{t}/{i}": (v["apiMinOffsetInQueue"], v["apiMaxOffsetInQueue"])
              for t, qs in truth["consumeQueues"].items() for i, v in qs.items()}
    assert all(shown[name] == engine[name] for name in shown)
    assert shown[f"CrashTopic/{queue_id}"] == (low, high)
    (row,) = doc["consumer_offsets"]
    at = {e[0]: e[1] for e in q["entries"]}
    stored = {m["physicalOffset"]: m["storeTimestamp"] for m in truth["messages"]}
    assert (row["min_queue_offset"], row["max_queue_offset"], row["lag_messages"]) == (low, high, high - committed)
    assert [committed, at[committed]] in q["getMessageReadable"] and row["pull_status"] == FOUND
    assert (row["next_store_timestamp"], row["newest_store_timestamp"]) == (stored[at[committed]], stored[at[high - 1]])
    assert row["lag_ms"] == stored[at[high - 1]] - stored[at[committed]]
    offset_findings = {CONSUMER_OFFSET_ABOVE_MAX, CONSUMER_OFFSET_BELOW_MIN, CONSUMER_OFFSET_FOR_MISSING_QUEUE}
    assert not [f for f in doc["findings"] if f["finding"] in offset_findings]


def test_a_qmq_reports_consumer_logs_and_groups_are_qmqs_own(tmp_path):
    """QMQ basic: each subject's consumer log range and each group's progress as QMQ's read-back
    after its start says, drawn a row a subject: a lag bar for each group that lags, a mark
    for each group's max pulled sequence (not a broadcast group's: its consumers each have theirs)."""
    from test_report_html import Dom
    truth = load_truth(FIXTURES / "qmq" / "basic" / "truth.json")["readBack"]
    store = expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "store")
    r = cli_runner().invoke(app, ["report", str(store), "--now", NOW, "-f", "json"])
    doc = json.loads(r.stdout)
    assert {c["subject"]: (c["first_sequence"], c["next_sequence"]) for c in doc["consumer_logs"]} == \
        {s: (log["minSequence"], log["maxSequence"]) for s, log in truth["consumerLogs"].items()}
    assert [(g["subject"], g["group"], g["pull"]) for g in doc["group_progress"]] == \
        [(p["subject"], p["group"], p["pull"]) for p in truth["consumerProgressAfterStart"]]
    dom = Dom(render_page(doc))
    assert {a["data-subject"] for _t, a, _x in dom.having("tr", **{"class": "consumer-log"})} == \
        set(truth["consumerLogs"])
    plain = [p for p in truth["consumerProgressAfterStart"] if not p["broadcast"]]
    lagging = [p for p in plain if truth["consumerLogs"][p["subject"]]["maxSequence"] - 1 > p["pull"]]
    assert lagging and len(dom.having("rect", **{"class": "lag"})) == len(lagging)
    assert len(dom.having("line", **{"class": "consumed"})) == len(plain)


def test_a_qmq_group_whose_subject_has_no_consumer_log_is_drawn_too(tmp_path):
    """e (a subject's only consumer log file deleted): its groups' progress is kept; the page
    names the subject with no consumer log and its groups, as the JSON has them."""
    from test_report_html import Dom
    variant = FIXTURES / "qmq" / "crash" / "e-deleted-consumerlog-file"
    gone = load_truth(variant / "truth.json")["mutation"]["path"].split("/")[1]
    store = expand_store(variant / "input", tmp_path / "store")
    doc = json.loads(cli_runner().invoke(app, ["report", str(store), "--now", NOW, "-f", "json"]).stdout)
    assert gone not in {c["subject"] for c in doc["consumer_logs"]}
    mine = [g for g in doc["group_progress"] if g["subject"] == gone]
    assert mine
    dom = Dom(render_page(doc))
    (row,) = [a for _t, a, _x in dom.having("tr", **{"class": "consumer-log"}) if a["data-subject"] == gone]
    page = render_page(doc)
    assert all(f'<span class="mono">{g["group"]}</span>' in page for g in mine)
    # no consumer log, no lag to count: the group's line names none (it said "lag " and nothing)
    for g in mine:
        assert g["lag_messages"] is None and f'pulled up to {g["pull"]}</td>' in page, g
    assert ", lag </td>" not in page and "lag None" not in page
