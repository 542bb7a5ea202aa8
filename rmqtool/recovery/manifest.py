"""The backup a recovery leaves: every byte it changed or removed, and a manifest of them.

A backup directory holds ``manifest.json`` and one copy per action (``copies/NNNN.bin``).
The manifest is written and forced to disk before the store is first changed, so an
apply cut short can always be undone::

    {"format": "rmqtool-recovery-backup", "version": 2, "store": "/abs/store/root",
     "created": "2026-11-22T02:47:42.136+00:00", "plan": {...RecoveryPlan.to_json()},
     "entries": [{"action": "zero" | "delete" | "rewrite" | "restore" | "tail", "file": "commitlog/00000000000000262144"
                  (relative to the store), "start": 33066, "end": 33391 (the byte range the
                  action changes; a deleted file: 0 .. its size), "sha256": "blocks-sha256:<hex>"
                  (the original bytes' block digest, below), "copy": "copies/0000.bin", "mode": 420,
                  "mtime_ns": 1764297600000000000 (the file's mtime before the repair)}],
     "listing": ["checkpoint", "commitlog/...", "consumequeue/T/0/...", "index/...", ...],
     "directories": ["commitlog", "consumequeue", "consumequeue/T", ...],
     "commit_log_directories": ["/disk-a/commitlog", ...] (only when the commit log is kept
                  outside the store: storePathCommitLog with several disks),
     "after": {"listing": [...], "directories": [...], "files": {"commitlog/...": [size, "blocks-sha256:<hex>"], ...}},
     "listing_through_links": true (the listings went through symlinked directories,
                  store/tree.py; a backup without it is undone listing the store as it did),
     "left_alone": {"/abs/store/consumequeue/T/0/...": [size, written end], ...} (queue files
                  dispatch after the plan does not write, not copied: recovery/dispatch_reach.py)}

Besides the plan's own actions, entries with the action ``restore`` hold whole files that
re-dispatching after the plan appends to (the checkpoint, the abort marker, the last file of
each batch consume queue and ext dispatch reaches, the last index file), entries with the
action ``tail`` the zeros after the last unit of each consume queue file it reaches (where
it appends; undo zeroes what was written there); ``left_alone`` records the other queues'
last files, which undo checks; and ``listing`` names every file of the store
before the apply: undo puts the restore entries back whole and removes files made since
(new consume queue and index files), so the store is again what it was; ``directories``
names every directory before, so that undo removes only directories made since.

A commit log kept outside the root (several disks, ``store/commitlog_paths.py``): its files
are named by their absolute path on their disk, in the entries and in the listings, and
``commit_log_directories`` names those disks, so undo lists them and puts each file back
where it was (files are never moved between disks, as MultiPathMappedFileQueue never does).

``after`` is the state the repair left (written once its last change is on disk): the
listing, and the size and block digest of every file undo would write or remove. Undo refuses a
store that differs from it (something was written since: undoing would destroy it) unless
forced.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import pathlib

from rmqtool.errors import CorruptData, FormatError, NotAStore, StoreAccessError, StoreNotFound
from rmqtool.store.extents import data_extents
from rmqtool.store.lock import held_descriptor
from rmqtool.store.tree import files_and_directories

MANIFEST_NAME = "manifest.json"
COPIES_DIR = "copies"
FORMAT_NAME = "rmqtool-recovery-backup"
# 2: "tail" entries (a rmqtool that reads only 1 would restore one as a whole file); 3: entries'
# "mtime_ns" (one that reads only 2 would refuse the field in one line, not by its version)
FORMAT_VERSION = 3
READ_VERSIONS = (1, 2, 3)
COPY_CHUNK = 1 << 22
REWRITE = "rewrite"  # a range written over (a record --keep-past-damage replaced): put back as a zeroed one
RESTORE = "restore"  # a whole file re-dispatching changes after the plan: put back whole
# the zeros after a consume queue file's last unit, where re-dispatching appends: put back as a range
TAIL = "tail"


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    action: str  # plan.ZERO or plan.DELETE
    file: str  # relative to the store root (absolute: a commit log file on another disk)
    start: int
    end: int
    sha256: str
    copy: str  # relative to the backup directory
    mode: int  # the file's permission bits
    # the file's mtime before the repair (None: an older backup). Undo puts it back: the broker
    # deletes a commit log file by its mtime (deleteExpiredFileByTime), so a file given back
    # with a new one would be kept past its time
    mtime_ns: int | None = None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class Manifest:
    store: str
    created: str
    plan: dict
    entries: tuple[Entry, ...]
    listing: tuple[str, ...] | None = None  # every file of the store before (None: an older backup)
    directories: tuple[str, ...] | None = None  # every directory of the store before (None: an older backup)
    after: dict | None = None  # the state the repair left (None: not finished, or an older backup)
    commit_log_directories: tuple[str, ...] | None = None  # the commit log's disks outside the root (None: none)
    # the listings were taken through symlinked directories (False: a backup from before they
    # were; its undo lists the store as it did then, or files it never listed would go as made since)
    through_links: bool = True
    # queue files dispatch after the plan does not write, not copied: {absolute path: [size, written end]}
    # as they were (recovery/dispatch_reach.py); None: every queue's last file is copied
    left_alone: dict | None = None
    # the command that made the repair: what makes it again once it is undone (None: an older backup)
    command: str | None = None

    def to_json(self) -> dict:
        doc = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "store": self.store, "created": self.created,
               "plan": self.plan, "entries": [e.to_json() for e in self.entries]}
        if self.listing is not None:
            doc["listing"] = list(self.listing)
        if self.directories is not None:
            doc["directories"] = list(self.directories)
        if self.commit_log_directories is not None:
            doc["commit_log_directories"] = list(self.commit_log_directories)
        if self.after is not None:
            doc["after"] = self.after
        if self.command is not None:
            doc["command"] = self.command
        if self.through_links:
            doc["listing_through_links"] = True
        if self.left_alone is not None:
            doc["left_alone"] = self.left_alone
        return doc


# rmqtool's own names in a store root: never part of what a repair or undo compares
_OWN = (".rmqtool-unfinished",)


def store_listing(root: pathlib.Path, outside: tuple[str, ...] | None = None,
                  through_links: bool = True) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Every file and every directory of the store (relative names, sorted), without the
    unfinished-repair marker, through symlinked directories as the broker lists them (not
    ``through_links``: as a backup from before that listed); with ``outside`` (the commit log's
    disks outside the root) their files too, by absolute path (the disks themselves are not the
    repair's to make or remove)."""
    files, dirs = files_and_directories(root, through_links)
    files = [n for n in files if not n.startswith(_OWN)]
    dirs = [n for n in dirs if not n.startswith(_OWN)]
    for directory in outside or ():
        d = pathlib.Path(directory)
        if d.is_dir():
            files += [str(p) for p in d.iterdir() if p.is_file()]
    return tuple(sorted(files)), tuple(sorted(dirs))


