"""``config/timercheck`` read as the broker's TimerCheckpoint constructor reads it."""
from __future__ import annotations

import dataclasses
import os
import pathlib

from rmqtool.errors import StoreAccessError, StoreNotFound
from rmqtool.formats.timercheck import TIMERCHECK_STRUCT, TimerCheckpoint


@dataclasses.dataclass(frozen=True, slots=True)
class TimerCheck:
    path: pathlib.Path
    file_size: int  # 4096 as the broker leaves it; a shorter file reads as zeros past its end (the broker maps 4096)
    last_read_time_ms: int
    last_timer_log_flush_pos: int
    last_timer_queue_offset: int
    master_timer_queue_offset: int
    data_version_state_version: int
    data_version_timestamp: int
    data_version_counter: int


def read_timercheck(path) -> TimerCheck:
    path = pathlib.Path(path)
    try:
        with open(path, "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            data = os.pread(f.fileno(), TimerCheckpoint.sizeof(), 0)
    except FileNotFoundError:
        raise StoreNotFound("no such file", path) from None
    except IsADirectoryError:
        raise StoreAccessError("a directory where the timercheck file should be", path) from None
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", path) from None
    data = data.ljust(TimerCheckpoint.sizeof(), b"\0")
    return TimerCheck(path, size, *TIMERCHECK_STRUCT.unpack(data))
