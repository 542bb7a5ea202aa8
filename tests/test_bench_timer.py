"""bench_timer runs end to end on a small generated timer store: the store reads as the broker
writes it (every unit points at its rmq_sys_wheel_timer record with its REAL_TOPIC's hash, each
file's units end on a blank but the last, every used slot's chain holds its num units), verify
finds no error on it, the Java loop reads every unit, and the printed verdict is the one the
numbers give. (The ratio itself is timing on a tiny store: not asserted.)"""
from __future__ import annotations

import subprocess

import pytest

from benchmarks import bench_timer, timer_store
from benchmarks.verdict import check_printed
from rmqtool.formats.indexfile import java_string_hash
from rmqtool.formats.timerlog import TIMER_TOPIC, UNIT_SIZE
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.timer.chain import END_MINUS_ONE, walk_chains
from rmqtool.store.timer.timerlog import END_BLANK, scan_timer_log
from rmqtool.store.timer.wheel import read_wheel

UNITS = 2000


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return timer_store.ensure(tmp_path_factory.mktemp("timer-bench"), UNITS)


def test_the_generated_store_reads_as_the_broker_writes_it(store):
    facts = timer_store.facts(store)
    log = scan_timer_log(store / "timerlog")
    assert len(log.columns) == UNITS and log.readable_end == facts["timer_log_end"]
    assert all(f.end_reason == END_BLANK for f in log.files[:-1])
    wheel = read_wheel(store / "timerwheel")
    assert len(wheel.used) == facts["used_slots"] and wheel.file_size == 2 * 604_800 * 32
    chains = walk_chains(log, wheel.used["last_pos"].tolist(), slot_indexes=wheel.used["index"].tolist())
    assert all(c.end == END_MINUS_ONE and c.units_of_other_slots == 0 for c in chains)
    assert [len(c.positions) for c in chains] == wheel.used["num"].tolist()
    assert sum(wheel.used["num"]) == UNITS
    reader = CommitLogReader.of_store(store)
    for u in log.units[::97]:
        m = reader.read(u.offset_py)
        assert m.topic == TIMER_TOPIC and m.store_size == u.size_py and m.body_crc_ok
        assert java_string_hash(m.properties["REAL_TOPIC"]) == u.hash_code_of_real_topic
        assert int(m.properties["TIMER_OUT_MS"]) == u.curr_write_time + u.delayed_time
    assert log.files[0].file_size == timer_store.TIMER_LOG_FILE_SIZE and UNIT_SIZE == 52


def test_bench_timer_runs_on_a_small_store(store, capsys):
    out = bench_timer.run(store.parent, messages=UNITS, rounds=1)
    printed = capsys.readouterr().out
    assert [(r["code"], r["errors"]) for r in out["runs"]] == [(0, 0)] and out["java"].median > 0
    issue27, issue22 = out["verdicts"]
    assert issue27.value == issue22.value == out["verify"].median / out["java"].median
    assert (issue27.target, issue22.target) == (bench_timer.TARGET_JAVA_RATIO, bench_timer.TARGET_ISSUE22)
    check_printed(out["verdicts"], printed)


def test_the_java_loop_reads_each_units_message_and_checks_it(store, tmp_path):
    """TimerValidate --dequeue-reads (the judged loop) reads every unit's message: a record whose
    topic is changed fails it, while the loop without the reads still passes."""
    from benchmarks.java_loop import compile_loop, run_loop
    small = timer_store.ensure(tmp_path / "small", 200)
    classes = compile_loop(store.parent, bench_timer.SOURCE)  # the bench's classes (javac once a module)
    assert run_loop(classes, small, "TimerValidate", ("--dequeue-reads",)).messages == 200
    unit = scan_timer_log(small / "timerlog").units[57]
    m = CommitLogReader.of_store(small).read(unit.offset_py)
    # the record ends with its topic, the properties' length (2 bytes) and the properties
    topic_at = unit.offset_py + m.store_size - len(m.properties_raw) - 2 - len(TIMER_TOPIC)
    segment = sorted((small / "commitlog").iterdir())[0]
    with open(segment, "r+b") as f:
        f.seek(topic_at)
        assert f.read(len(TIMER_TOPIC)) == TIMER_TOPIC.encode()
        f.seek(topic_at)
        f.write(b"X")
    assert run_loop(classes, small, "TimerValidate").messages == 200
    with pytest.raises(subprocess.CalledProcessError):
        run_loop(classes, small, "TimerValidate", ("--dequeue-reads",))
