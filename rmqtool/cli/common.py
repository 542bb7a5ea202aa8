"""What every command shares: the one error boundary (library errors, closed pipes and
Ctrl-C become one stderr line and the documented exit code; the only try/except of cli/),
output options, the sink."""
from __future__ import annotations

import contextlib
import datetime
import enum
import errno
import functools
import io
import os
import signal
import sys

import typer

try:  # typer 0.2x vendors click as typer._click
    from typer import _click as click
except ImportError:  # older typer depends on click
    import click

from rmqtool.errors import ExitCode, OutputFailed, RmqError, UsageError, error_line
from rmqtool.report.columns import terminal_safe
from rmqtool.report.sink import STDOUT, name_stdout


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
    """The reader of stdout went away (``| head``): not a failure, exit 0 with nothing on stderr."""
    _stdout_to_devnull()
    return typer.Exit(int(ExitCode.OK))


def _stdout_to_devnull() -> None:
    """stdout points at /dev/null once it failed, so the interpreter's last flush of what it
    holds cannot print "Exception ignored ... BrokenPipeError" (or a full disk's traceback)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def is_closed_pipe(exc: BaseException | None) -> bool:
    """``exc`` or what it was raised while handling is EPIPE on a write (click turns one into exit 1)."""
    while exc is not None:
        if isinstance(exc, BrokenPipeError):
            return True
        exc = exc.__context__
    return False


def fail(error: RmqError) -> "typer.Exit":
    line = terminal_safe(error.one_line())  # it may quote the store: a topic, a file name
    if error.exit_code == ExitCode.USAGE:
        # same one line as click's own usage errors (app.usage_line): command, message, hint
        command = command_path(click.globals.get_current_context(silent=True))
        sys.stderr.write(f"{command}: error: {line} (try {command} --help)\n")
    else:
        sys.stderr.write(f"rmqtool: error: {line}\n")
        say_open_files_limit(line)
    return typer.Exit(int(error.exit_code))


def say_open_files_limit(line: str) -> None:
    """After an error of the open files limit, the limit and what to do (the engine keeps the
    last file of each queue it writes to open, as the broker does, and raises its limit to the
    hard one as the broker's JVM does: what is left to raise is the hard limit)."""
    if os.strerror(errno.EMFILE) not in line:
        return
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError):
        return
    sys.stderr.write(f"rmqtool: this process may have {soft} files open (hard limit {hard}): raise the "
                     f"limit (ulimit -Hn, as for the broker) and run the command again; a repair keeps two "
                     f"open for each queue it writes to, as the broker keeps each mapped\n")


