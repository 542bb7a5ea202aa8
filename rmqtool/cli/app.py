"""The typer application: one thin module per command, errors turned into exits there."""
from __future__ import annotations

import os
import sys

import typer


from rmqtool import __version__
from rmqtool.cli.common import click, closed_pipe, command_path, is_closed_pipe
from rmqtool.errors import ExitCode

app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Forensic and recovery tool for Apache RocketMQ broker stores. Read-only unless a "
                       "command says otherwise.")


def _version(value: bool):
    if value:
        print(f"rmqtool {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")):
    pass


def _register_all() -> None:
    from rmqtool.cli import (append, dump, findings, info, offsets, query, recover, redispatch, salvage, spark, undo,
                             verify)
    for module in (info, dump, query, verify, offsets, recover, redispatch, salvage, append, undo, findings, spark):
        module.register(app)


_register_all()


def usage_line(exc: "click.exceptions.UsageError") -> str:
    """click's UsageError as one line naming the command, with a hint (no boxed panel)."""
    command = command_path(exc.ctx)
    message = " ".join(exc.format_message().split())
    return f"{command}: error: {message} (try {command} --help)"


def _stdout_is_devnull() -> bool:
    try:
        out, null = os.fstat(sys.stdout.fileno()), os.stat(os.devnull)
    except (OSError, ValueError):
        return False
    return (out.st_dev, out.st_ino, out.st_rdev) == (null.st_dev, null.st_ino, null.st_rdev)


# Ctrl-C as click reports it: typer's vendored click has no exceptions.Abort, plain click has
# one (an except clause naming a missing attribute fails while matching any exception)
_ABORTS = tuple({typer.Abort, getattr(click.exceptions, "Abort", typer.Abort)})


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()
        sys.exit(int(ExitCode.USAGE))
    except click.exceptions.UsageError as exc:
        sys.stderr.write(usage_line(exc) + "\n")
        sys.exit(int(ExitCode.USAGE))
    except _ABORTS:
        sys.stderr.write("rmqtool: interrupted\n")
        sys.exit(130)
    except KeyboardInterrupt:
        sys.stderr.write("rmqtool: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(closed_pipe().exit_code)
    except SystemExit as exc:
        if exc.code == 1 and is_closed_pipe(exc.__context__):
            # click's answer to EPIPE escaping a command (exit 1): a closed pipe is exit 0
            sys.exit(closed_pipe().exit_code)
        if exc.code == 1 and _stdout_is_devnull():
            # rich's answer to a closed pipe (help | head): stdout pointed at /dev/null, exit 1;
            # a closed pipe is not a failure here
            sys.exit(int(ExitCode.OK))
        raise
    except click.exceptions.ClickException as exc:
        sys.stderr.write(f"rmqtool: error: {exc.format_message()}\n")
        sys.exit(exc.exit_code)
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the last of the output did not get out: the reader went away
        code = closed_pipe().exit_code
    sys.exit(code if isinstance(code, int) else int(ExitCode.OK))
