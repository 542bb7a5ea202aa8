"""DLedger's entry log and entry index: the files of a RocketMQ store run with ``enableDLegerCommitLog``.

Mirrors openmessaging/dledger at tag ``dledger-all-0.3.1.2`` (the version rocketmq-all-5.3.3's
pom names): ``entry/DLedgerEntry.java`` (POS_OFFSET, HEADER_SIZE, BODY_OFFSET, lines 21-23),
``entry/DLedgerEntryCoder.java`` (``encode`` lines 23-38, ``encodeIndex`` lines 40-48),
``store/file/DLedgerMmapFileStore.java`` (MAGIC_1 / CURRENT_MAGIC / INDEX_UNIT_SIZE lines 47-49,
the checkpoint's keys lines 44-46) and ``store/file/MmapFileList.java`` (BLANK_MAGIC_CODE,
MIN_BLANK_LEN lines 34-35). Files: ``<storePathRootDir>/dledger-<selfId>/data/`` and ``.../index/``
(``DLedgerConfig.getDefaultPath`` + "data" / "index"), each named by the absolute offset of its
first byte (20 digits); a data file is ``mappedFileSizeCommitLog`` bytes (DLedgerCommitLog sets
``mappedFileSizeForEntryData`` from it), an index file DLedger's own default 32 x 5 MiB. All
integers big-endian.

Entry (``DLedgerEntryCoder.encode``)::

     0 +-------+-------+---------------+---------------+---------------+
       | magic | size  |     index     |     term      |      pos      |
       | int32 | int32 |     int64     |     int64     |     int64     |
    32 +-------+-------+---------+-----+---+-----------+---------------+
       | channel | chainCrc | bodyCrc | bodyLength |  body ...         |
       |  int32  |  int32   |  int32  |   int32    |  (bodyLength B)   |
    48 +---------+----------+---------+------------+-------------------+

    size = 48 + bodyLength (``BODY_OFFSET``); pos = the entry's own absolute offset in the data
    files. ``HEADER_SIZE`` (44) is the header without bodyLength. 0.3.1.2 never sets channel,
    chainCrc or bodyCrc: they are written as 0.

In a RocketMQ store the body is one complete commit log record (``formats/commitlog.py``), and
``DLedgerCommitLog``'s append hook writes ``pos + BODY_OFFSET`` into its PHYSICALOFFSET field
(DLedgerCommitLog.java lines 107-111 at rocketmq-all-5.3.3): a record's commit log offset is
where its bytes lie in the data files, which is what the consume queue, the index files and
the offset msgId name.

Blank fill (``MmapFileList.preAppend``): an entry that does not fit its file leaves magic -1 and
the number of bytes to the file's end (an int32), then zeros; the next entry starts the next file.

Index unit (``encodeIndex``), 32 bytes, unit *i* at byte ``i * 32`` of the index files::

     0 +-------+---------------+-------+---------------+---------------+
       | magic |      pos      | size  |     index     |     term      |
       | int32 |     int64     | int32 |     int64     |     int64     |
    32 +-------+---------------+-------+---------------+---------------+

The ``checkpoint`` file beside data/ and index/ is Java properties text (``committedIndex``,
``endIndex``), ``currterm`` the vote state (``currTerm``, ``voteLeader``).
"""
from __future__ import annotations

from construct import Int32sb, Int64sb, Struct

from .derive import struct_of

MAGIC_1 = 1  # DLedgerMmapFileStore.MAGIC_1
CURRENT_MAGIC = MAGIC_1  # DLedgerMmapFileStore.CURRENT_MAGIC
BLANK_MAGIC_CODE = -1  # MmapFileList.BLANK_MAGIC_CODE: the rest of the file is a blank fill
MIN_BLANK_LEN = 8  # MmapFileList.MIN_BLANK_LEN: magic + the bytes left
POS_OFFSET = 4 + 4 + 8 + 8  # DLedgerEntry.POS_OFFSET
HEADER_SIZE = POS_OFFSET + 8 + 4 + 4 + 4  # DLedgerEntry.HEADER_SIZE (44)
BODY_OFFSET = HEADER_SIZE + 4  # DLedgerEntry.BODY_OFFSET (48): where the commit log record starts
INDEX_UNIT_SIZE = 32  # DLedgerMmapFileStore.INDEX_UNIT_SIZE
DEFAULT_INDEX_FILE_SIZE = INDEX_UNIT_SIZE * 5 * 1024 * 1024  # DLedgerConfig.mappedFileSizeForEntryIndex

DATA_DIR, INDEX_DIR = "data", "index"  # DLedgerConfig.getDataStorePath / getIndexStorePath
DIR_PREFIX = "dledger-"  # DLedgerConfig.getDefaultPath: storeBaseDir/dledger-<selfId>
CHECKPOINT_FILE = "checkpoint"  # DLedgerMmapFileStore.CHECK_POINT_FILE
END_INDEX_KEY, COMMITTED_INDEX_KEY = "endIndex", "committedIndex"
CURRTERM_FILE = "currterm"  # MemberState.TERM_PERSIST_FILE
CURR_TERM_KEY, VOTE_LEADER_KEY = "currTerm", "voteLeader"

# DLedgerEntryCoder.encode: the header, in writing order
EntryHeader = Struct(
    "magic" / Int32sb,
    "size" / Int32sb,
    "index" / Int64sb,
    "term" / Int64sb,
    "pos" / Int64sb,
    "channel" / Int32sb,
    "chain_crc" / Int32sb,
    "body_crc" / Int32sb,
    "body_length" / Int32sb,
)
assert EntryHeader.sizeof() == BODY_OFFSET

# DLedgerEntryCoder.encodeIndex
IndexUnit = Struct(
    "magic" / Int32sb,
    "pos" / Int64sb,
    "size" / Int32sb,
    "index" / Int64sb,
    "term" / Int64sb,
)
assert IndexUnit.sizeof() == INDEX_UNIT_SIZE

# MmapFileList.preAppend's blank: magic -1, then the bytes from it to the file's end
BlankFill = Struct("magic" / Int32sb, "size" / Int32sb)
assert BlankFill.sizeof() == MIN_BLANK_LEN

ENTRY_HEADER = struct_of(EntryHeader)
INDEX_UNIT = struct_of(IndexUnit)
BLANK_FILL = struct_of(BlankFill)
