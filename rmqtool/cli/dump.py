"""rmqtool dump commitlog|consumequeue|index|checkpoint|config PATH

PATH is a store directory or a single file of that kind. Rows go to stdout in the chosen
format; damage is shown as rows too (record "corrupt") and sets exit code 3.
"""
from __future__ import annotations

import pathlib
from typing import Optional

import typer

from rmqtool.cli.common import BodyMode, OutputFormat, boundary, parse_time, progress_enabled
from rmqtool.errors import ExitCode, NotAStore
from rmqtool.report.records import human_time, message_record, with_human_times
from rmqtool.report.sink import Sink, render_document, warn
from rmqtool.store import detect
from rmqtool.inspect import dump_sources
from rmqtool.store.commitlog import Blank, CommitLog, Corrupt, scan_segment
from rmqtool.store.commitlog_end import last_written
from rmqtool.store.segments import Segment
from rmqtool.store.message import Message
from rmqtool.store.paths import is_segment_name
from rmqtool.inspect.selection import MessageSelection

dump_app = typer.Typer(no_args_is_help=True, help="Dump store files as rows (table, JSON Lines or JSON).")

FormatOpt = typer.Option(OutputFormat.table, "--format", "-f", help="table for people; jsonl or json for scripts.")
LimitOpt = typer.Option(None, "--limit", "-n", min=0, help="Stop after this many rows.")
TABLE_COLUMNS = ("record", "commit_log_offset", "store_size", "topic", "queue_id", "queue_offset",
                 "store_time", "tags", "keys", "body_crc_ok", "body")
TABLE_BODY_PREVIEW = 40


def register(app: typer.Typer) -> None:
    app.add_typer(dump_app, name="dump")


def _commitlog_source(path: pathlib.Path):
    """(segments to scan, is-last flags): a store, a commitlog/ directory, or one segment file."""
    kind = detect.kind_of(path)
    if kind == detect.STORE:
        cl = CommitLog(path / "commitlog")
        return cl.segments, cl.findings
    if kind == detect.COMMITLOG and path.is_dir():
        cl = CommitLog(path)
        return cl.segments, cl.findings
    if kind == detect.COMMITLOG:
        base = int(path.name) if is_segment_name(path.name) else 0
        return [Segment(path, base, path.stat().st_size)], []
    raise NotAStore(f"this is a {kind} file, not a commit log segment (try: rmqtool dump {kind})", path)


def _blank_row(b: Blank) -> dict:
    return {"record": "blank", "commit_log_offset": b.offset, "store_size": b.size, "valid": b.valid,
            "file": b.path, "file_position": b.position}


def _corrupt_row(c: Corrupt) -> dict:
    return {"record": "corrupt", "commit_log_offset": c.offset, "store_size": c.size, "finding": c.finding_id,
            "reason": c.reason, "file": c.path, "file_position": c.position}


@dump_app.command("commitlog")
@boundary
def dump_commitlog(
    path: pathlib.Path = typer.Argument(..., help="Store dir, commitlog/ dir, or one commit log segment file."),
    fmt: OutputFormat = FormatOpt,
    topic: Optional[str] = typer.Option(None, "--topic", help="Only this topic."),
    queue: Optional[int] = typer.Option(None, "--queue", help="Only this queue id."),
    from_offset: Optional[int] = typer.Option(None, "--from-offset", min=0, help="First commit log offset (a record start)."),
    to_offset: Optional[int] = typer.Option(None, "--to-offset", min=0, help="Stop before this commit log offset."),
    begin_time: Optional[str] = typer.Option(None, "--begin-time", help="Store time from (epoch ms or ISO 8601, UTC)."),
    end_time: Optional[str] = typer.Option(None, "--end-time", help="Store time up to (epoch ms or ISO 8601, UTC)."),
    limit: Optional[int] = LimitOpt,
    body: Optional[BodyMode] = typer.Option(None, "--body", help="Body as text, hex, base64 or none "
                                            "(default: base64 in JSON, a text preview in a table)."),
    decompress: bool = typer.Option(False, "--decompress", help="Decompress compressed bodies (zlib, lz4, zstd)."),
    no_crc: bool = typer.Option(False, "--no-crc", help="Skip the body CRC check (faster)."),
    show_blank: bool = typer.Option(False, "--show-blank", help="Also emit end-of-file blank records as rows."),
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="Progress bar on stderr "
                                            "(default: when stderr is a terminal)."),
):
    """Every record of the commit log: messages, end-of-file blanks, and damaged regions."""
    segments, findings = _commitlog_source(path)
    selection = MessageSelection(topic, queue, parse_time(begin_time), parse_time(end_time))
    body_mode = (body.value if body else ("text" if fmt == OutputFormat.table else "base64"))
    preview = TABLE_BODY_PREVIEW if fmt == OutputFormat.table and body is None else None
    sink = Sink(fmt.value, columns=TABLE_COLUMNS if fmt == OutputFormat.table else None)
    problems = 0
    rows = 0
    bar = _Progress(sum(s.size for s in segments)) if progress_enabled(progress) else None
    last = last_written(segments)
    try:
        for n, seg in enumerate(segments):
            if to_offset is not None and seg.base_offset >= to_offset:
                break
            if from_offset is not None and seg.base_offset + seg.size <= from_offset:
                continue
            start = from_offset - seg.base_offset if from_offset and from_offset > seg.base_offset else 0
            for r in scan_segment(seg, is_last=(n >= last), start=start, end_offset=to_offset,
                                  check_crc=not no_crc, findings=findings):
                if isinstance(r, Message):
                    if (r.body_crc_ok is False or r.property_crc_ok is False
                            or not r.properties_utf8_ok or not r.topic_utf8_ok):
                        problems += 1
                    if not selection.matches(r):
                        continue
                    row = {"record": "message", **message_record(r, body_mode, decompress=decompress, preview=preview)}
                    if fmt == OutputFormat.table:
                        row["store_time"] = human_time(r.store_timestamp)
                        row["keys"] = " ".join(r.keys)
                elif isinstance(r, Blank):
                    if not r.valid:
                        problems += 1
                    elif not show_blank:
                        continue
                    row = _blank_row(r)
                else:
                    problems += 1
                    row = _corrupt_row(r)
                sink.row(row)
                rows += 1
                if limit is not None and rows >= limit:
                    break
            if bar:
                bar.advance(seg.size)
            if limit is not None and rows >= limit:
                break
    finally:
        if bar:
            bar.close()
    sink.close()
    for f in findings:
        warn(f.one_line())
        if f.severity.value == "error":
            problems += 1
    if problems:
        warn(f"rmqtool: {problems} problem(s) found")
        raise typer.Exit(int(ExitCode.CORRUPT))


