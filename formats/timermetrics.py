"""The timer metrics ``config/timermetrics`` (and ``.bak``): pending timer messages per topic.

Mirrors ``store/src/main/java/org/apache/rocketmq/store/timer/TimerMetrics.java`` at 5.3.3:
``persist`` writes fastjson (``JSON.writeJSONString``, BrowserCompatible) of a
``TimerMetricsSerializeWrapper`` to ``timermetrics.tmp``, copies the old file to
``timermetrics.bak`` and renames; ``load`` is ``ConfigManager.load`` (the ``.bak`` when the
file is missing, empty or does not parse). One line of text::

    {"dataVersion":{"counter":N,"stateVersion":0,"timestamp":MS},
     "timingCount":{"TOPIC":{"count":N,"timeStamp":MS}, ...}}

count: +1 per unit enqueued for the REAL_TOPIC, -1 per delivery or delete unit; timeStamp:
when the topic's metric was made. Pure data in, data out: the text is parsed by
formats.config.loads_fastjson and the file read by rmqtool.store.config.
"""
from __future__ import annotations

import dataclasses

from rmqtool.errors import FormatError

TIMERMETRICS_FILE = "timermetrics"  # in <store>/config (TimerMessageStore.getTimerMetricsPath)


@dataclasses.dataclass(frozen=True, slots=True)
class TimingCount:
    topic: str
    count: int
    time_stamp: int


@dataclasses.dataclass(frozen=True, slots=True)
class TimerMetrics:
    timing_count: tuple[TimingCount, ...]  # in the file's order
    data_version_state_version: int
    data_version_timestamp: int
    data_version_counter: int


def _long(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(f"timermetrics: {what} is {value!r}, not a number")
    return value


def timer_metrics_of(document) -> TimerMetrics:
    """The metrics of a parsed document, as TimerMetrics.decode takes them (missing parts
    are empty or 0, as in a fresh wrapper); FormatError when a part has the wrong shape."""
    if not isinstance(document, dict):
        raise FormatError("timermetrics: not a JSON object")
    version = document.get("dataVersion") or {}
    table = document.get("timingCount") or {}
    if not isinstance(version, dict) or not isinstance(table, dict):
        raise FormatError("timermetrics: dataVersion and timingCount must be objects")
    counts = []
    for topic, metric in table.items():
        if not isinstance(metric, dict):
            raise FormatError(f"timermetrics: timingCount of {topic!r} is not an object")
        counts.append(TimingCount(str(topic), _long(metric.get("count", 0), f"{topic} count"),
                                  _long(metric.get("timeStamp", 0), f"{topic} timeStamp")))
    return TimerMetrics(tuple(counts), _long(version.get("stateVersion", 0), "stateVersion"),
                        _long(version.get("timestamp", 0), "timestamp"), _long(version.get("counter", 0), "counter"))
