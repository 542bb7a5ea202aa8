"""Rows for ``dump timerwheel|timerlog|timercheck|timermetrics``: PATH is a store, the
timer file (or ``timerlog/`` or ``config/``) itself, or one file of that kind.

A store with no timer file of the kind dumps nothing and says so on stderr (a 4.x store,
or a 5.x broker run with timerWheelEnable=false): nothing there is not damage.
"""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Iterator

from rmqtool.errors import FormatError, NotAStore, RmqError
from rmqtool.formats.properties import (KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_REAL_TOPIC,
                                        PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
from rmqtool.formats.timerwheel import DEFAULT_TIMER_PRECISION_MS, SLOT_SIZE
from rmqtool.formats.timermetrics import timer_metrics_of
from rmqtool.inspect.hints import wrong_kind
from rmqtool.store import detect
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.config import parse_config_bytes, read_config_bytes
from rmqtool.store.paths import COMMITLOG_DIR, CONFIG_DIR
from rmqtool.store.timer.files import TIMERLOG_DIR, find_timer_store
from rmqtool.store.timer.timercheck import TimerCheck, read_timercheck
from rmqtool.store.timer.timerlog import END_BAD_UNIT, END_PARTIAL_UNIT, TimerLog, scan_timer_log
from rmqtool.store.timer.timermetrics import read_timermetrics
from rmqtool.store.timer.wheel import read_wheel


@dataclasses.dataclass
class TimerDump:
    """What a dump read: ``note`` (nothing to dump, said on stderr), damaged rows seen."""
    note: str | None = None
    damaged: int = 0


def _store_or_file(path: pathlib.Path, kind: str, wanted: str) -> tuple[pathlib.Path | None, pathlib.Path | None]:
    """(store root, None) for a store directory, (None, file) for a file of ``kind``."""
    path = detect.require_path(path)
    if path.is_dir():
        return detect.require_store(path), None
    found = detect.kind_of_file(path)
    if found != kind:
        raise wrong_kind(path, found, wanted)
    return None, path


def wheel_rows(path, dump: TimerDump, precision_ms: int = DEFAULT_TIMER_PRECISION_MS) -> Iterator[dict]:
    """Every used (non-zero) slot of the wheel: ``timer_slot`` rows."""
    root, file = _store_or_file(pathlib.Path(path), detect.TIMERWHEEL, "a timer wheel file")
    if root is not None:
        file = find_timer_store(root).wheel
        if file is None:
            dump.note = f"no timerwheel in {root}: no timer store (a 4.x store, or timerWheelEnable=false)"
            return
    wheel = read_wheel(file, precision_ms)
    for s in wheel.slots:
        yield {"slot_index": s.index, "time_value": s.time_value, "slot_timestamp": s.time_ms,
               "first_timer_log_offset": s.first_pos, "last_timer_log_offset": s.last_pos, "num": s.num,
               "magic": s.magic, "index_matches_time": s.index_matches_time, "file": str(file),
               "file_position": s.index * SLOT_SIZE}


def _timer_log_dir(path: pathlib.Path, dump: TimerDump) -> tuple[pathlib.Path | None, pathlib.Path | None]:
    """(timerlog/ directory, only this file or None)."""
    p = detect.require_path(path)
    if p.is_dir() and p.name == TIMERLOG_DIR and not detect.is_store_dir(p):
        return p, None
    root, file = _store_or_file(p, detect.TIMERLOG, "a timer log file")
    if file is not None:
        return file.parent, file
    found = find_timer_store(root).timer_log_dir
    if found is None:
        dump.note = f"no timerlog/ in {root}: no timer store (a 4.x store, or timerWheelEnable=false)"
    return found, None


def unit_row(log: TimerLog, unit, precision_ms: int) -> dict:
    """One timer log unit in the project's words (docs/vocabulary.md)."""
    f = log.file_of(unit.position)
    return {"record": "unit", "timer_log_offset": unit.position, "prev_timer_log_offset": unit.prev_pos,
            "magic": unit.magic, "magic_flags": unit.magic_flags, "commit_log_offset": unit.offset_py,
            "size": unit.size_py, "write_timestamp": unit.curr_write_time,
            "deliver_timestamp": unit.deliver_time_ms, "delay_ms": unit.delayed_time,
            "real_topic_hash": unit.hash_code_of_real_topic, "slot_index": unit.slot_index(precision_ms),
            "unit_size": unit.size, "reserved": unit.reserved,
            "file": str(f.path), "file_position": unit.position - f.base_offset}


def timer_log_rows(path, dump: TimerDump, precision_ms: int = DEFAULT_TIMER_PRECISION_MS,
                   show_blank: bool = False, records: bool = False) -> Iterator[dict]:
    """Every readable unit of every timer log file, in log order (``timer_unit`` rows); a
    file whose units end on bytes that are no unit gives a ``corrupt`` row there.
    ``records``: each unit's row also says what the commit log holds at its offset."""
    directory, only = _timer_log_dir(pathlib.Path(path), dump)
    if directory is None:
        return
    log = scan_timer_log(directory)
    reader = _reader_beside(directory) if records else None
    blanks = {b.position: b for b in log.blanks}
    damaged = log.damaged_files()
    for f in log.files:
        if only is not None and f.path.name != only.name:
            continue
        for unit in log.units_in(f):
            row = unit_row(log, unit, precision_ms)
            if reader is not None:
                row.update(pointed_record(reader, unit.offset_py))
            yield row
        blank = blanks.get(f.end)
        if blank is not None and show_blank:
            yield {"record": "blank", "timer_log_offset": blank.position, "prev_timer_log_offset": blank.prev_pos,
                   "magic": blank.magic, "unit_size": blank.size, "file": str(f.path),
                   "file_position": blank.position - f.base_offset}
        if f in damaged:
            dump.damaged += 1
            what = {END_PARTIAL_UNIT: "fewer than 52 bytes left and no blank",
                    END_BAD_UNIT: "size is not 52 or the magic is not a timer magic"}.get(
                f.end_reason, "the units stop and no blank ends the file, though later files follow")
            yield {"record": "corrupt", "timer_log_offset": f.end, "reason": f"{f.end_reason}: {what}; the "
                   f"broker's recover cuts the timer log here", "non_zero_after": f.non_zero_after_end,
                   "file": str(f.path), "file_position": f.end - f.base_offset}


def _reader_beside(timer_log_dir: pathlib.Path) -> CommitLogReader:
    """The commit log of the store holding this timerlog/ directory."""
    root = timer_log_dir.parent
    if not (root / COMMITLOG_DIR).is_dir():
        raise NotAStore(f"--records reads the commit log beside the timer log, and {root} has no {COMMITLOG_DIR}/",
                        root)
    return CommitLogReader.of_store(root)


def pointed_record(reader: CommitLogReader, offset: int) -> dict:
    """What the commit log holds where a unit points: the record's topic, REAL_TOPIC, UNIQ_KEY
    and KEYS, or why no record can be read there (``record_error``)."""
    try:
        m = reader.read(offset, check_crc=False)
    except RmqError as exc:
        return {"record_topic": None, "real_topic": None, "uniq_key": None, "keys": [],
                "record_error": exc.message}
    p = m.properties
    return {"record_topic": m.topic, "real_topic": p.get(PROPERTY_REAL_TOPIC),
            "uniq_key": p.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            "keys": p[PROPERTY_KEYS].split(KEY_SEPARATOR) if p.get(PROPERTY_KEYS) else [], "record_error": None}


def timercheck_row(path) -> dict | None:
    """timercheck as a document; None when a store has none (the note says so)."""
    p = detect.require_path(pathlib.Path(path))
    if p.is_dir() and p.name == CONFIG_DIR:
        p = p.parent
    root, file = _store_or_file(p, detect.TIMERCHECK, "a timercheck file")
    if root is not None:
        file = find_timer_store(root).timercheck
        if file is None:
            return None
    return timercheck_document(read_timercheck(file))


def timercheck_document(check: TimerCheck) -> dict:
    return {"file": str(check.path), "file_size": check.file_size, "last_read_timestamp": check.last_read_time_ms,
            "last_timer_log_flush_offset": check.last_timer_log_flush_pos,
            "last_timer_queue_offset": check.last_timer_queue_offset,
            "master_timer_queue_offset": check.master_timer_queue_offset,
            "data_version_state_version": check.data_version_state_version,
            "data_version_timestamp": check.data_version_timestamp,
            "data_version_counter": check.data_version_counter}


def timermetrics_rows(path, dump: TimerDump, findings: list) -> Iterator[dict]:
    """One ``timer_metric`` row a topic, from the file the broker loads (.bak fallback), or
    from the one file given."""
    p = detect.require_path(pathlib.Path(path))
    if p.is_dir() and p.name == CONFIG_DIR:
        p = p.parent
    root, file = _store_or_file(p, detect.TIMERMETRICS, "a timermetrics file")
    if file is not None:
        try:
            metrics = timer_metrics_of(parse_config_bytes(read_config_bytes(file), file))
        except FormatError as exc:
            raise FormatError(exc.message, file, exc.offset) from None
        source, where = "file", file
    else:
        loaded = read_timermetrics(root / CONFIG_DIR)
        findings.extend(loaded.config.findings)
        if loaded.metrics is None:
            dump.note = f"no timermetrics (nor its .bak) in {root / CONFIG_DIR}: the broker starts with no metrics"
            return
        metrics, source, where = loaded.metrics, loaded.config.source, loaded.config.path
    for t in metrics.timing_count:
        yield {"topic": t.topic, "count": t.count, "metric_timestamp": t.time_stamp, "source": source,
               "data_version_counter": metrics.data_version_counter,
               "data_version_timestamp": metrics.data_version_timestamp,
               "data_version_state_version": metrics.data_version_state_version, "file": str(where)}
