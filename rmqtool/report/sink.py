"""The one output sink: commands hand it rows (dicts); it renders them.

Formats: ``jsonl`` (one JSON object a line, for scripts), ``json`` (one JSON array, or
one object for a single-record command), ``table`` (aligned text, for people). Data goes to
stdout only; progress, warnings and findings go to stderr (see :func:`warn`).
"""
from __future__ import annotations

import io
import json
import os
import sys
from typing import Iterable, TextIO

import orjson

from rmqtool.errors import ExitCode
from rmqtool.report.columns import select_columns, terminal_safe
from rmqtool.report.finding_table import FINDING_KINDS, SEVERITY_ORDER, FindingTable
from rmqtool.report.progress import erase_bars
from rmqtool.report.table import TextTable, output_width

FORMATS = ("table", "jsonl", "json")
WRITE_BYTES = 1 << 16  # JSON output is written in pieces of about this size
ROWS_A_WRITE = 64  # JSON Lines rows joined before they go to the writer
_ORJSON_LINE = orjson.OPT_APPEND_NEWLINE


def _json_default(obj):
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).hex()
    if hasattr(obj, "to_json"):
        return obj.to_json()
    return str(obj)


def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, default=_json_default, separators=(",", ":"))


def encode_row(obj, *, newline: bool = True) -> bytes:
    """One row as compact UTF-8 JSON. orjson for speed; what it refuses (a lone surrogate,
    an integer past 64 bits, a key that is not a string) goes through the json module, a
    lone surrogate then written as its JSON escape ``\\udXXX`` (UTF-8 cannot carry it)."""
    try:
        return orjson.dumps(obj, default=_json_default, option=_ORJSON_LINE if newline else 0)
    except (TypeError, orjson.JSONEncodeError):
        text = dumps(obj) + ("\n" if newline else "")
        return text.encode("utf-8", "backslashreplace")


class Run:
    """Rows that come as one piece, a run of a window's clean records: ``count`` of them, the
    first one's record at file position ``position``; ``first(n)`` is a run of its first n.
    EncodedRows (JSON Lines written already), report/table_rows.TableRows (a table's)."""
    __slots__ = ()


class EncodedRows(Run):
    """Rows encoded already as JSON Lines (``count`` of them in ``data``), written as they are:
    a run of clean records the native kernel wrote (report/jsonl_rows.py). ``position``: the
    file position of the first one's record."""
    __slots__ = ("data", "count", "position")

    def __init__(self, data: bytes, count: int, position: int):
        self.data = data
        self.count = count
        self.position = position

    def first(self, n: int) -> "EncodedRows":
        """The first ``n`` rows (a JSON Lines row holds no raw newline)."""
        end = 0
        for _ in range(n):
            end = self.data.index(b"\n", end) + 1
        return EncodedRows(self.data[:end], n, self.position)


def encode_lines(rows: Iterable) -> tuple[bytes, int]:
    """Rows (dicts, or EncodedRows) as JSON Lines, one buffer, and how many (what a worker process sends back)."""
    dumps, default, option = orjson.dumps, _json_default, _ORJSON_LINE
    pieces = []
    count = 0
    for obj in rows:
        if type(obj) is EncodedRows:
            pieces.append(obj.data)
            count += obj.count
            continue
        try:
            pieces.append(dumps(obj, default=default, option=option))
        except (TypeError, orjson.JSONEncodeError):
            pieces.append(encode_row(obj))
        count += 1
    return b"".join(pieces), count


def _write_json(stream: TextIO, text: str) -> None:
    """Write JSON text; a lone surrogate (only possible inside a JSON string) goes out as its
    JSON escape ``\\udXXX``, since UTF-8 cannot carry it. The encoder fails before writing
    anything, so nothing is written twice."""
    try:
        stream.write(text)
    except UnicodeEncodeError:
        stream.write(text.encode("utf-8", "backslashreplace").decode("utf-8"))


