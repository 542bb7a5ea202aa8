"""Where each file of a store lives (the broker's StorePathConfigHelper), in one place."""
from __future__ import annotations

import os
import pathlib

from rmqtool.formats.dledger import DATA_DIR as DLEDGER_DATA_DIR, DIR_PREFIX as DLEDGER_DIR_PREFIX

COMMITLOG_DIR = "commitlog"
CONSUMEQUEUE_DIR = "consumequeue"
CONSUMEQUEUE_EXT_DIR = "consumequeue_ext"
BATCH_CONSUMEQUEUE_DIR = "batchconsumequeue"
INDEX_DIR = "index"
CONFIG_DIR = "config"
CHECKPOINT_FILE = "checkpoint"
ABORT_FILE = "abort"
ABORT_BAK_FILE = "abort.bak"
LOCK_FILE = "lock"
# rmqtool's own: present only while a repair (or its undo) is under way; names its backup
UNFINISHED_FILE = ".rmqtool-unfinished"
# rmqtool's own: in a recover --to copy until its repair is done; names the store it is a copy of
COPY_OF_FILE = ".rmqtool-copy-of"

# Segment files are named by the offset of their first byte, zero-padded to 20 digits.
SEGMENT_NAME_DIGITS = 20


def segment_name(offset: int) -> str:
    return f"{offset:0{SEGMENT_NAME_DIGITS}d}"


# The broker parses a segment's name with Long.parseLong (MappedFile.init): 20 digits can
# say more than a Java long holds, and such a name makes its load fail.
LONG_MAX = (1 << 63) - 1


def is_segment_name(name: str) -> bool:
    return len(name) == SEGMENT_NAME_DIGITS and name.isdigit() and int(name) <= LONG_MAX


def first_file_unnameable(expect_logic_offset: int) -> bool:
    """Whether a consume queue's first file, made for a unit at this byte offset, is one
    rmqtool does not write: the broker's ``cqOffset * 20`` passes a Java long and wraps, or is
    negative, and getLastMappedFile then names the file by a negative offset ("-000...", which
    Long.parseLong reads back). A damaged queueOffset field (the body CRC does not cover it)
    sends a record there."""
    return not 0 <= expect_logic_offset <= LONG_MAX


def names_a_directory(topic: str) -> bool:
    """Whether a topic can be the TOPIC of consumequeue/TOPIC/ (one path component)."""
    return bool(topic) and topic not in (".", "..") and "/" not in topic and "\0" not in topic


# the longest name a Linux file system takes for one path component, in bytes (NAME_MAX)
NAME_MAX = 255


def queue_directory(root: str | pathlib.Path, topic: str, queue_id: int) -> pathlib.Path:
    """ROOT/TOPIC/QUEUEID, the directory of a (batch) consume queue. A topic read from a
    damaged record may be no file name at all ("../x", a NUL byte): a writer must refuse it
    rather than write outside the store (CorruptData naming the root)."""
    from rmqtool.errors import CorruptData
    if not names_a_directory(topic):
        raise CorruptData(f"a record's topic {topic!r} cannot name a queue directory: the record is damaged "
                          f"(rmqtool verify shows where)", root)
    return pathlib.Path(root) / topic / str(queue_id)


class StorePaths:
    """Paths of one store root."""

    def __init__(self, root: str | pathlib.Path):
        self.root = pathlib.Path(root)

    @property
    def commitlog(self) -> pathlib.Path:
        return self.root / COMMITLOG_DIR

    @property
    def consumequeue(self) -> pathlib.Path:
        return self.root / CONSUMEQUEUE_DIR

    @property
    def batch_consumequeue(self) -> pathlib.Path:
        return self.root / BATCH_CONSUMEQUEUE_DIR

    @property
    def index(self) -> pathlib.Path:
        return self.root / INDEX_DIR

    @property
    def config(self) -> pathlib.Path:
        return self.root / CONFIG_DIR

    @property
    def checkpoint(self) -> pathlib.Path:
        return self.root / CHECKPOINT_FILE

    @property
    def abort(self) -> pathlib.Path:
        return self.root / ABORT_FILE

    @property
    def abort_bak(self) -> pathlib.Path:
        return self.root / ABORT_BAK_FILE

    @property
    def lock(self) -> pathlib.Path:
        return self.root / LOCK_FILE

    @property
    def unfinished(self) -> pathlib.Path:
        return self.root / UNFINISHED_FILE

    @property
    def copy_of(self) -> pathlib.Path:
        return self.root / COPY_OF_FILE


def is_dledger_home(d: pathlib.Path) -> bool:
    """``dledger-<selfId>/`` (data/ inside), not a store root that happens to be named so."""
    return (d.name.startswith(DLEDGER_DIR_PREFIX) and (d / DLEDGER_DATA_DIR).is_dir()
            and not any((d / n).is_dir() for n in (COMMITLOG_DIR, CONSUMEQUEUE_DIR)))


def dledger_home(root: str | os.PathLike) -> pathlib.Path | None:
    """The DLedger home a store root holds (:func:`is_dledger_home`), or None. Several (a
    root shared by nodes of a test group): the first by name."""
    try:
        homes = sorted(p for p in pathlib.Path(root).glob(DLEDGER_DIR_PREFIX + "*") if is_dledger_home(p))
    except OSError:
        return None
    return homes[0] if homes else None
