"""Progress on stderr (never stdout), beside the output sink, always in bytes: a reader's bar
counts the bytes it has read of ``total`` (verify, dump: the store's bytes); a writer's the
bytes it has written (append, salvage), with the rate, its total known only once it is done.
Commands make one only when asked (``--progress``) or when stderr is a terminal
(:func:`progress_bar`).

On a terminal it is a rich bar, sizes in binary units (MiB, GiB, as segments are sized),
transient: erased before a table's first line, a plan, a report or JSON on the terminal
(:func:`erase_bars`), and at its end. When ``--progress`` forces it onto a file or a pipe,
or the terminal is a dumb one, it is a plain line every few seconds (``scanning: 1.2 GiB of
2.0 GiB (60%)``), which a log keeps readable.
"""
from __future__ import annotations

import sys
import time

from rmqtool.report.columns import human_size

PLAIN_EVERY = 5.0  # seconds between two lines of plain progress


def progress_enabled(flag: bool | None) -> bool:
    """Progress goes to stderr: when ``--progress`` says so, and by default only when
    stderr is a terminal (``--no-progress`` turns it off)."""
    if flag is not None:
        return flag
    return sys.stderr.isatty()


def progress_bar(description: str, total: int | None = None, flag: bool | None = None) -> "Progress | None":
    """A bar of ``total`` bytes (None: bytes written, no total) when progress is on (``flag``:
    ``--progress/--no-progress``, None: stderr a terminal), else None."""
    return Progress(description, total) if progress_enabled(flag) else None


def counted(items, bar: "Progress | None", size_of, step: int = 1 << 20):
    """``items`` as they come, ``bar`` advanced by each one's ``size_of`` once the consumer has
    written it (asked for the next), a ``step`` of bytes at a time (a bar redrawn per message
    costs more than the message)."""
    if bar is None:
        return items

    def through():
        pending = 0
        for item in items:
            yield item
            pending += size_of(item)
            if pending >= step:
                bar.advance(pending)
                pending = 0
        bar.advance(pending)
    return through()


def _redraws() -> bool:
    """stderr a terminal that moves its cursor: a dumb one (TERM=dumb, an editor's shell) cannot
    erase a bar, and was left a blank line where it stood; it gets the plain lines."""
    import os
    return sys.stderr.isatty() and os.environ.get("TERM", "").lower() not in ("dumb", "unknown")


_LIVE: list = []  # bars on the terminal now


def erase_bars() -> None:
    """Erase the bars on the terminal before a table's first line goes out: a bar redrawn
    among table rows garbles both; from there the rows show the progress."""
    while _LIVE:
        _LIVE.pop().erase()


class Progress:
    """Progress of ``total`` bytes (a reader's), or of bytes written with no total (a writer's):
    :meth:`advance` by the bytes read or written; ``done`` and ``total`` say how far it got."""

    def __init__(self, description: str, total: int | None = None):
        self.description = description
        self.total = total
        self.done = 0
        self._bar = None
        if _redraws():
            from rich.console import Console
            from rich import progress as rp

            columns = (rp.TextColumn(description), rp.BarColumn(), rp.DownloadColumn(binary_units=True),
                       rp.TransferSpeedColumn() if total is None else rp.TimeRemainingColumn())
            self._bar = rp.Progress(*columns, console=Console(file=sys.stderr), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(description, total=total)
            _LIVE.append(self)
        else:
            self._next = time.monotonic() + PLAIN_EVERY

    def set_total(self, total: int) -> None:
        """The total, once the work knows it (redispatch: the commit log range it dispatches)."""
        self.total = total
        if self._bar is not None:
            self._bar.update(self._task, total=total)

    def advance(self, n: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.advance(self._task, n)
        elif time.monotonic() >= self._next:
            self._next = time.monotonic() + PLAIN_EVERY
            self._line()

    def _line(self) -> None:
        if self.total is None:
            text = f"{self.description}: {human_size(self.done)} written"
        else:
            share = f" ({100 * self.done // self.total}%)" if self.total else ""
            text = f"{self.description}: {human_size(self.done)} of {human_size(self.total)}{share}"
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def erase(self) -> None:
        """The bar off the terminal (rich's transient stop); later advances show nothing."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
            self._next = float("inf")
        if self in _LIVE:
            _LIVE.remove(self)

    def close(self) -> None:
        if self._bar is not None:
            self.erase()
        elif self.done and self._next != float("inf"):
            self._line()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
