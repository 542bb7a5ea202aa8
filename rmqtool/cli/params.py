"""How every command reads its arguments: times, ranges, metavars, short flags.

Conventions (new commands follow them):
- A bad argument is a UsageError (exit 2), printed by app.main as one line:
  `rmqtool CMD: error: MESSAGE (try rmqtool CMD --help)`; never a boxed panel.
- Times are epoch milliseconds or ISO 8601 (UTC unless an offset is named), read by
  parse_time only; a 10-digit number is epoch seconds and is refused with a hint.
- Ranges (--begin-time/--end-time, --from-offset/--to-offset) go through check_range:
  a reversed range is a usage error.
- Metavars: TIME_METAVAR for times, OFFSET for byte or queue offsets, FILE/STORE for paths.
- Short flags: -n --limit/--max, -t --topic, -q --queue, -f --format.
"""
from __future__ import annotations

import datetime
import pathlib
from typing import Annotated, Optional

import typer

from rmqtool.errors import UsageError

TIME_METAVAR = "MS|ISO8601"
OFFSET_METAVAR = "OFFSET"

# the table options of every command that prints rows of a store's files (dump's kinds, query)
WideOpt = typer.Option(False, "--wide", help="Table: every column, not only those that fit the width.")
ColumnsOpt = typer.Option(None, "--columns", metavar="A,B,C", help="Table: exactly these columns (JSON field names).")
TABLE_BODY_PREVIEW = 40  # bytes of a body a table shows when --body is not given

# epoch seconds now have 10 digits (until 2286); epoch milliseconds have 13
_SECONDS_DIGITS = 10


_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


def parse_time(text: str | None, option: str = "time") -> int | None:
    """Epoch milliseconds, or an ISO 8601 time (UTC unless it names an offset)."""
    if text is None:
        return None
    t = text.strip()
    if t.lstrip("-").isdigit():
        if len(t.lstrip("-")) == _SECONDS_DIGITS:
            raise UsageError(f"{option}: {text!r} looks like epoch seconds; give milliseconds "
                             f"({t}000) or ISO 8601")
        if not _LONG_MIN <= int(t) <= _LONG_MAX:  # the broker's times are Java longs: none is stored there
            raise UsageError(f"{option}: {text!r} is past what a Java long holds (epoch ms)")
        return int(t)
    from rmqtool.cli.common import iso_time  # the one place cli/ catches an exception

    dt = iso_time(t.replace("Z", "+00:00"), f"{option}: not a time (epoch ms or ISO 8601): {text!r}")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return int(dt.timestamp() * 1000)


def check_range(low_option: str, low: int | None, high_option: str, high: int | None) -> None:
    """A range given backwards is a mistake the operator should hear about, not an empty result."""
    if low is not None and high is not None and low > high:
        raise UsageError(f"{low_option} {low} is after {high_option} {high}")


EXIT_CODES = ("Exit codes: 0 done, nothing wrong seen; 1 a lookup found nothing; 2 usage; 3 damage found "
              "(diff: the stores differ); 4 not a store, or not of the kind asked for; 5 a writer refused (a "
              "running broker's lock, an interrupted repair); 8 operational (a missing path, permission, I/O). "
              "README: Exit codes.")
NAGIOS_CODES = "Exit codes (Nagios's): 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN. README: check."


def examples(*commands: str, exit_codes: str = EXIT_CODES) -> str:
    """A command's help epilog: a few runnable examples, one a line and never rewrapped (click's
    \\b), then the exit codes."""
    return "\n\n".join(["Examples:", "\b\n" + "\n".join(f"  $ {c}" for c in commands), exit_codes])


def _store_root_given(ctx: typer.Context) -> pathlib.Path | None:
    """The store the command line names so far (its STORE or PATH argument), if any.

    While the shell completes ``--topic <TAB>``, click's parse stops at the option still
    waiting for its value and leaves the positional words unassigned, in ``ctx.args``
    (bash and zsh both get there): those are looked at too."""
    given = [ctx.params.get(name) for name in ("store", "path", "stores", "paths")]
    words = [w for g in given if g for w in (g if isinstance(g, (list, tuple)) else [g])]
    for word in [*words, *ctx.args]:
        path = pathlib.Path(word)
        for candidate in (path, *path.parents):  # a path inside a store completes from that store
            if (candidate / "consumequeue").is_dir():
                return candidate
    return None


def complete_topic(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of --topic: the store's consume queue topics."""
    from rmqtool.store.consumequeue import queue_directories

    root = _store_root_given(ctx)
    if root is None:
        return []
    topics = sorted({topic for topic, _, _ in queue_directories(root / "consumequeue")})
    return [t for t in topics if t.startswith(incomplete)]


def complete_queue(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of --queue: the queue ids of --topic (of every topic when none is given yet)."""
    from rmqtool.store.consumequeue import queue_directories

    root = _store_root_given(ctx)
    if root is None:
        return []
    topic = ctx.params.get("topic")
    ids = sorted({q for t, q, _ in queue_directories(root / "consumequeue") if topic is None or t == topic})
    return [str(q) for q in ids if str(q).startswith(incomplete)]


# The broker version whose rules a command follows where the store's end depends on them
# (recover, append, redispatch); checked by check_semantics
Semantics = Annotated[Optional[str], typer.Option(
    "--semantics", metavar="4.9|5.3",
    help="The broker version's recovery rules for the store (default: detected from the store; a store "
         "that does not say, where the rules differ, asks for it).")]


def check_semantics(semantics: str | None) -> str | None:
    from rmqtool.recovery.commitlog_walk import SEMANTICS

    if semantics is not None and semantics not in SEMANTICS:
        raise UsageError(f"--semantics takes {' or '.join(SEMANTICS)}, not {semantics!r}")
    return semantics
