"""Random access to commit log records by offset: the read every lookup shares.

One ``pread`` of a small head per record (a second one only for records longer than
that), never a scan, so a lookup touches only the pages it needs. The answers follow the
broker's ``lookMessageByOffset`` and ``CommitLog.pickupStoreTimestamp``; unlike the
broker, a record that is not one says why. Read-only.
"""
from __future__ import annotations

import os
import pathlib

from rmqtool.errors import CorruptData, NothingFound, StoreAccessError
from rmqtool.formats.commitlog import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODES, MIN_MESSAGE_LENGTH
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.segments import Segment
from rmqtool.store.message import HOSTS, PREFIX, RECORD_START, Message, RecordError, decode_message
from rmqtool.store.paths import StorePaths

HEAD_READ = 4096  # one page: most records fit, so one pread reads them whole
_HOP = RECORD_START  # totalSize, magicCode
_STORE_TIMESTAMP_READ = PREFIX.size + max(h.size for h in HOSTS)


class CommitLogReader:
    """Random access to the records of a commit log, by offset (the one reader of the bytes at
    a commit log offset: CommitLog.getMessage / getData over MappedFile.selectMappedBuffer).
    Read-only."""

    def __init__(self, commit_log: CommitLog):
        self.commit_log = commit_log
        self._fds: dict[pathlib.Path, int] = {}

    @classmethod
    def of_store(cls, store: str | os.PathLike) -> "CommitLogReader":
        return cls(CommitLog(StorePaths(store).commitlog))

    @property
    def min_offset(self) -> int:
        """getMinPhyOffset: the first segment's offset (0 for an empty commit log)."""
        return self.commit_log.queue.min_offset or 0

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def __enter__(self) -> "CommitLogReader":
        return self

    def __exit__(self, *exc):
        self.close()

    def _fd(self, seg: Segment) -> int:
        fd = self._fds.get(seg.path)
        if fd is None:
            try:
                fd = os.open(seg.path, os.O_RDONLY)
            except OSError as exc:
                raise StoreAccessError(f"cannot open ({exc.strerror})", seg.path) from None
            self._fds[seg.path] = fd
        return fd

    def pread(self, seg: Segment, position: int, length: int) -> bytes:
        """Up to ``length`` bytes of a segment from ``position``: every read of this reader."""
        try:
            return os.pread(self._fd(seg), length, position)
        except OSError as exc:
            raise StoreAccessError(f"read failed ({exc.strerror})", seg.path, position) from None

    def locate(self, offset: int) -> tuple[Segment, int]:
        """(segment, position in it) of a commit log offset; NothingFound when no file holds it."""
        seg = self.commit_log.queue.find(offset) if offset >= 0 else None
        if seg is None or offset - seg.base_offset >= seg.size:
            raise NothingFound("no commit log file holds this offset (past the end, or deleted)",
                               self.commit_log.directory, offset)
        return seg, offset - seg.base_offset

    def get_data(self, offset: int, length: int, end: int | None = None) -> bytes:
        """CommitLog.getData / MappedFile.selectMappedBuffer(pos): up to ``length`` bytes
        from a commit log offset, not past its file nor ``end`` (what may be read, the
        reput's max offset); b"" when no file holds the offset."""
        seg = self.commit_log.queue.find(offset) if offset >= 0 else None
        if seg is None:
            return b""
        position = offset - seg.base_offset
        length = min(length, seg.size - position, length if end is None else end - offset)
        return self.pread(seg, position, length) if length > 0 else b""

    def past_blank(self, offset: int) -> int:
        """Where the reput reads next from ``offset``: there, or where an end-of-file blank
        lies there, the next file's first byte (its rollNextFile)."""
        seg = self.commit_log.queue.find(offset) if offset >= 0 else None
        if seg is None:
            return offset
        head = self.pread(seg, offset - seg.base_offset, _HOP.size)
        if len(head) == _HOP.size and _HOP.unpack_from(head, 0)[1] == BLANK_MAGIC_CODE:
            return seg.base_offset + max(seg.size, self.commit_log.queue.mapped_file_size or 0)
        return offset

    def read(self, offset: int, *, check_crc: bool = True) -> Message:
        """The message whose record starts at ``offset``.

        NothingFound when no record starts there (past the written data, an end-of-file
        blank, bytes that are no record); CorruptData when a record starts there but its
        lengths do not add up. A body CRC mismatch is not an error: the message comes
        back with ``body_crc_ok`` False, as the broker's lookMessageByOffset returns it.
        """
        seg, position = self.locate(offset)
        head = self.pread(seg, position, HEAD_READ)
        if len(head) < _HOP.size:
            raise NothingFound("too few bytes left in the file for a record", seg.path, position)
        total, magic = _HOP.unpack_from(head, 0)
        if magic == BLANK_MAGIC_CODE:
            raise NothingFound("an end-of-file blank record lies here, not a message", seg.path, position)
        if magic not in MESSAGE_MAGIC_CODES:
            if total == 0 and magic == 0:
                later = self.commit_log.queue.find(seg.base_offset + seg.size)  # the file after it
                where = ("past the end of the written data" if later is None else
                         f"in this file's unused end (inside its end-of-file blank, or after it); the log goes "
                         f"on in {later.path.name}")
                raise NothingFound(f"unwritten (all-zero) bytes: {where}", seg.path, position)
            raise NothingFound(f"no message record starts here (magic 0x{magic:08X}); "
                               f"the offset may point inside a record", seg.path, position)
        if total < MIN_MESSAGE_LENGTH or position + total > seg.size:
            raise CorruptData(f"record totalSize {total} cannot be right here "
                              f"({seg.size - position} bytes left in the file)", seg.path, position)
        buf = head if total <= len(head) else self.pread(seg, position, total)
        if len(buf) < total:
            raise CorruptData(f"record cut off: {len(buf)} of {total} bytes readable", seg.path, position)
        try:
            return decode_message(buf, 0, offset, total, check_crc=check_crc, path=str(seg.path),
                                  file_position=position)
        except RecordError as exc:
            raise CorruptData(f"{exc.finding_id}: {exc.message}", seg.path, position) from None

    def store_timestamp(self, offset: int, size: int) -> tuple[int, str | None]:
        """CommitLog.pickupStoreTimestamp: (storeTimestamp, None), or (-1, why) when the
        broker could not read it (before the min offset, or [offset, offset + size) not in
        one file). rmqtool also answers -1 where no record of that size starts."""
        if offset < self.min_offset:
            return -1, f"offset {offset} is before the commit log's first file ({self.min_offset})"
        seg = self.commit_log.queue.find(offset)
        if seg is None or offset - seg.base_offset + max(size, 0) > seg.size or size <= 0:
            return -1, f"[{offset}, {offset}+{size}) is not inside one commit log file"
        position = offset - seg.base_offset
        buf = self.pread(seg, position, _STORE_TIMESTAMP_READ)
        if len(buf) < PREFIX.size:
            return -1, f"offset {offset}: file too short for a record"
        fields = PREFIX.unpack_from(buf, 0)
        total, magic, sys_flag = fields[0], fields[1], fields[7]
        if magic not in MESSAGE_MAGIC_CODES or total != size:
            return -1, (f"offset {offset}: no record of {size} bytes starts there "
                        f"(magic 0x{magic:08X}, totalSize {total})")
        hosts = HOSTS[(sys_flag >> 4) & 3]
        if len(buf) < PREFIX.size + hosts.size:
            return -1, f"offset {offset}: file too short for the record header"
        return hosts.unpack_from(buf, PREFIX.size)[2], None
