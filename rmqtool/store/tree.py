"""A store's directory tree as the broker lists it: through symlinked directories.

Operators move a commit log, the consume queues or the index files to another disk and leave
a symlink in the store (``commitlog -> /disk2/commitlog``); the broker's ``File.listFiles``
lists through it, so a listing of the store that did not would miss the files a repair makes
there, and undo would leave them. Each real directory is walked once: a link to a directory
seen already (or to one above it) adds no second name for the same files, and no loop.
"""
from __future__ import annotations

import os
import pathlib
from typing import Iterator


def walk(root: str | os.PathLike, through_links: bool = True) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(root)`` following symlinked directories (unless not ``through_links``), each
    real directory once, in name order (so which name a directory reached twice keeps does not
    depend on the file system)."""
    seen: set[str] = set()
    for top, dirs, files in os.walk(root, followlinks=through_links):
        real = os.path.realpath(top)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs.sort()
        files.sort()
        yield top, dirs, files


def files_and_directories(root: pathlib.Path, through_links: bool = True) -> tuple[list[str], list[str]]:
    """The names (relative to ``root``) of every file and of every directory that is not a
    symlink, through symlinked directories (unless not ``through_links``). A symlink to a file
    counts as a file (what it names is read and written through it); a broken one as nothing."""
    files, dirs = [], []
    for top, subdirs, names in walk(root, through_links):
        rel = os.path.relpath(top, root)
        prefix = "" if rel == "." else rel + os.sep
        dirs += [prefix + d for d in subdirs if not os.path.islink(os.path.join(top, d))]
        files += [prefix + n for n in names if os.path.isfile(os.path.join(top, n))]
    return files, dirs
