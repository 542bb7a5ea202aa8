"""A page opened in headless Chromium (Debian's ``chromium``): its screenshot, the DOM as the
browser built it, and what its console said. The report page's test and the README's
picture (docs/make_report_picture.py) look at the page this way, as a reader's browser does.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

from rmqtool.errors import StoreAccessError

BROWSERS = ("chromium", "chromium-browser")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CONSOLE = re.compile(r":CONSOLE[:(]")  # --enable-logging=stderr: a line per console message or uncaught error


@dataclasses.dataclass(frozen=True)
class Rendered:
    dom: str  # document.documentElement.outerHTML once loaded (--dump-dom)
    console: list[str]  # console messages and uncaught script errors
    png: pathlib.Path


def find_chromium() -> str:
    """The browser's path; StoreAccessError (one line, exit 8) when none is installed."""
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    raise StoreAccessError("no chromium on PATH (Debian: apt-get install chromium; `make venv` installs it)")


def render(page: str | os.PathLike, png: str | os.PathLike, *, width: int, height: int,
           timeout: float = 60) -> Rendered:
    """Open ``page`` (a local file) at a window of ``width`` x ``height`` CSS pixels: write
    the screenshot to ``png`` and return the DOM and the console, in one browser launch."""
    png = pathlib.Path(png).resolve()
    with tempfile.TemporaryDirectory(prefix="rmqtool-chromium-") as profile:
        done = subprocess.run(
            [find_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", "--disable-extensions", "--disable-background-networking",
             f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--force-device-scale-factor=1",
             f"--window-size={width},{height}", f"--screenshot={png}", "--dump-dom",
             pathlib.Path(page).resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 or not png.is_file():
        raise StoreAccessError(f"chromium failed (exit {done.returncode}): {done.stderr.strip()[-300:]}", png)
    console = [line for line in done.stderr.splitlines() if _CONSOLE.search(line)]
    return Rendered(done.stdout, console, png)


def png_size(path: str | os.PathLike) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; ValueError when the file is not a PNG."""
    head = pathlib.Path(path).read_bytes()[:24]
    if head[:8] != PNG_SIGNATURE or head[12:16] != b"IHDR":
        raise ValueError(f"{path}: not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
