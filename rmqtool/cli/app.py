"""The typer application: one thin module per command, errors turned into exits there.

A process runs one command, so it imports only that command's module (and the part of the
library it needs): the root group looks a command up when it is asked for (_Commands), and
``rmqtool --help`` lists every command from COMMANDS without importing any of them."""
from __future__ import annotations

import copy
import functools
import importlib
import os
from collections.abc import Mapping

# rmqtool's numpy work is element-wise, never BLAS: OpenBLAS's threads only spin at numpy's import
# (about 0.08 s of another core's CPU a process). Set before anything imports numpy; a value given wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer
from typer.core import TyperCommand, TyperGroup

from rmqtool import __version__
from rmqtool.cli.common import run

# Each command of the root: the cli/ modules that make it (imported in this order: dump's kinds
# in three modules) and the first paragraph of its help, which `rmqtool --help` lists.
# tests/test_startup.py renders every help with all modules imported and compares.
COMMANDS = {
    "info": (("info",), "Segments and offset ranges, queues with min/max offsets, index files, checkpoint, "
                        "shutdown state, config."),
    "query": (("query",), "Find messages the way the broker's queryMessage, lookMessageByOffset and\n"
                          "getOffsetInQueueByTime do, from the files alone, without the broker's hash-collision\n"
                          "false positives. Exit 0: found; 1: nothing found; 3: a message found is damaged (bad CRC).\n"
                          "On a QMQ store: --subject with --sequence or --time, or --msg-id (QMQ's message id)."),
    "verify": (("verify",), "Check every file of a store; one finding a row. Exit 0: no error; 3: errors found; "
                            "4: not a store;\n8: not checked (missing path, I/O error)."),
    "check": (("check",), "A monitoring probe: dispatch lag, unflushed window, recovery time, disk, consumer lag, "
                          "tail damage."),
    "diff": (("diff",), "Where two stores differ: the first commit log divergence, messages on one side only, "
                        "queue ranges, checkpoint and config."),
    "report": (("report",), "The store on one page: commit log files to scale, queues and lag, index coverage, "
                            "findings by consequence."),
    "recover": (("recover",), "Plan (and with --apply do) what the broker's restart recovery does to a store."),
    "redispatch": (("redispatch",), "Rebuild consume queues and index files from the commit log (files identical "
                                    "to the broker's),\nor with --timer the timer log, wheel and timercheck for the "
                                    "pending timer messages."),
    "salvage": (("salvage",), "Find every intact message (also past where recovery cuts) and report what is lost "
                              "for good.\nOn a QMQ store: every record whose payload matches its CRC, with --out."),
    "append": (("append",), "Append messages to a store (a new one with --create), as the 4.9.x broker writes them."),
    "undo": (("undo",), "Give the store back as it was before a repair (writes to the store; refused while a "
                        "writer holds it)."),
    "findings": (("findings",), "Every finding ID rmqtool reports (verify, dump, info): its default severity, what "
                                "the broker's next start\ndoes about it (consequence), what it means and what to do; "
                                "with an ID, that one finding, its text whole."),
    "dump": (("dump", "dump_rocksdb", "dump_timer"), "Dump store files as rows (table, JSON Lines or JSON)."),
    "offsets": (("offsets",), "Committed consumer offsets (rmqtool offsets STORE), and resetting them (reset)."),
    "spark": (("spark",), "The fleet pipeline on Spark: export, verify, query and stats across many stores "
                          "(needs the spark extra of rmqtool)."),
}


class _Commands(Mapping):
    """The root's commands by name, each built (its modules imported) the first time it is looked up."""

    def __init__(self):
        self._built: dict = {}

    def __getitem__(self, name):
        if name not in self._built:
            self._built.update(typer.main.get_group(_registered(name)).commands)  # KeyError: no such command
        return self._built[name]

    def __contains__(self, name):
        return name in COMMANDS

    def __iter__(self):
        return iter(COMMANDS)

    def __len__(self):
        return len(COMMANDS)


class _LazyGroup(TyperGroup):
    """The root command: its commands from _Commands; its help lists them from COMMANDS."""

    def __init__(self, **attrs):
        super().__init__(**attrs)
        self.commands = _Commands()

    def list_commands(self, ctx):
        return list(COMMANDS)

    def format_help(self, ctx, formatter):
        listing = copy.copy(self)  # the same group, listing each command by its summary
        listing.commands = {name: TyperCommand(name=name, help=summary) for name, (_, summary) in COMMANDS.items()}
        return TyperGroup.format_help(listing, ctx, formatter)


SETTINGS = dict(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                help="Forensic and recovery tool for Apache RocketMQ broker stores. Read-only unless a "
                     "command says otherwise.")
app = typer.Typer(cls=_LazyGroup, **SETTINGS)


@functools.cache
def _registered(name: str) -> typer.Typer:
    """A Typer holding the command ``name``: its modules imported and registered once a process."""
    holder = typer.Typer(pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=app.rich_markup_mode,
                         suggest_commands=app.suggest_commands)
    for module in COMMANDS[name][0]:
        importlib.import_module(f"rmqtool.cli.{module}").register(holder)
    return holder


def _version(value: bool):
    if value:
        from rmqtool.report.sink import write_line
        write_line(f"rmqtool {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")):
    pass


# Commands that write nothing but stdout and stderr (report writes --html, the others the store or
# a copy of it): their process ends without the interpreter's teardown (common.run)
READ_ONLY = frozenset({"info", "query", "verify", "check", "diff", "findings", "dump"})


def main() -> None:
    run(app, READ_ONLY)