def boundary(fn):
    """Turn library errors into one stderr line and the documented exit code; no tracebacks.
    A usage error the library finds in an option's value is said as click's own are: the
    command, the message, the hint."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        before = {}
        try:
            before = say_unfinished(kwargs)
            return fn(*args, **kwargs)
        except RmqError as exc:
            exit_ = fail(exc)
            say_left_unfinished(kwargs, before)
            raise exit_ from None
        except BrokenPipeError:
            # downstream closed the pipe (head, less): not an error of ours
            raise closed_pipe() from None
        except KeyboardInterrupt:
            interrupted()
            say_left_unfinished(kwargs, before)
            raise typer.Exit(130) from None
        except MemoryError:
            # one line, not a traceback; a repair cut short by it is finished or undone as any
            # interrupted one is (its journal)
            sys.stderr.write("rmqtool: error: out of memory (the machine's, or a limit such as ulimit -v)\n")
            say_left_unfinished(kwargs, before)
            raise typer.Exit(int(ExitCode.OPERATIONAL)) from None
        except OSError as exc:
            if exc.filename == STDOUT:  # what it still holds must not fail a second time at exit
                _stdout_to_devnull()
            line, code = error_line(exc)
            line = terminal_safe(line)  # the file name is the store's
            sys.stderr.write(f"rmqtool: error: {line}\n")
            say_open_files_limit(line)
            say_left_unfinished(kwargs, before)
            raise typer.Exit(int(code)) from None
    return wrapper


def interrupted() -> None:
    """Ctrl-C's one line, the progress bars erased first: a bar left live would be drawn again
    after it (the bars are transient: nothing of them stays once the command ends)."""
    from rmqtool.report.progress import erase_bars
    erase_bars()
    sys.stderr.write("rmqtool: interrupted\n")


@contextlib.contextmanager
def closed_on_error(*closers):
    """Close ``closers`` (a sink, a progress bar) at the end, and also when the library stops
    with an error, so what was found before it is out; not when the reader of stdout went
    away (nothing more can be written) or on Ctrl-C."""
    try:
        yield
    except BrokenPipeError:
        raise
    except (RmqError, OSError):
        _close_all(closers)
        raise
    _close_all(closers)


class Written:
    """What a writing command has changed so far, in words (``words``, kept up to date by the
    command), for the line said when its output fails (:func:`writer_output`)."""

    def __init__(self, words: str):
        self.words = words


def change_made(what: str, applied: dict | None) -> str:
    """The words for a change a writer made (``applied``: its document's ``applied`` section,
    ``store_path`` and ``backup_dir``; None: nothing was changed)."""
    if not applied:
        return "nothing was changed"
    where, backup = applied.get("store_path"), applied.get("backup_dir")
    return (what + (f" in {where}" if where else "")
            + (f"; its backup is {backup} (rmqtool undo puts it back)" if backup else ""))


@contextlib.contextmanager
def writer_output(written: "Written | None"):
    """The block in which a writer (``written`` not None) writes its output: stdout failing
    there (a reader gone, a full disk) is no success as a reader's closed pipe is (exit 0):
    the one line names <stdout>, its error and what was changed (``written.words``), exit 8.
    stdout is flushed inside, so that its last bytes fail here rather than after the command."""
    if written is None:
        yield
        return
    try:
        yield
        sys.stdout.flush()
    except OSError as exc:
        if exc.filename != STDOUT:  # a file's error: the boundary says it with the file's name
            raise
        _stdout_to_devnull()
        reason = "closed by its reader" if isinstance(exc, BrokenPipeError) else exc.strerror
        raise OutputFailed(f"{reason}: {written.words}", STDOUT) from None


def _close_all(closers) -> None:
    for c in closers:
        if c is not None:
            c.close()


@contextlib.contextmanager
def interrupts_deferred(already: bool = False):
    """A writer's listing of what it has done, whole before Ctrl-C ends the run: Ctrl-C is held
    until the block ends, then raised. It also makes stdout non-blocking for the rest of the
    block, so a reader that stopped reading (a paused pager) fails the write at once instead
    of holding the exit; a second Ctrl-C raises at once. What stdout cannot take then is
    dropped (the exit's last flush must not wait for it either). ``already``: a Ctrl-C came
    before the block, held by the work whose output it lists."""
    caught: list = []
    stdout = _Descriptor()
    if already:  # a Ctrl-C the work before the block held for it
        caught.append(signal.SIGINT)
        stdout.without_waiting()

    def on_interrupt(signum, frame):
        caught.append(signum)
        if len(caught) > 1:
            raise KeyboardInterrupt
        stdout.without_waiting()

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield
    except OSError:
        if not caught:
            raise
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            try:
                sys.stdout.flush()
            except OSError:
                _stdout_to_devnull()
        stdout.restore()
    if caught:
        raise KeyboardInterrupt


class _Descriptor:
    """stdout's descriptor, made non-blocking on demand and given back as it was."""

    def __init__(self):
        self.fd = self.was = None

    def without_waiting(self) -> None:
        try:
            self.fd = sys.stdout.fileno()
            self.was = os.get_blocking(self.fd)
            os.set_blocking(self.fd, False)
        except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
            self.fd = None

    def restore(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.set_blocking(self.fd, self.was)


@contextlib.contextmanager
def until_interrupted():
    """Ctrl-C ends the block as its normal end (``dump --follow``): what was read is out."""
    try:
        yield
    except KeyboardInterrupt:
        pass


def iso_time(text: str, refusal: str) -> datetime.datetime:
    """An ISO 8601 time, or the usage error ``refusal`` (params.parse_time reads times)."""
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(refusal) from None


class Stores:
    """Several stores, one command: a store that cannot be read is named on stderr and the
    others go on (the worst code is kept); a single store's error ends the command as any
    error does."""

    def __init__(self, several: bool):
        self.several = several
        self.worst = int(ExitCode.OK)
        self.said_not_found = False

    @contextlib.contextmanager
    def each(self, not_found=None):
        """One store's work; ``not_found`` (an error class) is said as "not found" and counted apart."""
        from rmqtool.report.sink import warn

        try:
            yield
        except RmqError as exc:
            if not_found is not None and isinstance(exc, not_found):
                warn(f"rmqtool: not found: {exc.one_line()}")
                self.said_not_found = True
                return
            self.failed(exc)

    def failed(self, exc: RmqError) -> None:
        """A store that cannot be read (its error met here, or before: spark's stores are all
        opened before its job): of several named and left out, the worst code kept; a single
        store's error raised."""
        from rmqtool.report.sink import warn

        if not self.several:
            raise exc
        warn(f"rmqtool: error: {exc.one_line()}")
        self.worst = max(self.worst, int(exc.exit_code))


def say_unfinished(kwargs) -> dict:
    """Every command on a store an interrupted repair left half changed says so, one line on
    stderr, with the command that finishes it and the one that undoes it; what each store's
    marker said (None: none)."""
    found = _unfinished_of(kwargs)
    for marker in found.values():
        if marker is not None:
            sys.stderr.write(marker.notice() + "\n")
    return found


def say_left_unfinished(kwargs, before: dict) -> None:
    """A repair that stopped on an error (a full disk) with the store half changed says so at
    once, with both ways out, as the next command would."""
    for path, marker in _unfinished_of(kwargs).items():
        if marker is not None and marker != before.get(path):
            sys.stderr.write(marker.notice() + "\n")


def _unfinished_of(kwargs) -> dict:
    import pathlib

    from rmqtool.store.unfinished import read_unfinished
    given = []
    for name in ("store", "stores", "path", "paths", "store_a", "store_b"):  # store_a, store_b: diff's
        value = kwargs.get(name)
        given += value if isinstance(value, (list, tuple)) else [value]
    return {p: read_unfinished(p) for p in given if isinstance(p, pathlib.Path) and p.is_dir()}


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


def _standard_streams() -> bool:
    """A standard stream the shell closed (``<&-``, ``2>&-``) reads or takes nothing: /dev/null
    on its descriptor, which a store file opened later would otherwise get (and then be
    written as stdout or stderr). False when stdout was closed: a command's output has nowhere
    to go, and that is an I/O error (exit 8), not a silent success."""
    closed_stdout = sys.stdout is None
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8", errors="backslashreplace",
                                closefd=False))
    return not closed_stdout


