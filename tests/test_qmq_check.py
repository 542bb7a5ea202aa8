"""rmqtool check on QMQ stores: the measures against what QMQ's own read-back says, the stores
QMQ does not start on CRITICAL, a moving tail under a running broker left alone."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import FIXTURES, load_truth
from helpers import cli_runner, expand_store
from rmqtool.cli.app import app
from rmqtool.families import tools_at
from rmqtool.inspect.check import State, prometheus_text
from rmqtool.inspect.check_defaults import TAIL_BYTES
from rmqtool.inspect.check import run_check as run_check_of

QMQ = FIXTURES / "qmq"
CRASH = QMQ / "crash"
CLEAN = ("basic", "v2-consumerlog")
NOW = 1_900_000_000_000  # the probe's clock, passed in


def run_check(stores, **options):
    """run_check as the command runs it: each store checked by its family's tools."""
    return run_check_of(stores, check_one=lambda path, **kw: tools_at(path).check(path, **kw), **options)


@pytest.fixture(scope="module", params=CLEAN)
def clean(request, tmp_path_factory):
    store = expand_store(QMQ / request.param / "store", tmp_path_factory.mktemp(request.param) / "store")
    return store, load_truth(QMQ / request.param / "truth.json")["readBack"]


def _by(result) -> dict:
    (store,) = result.stores
    return {(m.measure, m.subject, m.group): m.value for m in store.measures}


def _expected(rb: dict) -> dict:
    """What the probe must say, from QMQ's read-back of the store after its start."""
    records = rb["messageLog"]["records"]
    written = rb["messageLog"]["maxOffset"]
    stamp = {r["offset"]: r["timestamp"] for r in records}
    newest = max(r["timestamp"] for r in records)
    out = {("written_end", None, None): written, ("newest_age_ms", None, None): NOW - newest}
    ends = {}
    for subject, log in rb["consumerLogs"].items():
        units = [u for u in log["units"] if u["type"] == "MESSAGE_LOG_INDEX"]
        ends[subject] = units[-1]["wroteOffset"] + units[-1]["wroteBytes"]
        out["subject_dispatch_lag_bytes", subject, None] = written - ends[subject]
    out["dispatch_lag_bytes", None, None] = written - max(ends.values())
    for p in rb["consumerProgressAfterStart"]:
        if p["broadcast"]:
            continue
        log = rb["consumerLogs"][p["subject"]]
        lag = max(log["maxSequence"] - 1 - p["pull"], 0)  # maxSequence: ConsumerLog.nextSequence, one past the last
        out["lag_messages", p["subject"], p["group"]] = lag
        units = {u["sequence"]: u for u in log["units"] if u["type"] == "MESSAGE_LOG_INDEX"}
        # as offsets says it: the subject's newest message's store time minus that of the first not pulled
        out["lag_ms", p["subject"], p["group"]] = \
            stamp[units[max(units)]["wroteOffset"]] - stamp[units[p["pull"] + 1]["wroteOffset"]] if lag else 0
    replay_from = rb["pullLogs"]["sortedPullLogTableActionReplayState"] or rb["checkpointsBeforeStop"]["actionCheckpointOffset"]
    out["recovery_bytes", None, None] = (written - rb["checkpointsBeforeStop"]["messageCheckpointOffset"]) + \
        (rb["actionLog"]["maxOffset"] - replay_from)
    return out


def test_a_clean_qmq_store_measures_as_its_truth(clean):
    store, rb = clean
    result = run_check([store], now=NOW)
    got = _by(result)
    for key, value in _expected(rb).items():
        assert got.get(key) == value, key
    broadcast = {(p["subject"], p["group"]) for p in rb["consumerProgressAfterStart"] if p["broadcast"]}
    assert broadcast and not any((s, g) in broadcast for _m, s, g in got)  # their progress is each consumer's
    assert got["load_refused", None, None] == 0 and got["tail_errors", None, None] == 0
    assert result.state == State.OK and result.exit_code == 0


def test_a_tail_window_of_any_size_finds_the_same_end(clean):
    """The window starts where it falls, mid-record most often: the scan begins at the first
    clean record in it, and the bytes before that are not damage."""
    store, rb = clean
    whole = _by(run_check([store], now=NOW))
    for tail in (1, 7, 333, 5000):
        got = _by(run_check([store], now=NOW, tail_bytes=tail))
        assert got["written_end", None, None] == rb["messageLog"]["maxOffset"], tail
        assert got["tail_errors", None, None] == got["tail_warnings", None, None] == 0, tail
        assert {k: v for k, v in got.items() if k[0] != "disk_free_bytes"} == \
            {k: v for k, v in whole.items() if k[0] != "disk_free_bytes"}, tail


