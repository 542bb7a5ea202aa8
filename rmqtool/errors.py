"""Every error rmqtool raises, and the one exit-code table all commands share.

Each error names the file and, where it has one, the byte offset, so that the
CLI boundary can print a single line and exit with a documented code. No
traceback ever reaches a user.
"""
from __future__ import annotations

import enum
import os


class ExitCode(enum.IntEnum):
    """Exit codes, documented in README.md. Scripts branch on these."""

    OK = 0  # success, nothing wrong seen
    NOT_FOUND = 1  # a lookup found nothing
    USAGE = 2  # bad arguments (also typer/click's own usage errors)
    CORRUPT = 3  # the command ran, and damaged data was found and reported
    BAD_INPUT = 4  # the input is not a store / file of a kind rmqtool can read
    LOCKED = 5  # a writer refused: the store is held by a running broker, is half way through an interrupted
    # repair, or (undo) was written after the repair
    OPERATIONAL = 8  # missing path, permission denied, I/O error


class RmqError(Exception):
    """Base class: a message, optionally the file and byte offset it concerns."""

    exit_code: ExitCode = ExitCode.OPERATIONAL

    def __init__(self, message: str, path: str | os.PathLike | None = None,
                 offset: int | None = None):
        super().__init__(message)
        self.message = message
        self.path = os.fspath(path) if path is not None else None
        self.offset = offset

    def one_line(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path
            if self.offset is not None:
                where += f" at offset {self.offset}"
            where += ": "
        return f"{where}{self.message}".replace("\n", " ")

    def __str__(self) -> str:
        return self.one_line()


def error_line(exc: RmqError | OSError) -> tuple[str, ExitCode]:
    """The one line and the exit code an error is said with: an RmqError's own; an OSError
    as the file it names and the OS's words (missing path, permission, I/O error, disk full)."""
    if isinstance(exc, RmqError):
        return exc.one_line(), ExitCode(exc.exit_code)
    where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
    return f"{where}{exc.strerror or exc}", ExitCode.OPERATIONAL


class CodecMissing(RmqError):
    """An optional codec (lz4, zstandard) that a compressed body needs is not installed."""

    exit_code = ExitCode.OPERATIONAL


class ExtraMissing(RmqError):
    """An optional part of rmqtool (the spark extra) is not installed: the message names the pip command."""

    exit_code = ExitCode.OPERATIONAL


class StoreNotFound(RmqError):
    """The path does not exist."""

    exit_code = ExitCode.OPERATIONAL


class StoreAccessError(RmqError):
    """The OS refused to read or write a path (permissions, I/O error)."""

    exit_code = ExitCode.OPERATIONAL


class OutputFailed(RmqError):
    """A writer's stdout failed (its reader went away, a full disk) once it had begun: said with
    what the command had changed by then, never as a success."""

    exit_code = ExitCode.OPERATIONAL


class NotAStore(RmqError):
    """The path exists but holds nothing rmqtool recognises."""

    exit_code = ExitCode.BAD_INPUT


class FormatError(RmqError):
    """Bytes that do not match the layout they should have."""

    exit_code = ExitCode.BAD_INPUT


class CorruptData(RmqError):
    """Damage found while reading: raised only where a reader cannot go on."""

    exit_code = ExitCode.CORRUPT


class StoreLocked(RmqError):
    """Another process (a running broker, or another rmqtool writer) holds the store."""

    exit_code = ExitCode.LOCKED


class RepairUnfinished(RmqError):
    """A writer refused a store an interrupted repair or undo left half changed (its marker
    names the command that finishes it and the one that undoes it)."""

    exit_code = ExitCode.LOCKED


class StoreChangedSince(RmqError):
    """undo refused: the store is no longer as the repair left it (written since), so putting
    the old bytes back would destroy what was written after (--force overrides)."""

    exit_code = ExitCode.LOCKED


class TasksFailed(RmqError):
    """Tasks of a cluster job that stopped on an error (spark export): the exit code is the
    worst task's."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = ExitCode(exit_code)


class SparkFailed(RmqError):
    """Spark itself stopped: no master answered, a setting it refused, a job the cluster
    aborted (spark/session.py spark_errors): the first line of what it said."""

    exit_code = ExitCode.OPERATIONAL


class NothingFound(RmqError):
    """A lookup that found nothing."""

    exit_code = ExitCode.NOT_FOUND


class UsageError(RmqError):
    """Arguments that cannot work together."""

    exit_code = ExitCode.USAGE


class RecoveryNeeded(CorruptData):
    """A writer refused a store that needs recovery first (the abort marker, or a commit log
    or consume queue whose end is not as a clean close leaves it); ``plan`` says what would change."""

    def __init__(self, message: str, path: str | os.PathLike | None = None, offset: int | None = None,
                 plan=None):
        super().__init__(message, path, offset)
        self.plan = plan
