"""A table's lines of a window's clean records, written by the native kernel (table.c) once the
table's layout is fixed: no Message, no dict, no TextTable._line a row.

TextTable (report/table.py) over :func:`message_record`'s rows stays the definition. When a
window is scanned, :class:`TableRun` keeps its clean records whose rows have no finding and plain
ASCII strings as a :class:`TableRows` run (the others are Messages, the Python way). The table
takes the run whole (TextTable.run): while its first rows set the layout they are made as
dicts, after that the kernel writes their lines from the layout's cells, each cell's value
named by a source the kernel knows (:func:`cell_sources`), and declines what it does not cover
(the Python line is then made for that record, in its place). Without the kernel every record
is a Message, as before.
"""
from __future__ import annotations

from rmqtool import native
from rmqtool.report import native_records
from rmqtool.report.columns import GAP, NAME, PATH, TEXT
from rmqtool.report.native_records import FIELDS, ROW_KEYS
from rmqtool.report.records import host_text, message_record, msg_id_head
from rmqtool.report.sink import Run
from rmqtool.store.message import build_messages

_HEADER = {name: n for n, name in enumerate(FIELDS)}
# Each field of a clean record's row (message_record's) and where its cell's text comes from in
# table.c: a source, and the header field, the host or the text it takes. A field not in the row
# is an empty cell.
_SOURCES = {
    "record": ("const", "message"), "commit_log_offset": ("offset", None), "store_size": ("int", "total_size"),
    "magic_code": ("magic", None), "message_version": ("version", None), "body_crc": ("int", "body_crc"),
    "body_crc_ok": ("body_crc_ok", None), "queue_id": ("int", "queue_id"), "flag": ("int", "flag"),
    "queue_offset": ("int", "queue_offset"), "physical_offset": ("int", "physical_offset"),
    "sys_flag": ("int", "sys_flag"), "born_timestamp": ("time", "born_timestamp"),
    "store_timestamp": ("time", "store_timestamp"), "reconsume_times": ("int", "reconsume_times"),
    "prepared_transaction_offset": ("int", "prepared_transaction_offset"), "body_length": ("body_length", None),
    "body_compression": ("const", ""), "topic": ("topic", None), "properties": ("properties", None),
    "properties_raw": ("properties_raw", None), "tags": ("tags", None), "keys": ("keys", None),
    "uniq_key": ("uniq", None), "file": ("file", None), "file_position": ("position", None),
    "property_crc_ok": ("property_crc_ok", None), "born_host": ("host", 0), "store_host": ("host", 1),
    "msg_id": ("msg_id", None)}
# What the kernel writes for each kind of source, as (value, text) pairs the cell's formatter must
# give too: a layout whose formatter reads a field otherwise is written the Python way.
_INTS = ((12345, "12345"), (-7, "-7"), (0, "0"))
_READINGS = {
    "int": _INTS, "offset": _INTS, "position": _INTS, "version": _INTS, "body_length": _INTS,
    "time": ((1700000000123, "2023-11-14T22:13:20.123Z"), (86399999, "1970-01-01T23:59:59.999Z"), (0, "0"),
             (-5, "-5"), (253402300799999, "9999-12-31T23:59:59.999Z"), (253402300800000, "253402300800000")),
    "body_crc_ok": ((True, "yes"), (None, "")), "property_crc_ok": ((True, "yes"), (None, "")),
    "keys": ((["a", "b"], "a b"), ([], "")), "properties": (({"a": "1", "b": "2"}, "a=1 b=2"), ({}, "")),
}
_TEXT = (("a b", "a b"), ("", ""), (None, ""))  # strings as they are, None empty
# the body modes the kernel writes a cell of: none (empty), base64, text (while ASCII)
BODY_SOURCES = {"none": "const", "base64": "body_base64", "text": "body_text"}
# how table.c may cut a cell longer than its width (columns' cut): 0 not at all (it declines the
# record, whose line TextTable then makes, widening the column), 1 at its end, 2 at its end and
# 3 at its start when the text is one of the layout's names shown cut (else declined)
_KERNEL_CUTS = {TEXT: 1, NAME: 2, PATH: 3}
_NUMBERS = frozenset({"int", "offset", "position", "version", "body_length", "time", "magic"})  # never cut


def wanted(body: str) -> bool:
    """The kernel is there and writes body cells of this mode."""
    return body in BODY_SOURCES and native.kernel is not None


