"""rmqtool dump timerwheel|timerlog|timercheck|timermetrics PATH: the 5.x timer store's files.

PATH is a store directory or one file of that kind. Rows go to stdout in the chosen format;
timer log bytes that are no unit are a "corrupt" row and set exit code 3.
"""
from __future__ import annotations

import itertools
import pathlib
from typing import Optional

import typer

from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.cli.dump import ColumnsOpt, FormatOpt, LimitOpt, WideOpt, _finish, dump_app
from rmqtool.cli.params import examples
from rmqtool.formats.timerwheel import DEFAULT_TIMER_PRECISION_MS
from rmqtool.report.records import with_human_times
from rmqtool.report.sink import Sink, render_document, warn

PrecisionOpt = typer.Option(DEFAULT_TIMER_PRECISION_MS, "--timer-precision-ms", min=1,
                            help="The broker's timerPrecisionMs (slot times and indexes).")


def register(app: typer.Typer) -> None:
    """The timer kinds are commands of ``rmqtool dump`` (dump_app, added by cli/dump.py)."""


def _rows(rows, kind: str, fmt: OutputFormat, limit, wide: bool, columns, dump, findings=()) -> None:
    sink = Sink(fmt.value, kind=kind, wide=wide, select=columns)
    sink.rows(itertools.islice(map(with_human_times, rows), limit))
    if dump.note:
        warn(f"rmqtool: {dump.note}")
    _finish(sink, list(findings), dump.damaged)


@dump_app.command("timerwheel", epilog=examples(
    "rmqtool dump timerwheel /data/store", "rmqtool dump timerwheel /data/store/timerwheel -f jsonl"))
@boundary
def dump_timerwheel(
    path: pathlib.Path = typer.Argument(..., help="Store dir or its timerwheel file."),
    fmt: OutputFormat = FormatOpt,
    precision_ms: int = PrecisionOpt,
    limit: Optional[int] = LimitOpt,
    wide: bool = WideOpt,
    columns: Optional[str] = ColumnsOpt,
):
    """The timer wheel's used slots (non-zero; never cleared after delivery): time, first and last
    timer log offsets, num."""
    from rmqtool.inspect.timer import dumps
    dump = dumps.TimerDump()
    _rows(dumps.wheel_rows(path, dump, precision_ms), "timer_slot", fmt, limit, wide, columns, dump)


@dump_app.command("timerlog", epilog=examples(
    "rmqtool dump timerlog /data/store -n 20",
    "rmqtool dump timerlog /data/store/timerlog/00000000000000000000 -f jsonl"))
@boundary
def dump_timerlog(
    path: pathlib.Path = typer.Argument(..., help="Store dir, timerlog/ dir, or one timer log file."),
    fmt: OutputFormat = FormatOpt,
    precision_ms: int = PrecisionOpt,
    show_blank: bool = typer.Option(False, "--show-blank", help="Also each file's blank (its unused end)."),
    records: bool = typer.Option(False, "--records", help="Also what the commit log holds where each unit points "
                                 "(the record's topic, REAL_TOPIC, UNIQ_KEY, KEYS; a record per unit is read)."),
    limit: Optional[int] = LimitOpt,
    wide: bool = WideOpt,
    columns: Optional[str] = ColumnsOpt,
):
    """Timer log units (52 B): where each points in the commit log, write and deliver times, magic."""
    from rmqtool.inspect.timer import dumps
    dump = dumps.TimerDump()
    _rows(dumps.timer_log_rows(path, dump, precision_ms, show_blank, records), "timer_unit", fmt, limit, wide, columns,
          dump)


@dump_app.command("timercheck", epilog=examples("rmqtool dump timercheck /data/store -f json"))
@boundary
def dump_timercheck(
    path: pathlib.Path = typer.Argument(..., help="Store dir, config/ dir, or the timercheck file."),
    fmt: OutputFormat = FormatOpt,
):
    """config/timercheck: the read time, the timer log flush offset, the timer queue offsets."""
    from rmqtool.inspect.timer import dumps
    row = dumps.timercheck_row(path)
    if row is None:
        warn(f"rmqtool: no config/timercheck in {path}: the broker would start the read time 7 days back")
    render_document(with_human_times(row) if row is not None else None, fmt.value, title="timercheck")


@dump_app.command("timermetrics", epilog=examples("rmqtool dump timermetrics /data/store"))
@boundary
def dump_timermetrics(
    path: pathlib.Path = typer.Argument(..., help="Store dir, config/ dir, or a timermetrics (or .bak) file."),
    fmt: OutputFormat = FormatOpt,
    wide: bool = WideOpt,
):
    """config/timermetrics: timer messages counted per topic (the .bak when the broker would load it)."""
    from rmqtool.inspect.timer import dumps
    dump, findings = dumps.TimerDump(), []
    _rows(dumps.timermetrics_rows(path, dump, findings), "timer_metric", fmt, None, wide, None, dump, findings)
