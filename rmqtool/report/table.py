"""Tables for people as plain aligned text, streamed: no row waits for the last one.

The first rows of a kind (up to :data:`SAMPLE_ROWS`) set how wide its text columns are
(never wider than the kind allows, see ``columns.py``; with ``--wide`` as wide as they hold,
and no cell is cut); every later row is cut to the same widths, so a dump of millions of rows prints as it scans, in memory that does not grow.
A row of another kind starts a new table under its own header (an index file's header,
then its entries); ``blank`` and ``corrupt`` rows in a message dump are one-line notes.
Rendering is a few string operations a cell: no layout engine per row.
"""
from __future__ import annotations

import dataclasses
import os
from typing import TextIO

from rmqtool.report.columns import (DEFAULT_WIDTH, FILE_SIZE_FIELDS, GAP, VIEWS, Column, cell_text, cut,
                                    display_width, fit, human_size, terminal_safe)
from rmqtool.report.progress import erase_bars

SAMPLE_ROWS = 200  # rows that set the text columns' widths before the first line is printed
CHUNK_LINES = 512  # lines written at once

# ``record`` values that name a kind of their own (index dumps) or a note (commit log dumps)
RECORD_KINDS = {"header": "index_header", "entry": "index_entry", "slot": "index_slot",
                "queue_stats": "stats_queue", "damage_stats": "stats_finding"}
NOTES = ("blank", "corrupt")
NOTE = "note"  # the kind of a row printed as one line of text
PATH_FIELDS = frozenset({"file", "path", "directory", "store_path", "start_file", "out_path", "out_dir", "backup_dir",
                         "manifest"})  # cut at the front: the file name matters most


