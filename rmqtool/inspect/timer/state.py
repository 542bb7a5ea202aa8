"""``info``'s timer section: the timer store's state as its files show it, and where the
next start's load leaves it.

The read time is timercheck's lastReadTimeMs (where dequeue resumes); pending messages are
what ``TimerWheel.getAllNum`` counts from it (the broker's dequeueBehindMessages after a
load). The queue offset the next start enqueues from is the load's (recovery/timer: revised
from the last unit's record after a crash, capped by the queue's range), and the enqueue lag
the ``rmq_sys_wheel_timer`` queue's end less it (the broker's enqueueBehindMessages after the
load). The write time is not stored: the newest currWriteTime of a unit stands for it.
"""
from __future__ import annotations

import pathlib

from rmqtool.errors import FormatError
from rmqtool.findings import CONFIG_UNPARSEABLE, Finding
from rmqtool.store.timer.files import find_timer_store
from rmqtool.store.timer.timercheck import read_timercheck
from rmqtool.store.timer.timerlog import scan_timer_log
from rmqtool.store.timer.timermetrics import read_timermetrics
from rmqtool.store.timer.wheel import read_wheel
from rmqtool.recovery.timer.load import TimerSettings

PENDING_SHOWN = 100  # fire times listed; the rest counted
CONGESTION_SHOWN = 5


def timer_info(root, timer_queue_max_offset: int | None, load=None) -> tuple[dict | None, list[Finding]]:
    """The timer section (None: no timer file in the store) and the findings reading it gave.
    ``load``: the next start's TimerLoad (recovery/timer/load.py), None when it was not simulated."""
    timer = find_timer_store(pathlib.Path(root))
    if not timer.exists:
        return None, []
    findings: list[Finding] = []
    check = read_timercheck(timer.timercheck) if timer.timercheck is not None else None
    log = scan_timer_log(timer.timer_log_dir) if timer.timer_log_dir is not None else None
    # the wheel holds times divided by timerPrecisionMs: the broker config's, as the start reads it
    precision = load.settings.precision_ms if load is not None else TimerSettings.of(root).precision_ms
    wheel = read_wheel(timer.wheel, precision) if timer.wheel is not None else None
    try:
        metrics = read_timermetrics(timer.config_dir)
        findings += metrics.config.findings
        counts = [] if metrics.metrics is None else [
            {"topic": t.topic, "count": t.count, "metric_timestamp": t.time_stamp} for t in metrics.metrics.timing_count]
    except FormatError as exc:  # info goes on: the broker would start with no metrics
        counts = None
        findings.append(Finding(CONFIG_UNPARSEABLE, exc.path, exc.offset, exc.message))
    read_time = check.last_read_time_ms if check is not None else None
    at_start = load.curr_queue_offset if load is not None and load.loadable else None
    doc = {
        "timer_files": [{"name": name, "present": there} for name, there in timer.present().items()],
        "read_timestamp": read_time,
        "last_write_timestamp": int(log.columns["curr_write_time"].max()) if log is not None and len(log.columns)
        else None,
        "timer_queue_offset": check.last_timer_queue_offset if check is not None else None,
        "timer_queue_max_offset": timer_queue_max_offset,
        # where the next start enqueues from: timercheck's offset as the load revises it
        "timer_queue_offset_at_start": at_start,
        "enqueue_behind_messages": timer_queue_max_offset - at_start
        if at_start is not None and timer_queue_max_offset is not None else None,
        "timer_log_flush_offset": check.last_timer_log_flush_pos if check is not None else None,
        "timer_log_files": len(log.files) if log is not None else 0,
        "timer_log_file_size": log.file_size if log is not None else None,
        "timer_log_units": len(log.columns) if log is not None else 0,
        "timer_log_readable_end": log.readable_end if log is not None else None,
        "timer_log_end_reason": log.end_reason if log is not None else None,
        # where the next start's recovery (from the file of timercheck's flush position) ends it, and why
        "timer_log_recovered_end": load.cut_at if load is not None and load.loadable else None,
        "timer_log_recovered_end_reason": load.cut_reason if load is not None and load.loadable else None,
        "wheel_file_size": wheel.file_size if wheel is not None else None,
        "wheel_used_slots": len(wheel.used) if wheel is not None else 0,
    }
    doc.update(_pending(wheel, read_time))
    doc["timer_metrics"] = counts
    return doc, findings


def _pending(wheel, read_time: int | None) -> dict:
    """Pending messages by fire time, from the read time on; the fullest slots."""
    if wheel is None or read_time is None:  # no timercheck: the broker starts 7 days back from its clock
        return {"pending_messages": None, "next_fire_timestamp": None, "last_fire_timestamp": None,
                "pending_slots_not_shown": 0, "pending_by_fire_time": [], "congestion": []}
    slots = wheel.counted_from(read_time)
    slots = slots[slots["num"] != 0]
    by_time = slots[slots["time_value"].argsort(kind="stable")]
    fullest = slots[(-slots["num"].astype("i8")).argsort(kind="stable")][:CONGESTION_SHOWN]

    def row(s) -> dict:
        index, value, first, last, num, _magic = s
        return {"slot_index": index, "slot_timestamp": value * wheel.precision_ms, "num": num,
                "last_timer_log_offset": last}
    shown = [row(s) for s in by_time[:PENDING_SHOWN].tolist()]
    return {"pending_messages": int(slots["num"].sum()),
            "next_fire_timestamp": shown[0]["slot_timestamp"] if shown else None,
            "last_fire_timestamp": int(by_time["time_value"][-1]) * wheel.precision_ms if len(by_time) else None,
            "pending_slots_not_shown": max(len(by_time) - PENDING_SHOWN, 0),
            "pending_by_fire_time": shown, "congestion": [row(s) for s in fullest.tolist()]}
