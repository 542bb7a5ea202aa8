"""The sizes an existing store was written with, read off its files.

The broker keeps commit log, consume queue and index file sizes in its config, not in
the store; an engine appending to a store must use the same ones. Sizes given by the
caller must agree with what the files show.
"""
from __future__ import annotations

import pathlib

from rmqtool.errors import CorruptData, UsageError
from rmqtool.formats.indexfile import (DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, default_geometry,
                                       hash_slot_num_for, index_file_size, index_num_for)
from rmqtool.store import paths
from rmqtool.store.consumequeue import queue_directories
from rmqtool.store.indexfile import index_file_paths, infer_index_geometry
from rmqtool.store.segments import list_dir


def consume_queue_file_sizes(root: pathlib.Path) -> set[int]:
    sizes = set()
    for _topic, _queue_id, directory in queue_directories(root):
        first = next((e for e in list_dir(directory) if e.is_file() and paths.is_segment_name(e.name)), None)
        if first is not None:
            sizes.add(first.stat().st_size)
            if len(sizes) > 1:
                break
    return sizes


def queue_file_size(root: pathlib.Path, default: int) -> int:
    """The file size of the queues under ``root`` (consumequeue/ or batchconsumequeue/) as
    their files show it; ``default`` when there are none."""
    sizes = consume_queue_file_sizes(root)
    return max(sizes) if sizes else default


def index_sizes(directory: pathlib.Path, given_slots: int | None, given_entries: int | None,
                newest: bool = False) -> tuple[int, int]:
    """(maxHashSlotNum, maxIndexNum) of the store's index files: what the contents of the
    newest file with entries show (the read side's inference), which settings given must
    agree with. When no file has entries: the settings given, the one left out worked out
    from the files' size (the default 1:4 ratio when neither is given). The settings given
    or the broker defaults when there are no index files. Files of different sizes are an
    error, unless ``newest``: then only the files of the newest one's size count (the
    geometry the broker last wrote with, for a new store written from this one)."""
    given = (given_slots or DEFAULT_MAX_HASH_SLOT_NUM, given_entries or DEFAULT_MAX_INDEX_NUM)
    if not directory.is_dir():
        return given
    files = [(p.name, p.stat().st_size) for p in index_file_paths(directory)]
    if not files:
        return given
    sizes = {size for _, size in files}
    if len(sizes) > 1 and not newest:
        raise CorruptData(f"index files of different sizes: {sorted(sizes)}", directory)
    size = files[-1][1]
    files = [f for f in files if f[1] == size]
    for name, _ in reversed(files):
        found = infer_index_geometry(directory / name)
        if found is not None:
            return _agree(found, given_slots, given_entries, directory)
    if given_slots is not None:
        guess = (given_slots, given_entries if given_entries is not None else index_num_for(size, given_slots))
    elif given_entries is not None:
        guess = (hash_slot_num_for(size, given_entries), given_entries)
    else:
        guess = default_geometry(size) or (None, None)
    if None in guess or index_file_size(*guess) != size:
        what = ("the default 1:4 slot/entry ratio" if given_slots is None and given_entries is None
                else f"{guess[0]} slots and {guess[1]} entries")
        raise UsageError(f"index files of {size} bytes, none with entries to tell their slot and entry "
                         f"counts, cannot hold {what}: give both", directory)
    return guess


def _agree(found: tuple[int, int], given_slots, given_entries, where) -> tuple[int, int]:
    for name, g, f in (("index slot count", given_slots, found[0]), ("index entry count", given_entries, found[1])):
        if g is not None and g != f:
            raise UsageError(f"the store's {name} is {f}, not {g}", where)
    return found


def pick_size(name: str, given: int | None, found: int | None, default: int, where) -> int:
    if found is not None and given is not None and given != found:
        raise UsageError(f"the store's {name} is {found}, not {given}", where)
    return found if found is not None else (given if given is not None else default)