VARIANTS = sorted(p.name for p in CRASH.iterdir() if p.is_dir())


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_store_qmq_does_not_start_on_is_critical(variant, tmp_path):
    truth = load_truth(CRASH / variant / "truth.json")
    store = expand_store(CRASH / variant / "input", tmp_path / "store")
    result = run_check([store], now=NOW)
    (checked,) = result.stores
    bad = {m.measure for m in checked.measures if m.state == State.CRITICAL}
    if truth["started"] is False:
        assert result.state == State.CRITICAL and bad & {"load_refused", "tail_errors"}, bad
        mutation = truth["mutation"]
        if "offset" in mutation:  # the damage the start throws at is the newest finding the line names
            assert f"{mutation['file'].split('/')[-1]}:{mutation['offset']}" in result.status_line()
    if truth["summary"].get("recordsLost"):  # records the start cuts are damage the tail shows
        assert "tail_errors" in bad


@pytest.mark.parametrize("variant", VARIANTS)
def test_messages_the_next_start_no_longer_serves_are_critical(variant, tmp_path):
    """e (a consumer log file deleted) and h (a subject missing from the message checkpoint):
    the load lacks or cuts units whose records lie before the replay start, and QMQ served those
    sequences SUCCESS without a message. Where the start cuts the message log (d, i), the units it
    serves empty name records it cut: that is the tail's damage, not this measure's."""
    truth = load_truth(CRASH / variant / "truth.json")
    store = expand_store(CRASH / variant / "input", tmp_path / "store")
    (checked,) = run_check([store], now=NOW).stores
    got = {m.subject: m for m in checked.measures if m.measure == "units_lost_at_start"}
    cut = bool(truth["summary"].get("recordsLost"))
    for subject, p in truth.get("perSubject", {}).items():
        empty = sum(hi - lo + 1 for lo, hi in p.get("servedSuccessWithoutMessage", []))
        assert got[subject].value == (0 if cut else empty), subject
        assert (got[subject].state == State.CRITICAL) == (got[subject].value > 0), subject
    if truth["started"] is not False and not cut:
        assert any(m.value for m in got.values()) == (checked.state == State.CRITICAL), variant


def test_a_clean_store_loses_nothing_at_start(clean):
    store, rb = clean
    (checked,) = run_check([store], now=NOW).stores
    got = {m.subject: m.value for m in checked.measures if m.measure == "units_lost_at_start"}
    assert set(got) == set(rb["consumerLogs"]) and not any(got.values())


@pytest.mark.parametrize("shape", ["no end record", "end record", "damaged record before the end record"])
def test_a_segment_the_start_finds_incomplete_before_a_written_one_is_the_cut(clean, tmp_path, shape):
    """A second message log segment after a first with no end-of-segment record (a crash before
    QMQ wrote it), or with a damaged record before it: the start's validator stops there and
    deletes the second segment; check names the cut where info's simulated start makes it. With
    the end record written and the records before it clean, nothing is cut."""
    import struct
    from helpers import copy_tree
    from rmqtool.formats.qmq.messagelog import ATTR_EMPTY_RECORD, MESSAGE_LOG_MAGIC_V3, PER_SEGMENT_FILE_SIZE
    store, rb = clean
    store = copy_tree(store, tmp_path / "store")
    end = rb["messageLog"]["maxOffset"]
    first = store / "messagelog" / f"{0:020d}"
    with open(first, "rb") as f:
        written = f.read(end)
    if shape != "no end record":
        with open(first, "r+b") as f:
            f.seek(end)
            f.write(struct.pack(">IbQ", MESSAGE_LOG_MAGIC_V3, ATTR_EMPTY_RECORD, 0))
    damaged = rb["messageLog"]["records"][-3] if shape.startswith("damaged") else None
    if damaged is not None:  # a payload byte: the record's CRC fails
        with open(first, "r+b") as f:
            f.seek(damaged["offset"] + damaged["size"] - 1)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0xFF]))
    with open(store / "messagelog" / f"{PER_SEGMENT_FILE_SIZE:020d}", "wb") as f:
        f.write(written)  # the same records again: a segment holding data
        f.truncate(PER_SEGMENT_FILE_SIZE)
    info = json.loads(cli_runner().invoke(app, ["info", str(store), "-f", "json"]).stdout)["message_log"]
    # the default window, and one shorter than the segment's last record (no record begins in it:
    # the segment is walked whole, as the tail of the last one is; damage before the window is verify's)
    for tail_bytes in (TAIL_BYTES, *([rb["messageLog"]["records"][-1]["size"] - 1] if damaged is None else [])):
        (checked,) = run_check([store], now=NOW, tail_bytes=tail_bytes).stores
        cuts = [f for f in checked.findings if f.id == "recoveryCutsMessageLog"]
        if shape == "end record":
            assert not cuts and info["recovered_end"] > PER_SEGMENT_FILE_SIZE
        else:
            (cut,) = cuts
            expected = damaged["offset"] if damaged is not None else end
            assert info["recovered_end"] == expected and (cut.path, cut.offset) == (str(first), expected), tail_bytes
            assert checked.state == State.CRITICAL, tail_bytes


