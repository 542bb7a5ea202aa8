"""The timer log's units against the commit log records they name, all at once.

A unit is plain when getMessageByCommitOffset would find its own record: offsetPy/sizePy lie
inside one commit log file, below the recovered end, and hold one whole record of exactly
sizePy bytes (the record rule, :func:`rmqtool.store.record_kernel.records_at`) of topic
``rmq_sys_wheel_timer`` whose REAL_TOPIC hashes to the unit's hashCodeOfRealTopic. There is
nothing to say about a plain unit; verify decodes the others one by one as the broker reads
them (``MessageStoreAtLoad.record``), so every finding still comes from that one path.
"""
from __future__ import annotations

import mmap
import pathlib

import numpy as np

from rmqtool.formats.commitlog import MESSAGE_MAGIC_CODES
from rmqtool.formats.indexfile import java_string_hash
from rmqtool.formats.properties import PROPERTY_REAL_TOPIC, bytes_to_properties
from rmqtool.formats.timerlog import TIMER_TOPIC
from rmqtool.store.arrays import at_every_byte
from rmqtool.store.paths import COMMITLOG_DIR
from rmqtool.store.record_kernel import HEADER_DTYPE, records_at
from rmqtool.store.segments import discover

_TOPIC = TIMER_TOPIC.encode("ascii")


def plain_units(root, offset_py: np.ndarray, size_py: np.ndarray, topic_hash: np.ndarray, low: int,
                end: int) -> np.ndarray:
    """A mask over units (their offsetPy, sizePy, hashCodeOfRealTopic columns): plain ones."""
    plain = np.zeros(len(offset_py), bool)
    offset_py, size_py = offset_py.astype(np.int64), size_py.astype(np.int64)
    hashes: dict[str, int] = {}
    for seg in discover(pathlib.Path(root) / COMMITLOG_DIR, required=False).segments:
        if seg.size < HEADER_DTYPE.itemsize:
            continue
        last = min(end, seg.base_offset + seg.size)  # getData: inside this file, below the end
        rows = np.flatnonzero((offset_py >= max(low, seg.base_offset)) & (size_py >= HEADER_DTYPE.itemsize)
                              & (offset_py + size_py <= last))
        if not len(rows):
            continue
        with open(seg.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            pos = offset_py[rows] - seg.base_offset
            parts = records_at(buf, pos)
            ok = (parts["whole"] & (parts["total_size"] == size_py[rows])
                  & np.isin(parts["magic_code"], list(MESSAGE_MAGIC_CODES))
                  & (parts["topic_end"] - parts["topic_at"] == len(_TOPIC)))
            at = parts["topic_at"][ok]
            topics = at_every_byte(buf, np.dtype((np.void, len(_TOPIC))))[at]
            ok[np.flatnonzero(ok)] = topics == np.void(_TOPIC)
            for k in np.flatnonzero(ok).tolist():
                real = bytes_to_properties(buf[parts["properties_at"][k]:parts["end"][k]])[0].get(PROPERTY_REAL_TOPIC)
                code = hashes.get(real)
                if code is None and real is not None:
                    code = hashes[real] = java_string_hash(real)
                ok[k] = code is not None and code == topic_hash[rows[k]]
            plain[rows] = ok
            del parts, topics  # views of the map: released before it closes
    return plain
