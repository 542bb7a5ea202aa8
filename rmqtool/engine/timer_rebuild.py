"""redispatch --timer: the timer log, wheel and timercheck rebuilt from the commit log.

What ``TimerMessageStore.doEnqueue`` writes for the pending timer messages
(:func:`rmqtool.store.timer.pending.timer_messages`), enqueued in commit log order at one
write time: the time dequeue resumes (timercheck's lastReadTimeMs; without it the newest
timer record or delivery in the log), so no unit lands in a slot dequeue has passed:

* a unit each: size 52, prevPos = its slot's lastPos (-1 first), magic MAGIC_DEFAULT, or
  MAGIC_ROLL with the deliver time moved to write + window (window/2 when the excess is below
  window/3) when deliver - write >= timerRollWindowSlot steps (``--broker-config``'s window,
  else the broker's default: the store does not show it); a deliver time already past goes to
  the write time's slot (due at once, as putMessageToTimerWheel hands it on at once);
* a blank when a unit + 16 B no longer fits a file (TimerLog.append), files in the size the
  store's timer log files show (else the broker's 100 MB default: ``--apply`` refuses it
  unless ``--assume-defaults``);
* the wheel's slots: time value, firstPos, lastPos, num (+1 a unit);
* timercheck: lastReadTimeMs = the write time, lastTimerLogFlushPos = the log's end,
  lastTimerQueueOffset = masterTimerQueueOffset = one past the timer queue's last record.

Delivered, recalled, superseded (rolled) and overdue messages get no unit: nothing is
delivered twice. The broker's recover revises the timer queue offset to the last unit's
record + 1, so when the timer queue's last record is not pending, one more unit points at it:
MAGIC_DELETE (dequeue reads it as a delete and puts nothing), in the slot just before the
write time, which dequeue never reads again (an "anchor"); without it the next start would
enqueue, and deliver again, every record after the last pending one.
"""
from __future__ import annotations

import dataclasses
import pathlib

from rmqtool.engine.store_sizes import BROKER_CONFIG, DEFAULT, FILES, Size
from rmqtool.errors import UsageError
from rmqtool.formats.broker_conf import MAPPED_FILE_SIZE_TIMER_LOG, TIMER_PRECISION_MS, TIMER_ROLL_WINDOW_SLOT
from rmqtool.formats.indexfile import java_string_hash
from rmqtool.formats.timercheck import TIMERCHECK_FILE, TIMERCHECK_FILE_SIZE, TIMERCHECK_STRUCT
from rmqtool.formats.timerlog import (BLANK_MAGIC_CODE, MAGIC_DEFAULT, MAGIC_DELETE, MAGIC_ROLL, MIN_BLANK_LEN,
                                      UNIT_SIZE, UNIT_STRUCT, TimerLogBlank)
from rmqtool.formats.timerwheel import (DEFAULT_TIMER_PRECISION_MS, DEFAULT_TIMER_ROLL_WINDOW_SLOT, SLOT_SIZE,
                                        SLOT_STRUCT, SLOTS_TOTAL, slot_index, time_value, wheel_length)
from rmqtool.recovery.timer.load import roll_window_bounded, timer_settings_said
from rmqtool.store.broker_conf import config_given
from rmqtool.store.paths import CONFIG_DIR, segment_name
from rmqtool.store.timer.files import TIMERLOG_DIR, TIMERWHEEL_FILE, find_timer_store
from rmqtool.store.timer.pending import TimerMessages, TimerRecord, timer_messages
from rmqtool.store.timer.timercheck import read_timercheck
from rmqtool.store.timer.timerlog import scan_timer_log

DEFAULT_MAPPED_FILE_SIZE_TIMER_LOG = 100 * 1024 * 1024  # MessageStoreConfig.mappedFileSizeTimerLog


@dataclasses.dataclass(frozen=True, slots=True)
class PlannedUnit:
    position: int
    prev_pos: int
    magic: int
    curr_write_time: int
    delayed_time: int  # relative to curr_write_time
    record: TimerRecord
    anchor: bool = False  # the unit that keeps recover's queue offset at the queue's end

    @property
    def deliver_time_ms(self) -> int:
        return self.curr_write_time + self.delayed_time


