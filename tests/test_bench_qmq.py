"""bench_qmq runs end to end on a small generated QMQ store: the store is one rmqtool reads
as QMQ's layouts say (verify: exit 0, no finding of damage), the Java loop reads every
record, and the printed verdict is the one the numbers give. (The ratio itself is timing on a
tiny store: not asserted.)"""
from __future__ import annotations

import json

from benchmarks import bench_qmq, qmq_store
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


def test_bench_qmq_runs_on_a_small_store(tmp_path, capsys):
    out = bench_qmq.run(tmp_path, messages=2000, rounds=1, java_rounds=1)
    printed = capsys.readouterr().out
    assert out["verify"]["code"] == 0 and out["java"] > 0
    (v,) = out["verdicts"]
    assert v.value == out["verify"]["seconds"] / out["java"]
    check_printed(out["verdicts"], printed)