class _Progress:
    """A rich progress bar on stderr, by bytes of segments scanned."""

    def __init__(self, total: int):
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        self._p = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                           TimeRemainingColumn(), console=Console(stderr=True), transient=True)
        self._p.start()
        self._task = self._p.add_task("scanning", total=total)

    def advance(self, n: int):
        self._p.advance(self._task, n)

    def close(self):
        self._p.stop()


def _finish(sink: Sink | None, findings: list) -> None:
    if sink is not None:
        sink.close()
    problems = 0
    for f in findings:
        warn(f.one_line())
        if f.severity.value == "error":
            problems += 1
    if problems:
        warn(f"rmqtool: {problems} problem(s) found")
        raise typer.Exit(int(ExitCode.CORRUPT))


@dump_app.command("consumequeue")
@boundary
def dump_consumequeue(
    path: pathlib.Path = typer.Argument(..., help="Store dir, consumequeue/ (or batchconsumequeue/) dir, "
                                        "a topic or queue dir, or one consume queue file."),
    fmt: OutputFormat = FormatOpt,
    topic: Optional[str] = typer.Option(None, "--topic", help="Only this topic."),
    queue: Optional[int] = typer.Option(None, "--queue", help="Only this queue id."),
    from_offset: Optional[int] = typer.Option(None, "--from-offset", min=0, help="First queue offset."),
    to_offset: Optional[int] = typer.Option(None, "--to-offset", min=0, help="Stop before this queue offset."),
    limit: Optional[int] = LimitOpt,
):
    """Consume queue units (20 B; 46 B batch units in batchconsumequeue/), fill units included."""
    findings: list = []
    sink = Sink(fmt.value)
    for n, row in enumerate(dump_sources.consume_queue_rows(path, topic, queue, from_offset, to_offset, findings)):
        if limit is not None and n >= limit:
            break
        sink.row(row)
    _finish(sink, findings)


@dump_app.command("index")
@boundary
def dump_index(
    path: pathlib.Path = typer.Argument(..., help="Store dir, index/ dir, or one index file."),
    fmt: OutputFormat = FormatOpt,
    headers_only: bool = typer.Option(False, "--headers-only", help="Only each file's 40-byte header."),
    slots: bool = typer.Option(False, "--slots", help="Also the hash slots in use."),
    limit: Optional[int] = LimitOpt,
):
    """Index file headers and entries (keyHash, phyOffset, timeDiff, prevIndex)."""
    findings: list = []
    sink = Sink(fmt.value)
    for n, row in enumerate(dump_sources.index_rows(path, entries=not headers_only, slots=slots, findings=findings)):
        if limit is not None and n >= limit:
            break
        sink.row(with_human_times(row))
    _finish(sink, findings)


@dump_app.command("checkpoint")
@boundary
def dump_checkpoint(
    path: pathlib.Path = typer.Argument(..., help="Store dir or the checkpoint file."),
    fmt: OutputFormat = FormatOpt,
):
    """The checkpoint: physic, logics and index timestamps (and 5.x masterFlushedOffset, confirmPhyOffset)."""
    findings: list = []
    row = with_human_times(dump_sources.checkpoint_row(path, findings))
    render_document(row, fmt.value, title="checkpoint")
    _finish(None, findings)


@dump_app.command("config")
@boundary
def dump_config(
    path: pathlib.Path = typer.Argument(..., help="Store dir, config/ dir, or one config/*.json file."),
    fmt: OutputFormat = FormatOpt,
):
    """config/*.json as parsed (fastjson's unquoted integer keys become strings); .bak used as the broker would."""
    findings: list = []
    sink = Sink(fmt.value)
    for row in dump_sources.config_rows(path, findings):
        sink.row(row)
    _finish(sink, findings)
