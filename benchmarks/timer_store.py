"""The 5.x store with 1,000,000 timer units that the timer verify is timed on.

What a 5.3.3 broker's timer store holds after a burst of timer messages, all still pending
(layouts from ``formats/``, nothing from the fixtures):

* commit log: 1,000,000 records of ``rmq_sys_wheel_timer`` queue 0 as ``handleScheduleMessage``
  stores them (REAL_TOPIC over 4 topics, REAL_QID 0..3, TIMER_OUT_MS = the deliver time floored
  to the precision, the producer's TIMER_DELAY_SEC, UNIQ_KEY, TAGS), 1 ms apart, 1 GiB segment
  (sparse); built from one template record a (topic, queue) with gen.py's templates and patched
  column-wise with numpy (queue and commit log offsets, timestamps, body number and CRC,
  UNIQ_KEY digits, TIMER_OUT_MS digits);
* its consume queue (300,000 units a file) and a 5.x checkpoint;
* ``timerlog/``: one 52-byte unit a record, written as ``TimerLog.append`` writes them: a
  blank when a unit + 16 B no longer fits (size = bytes left, prevPos 0, BLANK_MAGIC_CODE),
  then the next file. ``mappedFileSizeTimerLog`` is 16 MiB here (a broker set so): the default
  100 MiB would hold every unit in one file and no blank would be written. Each unit: write
  time a few ms after its record, delayedTime to its deliver time, offsetPy/sizePy its record,
  String.hashCode of REAL_TOPIC, MAGIC_DEFAULT, prevPos = its slot's lastPos before it;
* ``timerwheel``: 2 x 604,800 slots of 32 B (sparse: only the used range written), each used
  slot its time in seconds, firstPos, lastPos, num; deliver times spread over 100,000 s
  (about 10 units a slot), none past the roll window;
* ``config/timercheck`` (read time before every deliver time, flush position at the log's end,
  queue offset 1,000,000) and ``config/timermetrics`` (pending count a topic).

A healthy store: verify finds no error on it. Built once under the work directory (about 20 s)
and reused while its parameters hold.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil
import time

import numpy as np

from benchmarks.gen import _BODY_CRC_AT, _QUEUE_RUN_AT, GenSpec, _template
from rmqtool.dispatch.rules import tags_code
from rmqtool.formats import properties as props
from rmqtool.formats.checkpoint import CheckpointFile
from rmqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE, DEFAULT_CQ_FILE_SIZE
from rmqtool.formats.indexfile import java_string_hash
from rmqtool.formats.timercheck import TIMERCHECK_FILE, TIMERCHECK_FILE_SIZE, TimerCheckpoint
from rmqtool.formats.timerlog import (BLANK_MAGIC_CODE, MAGIC_DEFAULT, MIN_BLANK_LEN, PROPERTY_TIMER_OUT_MS,
                                      TIMER_TOPIC, UNIT_SIZE, TimerLogBlank)
from rmqtool.formats.timermetrics import TIMERMETRICS_FILE
from rmqtool.formats.timerwheel import SLOT_DTYPE, SLOT_SIZE, wheel_length
from rmqtool.store.crc import crc32
from rmqtool.store.paths import segment_name

MESSAGES = 1_000_000
REAL_TOPICS = ("TimerBenchTopicA", "TimerBenchTopicB", "TimerBenchTopicC", "TimerBenchTopicD")
REAL_QUEUES = 4
TIMER_LOG_FILE_SIZE = 16 << 20  # mappedFileSizeTimerLog
SEGMENT_SIZE = 1 << 30  # mappedFileSizeCommitLog (default)
BODY_SIZE = 64
T0 = 1_800_000_000_000  # the first record's store time (ms)
ENQUEUE_LAG_MS = 5  # a unit's write time after its record's store time
FIRST_FIRE_AFTER_S = 120  # the first deliver time, after the last write
FIRE_SPREAD_S = 100_000  # deliver times spread over this many seconds (slots)
PRECISION_MS = 1000
SEED = 20261126
BUILD_MARK = "timer-store.json"
BUILD_VERSION = 1
DIRECTORY = "timer-store"
_OUT_DIGITS = 13  # TIMER_OUT_MS of every deliver time here has 13 digits


@dataclasses.dataclass(frozen=True)
class TimerRecordSpec(GenSpec):
    """A rmq_sys_wheel_timer record for one real (topic, queue), as handleScheduleMessage stores it."""
    real_topic: str = REAL_TOPICS[0]
    real_qid: int = 0

    def properties(self, i: int) -> dict[str, str]:
        return {props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: self.uniq_key(i), props.PROPERTY_CLUSTER: "DefaultCluster",
                props.PROPERTY_TAGS: "TimerTag", "TIMER_DELAY_SEC": "86400",
                PROPERTY_TIMER_OUT_MS: "9" * _OUT_DIGITS,  # a placeholder: the digits are patched per record
                props.PROPERTY_REAL_TOPIC: self.real_topic, props.PROPERTY_REAL_QUEUE_ID: str(self.real_qid)}


def params(messages: int) -> dict:
    return {"version": BUILD_VERSION, "messages": messages, "timer_log_file_size": TIMER_LOG_FILE_SIZE,
            "spread": FIRE_SPREAD_S, "topics": list(REAL_TOPICS)}


@dataclasses.dataclass(frozen=True)
class Layout:
    """What the generator decided, message by message (numpy columns)."""
    combo: np.ndarray  # index into the templates: real topic * REAL_QUEUES + real queue
    store_ts: np.ndarray
    write_ms: np.ndarray  # the unit's currWriteTime
    deliver_ms: np.ndarray  # TIMER_OUT_MS (a multiple of the precision)


def layout(messages: int) -> Layout:
    rng = np.random.default_rng(SEED)
    i = np.arange(messages, dtype=np.int64)
    store_ts = T0 + i
    write_ms = store_ts + ENQUEUE_LAG_MS
    first_s = (int(write_ms[-1]) // PRECISION_MS) + FIRST_FIRE_AFTER_S
    deliver_ms = (first_s + rng.integers(0, FIRE_SPREAD_S, messages)) * PRECISION_MS
    combo = rng.integers(0, len(REAL_TOPICS) * REAL_QUEUES, messages)
    return Layout(combo, store_ts, write_ms, deliver_ms)


def _be(values: np.ndarray, dtype: str) -> np.ndarray:
    """Big-endian bytes of each value, one row a value."""
    a = np.ascontiguousarray(values, dtype=dtype)
    return a.view(np.uint8).reshape(len(a), -1)


def _digits(values: np.ndarray, n: int, base: int, alphabet: bytes) -> np.ndarray:
    """n digits of each value in ``base``, most significant first, as ASCII bytes."""
    out = np.empty((len(values), n), dtype=np.uint8)
    table = np.frombuffer(alphabet, dtype=np.uint8)
    v = values.astype(np.int64)
    for k in range(n - 1, -1, -1):
        out[:, k] = table[v % base]
        v = v // base
    return out


def write_commit_log(store: pathlib.Path, lay: Layout) -> tuple[int, int]:
    """The records, in one segment; (record size, written end)."""
    specs = [TimerRecordSpec(topics=(TIMER_TOPIC,), queues=1, body_size=BODY_SIZE, start_timestamp=T0,
                             real_topic=t, real_qid=q) for t in REAL_TOPICS for q in range(REAL_QUEUES)]
    templates = [_template(s, 0) for s in specs]
    size = len(templates[0].raw)
    assert all(len(t.raw) == size and t.body_at == templates[0].body_at and t.uniq_at == templates[0].uniq_at
               for t in templates), "templates of one size: the real topics and queues are of one length"
    t0 = templates[0]
    out_at = t0.raw.index(b"9" * _OUT_DIGITS, t0.body_at + BODY_SIZE)
    table = np.frombuffer(b"".join(t.raw for t in templates), dtype=np.uint8).reshape(len(templates), size)
    body = np.frombuffer(specs[0].body_pattern(), dtype=np.uint8)
    n = len(lay.combo)
    if n * size > SEGMENT_SIZE:
        raise ValueError("the bench writes one commit log segment")
    directory = store / "commitlog"
    directory.mkdir(parents=True)
    step = 100_000
    with open(directory / segment_name(0), "wb") as f:
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            i = np.arange(lo, hi, dtype=np.int64)
            rows = table[lay.combo[lo:hi]]
            # queueOffset, physicalOffset, sysFlag (0), bornTimestamp: gen.py's run of fields
            rows[:, _QUEUE_RUN_AT:_QUEUE_RUN_AT + 8] = _be(i, ">i8")
            rows[:, _QUEUE_RUN_AT + 8:_QUEUE_RUN_AT + 16] = _be(i * size, ">i8")
            rows[:, _QUEUE_RUN_AT + 20:_QUEUE_RUN_AT + 28] = _be(lay.store_ts[lo:hi] - 1, ">i8")
            rows[:, t0.store_ts_at:t0.store_ts_at + 8] = _be(lay.store_ts[lo:hi], ">i8")
            rows[:, t0.body_at:t0.body_at + 8] = _be(i, ">i8")
            rows[:, t0.uniq_at:t0.uniq_at + 12] = _digits(i, 12, 16, b"0123456789ABCDEF")
            rows[:, out_at:out_at + _OUT_DIGITS] = _digits(lay.deliver_ms[lo:hi], _OUT_DIGITS, 10, b"0123456789")
            bodies = rows[:, t0.body_at:t0.body_at + BODY_SIZE]
            assert (bodies[:, 8:] == body[8:]).all()
            data = bodies.tobytes()
            crcs = np.fromiter((crc32(data[k:k + BODY_SIZE]) for k in range(0, len(data), BODY_SIZE)),
                               dtype=np.int64, count=len(bodies))
            rows[:, _BODY_CRC_AT:_BODY_CRC_AT + 4] = _be(crcs.astype(np.uint32), ">u4")
            f.write(rows.tobytes())
        f.truncate(SEGMENT_SIZE)
    return size, n * size


def write_consume_queue(store: pathlib.Path, n: int, size: int) -> None:
    directory = store / "consumequeue" / TIMER_TOPIC / "0"
    directory.mkdir(parents=True)
    units = np.zeros(n, dtype=[("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
    assert units.itemsize == CQ_STORE_UNIT_SIZE
    units["offset"] = np.arange(n, dtype=np.int64) * size
    units["size"] = size
    units["tags_code"] = tags_code("TimerTag")
    per_file = DEFAULT_CQ_FILE_SIZE // CQ_STORE_UNIT_SIZE
    for lo in range(0, n, per_file):
        with open(directory / segment_name(lo * CQ_STORE_UNIT_SIZE), "wb") as f:
            f.write(units[lo:lo + per_file].tobytes())
            f.truncate(DEFAULT_CQ_FILE_SIZE)


def unit_positions(n: int, file_size: int = TIMER_LOG_FILE_SIZE) -> tuple[np.ndarray, int]:
    """Where TimerLog.append puts n units (a blank ends a file when a unit + 16 B no longer
    fits), and the write position after the last."""
    per_file = (file_size - UNIT_SIZE - MIN_BLANK_LEN) // UNIT_SIZE + 1
    k = np.arange(n, dtype=np.int64)
    positions = (k // per_file) * file_size + (k % per_file) * UNIT_SIZE
    end = int(positions[-1]) + UNIT_SIZE if n else 0
    return positions, end


def write_timer_log(store: pathlib.Path, lay: Layout, record_size: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The units and blanks; (positions, prevPos, write end)."""
    n = len(lay.combo)
    positions, end = unit_positions(n)
    slots = lay.deliver_ms // PRECISION_MS  # one slot a second (no wrap: the spread is under 14 days)
    order = np.lexsort((positions, slots))
    same = np.concatenate(([False], slots[order][1:] == slots[order][:-1]))
    prev = np.full(n, -1, dtype=np.int64)
    prev[order[same]] = positions[order][np.flatnonzero(same) - 1]
    hashes = np.array([java_string_hash(t) for t in REAL_TOPICS], dtype=np.int32)[lay.combo // REAL_QUEUES]
    units = np.zeros(n, dtype=[("size", ">i4"), ("prev_pos", ">i8"), ("magic", ">i4"), ("curr_write_time", ">i8"),
                               ("delayed_time", ">i4"), ("offset_py", ">i8"), ("size_py", ">i4"),
                               ("hash", ">i4"), ("reserved", ">i8")])
    assert units.itemsize == UNIT_SIZE
    units["size"] = UNIT_SIZE
    units["prev_pos"] = prev
    units["magic"] = MAGIC_DEFAULT
    units["curr_write_time"] = lay.write_ms
    units["delayed_time"] = lay.deliver_ms - lay.write_ms
    units["offset_py"] = np.arange(n, dtype=np.int64) * record_size
    units["size_py"] = record_size
    units["hash"] = hashes
    directory = store / "timerlog"
    directory.mkdir(parents=True)
    files = positions // TIMER_LOG_FILE_SIZE
    bounds = np.searchsorted(files, np.arange(int(files[-1]) + 2))
    for k in range(int(files[-1]) + 1):
        part = units[bounds[k]:bounds[k + 1]]
        with open(directory / segment_name(k * TIMER_LOG_FILE_SIZE), "wb") as f:
            f.write(part.tobytes())
            if k < int(files[-1]):
                left = TIMER_LOG_FILE_SIZE - len(part) * UNIT_SIZE
                f.write(TimerLogBlank.build(dict(size=left, prev_pos=0, magic=BLANK_MAGIC_CODE)))
            f.truncate(TIMER_LOG_FILE_SIZE)  # mapped at full size, zeros after the write position
    return positions, prev, end


def write_wheel(store: pathlib.Path, lay: Layout, positions: np.ndarray) -> int:
    """The used slots (firstPos, lastPos, num of each second's units); returns how many."""
    steps = lay.deliver_ms // PRECISION_MS
    used, first_idx, counts = np.unique(steps, return_index=True, return_counts=True)
    last_idx = len(steps) - 1 - np.unique(steps[::-1], return_index=True)[1]
    total = wheel_length() // SLOT_SIZE
    index = used % total
    lo, hi = int(index.min()), int(index.max()) + 1
    assert len(np.unique(index)) == len(index), "no two deliver seconds share a slot"
    region = np.zeros(hi - lo, dtype=np.dtype(SLOT_DTYPE))
    region["time_value"][index - lo] = used
    region["first_pos"][index - lo] = positions[first_idx]  # units are in position order
    region["last_pos"][index - lo] = positions[last_idx]
    region["num"][index - lo] = counts
    with open(store / "timerwheel", "wb") as f:
        f.seek(lo * SLOT_SIZE)
        f.write(region.tobytes())
        f.truncate(wheel_length())  # the rest a hole
    return len(used)


def write_config(store: pathlib.Path, lay: Layout, log_end: int) -> None:
    config = store / "config"
    config.mkdir()
    last_write = int(lay.write_ms[-1])
    read_time = (last_write // PRECISION_MS + 1) * PRECISION_MS  # dequeue caught up with the clock
    cp = TimerCheckpoint.build(dict(last_read_time_ms=read_time, last_timer_log_flush_pos=log_end,
                                    last_timer_queue_offset=len(lay.combo), master_timer_queue_offset=len(lay.combo),
                                    data_version_state_version=0, data_version_timestamp=last_write,
                                    data_version_counter=len(lay.combo)))
    (config / TIMERCHECK_FILE).write_bytes(cp.ljust(TIMERCHECK_FILE_SIZE, b"\0"))
    topics = lay.combo // REAL_QUEUES
    counts = {t: {"count": int((topics == k).sum()), "timeStamp": int(lay.write_ms[topics == k].max())}
              for k, t in enumerate(REAL_TOPICS)}
    text = json.dumps({"dataVersion": {"counter": len(lay.combo), "stateVersion": 0, "timestamp": last_write},
                       "timingCount": counts}, separators=(",", ":"))
    (config / TIMERMETRICS_FILE).write_text(text)


def write_checkpoint(store: pathlib.Path, lay: Layout, written_end: int) -> None:
    last = int(lay.store_ts[-1])
    (store / "checkpoint").write_bytes(CheckpointFile.build(dict(
        physic_msg_timestamp=last, logics_msg_timestamp=last, index_msg_timestamp=0, master_flushed_offset=0,
        confirm_phy_offset=written_end, padding=bytes(CheckpointFile.sizeof() - 40))))


def build(store: pathlib.Path, messages: int) -> dict:
    if store.exists():
        shutil.rmtree(store)
    store.mkdir(parents=True)
    lay = layout(messages)
    size, written_end = write_commit_log(store, lay)
    write_consume_queue(store, messages, size)
    positions, _, log_end = write_timer_log(store, lay, size)
    slots = write_wheel(store, lay, positions)
    write_config(store, lay, log_end)
    write_checkpoint(store, lay, written_end)
    (store / "index").mkdir()
    last_write = int(lay.write_ms[-1])
    return {"written_end": written_end, "record_size": size, "timer_log_end": log_end, "used_slots": slots,
            "units": messages, "now_ms": (last_write // PRECISION_MS + FIRST_FIRE_AFTER_S // 2) * PRECISION_MS,
            "first_fire_ms": int(lay.deliver_ms.min())}


def ensure(workdir: pathlib.Path, messages: int = MESSAGES) -> pathlib.Path:
    """The store under ``workdir``, built when missing or built with other parameters."""
    store = pathlib.Path(workdir) / DIRECTORY
    mark = store / BUILD_MARK
    wanted = params(messages)
    built = json.loads(mark.read_text()) if mark.exists() else {}
    if {k: built.get(k) for k in wanted} != wanted:
        started = time.perf_counter()
        print(f"timer store: building {messages:,} timer messages and units in {store} (once) ...", flush=True)
        facts = build(store, messages)
        mark.write_text(json.dumps({**wanted, **facts}))
        print(f"timer store: built in {time.perf_counter() - started:.1f} s", flush=True)
    return store


def facts(store: pathlib.Path) -> dict:
    """What the build wrote: written_end, record_size, timer_log_end, used_slots, units, now_ms (the
    clock verify's next start is put at: after the last write, before the first deliver time)."""
    return json.loads((pathlib.Path(store) / BUILD_MARK).read_text())
