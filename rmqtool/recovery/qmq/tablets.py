"""``SortedPullLogTable``'s load at a QMQ start: the pull-log tablets validated in id order,
the action replay state, and the tablets it destroys.

Unlike the read side (``store/qmq/tablets.py``, which says why a tablet is unusable), the
start throws where the Java does: a name ``Long.parseLong`` refuses (``VarLogSegment``), a
tablet too short for its header or its CRC (``BufferUnderflowException``: each read is a
``ByteBuffer.allocate(size)`` filled by ``FileChannel.read`` and flipped), a negative size or
position, an index that does not parse. A bad magic or CRC only ends the load: the replay
state is the last valid tablet's endOffset + 1 (0 when the first is bad), and every tablet
whose id is at or past that state is destroyed.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import zlib

from rmqtool.formats.qmq.java import NumberFormatError, java_parse
from rmqtool.formats.qmq.tablet import SORTED_MESSAGES_TABLE_MAGIC_V1, TABLET_CRC_SIZE, TABLET_HEADER_SIZE
from rmqtool.recovery.qmq.javabuf import JavaBuffer, JavaException, int32


@dataclasses.dataclass(frozen=True)
class TabletLoad:
    replay_state: int  # SortedPullLogTable.getActionReplayState
    valid: tuple[str, ...]  # tablets whose index was loaded
    destroyed: tuple[str, ...]  # tablets the load deletes (id >= the replay state)


def _select(data: bytes, position: int, size: int) -> tuple[JavaBuffer, bytes]:
    """``VarLogSegment.selectBuffer``: the buffer (limit = the bytes read) and its backing
    array (``size`` bytes, zeros past the file)."""
    if size < 0:
        raise JavaException("java.lang.IllegalArgumentException", f"capacity < 0: ({size} < 0)")
    if position < 0:
        raise JavaException("java.lang.IllegalArgumentException", "Negative position")
    read = bytes(data[position:position + size])
    return JavaBuffer(read, 0, len(read)), read + bytes(size - len(read))


def _validate(data: bytes) -> tuple[int, int, int] | None:
    header, _ = _select(data, 0, TABLET_HEADER_SIZE)
    if header.get_int() != int32(SORTED_MESSAGES_TABLE_MAGIC_V1):
        return None
    total, index_position = header.get_int(), header.get_int()
    header.get_long()
    end_offset = header.get_long()
    crc, _ = _select(data, int32(total + TABLET_HEADER_SIZE), TABLET_CRC_SIZE)
    stored = crc.get_long()
    _, payload = _select(data, TABLET_HEADER_SIZE, total)
    return (total, index_position, end_offset) if stored == zlib.crc32(payload) else None


def _load_index(data: bytes, total: int, index_position: int) -> None:
    index, _ = _select(data, index_position, int32(total + TABLET_HEADER_SIZE - index_position))
    while index.remaining() > 0:
        index.get_int()
        index.get_bytes(index.get_short())  # the consumer key
        index.get_long(), index.get_long(), index.get_int(), index.get_int()


def load_tablets(store: str | os.PathLike) -> TabletLoad:
    """Raises ``JavaException`` where the load throws out of ``new DefaultStorage``."""
    directory = pathlib.Path(store) / "pulllog_smt"
    found: dict[int, pathlib.Path] = {}
    if directory.is_dir():
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            try:
                tablet_id = java_parse(entry.name)
            except NumberFormatError:
                raise JavaException("java.lang.NumberFormatException", f'For input string: "{entry.name}"',
                                    entry.path) from None
            if entry.is_file():  # a directory: FileNotFoundException, caught and skipped
                found[tablet_id] = pathlib.Path(entry.path)
    state, valid, last = 0, [], None
    for tablet_id in sorted(found):
        path = found[tablet_id]
        data = path.read_bytes()
        try:
            header = _validate(data)
            if header is None:
                state = 0 if last is None else last + 1
                break
            last = header[2]
            _load_index(data, header[0], header[1])
        except JavaException as exc:
            exc.file = exc.file or str(path)
            raise
        valid.append(str(path))
        state = last + 1
    destroyed = tuple(str(found[t]) for t in sorted(found) if t >= state)
    return TabletLoad(state, tuple(v for v in valid if v not in destroyed), destroyed)
