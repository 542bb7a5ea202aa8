"""rmqtool info STORE: what a store holds, read cheaply (no full commit log scan)."""
from __future__ import annotations

import pathlib

import typer

from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.errors import ExitCode
from rmqtool.report.records import with_human_times
from rmqtool.report.sink import render_document, warn
from rmqtool.inspect.inventory import store_info


def register(app: typer.Typer) -> None:
    app.command("info")(info)


@boundary
def info(
    store: pathlib.Path = typer.Argument(..., help="The store root directory."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
):
    """Segments and offset ranges, queues with min/max offsets, index files, checkpoint, shutdown state, config."""
    doc = with_human_times(store_info(store))
    render_document(doc, fmt.value, title="store")
    errors = [f for f in doc["findings"] if f["severity"] == "error"]
    for f in doc["findings"]:
        if fmt == OutputFormat.table:
            continue  # already in the table
        warn(f"{f['severity']}: {f['finding']}: {f['path']}: {f['message']}")
    if errors:
        raise typer.Exit(int(ExitCode.CORRUPT))