def outside_directories(root: pathlib.Path, directories) -> tuple[str, ...] | None:
    """Of the commit log's ``directories``, those outside ``root``, resolved (None: none, the
    plain store, whose manifest stays as it always was)."""
    top = root.resolve()
    out = [str(pathlib.Path(d).resolve()) for d in directories or ()]
    out = [d for d in dict.fromkeys(out) if not pathlib.Path(d).is_relative_to(top)]
    return tuple(out) or None


def entry_name(path: pathlib.Path, root: pathlib.Path) -> str:
    """A file's name in a manifest: relative to the root, or its absolute path on another disk."""
    real, top = path.resolve(), root.resolve()
    return str(real.relative_to(top)) if real.is_relative_to(top) else str(real)


def _covered(manifest: Manifest, files: tuple[str, ...]) -> list[str]:
    """The files undo writes or removes: every entry's file, and every file made since."""
    before = set(manifest.listing or ())
    names = {e.file for e in manifest.entries} | {f for f in files if f not in before}
    return sorted(n for n in names if n != LOCK_NAME)


LOCK_NAME = "lock"


def record_after(backup_dir: pathlib.Path, root: pathlib.Path) -> Manifest:
    """Write into the manifest the state the repair left (its last change is on disk)."""
    manifest = read_manifest(backup_dir)
    files, dirs = store_listing(root, manifest.commit_log_directories, manifest.through_links)
    state = {}
    for name in _covered(manifest, files):
        path = root / name
        if path.is_file():
            state[name] = [path.stat().st_size, content_digest(path)]
    after = {"listing": [f for f in files if f != LOCK_NAME], "directories": list(dirs), "files": state}
    manifest = dataclasses.replace(manifest, after=after)
    write_manifest(backup_dir, manifest)
    return manifest


def first_change_since(manifest: Manifest, root: pathlib.Path) -> str | None:
    """What differs from the state the repair left, the first of it in one phrase; None when
    nothing does (or the manifest holds no such state)."""
    after = manifest.after
    if after is None:
        return None
    files, dirs = store_listing(root, manifest.commit_log_directories, manifest.through_links)
    now, then = set(files) - {LOCK_NAME}, set(after["listing"])
    for name in sorted(now ^ then):
        return f"{name} was {'made' if name in now else 'removed'} since"
    for name, (size, digest) in sorted(after["files"].items()):
        path = root / name
        st = path.stat()
        if st.st_size != size:
            return f"{name} is {st.st_size} bytes, the repair left {size}"
        if not digest_matches(path, digest):
            return f"{name} was written since (its sha256 differs)"
    for name in sorted(set(dirs) ^ set(after["directories"])):
        return f"the directory {name} was {'made' if name in dirs else 'removed'} since"
    return None


