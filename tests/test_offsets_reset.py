"""rmqtool offsets reset: an offline resetOffsetByTime, on fixtures/config/consumers.

Expected queue ranges and store times come from the base store's truth.json (the 4.9.8
broker's own answers); committed offsets from the fixture's consumerOffset.json; the time
lookup is query/by_time's (the one implementation of getOffsetInQueueByTime).
"""
from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from conftest import FIXTURES, load_truth
from helpers import cli_runner, tree_fingerprint, writable_copy
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode
from rmqtool.formats.config import consumer_offsets as offset_table
from rmqtool.formats.config import dumps_fastjson, loads_fastjson
from rmqtool.query.by_time import offset_by_time
from rmqtool.recovery.offset_reset import ResetTarget, plan_offset_reset
from rmqtool.store.config import MAIN, read_config_file

CONSUMERS = FIXTURES / "config" / "consumers"
GROUP, TOPIC = "order_group", "CrashTopic"
KEY = f"{TOPIC}@{GROUP}"  # the offsetTable key
runner = cli_runner()


def truth_queues() -> dict[int, dict]:
    return {int(q): v for q, v in load_truth(CONSUMERS / "truth.json")["truth"]["consumeQueues"][TOPIC].items()}


def committed(path) -> dict:
    """"topic@group" -> {queue id: offset} of a consumerOffset.json file."""
    return offset_table(loads_fastjson(path.read_text(encoding="utf-8")))


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One copy of the fixture (its symlinked files copied) the module's plans read."""
    return writable_copy(CONSUMERS / "store", tmp_path_factory.mktemp("reset") / "store")


