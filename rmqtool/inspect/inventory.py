"""What a store holds, read cheaply: the library side of ``rmqtool info``.

Nothing here scans the whole commit log on a clean store: segment ranges come from names
and sizes, the written end from the last written segment, the recovered end from the
broker's next start simulated (recovery/outcome.py: what that start reads, the last files
or from the checkpoint's), queue ranges from the consume queue files, cut where that start
cuts them.
"""
from __future__ import annotations

import os
import pathlib
import time

from rmqtool.errors import FormatError
from rmqtool.findings import CHECKPOINT_INVALID, CONFIG_TABLE_INVALID, Finding
from rmqtool.inspect.compaction_dumps import compaction_info
from rmqtool.inspect.controller_rows import controller_info
from rmqtool.inspect.dledger import dledger_info
from rmqtool.inspect.hints import wrong_kind
from rmqtool.inspect.side_stores import side_stores
from rmqtool.inspect.timer.state import timer_info
from rmqtool.formats.config import consumer_offsets, delay_offsets
from rmqtool.formats.timerlog import TIMER_TOPIC
from rmqtool.store import detect
from rmqtool.store.checkpoint import checkpoint_as_loaded
from rmqtool.store.commitlog import Blank, findings_of, scan_segment
from rmqtool.store.config import read_config_dir
from rmqtool.store.consumequeue import ConsumeQueues
from rmqtool.store.message import Message
from rmqtool.recovery.loaded_end import (loaded_queues, next_start_ends, queue_cut, simulate_for_info,
                                         simulated_outcome)
from rmqtool.store.segments import one_listing
from rmqtool.store.view import StoreView


def _first_timestamp(seg) -> int | None:
    for r in scan_segment(seg, is_last=False, check_crc=False):
        if isinstance(r, Message):
            return r.store_timestamp
        if isinstance(r, Blank):
            return None
    return None


def commit_log_path_rows(view: StoreView, segs: list) -> list[dict]:
    """Each directory of a commit log kept outside ROOT/commitlog: its role and the files the log takes from it."""
    given = view.commit_log_paths
    rows = []
    for d in given.directories:
        held = [s for s in segs if os.path.normpath(s.path.parent) == os.path.normpath(d)]
        rows.append({"path": d, "role": "read-only" if d in given.readonly and d not in given.writable else "writable",
                     "exists": os.path.isdir(d), "files": len(held),
                     "first_file": held[0].name if held else None, "last_file": held[-1].name if held else None,
                     "source": given.source})
    for d in given.ignored_readonly:  # one storePathCommitLog directory: the broker never reads these
        rows.append({"path": d, "role": "read-only, ignored", "exists": os.path.isdir(d), "files": 0,
                     "first_file": None, "last_file": None, "source": given.source})
    return rows


def _cut_reason(view: StoreView, written: int, recovered: int | None) -> str | None:
    """Why the next start ends the log before its written end (its recovery walk's reason);
    None when it does not (verify's recoveryCutsCommitLog and recover say more)."""
    if recovered is None or recovered >= written:
        return None
    outcome = simulated_outcome(view)
    return outcome.walk.reason if outcome is not None and outcome.walk is not None else None


