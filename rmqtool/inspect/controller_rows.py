"""Rows for ``dump epochfile`` and info's ``controller`` section: controller mode's epoch file
and broker identity (``store/controller.py``). PATH is a store, or ``epochFileCheckpoint`` /
``epochFileCheckpoint.bak`` itself."""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Iterator

from rmqtool.formats.epoch_file import BAK_SUFFIX, OK
from rmqtool.inspect.hints import wrong_kind
from rmqtool.store import detect
from rmqtool.store.controller import EpochEntry, cache_findings, load_epoch_cache, read_broker_identity


@dataclasses.dataclass
class EpochDump:
    """What a dump found besides its rows: a note for stderr (no epoch file), and findings."""
    note: str | None = None
    findings: list = dataclasses.field(default_factory=list)


def _row(e: EpochEntry, file, line: int | None) -> dict:
    return {"epoch": e.epoch, "start_offset": e.start_offset, "end_offset": e.end_offset,
            "file": None if file is None else str(file), "line": line}


def epoch_rows(path, dump: EpochDump) -> Iterator[dict]:
    """A store: the epoch cache the broker loads (by epoch, each ending where the next line of its
    file starts, the last open: null), from the file it loads. One of the two files by name: that
    file's entries in file order (one that throws or is skipped: none, its finding said)."""
    p = detect.require_path(pathlib.Path(path))
    if p.is_file():
        kind = detect.kind_of_file(p)
        if kind != detect.EPOCH_FILE:
            raise wrong_kind(p, kind, "an epoch file (epochFileCheckpoint)")
        main = p.with_name(p.name[:-len(BAK_SUFFIX)]) if p.name.endswith(BAK_SUFFIX) else p
        cache = load_epoch_cache(p.parent, main)
        dump.findings += [f for f in cache_findings(cache) if f.path == str(p)]
        source = cache.bak if p != main else cache.main
        lines = source.read.entries if source.read.outcome == OK else ()
        for i, x in enumerate(lines):
            end = lines[i + 1].start_offset if i + 1 < len(lines) else None
            yield _row(EpochEntry(x.epoch, x.start_offset, end), p, x.line)
        return
    root = detect.require_store(p)
    cache = load_epoch_cache(root)
    if not cache.present:
        dump.note = f"no epochFileCheckpoint in {root}: not a controller-mode store (enableControllerMode=false)"
        return
    dump.findings += cache_findings(cache)
    line_of = {x.epoch: x.line for x in cache.lines}  # a repeated epoch: its later line, as the cache keeps it
    for e in cache.entries:
        yield _row(e, cache.loaded_from, line_of.get(e.epoch))


def _identity(x, path) -> dict | None:
    if x is None:
        return None
    return {"path": str(path), "cluster_name": x.cluster_name, "broker_name": x.broker_name,
            "broker_id": x.broker_id, "register_check_code": x.register_check_code, "loaded": x.loaded,
            "reason": x.why}


def controller_info(root: pathlib.Path) -> tuple[dict | None, list]:
    """info's ``controller``: which epoch file the broker loads and why, its epochs, the broker
    identity (and an interrupted registration's temp file); None without any of these files."""
    cache, ids = load_epoch_cache(root), read_broker_identity(root)
    if not (cache.present or ids.present):
        return None, []
    epoch_file = None
    if cache.present:
        epoch_file = {"loaded_from": None if cache.loaded_from is None else str(cache.loaded_from),
                      "reason": cache.why, "start_fails": cache.start_fails,
                      "last_epoch": cache.entries[-1].epoch if cache.entries else None,
                      "epochs": [{"epoch": e.epoch, "start_offset": e.start_offset, "end_offset": e.end_offset}
                                 for e in cache.entries]}
    return {"epoch_file": epoch_file, "broker_identity": _identity(ids.identity, ids.path),
            "broker_identity_temp": _identity(ids.temp, ids.temp_path)}, cache_findings(cache)
