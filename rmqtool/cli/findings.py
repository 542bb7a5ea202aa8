"""rmqtool findings [ID]: every finding ID (or one), its default severity, what it means and what to do."""
from __future__ import annotations

from typing import Optional

import typer

from rmqtool.cli.params import examples

from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.report.finding_table import finding_rows, show_finding_id
from rmqtool.report.sink import Sink


def register(app: typer.Typer) -> None:
    app.command("findings", epilog=examples(
        "rmqtool findings", "rmqtool findings segmentGap",
        "rmqtool findings -f jsonl | jq -r 'select(.severity==\"error\") | .finding'"))(findings)


@boundary
def findings(
    finding_id: Optional[str] = typer.Argument(None, metavar="[ID]", help="One finding ID: all it says, whole."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
    wide: bool = typer.Option(False, "--wide", help="Table: every column, uncut."),
    columns: Optional[str] = typer.Option(None, "--columns", metavar="A,B,C", help="Table: exactly these columns."),
):
    """Every finding ID rmqtool reports (verify, dump, info): its default severity, what the broker's next start
    does about it (consequence), what it means and what to do; with an ID, that one finding, its text whole."""
    rows = finding_rows(finding_id)  # UsageError naming the nearest IDs when there is no such ID
    if finding_id is not None and fmt.value == "table" and columns is None:
        show_finding_id(rows[0])
        return
    with Sink(fmt.value, kind="finding_id", wide=wide, select=columns, single=finding_id is not None) as sink:
        for row in rows:
            sink.row(row)