# A digest of a byte range that costs nothing over holes: sha256 over the range's length, then
# each DIGEST_BLOCK-sized block (counted from the range's start) that holds a non-zero byte,
# with its position. Equal bytes give equal digests whether their zeros are holes or not, and
# a 1 GiB segment that is mostly hole (QMQ maps segments at full size) is read in milliseconds.
DIGEST_PREFIX = "blocks-sha256:"
DIGEST_BLOCK = 1 << 20


def nonzero_blocks(fd: int, start: int, end: int, path: pathlib.Path):
    """(position, bytes) of each block of [start, end) holding a non-zero byte, in order."""
    done = start  # blocks before this are read
    for lo, hi in data_extents(fd, start, end, path):
        block = max(done, lo - (lo - start) % DIGEST_BLOCK)
        while block < hi:
            n = min(DIGEST_BLOCK, end - block)
            chunk = os.pread(fd, n, block)
            if len(chunk) < n:
                raise StoreAccessError(f"the file ends at {block + len(chunk)}, before {end}", path, block)
            if chunk.count(0) != n:
                yield block, chunk
            block += n
        done = max(done, block)


SPARSE_PAGE = 4096  # the unit a copy leaves as a hole when it is all zeros


def pwrite_nonzero(fd: int, chunk: bytes, position: int) -> None:
    """``chunk`` written at ``position``, but for its all-zero pages: a copy of a mostly-zero
    file (a rebuilt queue, a QMQ segment) stays sparse, where a whole copy takes its full size
    on the disk. The caller's file holds zeros there already (new, truncated, or zeroed)."""
    for at in range(0, len(chunk), SPARSE_PAGE):
        page = chunk[at:at + SPARSE_PAGE]
        if page.count(0) != len(page):
            os.pwrite(fd, page, position + at)


