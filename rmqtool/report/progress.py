"""Progress on stderr (never stdout), beside the output sink: by bytes scanned or by items
done. Commands make one only when asked (``--progress``) or when stderr is a terminal.

On a terminal it is a rich bar, sizes in binary units (MiB, GiB, as segments are sized);
when ``--progress`` forces it onto a file or a pipe, it is a plain line every few seconds
(``scanning: 1.2 GiB of 2.0 GiB (60%)``), which a log keeps readable.
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


_LIVE: list = []  # bars on the terminal now


def erase_bars() -> None:
    """Erase the bars on the terminal before a table's first line goes out: a bar redrawn
    among table rows garbles both; from there the rows show the progress."""
    while _LIVE:
        _LIVE.pop().erase()


class Progress:
    """Progress of ``total`` bytes (a scan), or of a count of items when ``total`` is None."""

    def __init__(self, description: str, total: int | None = None):
        self.description = description
        self.total = total
        self.done = 0
        self._bar = None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich import progress as rp

            if total is None:
                columns = (rp.TextColumn(description), rp.BarColumn(), rp.MofNCompleteColumn(),
                           rp.TimeElapsedColumn())
            else:
                columns = (rp.TextColumn(description), rp.BarColumn(), rp.DownloadColumn(binary_units=True),
                           rp.TimeRemainingColumn())
            self._bar = rp.Progress(*columns, console=Console(file=sys.stderr), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(description, total=total)
            _LIVE.append(self)
        else:
            self._next = time.monotonic() + PLAIN_EVERY

    def advance(self, n: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.advance(self._task, n)
        elif time.monotonic() >= self._next:
            self._next = time.monotonic() + PLAIN_EVERY
            self._line()

    def _line(self) -> None:
        if self.total is None:
            text = f"{self.description}: {self.done}"
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
