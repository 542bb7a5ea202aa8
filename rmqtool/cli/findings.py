"""rmqtool findings: every finding ID, its default severity, what it means and what to do."""
from __future__ import annotations

from typing import Optional

import typer

from rmqtool.cli.params import examples

from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.findings import CONSEQUENCES, OPERATOR_ACTIONS, REGISTRY
from rmqtool.report.sink import Sink


def register(app: typer.Typer) -> None:
    app.command("findings", epilog=examples(
        "rmqtool findings", "rmqtool findings -f jsonl | jq -r 'select(.severity==\"error\") | .finding'"))(findings)


@boundary
def findings(
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
    wide: bool = typer.Option(False, "--wide", help="Table: every column, uncut."),
    columns: Optional[str] = typer.Option(None, "--columns", metavar="A,B,C", help="Table: exactly these columns."),
):
    """Every finding ID rmqtool reports (verify, dump, info): its default severity, what the broker's next start
    does about it (consequence), what it means and what to do."""
    with Sink(fmt.value, kind="finding_id", wide=wide, select=columns) as sink:
        for finding_id, (severity, meaning) in REGISTRY.items():
            sink.row({"finding": finding_id, "severity": severity.value,
                      "consequence": CONSEQUENCES[finding_id].value, "meaning": meaning,
                      "action": OPERATOR_ACTIONS[finding_id]})
