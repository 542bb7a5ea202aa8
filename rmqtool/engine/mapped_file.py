"""The write side of mapped files: MappedFile, MappedFileQueue and AllocateMappedFileService.

A segment is created at its full size (sparse, as FileChannel.map extends it) and mapped
read-write; appends copy into the map and move the wrote position, flushes msync what was
written since the last flush. The file's blocks are allocated ahead of the writes, as far
again as the file holds and a MiB at most (:func:`allocated_to`): a write through a map into
a hole the file system has no room for kills the process (SIGBUS), where the allocation says
ENOSPC. The commit log asks for its next segment ahead of time, and a background thread
creates it, as the broker's AllocateMappedFileService does; segments made ahead and never
used are deleted on a clean close, as the broker's shutdown does.

Only segments still being written or not yet flushed stay mapped, so memory does not grow
with the store; older data is read with pread.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
import pathlib
import threading

from rmqtool.errors import StoreAccessError
from rmqtool.store.segments import discover
from rmqtool.store.paths import segment_name

OS_PAGE_SIZE = 1024 * 4  # MappedFile.OS_PAGE_SIZE: the unit of flushLeastPages
# blocks allocated past a write at most (a syscall each: 10 ms a GiB on ext4); a file's first
# allocations double as it grows, so a store of many small queues is not a MiB each
ALLOCATE_AHEAD = 1 << 20


def _os_error(exc: OSError, what: str, path, offset: int | None = None) -> StoreAccessError:
    return StoreAccessError(f"{what} failed ({exc.strerror})", path, offset)


def allocate(fd: int, path, start: int, end: int) -> None:
    """The file's blocks under ``[start, end)`` allocated (their bytes kept; holes read as zeros
    still), so that a full file system is an error here and not a SIGBUS at a write through the
    map. A file system that cannot allocate ahead (EOPNOTSUPP, where glibc does not emulate it)
    is written as before."""
    if end <= start:
        return
    try:
        os.posix_fallocate(fd, start, end - start)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            return
        raise StoreAccessError(f"no room to write ({exc.strerror})", path, start) from None


def allocated_to(fd: int, path, backed: int, end: int, size: int) -> int:
    """:func:`allocate` from ``backed`` past ``end``, within ``size``: to twice ``end`` (at most
    ALLOCATE_AHEAD past it), in whole pages; the new end of what is allocated. What is allocated
    and not yet written stays within the written bytes and a page (8,000 queues of a few units
    took 8 GB at a MiB each, and every reader read their MiB of zeros)."""
    upto = min(size, _pages(max(end, min(2 * end, end + ALLOCATE_AHEAD))))
    allocate(fd, path, backed, upto)
    return upto


def _pages(n: int) -> int:
    return -(-n // OS_PAGE_SIZE) * OS_PAGE_SIZE


def create_segment_file(path: pathlib.Path, size: int) -> None:
    """A new all-zero file of ``size`` bytes (sparse), appearing under its name only once it
    has its full size, so a process killed meanwhile leaves no short segment behind. An
    existing file of that size (one made ahead by the allocator) is taken as it is."""
    path = pathlib.Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise _os_error(exc, "stat", path) from None
    if st is None:
        try:
            if not _create_anonymous_then_link(path, size):
                _create_named_then_link(path, size)
        except FileExistsError:
            pass  # made meanwhile by another thread of ours: checked below
        except OSError as exc:
            raise _os_error(exc, "create", path) from None
        st = os.stat(path)
    if st.st_size != size:
        raise StoreAccessError(f"a file of {st.st_size} bytes is in the way of a new {size}-byte segment", path)


def _create_anonymous_then_link(path: pathlib.Path, size: int) -> bool:
    """O_TMPFILE + linkat: nothing under any name until it is whole. False if unsupported."""
    try:
        fd = os.open(path.parent, os.O_TMPFILE | os.O_RDWR, 0o644)
    except (AttributeError, OSError):
        return False
    try:
        os.ftruncate(fd, size)
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:  # giving dst_dir_fd makes Python call linkat(AT_SYMLINK_FOLLOW)
            os.link(f"/proc/self/fd/{fd}", path.name, dst_dir_fd=dir_fd, follow_symlinks=True)
        finally:
            os.close(dir_fd)
        return True
    except FileExistsError:
        raise
    except OSError:
        return False  # no /proc, or a file system that will not link it: the other way
    finally:
        os.close(fd)


def _create_named_then_link(path: pathlib.Path, size: int) -> None:
    tmp = path.with_name(f".{path.name}.creating")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        os.link(tmp, path)
    finally:
        os.close(fd)
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


class WritableMappedFile:
    """One segment mapped read-write (MappedFile)."""

    __slots__ = ("path", "file_from_offset", "file_size", "fd", "mm", "wrote_position", "flushed_position",
                 "store_timestamp", "first_create_in_queue", "backed", "_closed", "_address", "_warm_lock")

    def __init__(self, path: pathlib.Path, file_from_offset: int, file_size: int, wrote_position: int = 0,
                 *, first_create_in_queue: bool = False):
        self.path = pathlib.Path(path)
        self.file_from_offset = file_from_offset
        self.file_size = file_size
        try:
            self.fd = os.open(self.path, os.O_RDWR)
        except OSError as exc:
            raise _os_error(exc, "open for writing", self.path) from None
        try:
            size = os.fstat(self.fd).st_size
            if size != file_size:
                raise StoreAccessError(f"segment is {size} bytes, the store's size is {file_size}", self.path)
            self.mm = mmap.mmap(self.fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as exc:
            os.close(self.fd)
            raise _os_error(exc, "map", self.path) from None
        except BaseException:
            os.close(self.fd)
            raise
        self.wrote_position = wrote_position
        self.flushed_position = wrote_position  # what was there at load time is on disk already
        self.store_timestamp = 0  # store time of the last message appended (MappedFile.storeTimestamp)
        self.first_create_in_queue = first_create_in_queue
        self.backed = wrote_position - wrote_position % OS_PAGE_SIZE  # allocated up to here (written before)
        self._closed = False
        self._address = None  # of the map, for madvise from another thread (WarmAheadService)
        self._warm_lock = threading.Lock()  # close waits for a madvise in progress

    @property
    def name(self) -> str:
        return self.path.name

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def back(self, end: int) -> None:
        """The file's blocks allocated up to ``end`` at least, before the map writes there."""
        if end > self.backed:
            self.backed = allocated_to(self.fd, self.path, self.backed, end, self.file_size)

    def append(self, data) -> bool:
        """MappedFile.appendMessage(byte[]): all of it, or nothing when it does not fit."""
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            return False
        if end > self.backed:
            self.back(end)
        self.mm[pos:end] = data
        self.wrote_position = end
        return True

    def able_to_flush(self, least_pages: int) -> bool:
        flush = self.flushed_position
        write = self.wrote_position
        if self.is_full():
            return write > flush
        if least_pages > 0:
            return (write // OS_PAGE_SIZE) - (flush // OS_PAGE_SIZE) >= least_pages
        return write > flush

    def flush(self, least_pages: int = 0) -> int:
        """msync what was written since the last flush, if there is enough of it."""
        if self.able_to_flush(least_pages) and not self._closed:
            value = self.wrote_position
            try:
                # fdatasync writes back the pages dirtied through the map as msync does, and
                # unlike mmap.flush it lets other threads run meanwhile
                os.fdatasync(self.fd)
            except OSError as exc:
                raise _os_error(exc, "fdatasync", self.path, self.flushed_position) from None
            self.flushed_position = value
        return self.flushed_position

    def read(self, position: int, length: int) -> bytes:
        return self.mm[position:position + length]

    @property
    def closed(self) -> bool:
        return self._closed

    def populate(self, madvise, position: int, length: int, advice: int) -> bool:
        """MADV_POPULATE_READ or _WRITE over ``[position, position + length)`` of the map; False
        when the map is closed or the kernel refused."""
        with self._warm_lock:
            if self._closed:
                return False
            if self._address is None:
                self._address = _address(self.mm)
            return madvise(self._address + position, length, advice) == 0

    def close(self) -> None:
        if not self._closed:
            with self._warm_lock:
                self._closed = True
                self.mm.close()
                os.close(self.fd)

    def destroy(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class AllocateMappedFileService:
    """Creates segment files ahead of need in a background thread."""

    def __init__(self):
        self._cond = threading.Condition()
        self._pending: list[tuple[pathlib.Path, int]] = []
        self._busy: set[pathlib.Path] = set()
        self._ready: set[pathlib.Path] = set()
        self._errors: dict[pathlib.Path, BaseException] = {}
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="AllocateMappedFileService", daemon=True)
        self._thread.start()

    def request(self, path: pathlib.Path, size: int) -> None:
        """Ask for ``path`` to be made in the background (nothing if already asked)."""
        with self._cond:
            if self._stopped or path in self._busy or path in self._ready or any(p == path for p, _ in self._pending):
                return
            self._pending.append((path, size))
            self._cond.notify_all()

    def take(self, path: pathlib.Path, size: int) -> None:
        """Make sure ``path`` exists: wait for the background copy, or make it now."""
        with self._cond:
            self._pending = [(p, s) for p, s in self._pending if p != path]
            while path in self._busy:
                self._cond.wait()
            error = self._errors.pop(path, None)
            self._ready.discard(path)
        if error is not None or not path.exists():
            create_segment_file(path, size)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                path, size = self._pending.pop(0)
                self._busy.add(path)
            try:
                if not path.exists():
                    create_segment_file(path, size)
                ok = True
            except BaseException as exc:  # reported to whoever takes it
                ok = False
                with self._cond:
                    self._errors[path] = exc
            with self._cond:
                self._busy.discard(path)
                if ok:
                    self._ready.add(path)
                self._cond.notify_all()

    def shutdown(self) -> None:
        """Stop, and delete the files made ahead that nobody took (still all zero)."""
        with self._cond:
            self._stopped = True
            self._pending.clear()
            self._cond.notify_all()
        self._thread.join()
        for path in list(self._ready):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self._ready.clear()


class WritableFileQueue:
    """A directory of segments being appended to (MappedFileQueue's write side).

    ``segments`` lists every file as (first offset, path); only the ones not fully flushed
    are mapped. With an allocator, the segment after the current one is made ahead.
    """

    def __init__(self, directory: str | os.PathLike, mapped_file_size: int,
                 allocator: AllocateMappedFileService | None = None, place=None):
        self.directory = pathlib.Path(directory)
        # a commit log over several disks (MultiPathMappedFileQueue): ``place(offset)`` is the
        # directory tryCreateMappedFile puts the file starting there in; None: ``directory``
        self.place = place
        self.mapped_file_size = mapped_file_size
        self.allocator = allocator
        self.segments: list[tuple[int, pathlib.Path]] = []
        self.mapped: dict[int, WritableMappedFile] = {}  # first offset -> open segment
        self.last: WritableMappedFile | None = None
        self.flushed_where = 0
        self.store_timestamp = 0  # MappedFileQueue.storeTimestamp: of the last thorough flush
        self._lock = threading.RLock()
        self._read_fd: tuple[int, int] | None = None  # (first offset, fd) for pread of closed segments

    # --- loading --------------------------------------------------------------------------
    def load(self, last_wrote_position: int | None = None, listing=None) -> None:
        """List the segments on disk (``listing``: as listed already, every directory's) and map
        the last one at ``last_wrote_position``."""
        queue = listing or discover(self.directory, required=False, mapped_file_size=self.mapped_file_size)
        self.segments = [(s.base_offset, s.path) for s in queue.segments]
        if self.segments:
            base, path = self.segments[-1]
            wrote = self.mapped_file_size if last_wrote_position is None else last_wrote_position
            self.last = WritableMappedFile(path, base, self.mapped_file_size, wrote)
            self.mapped[base] = self.last
            self.flushed_where = base + wrote

    @property
    def min_offset(self) -> int:
        return self.segments[0][0] if self.segments else 0

    @property
    def max_offset(self) -> int:
        """getMaxOffset: the end of what has been written."""
        last = self.last
        return last.file_from_offset + last.wrote_position if last else 0

    # --- writing --------------------------------------------------------------------------
    def last_mapped_file(self, start_offset: int = 0, create: bool = True) -> WritableMappedFile | None:
        """getLastMappedFile(startOffset, needCreate): the current segment, or a new one when
        there is none (at startOffset rounded down) or the current one is full."""
        last = self.last
        if last is not None and not last.is_full():
            return last
        if not create:
            return last
        if last is None:
            create_offset = start_offset - start_offset % self.mapped_file_size
        else:
            create_offset = last.file_from_offset + self.mapped_file_size
        return self._create(create_offset, first=last is None)

    def _directory_of(self, offset: int) -> pathlib.Path:
        return self.directory if self.place is None else pathlib.Path(self.place(offset))

    def _create(self, offset: int, first: bool) -> WritableMappedFile:
        directory = self._directory_of(offset)
        path = directory / segment_name(offset)
        size = self.mapped_file_size
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _os_error(exc, "mkdir", directory) from None
        if self.allocator is not None:
            self.allocator.take(path, size)
            self.allocator.request(self._directory_of(offset + size) / segment_name(offset + size), size)
        else:
            create_segment_file(path, size)
        mf = WritableMappedFile(path, offset, size, 0, first_create_in_queue=first)
        with self._lock:
            self.segments.append((offset, path))
            self.mapped[offset] = mf
            self.last = mf
        return mf

    # --- flushing -------------------------------------------------------------------------
    def flush(self, least_pages: int = 0) -> bool:
        """MappedFileQueue.flush: flush the segment holding flushedWhere; True when nothing
        was left to flush. Segments flushed to their end are unmapped."""
        with self._lock:
            mf = self._mapped_at(self.flushed_where)
            if mf is None:
                return True
            stamp = mf.store_timestamp
            where = mf.file_from_offset + mf.flush(least_pages)
            result = where == self.flushed_where
            self.flushed_where = where
            if least_pages == 0:
                self.store_timestamp = stamp
            if mf.flushed_position >= mf.file_size and mf is not self.last:
                # done with it: nothing more will be written or flushed there
                mf.close()
                self.mapped.pop(mf.file_from_offset, None)
            return result

    def flush_all(self) -> None:
        """Flush until flushedWhere reaches the end of what was written."""
        for _ in range(len(self.mapped) + 2):
            self.flush(0)
            if self.flushed_where >= self.max_offset:
                return

    def _mapped_at(self, offset: int) -> WritableMappedFile | None:
        if not self.mapped:
            return None
        base = offset - offset % self.mapped_file_size
        mf = self.mapped.get(base)
        if mf is None:
            # flushedWhere sits on a segment end: the next one, or the first still mapped
            later = [b for b in self.mapped if b >= base]
            mf = self.mapped[min(later)] if later else None
        return mf

    # --- reading back ---------------------------------------------------------------------
    def segment_of(self, offset: int) -> tuple[int, pathlib.Path] | None:
        base = offset - offset % self.mapped_file_size
        for b, path in reversed(self.segments):
            if b == base:
                return b, path
            if b < base:
                break
        return None

    def read(self, offset: int, length: int) -> bytes:
        """Up to ``length`` written bytes from ``offset``, not past its segment's written end."""
        seg = self.segment_of(offset)
        if seg is None:
            return b""
        base, path = seg
        pos = offset - base
        with self._lock:
            mf = self.mapped.get(base)
            if mf is not None:
                end = min(pos + length, mf.wrote_position)
                return mf.mm[pos:end] if end > pos else b""
        if self._read_fd is None or self._read_fd[0] != base:
            self._close_read_fd()
            try:
                self._read_fd = (base, os.open(path, os.O_RDONLY))
            except OSError as exc:
                raise _os_error(exc, "open", path) from None
        try:
            return os.pread(self._read_fd[1], min(length, self.mapped_file_size - pos), pos)
        except OSError as exc:
            raise _os_error(exc, "read", path, pos) from None

    def _close_read_fd(self) -> None:
        if self._read_fd is not None:
            os.close(self._read_fd[1])
            self._read_fd = None

    def close(self) -> None:
        with self._lock:
            for mf in self.mapped.values():
                mf.close()
            self.mapped.clear()
            self.last = None
            self._close_read_fd()


# --- warming the pages ahead of the writer --------------------------------------------------

MADV_POPULATE_READ = 22  # Linux 5.14+: fault pages in (page cache + page tables) without dirtying them
MADV_POPULATE_WRITE = 23  # the same, writable: the file system's page_mkwrite done here, the page dirty
WARM_AHEAD = 4 << 20  # bytes kept faulted in ahead of the write position
WARM_CHUNK = 1 << 20


def _libc_madvise():
    """libc's madvise through ctypes, which lets other threads run during the call (mmap.madvise
    holds the GIL); None where there is none."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


def _address(mm: mmap.mmap) -> int:
    """Where the map starts (the ctypes view is dropped at once, so the map can still close)."""
    view = ctypes.c_char.from_buffer(mm)
    try:
        return ctypes.addressof(view)
    finally:
        del view


class WarmAheadService:
    """Faults in the next few MB of the segment being written, in a thread of its own.

    A first write to a page of a new, sparse segment costs a page fault in the writing thread
    (page allocation, zeroing, the file system's block reservation): about a third of an
    append's time. The broker can warm a whole new segment (warmMapedFileEnable, by writing
    zeros to it); here a window just ahead of the writer is faulted in. With ``dirty_ahead``
    (async flush) by MADV_POPULATE_WRITE, as the broker's warming writes its zeros: the
    file system's page_mkwrite (block reservation) is done here, and the window's zeros may
    reach the disk at a flush before the writer's bytes replace them, as the broker's do.
    Without it (sync flush, where every group commit's fdatasync would write those zeros
    again) by MADV_POPULATE_READ, which reads the holes in as zeros and dirties nothing: the
    writer then still takes the write-enable fault. Where the kernel does not support it, the
    service stops and appends fault as before.
    """

    def __init__(self, queue: "WritableFileQueue", ahead: int = WARM_AHEAD, dirty_ahead: bool = False):
        self.queue = queue
        self.ahead = ahead
        self.advice = MADV_POPULATE_WRITE if dirty_ahead else MADV_POPULATE_READ
        self.warmed_to = 0  # commit log offset up to which pages are faulted in
        self._madvise = _libc_madvise()
        self._cond = threading.Condition()
        self._stopped = self._madvise is None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if not self._stopped:
            self._thread = threading.Thread(target=self._run, name="WarmAheadService", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        pause = 0.01
        while True:
            with self._cond:
                if not self._stopped:
                    self._cond.wait(pause)
                if self._stopped:
                    return
            try:
                busy = self._warm()
            except Exception:  # only a speed-up: never a reason to fail an append
                self._stopped = True
                return
            pause = 0.002 if busy else 0.01  # a writer at 250 MB/s uses 0.5 MB in 2 ms

    def _warm(self) -> bool:
        """Fault in what is missing of the window; True when there was something to do."""
        mf = self.queue.last
        if mf is None:
            return False
        base = mf.file_from_offset
        start = max(self.warmed_to, base + mf.wrote_position)
        end = min(base + mf.wrote_position + self.ahead, base + mf.file_size)
        start -= start % OS_PAGE_SIZE
        if end < base + mf.file_size:
            end -= end % OS_PAGE_SIZE
        busy = start < end
        while start < end and not self._stopped:
            n = min(WARM_CHUNK, end - start)
            if not mf.populate(self._madvise, start - base, n, self.advice):
                if not mf.closed:
                    self._stopped = True  # not supported here
                return False
            start += n
            self.warmed_to = start
        if end >= base + mf.file_size:
            self.warmed_to = base + mf.file_size  # the next segment is warmed once it is the last
        return busy

    def written_to(self, offset: int) -> None:
        """The writer wrote up to commit log ``offset`` with pwrite (no page fault to spare it)
        and goes on that way: the window ahead of it is left alone."""
        if offset + self.ahead > self.warmed_to:
            self.warmed_to = offset + self.ahead

    def shutdown(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
