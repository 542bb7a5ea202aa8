"""A text file written whole or not at all: a temporary file in the same directory, then
renamed over the target, so a reader (node_exporter's textfile collector, a browser, a mail
attachment) never sees half a file."""
from __future__ import annotations

import os
import pathlib
import tempfile

from rmqtool.errors import StoreAccessError


def write_text_atomically(path: str | os.PathLike, text: str, what: str) -> pathlib.Path:
    """Write ``text`` at ``path`` (mode 0644); ``what`` names the file in the one-line error
    when its directory cannot take it."""
    path = pathlib.Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise StoreAccessError(f"cannot write {what} ({exc.strerror})", path) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:  # a lone surrogate: shown
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:  # said of the path given, not of the temporary file (a directory there, a full disk)
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise StoreAccessError(f"cannot write {what} ({exc.strerror or exc})", path) from None
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise
    return path
