"""Controller mode's epoch file: ``epochFileCheckpoint`` (and ``epochFileCheckpoint.bak``) in the store root.

Mirrors, at rocketmq-all-5.3.3, ``common/src/main/java/org/apache/rocketmq/common/utils/CheckpointFile.java``
(the text layout and which file is read), ``store/.../ha/autoswitch/EpochFileCache.java`` (its
``EpochEntrySerializer``: one line an entry) and ``MessageStoreConfig.getStorePathEpochFile``
(``<storePathRootDir>/epochFileCheckpoint`` unless ``storePathEpochFile`` is set). Text, UTF-8,
lines ended by ``System.lineSeparator()`` (``\\n`` on the Linux brokers this reads)::

    2            <- entries: how many entry lines follow (Integer.parseInt)
    773307083    <- CRC32 of the entry lines, each with its line separator, masked & 0x7FFFFFFF
    7-7000       <- "<epoch>-<startOffset>": epoch (int), the commit log offset it starts at (long)
    8-8000

(the example in CheckpointFile's Javadoc; its CRC is the one :func:`entries_crc` computes).
An epoch's end offset is not stored: it is the next entry's start offset (``initEntries``),
and the last entry's is open (Long.MAX_VALUE) until a sync sets it to the commit log's max
offset (``setLastEpochEntryEndOffset``).

Writing (``CheckpointFile.write`` through ``MixAll.string2File``): an empty list is not
written at all; otherwise the current file is first copied to ``.bak``, then the file is
rewritten in place. So ``.bak`` is the file one write behind.

Reading (``CheckpointFile.read``), which :func:`parse_epoch_file` and the store's loader follow:

* a missing file reads as no entries; an entry line that does not split into two parts at
  ``-`` is skipped (still counted in the CRC);
* a count or CRC that does not match (a CRC of 0 is not checked), or bytes that are not UTF-8,
  throw IOException: the ``.bak`` is read instead (and when that throws too the epoch cache
  starts empty: ``initCacheFromFile`` logs it);
* no entries read from the file: the ``.bak`` is read instead;
* a header or number Integer.parseInt / Long.parseLong refuses (an empty file: the first line
  is null) throws NumberFormatException, which nothing catches: ``AutoSwitchHAService.init``
  fails and with it the store's start.
"""
from __future__ import annotations

import dataclasses
import re
import zlib

from .qmq.java import NumberFormatError, java_parse

EPOCH_FILE_NAME = "epochFileCheckpoint"  # MessageStoreConfig.getStorePathEpochFile
BAK_SUFFIX = ".bak"  # CheckpointFile.getBackFilePath
LINE_SEPARATOR = "\n"  # System.lineSeparator() on Linux
NOT_CHECK_CRC = 0  # CheckpointFile.NOT_CHECK_CRC_MAGIC_CODE
ENTRY_SEPARATOR = "-"
LONG_MAX = (1 << 63) - 1  # EpochEntry's endOffset until one is set

# BufferedReader.readLine's terminators
_LINE_END = re.compile(rb"\r\n|\r|\n")

OK, SKIPPED, THROWS = "ok", "skipped", "throws"  # how a read ends: entries, IOException, NumberFormatException


@dataclasses.dataclass(frozen=True)
class EpochLine:
    """One entry line as read: its epoch and start offset, its line number (1 = the count) and
    the byte position of the line in the file."""
    epoch: int
    start_offset: int
    line: int
    position: int


@dataclasses.dataclass(frozen=True)
class EpochFileRead:
    """One file read the way CheckpointFile.read(path) reads it. ``outcome`` is OK (``entries``
    read), SKIPPED (an IOException: the reader moves on) or THROWS (NumberFormatException:
    the broker's start fails); ``why`` and ``position`` say what and where, when not OK."""
    outcome: str
    entries: tuple[EpochLine, ...] = ()
    count: int | None = None  # the first line's entry count
    crc: int | None = None  # the second line's CRC
    computed_crc: int | None = None  # the CRC of the entry lines as read
    why: str | None = None
    position: int | None = None


