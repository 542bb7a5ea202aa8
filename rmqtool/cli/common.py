"""What every command shares: the error boundary, output options, the sink."""
from __future__ import annotations

import enum
import functools
import sys

import typer

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


def fail(error: RmqError) -> "typer.Exit":
    sys.stderr.write(f"rmqtool: error: {error.one_line()}\n")
    return typer.Exit(int(error.exit_code))


def boundary(fn):
    """Turn library errors into one stderr line and the documented exit code; no tracebacks."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RmqError as exc:
            raise fail(exc) from None
        except BrokenPipeError:
            # downstream closed the pipe (head, less): not an error of ours
            sys.stderr.close()
            raise typer.Exit(int(ExitCode.OK)) from None
        except KeyboardInterrupt:
            sys.stderr.write("rmqtool: interrupted\n")
            raise typer.Exit(130) from None
        except OSError as exc:
            where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
            sys.stderr.write(f"rmqtool: error: {where}{exc.strerror or exc}\n")
            raise typer.Exit(int(ExitCode.OPERATIONAL)) from None
    return wrapper


def parse_time(text: str | None) -> int | None:
    """Epoch milliseconds, or an ISO 8601 time (UTC unless it names an offset)."""
    if text is None:
        return None
    import datetime

    from rmqtool.errors import UsageError

    t = text.strip()
    if t.lstrip("-").isdigit():
        return int(t)
    try:
        dt = datetime.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"not a time (epoch ms or ISO 8601): {text!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return int(dt.timestamp() * 1000)