def test_plans_give_each_queue_the_offset_truth_says(store):
    queues = truth_queues()
    old = committed(CONSUMERS / "store" / "config" / "consumerOffset.json")[KEY]

    earliest = plan_offset_reset(store, GROUP, TOPIC, ResetTarget.of(to_earliest=True))
    latest = plan_offset_reset(store, GROUP, TOPIC, ResetTarget.of(to_latest=True))
    assert [r.queue_id for r in earliest.rows] == sorted(old)
    for e, l in zip(earliest.rows, latest.rows):
        assert e.committed_offset == l.committed_offset == old[e.queue_id]
        assert (e.min_queue_offset, e.max_queue_offset) == (queues[e.queue_id]["minOffset"],
                                                            queues[e.queue_id]["maxOffset"])
        assert e.new_offset == queues[e.queue_id]["minOffset"] and l.new_offset == queues[e.queue_id]["maxOffset"]
        assert e.changed == (e.new_offset != old[e.queue_id])

    # --to-offset below queue 0's min and inside queue 1's range; past both maxima
    low = queues[0]["minOffset"] - 1
    below = {r.queue_id: r for r in plan_offset_reset(store, GROUP, TOPIC, ResetTarget.of(to_offset=low)).rows}
    assert below[0].new_offset == queues[0]["minOffset"] and "clamped" in below[0].note
    assert below[1].new_offset == low and "clamped" not in below[1].note
    high = max(q["maxOffset"] for q in queues.values()) + 5
    past = plan_offset_reset(store, GROUP, TOPIC, ResetTarget.of(to_offset=high), queue=1).rows
    assert [(r.queue_id, r.new_offset) for r in past] == [(1, queues[1]["maxOffset"])] and "clamped" in past[0].note

    # --to-time: a message's store time in queue 0 gives its queue offset there (an exact hit)
    messages = load_truth(CONSUMERS / "truth.json")["truth"]["messages"]
    by_offset = {m["physicalOffset"]: m["storeTimestamp"] for m in messages}
    queue_offset, commit_log_offset = queues[0]["entries"][len(queues[0]["entries"]) // 2][:2]
    when = by_offset[commit_log_offset]
    timed = plan_offset_reset(store, GROUP, TOPIC, ResetTarget.of(to_time=when), offset_by_time=offset_by_time)
    assert timed.rows[0].new_offset == queue_offset
    assert [r.new_offset for r in timed.rows] == [offset_by_time(store, TOPIC, r.queue_id, when).queue_offset
                                                  for r in timed.rows]


def test_apply_writes_the_brokers_file_and_undo_puts_it_back(tmp_path):
    root = writable_copy(CONSUMERS / "store", tmp_path / "store")
    config = root / "config"
    before_bytes = (config / "consumerOffset.json").read_bytes()
    before = tree_fingerprint(root)
    backup = tmp_path / "backup"

    done = run("offsets", "reset", root, "-g", GROUP, "-t", TOPIC, "--to-earliest", "--apply", "--backup-dir", backup,
               "-f", "jsonl")
    assert done.exit_code == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert {r["queue_id"]: r["new_offset"] for r in rows} == {q: v["minOffset"] for q, v in truth_queues().items()}
    assert "rmqtool undo" in done.stderr and str(backup) in done.stderr

    loaded = read_config_file(config, "consumerOffset.json")  # what the broker loads now
    assert loaded.source == MAIN and not loaded.findings
    table = offset_table(loaded.document)
    old = offset_table(loads_fastjson(before_bytes.decode()))
    assert table[KEY] == {r["queue_id"]: r["new_offset"] for r in rows}
    assert {k: v for k, v in table.items() if k != KEY} == {k: v for k, v in old.items()
                                                                        if k != KEY}
    # fastjson's pretty form, entries in the order the broker wrote them; the old file is the .bak
    assert (config / "consumerOffset.json").read_bytes() == dumps_fastjson(loaded.document).encode()
    assert list(table) == list(old)
    assert (config / "consumerOffset.json.bak").read_bytes() == before_bytes
    assert not (config / "consumerOffset.json.tmp").exists() and not (root / ".rmqtool-unfinished").exists()

    again = run("offsets", "reset", root, "-g", GROUP, "-t", TOPIC, "--to-earliest", "-f", "jsonl")
    assert again.exit_code == 0 and not any(json.loads(line)["changed"] for line in again.stdout.splitlines())
    assert "nothing to change" in again.stderr

    undone = run("undo", backup)
    assert undone.exit_code == 0, undone.stderr
    assert tree_fingerprint(root) == before


def test_a_held_store_is_refused(tmp_path):
    from rmqtool.recovery.store_lock import StoreLock

    root = writable_copy(CONSUMERS / "store", tmp_path / "store")
    config_before = {p.name: p.read_bytes() for p in (root / "config").iterdir()}
    with StoreLock(root / "lock"):  # held as a running broker holds it
        done = run("offsets", "reset", root, "-g", GROUP, "-t", TOPIC, "--to-latest", "--apply")
    assert done.exit_code == ExitCode.LOCKED, done.stderr
    assert "locked" in done.stderr and "Traceback" not in done.stderr
    assert {p.name: p.read_bytes() for p in (root / "config").iterdir()} == config_before
    assert not list(tmp_path.glob("store.recovery-*"))


@pytest.mark.parametrize("args, code", [
    (["-g", "nosuch_group", "-t", TOPIC, "--to-latest"], ExitCode.NOT_FOUND),
    (["-g", GROUP, "-t", "NoSuchTopic", "--to-latest"], ExitCode.NOT_FOUND),
    (["-g", GROUP, "-t", TOPIC, "--to-latest", "--queue", "9"], ExitCode.NOT_FOUND),
    (["-g", GROUP, "-t", TOPIC], ExitCode.USAGE),
    (["-g", GROUP, "-t", TOPIC, "--to-latest", "--to-earliest"], ExitCode.USAGE),
    (["-g", GROUP, "-t", TOPIC, "--to-offset", "-1"], ExitCode.USAGE),
    (["-g", GROUP, "-t", TOPIC, "--to-latest", "--backup-dir", "x"], ExitCode.USAGE),
])
def test_bad_input_is_one_line_and_its_code(store, args, code):
    done = run("offsets", "reset", store, *args)
    assert done.exit_code == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rmqtool") and not done.stdout


def test_a_missing_store_is_8(tmp_path):
    done = run("offsets", "reset", tmp_path / "nope", "-g", GROUP, "-t", TOPIC, "--to-latest")
    assert done.exit_code == ExitCode.OPERATIONAL and str(tmp_path / "nope") in done.stderr


def test_offsets_store_still_shows_the_offsets(store):
    shown = run("offsets", store, "-g", GROUP, "-f", "jsonl")
    assert shown.exit_code == 0, shown.stderr
    rows = [json.loads(line) for line in shown.stdout.splitlines()]
    old = committed(CONSUMERS / "store" / "config" / "consumerOffset.json")
    assert {(r["topic"], r["queue_id"]): r["committed_offset"] for r in rows} == {
        (t, q): o for key, queues in old.items() for t, g in [key.split("@")] if g == GROUP for q, o in queues.items()}
    assert "offsets reset" in run("offsets", "--help").stdout
    assert "--to-time" in run("offsets", "reset", "--help").stdout


def test_an_apply_killed_half_way_is_finished_by_running_it_again(tmp_path):
    """Killed after its first swap (the .bak in, the new file not): the store says so, and the
    same command rolls the half back and applies again; undo still gives the store back."""
    import os
    import subprocess
    import sys

    root = writable_copy(CONSUMERS / "store", tmp_path / "store")
    before_bytes = (root / "config" / "consumerOffset.json").read_bytes()
    before = tree_fingerprint(root)
    args = ["offsets", "reset", str(root), "-g", GROUP, "-t", TOPIC, "--to-latest", "--apply",
            "--backup-dir", str(tmp_path / "backup")]
    killed = subprocess.run([sys.executable, "-m", "rmqtool", *args], capture_output=True, text=True,
                            env={**os.environ, "RMQTOOL_KILL_AFTER": "2"}, timeout=60)
    assert killed.returncode == -9, killed.stderr
    assert (root / ".rmqtool-unfinished").exists()
    assert run("offsets", "reset", root, "-g", GROUP, "-t", TOPIC, "--to-latest").exit_code == 0  # a reader goes on

    done = run(*args)
    assert done.exit_code == 0, done.stderr
    table = committed(root / "config" / "consumerOffset.json")
    assert table[KEY] == {q: v["maxOffset"] for q, v in truth_queues().items()}
    assert (root / "config" / "consumerOffset.json.bak").read_bytes() == before_bytes
    assert not (root / ".rmqtool-unfinished").exists()
    assert run("undo", tmp_path / "backup").exit_code == 0
    assert tree_fingerprint(root) == before


def test_a_typo_in_columns_fails_before_apply_writes(tmp_path):
    root = writable_copy(CONSUMERS / "store", tmp_path / "store")
    before = tree_fingerprint(root)
    done = run("offsets", "reset", root, "-g", GROUP, "-t", TOPIC, "--to-earliest", "--apply",
               "--backup-dir", tmp_path / "backup", "--columns", "queue_id,no_such_column")
    assert done.exit_code == 2 and "no_such_column" in done.stderr
    assert tree_fingerprint(root) == before and not (tmp_path / "backup").exists()


def test_to_time_searches_the_queue_the_next_start_leaves(tmp_path):
    """The real broker's store after a recovery that cut the log at a body CRC failure (crash/e1,
    expected/): the queues' units past the cut stay on disk. --to-time past every message gives
    the last unit the broker's search reaches in the cut queue (truth's last queue offset), not a
    stale unit past the queue's max."""
    from helpers import expand_store
    from conftest import V4

    variant = V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file"
    truth = load_truth(variant / "truth.json")["truth"]
    store = expand_store(variant / "expected" / "store", tmp_path / "store")
    config = store / "config"
    config.mkdir(exist_ok=True)
    (config / "consumerOffset.json").write_text(dumps_fastjson(
        {"offsetTable": {f"{TOPIC}@g1": {0: 0, 1: 0}}}), encoding="utf-8")
    newest = max(m["storeTimestamp"] for m in truth["messages"])
    r = run("offsets", "reset", store, "-g", "g1", "-t", TOPIC, "--to-time", newest + 10_000, "-f", "jsonl")
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    maxima = {int(q): v["maxOffset"] for q, v in truth["consumeQueues"][TOPIC].items()}
    assert rows and all(row["new_offset"] == maxima[row["queue_id"]] - 1 for row in rows), (r.stderr, rows)
    assert all(row["max_queue_offset"] == maxima[row["queue_id"]] for row in rows)


def test_to_time_finds_a_message_only_the_next_starts_dispatch_puts_back(tmp_path):
    """crash/c2: the last consume queue file of CrashTopic/0 removed, the commit log whole. The
    broker's start dispatches the lost units again (truth: the queue after its recovery), so a
    time of a message they point to is found at its queue offset. The search read the files
    alone and answered the last unit they hold, before it."""
    from helpers import expand_store
    from conftest import V4

    variant = V4 / "crash" / "c2-delete-last-cq-file"
    truth = load_truth(variant / "truth.json")["truth"]
    store = expand_store(variant / "input" / "store", tmp_path / "store")
    (store / "config").mkdir(exist_ok=True)
    (store / "config" / "consumerOffset.json").write_text(dumps_fastjson(
        {"offsetTable": {f"{TOPIC}@g1": {0: 0}}}), encoding="utf-8")
    entries = truth["consumeQueues"][TOPIC]["0"]["entries"]
    stored = {m["physicalOffset"]: m["storeTimestamp"] for m in truth["messages"]}
    times = [stored[e[1]] for e in entries]
    removed = int(pathlib.PurePath(load_truth(variant / "truth.json")["mutation"]["removed"]).name) // 20
    # a unit of the removed file whose message alone has its store time: an exact hit
    queue_offset = next(e[0] for e in entries[removed:] if times.count(stored[e[1]]) == 1)
    when = stored[entries[queue_offset][1]]
    r = run("offsets", "reset", store, "-g", "g1", "-t", TOPIC, "--to-time", when, "-f", "jsonl")
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(row["queue_id"], row["new_offset"], row["max_queue_offset"]) for row in rows] == \
        [(0, queue_offset, truth["consumeQueues"][TOPIC]["0"]["maxOffset"])], (r.stderr, rows)


