"""Rebuilding consume queues and index files from the commit log, through the engine's own
dispatch path (ReputMessageService -> CommitLogDispatcher), into a staging directory.

What it builds equals what the broker builds from the same commit log: consume queue files
byte for byte (ConsumeQueueWriter: fill units before a queue's first offset in its first
file, units only for normal and commit records), index files with the same entries in the
same chains (their names are creation times). The store itself is only read here; the
caller compares the staging directory with the store (:func:`compare`) and swaps files in
with a backup (:func:`rmqtool.recovery.apply.apply_file_changes`).

``from_offset``: the queues keep their units before it (truncateDirtyLogicFiles) and get
the rest again; index files are kept and get entries from the later of ``from_offset`` and
where they end (IndexService's own rule). Without it everything selected is built anew.
"""
from __future__ import annotations

import dataclasses
import pathlib
import shutil

import numpy as np

from rmqtool.dispatch.dispatcher import CommitLogDispatcher, ReputMessageService
from rmqtool.dispatch.multi_dispatch import shown_by
from rmqtool.dispatch.rules import DelayLevels
from rmqtool.engine.cq_writer import BatchConsumeQueueTable, ConsumeQueueTable
from rmqtool.engine.cqext_rebuild import rebuild_exts, refuse_from_offset
from rmqtool.store.cqext import ext_writing
from rmqtool.engine.index_writer import IndexServiceWriter, index_file_name_after, index_name_time
from rmqtool.engine.store_sizes import GivenSizes, StoreSizes, store_sizes
from rmqtool.errors import NotAStore, RmqError, UsageError
from rmqtool.recovery.manifest import copy_sparse
from rmqtool.formats import properties as props
from rmqtool.formats.consumequeue import BATCH_CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE
from rmqtool.recovery.commitlog_walk import V5
from rmqtool.recovery.semantics import detect_semantics
from rmqtool.store.dledger import refuse_dledger
from rmqtool.store.commitlog import find_record
from rmqtool.store.config import batch_topics, configured_batch_topics
from rmqtool.store.commitlog_end import CommitLog, last_nonzero_from
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.consumequeue import (BATCH_CQ_LAYOUT, CQ_LAYOUT, UnitLayout, find_queue_end,
                                        UnitFiles, queue_directories)
from rmqtool.store.segments import Segment, SegmentQueue, discover
from rmqtool.store.view import view_of_root


class CommitLogFiles:
    """The store's commit log as ReputMessageService reads it (read only, up to ``end``),
    through the read side's one reader of the bytes at a commit log offset."""

    def __init__(self, queue: SegmentQueue, end: int, progress=None):
        self.progress = progress  # told the bytes the reput has moved past (a bar's advance)
        self.segments = [(s.base_offset, s.path) for s in queue.segments]
        self.mapped_file_size = queue.mapped_file_size
        self.max_offset = end
        self.min_offset = queue.segments[0].base_offset if queue.segments else 0
        self.directory = queue.directory
        self._reader = CommitLogReader(CommitLog.of_queue(queue))
        self._at = None  # where the last read began: the reput asks again from where it got to

    def segment_of(self, offset: int):
        """The file holding ``offset`` (None: no file there; no size shown, as when the only file
        is empty: only a file named by the offset itself)."""
        base = offset - offset % self.mapped_file_size if self.mapped_file_size else offset
        for b, path in self.segments:
            if b == base:
                return b, path
        return None

    def read(self, offset: int, length: int) -> bytes:
        if self.progress is not None:
            if self._at is not None and offset > self._at:
                self.progress(offset - self._at)
            self._at = offset
        return self._reader.get_data(offset, length, self.max_offset)

    def close(self) -> None:
        self._reader.close()


@dataclasses.dataclass
class Selection:
    topics: tuple[str, ...] = ()  # empty: every topic
    queue_id: int | None = None
    known_topics: frozenset | None = None  # --skip-unknown-topics: topics.json's

    @property
    def everything(self) -> bool:
        """Every topic and queue is selected."""
        return not self.topics and self.queue_id is None and self.known_topics is None

    def wants(self, topic: str, queue_id: int) -> bool:
        if self.topics and topic not in self.topics:
            return False
        if self.queue_id is not None and queue_id != self.queue_id:
            return False
        return self.known_topics is None or topic in self.known_topics