def commitlog_info(view: StoreView) -> tuple[dict, list]:
    """Segments and the commit log's two ends: the written end (one past the last record
    written) and the recovered end (where the broker's next start ends the log, from
    recovery/'s simulation; None when not simulated, see recovery/loaded_end.py); damage
    that ended the last file's walk is a finding. A live store's end is the one taken when the
    read began."""
    cl = view.commit_log
    segs = cl.segments
    end = view.commit_log_end
    written, recovered = next_start_ends(view)
    last = end.last_written
    findings = list(cl.findings)
    if end.stopped_by is not None:
        findings += findings_of(end.stopped_by)
    rows = []
    for i, seg in enumerate(segs):
        row = {"file": seg.name, "base_offset": seg.base_offset, "size": seg.size,
               "end_offset": seg.base_offset + seg.size}
        if i <= last:
            first_ts = _first_timestamp(seg)
            if i == last:  # its records end there (at its start when its first record is torn)
                row["written_to"] = max(min(written, seg.base_offset + seg.size), seg.base_offset)
        else:
            first_ts = None
            row["preallocated"] = True  # after the last written segment, all zero at its start
        row["first_store_timestamp"] = first_ts
        if view.commit_log_paths is not None:  # a commit log over several directories: where each file is
            row["directory"] = str(seg.path.parent)
        rows.append(row)
    info = {
        "directory": str(cl.directory),
        "mapped_file_size": cl.mapped_file_size,
        "segment_count": len(segs),
        "min_commit_log_offset": segs[0].base_offset if segs else None,
        # getMaxPhyOffset once the broker has started, where its load cuts the queues
        "max_commit_log_offset": queue_cut(view),
        "written_end": written,  # no file: 0, the offset the first record would take (getMaxPhyOffset)
        "recovered_end": recovered,
        "recovery_cut_reason": _cut_reason(view, written, recovered),
        "segments": rows,
    }
    if view.commit_log_paths is not None:
        info["commit_log_paths"] = commit_log_path_rows(view, segs)
    # the names before 0.2 (queues' min/max_offset count messages, these are bytes): one release more
    info["min_offset"], info["max_offset"] = info["min_commit_log_offset"], info["max_commit_log_offset"]
    return info, findings


def consume_queue_info(cqs: ConsumeQueues, commit_log_min: int | None):
    """A row a queue (info and report: the queues as the next start leaves them)."""
    rows = []
    for q in cqs.queues:
        low = q.min_offset(commit_log_min or 0)
        rows.append({
            "topic": q.topic, "queue_id": q.queue_id, "type": "BatchCQ" if q.is_batch else "SimpleCQ",
            "min_queue_offset": low, "max_queue_offset": q.max_offset, "messages": q.max_offset - low,
            "files": len(q.segments), "mapped_file_size": q.mapped_file_size,
            "min_offset": low, "max_offset": q.max_offset,  # the names before 0.2, one release more
        })
    return rows, cqs.all_findings()


def _dledger_queue_cuts(view: StoreView, rows: list[dict]) -> None:
    """A DLedger store's queues as its next start leaves them: DLedgerCommitLog's recovery
    truncates units past its processOffset and the reput writes back those whose record passes
    (recovery/dledger.py), as a plain store's rows are cut where its start cuts the log."""
    from rmqtool.recovery.dledger import plan_dledger_recovery
    after = {(q.topic, q.queue_id): q.max_offset_after for q in plan_dledger_recovery(view).queues
             if q.cut_from is not None}
    for row in rows:
        high = after.get((row["topic"], row["queue_id"]))
        if high is not None and high < row["max_queue_offset"]:
            row["max_queue_offset"] = row["max_offset"] = high
            row["messages"] = max(high - row["min_queue_offset"], 0)


def _served_by_compaction(rows: list[dict], compaction: list[dict] | None) -> None:
    """A COMPACTION topic's queue as the broker serves it: getMessage and getMinOffsetInQueue go
    to the compaction store (its first kept offset; what was compacted away is skipped), while
    consumequeue/ is still written and not read. The row says so (``served_by``)."""
    served = {(c["topic"], c["queue_id"]): c for c in compaction or ()}
    for row in rows:
        c = served.get((row["topic"], row["queue_id"]))
        if c is not None:
            row["min_queue_offset"] = row["min_offset"] = c["min_queue_offset"]
            row["max_queue_offset"] = row["max_offset"] = c["max_queue_offset"]
            row["messages"] = c["messages"]
            row["served_by"] = "compaction"


