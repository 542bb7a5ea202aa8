"""What ``info`` and ``dump dledger`` show of a DLedger commit log (``enableDLegerCommitLog``).

info: the ``dledger`` section (the entry log's files, entries, ledger begin and end index,
ledger end term, where DLedger's recover ends the data, the checkpoint's committed index and
the vote state) and, for a store whose records live only there, its ``commitlog`` section
(getMinPhyOffset / getMaxPhyOffset are entry positions: the first data file's offset and
the end of the last entry). dump dledger: a row an entry (its header, and the record inside
in the commit log's vocabulary), blank fills and damage; with ``index`` a row an index unit.
"""
from __future__ import annotations

import pathlib
from typing import Iterator

from rmqtool.formats import dledger as fmt
from rmqtool.store import detect
from rmqtool.store.commitlog import Blank, Corrupt, findings_of
from rmqtool.inspect.hints import wrong_kind
from rmqtool.store.dledger import (DLedgerLog, Entry, IndexUnit, Survey, find_dledger, read_index_units, survey,
                                   surveyed, walk_entries)
from rmqtool.store.message import Message
from rmqtool.store.view import StoreView


def _files(segments, ends: dict | None = None) -> list[dict]:
    return [{"file": s.name, "base_offset": s.base_offset, "size": s.size,
             **({"written_to": ends[s.name]} if ends and s.name in ends else {})} for s in segments]


def dledger_info(view: StoreView) -> tuple[dict | None, dict | None, list]:
    """(the ``dledger`` section, the ``commitlog`` section when the records live only in the
    entry log, findings); (None, None, []) when the store has no DLedger commit log. Reads the
    entry headers and index units of the files DLedger's recover walks (the last three), not
    the records (verify reads all of them)."""
    log = view.dledger
    if log is None:
        return None, None, []
    s = survey(log, recover_files=True)  # the files DLedger's recover reads, not the whole log
    cp = log.checkpoint
    segs = log.data.segments
    last_file = max((seg for seg in segs if seg.base_offset < (s.walked_end or 0)), default=None,
                    key=lambda seg: seg.base_offset)
    ends = {last_file.name: s.walked_end} if last_file is not None else None
    info = {
        "home": str(log.home),
        "self_id": log.self_id,
        "data_file_size": log.data.mapped_file_size,
        "index_file_size": log.index.mapped_file_size,
        "entries": s.entries,
        "ledger_begin_index": s.first_index if s.first_index is not None else -1,
        "ledger_end_index": s.ledger_end_index,
        "ledger_end_term": s.ledger_end_term,
        "recover_end": s.recover_end,
        "written_end": s.walked_end,
        "index_units_checked": s.units,
        "committed_index": cp.committed_index,
        "checkpoint_end_index": cp.end_index,
        "checkpoint_found": cp.found,
        "curr_term": cp.curr_term,
        "vote_leader": cp.vote_leader,
        "blank_fills": [{"commit_log_offset": b.offset, "size": b.size, "file": pathlib.Path(b.path).name,
                         "file_position": b.position, "valid": b.valid} for b in s.blanks],
        "data_files": _files(segs, ends),
        "entry_index_files": _files(log.index.segments),
    }
    findings = list(log.data.findings) + list(log.index.findings) + log.load_refusals + s.findings
    commitlog = None
    if not view.has_commit_log:
        first = segs[0].base_offset if segs else None
        commitlog = {
            "directory": str(log.data.directory),
            "mapped_file_size": log.data.mapped_file_size,
            "segment_count": len(segs),
            "min_commit_log_offset": first,
            # DLedgerCommitLog.getMaxPhyOffset: the committed end, which a restarted leader
            # commits up to recover's end again
            "max_commit_log_offset": s.recover_end if segs else None,
            "written_end": s.walked_end,
            "recovered_end": s.recover_end,
            "segments": _files(segs, ends),
            "dledger": True,
        }
        commitlog["min_offset"], commitlog["max_offset"] = first, commitlog["max_commit_log_offset"]
    return info, commitlog, findings


def _log_of(path: pathlib.Path) -> tuple[DLedgerLog, pathlib.Path | None]:
    """The DLedger log of a store root or its ``dledger-<id>`` directory, and the one data or
    index file asked for (None: all of them)."""
    path = detect.require_path(path)
    if path.is_file():
        kind = detect.kind_of_file(path)
        if kind != detect.DLEDGER:
            raise wrong_kind(path, kind, "a DLedger data or index file")
        return DLedgerLog(path.parent.parent), path
    if path.name.startswith(fmt.DIR_PREFIX) and (path / fmt.DATA_DIR).is_dir():
        return DLedgerLog(path), None
    log = find_dledger(path)
    if log is None:
        raise detect.not_a_store("no DLedger commit log here (dledger-<selfId>/data: a store run with "
                        "enableDLegerCommitLog)", path)
    return log, None