class _ByteWriter:
    """UTF-8 bytes onto a text stream: straight to its binary buffer when it has one."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.buffer = getattr(stream, "buffer", None)
        if self.buffer is not None:
            stream.flush()  # what was written as text goes first
        self.pieces: list[bytes] = []
        self.size = 0
        self.first = True

    def add(self, data: bytes) -> None:
        self.pieces.append(data)
        self.size += len(data)
        if self.size >= WRITE_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self.pieces:
            return
        data = b"".join(self.pieces)
        self.pieces.clear()
        self.size = 0
        if self.first:  # JSON onto the terminal a bar is drawn on: the bar goes first (into a pipe it stays)
            self.first = False
            if _is_terminal(self.stream):
                erase_bars()
        if self.buffer is not None:
            self.buffer.write(data)
        else:
            self.stream.write(data.decode("utf-8"))


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Sink:
    """Writes rows of one kind, as they come, in the chosen format; nothing is held.

    ``jsonl``: one object a line. ``json``: one array, streamed (an object a line inside
    it), or with ``single`` one object. ``table``: aligned text for people
    (:class:`rmqtool.report.table.TextTable`), its columns picked for the width by
    ``kind`` (``columns.VIEWS``); ``wide`` shows every column, ``select`` (``--columns``)
    exactly those named. ``columns``: a command's own table columns, for a kind with no view.
    """

    def __init__(self, fmt: str = "jsonl", stream: TextIO | None = None, *, title: str | None = None,
                 columns: Iterable[str] | None = None, single: bool = False, kind: str | None = None,
                 wide: bool = False, select: str | list[str] | None = None, width: int | None = None):
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}")
        self.fmt = fmt
        self.stream = stream if stream is not None else sys.stdout
        self.title = title
        self.single = single  # json: print one object rather than an array
        self.count = 0
        self._held = None  # json single: the one row
        self._closed = False
        selected = select_columns(kind, select) if kind is not None else None
        if select is not None and kind is None:
            from rmqtool.errors import UsageError
            raise UsageError("--columns does not apply to this output")
        self._table = _table(self.stream, kind, width=width, wide=wide, select=selected,
                             columns=columns) if fmt == "table" else None
        self._bytes = None

    def row(self, obj: dict) -> None:
        self.count += 1
        if self._table is not None:
            self._table.row(obj)
            return
        if self._bytes is None:
            self._bytes = _ByteWriter(self.stream)
            if self.fmt == "json" and not self.single:
                self._bytes.add(b"[\n")
        if self.fmt == "jsonl":
            self._bytes.add(encode_row(obj))
        elif self.single:
            if self._held is not None:  # a second row: this output is an array after all
                self._bytes.add(b"[\n" + encode_row(self._held, newline=False))
                self.single = False
                self._held = None
                self._bytes.add(b",\n" + encode_row(obj, newline=False))
            else:
                self._held = obj
        else:
            self._bytes.add((b",\n" if self.count > 1 else b"") + encode_row(obj, newline=False))

    def rows(self, rows: Iterable) -> None:
        """Every row of ``rows``, as :meth:`row` writes them; JSON Lines in one tight loop
        (a dump's hot path: about a microsecond a row less than a call each), where rows
        encoded already (EncodedRows) are written as they are; a table takes a run of rows
        (a Run: TableRows) whole (:meth:`TextTable.run`)."""
        if self.fmt != "jsonl":
            for obj in rows:
                if isinstance(obj, Run):
                    self.count += obj.count
                    self._table.run(obj)
                else:
                    self.row(obj)
            return
        if self._bytes is None:
            self._bytes = _ByteWriter(self.stream)
        out = self._bytes
        dumps, default, option = orjson.dumps, _json_default, _ORJSON_LINE
        pieces = []
        try:
            for obj in rows:
                if type(obj) is EncodedRows:
                    if pieces:
                        self.count += len(pieces)
                        out.add(b"".join(pieces))
                        pieces.clear()
                    self.count += obj.count
                    out.add(obj.data)
                    continue
                try:
                    pieces.append(dumps(obj, default=default, option=option))
                except (TypeError, orjson.JSONEncodeError):
                    pieces.append(encode_row(obj))
                if len(pieces) >= ROWS_A_WRITE:
                    self.count += len(pieces)
                    out.add(b"".join(pieces))
                    pieces.clear()
        finally:  # what was encoded goes out, even when the rows stop with an error
            self.count += len(pieces)
            if pieces:
                out.add(b"".join(pieces))

    def encoded_file(self, path: str, size: int, count: int) -> None:
        """The first ``size`` bytes of a file of JSON Lines already encoded
        (:func:`encode_lines`), ``count`` rows: copied by the kernel where it can."""
        if self.fmt != "jsonl":
            raise ValueError("encoded rows are JSON Lines")
        if self._bytes is not None:
            self._bytes.flush()
        self.stream.flush()
        self.count += count
        with open(path, "rb") as f:
            sent = 0
            try:
                out = self.stream.fileno()
                while sent < size:
                    n = os.sendfile(out, f.fileno(), sent, size - sent)
                    if n == 0:
                        break
                    sent += n
                return
            except BrokenPipeError:
                raise
            except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
                if sent:  # part is out already: the rest cannot go another way without a gap or a repeat
                    raise
                # not a descriptor sendfile writes to (a test's buffer): by hand
            if self._bytes is None:
                self._bytes = _ByteWriter(self.stream)
            self._bytes.add(f.read(size))

    def flush(self) -> None:
        """Everything written so far out to the stream (``--follow`` between appends)."""
        if self._table is not None:
            self._table.flush()
            return
        if self._bytes is not None:
            self._bytes.flush()
        self.stream.flush()

    def close(self) -> None:
        """The end of the output (a JSON array's bracket, a table's last lines), once: a second
        call (the with block's, after closed_on_error's) writes nothing."""
        if self._closed:
            return
        self._closed = True
        if self._table is not None:
            self._table.close()
            if self.count == 0:
                self.stream.write("(no rows)\n")
        elif self.fmt == "json":
            if self._bytes is None:
                self._bytes = _ByteWriter(self.stream)
                if not self.single:
                    self._bytes.add(b"[\n")
            if self.single and self._held is not None:
                try:
                    self._bytes.add(orjson.dumps(self._held, default=_json_default, option=orjson.OPT_INDENT_2)
                                    + b"\n")
                except (TypeError, orjson.JSONEncodeError):
                    text = json.dumps(self._held, ensure_ascii=False, default=_json_default, indent=2) + "\n"
                    self._bytes.add(text.encode("utf-8", "backslashreplace"))
            elif self.single:
                self._bytes.add(b"[]\n")
            else:
                self._bytes.add(b"\n]\n" if self.count else b"]\n")
        if self._bytes is not None:
            self._bytes.flush()
        self.stream.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.close()
        return False


def _table(stream: TextIO, kind: str | None, *, width: int | None = None, wide: bool = False, select=None,
           columns=None):
    """The table for rows of ``kind``: findings sorted, grouped and wrapped (``--columns``: those
    fields, grouped and sorted alike), anything else streamed as aligned columns."""
    if kind in FINDING_KINDS:
        return FindingTable(stream, output_width(stream) if width is None else width, wide=wide,
                            select=None if select is None else tuple(c.name for c in select), kind=kind)
    return TextTable(stream, kind, width=width, wide=wide, select=select, columns=columns)


def summary_table(rows) -> None:
    """verify --summary: (finding, severity, count) rows as a table on stderr (stdout holds the findings)."""
    table = Sink("table", sys.stderr, title="verify summary", columns=("finding", "severity", "count"))
    for finding_id, level, count in rows:
        table.row({"finding": finding_id, "severity": level, "count": count})
    table.close()


STDOUT = "<stdout>"  # how an error of standard output names it, as a file's names the file


class _StdoutFile(io.FileIO):
    """Descriptor 1, whose errors name it: a full disk or a closed pipe on stdout is said as
    ``<stdout>: No space left on device``, not as an error of no file (a store's, for all one knows)."""

    def write(self, data):
        try:
            return super().write(data)
        except OSError as exc:  # EPIPE stays a BrokenPipeError (OSError picks the subclass by errno)
            raise OSError(exc.errno, exc.strerror, STDOUT) from None


def name_stdout() -> None:
    """Make sys.stdout's errors name it (the CLI's entry point, once); a stdout that is no
    descriptor 1 (a test's capture) is left as it is."""
    out = sys.stdout
    try:
        if out.fileno() != 1:
            return
        out.flush()
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        return
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(_StdoutFile(1, "wb", closefd=False)), encoding=out.encoding,
                                  errors="backslashreplace", line_buffering=out.line_buffering)


def write_line(text: str, stream: TextIO | None = None) -> None:
    """One line of a command's own text output (a version, a path) on stdout."""
    (stream if stream is not None else sys.stdout).write(text + "\n")


def warn(text: str) -> None:
    """A line for people on stderr (never stdout); control characters escaped."""
    sys.stderr.write(terminal_safe(text.rstrip("\n")) + "\n")


# Findings echoed on stderr before the rest is only counted: a badly damaged store must
# not bury the terminal (the rows, or `verify --format jsonl`, carry every one).
MAX_ECHOED_FINDINGS = 20


def report_findings(findings, damaged: int = 0, *, echo: bool = True) -> int:
    """The first findings (errors first) as one line each on stderr (``Finding.one_line``), a count when
    anything is wrong, and the exit code that calls for: 3 (CORRUPT) when ``damaged``
    records were seen or a finding is an error, else 0."""
    errors = sum(f.severity.value == "error" for f in findings)
    if echo:  # errors first, info last, as the findings tables show them
        for f in sorted(findings, key=lambda f: SEVERITY_ORDER.get(f.severity.value, 3))[:MAX_ECHOED_FINDINGS]:
            warn(f.one_line())
    if echo and len(findings) > MAX_ECHOED_FINDINGS:
        warn(f"rmqtool: ... {len(findings) - MAX_ECHOED_FINDINGS} more finding(s) not shown")
    if not (damaged or errors):
        return int(ExitCode.OK)
    warn(f"rmqtool: {len(findings)} finding(s), {errors} of them errors"
         + (f"; {damaged} damaged record(s)" if damaged else ""))
    return int(ExitCode.CORRUPT)


# A document's list sections and the kind of their rows (columns.VIEWS)
SECTION_KINDS = {"segments": "segment", "consume_queues": "consume_queue", "index_files": "index_file",
                 "config": "config_file", "findings": "finding", "consumer_offsets": "offset",
                 "compaction_queues": "compaction_queue",
                 # info's timer section and side stores (inspect/timer/state.py, inspect/side_stores.py)
                 "timer_files": "timer_file", "pending_by_fire_time": "timer_pending_slot",
                 "congestion": "timer_pending_slot", "timer_metrics": "timer_topic_count", "side_stores": "side_store",
                 "groups": "qmq_group", "consumer_progress": "qmq_consumer_progress",
                 "group_progress": "qmq_offset", "consumer_logs": "qmq_consumer_log",
                 # a DLedger store's data and index files (inspect/dledger.py): files, as the segments
                 "data_files": "segment", "entry_index_files": "segment"}


def render_documents_json(docs: list, stream: TextIO | None = None) -> None:
    """Several documents (``info`` of several stores) as one JSON array, written as render_document writes one."""
    _write_json(stream or sys.stdout, json.dumps(docs, ensure_ascii=False, default=_json_default, indent=2) + "\n")


def render_document(doc: dict | None, fmt: str, stream: TextIO | None = None, title: str | None = None,
                    *, width: int | None = None, wide: bool = False) -> None:
    """One document (``info``, a checkpoint): JSON as it is; for people, short sections read
    top to bottom: a title line, ``name  value`` lines, then a table for each list. None (no
    such file: the caller says so on stderr) is ``null`` in JSON, no line otherwise."""
    stream = stream if stream is not None else sys.stdout
    erase_bars()  # a document comes once the work is done: its bar is gone before it
    if doc is None:
        if fmt == "json":  # a script's json.load gets a value, not an empty stream
            _write_json(stream, "null\n")
            stream.flush()
        return
    if fmt == "json":
        _write_json(stream, json.dumps(doc, ensure_ascii=False, default=_json_default, indent=2) + "\n")
        stream.flush()
        return
    if fmt == "jsonl":
        _write_json(stream, dumps(doc) + "\n")
        stream.flush()
        return
    from rmqtool.report.columns import cell_text, display_width
    from rmqtool.report.table import output_width

    width = output_width(stream) if width is None else width
    # in a document of sections (info), a top-level None is a section of its own ("timer: none"), not a line
    sectioned = any(isinstance(v, (dict, list)) for v in doc.values())
    scalars = {k: v for k, v in doc.items() if not isinstance(v, (dict, list)) and not (sectioned and v is None)}
    merged = scalars and isinstance(doc.get(title), dict)  # the title names a section too: one section
    sections = [(title or "", {**doc[title], **scalars} if merged else scalars)] if scalars else []
    sections += [(k, v) for k, v in doc.items() if (isinstance(v, (dict, list)) or v is None and k != title)
                 and not (merged and k == title)]
    first = True
    for name, value in sections:
        if not first:
            stream.write("\n")
        first = False
        heading = name  # the JSON name: what to look for in --format json
        if isinstance(value, list):
            stream.write(f"{heading} ({len(value)})\n" if value else f"{heading}: none\n")
            _section_table(stream, name, value, width, wide)
            continue
        if value is None:
            stream.write(f"{heading}: none\n")
            continue
        stream.write(f"{heading}\n")
        pairs = [(k, v) for k, v in value.items() if not isinstance(v, list) and not _twin(k, value)]
        label = max((len(k) for k, _ in pairs), default=0)
        for k, v in pairs:
            text = terminal_safe(cell_text(k, v))
            room = max(width - label - 4, 8)
            if display_width(text) > room:  # shown whole, wrapped (a path broken only after a "/")
                from rmqtool.report.wrap import wrap

                lead = f"  {k:<{label}}  "
                keep = (text,) if k.endswith(("path", "_dir", "file")) else ()  # a path's spaces are its own
                stream.write("\n".join(line.rstrip() for line in wrap(text, width, lead, " " * len(lead), keep)) + "\n")
                continue
            stream.write(f"  {k:<{label}}  {text}".rstrip() + "\n")
        for k, v in value.items():
            if isinstance(v, list):
                stream.write(f"  {k} ({len(v)})\n" if v else f"  {k}: none\n")
                _section_table(stream, k, v, width, wide)
    stream.flush()


# old names kept in the JSON for one release (docs/vocabulary.md): a person reads the new one only
_OLD_NAMES = {"min_offset": ("min_commit_log_offset", "min_queue_offset"),
              "max_offset": ("max_commit_log_offset", "max_queue_offset")}


def _twin(key: str, section: dict) -> bool:
    """A ``*_time`` field whose ``*_timestamp`` is shown (as the same time) beside it, or an
    old field name whose new name is shown beside it."""
    if any(new in section for new in _OLD_NAMES.get(key, ())):
        return True
    return key.endswith("_time") and key[:-len("_time")] + "_timestamp" in section


def _section_table(stream: TextIO, name: str, rows: list, width: int, wide: bool) -> None:
    if not rows:
        return
    if not all(isinstance(r, dict) for r in rows):  # names, numbers: one a line, as a person reads a list
        from rmqtool.report.columns import cell_text
        stream.write("".join(f"    {terminal_safe(cell_text(name, r))}\n" for r in rows))
        return
    table = _table(stream, SECTION_KINDS.get(name), width=width, wide=wide)
    for r in rows:
        table.row(r)
    table.close()