def test_a_main_file_the_brokers_decode_throws_on_is_reset_from_its_bak(tmp_path):
    """A committed offset past a Long in consumerOffset.json: fastjson throws, and the broker
    runs on the .bak. The reset starts from the .bak's offsets and writes a main file the
    broker loads; the broken bytes become the .bak, as string2File keeps the previous file."""
    root = writable_copy(CONSUMERS / "store", tmp_path / "store")
    main = root / "config" / "consumerOffset.json"
    doc = loads_fastjson(main.read_text(encoding="utf-8"))
    doc["offsetTable"][KEY] = {q: o + 1 for q, o in doc["offsetTable"][KEY].items()}  # the broker's, on the .bak
    main.with_name(main.name + ".bak").write_text(dumps_fastjson(doc), encoding="utf-8")
    broken = main.read_text(encoding="utf-8").replace(f'"{KEY}":{{0:', f'"{KEY}":{{0:99999999999999999999,9:', 1)
    assert broken != main.read_text(encoding="utf-8")
    main.write_text(broken, encoding="utf-8")

    shown = run("offsets", root, "-g", GROUP, "-t", TOPIC, "-f", "jsonl")
    assert "configBakUsed" in shown.stderr and "is not a Long" in shown.stderr
    assert {r["queue_id"]: r["committed_offset"] for r in map(json.loads, shown.stdout.splitlines())} == \
        doc["offsetTable"][KEY]
    done = run("offsets", "reset", root, "-g", GROUP, "-t", TOPIC, "--to-earliest", "--apply", "--backup-dir",
               tmp_path / "backup", "-f", "jsonl")
    assert done.exit_code == 0, done.output
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert {r["queue_id"]: r["committed_offset"] for r in rows} == doc["offsetTable"][KEY]
    loaded = read_config_file(root / "config", "consumerOffset.json")  # what the broker loads now
    assert loaded.source == MAIN and not loaded.findings
    assert offset_table(loaded.document)[KEY] == {q: v["minOffset"] for q, v in truth_queues().items()}
    assert main.with_name(main.name + ".bak").read_text(encoding="utf-8") == broken


