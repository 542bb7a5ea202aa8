"""dump commitlog through the CLI: wiring, output formats, exit codes, and bad input."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import REPO, V4, V5, load_truth
from rmqtool.cli.app import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def jsonl(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def one_error_line(result, needle):
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rmqtool: error: ")
    assert needle in lines[0]
    assert "Traceback" not in result.stderr + result.stdout


def test_dump_jsonl_fields_match_truth():
    truth = load_truth(V4 / "basic" / "truth.json")
    r = run("dump", "commitlog", V4 / "basic" / "store", "--format", "jsonl", "--limit", "50")
    assert r.exit_code == 0, r.stderr
    rows = jsonl(r.stdout)
    assert len(rows) == 50
    for row, tm in zip(rows, truth["truth"]["messages"]):
        assert row["record"] == "message"
        assert row["commit_log_offset"] == tm["physicalOffset"]
        assert row["topic"] == tm["topic"] and row["queue_offset"] == tm["queueOffset"]
        assert row["body"] == tm["body"]  # base64 is the JSON default
        assert row["msg_id"] == tm["msgId"] and row["uniq_key"] == tm.get("uniqKey")
        assert row["properties"] == tm["properties"]
        assert row["keys"] == (tm["keys"].split(" ") if tm.get("keys") else [])
        assert row["body_crc_ok"] is True


def test_dump_filters_and_json_array():
    truth = load_truth(V4 / "basic" / "truth.json")
    expected = [m for m in truth["truth"]["messages"] if m["topic"] == "PaymentTopic" and m["queueId"] == 3]
    r = run("dump", "commitlog", V4 / "basic" / "store", "-f", "json", "--topic", "PaymentTopic",
            "--queue", "3", "--body", "none")
    assert r.exit_code == 0
    rows = json.loads(r.stdout)
    assert [x["commit_log_offset"] for x in rows] == [m["physicalOffset"] for m in expected]
    assert all(x["body"] is None for x in rows)
    lo, hi = expected[10]["storeTimestamp"], expected[20]["storeTimestamp"]
    r = run("dump", "commitlog", V4 / "basic" / "store", "-f", "jsonl", "--topic", "PaymentTopic",
            "--queue", "3", "--begin-time", lo, "--end-time", hi)
    got = [x["commit_log_offset"] for x in jsonl(r.stdout)]
    assert got == [m["physicalOffset"] for m in expected if lo <= m["storeTimestamp"] <= hi]


def test_dump_offset_range_and_single_segment_file():
    truth = load_truth(V4 / "basic" / "truth.json")
    msgs = truth["truth"]["messages"]
    start, stop = msgs[100]["physicalOffset"], msgs[110]["physicalOffset"]
    r = run("dump", "commitlog", V4 / "basic" / "store", "-f", "jsonl", "--from-offset", start, "--to-offset", stop)
    assert [x["commit_log_offset"] for x in jsonl(r.stdout)] == [m["physicalOffset"] for m in msgs[100:110]]
    # the second segment: its messages, then the blank record the broker wrote at its end
    size = truth["messageStoreConfig"]["changedFromDefault"]["mappedFileSizeCommitLog"]
    blank = next(b for b in truth["truth"]["commitlog"]["blankMarkers"] if b["fileStartOffset"] == size)
    seg = V4 / "basic" / "store" / "commitlog" / f"{size:020d}"
    r = run("dump", "commitlog", seg, "-f", "jsonl", "--show-blank")
    rows = jsonl(r.stdout)
    assert [x["commit_log_offset"] for x in rows[:-1]] == [
        m["physicalOffset"] for m in msgs if size <= m["physicalOffset"] < 2 * size]
    assert rows[0]["commit_log_offset"] == size
    assert (rows[-1]["record"], rows[-1]["commit_log_offset"], rows[-1]["store_size"]) == (
        "blank", blank["offset"], blank["bytesToFileEnd"])


def test_dump_decompress_and_hex():
    truth = load_truth(V4 / "basic" / "truth.json")
    tm = next(m for m in truth["truth"]["messages"] if m.get("compressionType") == "ZSTD")
    r = run("dump", "commitlog", V4 / "basic" / "store", "-f", "jsonl", "--from-offset", tm["physicalOffset"],
            "--limit", "1", "--decompress")
    row = jsonl(r.stdout)[0]
    assert row["body_compression"] == "zstd" and row["body"] == tm["bodyDecompressed"]
    r = run("dump", "commitlog", V4 / "basic" / "store", "-f", "jsonl", "--limit", "1", "--body", "hex")
    import base64
    assert jsonl(r.stdout)[0]["body"] == base64.b64decode(truth["truth"]["messages"][0]["body"]).hex()


def test_table_output_is_for_people():
    r = run("dump", "commitlog", V5 / "v2-and-crc" / "store", "--limit", "3")
    assert r.exit_code == 0
    assert "commit_log_offset" in r.stdout and "OrderTopic" in r.stdout


# ---- bad input: one line naming the file, a documented exit code, never a traceback ----

def test_missing_dir(tmp_path):
    r = run("dump", "commitlog", tmp_path / "nope")
    assert r.exit_code == 8
    one_error_line(r, str(tmp_path / "nope"))


def test_empty_dir(tmp_path):
    (tmp_path / "empty").mkdir()
    r = run("dump", "commitlog", tmp_path / "empty")
    assert r.exit_code == 4
    one_error_line(r, "empty directory")


def test_random_bytes_file(tmp_path):
    cl = tmp_path / "store" / "commitlog"
    cl.mkdir(parents=True)
    (cl / "00000000000000000000").write_bytes(os.urandom(4096))
    r = run("dump", "commitlog", tmp_path / "store", "-f", "jsonl")
    assert r.exit_code == 3
    rows = jsonl(r.stdout)
    assert rows and all(x["record"] == "corrupt" for x in rows)
    assert sum(x["store_size"] for x in rows) <= 4096
    assert "Traceback" not in r.stderr


def test_truncated_segment(store_copy):
    store = store_copy(V4 / "basic" / "store")
    seg = store / "commitlog" / "00000000000000000000"
    with open(seg, "r+b") as f:
        f.truncate(5000)  # in the middle of a record; also now of odd size
    r = run("dump", "commitlog", store, "-f", "jsonl", "--body", "none")
    assert r.exit_code == 3
    rows = jsonl(r.stdout)
    corrupt = [x for x in rows if x["record"] == "corrupt"]
    assert corrupt[0]["finding"] == "recordTruncated" and corrupt[0]["file"].endswith("00000000000000000000")
    assert "segmentSizeOdd" in r.stderr
    # the later segments still decode in full
    truth = load_truth(V4 / "basic" / "truth.json")
    later = [m["physicalOffset"] for m in truth["truth"]["messages"] if m["physicalOffset"] >= 262144]
    assert [x["commit_log_offset"] for x in rows if x["record"] == "message" and x["commit_log_offset"] >= 262144] == later


@pytest.mark.parametrize("total_size", [0x7FFFFFFF, -1, -2147483648, 3])
def test_insane_total_size_is_skipped_not_fatal(store_copy, total_size):
    store = store_copy(V4 / "basic" / "store")
    seg = store / "commitlog" / "00000000000000000000"
    with open(seg, "r+b") as f:
        f.write(total_size.to_bytes(4, "big", signed=True))
    r = run("dump", "commitlog", store, "-f", "jsonl", "--body", "none")
    assert r.exit_code == 3
    rows = jsonl(r.stdout)
    assert rows[0]["record"] == "corrupt" and rows[0]["commit_log_offset"] == 0
    assert rows[0]["finding"] in ("recordSizeInvalid", "recordLengthMismatch", "recordTruncated")
    truth = load_truth(V4 / "basic" / "truth.json")
    # the scan found the next record (it proves itself by its physicalOffset field) and went on
    assert rows[1]["commit_log_offset"] == truth["truth"]["messages"][1]["physicalOffset"]
    assert [x["commit_log_offset"] for x in rows if x["record"] == "message"] == [
        m["physicalOffset"] for m in truth["truth"]["messages"][1:]]  # every message but the damaged first


def test_invalid_utf8_in_properties(store_copy):
    truth = load_truth(V4 / "basic" / "truth.json")
    tm = truth["truth"]["messages"][0]
    store = store_copy(V4 / "basic" / "store")
    seg = store / "commitlog" / "00000000000000000000"
    data = bytearray(seg.read_bytes())
    props_at = tm["storeSize"] - tm["propertiesLength"]
    data[props_at + 6] = 0xFF  # inside the KEYS value
    seg.write_bytes(bytes(data))
    r = run("dump", "commitlog", store, "-f", "jsonl", "--limit", "1")
    assert r.exit_code == 3
    row = jsonl(r.stdout)[0]
    assert row["properties_utf8_ok"] is False and "\ufffd" in row["properties"]["KEYS"]
    assert row["body_crc_ok"] is True


def test_permission_denied(monkeypatch, store_copy):
    store = store_copy(V4 / "txdelay" / "store")
    real_open = os.open
    seg = str(store / "commitlog" / "00000000000000000000")

    def deny(path, *a, **k):  # tests may run as root, where chmod does not deny
        if str(path) == seg:
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, *a, **k)
    monkeypatch.setattr(os, "open", deny)
    r = run("dump", "commitlog", store)
    assert r.exit_code == 8
    one_error_line(r, seg)


def test_kind_mismatch_names_the_right_command():
    cq = next((V4 / "basic" / "store" / "consumequeue" / "OrderTopic" / "0").iterdir())
    r = run("dump", "commitlog", cq)
    assert r.exit_code == 4
    one_error_line(r, "dump consumequeue")


def test_subprocess_smoke():
    env = dict(os.environ)
    p = subprocess.run([sys.executable, "-m", "rmqtool", "dump", "commitlog", str(V5 / "batchcq" / "store"),
                        "-f", "jsonl", "--limit", "2"], capture_output=True, text=True, env=env, cwd=REPO)
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.splitlines()) == 2
    p = subprocess.run([sys.executable, "-m", "rmqtool", "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("rmqtool ")


def test_resync_across_read_windows(store_copy, monkeypatch):
    """Damage followed by a long run of garbage: the next record is found in a later window."""
    import rmqtool.store.commitlog as commitlog
    monkeypatch.setattr(commitlog, "WINDOW", 4096)  # many small windows over the segment
    truth = load_truth(V4 / "basic" / "truth.json")
    msgs = [m for m in truth["truth"]["messages"] if m["physicalOffset"] < 262144]
    store = store_copy(V4 / "basic" / "store")
    seg = store / "commitlog" / "00000000000000000000"
    data = bytearray(seg.read_bytes())
    cut_from = msgs[3]["physicalOffset"]
    resume = next(m for m in msgs if m["physicalOffset"] > cut_from + 9000)
    data[cut_from:resume["physicalOffset"]] = b"\xee" * (resume["physicalOffset"] - cut_from)
    for fake in range(cut_from + 8, resume["physicalOffset"] - 16, 61):
        # false starts: a record magic whose physicalOffset field does not name its place
        data[fake:fake + 8] = b"\x00\x00\x01\x00\xda\xa3\x20\xa7"
    seg.write_bytes(bytes(data))
    rows = jsonl(run("dump", "commitlog", seg, "-f", "jsonl", "--body", "none").stdout)
    corrupt = [x for x in rows if x["record"] == "corrupt"]
    assert len(corrupt) == 1
    assert corrupt[0]["commit_log_offset"] == cut_from
    assert corrupt[0]["store_size"] == resume["physicalOffset"] - cut_from
    got = [x["commit_log_offset"] for x in rows if x["record"] == "message"]
    assert got == [m["physicalOffset"] for m in msgs if not cut_from <= m["physicalOffset"] < resume["physicalOffset"]]


def test_find_record_keeps_its_place_when_the_window_moves(tmp_path, monkeypatch):
    """A false start near a window's end makes the check re-read; the search must not lose its place."""
    import struct as _struct

    import rmqtool.store.commitlog as commitlog
    monkeypatch.setattr(commitlog, "WINDOW", 4096)
    data = bytearray(8192)
    data[4030:4038] = _struct.pack(">iI", 256, 0xDAA320A7)  # false start: physicalOffset field is 0
    data[4050:4058] = _struct.pack(">iI", 8192 - 4050, 0xCBD43194)  # a blank record reaching the file end
    path = tmp_path / "00000000000000000000"
    path.write_bytes(bytes(data))
    window = commitlog._FileWindow(str(path), len(data))
    try:
        window.get(0, 16)
        assert window.find_record(1, 0) == 4050
    finally:
        window.close()