class _Filter:
    """The dispatcher seen by ReputMessageService: only the selected records go on."""

    def __init__(self, inner: CommitLogDispatcher, selection: Selection, from_offset: int):
        self.inner = inner
        self.selection = selection
        self.from_offset = from_offset
        self.records = 0
        self.multi_dispatch = inner.multi_dispatch  # the reput hands such records as requests

    def dispatch(self, requests) -> None:
        wants = self.selection.wants
        chosen = [r for r in requests if r[2] >= self.from_offset and wants(r[0], r[1])]
        self.records += len(chosen)
        if chosen:
            self.inner.dispatch(chosen)

    def dispatch_columns(self, cols) -> None:
        import numpy as np

        from rmqtool.store.record_columns import topic_queue_codes, topic_queue_of

        if not len(cols):
            return
        if self.selection.everything and cols.commit_log_offset[0] >= self.from_offset:
            self.records += len(cols)  # the common case: every record of the block (in commit log order)
            self.inner.dispatch_columns(cols)
            return
        chosen = cols.commit_log_offset >= self.from_offset
        uniq, inverse = np.unique(topic_queue_codes(cols.topic, cols.queue_id), return_inverse=True)
        wanted = np.array([self.selection.wants(*topic_queue_of(p, cols.topics)) for p in uniq.tolist()], bool)
        chosen &= wanted[inverse.reshape(-1)]
        rows = np.flatnonzero(chosen)
        self.records += len(rows)
        if len(rows):
            self.inner.dispatch_columns(cols if len(rows) == len(cols) else cols.select(rows))


@dataclasses.dataclass
class Built:
    staging: pathlib.Path
    from_offset: int
    to_offset: int
    records: int
    queues: list  # (topic, queue id) built
    cq_size: int
    index_geometry: tuple[int, int] | None
    batch_queues: list = dataclasses.field(default_factory=list)  # (topic, queue id) of batch consume queues built
    sizes: StoreSizes | None = None  # the sizes built with, and where each came from
    unknown_sizes: list = dataclasses.field(default_factory=list)  # those nothing shows (StoreSizes.unknown)
    ext_units: bool = False  # the queues were built with ext units (enableConsumeQueueExt)
    # multi-dispatch (light message queues): the queues the range's records name, and whether
    # they were built (the store shows the broker wrote them, and every queue is rebuilt) or are
    # kept as they are (a selection, or the ext, which rmqtool does not rebuild them with)
    multi_dispatch_queues: frozenset = frozenset()
    multi_dispatch_built: bool = False
    ext_file_size: tuple[int, str] | None = None  # with ext units: the ext files' size and what says it