@dataclasses.dataclass
class TimerLayout:
    write_time_ms: int
    write_time_from: str  # "timercheck" or "commitlog"
    settings: RebuildSettings
    units: list[PlannedUnit]
    blanks: list[tuple[int, int]]  # (position, size)
    slots: dict  # slot index -> [time value, firstPos, lastPos, num]
    log_end: int
    queue_offset: int  # lastTimerQueueOffset written
    messages: TimerMessages


@dataclasses.dataclass(frozen=True)
class RebuildSettings:
    """The MessageStoreConfig settings a rebuild writes with, and where each came from."""
    file_size: Size  # mappedFileSizeTimerLog
    roll_window: Size  # timerRollWindowSlot
    precision_ms: Size  # timerPrecisionMs

    def to_json(self) -> dict:
        return {"mapped_file_size_timer_log": self.file_size.to_json(),
                "timer_roll_window_slot": self.roll_window.to_json(), "timer_precision_ms": self.precision_ms.to_json()}


def timer_settings(root, conf=None) -> RebuildSettings:
    """mappedFileSizeTimerLog from the store's timer log files (the broker config must
    agree), else the config, else the broker's default; the roll window and precision from
    the config, else the defaults (the store shows neither). ``conf``: the broker config,
    else the one given for the store (``--broker-config``)."""
    conf = conf if conf is not None else config_given(root)
    said = timer_settings_said(conf)
    if conf is not None:
        size_said = conf.int_setting(MAPPED_FILE_SIZE_TIMER_LOG, DEFAULT_MAPPED_FILE_SIZE_TIMER_LOG)
        if size_said is not None:
            said[MAPPED_FILE_SIZE_TIMER_LOG] = size_said

    def setting(key: str, default: int) -> Size:
        return Size(said[key][0], BROKER_CONFIG, said[key][1]) if key in said else \
            Size(default, DEFAULT, f"the broker's default {key}: the store does not show it")

    timer = find_timer_store(root)
    size = setting(MAPPED_FILE_SIZE_TIMER_LOG, DEFAULT_MAPPED_FILE_SIZE_TIMER_LOG)
    if timer.timer_log_dir is not None:
        log = scan_timer_log(timer.timer_log_dir)
        if log.file_size:
            found = Size(log.file_size, FILES, str(log.files[0].path))
            if size.taken_from == BROKER_CONFIG and size.value != found.value:
                raise UsageError(f"the store's timer log file size is {found.value} ({found.shown_by}), not "
                                 f"{size.value} ({size.shown_by})", timer.timer_log_dir)
            size = found
    return RebuildSettings(size, setting(TIMER_ROLL_WINDOW_SLOT, DEFAULT_TIMER_ROLL_WINDOW_SLOT),
                         setting(TIMER_PRECISION_MS, DEFAULT_TIMER_PRECISION_MS))


