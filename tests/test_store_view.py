"""The store opened once (store/view.py) and the store families' seam (store/family.py).

One command run builds one StoreView: the path is checked once, the commit log discovered
once, its end found once, every consume queue opened once, the broker's next start simulated
once. The counts below wrap the one function of each and count the calls a run makes from
outside recovery/'s simulation (which models the broker's own load of the files).
"""
from __future__ import annotations

import collections
import importlib
import json
import pathlib
import sys

import pytest

from conftest import FIXTURES, V4, load_truth
from helpers import cli_runner
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode
from rmqtool.store import commitlog_end, consumequeue, detect, segments
from rmqtool.store.family import QMQ, ROCKETMQ, UnsupportedFamily, detect_family
from rmqtool.store.view import StoreView, open_store

# the modules a command imports lazily, imported now so that the counters reach their names
for _lazy in ("rmqtool.inspect.inventory", "rmqtool.recovery.plan", "rmqtool.verify.run", "rmqtool.inspect.commitlog_dumps",
              "rmqtool.inspect.dump_sources", "rmqtool.engine.redispatch", "rmqtool.engine.redispatch_apply",
              "rmqtool.engine.salvage_store", "rmqtool.recovery.salvage", "rmqtool.spark.export"):
    importlib.import_module(_lazy)

BASIC = V4 / "basic"
CONSUMERS = FIXTURES / "config" / "consumers" / "store"  # committed offsets: verify's config check reads them
TORN = FIXTURES / "crash-made" / "torn-middle-normal" / "input" / "store"  # damage: the next start is simulated


class Calls(collections.Counter):
    """Calls of the wrapped functions, from outside recovery/ (the simulation's own load)."""


@pytest.fixture
def calls(monkeypatch) -> Calls:
    counted = Calls()

    def outside_recovery() -> bool:
        frame = sys._getframe(2)
        return f"{pathlib.Path('rmqtool', 'recovery')}" not in frame.f_code.co_filename

    def wrap(module, name: str) -> None:
        original = getattr(module, name)

        def counting(*args, **kwargs):
            if outside_recovery():
                counted[name] += 1
            return original(*args, **kwargs)

        for mod in list(sys.modules.values()):  # every module that imported it by name
            if getattr(mod, "__name__", "").startswith("rmqtool") and getattr(mod, name, None) is original:
                monkeypatch.setattr(mod, name, counting)

    for module, name in ((detect, "require_store"), (detect, "require_path"),
                         (commitlog_end, "last_file_end"), (commitlog_end, "written_end"),
                         (consumequeue, "open_consume_queues")):
        wrap(module, name)

    original_discover = segments.discover

    def listing(directory, *args, **kwargs):  # every listing of a commit log, recovery/'s too
        if pathlib.Path(directory).name == "commitlog":
            counted["commit log listed"] += 1
        return original_discover(directory, *args, **kwargs)
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("rmqtool") and getattr(mod, "discover", None) is original_discover:
            monkeypatch.setattr(mod, "discover", listing)

    def count_init(cls, key):
        original = cls.__init__

        def init(self, *args, **kwargs):
            if outside_recovery():
                counted[key(self, *args)] += 1
            original(self, *args, **kwargs)
        monkeypatch.setattr(cls, "__init__", init)

    count_init(StoreView, lambda self, *a: "StoreView")
    count_init(commitlog_end.CommitLog, lambda self, *a: "CommitLog")
    count_init(consumequeue._UnitQueue, lambda self, directory, *a: f"queue {pathlib.Path(directory).name}"
               f"@{pathlib.Path(directory).parent.name}")
    from rmqtool.recovery import outcome
    original_simulate = outcome.simulate

    def simulate(*args, **kwargs):
        if outside_recovery():
            counted["simulate"] += 1
        return original_simulate(*args, **kwargs)
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("rmqtool") and getattr(mod, "simulate", None) is original_simulate:
            monkeypatch.setattr(mod, "simulate", simulate)
    return counted


def _rmqtool(*args):
    return cli_runner().invoke(app, [str(a) for a in args])


def _queue_dirs(root: pathlib.Path) -> int:
    return sum(1 for d in (root / "consumequeue").glob("*/*") if d.is_dir())