def _timer_load(view: StoreView):
    """The next start's load of the timer store (recovery/timer/load.py), on the message store
    as its own start leaves it; None without a timer store, on a running broker's store, or
    when the simulation fails (info shows the files as they are then)."""
    from rmqtool.store.timer.files import find_timer_store
    if view.live is not None or not find_timer_store(view.root).exists:
        return None
    try:
        outcome = view.outcome if view.outcome is not None else simulate_for_info(view)
        if outcome is None or not outcome.loadable:
            return None
        from rmqtool.recovery.timer.start import timer_start  # numpy: only for a timer store
        start = timer_start(view.root, outcome, int(time.time() * 1000), run=False)
    except Exception:  # noqa: BLE001 - info goes on with what the files show
        return None
    return start.load if start is not None else None


def index_info(view: StoreView):
    listing = view.index_files
    rows = []
    files = listing.open_all()
    try:
        for f in files:
            h = f.header
            rows.append({
                "file": f.name, "begin_timestamp": h.begin_timestamp, "end_timestamp": h.end_timestamp,
                "begin_commit_log_offset": h.begin_phy_offset, "end_commit_log_offset": h.end_phy_offset,
                "hash_slot_count": h.hash_slot_count, "index_count": h.index_count,
                "max_hash_slot_num": f.hash_slot_num, "max_index_num": f.index_num,
                "write_full": f.is_write_full, "size": f.file_size,
                # the names before 0.2, one release more
                "begin_phy_offset": h.begin_phy_offset, "end_phy_offset": h.end_phy_offset,
            })
    finally:
        for f in files:
            f.close()
    return rows, list(listing.findings)


def checkpoint_info(view: StoreView):
    path = view.paths.checkpoint
    if not path.exists():
        return None, []
    try:
        cp = checkpoint_as_loaded(path)
    except FormatError as exc:
        return {"error": exc.one_line()}, [Finding(CHECKPOINT_INVALID, str(path), exc.offset, exc.message)]
    return {
        "physic_msg_timestamp": cp.physic_msg_timestamp,
        "logics_msg_timestamp": cp.logics_msg_timestamp,
        "index_msg_timestamp": cp.index_msg_timestamp,
        "min_timestamp": cp.min_timestamp,
        "master_flushed_offset": cp.master_flushed_offset,
        "confirm_phy_offset": cp.confirm_phy_offset,
        "has_5x_fields": cp.has_5x_fields,
    }, list(cp.findings)


def _config_summary(doc, name: str) -> dict:
    """Counts of what a config document holds; FormatError when its tables are not as the
    broker writes them."""
    if not isinstance(doc, dict):
        raise FormatError(f"the document is {type(doc).__name__ if doc is not None else 'null'}, not an object")
    if name == "topics.json":
        return {"topics": len(_table(doc, "topicConfigTable"))}
    if name == "consumerOffset.json":
        offsets = consumer_offsets(doc)
        if offsets is None:
            raise FormatError("no offsetTable: the broker loads no committed offsets from this file")
        return {"topic_groups": len(offsets), "queues": sum(len(v) for v in offsets.values())}
    if name == "delayOffset.json":
        return {"delay_levels": len(delay_offsets(doc))}
    if name == "subscriptionGroup.json":
        return {"groups": len(_table(doc, "subscriptionGroupTable"))}
    return {"keys": sorted(str(k) for k in doc)}


def _table(doc: dict, name: str) -> dict:
    table = doc.get(name) or {}  # absent or null: the broker starts with an empty table
    if not isinstance(table, dict):
        raise FormatError(f"{name!r} is not an object")
    return table


def config_info(root: pathlib.Path):
    """One row per config file; a file whose tables are wrong is a finding, the rest still show."""
    cd = read_config_dir(root)
    rows, findings = [], cd.all_findings()
    for name, c in cd.files.items():
        row = {"file": name, "source": c.source, "path": c.path}
        if c.document is not None:
            try:
                row.update(_config_summary(c.document, name))
            except FormatError as exc:
                row["error"] = exc.message
                findings.append(Finding(CONFIG_TABLE_INVALID, c.path, None, exc.message))
        rows.append(row)
    return rows, findings


