"""rmqtool undo BACKUP_DIR: put back every byte a recovery changed, from its backup's manifest."""
from __future__ import annotations

import pathlib
from typing import Optional

import typer

from rmqtool.cli.common import OutputFormat, Written, boundary, change_made, writer_output
from rmqtool.cli.params import examples
from rmqtool.report.sink import render_document


def register(app: typer.Typer) -> None:
    app.command("undo", epilog=examples(
        "rmqtool undo /data/store.recovery-20240601T000000Z"))(undo)


@boundary
def undo(
    backup_dir: pathlib.Path = typer.Argument(..., help="The backup a recovery wrote (it holds manifest.json)."),
    store: Optional[pathlib.Path] = typer.Option(None, "--store", help="The store, when it has moved since."),
    force: bool = typer.Option(False, "--force", help="Undo even though the store was written after the repair "
                                                      "(what was written then is lost)."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
):
    """Give the store back as it was before a repair (writes to the store; refused while a writer holds it).

    Refused (exit 5, naming the first file that changed) when the store was written after the
    repair: undoing would destroy that (--force undoes all the same). Every backup copy is
    checked against the manifest's sha256 before the first byte is written.

    Example: rmqtool undo /data/store.recovery-20261123T210000Z
    """
    from rmqtool.recovery.undo import undo as undo_recovery  # recovery loads numpy: only when asked

    restored = undo_recovery(backup_dir, store, force=force)
    doc = restored.to_json()
    with writer_output(Written(change_made("the backup was put back", {"store_path": doc["store_path"]}))):
        render_document(doc, fmt.value, title="restored")
