"""Progress bars on stderr (never stdout), beside the output sink: by bytes scanned or by
items done. Commands make one only when asked or when stderr is a terminal."""
from __future__ import annotations

import sys


def progress_enabled(flag: bool | None) -> bool:
    """Progress bars go to stderr, and by default only when stderr is a terminal."""
    if flag is not None:
        return flag
    return sys.stderr.isatty()


class Progress:
    """A rich progress bar on stderr: ``total`` bytes (a scan), or None for a count of items."""

    def __init__(self, description: str, total: int | None = None):
        from rich.console import Console
        from rich import progress as rp

        if total is None:
            columns = (rp.TextColumn(description), rp.BarColumn(), rp.MofNCompleteColumn(), rp.TimeElapsedColumn())
        else:
            columns = (rp.TextColumn(description), rp.BarColumn(), rp.DownloadColumn(), rp.TimeRemainingColumn())
        self._bar = rp.Progress(*columns, console=Console(file=sys.stderr), transient=True)
        self._bar.start()
        self._task = self._bar.add_task(description, total=total)

    def advance(self, n: int) -> None:
        self._bar.advance(self._task, n)

    def close(self) -> None:
        self._bar.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