def build(store, staging, *, cq: bool = True, index: bool = True, selection: Selection = Selection(),
          from_offset: int | None = None, clock=None, index_slots: int | None = None,
          index_entries: int | None = None, sizes: GivenSizes | None = None, progress=None) -> Built:
    """Build into ``staging`` (made, must not exist) what dispatching the commit log gives,
    in the store's sizes (:func:`store_sizes`; ``index_slots``/``index_entries`` override
    ``sizes``' own). ``store``: the view the command opened (or a store root). ``progress``:
    a bar (``report/progress.Progress``) given the commit log bytes to dispatch as its total
    and advanced as the reput gets through them."""
    view = view_of_root(store)
    refuse_dledger(view.root, "redispatch")
    paths = view.paths
    staging = pathlib.Path(staging)
    writing = ext_writing(paths.root, (sizes or GivenSizes()).broker_config)  # enableConsumeQueueExt?
    refuse_from_offset(paths.root, from_offset if cq else None, (sizes or GivenSizes()).broker_config)
    log = view.commit_log.queue  # the listing the view made: not listed again
    if not log.segments:
        raise NotAStore("no commit log file to dispatch from (commitlog/ holds none)", paths.commitlog)
    size = log.mapped_file_size
    end = view.commit_log_end.end
    start = log.segments[0].base_offset if from_offset is None else max(from_offset, log.segments[0].base_offset)
    if start > end:
        raise UsageError(f"--from-offset {from_offset} is past the commit log's end {end}")
    start = _record_at_or_after(log.segments, size, start, end)
    said = {"index_slots": index_slots, "index_entries": index_entries}
    store = store_sizes(view, dataclasses.replace(sizes or GivenSizes(),
                                                        **{k: v for k, v in said.items() if v is not None}))
    cq_size = store.consume_queue.value
    geometry = (store.index_slots.value, store.index_entries.value) if index else None
    staging.mkdir(parents=True)
    table = ConsumeQueueTable(staging / "consumequeue", cq_size)
    existing = [(t, q, d) for t, q, d in queue_directories(paths.consumequeue) if selection.wants(t, q)]
    if cq and from_offset is not None:
        for topic, queue_id, directory in existing:  # keep the units before from_offset
            _stage_queue_prefix(directory, staging / "consumequeue" / topic / str(queue_id), cq_size, start)
        table.load()
    index_service = None
    if index:
        if from_offset is not None and paths.index.is_dir():
            shutil.copytree(paths.index, staging / "index", copy_function=copy_sparse)  # holes kept
        index_service = IndexServiceWriter(staging / "index", *geometry, clock=clock)
        index_service.load()
    # the batch topics chosen (a queue id chosen is applied to their records by _Filter)
    v5 = detect_semantics(paths, log.segments).semantics == V5
    every_batch_topic = frozenset(batch_topics(paths.root)) | (
        inner_batch_topics(view.commit_log, log.segments[0].base_offset, end)
        if v5 and configured_batch_topics(paths.config) is None else frozenset())
    batch = frozenset(t for t in every_batch_topic if selection.wants(t, selection.queue_id or 0))
    batch_table = _batch_table(paths, staging, store.batch_consume_queue.value, batch, selection,
                               start if from_offset is not None else None) if cq and batch else None
    named, multi = shown_by(view, start, end, v5) if cq else (frozenset(), None)
    if multi is not None and (not selection.everything or writing.enabled):
        multi = None  # kept as they are: not rebuilt for a selection, nor with ext units
    dispatcher = CommitLogDispatcher(table if cq else ConsumeQueueTable(staging / ".discard", cq_size), index_service,
                                     skip_topics=every_batch_topic if batch_table is None
                                     else frozenset(), batch_queues=batch_table, multi_dispatch=multi)
    chosen = _Filter(dispatcher, selection, start)
    _dispatch(paths, log, start, end, chosen, progress)
    table.close()
    if batch_table is not None:
        batch_table.close()
    if index_service is not None:
        index_service.flush()
        index_service.close()
    shutil.rmtree(staging / ".discard", ignore_errors=True)
    built = sorted(table.queues) if cq else []
    if cq and writing.enabled:  # enableConsumeQueueExt: each queue's ext units, their addresses in the units
        rebuild_exts(paths.root, staging, built, log, cq_size, writing)
    return Built(staging, start, end, chosen.records, built, cq_size, geometry,
                 sorted(batch_table.queues) if batch_table is not None else [], store,
                 store.unknown(consume_queue=cq, index=index, batch_consume_queue=batch_table is not None),
                 cq and writing.enabled, named, multi is not None,
                 (writing.file_size, writing.size_from) if cq and writing.enabled else None)


def inner_batch_topics(commit_log, from_offset: int, to_offset: int) -> frozenset[str]:
    """The topics whose records in [from_offset, to_offset) carry INNER_BASE and INNER_NUM: only a
    5.x BatchCQ topic's put writes them. With no topics.json to name the queue types, these are
    batch topics, as recover takes them (the broker that wrote them was told so): built as plain
    queues, the 5.3.3 broker's load refuses them. Only records holding the property are decoded."""
    from rmqtool.store.message import Message
    needle = props.PROPERTY_INNER_BASE.encode()
    return frozenset(r.topic for r in commit_log.scan(from_offset, to_offset, check_crc=False, needle=needle)
                     if type(r) is Message and needle in r.properties_raw
                     and props.PROPERTY_INNER_NUM in r.properties and props.PROPERTY_INNER_BASE in r.properties)


