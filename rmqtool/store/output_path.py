"""Where a command may put what it writes: never inside a store it reads.

A page, a Prometheus file, salvaged rows or a copy written among a store's files replaces a
segment or the checkpoint, or leaves a stray file the broker's load refuses (doLoad takes
every entry of commitlog/ for a file of its log), and on a store a running broker holds it
changes what the broker is using. So the output path is refused, before anything is
written, when its real path (symbolic links and relative paths resolved; a path not there
yet resolved as far as it exists) is a store's root, an entry of it, or lies under one:
the root's entries are resolved too (a consume queue or commit log directory linked from
another disk), and so are the commit log directories the broker loads elsewhere
(storePathCommitLog). Nothing here writes.
"""
from __future__ import annotations

import os
import pathlib
from typing import Iterable

from rmqtool.errors import UsageError


def store_places(store) -> list[pathlib.Path]:
    """The real paths a store's files lie under: its root, each entry of the root, and the
    commit log directories its broker loads (``store``: a view, or a store root's path)."""
    from rmqtool.store.commitlog_paths import commit_log_paths_of
    root = _root(store)
    places = [root]
    try:
        places += [pathlib.Path(e.path) for e in os.scandir(root)]
    except OSError:  # not there or not a directory: its own error is said by its reader
        pass
    directories = getattr(store, "commit_log_directories", None)
    if directories is None:  # a path (or QMQ's view, which has none): what the command was given, or the store shows
        given = commit_log_paths_of(root) if root.is_dir() else None
        directories = given.directories if given is not None else []
    places += [pathlib.Path(d) for d in directories]
    return list(dict.fromkeys(pathlib.Path(os.path.realpath(p)) for p in places))


def _root(store) -> pathlib.Path:
    """A store's root: a path's own (a pathlib.Path's ``root`` is its anchor, not a store's)."""
    return pathlib.Path(store if isinstance(store, (str, os.PathLike)) else store.root)


def lies_in(out: str | os.PathLike, place: str | os.PathLike) -> bool:
    """``out`` is ``place`` or lies under it, their real paths compared."""
    return pathlib.Path(os.path.realpath(out)).is_relative_to(os.path.realpath(place))


def store_holding(out: str | os.PathLike, stores: Iterable) -> tuple[object, pathlib.Path] | None:
    """(the store, its place) ``out`` lies in, or None."""
    for store in stores:
        place = next((p for p in store_places(store) if lies_in(out, p)), None)
        if place is not None:
            return store, place
    return None


def refuse_output_in_store(out: str | os.PathLike, option: str, stores: Iterable) -> None:
    """A usage error naming ``out`` when it lies inside one of ``stores`` (views or roots)
    the command reads; ``option`` names it in the line."""
    held = store_holding(out, stores)
    if held is not None:
        store, place = held
        root = _root(store)
        where = "" if place == pathlib.Path(os.path.realpath(root)) else f" ({place})"
        raise UsageError(f"{option} lies inside the store {root}{where}: give a path outside every store it "
                         f"reads (nothing was written)", out)