def entries_crc(entry_text: str) -> int:
    """UtilAll.crc32 of the entry lines' UTF-8 bytes: CRC32, masked to 31 bits."""
    return zlib.crc32(entry_text.encode("utf-8")) & 0x7FFFFFFF


def entry_line(epoch: int, start_offset: int) -> str:
    """EpochEntrySerializer.toLine: ``String.format("%d-%d", epoch, startOffset)``."""
    return f"{epoch}{ENTRY_SEPARATOR}{start_offset}"


def java_split(text: str, separator: str) -> list[str]:
    """String.split with a one-character literal: trailing empty strings removed (an empty
    string splits to ``[""]``)."""
    if text == "":
        return [""]
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _lines(data: bytes) -> list[tuple[int, bytes]]:
    """(byte position, line) as BufferedReader.readLine returns them, terminators dropped."""
    lines, start = [], 0
    for m in _LINE_END.finditer(data):
        lines.append((start, data[start:m.start()]))
        start = m.end()
    if start < len(data):
        lines.append((start, data[start:]))
    return lines


def parse_epoch_file(data: bytes) -> EpochFileRead:
    """The file's bytes read as CheckpointFile.read(path) reads them (see the module docstring)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:  # the reader's decoder throws MalformedInputException
        return EpochFileRead(SKIPPED, why=f"not UTF-8 text (byte {exc.start}): the read throws IOException",
                             position=exc.start)
    lines = _lines(data)
    header = []
    for n, what, kind in ((0, "entry count", "int"), (1, "entries CRC", "int")):
        position, raw = lines[n] if n < len(lines) else (len(data), None)
        text = None if raw is None else raw.decode("utf-8")
        try:
            header.append(java_parse(text, kind))
        except NumberFormatError:
            shown = "missing" if text is None else repr(text)
            return EpochFileRead(THROWS, why=f"line {n + 1} ({what}) is {shown}, not a number Integer.parseInt "
                                             f"reads: NumberFormatException", position=position)
    count, crc = header
    entries, text_read = [], []
    for number, (position, raw) in enumerate(lines[2:], start=3):
        line = raw.decode("utf-8")
        text_read.append(line + LINE_SEPARATOR)
        parts = java_split(line, ENTRY_SEPARATOR)
        if len(parts) != 2:
            continue  # fromLine returns null: the line is skipped
        try:
            epoch, start = java_parse(parts[0], "int"), java_parse(parts[1], "long")
        except NumberFormatError:
            return EpochFileRead(THROWS, count=count, crc=crc,
                                 why=f"line {number} {line!r} is not '<int epoch>-<long startOffset>' as "
                                     f"Integer.parseInt / Long.parseLong read it: NumberFormatException",
                                 position=position)
        entries.append(EpochLine(epoch, start, number, position))
    computed = entries_crc("".join(text_read))
    entries_t = tuple(entries)
    if len(entries) != count:
        return EpochFileRead(SKIPPED, entries_t, count, crc, computed,
                             f"the first line says {count} entries, {len(entries)} read: the read throws "
                             f"IOException", 0)
    if crc != NOT_CHECK_CRC and crc != computed:
        return EpochFileRead(SKIPPED, entries_t, count, crc, computed,
                             f"the entries' CRC32 is {computed}, the file says {crc}: the read throws IOException",
                             lines[1][0])
    return EpochFileRead(OK, entries_t, count, crc, computed)


def epoch_file_text(entries: list[tuple[int, int]]) -> str:
    """The text CheckpointFile.write makes of (epoch, startOffset) entries (none: nothing is written)."""
    body = "".join(entry_line(e, s) + LINE_SEPARATOR for e, s in entries)
    return f"{len(entries)}{LINE_SEPARATOR}{entries_crc(body)}{LINE_SEPARATOR}{body}"