def cell_sources(layout, body: str, preview: int | None) -> tuple | None:
    """The layout's cells (TextTable's (field, width, right, formatter, cut)) as table_lines takes
    them, or None when one is not a field the kernel writes the way the formatter reads it."""
    kernel = native.kernel
    if kernel is None:
        return None
    codes = {name: n for n, name in enumerate(kernel.table_sources())}
    out = []
    for name, width, right, fmt, how in layout.cells:
        if name == "body":
            source, arg = BODY_SOURCES[body], ""
        elif name in _SOURCES:
            source, arg = _SOURCES[name]
        elif name not in ROW_KEYS and name not in _HEADER:
            source, arg = "const", ""  # not a field of a clean record's row: an empty cell
        else:
            return None
        if source not in codes:
            return None
        text = arg if source == "const" else ""
        readings = _READINGS.get(source, ((text, text),) + _TEXT if source == "const" else _TEXT)
        if any(fmt(name, value) != shown for value, shown in readings):
            return None
        arg = (_HEADER[arg] if source in ("int", "time") else arg if source == "host"
               else -1 if preview is None else preview)
        cuts = 0 if source in _NUMBERS else _KERNEL_CUTS.get(how, 0)
        out.append((codes[source], arg, width, right, cuts, text.encode("ascii"),
                    layout.cut_names(name) if cuts >= 2 else None))
    return tuple(out)


def _host_texts(ip: bytes, port: int) -> tuple[bytes, bytes]:
    """A host's text and the msgId's head as message_record writes them (its own functions), for table.c."""
    return host_text(ip, port).encode("ascii"), msg_id_head(ip, port).encode("ascii")


def _kernel():
    """The kernel, its record layout set (native_records'); None without it."""
    return native_records.kernel()


class TableRun:
    """A window's clean records as scan_segment's rows mode wants them for a table: TableRows
    runs of the records the kernel covers, Messages (with CRC verdicts as the scan gives them)
    for the others."""

    def __init__(self, body: str, check_crc: bool, preview: int | None = None):
        self.body = body
        self.check_crc = check_crc
        self.preview = preview  # a text body's letters shown (records.render_body)
        self._layout = None  # the layout last asked for, its generation, and its cells' sources
        self._generation = -1
        self._sources = None
        _kernel()

    def sources(self, layout):
        if layout is not self._layout or layout.generation != self._generation:
            self._layout, self._generation = layout, layout.generation
            self._sources = cell_sources(layout, self.body, self.preview)
        return self._sources

    def __call__(self, buf, i: int, stop: int, offset0: int, position0: int, path) -> tuple[int, list]:
        """(index of the first record not taken, the pieces in order): native_records.window_pieces'."""
        kernel = _kernel()
        if kernel is None:
            return native_records.window_pieces(buf, i, stop, offset0, position0, path, self.check_crc, None)

        def take(records, verdicts, spans, flags, k: int, pieces: list) -> int:
            taken = kernel.table_records(buf, spans, flags, k, offset0, position0)
            if taken:
                hi = k + taken
                pieces.append(TableRows(self, buf, records.rows(k, hi), None if verdicts is None else verdicts.rows(k, hi),
                                        spans[k:hi], None if flags is None else flags[k:hi], offset0, position0, path))
            return taken
        return native_records.window_pieces(buf, i, stop, offset0, position0, path, self.check_crc, take)


class TableRows(Run):
    """Clean records of a window (none with a finding), taken whole by a table (TextTable.run):
    their lines written by the kernel, or their rows made as dicts. Only good while the scan is
    at this window (its buffer is read into again after)."""
    __slots__ = ("run", "buf", "records", "verdicts", "spans", "flags", "offset0", "position0", "path", "count",
                 "position")
    record = "message"  # the rows' ``record``

    def __init__(self, run: TableRun, buf, records, verdicts, spans, flags, offset0: int, position0: int, path):
        self.run, self.buf, self.records, self.verdicts = run, buf, records, verdicts
        self.spans, self.flags, self.offset0, self.position0, self.path = spans, flags, offset0, position0, path
        self.count = len(records)
        self.position = position0 + int(records.position[0])

    def first(self, n: int) -> "TableRows":
        return TableRows(self.run, self.buf, self.records.rows(0, n),
                         None if self.verdicts is None else self.verdicts.rows(0, n), self.spans[:n],
                         None if self.flags is None else self.flags[:n], self.offset0, self.position0, self.path)

    def rows(self, lo: int, hi: int) -> list[dict]:
        """Records lo to hi's rows, the Python way (the definition)."""
        messages = build_messages(self.buf, self.records.rows(lo, hi), self.offset0, self.position0, self.path,
                                  self.run.check_crc, verdicts=None if self.verdicts is None else self.verdicts.rows(lo, hi))
        body, preview = self.run.body, self.run.preview
        return [message_record(m, body, preview=preview) for m in messages]

    def lines(self, layout, wide: bool, k: int) -> tuple[str | None, int, int]:
        """(the lines of records k.. up to the first the kernel declines, joined by newlines; how
        many; how many records from there it declines), or (None, 0, 0) when the kernel does not
        write this layout (TextTable's)."""
        kernel = _kernel()
        sources = self.run.sources(layout) if kernel is not None else None
        if sources is None:
            return None, 0, 0
        path = self.path
        got = kernel.table_lines(self.buf, self.spans, self.flags, k, self.offset0, self.position0, sources,
                                 path.encode("ascii") if path.isascii() else None, GAP, wide, _host_texts)
        return (None, 0, 0) if got is None else got
