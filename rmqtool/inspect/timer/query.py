"""query --timer: what became of a timer message, from its records, its units and timercheck.

A timer message leaves records under one UNIQ_KEY: the ``rmq_sys_wheel_timer`` record it
was stored as (TIMER_OUT_MS, REAL_TOPIC, REAL_QID), a re-put record each time it rolled
(TIMER_ROLL_TIMES), its delivery in REAL_TOPIC (TIMER_DEQUEUE_MS), and a recall's record
(TIMER_DEL_UNIQKEY); each timer record gets a unit in the timer log. Its state:

* ``delivered``: a delivery record is in the store (``delivered_offsets``; more than one:
  delivered again, e.g. after a lost timercheck);
* ``recalled``: a recall record and no delivery;
* ``pending``: its newest unit's deliver time is at or after timercheck's read time;
* ``notEnqueued``: its newest timer record is at or past timercheck's timer queue offset:
  the next start enqueues it (and writes its unit);
* ``overdue``: the read time passed its unit's slot and no delivery is in the store;
* ``noUnit``: enqueued (before the timer queue offset) and no unit points at it, no delivery;
* ``storedAsNormal``: a timer property, stored straight in its topic (a deliver time past).
"""
from __future__ import annotations

import numpy as np

from rmqtool.formats.properties import KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC
from rmqtool.formats.properties import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX as PROPERTY_UNIQ_KEY
from rmqtool.formats.timerlog import (PROPERTY_TIMER_DEL_UNIQKEY, PROPERTY_TIMER_DEQUEUE_MS, PROPERTY_TIMER_OUT_MS,
                                      PROPERTY_TIMER_ROLL_TIMES, TIMER_PROPERTIES_SENT, TIMER_TOPIC)
from rmqtool.query.by_key import LONG_MAX, query_by_key
from rmqtool.store.timer.files import find_timer_store
from rmqtool.store.timer.timercheck import read_timercheck
from rmqtool.store.timer.timerlog import scan_timer_log
from rmqtool.store.view import open_store

# enough for every record of one UNIQ_KEY (a record, its rolls, a recall, its deliveries)
RECORDS_PER_UNIQ_KEY = 1024


def _is_timer_related(m) -> bool:
    p = m.properties
    return (m.topic == TIMER_TOPIC or PROPERTY_TIMER_OUT_MS in p or PROPERTY_TIMER_DEL_UNIQKEY in p
            or any(name in p for name in TIMER_PROPERTIES_SENT))


def timer_states(store, messages: list) -> list[dict]:
    """A row (kind ``timer_message``) for each timer message among ``messages`` (those a
    query found), by UNIQ_KEY, in the order found; [] when none is a timer message."""
    uniq_keys = list(dict.fromkeys(m.properties.get(PROPERTY_UNIQ_KEY) for m in messages if _is_timer_related(m)))
    uniq_keys = [u for u in uniq_keys if u]
    if not uniq_keys:
        return []
    view = open_store(store)
    timer = find_timer_store(view.root)
    check = read_timercheck(timer.timercheck) if timer.timercheck is not None else None
    log = scan_timer_log(timer.timer_log_dir) if timer.timer_log_dir is not None else None
    rows = []
    for uniq in uniq_keys:
        records = query_by_key(view, uniq, uniq_key=True, max_num=RECORDS_PER_UNIQ_KEY, begin=0, end=LONG_MAX).messages
        rows.append(_state(uniq, records, log, check))
    return rows


def _state(uniq: str, records: list, log, check) -> dict:
    recalls = [m for m in records if PROPERTY_TIMER_DEL_UNIQKEY in m.properties]
    timer_records = [m for m in records if m.topic == TIMER_TOPIC and m not in recalls]
    deliveries = [m for m in records if m.topic != TIMER_TOPIC and PROPERTY_TIMER_DEQUEUE_MS in m.properties]
    direct = [m for m in records if m.topic != TIMER_TOPIC and m not in deliveries]
    newest = max(timer_records, key=lambda m: m.commit_log_offset, default=None)
    props = (newest or (deliveries or direct or records)[0]).properties
    units = _units_for(log, [m.commit_log_offset for m in timer_records])
    newest_unit = next((u for u in reversed(units) if newest is not None and u[1] == newest.commit_log_offset), None)
    read_time = check.last_read_time_ms if check is not None else None
    if deliveries:
        state = "delivered"
    elif recalls:
        state = "recalled"
    elif newest is None:
        state = "storedAsNormal"
    elif newest_unit is not None and (read_time is None or newest_unit[2] >= read_time):
        state = "pending"
    elif check is not None and newest.queue_offset >= check.last_timer_queue_offset:
        state = "notEnqueued"
    elif newest_unit is not None:
        state = "overdue"
    else:
        state = "noUnit"
    out_ms = props.get(PROPERTY_TIMER_OUT_MS)
    return {
        "uniq_key": uniq, "keys": props[PROPERTY_KEYS].split(KEY_SEPARATOR) if props.get(PROPERTY_KEYS) else [], "timer_state": state,
        "real_topic": props.get(PROPERTY_REAL_TOPIC) or next((m.topic for m in deliveries + direct), None),
        "real_queue_id": int(props[PROPERTY_REAL_QUEUE_ID]) if PROPERTY_REAL_QUEUE_ID in props else None,
        "fire_timestamp": int(out_ms) if out_ms and out_ms.lstrip("-").isdigit() else None,
        "roll_times": int(props.get(PROPERTY_TIMER_ROLL_TIMES, 0) or 0),
        "timer_record_offsets": [m.commit_log_offset for m in timer_records],
        "timer_queue_offsets": [m.queue_offset for m in timer_records],
        "timer_log_offsets": [u[0] for u in units],
        "slot_index": newest_unit[3] if newest_unit is not None else None,
        "delivered_offsets": [m.commit_log_offset for m in deliveries],
        "delivered_timestamp": min((m.store_timestamp for m in deliveries), default=None),
        "recall_offsets": [m.commit_log_offset for m in recalls],
        "read_timestamp": read_time,
    }


def _units_for(log, offsets: list[int]) -> list[tuple[int, int, int, int]]:
    """(timer_log_offset, commit_log_offset, deliver time, slot index) of every readable unit
    pointing at one of ``offsets``, in log order."""
    if log is None or not offsets or not len(log.columns):
        return []
    cols = log.columns
    hits = np.flatnonzero(np.isin(cols["offset_py"], np.asarray(offsets, dtype=np.int64)))
    out = []
    for i in hits.tolist():
        unit = log.unit_at(int(cols["position"][i]))
        out.append((unit.position, unit.offset_py, unit.deliver_time_ms, unit.slot_index()))
    return out