# ---- --decompress: damage is a row and a finding, a missing codec is an operational error ----

def _compressed(codec):
    truth = load_truth(V4 / "basic" / "truth.json")
    return [m for m in truth["truth"]["messages"] if m.get("compressionType") == codec]


def test_body_that_does_not_decompress_is_a_row_and_a_finding(store_copy):
    """Before the fix the dump stopped at the first such body (exit 4, no file, no offset)."""
    import base64
    truth = load_truth(V4 / "basic" / "truth.json")
    tm = _compressed("ZSTD")[0]
    store = store_copy(V4 / "basic" / "store")
    seg_base = tm["physicalOffset"] // 262144 * 262144
    seg = store / "commitlog" / f"{seg_base:020d}"
    data = bytearray(seg.read_bytes())
    body = base64.b64decode(tm["body"])
    at = data.index(body, tm["physicalOffset"] - seg_base)
    data[at:at + 8] = b"\xee" * 8  # the zstd frame magic and header: no longer a frame
    seg.write_bytes(bytes(data))
    r = run("dump", "commitlog", store, "-f", "jsonl", "--decompress")
    assert r.exit_code == 3
    rows = jsonl(r.stdout)
    assert [x["commit_log_offset"] for x in rows] == [m["physicalOffset"] for m in truth["truth"]["messages"]]
    bad = next(x for x in rows if x["commit_log_offset"] == tm["physicalOffset"])
    assert "zstd" in bad["body_decompress_error"] and "body_decompressed" not in bad
    assert base64.b64decode(bad["body"]) == bytes(data[at:at + len(body)])  # shown as stored
    good = next(x for x in rows if x["commit_log_offset"] == _compressed("ZSTD")[1]["physicalOffset"])
    assert good["body"] == _compressed("ZSTD")[1]["bodyDecompressed"]
    lines = [ln for ln in r.stderr.splitlines() if "bodyDecompressFailed" in ln]
    assert len(lines) == 1 and f"{seg} at offset {tm['physicalOffset'] - seg_base}:" in lines[0]
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("codec,module,package", [("ZSTD", "zstandard", "zstandard"), ("LZ4", "lz4.frame", "lz4")])
def test_missing_codec_is_an_operational_error_with_the_pip_command(monkeypatch, codec, module, package):
    """Before the fix: exit 4 (bad input) and no file or offset named."""
    tm = _compressed(codec)[0]
    monkeypatch.setitem(sys.modules, module, None)  # import fails as when not installed
    r = run("dump", "commitlog", V4 / "basic" / "store", "-f", "jsonl", "--decompress")
    assert r.exit_code == 8
    one_error_line(r, f"pip install {package}")
    seg_base = tm["physicalOffset"] // 262144 * 262144
    assert f"{seg_base:020d} at offset {tm['physicalOffset'] - seg_base}:" in r.stderr


