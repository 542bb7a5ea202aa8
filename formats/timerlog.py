"""The timer log: one 52-byte unit a timer message enqueued (or rolled, or recalled).

Mirrors ``store/src/main/java/org/apache/rocketmq/store/timer/TimerLog.java`` and the
magic bits and ``isMagicOK`` of ``TimerMessageStore.java`` at 5.3.3 (there is no timer
store in 4.x). The log lives in ``<store>/timerlog/`` as a MappedFileQueue: files named by
the offset of their first byte (20 digits), ``mappedFileSizeTimerLog`` bytes each
(default 100 MB; read from the files, never assumed). All integers big-endian.

Unit (``UNIT_SIZE`` = 52); a unit's position is its offset in the whole log::

     0 +--------+---------------------------+--------+---------------------------+
       |  size  |         prevPos           | magic  |      currWriteTime        |
       | int32  |         int64             | int32  |         int64             |
    24 +--------+--+------------------------+--+-----+---------------+-----------+
       | delayedTime |       offsetPy          | sizePy | hashCodeOfRealTopic |
       |   int32     |        int64            | int32  |       int32         |
    44 +-------------+-------------------------+--------+---------------------+
       |         reserved  int64 (0)        |
    52 +------------------------------------+

    size is 52. prevPos is the slot's lastPos before this unit (-1: the slot's first unit),
    so a slot's units form a chain walked backwards from the wheel's lastPos.
    delayedTime is relative: the deliver time is currWriteTime + delayedTime (ms).
    offsetPy/sizePy: the rmq_sys_wheel_timer record in the commit log.
    hashCodeOfRealTopic: Java String.hashCode of the record's REAL_TOPIC.

Blank (``TimerLog.append``: when a unit + ``MIN_BLANK_LEN`` no longer fits in a file)::

     0 +--------------------+--------------+------------------------+
       | size = bytes left  | prevPos = 0  | magic BLANK_MAGIC_CODE |   then the next file
       |      int32         |    int64     |        int32           |
    16 +--------------------+--------------+------------------------+
"""
from __future__ import annotations

from construct import Int32sb, Int64sb, Struct

from .derive import struct_of

UNIT_SIZE = 4 + 8 + 4 + 8 + 4 + 8 + 4 + 4 + 8  # TimerLog.UNIT_SIZE
MIN_BLANK_LEN = 4 + 8 + 4  # TimerLog.MIN_BLANK_LEN: a blank's header
UNIT_PRE_SIZE_FOR_MSG = 28  # TimerLog: where offsetPy starts
UNIT_PRE_SIZE_FOR_METRIC = 40  # TimerLog: where hashCodeOfRealTopic starts


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


# Java: 0xBBCCDDEE ^ 1880681586 + 8 (+ binds first), as an int
BLANK_MAGIC_CODE = _int32(0xBBCCDDEE ^ (1880681586 + 8))
assert BLANK_MAGIC_CODE == -875286124

# TimerMessageStore's magic bits
MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2
MAGIC_FLAGS = (("MAGIC_DEFAULT", MAGIC_DEFAULT), ("MAGIC_ROLL", MAGIC_ROLL), ("MAGIC_DELETE", MAGIC_DELETE))

TimerLogUnit = Struct(
    "size" / Int32sb,
    "prev_pos" / Int64sb,
    "magic" / Int32sb,
    "curr_write_time" / Int64sb,
    "delayed_time" / Int32sb,
    "offset_py" / Int64sb,
    "size_py" / Int32sb,
    "hash_code_of_real_topic" / Int32sb,
    "reserved" / Int64sb,
)
assert TimerLogUnit.sizeof() == UNIT_SIZE
assert TimerLogUnit.subcons[5].name == "offset_py"

TimerLogBlank = Struct(
    "size" / Int32sb,
    "prev_pos" / Int64sb,
    "magic" / Int32sb,
)
assert TimerLogBlank.sizeof() == MIN_BLANK_LEN

UNIT_STRUCT = struct_of(TimerLogUnit)


def is_magic_ok(magic: int) -> bool:
    """TimerMessageStore.isMagicOK: no bit above the low four."""
    return (magic | 0xF) == 0xF


def magic_flags(magic: int) -> list[str]:
    """The names of the magic bits set, in the engine's order."""
    return [name for name, bit in MAGIC_FLAGS if magic & bit]


def need_roll(magic: int) -> bool:
    return (magic & MAGIC_ROLL) != 0


def need_delete(magic: int) -> bool:
    return (magic & MAGIC_DELETE) != 0


def offset_for_last_unit(file_size: int) -> int:
    """TimerLog.getOffsetForLastUnit: where the last whole unit of a file starts."""
    return file_size - (file_size - MIN_BLANK_LEN) % UNIT_SIZE - MIN_BLANK_LEN - UNIT_SIZE


# The timer store's system topic and the properties it reads and writes on records
# (TimerMessageStore.TIMER_TOPIC, MessageConst.PROPERTY_TIMER_*)
TIMER_TOPIC = "rmq_sys_wheel_timer"  # queue 0 holds every timer message as stored
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"  # deliver time, floored to timerPrecisionMs
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"  # on a delivery: its unit's write time (Long.MAX_VALUE: none)
PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"  # on a delivery or a roll: when dequeue put it
PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"  # on a roll's re-put record
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"  # a recall: REAL_TOPIC + the recalled UNIQ_KEY
TIMER_PROPERTIES_SENT = ("TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_DELIVER_MS")  # what a producer sets