def test_a_reset_of_a_store_with_only_the_bak_says_so(tmp_path):
    """No consumerOffset.json, only its .bak: the apply makes the main file and leaves the .bak."""
    root = writable_copy(CONSUMERS / "store", tmp_path / "store")
    main = root / "config" / "consumerOffset.json"
    bak = main.with_name(main.name + ".bak")
    main.rename(bak)
    before = bak.read_bytes()
    done = run("offsets", "reset", root, "-g", GROUP, "-t", TOPIC, "--to-earliest", "--apply", "--backup-dir",
               tmp_path / "backup")
    assert done.exit_code == 0, done.output
    assert "made from its .bak, which stays as it was" in done.stderr and "previous file kept" not in done.stderr
    assert bak.read_bytes() == before and main.is_file()


def test_a_store_whose_offsets_live_in_rocksdb_is_not_reset_in_json(tmp_path):
    """config/consumerOffsets as a RocksDB config store: a 5.x broker with storeType
    defaultRocksDB loads its offsets from it (RocksDBConsumerOffsetManager), so a reset of
    consumerOffset.json would be said applied and never seen. The plan says so; --apply
    refuses (exit 4) with nothing written; offsets says its rows are the JSON's."""
    from rocksdb_store import write_rocksdb_config

    root = writable_copy(CONSUMERS / "store", tmp_path / "store")
    database = write_rocksdb_config(root, "consumerOffsets", {KEY: b'{"offsetTable":{0:50,1:40}}'},
                                    {"counter": 10, "stateVersion": 0, "timestamp": 1})
    before = tree_fingerprint(root)
    shown = run("offsets", root)
    assert shown.exit_code == 0 and f"{database} is a RocksDB config store" in shown.stderr
    plan = run("offsets", "reset", root, "-g", GROUP, "-t", TOPIC, "--to-earliest")
    assert plan.exit_code == 0 and "which --apply does not write" in plan.stderr
    applied = run("offsets", "reset", root, "-g", GROUP, "-t", TOPIC, "--to-earliest", "--apply", "--backup-dir",
                  tmp_path / "backup")
    assert applied.exit_code == ExitCode.BAD_INPUT and "nothing written" in applied.stderr, applied.output
    assert tree_fingerprint(root) == before and not (tmp_path / "backup").exists()


