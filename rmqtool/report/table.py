"""Tables for people as plain aligned text, streamed: no row waits for the last one.

The first rows of a kind (up to :data:`SAMPLE_ROWS`) set how wide its columns are: each as
wide as what may not be cut of their values (report/shorten.py: a number, an ID, a status's
identifier, a file's name, names that must stay distinct), free text up to the most the kind
allows (``columns.py``); the columns that do not fit the width are left out, the least
important first. A later row is written at the same widths, its free text cut as the first
rows' was; a later value that may not be cut and is wider than its column widens the column,
and the table goes on under a new header (no column narrows; one of least importance may be
left out to make room). With ``--wide`` every column is as wide as the first rows' text and no
cell is cut. So a dump of millions of rows prints as it scans, in memory that does not grow
(but the names and files shown cut, a few). A row of another kind starts a new table under
its own header (an index file's header, then its entries); ``blank`` and ``corrupt`` rows in
a message dump are one-line notes. Rendering is a few string operations a cell: no layout
engine per row.
"""
from __future__ import annotations

import dataclasses
import os
from typing import TextIO

from rmqtool.report.columns import (DEFAULT_WIDTH, FIELD_CUTS, FILE_SIZE_FIELDS, GAP, NEVER, PATH, SUB_KINDS, VALUE,
                                    VIEWS, Column, cell_text, cut, display_width, fit, human_size, terminal_safe)
from rmqtool.report.progress import erase_bars
from rmqtool.report.shorten import DISTINCT, distinct_width, least_width, shorten

SAMPLE_ROWS = 200  # rows that set the text columns' widths before the first line is printed
CHUNK_LINES = 512  # lines written at once

# ``record`` values that name a kind of their own (index dumps) or a note (commit log dumps)
RECORD_KINDS = {"header": "index_header", "entry": "index_entry", "slot": "index_slot",
                "queue_stats": "stats_queue", "damage_stats": "stats_finding"}
NOTES = ("blank", "corrupt")
NOTE = "note"  # the kind of a row printed as one line of text
# the fields of a table of no kind that are paths (a kind's columns say so themselves)
PATH_FIELDS = frozenset({"file", "path", "directory", "store_path", "start_file", "out_path", "out_dir", "backup_dir",
                         "manifest"})


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


def _note_parts(row: dict) -> tuple[str, str]:
    """A ``blank`` or ``corrupt`` row of a message dump: its line's words that stay whole (the
    offset, the finding, the bytes) and the reason, which may be cut."""
    if row.get("record") == "corrupt":
        return (f"{row.get('commit_log_offset')}  corrupt: {row.get('finding')}, {row.get('store_size')} bytes "
                f"skipped: ", f"{row.get('reason')}")
    state = "" if row.get("valid", True) else " (invalid)"
    return f"{row.get('commit_log_offset')}  end-of-file blank{state}: {row.get('store_size')} bytes to the file end", ""


def note_text(row: dict) -> str:
    """A ``blank`` or ``corrupt`` row of a message dump as one line."""
    return "".join(_note_parts(row))


def note_line(row: dict, width: int) -> str:
    """The note of a row in ``width`` cells as far as its reason can be cut (the rest stays whole)."""
    head, reason = map(_escape, _note_parts(row))
    if not reason or display_width(head) + display_width(reason) <= width:
        return head + reason
    return head + cut(reason, max(width - display_width(head), 1))


