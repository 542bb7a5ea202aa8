"""The one output sink: commands hand it rows (dicts); it renders them.

Formats: ``jsonl`` (one JSON object a line, for scripts), ``json`` (one JSON array, or
one object for a single-record command), ``table`` (rich, for people). Data goes to
stdout only; progress, warnings and findings go to stderr (see :func:`warn`).
"""
from __future__ import annotations

import json
import sys
from typing import Iterable, TextIO

from rmqtool.errors import ExitCode

FORMATS = ("table", "jsonl", "json")
TABLE_PAGE_ROWS = 500


def _json_default(obj):
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).hex()
    if hasattr(obj, "to_json"):
        return obj.to_json()
    return str(obj)


def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, default=_json_default, separators=(",", ":"))


def _write_json(stream: TextIO, text: str) -> None:
    """Write JSON text; a lone surrogate (only possible inside a JSON string) goes out as its
    JSON escape ``\\udXXX``, since UTF-8 cannot carry it. The encoder fails before writing
    anything, so nothing is written twice."""
    try:
        stream.write(text)
    except UnicodeEncodeError:
        stream.write(text.encode("utf-8", "backslashreplace").decode("utf-8"))


class Sink:
    """Collects rows of one kind and writes them in the chosen format."""

    def __init__(self, fmt: str = "jsonl", stream: TextIO | None = None, *, title: str | None = None,
                 columns: Iterable[str] | None = None, single: bool = False):
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}")
        self.fmt = fmt
        self.stream = stream if stream is not None else sys.stdout
        self.title = title
        self.columns = list(columns) if columns else None
        self.single = single  # json: print one object rather than an array
        self._rows: list[dict] = []
        self.count = 0
        self._paged = False

    def row(self, obj: dict) -> None:
        self.count += 1
        if self.fmt == "jsonl":
            _write_json(self.stream, dumps(obj) + "\n")
            return
        self._rows.append(obj)
        if self.fmt == "table" and len(self._rows) >= TABLE_PAGE_ROWS:
            self._table()  # a long dump prints page by page rather than holding every row
            self._rows.clear()
            self._paged = True

    def close(self) -> None:
        if self.fmt == "json":
            if self.single and len(self._rows) == 1:
                _write_json(self.stream, json.dumps(self._rows[0], ensure_ascii=False, default=_json_default, indent=2))
            else:
                _write_json(self.stream, json.dumps(self._rows, ensure_ascii=False, default=_json_default, indent=2))
            self.stream.write("\n")
        elif self.fmt == "table":
            self._table()
        self.stream.flush()

    def _table(self) -> None:
        from rich.console import Console
        from rich.table import Table

        console = Console(file=self.stream, soft_wrap=False, width=None if self.stream.isatty() else 200)
        if not self._rows:
            if not self._paged:
                console.print(_cell("(no rows)"))
            return
        columns = self.columns or list(dict.fromkeys(k for r in self._rows for k in r))
        table = Table(title=self.title, show_lines=False)
        for c in columns:
            table.add_column(c, overflow="fold")
        for r in self._rows:
            table.add_row(*(_cell(r.get(c)) for c in columns))
        console.print(table)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.close()
        return False


# Control characters a terminal would act on (C0, DEL, C1: ESC, BEL, CSI...) shown as
# escapes, so a body or key can neither clear the screen nor retitle the terminal.
_CONTROL_ESCAPES = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F]}
_CONTROL_ESCAPES.update({c: f"\\u{c:04x}" for c in range(0x80, 0xA0)})
# Lone UTF-16 surrogates (a config string's "\\ud800") cannot be written as UTF-8: escaped too.
_CONTROL_ESCAPES.update({c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)})


def terminal_safe(text: str) -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\u009b``)."""
    return text.translate(_CONTROL_ESCAPES)


def _cell(value):
    """A table cell: plain text (no rich markup, so ``[/x]`` is shown, not parsed), escaped."""
    from rich.text import Text

    if value is None:
        return Text("")
    text = dumps(value) if isinstance(value, (dict, list)) else str(value)
    return Text(terminal_safe(text))


def warn(text: str) -> None:
    """A line for people on stderr (never stdout); control characters escaped."""
    sys.stderr.write(terminal_safe(text.rstrip("\n")) + "\n")


# Findings echoed on stderr before the rest is only counted: a badly damaged store must
# not bury the terminal (the rows, or `verify --format jsonl`, carry every one).
MAX_ECHOED_FINDINGS = 20


def report_findings(findings, damaged: int = 0, *, echo: bool = True) -> int:
    """The first findings as one line each on stderr (``Finding.one_line``), a count when
    anything is wrong, and the exit code that calls for: 3 (CORRUPT) when ``damaged``
    records were seen or a finding is an error, else 0."""
    errors = 0
    for n, f in enumerate(findings):
        if echo and n < MAX_ECHOED_FINDINGS:
            warn(f.one_line())
        if f.severity.value == "error":
            errors += 1
    if echo and len(findings) > MAX_ECHOED_FINDINGS:
        warn(f"rmqtool: ... {len(findings) - MAX_ECHOED_FINDINGS} more finding(s) not shown")
    if not (damaged or errors):
        return int(ExitCode.OK)
    warn(f"rmqtool: {len(findings)} finding(s), {errors} of them errors"
         + (f"; {damaged} damaged record(s)" if damaged else ""))
    return int(ExitCode.CORRUPT)


def render_document(doc: dict, fmt: str, stream: TextIO | None = None, title: str | None = None) -> None:
    """One document (``info``, a checkpoint): JSON as it is; a table per section for people."""
    stream = stream if stream is not None else sys.stdout
    if fmt == "json":
        _write_json(stream, json.dumps(doc, ensure_ascii=False, default=_json_default, indent=2) + "\n")
    elif fmt == "jsonl":
        _write_json(stream, dumps(doc) + "\n")
    else:
        from rich.console import Console
        from rich.table import Table

        console = Console(file=stream, soft_wrap=False, width=None if stream.isatty() else 200)
        scalars = {k: v for k, v in doc.items() if not isinstance(v, (dict, list))}
        sections = [(title, scalars)] if scalars else []
        sections += [(k, v) for k, v in doc.items() if isinstance(v, (dict, list))]
        for name, value in sections:
            if isinstance(value, dict):
                rows_scalar = {k: v for k, v in value.items() if not isinstance(v, list)}
                table = Table(title=name, show_header=False)
                table.add_column("field")
                table.add_column("value", overflow="fold")
                for k, v in rows_scalar.items():
                    table.add_row(_cell(k), _cell(v))
                console.print(table)
                for k, v in value.items():
                    if isinstance(v, list):
                        _list_table(console, f"{name}.{k}", v)
            elif isinstance(value, list):
                _list_table(console, name, value)
    stream.flush()


def _list_table(console, name, rows: list) -> None:
    from rich.table import Table

    if not rows:
        console.print(_cell(f"{name}: (none)"))
        return
    if not all(isinstance(r, dict) for r in rows):
        console.print(_cell(f"{name}: {dumps(rows)}"))
        return
    columns = list(dict.fromkeys(k for r in rows for k in r))
    table = Table(title=name)
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(*(_cell(r.get(c)) for c in columns))
    console.print(table)
