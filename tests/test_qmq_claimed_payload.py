"""A QMQ record whose damaged payload size claims most of its 1 GiB segment (zeros, as QMQ maps
a sparse or short file): the commands that need no payload bytes never hold them. verify and
recover's plan once copied the claimed payload (780 MB) to take its CRC, and verify's findings
took it again; a random-damage run was killed for memory."""
from __future__ import annotations

import pathlib
import tracemalloc
import zlib

from hypothesis import given, strategies as st

from conftest import FIXTURES
from helpers import cli_runner, expand_store, qmq_records
from rmqtool.cli.app import app
from rmqtool.recovery.qmq.javabuf import JavaBuffer

CLAIMED = 600 << 20  # a payload size inside the 1 GiB segment, far past what the file holds
HELD = 64 << 20  # what a command may hold at its peak (Python's allocations, numpy's included)


@given(data=st.binary(max_size=300), start=st.integers(0, 50), skip=st.integers(0, 50), n=st.integers(0, 3 << 20))
def test_the_crc_without_the_bytes_is_the_crc_of_the_bytes(data, start, skip, n):
    limit = start + skip + n + 7
    ours, theirs = JavaBuffer(data, start, limit), JavaBuffer(data, start, limit)
    ours.set_position(skip)
    theirs.set_position(skip)
    assert ours.get_crc32(n) == zlib.crc32(theirs.get_bytes(n))
    assert ours.position == theirs.position


def test_verify_and_recover_hold_no_claimed_payload(tmp_path):
    store = expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "store")
    record = qmq_records(store)[0]
    size_at = record.position + record.header_size - 4  # payload size: the header's last field
    with open(record.path, "r+b") as f:
        f.seek(size_at)
        assert int.from_bytes(f.read(4), "big") == record.payload_size
        f.seek(size_at)
        f.write(CLAIMED.to_bytes(4, "big"))
    for command in (["verify"], ["recover"]):
        tracemalloc.start()
        try:
            r = cli_runner().invoke(app, [*command, str(store), "-f", "jsonl"])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert r.exit_code == 3, (command, r.stderr[-500:])
        assert peak < HELD, (command, peak)


RESIDENT = 256 << 20  # the peak resident set of a process that ran them all (the interpreter and numpy: ~50 MB)


