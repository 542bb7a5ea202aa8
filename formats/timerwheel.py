"""The timer wheel: one 32-byte slot a precision step, two weeks of slots.

Mirrors ``store/src/main/java/org/apache/rocketmq/store/timer/TimerWheel.java`` and
``Slot.java`` at 5.3.3. The file ``<store>/timerwheel`` is ``slotsTotal * 2`` slots,
slotsTotal = ``TIMER_WHEEL_TTL_DAY * DAY_SECS`` = 604,800 (``TimerMessageStore``), so
38,707,200 bytes; the broker refuses to start on a non-empty file of another length. It is
almost all zeros (a sparse file on most brokers). All integers big-endian.

Slot (``Slot.SIZE`` = 32)::

     0 +---------------------------+---------------------------+---------------------------+
       |  timeMs / precisionMs     |        firstPos           |         lastPos           |
       |        int64              |         int64             |          int64            |
    24 +------------+------------+-+---------------------------+---------------------------+
       |    num     |   magic    |
       |   int32    | int32 (0)  |
    32 +------------+------------+

    The first field is the slot's time in precision steps (seconds at the default
    timerPrecisionMs 1000), not milliseconds. firstPos/lastPos are timer log positions:
    lastPos heads the chain dequeue walks through each unit's prevPos. num counts the
    slot's units (a recall's delete unit takes one off). Slots are never cleared after
    delivery: a slot counts only when its stored time is the time asked for
    (``TimerWheel.getSlot``).

Slot index of a time: ``timeMs / precisionMs % (slotsTotal * 2)`` (``getSlotIndex``).
"""
from __future__ import annotations

from construct import Int32sb, Int64sb, Struct

from .derive import struct_of

SLOT_SIZE = 32  # Slot.SIZE
TIMER_WHEEL_TTL_DAY = 7  # TimerMessageStore
DAY_SECS = 24 * 3600
SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS  # TimerMessageStore.slotsTotal: 604,800
DEFAULT_TIMER_PRECISION_MS = 1000  # MessageStoreConfig.timerPrecisionMs
DEFAULT_TIMER_ROLL_WINDOW_SLOT = 3600 * 24 * 2  # MessageStoreConfig.timerRollWindowSlot
# TimerWheel.BLANK: getSlot's answer for a slot that does not hold the time asked for
BLANK = -1

Slot = Struct(
    "time_value" / Int64sb,  # timeMs / precisionMs
    "first_pos" / Int64sb,
    "last_pos" / Int64sb,
    "num" / Int32sb,
    "magic" / Int32sb,
)
assert Slot.sizeof() == SLOT_SIZE

SLOT_STRUCT = struct_of(Slot)
# the same slot as a numpy dtype, for reading many slots at once
SLOT_DTYPE = [("time_value", ">i8"), ("first_pos", ">i8"), ("last_pos", ">i8"), ("num", ">i4"), ("magic", ">i4")]


def wheel_length(slots_total: int = SLOTS_TOTAL) -> int:
    """TimerWheel.wheelLength: the file's size."""
    return slots_total * 2 * SLOT_SIZE


def slot_count(file_size: int) -> int:
    """How many whole slots a wheel file of this size holds (2 * slotsTotal when sound)."""
    return file_size // SLOT_SIZE


def _java_div(a: int, b: int) -> int:
    """Java's long division: rounds toward zero."""
    if a >= 0 and b > 0:  # the common case: floor division is Java's
        return a // b
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def slot_index(time_ms: int, precision_ms: int = DEFAULT_TIMER_PRECISION_MS, slots: int = 2 * SLOTS_TOTAL) -> int:
    """TimerWheel.getSlotIndex: (int) (timeMs / precisionMs % (slotsTotal * 2)), Java's / and %."""
    steps = _java_div(time_ms, precision_ms)
    return steps - _java_div(steps, slots) * slots


def time_value(time_ms: int, precision_ms: int = DEFAULT_TIMER_PRECISION_MS) -> int:
    """What putSlot stores as the slot's time: timeMs / precisionMs."""
    return _java_div(time_ms, precision_ms)


def slot_time_ms(time_value: int, precision_ms: int = DEFAULT_TIMER_PRECISION_MS) -> int:
    """The slot's time in ms, as getRawSlot computes it (stored value * precisionMs)."""
    return time_value * precision_ms