@pytest.mark.parametrize("store", [CONSUMERS, TORN], ids=["committed-offsets", "torn-middle"])
def test_one_verify_run_opens_the_store_once(calls, store):
    result = _rmqtool("verify", store, "-f", "jsonl")
    assert result.exit_code in (0, 3), result.stderr
    assert calls["StoreView"] == 1 and calls["CommitLog"] == 1
    assert calls["require_store"] + calls["require_path"] <= 1  # verify checks its root itself
    queues = {k: v for k, v in calls.items() if k.startswith("queue ")}
    assert len(queues) == _queue_dirs(store) and set(queues.values()) == {1}  # each consume queue opened once
    assert calls["open_consume_queues"] == 1
    # the written end comes from verify's bands; nothing outside the simulation walks the end again
    assert calls["written_end"] == 0 and calls["last_file_end"] <= 1
    assert calls["simulate"] <= 1


def test_the_next_start_is_simulated_once_through_the_view(calls):
    result = _rmqtool("verify", TORN, "-f", "jsonl")
    assert result.exit_code == 3
    assert calls["simulate"] == 1
    assert any(json.loads(line)["finding"] == "bodyCrcMismatch" for line in result.stdout.splitlines())


@pytest.mark.parametrize("mode", ["--offset", "--key", "--queue-offset", "--time"])
def test_one_query_checks_its_path_once(calls, mode):
    m = next(m for m in load_truth(BASIC / "truth.json")["truth"]["messages"] if m["keys"])
    args = {"--offset": ["--offset", m["physicalOffset"]], "--key": ["--key", m["keys"].split()[0], "-t", m["topic"]],
            "--queue-offset": ["-t", m["topic"], "-q", m["queueId"], "--queue-offset", m["queueOffset"]],
            "--time": ["-t", m["topic"], "-q", m["queueId"], "--time", m["storeTimestamp"], "--exact"]}[mode]
    result = _rmqtool("query", BASIC / "store", *args, "-f", "jsonl")
    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    if mode == "--time":
        assert rows[0]["queue_offset"] <= m["queueOffset"]
    else:
        assert m["physicalOffset"] in [r["commit_log_offset"] for r in rows]
    assert calls["require_store"] == 1 and calls["StoreView"] == 1 and calls["CommitLog"] <= 1


