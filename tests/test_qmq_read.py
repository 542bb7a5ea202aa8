"""Reading QMQ's message log (rmqtool/store/qmq/) on the stores DefaultStorage wrote: every
record as the engine read it back, and on the crash variants the damage where the engine's
recovery found it (truth.json)."""
from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, load_truth
from helpers import copy_tree, expand_store
from rmqtool.formats.qmq.consumerlog import is_fill_unit
from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.store.qmq import messagelog, record_kernel
from rmqtool.store.qmq.segments import list_log

QMQ = FIXTURES / "qmq"
CRASH = QMQ / "crash"


def scan(store):
    log = list_log(store / "messagelog", PER_SEGMENT_FILE_SIZE)
    return log, [item for seg in log.segments for item in messagelog.scan_segment(seg)]


def written_end(log) -> int:
    builder = record_kernel.LogColumnsBuilder(record_kernel.SubjectTable())
    for _ in messagelog.log_pieces(log.segments, builder):
        pass
    return builder.build().written_end


@pytest.mark.parametrize("scenario", [QMQ / "basic", QMQ / "v2-consumerlog"], ids=["basic", "v2"])
def test_every_record_as_the_engine_read_it_back(scenario):
    truth = load_truth(scenario / "truth.json")["readBack"]["messageLog"]
    log, items = scan(scenario / "store")
    assert [p.name for p in log.skipped] == [".00000000000000000000.offset"] and not log.unparsable
    assert all(isinstance(i, messagelog.MessageRecord) for i in items)
    got = [(i.offset, i.size, i.header_size, i.subject, i.sequence, i.timestamp, i.payload_crc, i.payload_crc_ok)
           for i in items]
    assert got == [(r["offset"], r["size"], r["headerSize"], r["subject"], r["sequence"], r["timestamp"],
                    r["payloadCrc"], r["payloadCrcOk"]) for r in truth["records"]]
    assert written_end(log) == truth["maxOffset"]


CUT = ["d-flipped-payload-byte-mid-log", "i-short-messagelog-segment", "j-torn-last-record"]


@pytest.mark.parametrize("variant", CUT)
def test_the_first_bad_record_is_where_the_engine_cut_the_log(variant):
    truth = load_truth(CRASH / variant / "truth.json")
    _, items = scan(CRASH / variant / "input")
    bad = [i for i in items if not isinstance(i, messagelog.MessageRecord) or not i.payload_crc_ok]
    assert bad and bad[0].offset == truth["messageLog"]["cutAt"]
    lost = {(r["offset"], r["subject"], r["sequence"]) for r in truth["messageLog"]["recordsLost"]}
    found_after_cut = {(i.offset, i.subject, i.sequence) for i in items
                       if isinstance(i, messagelog.MessageRecord) and i.offset >= truth["messageLog"]["cutAt"]}
    assert found_after_cut <= lost  # nothing invented past the cut: what is read there is what QMQ dropped


def test_an_intact_halted_store_reads_whole():
    truth = load_truth(CRASH / "a-as-is" / "truth.json")["messageLog"]
    log, items = scan(CRASH / "a-as-is" / "input")
    assert len(items) == truth["recordsBeforeCrash"] and all(i.payload_crc_ok for i in items)
    assert written_end(log) == truth["writtenEndBeforeCrash"]


def test_a_header_of_payload_size_minus_one_is_damage_at_its_offset():
    truth = load_truth(CRASH / "c-header-len-minus1-after-tail" / "truth.json")
    _, items = scan(CRASH / "c-header-len-minus1-after-tail" / "input")
    damage = [i for i in items if isinstance(i, messagelog.Damage)]
    assert [(d.offset, d.reason) for d in damage] == [(truth["mutation"]["offset"], "payload size -1")]


def test_a_stray_name_is_one_the_engine_refuses():
    log, _ = scan(CRASH / "b-stray-file-in-messagelog" / "input")
    truth = load_truth(CRASH / "b-stray-file-in-messagelog" / "truth.json")
    assert [p.name for p in log.unparsable] == ["00000000000000000000.bak"]
    assert truth["started"] is False and "NumberFormatException" in str(truth["exception"])


