"""rmqtool info STORE: what a store holds, read cheaply (no full commit log scan)."""
from __future__ import annotations

import pathlib
from typing import List

import typer

from rmqtool.cli.params import examples

from rmqtool.cli.commitlog_paths import commit_log_paths_option
from rmqtool.cli.common import OutputFormat, Stores, boundary
from rmqtool.families import tools_at
from rmqtool.report.records import with_human_times
from rmqtool.report.sink import render_document, render_documents_json, report_findings, warn, write_line


def register(app: typer.Typer) -> None:
    app.command("info", epilog=examples(
        "rmqtool info /data/store", "rmqtool info /data/store -f json | jq .commitlog"))(info)


@boundary
@commit_log_paths_option("stores")
def info(
    stores: List[pathlib.Path] = typer.Argument(..., metavar="STORE", help="Store root directories (one or more)."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
    wide: bool = typer.Option(False, "--wide", help="Table: every column of each section."),
):
    """Segments and offset ranges, queues with min/max offsets, index files, checkpoint, shutdown state, config.

    Several stores: one document each (jsonl: a line each; json: an array; table: one after
    another); a store that cannot be read is named on stderr and the others still print.
    Exit: the worst of the stores' codes."""
    if len(stores) == 1:  # one store: one document, exactly as before
        _one(stores[0], fmt, wide, None)
        return
    each = Stores(several=True)  # a store that cannot be read is named on stderr, the others still print
    docs = []
    for store in stores:
        with each.each():
            each.worst = max(each.worst, _one(store, fmt, wide, docs))
    if fmt == OutputFormat.json:
        render_documents_json(docs)
    if each.worst:
        raise typer.Exit(each.worst)


def _one(store: pathlib.Path, fmt: OutputFormat, wide: bool, collect: list | None) -> int:
    """Print (or, for a JSON array of several, collect) one store's document; its exit code."""
    tools = tools_at(store)  # the store's family computes what info shows
    view = tools.open_view(store, purpose="info")
    doc, findings = tools.info(view)
    if view.live is not None:  # a running broker's store: what its family says of reading it
        warn(view.live.note())
    doc = with_human_times(doc)
    if collect is not None and fmt == OutputFormat.json:
        collect.append(doc)
    else:
        if collect is not None and fmt == OutputFormat.table:
            if collect:
                write_line("")
            collect.append(None)  # counts the stores printed, for the blank line between them
        render_document(doc, fmt.value, title="store", wide=wide)
    code = report_findings(findings, echo=fmt != OutputFormat.table)  # a table shows them already
    if code and collect is None:
        raise typer.Exit(code)
    return code