def plan_timer(view, settings: RebuildSettings | None = None, *, file_size: Size | None = None) -> TimerLayout:
    """The units, blanks and slots doEnqueue writes for the store's pending timer messages
    (``settings``: :func:`timer_settings` when not given; ``file_size`` replaces its file size)."""
    settings = settings or timer_settings(view.root)
    if file_size is not None:
        settings = dataclasses.replace(settings, file_size=file_size)
    precision_ms = settings.precision_ms.value
    timer = find_timer_store(view.root)
    check = read_timercheck(timer.timercheck) if timer.timercheck is not None else None
    read_time = check.last_read_time_ms if check is not None and check.last_read_time_ms > 0 else None
    messages = timer_messages(view, read_time, precision_ms)
    if not timer.exists and messages.last_queue_record is None:
        raise UsageError("no timer store to rebuild: no timer file and no rmq_sys_wheel_timer record", view.root)
    if read_time is not None:
        write, write_from = read_time, "timercheck"
    else:
        write, write_from = messages.newest_timestamp or 0, "commitlog"
    write = write // precision_ms * precision_ms  # formatTimeMs
    size = settings.file_size
    window = roll_window_bounded(settings.roll_window.value)
    slots: dict[int, list[int]] = {}
    units, blanks = [], []
    pos = 0

    def append(record: TimerRecord, deliver: int, magic: int, anchor: bool = False) -> None:
        nonlocal pos
        left = size.value - pos % size.value
        if left < UNIT_SIZE + MIN_BLANK_LEN:  # TimerLog.append: a blank, then the next file
            blanks.append((pos, left))
            pos += left
        index = slot_index(deliver, precision_ms)
        slot = slots.get(index)
        if slot is None or slot[0] != time_value(deliver, precision_ms):  # getSlot: another time is an empty slot
            slot = slots[index] = [time_value(deliver, precision_ms), -1, -1, 0]
        units.append(PlannedUnit(pos, slot[2], magic, write, deliver - write, record, anchor))
        slot[1] = pos if slot[1] == -1 else slot[1]
        slot[2] = pos
        slot[3] += -1 if magic & MAGIC_DELETE else 1
        pos += UNIT_SIZE

    for record in messages.pending:
        deliver, magic = max(record.timer_out_ms, write), MAGIC_DEFAULT
        if deliver - write >= window * precision_ms:  # doEnqueue's roll
            magic |= MAGIC_ROLL
            excess = deliver - write - window * precision_ms
            deliver = write + (window // 2 if excess < window // 3 * precision_ms else window) * precision_ms
        append(record, deliver, magic)
    last = messages.last_queue_record
    if last is not None and (not units or units[-1].record is not last):
        append(last, write - precision_ms, MAGIC_DELETE, anchor=True)
    queue_offset = last.queue_offset + 1 if last is not None else (check.last_timer_queue_offset if check else 0)
    return TimerLayout(write, write_from, settings, units, blanks, slots, pos, queue_offset, messages)


def write_timer(layout: TimerLayout, staging: pathlib.Path, old_check: bytes | None) -> list[pathlib.Path]:
    """The timer log files, the wheel and timercheck of ``layout``, written into ``staging``."""
    made = []
    log_dir = staging / TIMERLOG_DIR
    log_dir.mkdir(parents=True, exist_ok=True)
    size = layout.settings.file_size.value
    files: dict[int, bytearray] = {}

    def at(pos: int, length: int) -> tuple[bytearray, int]:
        """The file's bytes so far (only up to what is written: a file is 100 MB by default), grown to hold these."""
        base = pos - pos % size
        buf = files.setdefault(base, bytearray())
        rel = pos - base
        if len(buf) < rel + length:
            buf.extend(bytes(rel + length - len(buf)))
        return buf, rel

    for u in layout.units:
        buf, rel = at(u.position, UNIT_SIZE)
        buf[rel:rel + UNIT_SIZE] = UNIT_STRUCT.pack(UNIT_SIZE, u.prev_pos, u.magic, u.curr_write_time, u.delayed_time,
                                                    u.record.commit_log_offset, u.record.size,
                                                    java_string_hash(u.record.real_topic), 0)
    for pos, length in layout.blanks:
        buf, rel = at(pos, MIN_BLANK_LEN)
        buf[rel:rel + MIN_BLANK_LEN] = TimerLogBlank.build({"size": length, "prev_pos": 0, "magic": BLANK_MAGIC_CODE})
    for base, buf in sorted(files.items()):
        path = log_dir / segment_name(base)
        with open(path, "wb") as f:  # the mapped file's full size, the zeros after the data a hole
            f.write(buf)
            f.truncate(size)
        made.append(path)
    wheel = staging / TIMERWHEEL_FILE
    with open(wheel, "wb") as f:
        f.truncate(wheel_length(SLOTS_TOTAL))  # a sparse file: two weeks of empty slots
        for index, (value, first, last, num) in sorted(layout.slots.items()):
            f.seek(index * SLOT_SIZE)
            f.write(SLOT_STRUCT.pack(value, first, last, num, 0))
    made.append(wheel)
    config = staging / CONFIG_DIR
    config.mkdir(parents=True, exist_ok=True)
    version = TIMERCHECK_STRUCT.unpack(old_check.ljust(TIMERCHECK_STRUCT.size, b"\0")[:TIMERCHECK_STRUCT.size])[4:] \
        if old_check else (0, 0, 0)
    data = TIMERCHECK_STRUCT.pack(layout.write_time_ms, layout.log_end, layout.queue_offset, layout.queue_offset,
                                  *version)
    check = config / TIMERCHECK_FILE
    check.write_bytes(data.ljust(TIMERCHECK_FILE_SIZE, b"\0"))
    made.append(check)
    return made


@dataclasses.dataclass
class BuiltTimer:
    layout: TimerLayout
    staging: pathlib.Path
    made: list[pathlib.Path]  # staged files


def build_timer(view, staging: pathlib.Path, **plan) -> BuiltTimer:
    """Plan the rebuilt timer store (``plan``: :func:`plan_timer`'s options) and write it into
    ``staging`` (made, must not exist)."""
    layout = plan_timer(view, **plan)
    staging = pathlib.Path(staging)
    staging.mkdir(parents=True)
    timer = find_timer_store(view.root)
    old = timer.timercheck.read_bytes()[:TIMERCHECK_STRUCT.size] if timer.timercheck is not None else None
    return BuiltTimer(layout, staging, write_timer(layout, staging, old))


def compare_timer(view, built: BuiltTimer):
    """What swapping the staged timer files in changes: (kind, store path, staged path) a file;
    kind create, replace, delete or same (the timer log files the rebuild no longer needs go)."""
    from rmqtool.engine.redispatch import Change, _same_file

    root = pathlib.Path(view.root)
    changes = []
    staged = {p.relative_to(built.staging): p for p in built.made}
    log_dir = root / TIMERLOG_DIR
    current = {p.relative_to(root) for p in log_dir.iterdir() if p.is_file()} if log_dir.is_dir() else set()
    for rel, p in sorted(staged.items()):
        target = root / rel
        if not target.exists():
            changes.append(Change("create", str(target), str(p)))
        else:
            changes.append(Change("same" if _same_file(p, target) else "replace", str(target), str(p)))
    for rel in sorted(current - set(staged)):
        changes.append(Change("delete", str(root / rel), None))
    return changes


def timer_plan_doc(built: BuiltTimer) -> dict:
    """The plan's timer part: what is written (units, slots), the pending messages by fire time,
    what gets no unit and why."""
    lay = built.layout
    m = lay.messages
    return {
        "write_timestamp": lay.write_time_ms, "write_timestamp_from": lay.write_time_from,
        "settings": lay.settings.to_json(),
        "timer_log_end": lay.log_end, "timer_queue_offset": lay.queue_offset,
        "units": [{"timer_log_offset": u.position, "prev_timer_log_offset": u.prev_pos, "magic": u.magic,
                   "write_timestamp": u.curr_write_time, "deliver_timestamp": u.deliver_time_ms,
                   "commit_log_offset": u.record.commit_log_offset, "size": u.record.size,
                   "real_topic": u.record.real_topic, "uniq_key": u.record.uniq_key, "anchor": u.anchor}
                  for u in lay.units],
        "blanks": [{"timer_log_offset": p, "size": s} for p, s in lay.blanks],
        "slots": [{"slot_index": i, "time_value": v, "first_timer_log_offset": f, "last_timer_log_offset": last,
                   "num": n} for i, (v, f, last, n) in sorted(lay.slots.items())],
        "pending": [r.to_json() for r in sorted(m.pending, key=lambda r: (r.timer_out_ms, r.commit_log_offset))],
        "dropped": {"delivered": [r.to_json() for r in m.delivered], "recalled": [r.to_json() for r in m.recalled],
                    "recalls": [r.to_json() for r in m.recalls], "superseded": [r.to_json() for r in m.superseded],
                    "overdue": [r.to_json() for r in m.overdue], "unreadable": [r.to_json() for r in m.unreadable]},
    }