def test_a_broker_config_not_on_rocksdb_resets_the_json_beside_a_database(tmp_path):
    """storeType=default in the --broker-config: the broker loads consumerOffset.json
    (RocksDBConsumerOffsetManager only when isEnableRocksDBStore), a database left in
    config/consumerOffsets from before the switch notwithstanding: the reset is applied."""
    from rocksdb_store import write_rocksdb_config

    root = writable_copy(CONSUMERS / "store", tmp_path / "store")
    write_rocksdb_config(root, "consumerOffsets", {KEY: b'{"offsetTable":{0:50,1:40}}'}, None)
    conf = tmp_path / "broker.conf"
    conf.write_text("storeType=default\n")
    done = run("offsets", "reset", root, "-g", GROUP, "-t", TOPIC, "--to-earliest", "--apply", "--broker-config",
               conf, "--backup-dir", tmp_path / "backup", "-f", "jsonl")
    assert done.exit_code == 0 and "RocksDB" not in done.stderr, done.output
    loaded = read_config_file(root / "config", "consumerOffset.json")
    assert offset_table(loaded.document)[KEY] == {q: v["minOffset"] for q, v in truth_queues().items()}


def test_a_time_in_a_batch_queue_the_next_start_rebuilds_is_found_in_its_units(tmp_path):
    """A 5.3.3 batch store after a crash (its abort file back), one batch queue's directory gone:
    the 5.3 start dispatches its batches again (from the commit log's first file), and the
    time lookup searches those units: a batch's store time gives its msgBaseOffset (truth)."""
    from helpers import expand_store
    from conftest import V5
    from rmqtool.recovery.loaded_end import loaded_queues
    from rmqtool.recovery.outcome import Settings, simulate
    from rmqtool.recovery.started_queues import StartedQueue
    from rmqtool.store.view import StoreView

    truth = load_truth(V5 / "batchcq" / "truth.json")["truth"]
    store = expand_store(V5 / "batchcq" / "store", tmp_path / "store")
    (store / "abort.bak").rename(store / "abort")
    topic = "BatchCQTopic"
    shutil.rmtree(store / "batchconsumequeue" / topic / "0")
    view = StoreView(store)
    started = loaded_queues(view, simulate(view, Settings(semantics="5.3"), list_lost=False))
    queue = started.find(topic, 0)
    assert isinstance(queue, StartedQueue) and queue.is_batch
    assert queue.max_offset == truth["consumeQueues"][topic]["0"]["maxOffset"]
    stored = {m["physicalOffset"]: m["storeTimestamp"] for m in truth["messages"]}
    entries = truth["consumeQueues"][topic]["0"]["entries"]
    for base, commit_log_offset in [e[:2] for e in entries]:
        when = stored[commit_log_offset]
        if [stored[e[1]] for e in entries].count(when) == 1:
            assert offset_by_time(view, topic, 0, when, queues=started).queue_offset == base