def output_width(stream: TextIO) -> int:
    """How wide a table may be: ``COLUMNS`` when set (as GNU ls, psql's wrapped format and
    Python's shutil read it), else the terminal's width, else 80. A terminal that reports 0
    columns (a serial console, ``stty cols 0``) says nothing of its width: 80, as shutil's."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        if stream.isatty():
            return os.get_terminal_size(stream.fileno()).columns or DEFAULT_WIDTH
    except (AttributeError, OSError, ValueError):
        pass
    return DEFAULT_WIDTH


def _escape(s: str) -> str:
    return s if s.isprintable() else terminal_safe(s)


def note_text(row: dict) -> str:
    """A ``blank`` or ``corrupt`` row of a message dump as one line."""
    if row.get("record") == "corrupt":
        return (f"{row.get('commit_log_offset')}  corrupt: {row.get('finding')}, {row.get('store_size')} bytes "
                f"skipped: {row.get('reason')}")
    state = "" if row.get("valid", True) else " (invalid)"
    return f"{row.get('commit_log_offset')}  end-of-file blank{state}: {row.get('store_size')} bytes to the file end"


@dataclasses.dataclass
class _Layout:
    kind: str | None
    cells: list[tuple[str, int, bool, object]]  # (field, width, right-aligned, text of a value)
    header: str
    rule: str


class TextTable:
    """Rows of one or more kinds as aligned text on ``stream``, ``width`` terminal columns wide.

    ``kind`` names the rows' columns (``columns.VIEWS``); ``select`` is ``--columns``' list
    for that kind, ``wide`` shows every column. Rows of an unknown kind show their own
    fields in their order.
    """

    def __init__(self, stream: TextIO, kind: str | None = None, *, width: int | None = None, wide: bool = False,
                 select: tuple[Column, ...] | None = None, columns=None):
        self.stream = stream
        self.kind = kind
        self.width = output_width(stream) if width is None else width
        self.wide = wide
        self.select = select
        self.names = tuple(columns) if columns else None  # a caller's own column list, no kind
        self.count = 0
        self._sample: list[dict] = []
        self._sampling = False
        self._sample_kind = None
        self._layout: _Layout | None = None
        self._lines: list[str] = []
        self._tables = 0
        self._front: set[str] = set()

    def _kind_of(self, row: dict) -> str | None:
        record = row.get("record")
        if record in NOTES and self.kind == "message":
            return NOTE
        return RECORD_KINDS.get(record, self.kind)

    def row(self, row: dict) -> None:
        self.count += 1
        kind = self._kind_of(row)
        if kind is not NOTE and not (self._sampling and kind == self._sample_kind) and (
                self._layout is None or kind != self._layout.kind):
            if self._sampling:  # another kind: the table sampled so far is complete
                self._flush_sample()
            self._layout = None
            self._sampling, self._sample_kind = True, kind
        if self._sampling:
            self._sample.append(row)
            if len(self._sample) >= SAMPLE_ROWS:
                self._flush_sample()
            return
        self._lines.append(self._line(row) if kind is not NOTE else _escape(cut(note_text(row), self.width)))
        if len(self._lines) >= CHUNK_LINES:
            self._write()

    def run(self, run) -> None:
        """A run of rows that can write its own lines (report/table_rows.TableRows: a window's
        clean records): once this table's layout is fixed, ``run.lines`` writes them (the native
        kernel's copy of :meth:`_line`, byte for byte); the rows it declines, and every row while
        the layout is sampled, come as dicts through :meth:`row`, the definition."""
        kind = self._kind_of({"record": run.record})
        k, n = 0, run.count
        while k < n:
            layout = self._layout
            if self._sampling or layout is None or layout.kind != kind:
                hi = min(n, k + (max(SAMPLE_ROWS - len(self._sample), 1) if self._sampling else 1))
                for row in run.rows(k, hi):
                    self.row(row)
                k = hi
                continue
            text, taken, declined = run.lines(layout.cells, self._front, self.wide, k)
            if text is None:  # a layout the kernel does not write
                declined = n - k
            elif taken:
                self.count += taken
                self._lines.append(text)
                self._write()
                k += taken
            if declined:  # these records' lines the Python way
                for row in run.rows(k, k + declined):
                    self.row(row)
                k += declined

    def _flush_sample(self) -> None:
        rows, self._sample, self._sampling = self._sample, [], False
        kind = self._sample_kind
        self._layout = self._make_layout(kind, [r for r in rows if self._kind_of(r) == kind])
        if self._tables:
            self._lines.append("")
        self._tables += 1
        self._lines.append(self._layout.header)
        self._lines.append(self._layout.rule)
        for r in rows:
            self._lines.append(self._line(r) if self._kind_of(r) is not NOTE
                               else _escape(cut(note_text(r), self.width)))
        self._write()

    def _columns_for(self, kind: str | None, sample: list[dict]) -> tuple[tuple[Column, ...], bool]:
        if kind in VIEWS:
            if self.select is not None and kind == self.kind:
                return self.select, True
            return VIEWS[kind], False
        names = self.names or tuple(dict.fromkeys(k for r in sample for k in r))
        return tuple(Column(n, i, max(40, len(n)), flex=len(n)) for i, n in enumerate(names)), bool(self.names)

    def _make_layout(self, kind: str | None, sample: list[dict]) -> _Layout:
        columns, given = self._columns_for(kind, sample)
        if not given:  # a field no row has (a 5.x check on 4.x records, batch units' fields) is not a column
            present = set().union(*sample) if sample else set()
            columns = tuple(c for c in columns if c.name in present) or columns
        # text columns no wider than what the first rows hold (nor narrower than their header)
        sized = []
        for c in columns:
            if c.flex:
                fmt = _formatter(c)
                seen = max((display_width(fmt(c.name, r.get(c.name))) for r in sample), default=0)
                most = max(len(c.name), seen if self.wide else min(c.width, seen))  # --wide: never cut
                c = dataclasses.replace(c, width=most, flex=min(c.flex, most))
            sized.append(c)
        shown = fit(tuple(sized), self.width, wide=self.wide, given=given)
        cells = [(c.name, w, c.right, _formatter(c)) for c, w in shown]
        self._front = {c.name for c, _ in shown if c.name in PATH_FIELDS}
        header = "  ".join(_pad(cut(name, w), w, right) for name, w, right, _ in cells).rstrip()
        rule = "  ".join("-" * w for _, w, _, _ in cells)
        return _Layout(kind, cells, header, rule)

    def _line(self, row: dict) -> str:
        parts = []
        get = row.get
        for name, w, right, fmt in self._layout.cells:
            s = fmt(name, get(name))
            if not s.isascii() or len(s) > w or not s.isprintable():
                s = _escape(s) if self.wide else cut_front(_escape(s), w) if name in self._front else cut(_escape(s), w)
            pad = w - (len(s) if s.isascii() else display_width(s))
            parts.append(" " * pad + s if right else s + " " * pad)
        return (" " * GAP).join(parts).rstrip()

    def _write(self) -> None:
        if self._lines:
            erase_bars()
            self.stream.write("\n".join(self._lines) + "\n")
            self._lines.clear()

    def flush(self) -> None:
        """Write what is held (a sample becomes a table with the columns it shows)."""
        if self._sampling:
            self._flush_sample()
        self._write()
        self.stream.flush()

    def close(self) -> None:
        if self._sampling:
            self._flush_sample()
        self._write()


def cut_front(s: str, width: int) -> str:
    """``s`` in at most ``width`` cells, its start replaced by an ellipsis when longer."""
    if display_width(s) <= width:
        return s
    return "…" + cut(s[::-1], width)[:-1][::-1] if width > 1 else "…"


def _pad(s: str, width: int, right: bool) -> str:
    pad = width - display_width(s)
    return " " * pad + s if right else s + " " * pad


def _plain(name: str, value) -> str:
    if value is None:
        return ""
    if type(value) is str:
        return value
    return cell_text(name, value)


def _file_size(name: str, value) -> str:
    return human_size(value) if type(value) is int else cell_text(name, value)


def _formatter(column: Column):
    """The cell function for a column: plain text, cell_text's time reading, or a file's size."""
    if column.file_size:
        return _file_size
    name = column.name
    if name.endswith("_timestamp") or name == "timestamp" or name in FILE_SIZE_FIELDS:
        return cell_text
    return _plain