def test_a_refused_start_is_load_refused_and_its_groups_have_no_lag(tmp_path):
    """b: a stray name in messagelog/ stops the constructor: no progress is loaded to lag behind."""
    variant = "b-stray-file-in-messagelog"
    store = expand_store(CRASH / variant / "input", tmp_path / "store")
    got = _by(run_check([store], now=NOW))
    assert got["load_refused", None, None] == 1
    assert not [k for k in got if k[0] == "lag_messages"]


def test_rows_name_subjects_and_prometheus_labels_them(clean, tmp_path):
    store, rb = clean
    out = cli_runner().invoke(app, ["check", str(store), "--now", str(NOW), "-f", "jsonl"])
    assert out.exit_code == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    measures = [r for r in rows if r["record"] == "check_measure"]
    assert all("subject" in r and "topic" not in r and "queue_id" not in r for r in measures)
    assert {r["subject"] for r in measures if r["measure"] == "subject_dispatch_lag_bytes"} == set(rb["consumerLogs"])
    assert rows[-1] == {"record": "check_state", "store_path": str(store), "state": "OK", "unknown": None}
    text = prometheus_text(run_check([store], now=NOW))
    subject = next(iter(rb["consumerLogs"]))
    assert f'rmqtool_check_subject_dispatch_lag_bytes{{store="{store}",subject="{subject}"}}' in text


