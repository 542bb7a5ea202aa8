"""Which timer store files a store root holds (TimerMessageStore's paths at 5.3.3)."""
from __future__ import annotations

import dataclasses
import pathlib

from rmqtool.formats.timercheck import TIMERCHECK_FILE
from rmqtool.formats.timermetrics import TIMERMETRICS_FILE
from rmqtool.store.paths import CONFIG_DIR

TIMERWHEEL_FILE = "timerwheel"  # TimerMessageStore.getTimerWheelPath: <root>/timerwheel
TIMERLOG_DIR = "timerlog"  # getTimerLogPath: <root>/timerlog
BAK_SUFFIX = ".bak"


@dataclasses.dataclass(frozen=True, slots=True)
class TimerStore:
    """A store root's timer files; a path is None when the file (or directory) is absent."""
    root: pathlib.Path
    wheel: pathlib.Path | None
    timer_log_dir: pathlib.Path | None
    timercheck: pathlib.Path | None
    timermetrics: pathlib.Path | None
    timermetrics_bak: pathlib.Path | None

    @property
    def config_dir(self) -> pathlib.Path:
        return self.root / CONFIG_DIR

    @property
    def exists(self) -> bool:
        """Whether the store has any timer file: a broker with the timer store ran on it."""
        return any(p is not None for p in (self.wheel, self.timer_log_dir, self.timercheck,
                                           self.timermetrics, self.timermetrics_bak))

    def present(self) -> dict[str, bool]:
        """Each timer file by its name in the store, and whether it is there."""
        return {TIMERWHEEL_FILE: self.wheel is not None, TIMERLOG_DIR + "/": self.timer_log_dir is not None,
                f"{CONFIG_DIR}/{TIMERCHECK_FILE}": self.timercheck is not None,
                f"{CONFIG_DIR}/{TIMERMETRICS_FILE}": self.timermetrics is not None,
                f"{CONFIG_DIR}/{TIMERMETRICS_FILE}{BAK_SUFFIX}": self.timermetrics_bak is not None}


def find_timer_store(root) -> TimerStore:
    root = pathlib.Path(root)
    config = root / CONFIG_DIR

    def file(p: pathlib.Path):
        return p if p.is_file() else None

    log_dir = root / TIMERLOG_DIR
    return TimerStore(root, file(root / TIMERWHEEL_FILE), log_dir if log_dir.is_dir() else None,
                      file(config / TIMERCHECK_FILE), file(config / TIMERMETRICS_FILE),
                      file(config / (TIMERMETRICS_FILE + BAK_SUFFIX)))