@pytest.mark.parametrize("scenario", [QMQ / "basic", QMQ / "v2-consumerlog"], ids=["basic", "v2"])
def test_consumer_log_units_as_the_engine_read_them(scenario):
    from rmqtool.store.qmq import consumerlog
    logs = load_truth(scenario / "truth.json")["readBack"]["consumerLogs"]
    assert consumerlog.subjects(scenario / "store") == sorted(logs)
    for subject, want in logs.items():
        directory, unit = consumerlog.open_consumer_log(scenario / "store", subject)
        assert unit == want["unitBytes"]
        units = list(consumerlog.read_units(directory, unit, subject))
        assert [(u.sequence, u.timestamp, u.wrote_offset, u.wrote_bytes, u.header_size) for u in units] == \
            [(w["sequence"], w["timestamp"], w["wroteOffset"], w["wroteBytes"], w["headerSize"]) for w in want["units"]]
        assert all(u.kind == "message" for u in units)


def test_action_log_records_as_the_engine_read_them():
    from rmqtool.store.qmq import actionlog
    truth = load_truth(QMQ / "basic" / "truth.json")["readBack"]["actionLog"]
    log = list_log(QMQ / "basic" / "store" / "actionlog", actionlog.SEGMENT_SIZE)
    items = [i for seg in log.segments for i in actionlog.scan_segment(seg)]
    assert all(isinstance(i, actionlog.ActionRecord) for i in items)
    assert [(i.offset, i.end_offset, i.action_type, i.fields["subject"], i.fields["group"], i.fields["consumer_id"])
            for i in items] == [(r["offset"], r["endOffset"], r["type"], r["subject"], r["group"], r["consumerId"])
                                for r in truth["records"]]


def test_a_zeroed_action_log_tail_ends_the_actions_where_the_engine_cut():
    from rmqtool.store.qmq import actionlog
    variant = CRASH / "l-zeroed-actionlog-tail"
    truth = load_truth(variant / "truth.json")
    log = list_log(variant / "input" / "actionlog", actionlog.SEGMENT_SIZE)
    items = [i for seg in log.segments for i in actionlog.scan_segment(seg)]
    assert all(isinstance(i, actionlog.ActionRecord) for i in items)
    assert items[-1].end_offset == truth["actionLog"]["maxOffsetAfterRestart"]


@pytest.mark.parametrize("variant", ["f-garbled-latest-message-checkpoint", "g-lost-message-checkpoints", "a-as-is"])
def test_the_checkpoint_the_engine_loads(variant):
    """The highest version that parses; crash/f's garbled latest file is skipped and the one
    before used (truth: the serde's parse of every input file; QMQ's replay started there)."""
    from rmqtool.store.qmq.checkpoints import message_checkpoints
    files = load_truth(CRASH / variant / "truth.json")["checkpointFilesInInput"]
    parsed = [f for f in files if f["file"].startswith("message-checkpoint.") and "parseError" not in f]
    snaps = message_checkpoints(CRASH / variant / "input")
    if not parsed:
        assert snaps.loaded is None
        return
    best = max(parsed, key=lambda f: f["parsedOffset"])
    assert snaps.loaded.path.name == best["file"] and snaps.loaded.value.offset == best["parsedOffset"]
    assert [s.path.name for s in snaps.skipped] == [f["file"] for f in files if "parseError" in f]


@pytest.mark.parametrize("store, truth_of", [
    (QMQ / "basic" / "store", lambda t: t["readBack"]["pullLogs"]["sortedPullLogTableActionReplayState"]),
    (CRASH / "k-clean-restart-with-pulllog-tablet" / "input", lambda t: t["sortedPullLogTableActionReplayState"]),
    (CRASH / "a-as-is" / "input", lambda t: t["sortedPullLogTableActionReplayState"]),
], ids=["basic", "k", "a"])
def test_the_action_replay_starts_where_the_engine_started_it(store, truth_of):
    from rmqtool.recovery.qmq.tablets import load_tablets
    from rmqtool.store.qmq import tablets
    truth = load_truth(store.parent / "truth.json")
    assert all(t.valid for t in tablets.tablets(store))
    assert load_tablets(store).replay_state == truth_of(truth)