def _batch_table(paths, staging: pathlib.Path, batch_size: int, batch: frozenset, selection: Selection,
                 kept_before: int | None) -> BatchConsumeQueueTable:
    """5.x batch consume queues of the ``batch`` topics, built into ``staging``; with
    ``kept_before`` (--from-offset) each chosen queue's units before it staged first."""
    batch_table = BatchConsumeQueueTable(staging / "batchconsumequeue", batch_size, batch)
    if kept_before is not None:
        for topic, queue_id, directory in queue_directories(paths.batch_consumequeue):
            if topic in batch and selection.wants(topic, queue_id):  # keep the units before from_offset
                _stage_queue_prefix(directory, staging / "batchconsumequeue" / topic / str(queue_id), batch_size,
                                    kept_before, BATCH_CQ_LAYOUT)
        batch_table.load()
    return batch_table


def _dispatch(paths, log, start: int, end: int, chosen, progress) -> None:
    """The reput from ``start`` to ``end`` into ``chosen`` (bands in parallel where the log is
    large enough: :func:`_reput_in_bands`), the progress bar advanced as it goes."""
    if progress is not None:
        progress.set_total(end - start)
    reader = CommitLogFiles(log, end, progress.advance if progress is not None else None)
    # where the store's queues say records start: the chain walk proves them at once. A band reads
    # its own share; the whole log's are held only when they are few (8 bytes a unit)
    unit_files = UnitFiles.of(paths)
    hints = unit_files.between(start, end) if unit_files.units <= WHOLE_LOG_HINTS else None
    service = ReputMessageService(reader, chosen, DelayLevels(), start, hints=hints)
    try:
        bands = _bands(log, start, end)
        if bands:
            _reput_in_bands(service, log, bands, unit_files if hints is None else hints, progress)
        service.do_reput()  # everything (or what the bands left: they end where the chain leaves them)
    finally:
        reader.close()
    if progress is not None:
        progress.advance(end - start - progress.done)  # the last window, read to the end


# A long log is decoded in bands by two processes (store/parallel.iter_parallel: this one takes
# bands too, between dispatching the decoded ones in order); every unit and entry is written here.
PARALLEL_REPUT = True  # False: one process (tests compare the two)
PARALLEL_MIN_BYTES = 256 << 20  # a shorter log: one process (a fork and the bands' transfer cost ~0.1 s)
BAND_BYTES = 48 << 20  # ~40k records of 1 KB a band: small enough to balance, large enough to amortise
AHEAD = 16  # bands decoded and not yet dispatched, at most: the other process decodes on while this one does
WHOLE_LOG_HINTS = 8 << 20  # consume queue units whose offsets are held at once (64 MiB), more: a band's each


@dataclasses.dataclass(frozen=True)
class _Band:
    """Commit log offsets [start, end) to decode: both are record starts that prove themselves."""
    log: SegmentQueue
    start: int
    end: int
    # the whole log's hints when they are held, else the UnitFiles the band reads its share from
    hints: object = dataclasses.field(repr=False, compare=False)
    multi_dispatch: object = None  # the dispatcher's: records naming queues come as requests


class _Collect:
    """A band's dispatcher: keeps what the reput gives it, for the main process to dispatch in order."""

    def __init__(self, multi_dispatch=None):
        self.pieces: list = []
        self.multi_dispatch = multi_dispatch

    def dispatch(self, requests) -> None:
        self.pieces.append(list(requests))

    def dispatch_columns(self, cols) -> None:
        self.pieces.append(cols)


