"""rmqtool info STORE: what a store holds, read cheaply (no full commit log scan)."""
from __future__ import annotations

import pathlib

import typer

from rmqtool.cli.params import examples

from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.inspect.inventory import store_info
from rmqtool.report.records import with_human_times
from rmqtool.report.sink import render_document, report_findings


def register(app: typer.Typer) -> None:
    app.command("info", epilog=examples(
        "rmqtool info /data/store", "rmqtool info /data/store -f json | jq .commitlog"))(info)


@boundary
def info(
    store: pathlib.Path = typer.Argument(..., help="The store root directory."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
    wide: bool = typer.Option(False, "--wide", help="Table: every column of each section."),
):
    """Segments and offset ranges, queues with min/max offsets, index files, checkpoint, shutdown state, config."""
    doc, findings = store_info(store)
    render_document(with_human_times(doc), fmt.value, title="store", wide=wide)
    code = report_findings(findings, echo=fmt != OutputFormat.table)  # a table shows them already
    if code:
        raise typer.Exit(code)
