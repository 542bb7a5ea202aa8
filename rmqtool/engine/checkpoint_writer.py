"""Keeping the ``checkpoint`` file, as StoreCheckpoint does.

The broker maps the file's first page (4096 B), keeps the three timestamps in memory, and
writes them to the page and forces it only in ``flush()``: on the consume queue flusher's
thorough interval (60 s), when an index file fills up, and at shutdown. Only bytes 0..23
are written, so anything after them (5.x keeps two offsets there) is left as it was.
"""
from __future__ import annotations

import mmap
import os
import pathlib
import threading

from rmqtool.engine.mapped_file import allocate
from rmqtool.errors import StoreAccessError
from rmqtool.formats.checkpoint import CHECKPOINT_FILE_SIZE, Checkpoint4, min_timestamp, min_timestamp_index
from rmqtool.formats.derive import struct_of

_TIMESTAMPS = struct_of(Checkpoint4)


class CheckpointWriter:
    """The store's checkpoint, read at open and written on :meth:`flush`."""

    def __init__(self, path: str | os.PathLike):
        self.path = pathlib.Path(path)
        self._lock = threading.Lock()  # the index flusher thread flushes it too
        existed = self.path.exists()
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(self.fd).st_size < CHECKPOINT_FILE_SIZE:
                os.ftruncate(self.fd, CHECKPOINT_FILE_SIZE)  # FileChannel.map extends it the same way
            allocate(self.fd, self.path, 0, CHECKPOINT_FILE_SIZE)  # no SIGBUS at a flush on a full disk
            self.mm = mmap.mmap(self.fd, CHECKPOINT_FILE_SIZE)
        except OSError as exc:
            raise StoreAccessError(f"cannot open the checkpoint ({exc.strerror})", self.path) from None
        except StoreAccessError:
            os.close(self.fd)
            raise
        if existed:
            (self.physic_msg_timestamp, self.logics_msg_timestamp,
             self.index_msg_timestamp) = _TIMESTAMPS.unpack_from(self.mm, 0)
        else:
            self.physic_msg_timestamp = self.logics_msg_timestamp = self.index_msg_timestamp = 0

    @property
    def min_timestamp(self) -> int:
        return min_timestamp(self.physic_msg_timestamp, self.logics_msg_timestamp)

    @property
    def min_timestamp_index(self) -> int:
        return min_timestamp_index(self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp)

    def flush(self) -> None:
        with self._lock:
            if self.mm.closed:
                return
            _TIMESTAMPS.pack_into(self.mm, 0, self.physic_msg_timestamp, self.logics_msg_timestamp,
                                  self.index_msg_timestamp)
            try:
                self.mm.flush()
            except OSError as exc:
                raise StoreAccessError(f"cannot flush the checkpoint ({exc.strerror})", self.path) from None

    def close(self) -> None:
        """StoreCheckpoint.shutdown: flush, then unmap."""
        if self.mm.closed:
            return
        self.flush()
        with self._lock:
            self.mm.close()
            os.close(self.fd)
