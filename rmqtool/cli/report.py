"""rmqtool report STORE: the store on one page for an incident (rmqtool/inspect/report_model.py).

``--html OUT.html`` writes a self-contained page (inline SVG and CSS, no script, no network):
the commit log's files to scale with the written, unflushed, damaged and dropped ranges, the
recovery start file and where the next start cuts the log; each queue's offsets and its
groups' lag; index coverage by time; findings grouped by consequence with what to do.
Without it the same model prints as a document (``-f json`` for scripts). Exit 3 when a
finding is an error, as verify.
"""
from __future__ import annotations

import pathlib
from typing import Optional

import typer

from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.cli.params import examples, parse_time
from rmqtool.families import tools_at
from rmqtool.report.sink import render_document, report_findings, warn


def register(app: typer.Typer) -> None:
    app.command("report", epilog=examples(
        "rmqtool report /data/store --html incident-4711.html",
        "rmqtool report /data/store -f json | jq '.store.recovered_end, .damaged_ranges'"))(report)


@boundary
def report(
    store: pathlib.Path = typer.Argument(..., help="The store root directory (read only)."),
    html: Optional[pathlib.Path] = typer.Option(None, "--html", metavar="OUT.html",
                                                help="Write the page there (written whole, then renamed)."),
    now: Optional[str] = typer.Option(None, "--now", help="The clock (epoch ms or ISO 8601; default: now)."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
    wide: bool = typer.Option(False, "--wide", help="Table: every column of each section."),
):
    """The store on one page: commit log files to scale, queues and lag, index coverage, findings by consequence."""
    tools = tools_at(store)  # the store's family makes the model
    result = tools.report(tools.open_view(store, purpose="report"), now=parse_time(now, "--now"), html=html)
    for line in result.notices:
        warn(line)
    if html is None:
        render_document(result.document, fmt.value, title="store", wide=wide)
    else:
        warn(f"rmqtool: wrote {html} ({len(result.findings)} findings, {result.errors} errors)")
    raise typer.Exit(report_findings(result.findings, echo=False))
