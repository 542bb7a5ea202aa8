"""Controller mode's files checked (``verify --only controller``): the epoch file and its
``.bak`` as ``CheckpointFile.read`` reads them, the entries of the file the broker loads against
the commit log, the two files against each other, and ``brokerIdentity``. Nothing when the store
has none of these files (a store not in controller mode).

The entries are checked line by line in file order, as ``EpochFileCache.initEntries`` takes
them (each epoch ends where the next line starts): epochs and start offsets must increase
(``appendEntry`` writes no other), each start offset must lie within the commit log and be a
record start (a slave that must truncate there checks ``isOffsetAligned``), and an epoch whose
range ends before the first commit log file names deleted data. The ``.bak`` is the file one
write behind (``MixAll.string2File`` copies the file there before each write), and each write
appends one entry or drops entries from one end: a ``.bak`` that no such write turns into the
file was written by something else.
"""
from __future__ import annotations

from typing import Iterator

from rmqtool.findings import (BROKER_IDENTITY_INVALID, EPOCH_ORDER_INVALID, EPOCH_PAST_COMMIT_LOG, EPOCH_RANGE_EMPTY,
                              EPOCH_START_NOT_RECORD, Consequence, Finding, finding)
from rmqtool.store.commitlog_reader import CommitLogReader
from rmqtool.store.controller import (EpochCache, cache_findings, load_epoch_cache, offset_aligned,
                                      read_broker_identity)
from rmqtool.store.view import StoreView


def _line_findings(view: StoreView, cache: EpochCache) -> Iterator[Finding]:
    """The loaded file's entries, in file order, against each other and the commit log."""
    lines = cache.lines
    path = cache.loaded_from
    for before, line in zip(lines, lines[1:]):
        if line.epoch <= before.epoch or line.start_offset <= before.start_offset:
            yield finding(EPOCH_ORDER_INVALID, path, line.position,
                          f"line {line.line}: epoch {line.epoch} from {line.start_offset} after epoch {before.epoch} "
                          f"from {before.start_offset}: appendEntry writes only larger epochs and start offsets; the "
                          f"broker keeps the entries by epoch and ends each where the next line starts",
                          epoch=line.epoch, start_offset=line.start_offset)
    if not view.has_commit_log or not view.segments:
        return
    first, end = view.segments[0].base_offset, view.written_end
    with CommitLogReader(view.commit_log) as reader:
        for i, line in enumerate(lines):
            ends = lines[i + 1].start_offset if i + 1 < len(lines) else None
            if line.start_offset > end:
                yield finding(EPOCH_PAST_COMMIT_LOG, path, line.position,
                              f"epoch {line.epoch} starts at commit log offset {line.start_offset}, past the written "
                              f"end {end}: the messages its master wrote are not in this store (were this broker made "
                              f"master with nothing left to dispatch, appendEntry would refuse its new epoch: its "
                              f"start offset is not above this one)",
                              epoch=line.epoch, start_offset=line.start_offset, written_end=end)
            elif first <= line.start_offset < end:
                ok, why = offset_aligned(reader, line.start_offset)
                if not ok:
                    yield finding(EPOCH_START_NOT_RECORD, path, line.position,
                                  f"epoch {line.epoch} starts at commit log offset {line.start_offset}, where no "
                                  f"record starts ({why})", epoch=line.epoch, start_offset=line.start_offset)
            if ends is not None and ends <= first:
                yield finding(EPOCH_RANGE_EMPTY, path, line.position,
                              f"epoch {line.epoch} covers [{line.start_offset}, {ends}), all before the commit log's "
                              f"first offset {first}" + ("" if ends < first else
                                                         " (the broker keeps it: it drops epochs that end before "
                                                         "the first offset less one)"),
                              consequence=None if ends < first else Consequence.NONE,
                              epoch=line.epoch, start_offset=line.start_offset, end_offset=ends)


def _identity_findings(root) -> Iterator[Finding]:
    ids = read_broker_identity(root)
    if ids.identity is not None and not ids.identity.loaded:
        then = ("it resumes the registration in " + ids.temp_path.name if ids.temp is not None and ids.temp.loaded
                else "it asks the controller for a new broker id")
        yield finding(BROKER_IDENTITY_INVALID, ids.path, None,
                      f"{ids.identity.why}: the broker does not load it, and {then}")


def check_controller(view: StoreView) -> Iterator[Finding]:
    """Every finding about a store's controller-mode files (nothing when it has none)."""
    cache = load_epoch_cache(view.root)
    if cache.present:
        yield from cache_findings(cache)
        if cache.loaded_from is not None:
            yield from _line_findings(view, cache)
    yield from _identity_findings(view.root)