def open_for_info(path: str | os.PathLike) -> StoreView:
    """The view ``rmqtool info`` reads: a store root (a file is named with the command that reads it)."""
    given = detect.require_path(path)
    if given.is_file():  # name the command that reads it
        raise wrong_kind(given, detect.kind_of_file(given), "a store directory")
    return StoreView(detect.require_store(given), simulate=simulate_for_info)


def first_file_read(view: StoreView) -> int | None:
    """The base offset of the first commit log file info's simulated next start reads past
    its first records (recovery/loaded_end.simulated_outcome): its recovery's start file, or
    an earlier one 4.9.8's reput dispatches from. None when the start is not simulated or its
    load fails before a start file is chosen. A store behind a URI stages the files from
    this one on (spark/export.py)."""
    outcome = simulated_outcome(view)
    if outcome is None or outcome.start_file is None:
        return None
    first = int(pathlib.Path(outcome.start_file).name)
    if outcome.loadable and outcome.reput_from < outcome.recovered_end:
        first = min(first, max((s.base_offset for s in view.segments if s.base_offset <= outcome.reput_from),
                               default=0))
    return first


@one_listing()
def store_info(store: str | os.PathLike | StoreView) -> tuple[dict, list[Finding]]:
    """Everything ``rmqtool info`` shows, as one JSON-ready document (findings included as
    JSON), and the findings themselves."""
    view = store if isinstance(store, StoreView) else open_for_info(store)
    root = view.root
    live = view.live  # first: its end is the snapshot the rest is read up to
    findings = []
    dledger, dledger_commitlog, f = dledger_info(view)  # enableDLegerCommitLog: the records are in DLedger's log
    findings += f
    commitlog, f = (dledger_commitlog, []) if dledger_commitlog is not None else commitlog_info(view)
    findings += f
    files = view.consume_queues(commitlog["max_commit_log_offset"])  # their findings are the files'
    if dledger_commitlog is not None:
        queues, _ = consume_queue_info(files, commitlog["min_commit_log_offset"])
        _dledger_queue_cuts(view, queues)
    else:  # as the next start leaves them (what its dispatch puts back too), as report and offsets show them
        queues, _ = consume_queue_info(loaded_queues(view), commitlog["min_commit_log_offset"])
    findings += files.all_findings()
    index, f = index_info(view)
    findings += f
    checkpoint, f = checkpoint_info(view)
    findings += f
    config, f = config_info(root)
    findings += f
    compaction, f = compaction_info(root)  # None: no compaction/ (5.x COMPACTION topics' side store)
    findings += f
    _served_by_compaction(queues, compaction)
    timer, f = timer_info(root, next((q["max_queue_offset"] for q in queues
                                      if (q["topic"], q["queue_id"]) == (TIMER_TOPIC, 0)), None), _timer_load(view))
    findings += f
    controller, f = controller_info(root)  # None: no epochFileCheckpoint or brokerIdentity (not controller mode)
    findings += f
    markers = view.markers
    findings += list(markers.findings)
    holder = live.pid if live is not None else view.lock_holder
    if live is not None:
        findings = live.settled(findings)
    return {
        "store": {
            "path": str(root),
            "clean_shutdown": markers.clean_shutdown,
            "abort_file": markers.abort.exists,
            "abort_pid": markers.abort.pid,
            "abort_bak_pid": markers.abort_bak.pid,
            "lock_file": markers.lock.exists,
            "locked_by_pid": holder,
            "live": live is not None,
            "consistent_commit_log_end": live.commit_log_end if live is not None else None,
        },
        "commitlog": commitlog,
        **({} if dledger is None else {"dledger": dledger}),
        "consume_queues": queues,
        "index_files": index,
        "checkpoint": checkpoint,
        "config": config,
        **({} if compaction is None else {"compaction_queues": compaction}),
        "timer": timer,
        **({} if controller is None else {"controller": controller}),
        "side_stores": side_stores(root),
        "findings": [x.to_json() for x in findings],
    }, findings