def test_one_info_run_finds_each_end_once(calls):
    truth = load_truth(BASIC / "truth.json")["truth"]["commitlog"]
    result = _rmqtool("info", BASIC / "store", "-f", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["commitlog"]["written_end"] == truth["maxPhyOffset"]
    assert calls["StoreView"] == 1 and calls["CommitLog"] == 1 and calls["require_store"] == 1
    assert calls["last_file_end"] == 1 and calls["written_end"] == 1
    assert calls["open_consume_queues"] == 1


def test_offsets_opens_the_store_once(calls):
    result = _rmqtool("offsets", CONSUMERS, "-f", "jsonl")
    assert result.exit_code in (0, 3), result.stderr
    assert calls["StoreView"] == 1 and calls["require_store"] == 1 and calls["open_consume_queues"] == 1


def _queues_opened(calls: Calls) -> dict:
    return {k: v for k, v in calls.items() if k.startswith("queue ")}


def _opened_once(calls: Calls) -> None:
    """One view, one commit log (listed once, recovery/'s simulation included), each queue
    opened at most once."""
    assert calls["StoreView"] == 1, calls
    assert calls["CommitLog"] <= 1 and calls["commit log listed"] <= 1, calls
    assert set(_queues_opened(calls).values()) <= {1}, calls


TORN_TRUTH = "4.9.8"  # torn-middle-normal shows no version: 4.9's rules are the ones shown (its truth: both engines)


def test_a_served_only_dump_opens_the_store_once(calls):
    """dump commitlog --served-only: the listing, the live check and the simulation of the next
    start all read one view; the rows are what the broker serves after its recovery."""
    engine = load_truth(TORN.parent.parent / "truth.json")["engines"][TORN_TRUTH]
    result = _rmqtool("dump", "commitlog", TORN, "--served-only", "-f", "jsonl")
    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    messages = [r for r in rows if r["record"] == "message"]
    assert len(messages) == engine["messageCount"]
    assert max(r["commit_log_offset"] + r["store_size"] for r in messages) == engine["maxPhyOffsetAfterLoad"]
    _opened_once(calls)
    assert calls["commit log listed"] == 1 and calls["simulate"] <= 1


@pytest.mark.parametrize("kind", ["consumequeue", "index", "checkpoint"])
def test_a_dump_of_a_store_opens_it_once(calls, kind):
    truth = load_truth(BASIC / "truth.json")["truth"]
    result = _rmqtool("dump", kind, BASIC / "store", "-f", "jsonl" if kind != "checkpoint" else "json")
    assert result.exit_code == 0, result.stderr
    assert calls["StoreView"] == 1 and calls["require_store"] <= 1
    assert calls["commit log listed"] == 0  # none of these reads the commit log
    if kind == "consumequeue":
        rows = [json.loads(line) for line in result.stdout.splitlines()]
        assert sum(1 for r in rows if r["valid"] and not r["is_fill"]) == len(truth["messages"])
        queues = _queues_opened(calls)
        assert len(queues) == _queue_dirs(BASIC / "store") and set(queues.values()) == {1}
        assert calls["open_consume_queues"] == 1


def test_a_redispatch_plan_opens_the_store_once(calls):
    """The settled-end check (a recovery plan and its simulation), the build, the sizes and the
    compare read one view: the commit log listed once, its end found once."""
    truth = load_truth(BASIC / "truth.json")["truth"]
    result = _rmqtool("redispatch", BASIC / "store", "-f", "json")
    assert result.exit_code == 0, result.stderr  # the rebuilt files equal the store's
    doc = json.loads(result.stdout)
    assert doc["records_dispatched"] == len(truth["messages"]) and doc["to_offset"] == truth["commitlog"]["maxPhyOffset"]
    assert doc["counts"]["same"] == len(doc["changes"])
    _opened_once(calls)
    assert calls["commit log listed"] == 1 and calls["require_store"] == 1 and calls["last_file_end"] <= 1
    assert calls["simulate"] <= 1  # the plan's own, inside recovery/


def test_a_salvage_opens_the_store_once(calls):
    """salvage's simulation (where recovery cuts), its scan and the queues it knows offsets from
    read one view."""
    engine = load_truth(TORN.parent.parent / "truth.json")["engines"][TORN_TRUTH]
    result = _rmqtool("salvage", TORN, "--out", "-", "-f", "json")
    report = json.loads(result.stderr)
    assert report["recovered_end"] == engine["maxPhyOffsetAfterLoad"]
    assert report["messages_kept"] - report["kept_past_recovered_end"] == engine["messageCount"]
    assert len(result.stdout.splitlines()) == report["messages_kept"]
    _opened_once(calls)
    assert calls["commit log listed"] == 1 and calls["simulate"] == 1
    assert len(_queues_opened(calls)) == _queue_dirs(TORN)


def test_a_spark_export_opens_each_store_once(calls, tmp_path):
    """The driver opens each store once and plans its ranges from that view; an executor's
    range task lists nothing (its segment comes planned); the queue task opens its store once.
    The tasks run here as an executor runs them (no Spark session: the counts are the point)."""
    import pyarrow.parquet as pq

    from rmqtool.spark.export import QueuesTask, plan_tasks, run_task
    from rmqtool.spark.sources import opened
    torn = load_truth(TORN.parent.parent / "truth.json")
    queues_before = load_truth(FIXTURES / pathlib.Path(torn["base"]).parent.parent / "truth.json")["truth"]["consumeQueues"]
    specs, views, _bad = opened([f"torn={TORN}"], None)
    tasks = plan_tasks(specs, 1 << 16, views)
    assert calls["StoreView"] == 1 and calls["commit log listed"] == 1 and len(tasks) == len(views["torn"].segments)
    out = str(tmp_path / "export")
    summaries = [run_task(t, out) for t in tasks]
    assert calls["StoreView"] == 1 and calls["commit log listed"] == 1  # no range task opened or listed anything
    queues = run_task(QueuesTask(specs[0]), out)
    assert calls["StoreView"] == 2 and calls["commit log listed"] == 2 and calls["CommitLog"] == 2
    assert set(_queues_opened(calls).values()) == {1} and len(_queues_opened(calls)) == _queue_dirs(TORN)
    # the queues as they are on disk (the damage is a flipped body byte: no unit is cut)
    assert queues.messages == sum(q["maxOffset"] - q["minOffset"] for t in queues_before.values() for q in t.values())
    assert sum(s.messages for s in summaries) == pq.read_table(tmp_path / "export" / "messages").num_rows > 0


def test_a_recover_plan_lists_the_commit_log_once(calls):
    """The plan, its simulation (the version detection and each run), the sizes and the sizes
    nothing shows read one listing of the commit log."""
    engine = load_truth(TORN.parent.parent / "truth.json")["engines"][TORN_TRUTH]
    result = _rmqtool("recover", TORN, "-f", "json")
    assert result.exit_code == ExitCode.CORRUPT, result.stderr  # the start cuts the log: damage found
    doc = json.loads(result.stdout)
    assert doc["commit_log"]["recovered_end"] == engine["maxPhyOffsetAfterLoad"]
    _opened_once(calls)
    assert calls["commit log listed"] == 1


# --- the view itself ---------------------------------------------------------------------------

def test_the_view_answers_from_the_files_and_never_changes():
    truth = load_truth(BASIC / "truth.json")["truth"]["commitlog"]
    view = open_store(BASIC / "store")
    assert view.family is ROCKETMQ and view.live is None and view.unfinished is None
    assert view.commit_log_end.end == view.written_end == truth["maxPhyOffset"]
    assert view.segments[0].base_offset == truth["minPhyOffset"]
    assert view.consume_queues(view.written_end) is view.consume_queues(view.written_end)
    assert view.recovered_end is None  # no simulation handed in: not known, never guessed
    with pytest.raises(AttributeError):
        view.root = pathlib.Path("/elsewhere")


def test_the_simulation_handed_in_runs_once():
    from rmqtool.recovery.outcome import Settings, simulate
    truth = load_truth(BASIC / "truth.json")["truth"]["commitlog"]
    runs = []

    def once(view):
        runs.append(view)
        return simulate(view.root, Settings(), list_lost=False)
    view = StoreView(BASIC / "store", simulate=once)
    assert view.recovered_end == view.recovered_end == truth["maxPhyOffset"]
    assert runs == [view]


def test_plan_recovery_takes_the_view():
    from rmqtool.recovery.plan import plan_recovery
    view = open_store(BASIC / "store")
    assert plan_recovery(view).to_json() == plan_recovery(view.root).to_json()


# --- store families ----------------------------------------------------------------------------

def _qmq_store(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "qmq"
    for d in QMQ.marker_dirs:
        (root / d).mkdir(parents=True)
    (root / "messagelog" / f"{0:020d}").write_bytes(b"\0" * 64)
    return root


def test_detection_tells_the_families_apart(tmp_path):
    assert detect_family(BASIC / "store") is ROCKETMQ
    assert detect_family(_qmq_store(tmp_path)) is QMQ
    assert detect_family(tmp_path / "nothing") is None
    with pytest.raises(UnsupportedFamily):
        open_store(_qmq_store(tmp_path / "again"))


@pytest.mark.parametrize("command", [("offsets", "reset", "-g", "G", "-t", "T", "--to-earliest"), ("dump", "commitlog"), ("dump", "consumequeue"), ("dump", "index"),
                                     ("dump", "cqext"), ("dump", "dledger"),
                                     ("redispatch",), ("append", "-t", "T", "--body", "b", "--create")])
def test_a_qmq_store_is_named_and_refused_in_one_line_by_a_rocketmq_command(tmp_path, command):
    """A command that reads RocketMQ stores only names the family and the commands that read it."""
    root = _qmq_store(tmp_path)
    result = _rmqtool(*command, root)
    assert result.exit_code == ExitCode.BAD_INPUT, (result.stdout, result.stderr)
    assert result.stdout == "" and "a QMQ store: this command reads RocketMQ stores" in result.stderr
    assert "verify" in result.stderr and "recover" in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


# --- a family's tools: what the commands call ------------------------------------------------

@pytest.mark.parametrize("fixture", [BASIC, FIXTURES / "rocketmq-5.3.3" / "v2-and-crc"], ids=["4.9.8", "5.3.3"])
def test_the_rocketmq_family_brings_its_semantics(fixture):
    from rmqtool.families import tools_of
    from rmqtool.recovery.commitlog_walk import V4, V5
    version = load_truth(fixture / "truth.json")["rocketmqVersion"]  # V4_9_8 or V5_3_3
    view = open_store(fixture / "store")
    tools = tools_of(view)
    assert tools.family is ROCKETMQ and "commitlog" in tools.dump_kinds
    found = tools.semantics(view).semantics
    assert found in (None, V4 if version.startswith("V4") else V5)  # never the other version's


def test_the_family_tools_run_the_one_verify_and_info():
    from rmqtool.families import tools_at
    from rmqtool.verify.run import verify_store
    truth = load_truth(BASIC / "truth.json")["truth"]["commitlog"]
    tools = tools_at(BASIC / "store")
    run = tools.verify(tools.open_view(BASIC / "store", purpose="verify"))
    assert [f.to_json() for f in run.findings()] == [f.to_json() for f in verify_store(BASIC / "store")]
    doc, _findings = tools.info(tools.open_view(BASIC / "store", purpose="info"))
    assert doc["commitlog"]["written_end"] == truth["maxPhyOffset"]


def test_each_family_brings_its_own_tools(tmp_path):
    from rmqtool.families import tools_at
    assert tools_at(_qmq_store(tmp_path)).family is QMQ and tools_at(BASIC / "store").family is ROCKETMQ
    assert "messagelog" in tools_at(_qmq_store(tmp_path / "again")).dump_kinds
