"""Stores behind a URI (``hdfs://``, ``s3://``, ``file://``, any scheme pyarrow's filesystem
layer opens), read on a cluster without a local copy of the store.

The scanner reads local files (positions, holes, windows), so an executor stages what its
task reads: a segment's byte range, plus a margin for the record that runs past the range's
end and the one that proves the next range's start, into a local sparse file of the
segment's size at the same positions. A result that reaches past what was staged stages a
larger margin and scans again, so a task never reads zeros where the store has data. A
store's consume queues are staged whole (they are small beside the commit log), with the
commit log's last written segment to find where the log ends, and when the next start is
simulated (a crash, damage at the end), what it reads: each file's first records and the
files it walks (spark/export.py).
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re

from rmqtool.errors import NotAStore, StoreAccessError, StoreNotFound

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
STAGE_MARGIN = 8 << 20  # past a range's end: a message over this stages again with more
STAGE_GUARD = 64 << 10  # a scan reaching this near the staged end may have met unstaged zeros
_HEADER = 8  # totalSize and magicCode: zero in a segment made ahead and never written
_CHUNK = 8 << 20
# what the next start reads of a commit log file it does not walk: the first records, for the rules
# that wrote the store (recovery/semantics.SAMPLE_BYTES) and the abnormal start's first store time
HEAD_BYTES = 16 << 10


def is_uri(path: str) -> bool:
    return bool(_SCHEME.match(path))


def child(uri: str, relative: str) -> str:
    """The URI of ``relative`` (a name, or names joined by /) under a directory's URI: each
    name percent-encoded (a retry topic's ``%RETRY%``, a space, a subject in Chinese would not
    parse), a query string (``?region=``) kept at the end."""
    import urllib.parse
    base, sep, query = uri.partition("?")
    return f"{base.rstrip('/')}/{urllib.parse.quote(relative, safe='/')}{sep}{query}"


def filesystem(uri: str):
    """(pyarrow filesystem, the path within it)."""
    import pyarrow.fs as pafs
    try:
        return pafs.FileSystem.from_uri(uri)
    except (pafs.ArrowInvalid if hasattr(pafs, "ArrowInvalid") else ValueError, OSError, ValueError) as exc:
        raise StoreAccessError(f"cannot open ({exc})", uri) from None


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    uri: str
    name: str
    size: int


def _listing(uri: str, recursive: bool = False):
    """(the directory's path in its filesystem, the entries a listing of it gives; an absent
    directory: none), a listing that fails said in one line naming the URI."""
    import pyarrow.fs as pafs
    fs, root = filesystem(uri)
    try:
        return root, fs.get_file_info(pafs.FileSelector(root, recursive=recursive, allow_not_found=True))
    except OSError as exc:
        raise StoreAccessError(f"cannot list ({exc})", uri) from None


def list_dir(uri: str) -> list[RemoteFile]:
    """The files directly in a directory behind a URI, by name (an absent directory: none)."""
    import pyarrow.fs as pafs
    _root, infos = _listing(uri)
    return sorted((RemoteFile(child(uri, i.base_name), i.base_name, i.size or 0)
                   for i in infos if i.type == pafs.FileType.File), key=lambda f: f.name)


def list_tree(uri: str) -> list[tuple[str, RemoteFile]]:
    """Every file under a directory behind a URI: (path relative to it, file)."""
    import pyarrow.fs as pafs
    root, infos = _listing(uri, recursive=True)
    out = []
    for i in infos:
        if i.type == pafs.FileType.File:
            relative = i.path[len(root.rstrip("/")) + 1:]
            out.append((relative, RemoteFile(child(uri, relative), i.base_name, i.size or 0)))
    return sorted(out, key=lambda x: x[0])


def require_store(uri: str):
    """(the family of the store behind a URI, the names of its root's directories): the family
    told from those names as store/family.detect_family tells a local store's (none: not a
    store, exit 4)."""
    import pyarrow.fs as pafs

    from rmqtool.store.family import family_of, marker_list
    fs, root = filesystem(uri)
    if fs.get_file_info(root).type != pafs.FileType.Directory:
        raise StoreNotFound("no such store directory", uri)
    dirs = {i.base_name for i in _listing(uri)[1] if i.type == pafs.FileType.Directory}
    family = family_of(dirs)
    if family is None:
        raise NotAStore(f"not a store: none of {marker_list()} inside", uri)
    return family, dirs


def read_at(f: RemoteFile, start: int, length: int) -> bytes:
    fs, path = filesystem(f.uri)
    try:
        with fs.open_input_file(path) as handle:
            return handle.read_at(max(0, min(length, f.size - start)), start)
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc})", f.uri, start) from None


def last_written(files: list[RemoteFile]) -> int:
    """store/commitlog_end.last_written for segments behind a URI."""
    for i in range(len(files) - 1, -1, -1):
        if files[i].size and read_at(files[i], 0, _HEADER) != bytes(_HEADER):
            return i
    return -1


def stage(f: RemoteFile, local: pathlib.Path, start: int = 0, end: int | None = None) -> int:
    """Copy bytes [start, end) of ``f`` into ``local`` at the same positions (a sparse file
    of ``f``'s size); returns where the staged bytes end."""
    end = f.size if end is None else min(end, f.size)
    local.parent.mkdir(parents=True, exist_ok=True)
    fs, path = filesystem(f.uri)
    new = not local.exists()  # all hole once truncated: a chunk of zeros need not be written
    try:
        with fs.open_input_file(path) as handle, open(local, "wb" if new else "r+b") as out:
            out.truncate(f.size)
            for lo, hi in _extents(fs, path, start, end):
                position = lo
                while position < hi:
                    data = handle.read_at(min(_CHUNK, hi - position), position)
                    if not data:
                        break
                    if not new or data.count(0) != len(data):  # a 1 GiB QMQ segment is mostly zeros
                        out.seek(position)
                        out.write(data)
                    position += len(data)
    except OSError as exc:
        raise StoreAccessError(f"cannot stage ({exc})", f.uri, start) from None
    return end


def _extents(fs, path: str, start: int, end: int):
    """The ranges of [start, end) that may hold data: a file:// URI's data extents (its holes,
    which read as zeros, need not be read: a QMQ segment is 1 GiB of mostly hole), else the
    whole range (a remote file system says nothing of holes)."""
    import pyarrow.fs as pafs
    if not isinstance(fs, pafs.LocalFileSystem):
        return [(start, end)]
    from rmqtool.store.extents import data_extents
    fd = os.open(path, os.O_RDONLY)
    try:
        return list(data_extents(fd, start, end, path))
    finally:
        os.close(fd)


def stage_head(f: RemoteFile, local: pathlib.Path, length: int = HEAD_BYTES) -> None:
    """A commit log file's first ``length`` bytes into ``local`` (a sparse file of ``f``'s
    size), and the record that runs past them whole: what the next start reads of a file it
    does not walk (its first records: the rules that wrote it, the abnormal start's time)."""
    from rmqtool.store.commitlog import header_hop
    stage(f, local, 0, length)
    _count, end = header_hop(str(local), f.size)  # the hop stops at the zeros past what is staged
    if length < end <= f.size:
        stage(f, local, length, end)


def stage_tree(uri: str, local: pathlib.Path) -> int:
    """Every file under a directory behind a URI into ``local``; the files staged."""
    count = 0
    for relative, f in list_tree(uri):
        stage(f, local / relative)
        count += 1
    return count


def local_name(local_root: str | os.PathLike, path: str, uri_root: str) -> str:
    """A staged path named as its URI (rows say where the data is, not the executor's copy)."""
    root = str(local_root).rstrip("/")
    if path == root:
        return uri_root
    if not path.startswith(root + "/"):
        return path
    return child(uri_root, path[len(root) + 1:])


def named_as_uris(value, local_root: str | os.PathLike, uri_root: str):
    """``value`` (a row: dicts, lists, text) with every staged path in it named as its URI, in
    free text too (a finding's message, its redispatch_command): rows never name a copy that
    is gone once the task ends. A path in text runs to a space, a quote or punctuation."""
    root = str(local_root).rstrip("/")
    if isinstance(value, dict):
        return {k: named_as_uris(v, root, uri_root) for k, v in value.items()}
    if isinstance(value, list):
        return [named_as_uris(v, root, uri_root) for v in value]
    if not isinstance(value, str) or root not in value:
        return value
    if value == root or value.startswith(root + "/") and not re.search(r"\s", value):
        return local_name(root, value, uri_root)
    return re.sub(re.escape(root) + r"(?:/[^\s'\",;:()]*[^\s'\",;:().])?",
                  lambda m: local_name(root, m.group(0), uri_root), value)