def entry_row(e: Entry) -> dict:
    """An entry as a row: its header, then the record inside it as dump commitlog names it."""
    row = {"record": "dledger_entry", "entry_index": e.index, "term": e.term, "pos": e.pos, "size": e.size,
           "magic": e.magic, "channel": e.channel, "chain_crc": e.chain_crc, "entry_body_crc": e.body_crc,
           "body_length": e.body_length, "commit_log_offset": e.record_offset}
    m = e.record
    if isinstance(m, Message):
        row.update({"topic": m.topic, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
                    "store_size": m.store_size, "physical_offset": m.physical_offset,
                    "store_timestamp": m.store_timestamp, "body_crc_ok": m.body_crc_ok,
                    "msg_id": m.msg_id})
    elif isinstance(m, Corrupt):
        row.update({"finding": m.finding_id, "reason": m.reason})
    row.update({"file": e.path, "file_position": e.position})
    return row


def unit_row(u: IndexUnit) -> dict:
    return {"record": "dledger_index_unit", "entry_index": u.index, "slot": u.slot, "term": u.term, "pos": u.pos,
            "size": u.size, "magic": u.magic, "file": u.path, "file_position": u.position}


def dledger_rows(path: pathlib.Path, findings: list, *, index: bool = False, check_crc: bool = True,
                 from_index: int | None = None, to_index: int | None = None) -> Iterator[dict]:
    """dump dledger: a row an entry (``index``: an index unit) with entry index in
    [from_index, to_index), blank fills and damaged regions as rows, in file order; findings
    gathered as the walk goes (each entry against its index unit, each record's checks)."""
    log, only = _log_of(path)
    findings += list(log.data.findings) + list(log.index.findings)

    def wanted(i: int) -> bool:
        return (from_index is None or i >= from_index) and (to_index is None or i < to_index)

    if index or (only is not None and only.parent.name == fmt.INDEX_DIR):
        units = log.index_units() if only is None else read_index_units(
            [seg for seg in log.index.segments if seg.path == only], log.index.mapped_file_size)
        yield from (unit_row(u) for u in units if wanted(u.slot))
        return
    if only is not None:  # one data file: its entries, records and blank fill (no index comparison)
        for r in walk_entries([seg for seg in log.data.segments if seg.path == only], records=True,
                              check_crc=check_crc):
            if isinstance(r, Entry):
                findings.extend(findings_of(r.record))
                if wanted(r.index):
                    yield entry_row(r)
            else:
                findings.extend(findings_of(r))
                yield _other_row(r)
        return
    s = Survey()
    started, past = from_index is None, False  # blanks and damage show between the entries asked for
    span = [None, None]  # the commit log offsets the rows cover: the findings reported are theirs
    for r in surveyed(log, s, records=True, check_crc=check_crc):
        if isinstance(r, Entry):
            started = started or wanted(r.index)
            if wanted(r.index):
                if isinstance(r.record, Message):
                    findings.extend(findings_of(r.record))
                span = [r.pos if span[0] is None else span[0], r.pos + r.size]
                yield entry_row(r)
            past = to_index is not None and r.index >= to_index - 1
        elif not started or past:
            continue
        else:
            span = [r.offset if span[0] is None else span[0], r.offset + r.size]
            yield _other_row(r)
    ranged = from_index is not None or to_index is not None
    findings += [f for f in s.findings if not ranged or _within(f, span, wanted)]


def _within(f, span: list, wanted) -> bool:
    """A finding of the rows asked for: about one of their entries, or a place among them."""
    details = f.details or {}
    if "entry_index" in details:
        return wanted(details["entry_index"])
    at = details.get("commit_log_offset")
    return at is None or (span[0] is not None and span[0] <= at < span[1])


def _other_row(r: Blank | Corrupt) -> dict:
    if isinstance(r, Blank):
        return {"record": "blank", "commit_log_offset": r.offset, "size": r.size, "valid": r.valid,
                "file": r.path, "file_position": r.position}
    return {"record": "corrupt", "commit_log_offset": r.offset, "size": r.size, "finding": r.finding_id,
            "reason": r.reason, "file": r.path, "file_position": r.position}
