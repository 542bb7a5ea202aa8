"""The typer application: one thin module per command, errors turned into exits there."""
from __future__ import annotations

import typer

from rmqtool import __version__
from rmqtool.cli.common import run
from rmqtool.report.sink import write_line

app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Forensic and recovery tool for Apache RocketMQ broker stores. Read-only unless a "
                       "command says otherwise.")


def _version(value: bool):
    if value:
        write_line(f"rmqtool {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")):
    pass


def _register_all() -> None:
    from rmqtool.cli import (append, check, diff, dump, dump_rocksdb, dump_timer, findings, info, offsets, query,
                             recover, redispatch, report, salvage, spark, undo, verify)
    for module in (info, dump, dump_timer, dump_rocksdb, query, verify, offsets, check, diff, report, recover,
                   redispatch, salvage, append, undo, findings, spark):
        module.register(app)


_register_all()


def main() -> None:
    run(app)