# ---- table output: message bytes never reach the terminal as control sequences ----

def test_table_cells_escape_control_characters(tmp_path):
    """A key and a body holding ESC, BEL, CSI and rich markup: shown escaped, never acted on.
    Before the fix the bytes reached the terminal as they were (and ``[/x]`` raised MarkupError)."""
    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.store import Store
    nasty = "\x1b[2J\x1b]0;owned\x07\u009b31m[/x]"
    with Store.open(tmp_path / "s", writable=True) as s:
        s.append(producer_message("T", nasty.encode(), keys=f"k{nasty}", tags="TagA"))
    r = run("dump", "commitlog", tmp_path / "s", "--wide")  # keys and body: wider than 80 columns
    assert r.exit_code == 0, r.stderr
    for ch in ("\x1b", "\x07", "\u009b"):
        assert ch not in r.stdout
    assert "\\x1b[2J" in r.stdout and "\\x07" in r.stdout and "\\u009b" in r.stdout and "[/" in r.stdout
    r = run("info", tmp_path / "s")  # the document tables too
    assert r.exit_code == 0 and "\x1b" not in r.stdout


@pytest.mark.parametrize("kind,directory", [("cqext", "consumequeue_ext"), ("config", "config"),
                                            ("compactionlog", "compaction"), ("compactioncq", "compaction"),
                                            ("positioncheckpoint", "compaction")])
def test_a_side_store_the_root_lacks_is_said_not_an_empty_list_alone(kind, directory):
    """A 4.9.8 store has no ConsumeQueueExt, config/ or compaction store: the dump of one is
    empty, exit 0, and says why on stderr (it said nothing, as the timer and epoch dumps did)."""
    store = V4 / "basic" / "store"
    assert not (store / directory).exists()
    r = runner.invoke(app, ["dump", kind, str(store), "-f", "json"])
    assert (r.exit_code, json.loads(r.stdout)) == (0, [])
    assert r.stderr.startswith(f"rmqtool: no {directory}/ in {store}: ")
    with_it = runner.invoke(app, ["dump", kind, str(V5 / ("cqext" if kind == "cqext" else "compaction") / "store"),
                                  "-f", "json"]) if kind != "config" else None
    if with_it is not None:  # a store with the side store: its rows, no such line
        assert json.loads(with_it.stdout) and "rmqtool: no " not in with_it.stderr
