"""The broker's own config file (``broker.conf``, given to ``mqbroker -c FILE``): Java
properties text, as ``java.util.Properties.load(InputStream)`` reads it, and the
MessageStoreConfig settings that fix the store's file sizes.

BrokerStartup (4.9.8 and 5.3.3 alike) loads the file with ``Properties.load`` and hands it
to ``MixAll.properties2Object``, which calls each setter whose name matches a key with
``Integer.parseInt(value)``; a value that does not parse is skipped without a word
(``catch (Throwable ignored)``), so the setting keeps its default. Properties.load keeps a
value's trailing blanks, and parseInt refuses them: ``maxIndexNum=3333 `` leaves the
broker on 20000000. Boolean.parseBoolean takes ``true `` as false. A String setting
(storePathCommitLog, storePathRootDir, storeType) is where the versions part: 5.3.3's
properties2Object hands the setter ``property.trim()``, 4.9.8's the value as written, blanks
and all (``storePathCommitLog=/data/cl `` is ``/data/cl`` to one, ``/data/cl `` to the other).

Properties.load, line by line: ISO-8859-1 text; a line whose first non-blank character is
``#`` or ``!`` is a comment; a line ending in an odd number of backslashes goes on in the
next one (whose leading blanks are dropped); the key ends at the first unescaped ``=``,
``:`` or blank, then blanks, at most one ``=``/``:``, and blanks again are skipped; escapes
``\\t \\n \\r \\f \\uXXXX`` are decoded, any other ``\\x`` is ``x``; a later key wins.
"""
from __future__ import annotations

import re

from rmqtool.errors import FormatError

# MessageStoreConfig fields (their getters give what the broker uses)
MAPPED_FILE_SIZE_COMMIT_LOG = "mappedFileSizeCommitLog"
MAPPED_FILE_SIZE_CONSUME_QUEUE = "mappedFileSizeConsumeQueue"  # the getter rounds it up to 20-byte units
MAPPER_FILE_SIZE_BATCH_CONSUME_QUEUE = "mapperFileSizeBatchConsumeQueue"  # 5.x; the getter returns it as is
MAX_HASH_SLOT_NUM = "maxHashSlotNum"
MAX_INDEX_NUM = "maxIndexNum"
MAPPED_FILE_SIZE_TIMER_LOG = "mappedFileSizeTimerLog"  # 5.x timer store
TIMER_ROLL_WINDOW_SLOT = "timerRollWindowSlot"
TIMER_PRECISION_MS = "timerPrecisionMs"

_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1


def _logical_lines(text: str):
    """(line number, logical line) pairs: comments and blank lines dropped, continuations joined."""
    lines = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(lines):
        number, line = i + 1, lines[i].lstrip(_BLANKS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _ends_in_escape(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(_BLANKS)
            i += 1
        if _ends_in_escape(line):  # a continuation at the end of the file: the backslash goes
            line = line[:-1]
        yield number, line


def _ends_in_escape(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _unescape(raw: str, line: int) -> str:
    out = []
    i = 0
    while i < len(raw):
        c = raw[i]
        i += 1
        if c != "\\" or i >= len(raw):
            out.append(c)
            continue
        c = raw[i]
        i += 1
        if c == "u":
            digits = raw[i:i + 4]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                # Properties.load throws IllegalArgumentException: the broker does not start
                raise FormatError(f"line {line}: malformed \\uxxxx escape (the broker would not start with it)")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """Key and raw value of a logical line (the key's end: an unescaped =, : or blank)."""
    i, escaped = 0, False
    while i < len(line):
        c = line[i]
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in "=:" or c in _BLANKS:
            break
        i += 1
    key, j, separator = line[:i], i, False
    while j < len(line) and (line[j] in _BLANKS or (not separator and line[j] in "=:")):
        separator = separator or line[j] in "=:"
        j += 1
    return key, line[j:]


def parse_properties(data: bytes) -> dict[str, str]:
    """Every key and value of a properties file, as Properties.load(InputStream) reads them.
    Raises FormatError (no path: the caller names the file) where the broker's load throws."""
    text = data.decode("iso-8859-1")
    table: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split(line)
        table[_unescape(key, number)] = _unescape(value, number)
    return table


def java_parse_int(text: str) -> int | None:
    """Integer.parseInt: an optional sign and decimal digits in int range, nothing else (no
    blanks); None where it throws NumberFormatException."""
    if not _JAVA_INT.fullmatch(text):
        return None
    value = int(text)
    return value if INT_MIN <= value <= INT_MAX else None