def test_message_rows_carry_what_the_engine_decoded():
    """dump's rows: the payload's message id, tags and attributes as QMQSerializer read them."""
    from rmqtool.report.qmq.records import message_log_row
    truth = load_truth(QMQ / "basic" / "truth.json")["readBack"]["messageLog"]["records"]
    _, items = scan(QMQ / "basic" / "store")
    for item, want in zip(items, truth):
        row = message_log_row(item, "none")
        p = want["payload"]
        assert (row["message_log_offset"], row["store_size"], row["subject"], row["sequence"]) == \
            (want["offset"], want["size"], want["subject"], want["sequence"])
        assert (row["message_id"], row["tags"], row["delay"], row["created_timestamp"], row["expire_timestamp"]) == \
            (p["messageId"], p["tags"] or [], p["flagDelay"], p["createTime"], p["expireTime"])
        assert list(row["attrs"]) == [a["key"] for a in p["attrs"]] and row["body"] is None


def test_info_on_the_basic_store():
    from rmqtool.inspect.qmq.inventory import store_info
    truth = load_truth(QMQ / "basic" / "truth.json")
    doc = store_info(QMQ / "basic" / "store")
    before = truth["generation"]["inMemoryBeforeShutdown"]
    assert doc["message_log"]["written_end"] == before["messageLogMaxOffset"]
    assert doc["message_log"]["records"] == len(truth["readBack"]["messageLog"]["records"])
    assert doc["action_log"]["written_end"] == before["actionLogMaxOffset"]
    assert doc["checkpoints"]["message"]["offset"] == before["messageCheckpointOffset"]
    assert doc["checkpoints"]["action"]["offset"] == before["actionCheckpointOffset"]
    assert {s["subject"]: s["next_sequence"] for s in doc["subjects"]} == \
        {s: b[1] for s, b in before["consumerLogBounds"].items()}
    logs = truth["readBack"]["consumerLogs"]
    assert {s["subject"]: (s["first_sequence"], s["fill_units"]) for s in doc["subjects"]} == \
        {s: (log["minSequence"], sum(u["type"] == "MESSAGE_LOG_INDEX" and
                                     is_fill_unit(u["wroteOffset"], u["wroteBytes"], u["headerSize"])
                                     for u in log["units"])) for s, log in logs.items()}
    assert doc["action_replay_from"] == truth["readBack"]["pullLogs"]["sortedPullLogTableActionReplayState"]
    assert "as a clean stop leaves it" in doc["last_shutdown"]


def test_info_on_a_halted_store_says_the_checkpoint_is_behind():
    from rmqtool.inspect.qmq.inventory import store_info
    doc = store_info(CRASH / "a-as-is" / "input")
    truth = load_truth(CRASH / "a-as-is" / "truth.json")
    assert doc["message_log"]["written_end"] == truth["messageLog"]["writtenEndBeforeCrash"]
    assert "not clean" in doc["last_shutdown"]


def test_info_on_a_store_whose_log_lost_its_tail_says_the_checkpoint_is_past_the_end(tmp_path):
    """A segment cut short: the checkpoint the start loads (truth) lies past the bytes left, so
    nothing is replayed from it, and info says so rather than a negative replay."""
    from rmqtool.inspect.qmq.inventory import store_info
    variant = CRASH / "i-short-messagelog-segment"
    doc = store_info(expand_store(variant / "input", tmp_path / "store"))
    checkpoint = load_truth(variant / "truth.json")["checkpointsAfterStart"]["messageCheckpointOffset"]
    assert doc["checkpoints"]["message"]["offset"] == checkpoint > doc["message_log"]["written_end"]
    assert "past the written end" in doc["last_shutdown"] and "replays" not in doc["last_shutdown"]


