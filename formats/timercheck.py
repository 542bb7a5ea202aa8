"""The timer checkpoint ``config/timercheck``: how far the timer store had read and written.

Mirrors ``store/src/main/java/org/apache/rocketmq/store/timer/TimerCheckpoint.java`` at
5.3.3 (``flush`` / the constructor's reads). The broker maps one OS page (4096 bytes) and
writes only the first 56; the rest stays zero. All integers big-endian::

     0 +-------------------------------+
       | lastReadTimeMs          int64 |  the read (dequeue) time reached: where dequeue resumes
     8 +-------------------------------+
       | lastTimerLogFlushPos    int64 |  the timer log flushed up to here; recover rescans
    16 +-------------------------------+  from the file holding this - one file size
       | lastTimerQueueOffset    int64 |  the next rmq_sys_wheel_timer queue offset to enqueue
    24 +-------------------------------+
       | masterTimerQueueOffset  int64 |  a slave's copy of the master's; caps the queue offset
    32 +-------------------------------+
       | dataVersion.stateVersion int64|
    40 +-------------------------------+
       | dataVersion.timestamp   int64 |
    48 +-------------------------------+
       | dataVersion.counter     int64 |
    56 +-------------------------------+
       | zero padding up to 4096       |
  4096 +-------------------------------+

A missing file leaves every field 0 (lastReadTimeMs 0: recover then starts the read time at
now - 7 days + 60 s, and the whole timer queue is enqueued again).
"""
from __future__ import annotations

from construct import Int64sb, Struct

from .derive import struct_of

TIMERCHECK_FILE_SIZE = 4096  # DefaultMappedFile.OS_PAGE_SIZE
TIMERCHECK_FILE = "timercheck"  # in <store>/config (TimerMessageStore.getTimerCheckPath)

TimerCheckpoint = Struct(
    "last_read_time_ms" / Int64sb,
    "last_timer_log_flush_pos" / Int64sb,
    "last_timer_queue_offset" / Int64sb,
    "master_timer_queue_offset" / Int64sb,
    "data_version_state_version" / Int64sb,
    "data_version_timestamp" / Int64sb,
    "data_version_counter" / Int64sb,
)
assert TimerCheckpoint.sizeof() == 56

TIMERCHECK_STRUCT = struct_of(TimerCheckpoint)