def _failed_output(exc: OSError) -> int:
    """An OSError met outside every command's boundary (click's help, --version, the last
    flush): stdout's, said in one line; the exit code."""
    if isinstance(exc, BrokenPipeError):
        return closed_pipe().exit_code
    _stdout_to_devnull()
    line, code = error_line(exc)
    sys.stderr.write(f"rmqtool: error: {terminal_safe(line)}\n")
    return int(code)


def run(app, read_only: frozenset = frozenset()) -> None:
    """The process boundary around the typer app: click's usage errors one line (usage_line),
    Ctrl-C and a closed pipe as every command has them. A command of ``read_only`` (one that
    writes nothing but stdout and stderr) that ends normally ends the process once its output
    is flushed, without the interpreter's teardown (every module's objects freed: 30-60 ms
    after a verify or a dump, which no reader sees)."""
    if not _standard_streams():
        sys.stderr.write(f"rmqtool: error: {STDOUT}: closed (>&-): nothing was run; give it a file or /dev/null\n")
        sys.exit(int(ExitCode.OPERATIONAL))
    for stream in (sys.stdout, sys.stderr):  # a locale whose codec lacks a character (Latin-1, ASCII
        try:                                  # without UTF-8 mode) shows it as an escape, never a traceback
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError):  # not a text stream of its own (a test's capture)
            pass
    name_stdout()
    try:
        code = app(standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()
        sys.exit(int(ExitCode.USAGE))
    except click.exceptions.UsageError as exc:
        sys.stderr.write(usage_line(exc) + "\n")
        sys.exit(int(ExitCode.USAGE))
    except (*_ABORTS, KeyboardInterrupt):
        interrupted()
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
    except OSError as exc:  # stdout failing outside a command (--help, --version into a full disk)
        sys.exit(_failed_output(exc))
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the last of the output did not get out: the reader went away
        code = closed_pipe().exit_code
    except OSError as exc:
        code = _failed_output(exc)
    code = code if isinstance(code, int) else int(ExitCode.OK)
    if sys.argv[1:2] and sys.argv[1] in read_only:
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
