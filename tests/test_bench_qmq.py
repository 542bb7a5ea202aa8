"""bench_qmq runs end to end on a small generated QMQ store: the store is one rmqtool reads
as QMQ's layouts say (verify: exit 0, no finding of damage), the Java loop reads every
record (with QMQ's CRC and with the JDK's) and stops where QMQ's validator stops, and the
printed verdict is the one the medians give. (The ratio itself is timing on a
tiny store: not asserted.)"""
from __future__ import annotations

import json

import pytest

from benchmarks import bench_qmq, java_loop, qmq_store
from benchmarks.verdict import check_printed
from helpers import cli_runner
from rmqtool.cli.app import app


def test_the_generated_store_reads_as_qmq_writes_it(tmp_path):
    store = qmq_store.ensure(tmp_path, messages=500)
    r = cli_runner().invoke(app, ["dump", "messagelog", str(store), "-f", "jsonl", "--body", "none"])
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert r.exit_code == 0 and len(rows) == 500 and all(x["payload_crc_ok"] for x in rows)
    assert {x["subject"] for x in rows} == set(qmq_store.SUBJECTS)
    assert rows[-1]["message_log_offset"] + rows[-1]["store_size"] == qmq_store.written_end(store)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """One work directory for the module: the Java loop is compiled once."""
    return tmp_path_factory.mktemp("bench")


def test_bench_qmq_runs_on_a_small_store(workdir, capsys):
    out = bench_qmq.run(workdir, messages=2000, rounds=1)  # the bench's 3 rounds: timing, not asserted
    printed = capsys.readouterr().out
    assert [r["code"] for r in out["runs"]["verify"]] == [0]
    assert {(s.messages, s.bytes) for side in ("java", "jdk") for s in out["runs"][side]} == \
        {(2000, qmq_store.written_end(workdir / qmq_store.DIRECTORY))}
    assert out["verify"].seconds == tuple(r["seconds"] for r in out["runs"]["verify"])
    assert out["java"].seconds == tuple(s.seconds for s in out["runs"]["java"])
    (v,) = out["verdicts"]
    assert v.value == out["verify"].median / out["java"].median
    check_printed(out["verdicts"], printed)


def test_the_java_loop_stops_where_qmqs_validator_stops(workdir, tmp_path):
    """Both CRCs of the loop (QMQ's pure-Java table CRC, the JDK's) stop at the first record
    whose payload no longer matches its CRC (that they read every record of a clean store,
    the bench itself checks on every run)."""
    store = qmq_store.ensure(tmp_path, messages=300)
    classes = java_loop.compile_loop(workdir, bench_qmq.SOURCE)
    log = store / "messagelog"
    r = cli_runner().invoke(app, ["dump", "messagelog", str(store), "-f", "jsonl", "--body", "none"])
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    damaged = rows[123]
    segment = log / f"{0:020d}"
    with open(segment, "r+b") as f:  # the last byte of record 123's payload
        f.seek(damaged["message_log_offset"] + damaged["store_size"] - 1)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0x20]))
    for crc in ("qmq", "jdk"):
        scan = java_loop.run_loop(classes, log, "QmqValidate", (crc,))
        assert (scan.messages, scan.bytes) == (123, damaged["message_log_offset"])