def copy_into(source: pathlib.Path, fd: int, position: int) -> None:
    """``source``'s bytes into ``fd`` at ``position``, its zeros skipped (the target holds zeros
    there: a zeroed range, or a new or truncated file extended over them), so that a sparse
    file stays sparse and its holes are not read."""
    with open(source, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        for at, chunk in nonzero_blocks(f.fileno(), 0, size, source):
            pwrite_nonzero(fd, chunk, position + at)
    if os.fstat(fd).st_size < position + size:
        os.ftruncate(fd, position + size)


def restore_range(source: pathlib.Path, fd: int, position: int, path: pathlib.Path) -> None:
    """``source``'s bytes over ``fd`` (open for reading and writing) at ``position``, exactly:
    the non-zero pages the target holds there zeroed first (what was written since: a record
    --keep-past-damage put over a torn one's zero pages, messages appended after the repair),
    then :func:`copy_into`, so that holes stay holes."""
    end = min(position + os.path.getsize(source), os.fstat(fd).st_size)
    for at, chunk in nonzero_blocks(fd, position, end, path):
        for p in range(0, len(chunk), SPARSE_PAGE):
            page = chunk[p:p + SPARSE_PAGE]
            if page.count(0) != len(page):
                os.pwrite(fd, bytes(len(page)), at + p)
    copy_into(source, fd, position)


def copy_sparse(source, target) -> None:
    """``source``'s bytes as the file ``target`` (made or truncated), forced, its zeros left as
    holes, its times and mode as ``source``'s (a ``copy_function`` for shutil.copytree): a store's
    files are mostly zeros (a 1 GiB segment made ahead, a QMQ segment, an index file), and a
    whole copy takes their full size on the disk."""
    with open(target, "wb") as out:
        copy_into(pathlib.Path(source), out.fileno(), 0)
        os.fsync(out.fileno())
    shutil.copystat(source, target)


def _digest_update(digest, position: int, chunk: bytes) -> None:
    digest.update(position.to_bytes(8, "big"))
    digest.update(chunk)


def content_digest(path: pathlib.Path, start: int = 0, end: int | None = None) -> str:
    """The block digest (DIGEST_PREFIX) of bytes [start, end) of a file (end: its size); the
    lock file this process holds is read through the descriptor holding it (closing another
    would drop the lock)."""
    held = held_descriptor(path)
    try:
        fd = os.open(path, os.O_RDONLY) if held is None else held
    except FileNotFoundError:
        raise StoreNotFound("a backup copy is missing", path) from None
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", path) from None
    try:
        end = os.fstat(fd).st_size if end is None else end
        digest = hashlib.sha256((end - start).to_bytes(8, "big"))
        for position, chunk in nonzero_blocks(fd, start, end, path):
            _digest_update(digest, position - start, chunk)
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", path) from None
    finally:
        if held is None:
            os.close(fd)
    return DIGEST_PREFIX + digest.hexdigest()


def digest_matches(path: pathlib.Path, recorded: str) -> bool:
    """Whether a whole file has the digest a manifest recorded (a block digest, or the plain
    sha256 that backups written before held)."""
    if recorded.startswith(DIGEST_PREFIX):
        return content_digest(path) == recorded
    return file_sha256(path) == recorded


def copy_range(path: pathlib.Path, start: int, end: int, copy: pathlib.Path, fd: int | None = None) -> str:
    """Copy bytes [start, end) of ``path`` into a new file ``copy`` (its zeros left as holes),
    forced to disk; their block digest. ``fd``: a descriptor of ``path`` to read through, left
    open (the lock file this process holds: closing any descriptor of it drops the lock)."""
    digest = hashlib.sha256((end - start).to_bytes(8, "big"))
    try:
        src = os.open(path, os.O_RDONLY) if fd is None else fd
    except OSError as exc:
        raise StoreAccessError(f"cannot open to back up ({exc.strerror})", path) from None
    try:
        if os.fstat(src).st_size < end:
            raise StoreAccessError(f"the file ends at {os.fstat(src).st_size}, before {end}", path)
        with open(copy, "xb") as out:
            for position, chunk in nonzero_blocks(src, start, end, path):
                _digest_update(digest, position - start, chunk)
                pwrite_nonzero(out.fileno(), chunk, position - start)
            out.truncate(end - start)
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        raise StoreAccessError(f"cannot back up ({exc.strerror})", copy) from None
    finally:
        if fd is None:
            os.close(src)
    return DIGEST_PREFIX + digest.hexdigest()


def file_sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(COPY_CHUNK):
                digest.update(chunk)
    except FileNotFoundError:
        raise StoreNotFound("a backup copy is missing", path) from None
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", path) from None
    return digest.hexdigest()


def write_manifest(backup_dir: pathlib.Path, manifest: Manifest) -> pathlib.Path:
    """Write the manifest (a temporary name, forced, then renamed and the directory forced)."""
    final = backup_dir / MANIFEST_NAME
    tmp = backup_dir / (MANIFEST_NAME + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(manifest.to_json(), f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        sync_dir(backup_dir)
    except OSError as exc:
        try:
            os.unlink(tmp)  # on a full disk it holds the room an undo or a finish needs
        except OSError:
            pass
        raise StoreAccessError(f"cannot write the manifest ({exc.strerror})", final) from None
    return final


def read_manifest(backup_dir: pathlib.Path) -> Manifest:
    path = backup_dir / MANIFEST_NAME
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        # a missing path is exit 8; one that is there but not a backup (a file, an empty or
        # other directory) is exit 4, as in every command
        if not backup_dir.exists():
            raise StoreNotFound("no such file or directory", backup_dir) from None
        raise NotAStore("not a recovery backup (no manifest.json)", backup_dir) from None
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", path) from None
    except ValueError as exc:
        raise CorruptData(f"the manifest is not JSON ({exc})", path) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME or doc.get("version") not in READ_VERSIONS:
        raise FormatError(f"not a {FORMAT_NAME} manifest of version {' or '.join(map(str, READ_VERSIONS))}", path)
    try:
        entries = tuple(Entry(**e) for e in doc["entries"])
        for e in entries:  # checked before undo writes a byte: a wrong type stops it half way
            if not (all(type(v) is int for v in (e.start, e.end, e.mode)) and type(e.mtime_ns) in (int, type(None))
                    and all(type(v) is str for v in (e.action, e.file, e.sha256, e.copy)) and 0 <= e.start <= e.end):
                raise TypeError(f"entry {e.file!r}: a field of the wrong type or range")
        listing, dirs = doc.get("listing"), doc.get("directories")
        outside = doc.get("commit_log_directories")
        return Manifest(doc["store"], doc["created"], doc["plan"], entries,
                        tuple(listing) if listing is not None else None, tuple(dirs) if dirs is not None else None,
                        doc.get("after"), tuple(outside) if outside is not None else None,
                        doc.get("listing_through_links") is True, doc.get("left_alone"), doc.get("command"))
    except (KeyError, TypeError) as exc:
        raise FormatError(f"a manifest field is missing or wrong ({exc})", path) from None


def remove_forced(path: pathlib.Path, what: str = "delete") -> None:
    """Remove a file (gone already: a re-run's), its directory's entry forced to disk; what the
    OS refuses is one line naming it."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreAccessError(f"cannot {what} ({exc.strerror})", path) from None
    sync_dir(path.parent)


def sync_dir(directory: pathlib.Path) -> None:
    """Force a directory's entries (a file made, renamed or deleted) to disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