def test_a_held_stores_moving_tail_is_not_damage_but_the_same_tail_at_rest_is(tmp_path):
    """j: the last record torn. At rest that is damage (the start cuts it); with a process
    holding the segment (QMQ takes no lock: a broker holds its segments open) the record may be
    being written now, and units may name it before its bytes are there."""
    store = expand_store(CRASH / "j-torn-last-record" / "input", tmp_path / "store")
    at_rest = _by(run_check([store], now=NOW))
    assert at_rest["tail_errors", None, None] >= 1 and at_rest["dispatch_ahead_bytes", None, None] > 0
    segment = sorted((store / "messagelog").iterdir())[0]
    holder = subprocess.Popen([sys.executable, "-c", f"f = open({str(segment)!r}, 'rb'); print('open', flush=True); "
                               "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        held = _by(run_check([store], now=NOW))
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    assert held["tail_errors", None, None] == 0 and ("dispatch_ahead_bytes", None, None) not in held
    assert held["written_end", None, None] == at_rest["written_end", None, None]


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_probes_written_end_is_infos_from_any_window(variant, tmp_path):
    """One written end: the probe's, read from a tail window of any size, is the one info reads
    from the whole log (a torn record, a short segment, a header after the tail included)."""
    from rmqtool.inspect.qmq.inventory import store_info
    store = expand_store(CRASH / variant / "input", tmp_path / "store")
    whole = store_info(store)["message_log"]["written_end"]
    for tail in (64, 4096, 1 << 22):
        assert _by(run_check([store], now=NOW, tail_bytes=tail))["written_end", None, None] == whole, tail


def test_a_consumer_log_whose_last_unit_names_no_record_lags_from_the_unit_before(clean, tmp_path):
    """A last unit cut short (read as offset 0, 0 bytes) or garbled to a negative offset names no
    record: the subject's dispatch lag is from the record its last unit naming one ends at, never
    more bytes than the log holds, and its ms never negative."""
    from helpers import copy_tree
    from rmqtool.store.qmq.consumerlog import subject_directory
    store, rb = clean
    written = rb["messageLog"]["maxOffset"]
    subject, log = max(rb["consumerLogs"].items(), key=lambda s: s[1]["maxSequence"])
    units = [u for u in log["units"] if u["type"] == "MESSAGE_LOG_INDEX" and u["sequence"] < log["maxSequence"] - 1]
    expected = written - (units[-1]["wroteOffset"] + units[-1]["wroteBytes"])
    for name, tear in (("cut", lambda f: os.truncate(f, (log["maxSequence"] - 1) * log["unitBytes"] + 7)),
                       ("garbled", lambda f: _overwrite(f, (log["maxSequence"] - 1) * log["unitBytes"],
                                                        log["unitBytes"]))):
        copy = copy_tree(store, tmp_path / name)
        (segment,) = sorted(subject_directory(copy, subject).iterdir())
        tear(segment)
        got = _by(run_check([copy], now=NOW))
        assert got["subject_dispatch_lag_bytes", subject, None] == expected, name
        assert got["subject_dispatch_lag_ms", subject, None] >= 0, name


def _overwrite(path, at: int, unit_bytes: int) -> None:
    """The unit at ``at`` made all 0xff bytes (V1: offset -1, -1 bytes; V2: of no kind)."""
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(b"\xff" * unit_bytes)


def _exposition_errors(text: str) -> list[str]:
    """What the Prometheus text parser (prometheus/common expfmt, node_exporter's textfile
    collector) refuses in label values: an escape other than \\\\, \\" and \\n, which drops
    the whole file."""
    errors = []
    for line in text.splitlines():
        if line.startswith("#") or "{" not in line:
            continue
        labels = line[line.index("{") + 1:line.rindex("}")]
        i, quoted = 0, False
        while i < len(labels):
            c = labels[i]
            if quoted and c == "\\":
                if labels[i + 1:i + 2] not in ("\\", '"', "n"):
                    errors.append(line)
                    break
                i += 2
                continue
            quoted = not quoted if c == '"' else quoted
            i += 1
    return errors


def test_a_subject_name_that_is_not_utf8_keeps_the_prometheus_file_readable(clean, tmp_path):
    """A consumer log directory whose name holds bytes that are not UTF-8: its label says them
    as text the collector parses, not an escape it refuses (which would drop every gauge)."""
    from helpers import copy_tree
    store, rb = clean
    store = copy_tree(store, tmp_path / "store")
    subject = next(iter(rb["consumerLogs"]))
    os.rename(store / "consumerlog" / subject, os.fsencode(store / "consumerlog") + b"/odd\xff\xfename")
    prom = tmp_path / "check.prom"
    out = cli_runner().invoke(app, ["check", str(store), "--now", str(NOW), "--prometheus", str(prom)])
    # the subject the checkpoint names has no consumer log now: its messages are lost to the next start
    assert out.exit_code == 2 and f"CRITICAL units_lost_at_start[{subject}]=" in out.stdout, out.stdout
    text = prom.read_bytes().decode("utf-8")  # strict: the collector takes UTF-8 only
    assert 'subject="odd' in text and not _exposition_errors(text)


def test_a_renamed_consumer_log_directory_counts_once(tmp_path):
    """crash.order's consumer log renamed: the load finds no log of crash.order (its sequences up
    to the checkpoint's max are lost to the next start) and cuts the renamed directory to nothing;
    that directory's units name crash.order's records, so they are not counted a second time."""
    store = expand_store(CRASH / "a-as-is" / "input", tmp_path / "store")
    subject = "crash.order"
    # the loaded checkpoint's text as QMQ wrote it (the same base store in every variant)
    text = load_truth(CRASH / "h-subject-missing-from-checkpoint" / "truth.json")["mutation"]["textBefore"]
    max_sequence = int(next(line for line in text.splitlines() if line.startswith(subject + "/")).split("/")[1])
    (store / "consumerlog" / subject).rename(store / "consumerlog" / (subject + ".old"))
    (checked,) = run_check([store], now=NOW).stores
    got = {m.subject: m.value for m in checked.measures if m.measure == "units_lost_at_start"}
    assert got[subject] == max_sequence + 1 and got[subject + ".old"] == 0