def test_every_dump_kind_gives_truth_rows_on_the_basic_store():
    from rmqtool.inspect.qmq.dumps import dump_rows
    root = QMQ / "basic" / "store"
    truth = load_truth(QMQ / "basic" / "truth.json")
    rb = truth["readBack"]
    assert [r["message_log_offset"] for r in dump_rows(root, "messagelog", body="none")] == \
        [r["offset"] for r in rb["messageLog"]["records"]]
    units = list(dump_rows(root, "consumerlog"))
    assert len(units) == sum(len(log["units"]) for log in rb["consumerLogs"].values())
    assert [r["action_log_offset"] for r in dump_rows(root, "actionlog")] == [r["offset"] for r in rb["actionLog"]["records"]]
    pulls = list(dump_rows(root, "pulllog"))  # as written (DefaultStorage.putPullLogs), not as served after restart
    put = [e for e in truth["generation"]["events"] if e["event"] == "legacyPutPullLogs"]
    assert [(p["consumer_id"], p["pull_sequence"], p["sequence"]) for p in pulls] == \
        [(e["consumer"], pull, seq) for e in put for pull, seq, _ in e["entries"]]
    cps = list(dump_rows(root, "checkpoint"))
    assert len(cps) == len(truth["checkpointFiles"]) and sum(r["loaded"] for r in cps) == 2
    order = "order.created"
    assert [r["sequence"] for r in dump_rows(root, "consumerlog", subject=order)] == \
        [u["sequence"] for u in rb["consumerLogs"][order]["units"]]


def test_a_process_with_a_segment_open_holds_the_store(tmp_path):
    """QMQ takes no lock file: a broker holds its segments open (LogSegment's channel)."""
    import subprocess
    import sys
    from rmqtool.store.qmq.live import holder_pid
    store = tmp_path / "store"
    copy_tree(QMQ / "basic" / "store", store)
    assert holder_pid(store) is None
    segment = store / "messagelog" / "00000000000000000000"
    holder = subprocess.Popen([sys.executable, "-c", f"f = open({str(segment)!r}, 'rb'); print('open', flush=True); "
                               "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        assert holder_pid(store) == holder.pid
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    assert holder_pid(store) is None


@pytest.mark.parametrize("variant", [v.name for v in sorted(CRASH.iterdir()) if v.is_dir()
                                     and load_truth(v / "truth.json").get("started")])
def test_info_gives_the_consumer_progress_the_restarted_engine_had(variant):
    """The action checkpoint's progress and the action log's actions after it, as the engine's
    start replays them (truth: consumerProgressAfterRestart); without an action checkpoint too."""
    from rmqtool.inspect.qmq.inventory import store_info
    doc = store_info(CRASH / variant / "input")
    assert doc["consumer_progress"] == load_truth(CRASH / variant / "truth.json")["consumerProgressAfterRestart"]


def test_a_stray_byte_far_into_a_sparse_segment_costs_no_hole_read(tmp_path):
    """One 0xEE byte 600 MB into a 1 GiB segment of holes: the scan's search for the next record
    skips the holes (their data extents only), where it read them through the map and took
    about 600 MB of resident set; what it reports is unchanged (a damaged region to the byte)."""
    import subprocess
    import sys
    from conftest import REPO
    store = expand_store(FIXTURES / "qmq" / "crash" / "a-as-is" / "input", tmp_path / "store")
    segment = store / "messagelog" / f"{0:020d}"
    far = 600_000_000
    assert segment.stat().st_size > far and segment.stat().st_blocks * 512 < far // 100  # sparse
    with open(segment, "r+b") as f:
        f.seek(far)
        f.write(b"\xee")
    # a launcher whose one child is the command: its peak RSS is the command's own
    code = ("import json, resource, subprocess, sys\n"
            f"r = subprocess.run([sys.executable, '-m', 'rmqtool', 'verify', {str(store)!r}, '-f', 'jsonl'], "
            "capture_output=True, text=True)\n"
            "print(json.dumps({'kib': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
            "'ids': sorted({json.loads(x)['finding'] for x in r.stdout.splitlines()})}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert "messageRecordInvalid" in out["ids"]
    assert out["kib"] < 300 * 1024, out  # the interpreter and the store's data, not the hole
