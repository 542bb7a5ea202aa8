"""The sizes an existing store was written with, read off its files.

The broker keeps commit log, consume queue and index file sizes in its config, not in
the store; an engine appending to a store must use the same ones. Sizes given by the
caller must agree with what the files show.
"""
from __future__ import annotations

import os
import pathlib

from rmqtool.errors import CorruptData, UsageError
from rmqtool.formats.indexfile import (DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, FILE_NAME_LENGTH,
                                       INDEX_HEADER_SIZE, IndexHeader, index_file_size)
from rmqtool.store import paths
from rmqtool.store.commitlog_end import first_bytes
from rmqtool.engine.index_writer import infer_index_sizes


def consume_queue_file_sizes(root: pathlib.Path) -> set[int]:
    sizes = set()
    if not root.is_dir():
        return sizes
    for topic in os.scandir(root):
        if not topic.is_dir():
            continue
        for q in os.scandir(topic.path):
            if q.is_dir():
                for f in os.scandir(q.path):
                    if f.is_file() and paths.is_segment_name(f.name):
                        sizes.add(f.stat().st_size)
                        if len(sizes) > 1:
                            return sizes
                        break
        if sizes:
            return sizes
    return sizes


def index_sizes(directory: pathlib.Path, given_slots: int | None, given_entries: int | None) -> tuple[int, int]:
    """(maxHashSlotNum, maxIndexNum) of the store's index files: what a full file says, else
    the settings given when the files' size agrees with them, else what the contents of the
    file with the most entries fit; the broker defaults when there are no index files."""
    given = (given_slots or DEFAULT_MAX_HASH_SLOT_NUM, given_entries or DEFAULT_MAX_INDEX_NUM)
    if not directory.is_dir():
        return given
    files = sorted((e.name, e.stat().st_size) for e in os.scandir(directory)
                   if e.is_file() and len(e.name) == FILE_NAME_LENGTH and e.name.isdigit())
    if not files:
        return given
    sizes = {size for _, size in files}
    if len(sizes) > 1:
        raise CorruptData(f"index files of different sizes: {sorted(sizes)}", directory)
    size = sizes.pop()
    found = [(infer_index_sizes(directory / name), name) for name, _ in reversed(files)]
    for sizes_found, name in found:  # a full file tells exactly
        if sizes_found and _index_count(directory / name) >= sizes_found[1]:
            return _agree(sizes_found, given_slots, given_entries, directory)
    if given_slots is not None and given_entries is not None:
        if index_file_size(given_slots, given_entries) != size:
            raise UsageError(f"index files of {size} bytes cannot hold {given_slots} slots and "
                             f"{given_entries} entries", directory)
        return given
    best = max(((_index_count(directory / n), f) for f, n in found if f), default=None, key=lambda t: t[0])
    if best is None:
        raise UsageError("cannot tell the index files' slot and entry counts: give both", directory)
    return _agree(best[1], given_slots, given_entries, directory)


def _index_count(path: pathlib.Path) -> int:
    head = first_bytes(path, INDEX_HEADER_SIZE)
    return IndexHeader.parse(head).index_count if len(head) == INDEX_HEADER_SIZE else 0


def _agree(found: tuple[int, int], given_slots, given_entries, where) -> tuple[int, int]:
    for name, g, f in (("index slot count", given_slots, found[0]), ("index entry count", given_entries, found[1])):
        if g is not None and g != f:
            raise UsageError(f"the store's {name} is {f}, not {g}", where)
    return found


def pick_size(name: str, given: int | None, found: int | None, default: int, where) -> int:
    if found is not None and given is not None and given != found:
        raise UsageError(f"the store's {name} is {found}, not {given}", where)
    return found if found is not None else (given if given is not None else default)