@dataclasses.dataclass
class _Layout:
    kind: str | None
    cells: list[tuple[str, int, bool, object, str]]  # (field, width, right-aligned, text of a value, its cut)
    header: str
    rule: str
    sized: list[tuple[Column, int, int]]  # every column it may show: (column, least, most) cells
    given: bool  # --columns (or a command's own list): every column shown
    # the names and files shown whose text in this layout is not their own (cut, or a non-ASCII
    # text, which may look cut): the texts shown, each the text it stands for, for each column
    shown: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    generation: int = 0  # bumped when ``shown`` gains a name shown cut (report/table_rows.py asks again)

    def cut_names(self, name: str) -> frozenset:
        """The texts of column ``name`` this layout shows cut (none of them alike): ASCII, as bytes."""
        return frozenset(whole.encode() for text, whole in self.shown.get(name, {}).items()
                         if text != whole and whole.isascii())


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
        self._bare_header: int | None = None  # len(_lines) when a new header has no row under it yet
        self._tables = 0

    def _kind_of(self, row: dict) -> str | None:
        record = row.get("record")
        if record in NOTES and self.kind == "message":
            return NOTE
        return RECORD_KINDS.get(record) or SUB_KINDS.get(self.kind, {}).get(record, self.kind)

    def row(self, row: dict) -> None:
        self.count += 1
        kind = self._kind_of(row)
        if kind is not NOTE and not (self._sampling and kind == self._sample_kind) and (
                self._layout is None or kind != self._layout.kind):
            if self._sampling:  # another kind: the table sampled so far is complete
                self._flush_sample(whole=True)
            self._layout = None
            self._sampling, self._sample_kind = True, kind
        if self._sampling:
            self._sample.append(row)
            if len(self._sample) >= SAMPLE_ROWS:
                self._flush_sample()
            return
        self._lines.append(self._line(row) if kind is not NOTE else note_line(row, self.width))
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
            text, taken, declined = run.lines(layout, self.wide, k)
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

    def _flush_sample(self, whole: bool = False) -> None:
        """The sampled rows as a table; ``whole``: they are all its rows (no row of its kind follows)."""
        rows, self._sample, self._sampling = self._sample, [], False
        kind = self._sample_kind
        self._layout = self._make_layout(kind, [r for r in rows if self._kind_of(r) == kind], whole)
        if self._tables:
            self._lines.append("")
        self._tables += 1
        self._lines.append(self._layout.header)
        self._lines.append(self._layout.rule)
        for r in rows:
            self._lines.append(self._line(r) if self._kind_of(r) is not NOTE else note_line(r, self.width))
        self._write()

    def _columns_for(self, kind: str | None, sample: list[dict]) -> tuple[tuple[Column, ...], bool]:
        if kind in VIEWS:
            if self.select is not None and (kind == self.kind or kind in SUB_KINDS.get(self.kind, {}).values()):
                return self.select, True
            return VIEWS[kind], False
        names = self.names or tuple(dict.fromkeys(k for r in sample for k in r))
        return tuple(_kindless(n, i) for i, n in enumerate(names)), bool(self.names)

    def _make_layout(self, kind: str | None, sample: list[dict], whole: bool = False) -> _Layout:
        columns, given = self._columns_for(kind, sample)
        if not given:  # a field no row has (a 5.x check on 4.x records, batch units' fields) is not a column;
            # nor, when the sample is the whole table, one every row leaves empty (room for those that say something)
            present = set().union(*(r if not whole else (k for k, v in r.items() if v is not None)
                                    for r in sample)) if sample else set()
            # a diff's empty value beside the other side's says that side lacks it: both sides' columns stay
            if any(c.cut == VALUE and c.name in present for c in columns):
                present |= {c.name for c in columns if c.cut == VALUE}
            columns = tuple(c for c in columns if c.name in present) or columns
        return self._fit(kind, [self._sized(c, sample) for c in columns], given)

    def _sized(self, c: Column, sample: list[dict]) -> tuple[Column, int, int]:
        """(c, the cells its values in the first rows need at least, the most it is given)."""
        fmt = _formatter(c)
        texts = [(_escape(fmt(c.name, v)), v) for r in sample if (v := r.get(c.name)) is not None]
        widest = max((display_width(t) for t, _ in texts), default=0)
        header = len(c.name)
        if self.wide:  # never cut: as wide as its text
            return c, max(header, widest), max(header, widest)
        if not c.flex:  # nothing of it may be cut: as wide as its values, and its width kept when there is room
            least = max(header, widest)
            return c, least, max(least, c.width)
        least = max(header, min(c.flex, widest), *(least_width(c.cut, t, v) for t, v in texts))
        if c.cut in DISTINCT:
            least = distinct_width(c.cut, (t for t, _ in texts), least)
        return c, least, max(least, min(c.width, widest))

    def _fit(self, kind: str | None, sized: list, given: bool) -> _Layout:
        shown = fit(sized, self.width, wide=self.wide, given=given)
        cells = [(c.name, w, c.right, _formatter(c), c.cut) for c, w in shown]
        header = "  ".join(_pad(name, w, right) for name, w, right, _, _ in cells).rstrip()
        rule = "  ".join("-" * w for _, w, _, _, _ in cells)
        return _Layout(kind, cells, header, rule, sized, given)

    def _line(self, row: dict) -> str:
        parts = []
        get = row.get
        for name, w, right, fmt, how in self._layout.cells:
            value = get(name)
            s = fmt(name, value)
            if not s.isascii() or len(s) > w or not s.isprintable():
                s = self._fitted(name, w, how, _escape(s), value)
                if s is None:  # a value that may not be cut, wider than its column: a wider table
                    return self._line(row)
            pad = w - (len(s) if s.isascii() else display_width(s))
            parts.append(" " * pad + s if right else s + " " * pad)
        return (" " * GAP).join(parts).rstrip()

    def _fitted(self, name: str, w: int, how: str, s: str, value) -> str | None:
        """Cell text ``s`` (escaped) in ``w`` cells as its column may shorten it; None when the
        column had to widen (the table is now under a new header)."""
        if self.wide:
            return s
        t = shorten(how, s, w, value)
        if t is not None and how in DISTINCT:  # the same text for two names: neither is shown so
            shown = self._layout.shown.setdefault(name, {})
            if t != s and t not in shown:
                self._layout.generation += 1  # a name the kernel may now write cut
            if shown.setdefault(t, s) != s:
                t = None
        if t is None:
            self._widen(name, how, s, value)
        return t

    def _widen(self, name: str, how: str, s: str, value) -> None:
        """The table fitted again with column ``name`` wide enough for ``s`` (a name: and every name
        it has shown cut still distinct), under a new header: of the columns shown, those of least
        importance are left out to make room, this one too if it has to be; none comes in (the
        table only loses columns as it goes). A header no row came under yet is replaced."""
        old = self._layout
        widths = {n: w for n, w, _, _, _ in old.cells}
        sized = []
        for c, least, most in old.sized:
            if c.name not in widths:
                continue
            cut_names = list(old.shown.get(c.name, {}).values())
            if c.name == name:
                least = max(least, least_width(how, s, value))
                if how in DISTINCT:  # wider than now: ``s`` printed as another name's text
                    cut_names.append(s)
                    least = max(least, widths[name] + 1)
            if cut_names:  # the names shown cut stay distinct at whatever width the column gets
                least = distinct_width(c.cut, cut_names, least)
            sized.append((c, least, max(most, least)))
        self._layout = layout = self._fit(old.kind, sized, old.given)
        for n, w, _, _, cut_how in layout.cells:  # the names shown cut, at their new widths (still distinct)
            if n in old.shown:
                layout.shown[n] = {shorten(cut_how, whole, w): whole for whole in old.shown[n].values()}
        if self._bare_header == len(self._lines):
            del self._lines[-3:]
        self._lines += ["", layout.header, layout.rule]
        self._bare_header = len(self._lines)

    def _write(self) -> None:
        self._bare_header = None
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
            self._flush_sample(whole=True)
        self._write()


def _kindless(name: str, i: int) -> Column:
    """A column of a table of no kind (a command's own list, a document's section), cut as the
    field is in the kinds that have it (a path at its start); else never cut."""
    how = FIELD_CUTS.get(name) or (PATH if name in PATH_FIELDS else NEVER)
    if how == NEVER:
        return Column(name, i, len(name))
    return Column(name, i, max(40, len(name)), flex=len(name), cut=how)


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


