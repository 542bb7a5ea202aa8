"""``config/timermetrics`` read as TimerMetrics.load reads it (ConfigManager: the ``.bak``
when the file is missing, empty or does not parse)."""
from __future__ import annotations

import dataclasses

from rmqtool.errors import FormatError
from rmqtool.formats.timermetrics import TIMERMETRICS_FILE, TimerMetrics, timer_metrics_of
from rmqtool.store.config import ConfigFile, read_config_file


@dataclasses.dataclass(frozen=True, slots=True)
class TimerMetricsFile:
    config: ConfigFile  # which file was loaded (main, bak or none) and its findings
    metrics: TimerMetrics | None  # None: neither file holds anything (the broker starts empty)


def read_timermetrics(config_dir) -> TimerMetricsFile:
    loaded = read_config_file(config_dir, TIMERMETRICS_FILE)
    if loaded.document is None:
        return TimerMetricsFile(loaded, None)
    try:
        metrics = timer_metrics_of(loaded.document)
    except FormatError as exc:
        raise FormatError(exc.message, loaded.path) from None
    return TimerMetricsFile(loaded, metrics)