def _bands(log: SegmentQueue, start: int, end: int) -> list[_Band]:
    """The bands of [start, end), or none (a short log, one CPU, PARALLEL_REPUT off)."""
    from rmqtool.store.parallel import default_workers

    if not PARALLEL_REPUT or end - start < PARALLEL_MIN_BYTES or default_workers() < 2:
        return []
    cuts = [start]
    for target in range(start + BAND_BYTES, end - BAND_BYTES // 2, BAND_BYTES):
        cut = _record_at_or_after(log.segments, log.mapped_file_size, target, end)
        if cuts[-1] < cut < end:
            cuts.append(cut)
    return [_Band(log, a, b, None) for a, b in zip(cuts, cuts[1:] + [end])] if len(cuts) > 1 else []


def _decode_band(band: _Band) -> tuple[list, int, Exception | None]:
    """A band's reput, collected: (its pieces, where it stopped, the error that stopped it)."""
    reader = CommitLogFiles(band.log, band.end)
    collect = _Collect(band.multi_dispatch)
    hints = band.hints.between(band.start, band.end) if isinstance(band.hints, UnitFiles) else band.hints
    service = ReputMessageService(reader, collect, DelayLevels(), band.start, hints=hints)
    error = None
    try:
        service.do_reput()
    except RmqError as exc:  # raised by the main process once the pieces before it are dispatched
        error = exc
    finally:
        reader.close()
    return collect.pieces, service.reput_from_offset, error


def _reput_in_bands(service: ReputMessageService, log: SegmentQueue, bands: list[_Band], hints, progress) -> None:
    """Dispatch the bands' pieces in commit log order while they are decoded (two processes): a
    band counts only where the one before ended at its start (the chain from the reput's start
    goes through it); from the first that does not, ``service`` goes on alone."""
    from rmqtool.store.parallel import iter_parallel

    jobs = [dataclasses.replace(b, hints=hints, multi_dispatch=getattr(service.dispatcher, "multi_dispatch", None))
            for b in bands]
    decoded = iter_parallel(jobs, _decode_band, workers=2, ahead=AHEAD)
    try:
        for band, (pieces, stopped, error) in zip(jobs, decoded):
            if service.reput_from_offset != band.start:
                return  # the chain left the bands: the rest is read again, one process
            service.dispatch_pieces(pieces)
            service.reput_from_offset = stopped
            if progress is not None:
                progress.advance(stopped - band.start)
            if error is not None:
                raise error
            if stopped != band.end:
                return
    finally:
        decoded.close()  # the worker stops


def _record_at_or_after(segments: list[Segment], size: int | None, offset: int, end: int) -> int:
    """The first record start at or after ``offset`` (an offset inside a record moves on to
    the next one that proves itself), or the next segment's start, or ``end``. ``size``: the
    mapped file size (None when no file shows one: each file's own then)."""
    for seg in segments:
        if seg.base_offset + max(seg.size, size or 0) <= offset:
            continue
        position = find_record(seg, max(offset - seg.base_offset, 0))
        if position is not None:
            return min(seg.base_offset + position, end)
    return end


def _stage_queue_prefix(directory: pathlib.Path, target: pathlib.Path, cq_size: int, phy_offset: int,
                        layout: UnitLayout = CQ_LAYOUT) -> None:
    """Copy a queue's files up to its first unit at or past ``phy_offset``, zeroing from it
    (truncateDirtyLogicFiles; ``layout``: a consume queue's or a batch consume queue's)."""
    segments = discover(directory, required=False, mapped_file_size=cq_size).segments
    qe = find_queue_end(segments, cq_size, phy_offset, layout=layout)
    target.mkdir(parents=True, exist_ok=True)
    for seg in segments:
        if seg in qe.segments_after or seg.base_offset >= qe.end:
            continue  # after the cut: built again
        data = bytearray(seg.path.read_bytes())
        cut = qe.end - seg.base_offset
        if cut < len(data):
            data[cut:] = bytes(len(data) - cut)
        (target / seg.name).write_bytes(bytes(data))


@dataclasses.dataclass(frozen=True)
class Change:
    kind: str  # create | replace | delete | same
    path: str  # in the store
    staged: str | None
    units: int | None = None  # consume queue units written in the staged file


def compare(store, built: Built, *, cq: bool, index: bool, selection: Selection,
            kept: frozenset = frozenset()) -> list[Change]:
    """What swapping the staged files in changes in the store (a view, or a store root).
    ``kept``: topics whose queue files stay as they are (queues records multi-dispatch to,
    which the rebuild does not write: neither built nor deleted)."""
    paths = view_of_root(store).paths
    changes = []
    batch = {t for t, _q in built.batch_queues}  # their queues are in batchconsumequeue/, not consumequeue/
    kinds = [("consumequeue", paths.consumequeue, CQ_STORE_UNIT_SIZE)] if cq else []
    if cq and built.batch_queues:
        kinds.append(("batchconsumequeue", paths.batch_consumequeue, BATCH_CQ_STORE_UNIT_SIZE))
    if cq and built.ext_units:  # ext files: no units to count
        kinds.append(("consumequeue_ext", paths.root / "consumequeue_ext", None))
    for name, store_dir, unit_size in kinds:
        staged_root = built.staging / name
        staged = {p.relative_to(staged_root): p for p in staged_root.rglob("*") if p.is_file()} \
            if staged_root.is_dir() else {}
        staged = {rel: p for rel, p in staged.items() if rel.parts[0] not in kept}
        current = {}
        for topic, queue_id, directory in queue_directories(store_dir):
            if topic in kept:
                continue
            if selection.wants(topic, queue_id) and (name == "batchconsumequeue") == (topic in batch):
                for p in directory.iterdir():
                    if p.is_file():
                        current[p.relative_to(store_dir)] = p
        for rel, p in sorted(staged.items()):
            target = store_dir / rel
            units = _units(p, unit_size) if unit_size else None
            if rel not in current:
                changes.append(Change("create", str(target), str(p), units))
            elif _same_file(p, target):
                changes.append(Change("same", str(target), str(p), units))
            else:
                changes.append(Change("replace", str(target), str(p), units))
        for rel, p in sorted(current.items()):
            if rel not in staged:
                changes.append(Change("delete", str(p), None))
    if index:
        staged_index = built.staging / "index"
        staged = {p.name: p for p in staged_index.iterdir() if p.is_file()} if staged_index.is_dir() else {}
        current = {p.name: p for p in paths.index.iterdir() if p.is_file()} if paths.index.is_dir() else {}
        # names are creation times, and only their order counts (IndexService.load sorts them):
        # files pair up in order, and a rebuilt file takes the name of the one it replaces, so
        # the order stays and a second run finds every file as built
        # the order stays and a second run finds every file as built; a file added after the
        # kept ones is named after the last of them (its staged name is this host's clock, which
        # may be behind the names the broker's host gave)
        olds, news = [current[n] for n in sorted(current)], [staged[n] for n in sorted(staged)]
        last = None  # the name the file before ends up with
        for i in range(max(len(olds), len(news))):
            old = olds[i] if i < len(olds) else None
            new = news[i] if i < len(news) else None
            if old is not None and new is not None:
                changes.append(Change("same" if _same_file(old, new) else "replace", str(old), str(new)))
                last = old.name
                continue
            if new is not None:
                name = new.name if last is None or new.name > last else index_file_name_after(
                    index_name_time(new.name) or 0, last, lambda n: n in current)
                changes.append(Change("create", str(paths.index / name), str(new)))
                last = name
            if old is not None:
                changes.append(Change("delete", str(old), None))
    return changes


def _units(path: pathlib.Path, unit_size: int = CQ_STORE_UNIT_SIZE) -> int:
    """Units of a queue file before its first all-zero one (only the bytes it holds are read)."""
    held = -(-(last_nonzero_from(path) or 0) // unit_size)
    with open(path, "rb") as f:
        data = f.read(held * unit_size)
    n = len(data) // unit_size
    rows = np.frombuffer(data, np.uint8, count=n * unit_size).reshape(n, unit_size)
    zero = np.flatnonzero(~rows.any(axis=1))
    return int(zero[0]) if zero.size else n


def _same_file(a: pathlib.Path, b: pathlib.Path) -> bool:
    """filecmp.cmp(shallow=False) with holes skipped: the same size, the same last non-zero
    byte and the same bytes before it (a queue file made ahead is 6 MB of a few units)."""
    if a.stat().st_size != b.stat().st_size:
        return False
    end = last_nonzero_from(a) or 0
    if (last_nonzero_from(b) or 0) != end:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        for pos in range(0, end, 1 << 20):
            n = min(1 << 20, end - pos)
            if fa.read(n) != fb.read(n):
                return False
    return True