def test_no_command_reads_the_claimed_zeros(tmp_path):
    """The claimed payload runs into the segment's trailing hole: no command reads it, through
    Python's memory or the mapping (the record kernel's CRC read the hole's pages, 600 MB of
    page cache in the resident set of verify, recover, dump, salvage, report and query), and
    dump says the payload was not read."""
    import json
    import os
    import subprocess
    import sys
    store = expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "store")
    record = qmq_records(store)[0]
    with open(record.path, "r+b") as f:
        f.seek(record.position + record.header_size - 4)
        f.write(CLAIMED.to_bytes(4, "big"))
    commands = [["verify", str(store)], ["recover", str(store)], ["dump", "messagelog", str(store / "messagelog")],
                ["salvage", str(store), "--out", str(tmp_path / "kept.jsonl")], ["report", str(store)],
                ["query", "--msg-id", "no-such-id", str(store)]]
    script = (
        "import json, sys\n"
        "from helpers import cli_runner\n"
        "from rmqtool.cli.app import app\n"
        "out = []\n"
        "for args in json.loads(sys.argv[1]):\n"
        "    r = cli_runner().invoke(app, [*args, '-f', 'jsonl'])\n"
        "    out.append([r.exit_code, r.stdout if args[0] == 'dump' else ''])\n"
        "hwm = next(int(l.split()[1]) << 10 for l in open('/proc/self/status') if l.startswith('VmHWM'))\n"
        "print(json.dumps([hwm, out]))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pathlib.Path(__file__).parent), *sys.path])}
    done = subprocess.run([sys.executable, "-c", script, json.dumps(commands)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    peak, results = json.loads(done.stdout.splitlines()[-1])
    assert [code for code, _ in results] == [3, 3, 3, 3, 3, 1]
    assert peak < RESIDENT, peak
    row = json.loads(results[2][1].splitlines()[0])
    assert row["payload_length"] == CLAIMED and row["payload_crc_ok"] is False and row["body"] is None
    assert "not read" in row["payload_error"]


def test_salvage_keeps_the_records_a_damaged_size_claims(tmp_path):
    """The first record's size claims most of the segment, over every record after it: salvage
    rejects it and keeps each of the others (their CRCs prove them), where it once kept none,
    dump and query --msg-id show them, and verify says their units point at them."""
    import json
    store = expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "store")
    records = qmq_records(store)
    first = records[0]
    rows = cli_runner().invoke(app, ["dump", "messagelog", str(store / "messagelog"), "-f", "jsonl"]).stdout
    message_id = json.loads(rows.splitlines()[1])["message_id"]  # the second record's
    with open(first.path, "r+b") as f:
        f.seek(first.position + first.header_size - 4)
        f.write(CLAIMED.to_bytes(4, "big"))
    dumped = cli_runner().invoke(app, ["dump", "messagelog", str(store / "messagelog"), "-f", "jsonl"])
    assert [json.loads(line)["message_log_offset"] for line in dumped.stdout.splitlines()] == \
        [rec.offset for rec in records]  # the damaged one, then each it claims
    verified = cli_runner().invoke(app, ["verify", str(store), "-f", "jsonl"])
    mismatched = [f for f in map(json.loads, verified.stdout.splitlines()) if f["finding"] == "consumerLogUnitMismatch"]
    assert [(f["subject"], f["sequences"]) for f in mismatched] == [(first.subject, 1)]  # the others point at records
    found = cli_runner().invoke(app, ["query", "--msg-id", message_id, str(store), "-f", "jsonl"])
    assert found.exit_code == 0 and json.loads(found.stdout)["message_log_offset"] == records[1].offset
    r = cli_runner().invoke(app, ["salvage", str(store), "--out", str(tmp_path / "kept.jsonl"), "-f", "json"])
    assert r.exit_code == 3, r.stderr[-500:]
    doc = json.loads(r.stdout)
    kept = [json.loads(line)["message_log_offset"] for line in (tmp_path / "kept.jsonl").read_text().splitlines()]
    assert kept == [rec.offset for rec in records[1:]]
    assert [x["message_log_offset"] for x in doc["messages_rejected"]] == [first.offset]
    assert doc["missing_sequences"] == {first.subject: [[first.sequence, first.sequence]]}


def test_every_reader_ends_the_log_where_the_writing_ended_and_sees_every_record(tmp_path):
    """The second-last record's size claims zeros past the last one: each reader reports the
    written end the engine read back (not the claim's end) and counts the last record, which
    the claim covers and its CRC proves. recover's plan once said "written end" for the
    claim's end and one record dropped where verify said two; info and Spark's export missed
    the covered record."""
    import json

    from conftest import load_truth
    from rmqtool.spark.qmq.export import MessageLogTask, export_message_log_task
    from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
    from rmqtool.store.qmq.segments import list_log

    truth = load_truth(FIXTURES / "qmq" / "basic" / "truth.json")["readBack"]["messageLog"]
    store = expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "store")
    records = qmq_records(store)
    damaged, covered = records[-2], records[-1]
    with open(damaged.path, "r+b") as f:
        f.seek(damaged.position + damaged.header_size - 4)
        f.write((damaged.payload_size + (1 << 20)).to_bytes(4, "big"))
    expected = [(damaged.offset, damaged.subject, damaged.sequence),
                (covered.offset, covered.subject, covered.sequence)]

    verified = [json.loads(line) for line in
                cli_runner().invoke(app, ["verify", str(store), "-f", "jsonl"]).stdout.splitlines()]
    cut = next(f for f in verified if f["finding"] == "recoveryCutsMessageLog")
    assert f"before its written end {truth['maxOffset']}:" in cut["message"] and cut["records"] == len(expected)
    plan = json.loads(cli_runner().invoke(app, ["recover", str(store), "-f", "json"]).stdout)
    log = plan["broker_start"]["message_log"]
    assert (log["written_end"], log["cut_at"]) == (truth["maxOffset"], damaged.offset)
    assert [(r["message_log_offset"], r["subject"], r["sequence"]) for r in plan["records_dropped"]] == expected
    info = json.loads(cli_runner().invoke(app, ["info", str(store), "-f", "json"]).stdout)["message_log"]
    assert (info["written_end"], info["records"]) == (truth["maxOffset"], len(truth["records"]))
    segment = list_log(store / "messagelog", PER_SEGMENT_FILE_SIZE).segments[-1]
    summary = export_message_log_task(MessageLogTask("s", str(store), segment), str(tmp_path / "out"))
    assert summary.messages == len(truth["records"])


def test_a_payload_its_crc_proves_past_the_written_bytes_ends_the_log_for_every_reader(tmp_path):
    """The last record's payload grown into the zeros after it, its CRC field made that of the
    grown payload (QMQ's validator passes it, its payload ending in zero bytes): info, which
    reads headers only, took the written bytes' end for the log's end where verify and recover
    took the record's; info now takes the CRC of such a record too."""
    import json
    import zlib

    store = expand_store(FIXTURES / "qmq" / "basic" / "store", tmp_path / "store")
    last = qmq_records(store)[-1]
    grown = last.payload_size + 4096
    with open(last.path, "r+b") as f:
        f.seek(last.position + last.header_size - 12)  # payloadCrc int64, payloadSize int32: the header's end
        f.write(zlib.crc32(last.payload + bytes(4096)).to_bytes(8, "big") + grown.to_bytes(4, "big"))
    end = last.offset + last.header_size + grown
    info = json.loads(cli_runner().invoke(app, ["info", str(store), "-f", "json"]).stdout)["message_log"]
    plan = json.loads(cli_runner().invoke(app, ["recover", str(store), "-f", "json"]).stdout)
    assert info["written_end"] == plan["broker_start"]["message_log"]["written_end"] == end
