"""What every command shares: the error boundary, output options, the sink."""
from __future__ import annotations

import enum
import functools
import os
import sys

import typer

try:  # typer 0.2x vendors click as typer._click
    from typer import _click as click
except ImportError:  # older typer depends on click
    import click

from rmqtool.errors import ExitCode, RmqError


class OutputFormat(str, enum.Enum):
    table = "table"
    jsonl = "jsonl"
    json = "json"


class BodyMode(str, enum.Enum):
    text = "text"
    hex = "hex"
    base64 = "base64"
    none = "none"


def command_path(ctx) -> str:
    """`rmqtool dump commitlog` whatever name the program was started under (python -c, CliRunner)."""
    names = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return " ".join(["rmqtool", *reversed(names)])


def closed_pipe() -> "typer.Exit":
    """The reader of stdout went away (``| head``): not a failure, exit 0 with nothing on stderr.
    stdout then points at /dev/null, so the interpreter's last flush cannot print
    "Exception ignored ... BrokenPipeError"."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return typer.Exit(int(ExitCode.OK))


def is_closed_pipe(exc: BaseException | None) -> bool:
    """``exc`` or what it was raised while handling is EPIPE on a write (click turns one into exit 1)."""
    while exc is not None:
        if isinstance(exc, BrokenPipeError):
            return True
        exc = exc.__context__
    return False


def fail(error: RmqError) -> "typer.Exit":
    if error.exit_code == ExitCode.USAGE:
        # same one line as click's own usage errors (app.usage_line): command, message, hint
        command = command_path(click.globals.get_current_context(silent=True))
        sys.stderr.write(f"{command}: error: {error.one_line()} (try {command} --help)\n")
    else:
        sys.stderr.write(f"rmqtool: error: {error.one_line()}\n")
    return typer.Exit(int(error.exit_code))


def boundary(fn):
    """Turn library errors into one stderr line and the documented exit code; no tracebacks."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            say_unfinished(kwargs)
            return fn(*args, **kwargs)
        except RmqError as exc:
            raise fail(exc) from None
        except BrokenPipeError:
            # downstream closed the pipe (head, less): not an error of ours
            raise closed_pipe() from None
        except KeyboardInterrupt:
            sys.stderr.write("rmqtool: interrupted\n")
            raise typer.Exit(130) from None
        except OSError as exc:
            where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
            sys.stderr.write(f"rmqtool: error: {where}{exc.strerror or exc}\n")
            raise typer.Exit(int(ExitCode.OPERATIONAL)) from None
    return wrapper


def say_unfinished(kwargs) -> None:
    """Every command on a store an interrupted repair left half changed says so, one line on
    stderr, with the command that finishes it and the one that undoes it."""
    import pathlib

    from rmqtool.store.unfinished import read_unfinished
    given = []
    for name in ("store", "stores", "path", "paths"):
        value = kwargs.get(name)
        given += value if isinstance(value, (list, tuple)) else [value]
    for p in given:
        if isinstance(p, pathlib.Path) and p.is_dir():
            found = read_unfinished(p)
            if found is not None:
                sys.stderr.write(found.notice() + "\n")
