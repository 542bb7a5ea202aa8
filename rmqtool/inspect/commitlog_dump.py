"""What ``dump commitlog`` emits: every record of a commit log as a row.

PATH is a store, its ``commitlog/`` directory or one segment file. Messages are picked by
topic, queue, store time and commit log offset; end-of-file blanks (with ``show_blank``)
and damaged regions are rows too. Damage never stops a dump: each damaged record becomes
a finding naming its file and position, and :attr:`CommitLogDump.damaged` counts them.
"""
from __future__ import annotations

import dataclasses
import itertools
import os
import pathlib
import tempfile
import time
from typing import Iterator

from rmqtool.errors import CodecMissing, UsageError
from rmqtool.findings import BODY_DECOMPRESS_FAILED, Finding
from rmqtool.inspect.hints import wrong_kind
from rmqtool.inspect.selection import MessageSelection
from rmqtool.report.records import message_record
from rmqtool.report.sink import EncodedRows, Run, encode_lines
from rmqtool.store import detect
from rmqtool.store.commitlog import Blank, Corrupt, findings_of, scan_segment
from rmqtool.store.commitlog_end import CommitLog, last_file_end, last_written, segment_ranges
from rmqtool.store.heap import keep_freed_memory
from rmqtool.store.message import Message
from rmqtool.store.paths import is_segment_name
from rmqtool.store.segments import Segment
from rmqtool.store.system_topics import Transactions, describe, is_system_topic
from rmqtool.store.view import StoreView

PROGRESS_STEP = 4 << 20  # bytes scanned between two moves of a progress bar
FOLLOW_INTERVAL = 0.5  # seconds --follow waits between two looks at the commit log's end
PARALLEL_SPLIT = 16 << 20  # bytes of a segment one worker encodes at a time
# with --limit: the jobs taken ahead past the limit are thrown away, so smaller ones
LIMITED_SPLIT = 4 << 20
_SPOOL_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else None  # where workers leave their rows (memory)
SPOOL_ROWS = 256  # rows encoded at once into a spool file


def _spool_lines(f, rows) -> tuple[int, int]:
    """``rows`` written to the spool file ``f`` as JSON Lines, a batch of SPOOL_ROWS at a time (no
    buffer the size of the job), rows encoded already (EncodedRows) as they come; (bytes, rows) written."""
    count = size = 0
    batch: list = []
    for row in itertools.chain(rows, (None,)):
        if row is not None and type(row) is not EncodedRows:
            batch.append(row)
            if len(batch) < SPOOL_ROWS:
                continue
        if batch:
            data, n = encode_lines(batch)
            batch.clear()
            f.write(data)
            count += n
            size += len(data)
        if row is not None and type(row) is EncodedRows:
            f.write(row.data)
            count += row.count
            size += len(row.data)
    return size, count


def _lines_end(path: str, lines: int) -> int:
    """The byte length of the first ``lines`` lines of a file."""
    end = 0
    with open(path, "rb") as f:
        for _ in range(lines):
            end += len(f.readline())
    return end


def commitlog_segments(path: pathlib.Path, view: StoreView | None = None) -> tuple[list[Segment], list[Finding]]:
    """(segments to scan, findings about them) of a store, a commitlog/ directory or one segment;
    a store's (or its commitlog/'s) from ``view``, the store opened already, when given."""
    kind = detect.kind_of(path)
    if kind == detect.STORE or (kind == detect.COMMITLOG and path.is_dir()):
        directory = path / "commitlog" if kind == detect.STORE else path
        opened = view is not None and (view.paths.commitlog.resolve() == directory.resolve() or (
            kind == detect.STORE and view.commit_log_paths is not None and view.root.resolve() == path.resolve()))
        cl = view.commit_log if opened else CommitLog(directory)
        return cl.segments, list(cl.findings)
    if kind == detect.COMMITLOG:
        base = int(path.name) if is_segment_name(path.name) else 0
        return [Segment(path, base, path.stat().st_size)], []
    raise wrong_kind(path, kind, "a commit log segment")


def blank_row(b: Blank) -> dict:
    return {"record": "blank", "commit_log_offset": b.offset, "store_size": b.size, "valid": b.valid,
            "file": b.path, "file_position": b.position}


def corrupt_row(c: Corrupt) -> dict:
    return {"record": "corrupt", "commit_log_offset": c.offset, "store_size": c.size, "finding": c.finding_id,
            "reason": c.reason, "file": c.path, "file_position": c.position}


@dataclasses.dataclass
class CommitLogDump:
    """One ``dump commitlog`` run: construct it (bad paths raise here, before any output),
    iterate :meth:`rows`, then read :attr:`findings` and :attr:`damaged`.

    ``body`` is text, hex, base64 or none; ``preview`` cuts text bodies to that many
    characters.
    """
    path: pathlib.Path
    selection: MessageSelection = MessageSelection()
    from_offset: int | None = None
    to_offset: int | None = None  # exclusive
    limit: int | None = None
    body: str = "base64"
    preview: int | None = None
    decompress: bool = False
    check_crc: bool = True
    show_blank: bool = False
    decode_system: bool = False  # add ``system``: what a system topic's record means
    view: StoreView | None = None  # the store the path lies in, opened once (its listing is taken)
    segments: list[Segment] = dataclasses.field(init=False)
    findings: list[Finding] = dataclasses.field(init=False)  # about segments and records, in scan order
    damaged: int = dataclasses.field(init=False, default=0)  # records with a finding

    def __post_init__(self):
        self.segments, self.findings = commitlog_segments(pathlib.Path(self.path), self.view)
        # enableDLegerCommitLog: the records are inside DLedger entries, walked entry by entry
        self.dledger = (self.view.commit_log if self.view is not None and self.view.records_in_dledger
                        and detect.kind_of(pathlib.Path(self.path)) == detect.STORE else None)
        self.transactions = self._transactions() if self.decode_system else None

    def _transactions(self) -> Transactions:
        """One pass over the whole log (not only the range asked for): a half message's op record
        and commit copy may lie anywhere after it."""
        if self.dledger is not None:
            return Transactions.of(self.dledger.scan(check_crc=False))
        last = len(self.segments) - 1
        return Transactions.of(r for i, seg in enumerate(self.segments)
                               for r in scan_segment(seg, is_last=i == last, check_crc=False))

    @property
    def total_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def stored_bytes(self) -> int:
        """Bytes the segments hold on disk (a sparse segment's holes are not data to read)."""
        total = 0
        for s in self.segments:
            try:
                total += min(s.size, os.stat(s.path).st_blocks * 512)
            except OSError:
                total += s.size
        return total

    @property
    def copy_bound(self) -> bool:
        """Its rows are written by the native kernel with base64 bodies: ~1.8 bytes of JSON a byte
        read, which workers would write into spool files and this process copy out again. Measured on
        the 1 M x 1 KB store (2 cores), that copying cost more than a second process gave: -j 2 took
        1.7x the CPU of -j 1 and was slower on the wall in every run, so by default one process."""
        return self.body == "base64" and self.row_run() is not None

    def _row(self, r) -> dict | Run | None:
        """The row for a scanned record, or None when it is not asked for; runs of rows
        (:meth:`row_run`'s, :meth:`table_run`'s) as they are."""
        if isinstance(r, Run):
            return r
        if type(r) is Message:
            if not self.selection.matches(r):
                return None
            try:
                row = message_record(r, self.body, decompress=self.decompress, preview=self.preview)
            except CodecMissing as exc:  # operational: every such body would fail the same way
                raise CodecMissing(exc.message, r.path, r.position) from None
            if "body_decompress_error" in row:
                self.damaged += 1
                self.findings.append(Finding(BODY_DECOMPRESS_FAILED, r.path, r.position,
                                             f"{row['body_decompress_error']} (message at commit log offset "
                                             f"{r.commit_log_offset})"))
            return row
        if isinstance(r, Blank):
            return blank_row(r) if self.show_blank or not r.valid else None
        return corrupt_row(r)

    def row_run(self):
        """What writes the JSON Lines rows of a window's clean records natively
        (report/jsonl_rows.RowRun), or None when this dump's rows are not ones it writes
        (a selection, decompression, system decoding, a body mode it does not write, a
        DLedger log) or the native kernel is not there."""
        from rmqtool.report import jsonl_rows  # numpy
        if not self._native_rows() or self.preview is not None or not jsonl_rows.wanted(self.body):
            return None
        return jsonl_rows.RowRun(self.body, self.check_crc)

    def table_run(self):
        """What hands a table the runs of a window's clean records (report/table_rows.TableRun:
        their lines written natively once its layout is fixed), or None as for :meth:`row_run`
        (a text body with its preview is one it takes)."""
        from rmqtool.report import table_rows  # numpy
        if not self._native_rows() or not table_rows.wanted(self.body):
            return None
        return table_rows.TableRun(self.body, self.check_crc, self.preview)

    def _native_rows(self) -> bool:
        """No selection, decompression, system decoding, nor DLedger log: rows the kernel's parts may write."""
        return self.selection.everything and not (self.decompress or self.decode_system or self.dledger is not None)

    def results(self, progress=None, rows=None) -> Iterator:
        """Every scan result (Message, Blank, Corrupt) of the range, in commit log order,
        findings collected; ``progress.advance(bytes)`` every PROGRESS_STEP bytes scanned.
        ``rows``: :meth:`row_run`'s (or :meth:`table_run`'s), when the results may hold runs
        of rows (EncodedRows, TableRows: clean records, no findings)."""
        check = findings_of
        if self.dledger is not None:
            yield from self._dledger_results(progress)
            return
        step = PROGRESS_STEP if progress is not None else 1 << 62  # without progress: never
        for rng in segment_ranges(self.segments, self.from_offset, self.to_offset):
            seg = rng.segment
            reported = rng.start  # file position progress has been told about
            next_at = reported + step
            stop = self.to_offset - seg.base_offset if self.to_offset is not None else None
            for r in scan_segment(seg, is_last=rng.is_last, start=rng.start, end_offset=self.to_offset,
                                  check_crc=self.check_crc, findings=self.findings, rows=rows):
                if stop is not None and r.position >= stop:
                    break  # damage from the end on belongs to the scan's range, not to what was asked
                found = check(r) if not isinstance(r, Run) else None
                if found:
                    self.damaged += 1
                    self.findings += found
                if r.position >= next_at:
                    progress.advance(r.position - reported)
                    reported = r.position
                    next_at = reported + step
                yield r
            if progress is not None:
                progress.advance(max(0, seg.size - reported))

    def _dledger_results(self, progress=None) -> Iterator:
        """The records of a DLedger store's entries in [from_offset, to_offset), findings collected."""
        for r in self.dledger.scan(self.from_offset, self.to_offset, check_crc=self.check_crc):
            found = findings_of(r)
            if found:
                self.damaged += 1
                self.findings += found
            if progress is not None and type(r) is Message:
                progress.advance(r.store_size)
            yield r

    def written_end(self, after: int | None = None) -> int:
        """The commit log's written end now (after its last whole record: a record being
        written is not part of it). ``after``: a record start before which it was read
        already (where the last call ended)."""
        segments, _ = commitlog_segments(pathlib.Path(self.path))
        if not segments:
            return 0
        tail = segments[max(last_written(segments), 0)]
        inside = after is not None and tail.base_offset <= after < tail.base_offset + tail.size
        return last_file_end(segments, resume_at=after - tail.base_offset if inside else None).end

    def follow(self, progress=None, *, interval: float = FOLLOW_INTERVAL, on_idle=None,
               sleep=time.sleep) -> Iterator[dict]:
        """:meth:`rows` up to the written end, then the records appended after it as they
        are written (pg_waldump --follow), until the caller stops (Ctrl-C) or ``limit`` rows
        are out. Each round reads up to the end found again; ``on_idle()`` runs before each
        wait of ``interval`` seconds."""
        if self.dledger is not None:
            raise UsageError("--follow does not read a DLedger commit log (dump dledger shows its entries)",
                             self.path)
        limit = self.limit
        self.to_offset = end = self.written_end()
        for row in self.rows(progress):
            yield row
            if limit is not None:
                limit -= 1
        while limit is None or limit > 0:
            if on_idle is not None:
                on_idle()
            sleep(interval)
            now = self.written_end(end)
            if now <= end:
                continue
            self.segments, found = commitlog_segments(pathlib.Path(self.path))
            self.findings += [f for f in found if f not in self.findings]
            self.from_offset, self.to_offset, self.limit = end, now, limit
            for row in self.rows():
                yield row
                if limit is not None:
                    limit -= 1
            end = now

    def rows(self, progress=None, encoded: bool | str = False) -> Iterator[dict]:
        """The rows, in commit log order (see :meth:`results` for progress). ``encoded``: for a
        JSON Lines sink (True, "jsonl"), runs of rows may come encoded already (EncodedRows,
        :meth:`row_run`); for a table ("table"), as runs of clean records (TableRows, :meth:`table_run`)."""
        limit = self.limit
        if limit is not None and limit <= 0:
            return
        emitted = 0
        runs = self.table_run() if encoded == "table" else self.row_run() if encoded in (True, "jsonl") else None
        for row in self._rows_of(self.results(progress, runs)):
            if isinstance(row, Run):
                if limit is not None and emitted + row.count >= limit:
                    yield row.first(limit - emitted)
                    return
                emitted += row.count
                yield row
                continue
            yield row
            emitted += 1
            if limit is not None and emitted >= limit:
                return

    def _rows_of(self, results) -> Iterator[dict]:
        rows = self._rows_of_plain(results)  # returned, not delegated: no extra generator a row
        return self._with_system(rows) if self.decode_system else rows

    def _with_system(self, pairs) -> Iterator[dict]:
        transactions = self.transactions
        for r, row in pairs:
            if type(r) is Message and is_system_topic(r.topic):
                row["system"] = describe(r, transactions)
            yield row

    def _rows_of_plain(self, results) -> Iterator:
        """Rows; with decode_system, (record, row) pairs for :meth:`_with_system`."""
        pairs = self.decode_system
        select = None if self.selection.everything else self.selection.matches
        body, decompress, preview = self.body, self.decompress, self.preview
        for r in results:
            if type(r) is Message and not decompress:  # the common row, without _row's call
                if select is not None and not select(r):
                    continue
                row = message_record(r, body, preview=preview)  # no codec is needed
                yield (r, row) if pairs else row
            else:
                row = self._row(r)
                if row is not None:
                    yield (r, row) if pairs else row

    # ---- JSON Lines over worker processes ----------------------------------------------------
    def jsonl_files(self, workers: int, split_size: int | None = None,
                    progress=None) -> Iterator[tuple[str, int, int]]:
        """The rows as JSON Lines, built and encoded in ``workers`` processes a byte range of a
        segment at a time, each range's in a spool file (in memory where /dev/shm is):
        (path, bytes, rows) in commit log order, a file written over by a later job once the next is asked for.
        Findings and damage are gathered as :meth:`rows` gathers them; ``limit`` cuts the
        last file's bytes short."""
        if self.dledger is not None:  # entries are walked in order: one spool file, built here
            yield from self._jsonl_in_one()
            return
        from rmqtool.store.parallel import iter_parallel, jobs_of  # multiprocessing: a one-process dump loads none
        jobs = jobs_of(self.segments, self.from_offset, self.to_offset, check_crc=self.check_crc,
                       split_size=split_size or (PARALLEL_SPLIT if self.limit is None else LIMITED_SPLIT))
        left = self.limit
        ahead = 2 * workers  # a slow reader: spool bounded
        # iter_parallel holds at most ``ahead`` jobs taken and not given back, and those are the jobs
        # since the last one given back: as many spool files, each job's the one of its index modulo
        # their count, are never two jobs' at once. A file is written over, not made anew: its
        # memory pages are the last job's (a new file's pages are each allocated and cleared).
        slots = max(ahead, workers)
        self._slots = {(j.segment.base_offset, j.start): i % slots for i, j in enumerate(jobs)}
        # made (numpy and the kernel's row layout loaded) before the workers fork: once, not in each
        self._row_writer = self.row_run()
        keep_freed_memory()  # each job's first windows do not fault the heap's pages in again
        with tempfile.TemporaryDirectory(prefix="rmqtool-dump-", dir=_SPOOL_DIR) as spool:
            self._spool = spool
            for path, size, count, findings, damaged, scanned in iter_parallel(
                    jobs, self._encode_job, workers=workers, ahead=ahead):
                self.findings += findings
                self.damaged += damaged
                if progress is not None:
                    progress.advance(scanned)
                if left is not None and count >= left:
                    yield path, _lines_end(path, left), left
                    return
                if count:
                    yield path, size, count
                if left is not None:
                    left -= count

    def _jsonl_in_one(self) -> Iterator[tuple[str, int, int]]:
        with tempfile.NamedTemporaryFile(prefix="rmqtool-dump-", dir=_SPOOL_DIR, delete=False) as f:
            size, count = _spool_lines(f, self.rows(encoded=True))
        try:
            if count:
                yield f.name, size, count
        finally:
            os.unlink(f.name)

    def _encode_job(self, job) -> tuple[str, int, int, list, int, int]:
        """In a worker: one job's rows encoded into a spool file; (path, bytes, rows,
        findings, damaged records, bytes scanned)."""
        findings: list = []
        tally = [0]
        # _row adds decompress failures to self: taken back out, as this may be a forked copy
        kept_findings, kept_damaged = len(self.findings), self.damaged
        stop = self.to_offset - job.segment.base_offset if self.to_offset is not None else None
        rows = self._row_writer

        def results():
            for r in job.scan(findings, rows):
                if stop is not None and r.position >= stop:
                    return
                if type(r) is EncodedRows:  # clean records: no findings
                    yield r
                    continue
                found = findings_of(r)
                if found:
                    tally[0] += 1
                    findings.extend(found)
                yield r
        path = os.path.join(self._spool, str(self._slots[job.segment.base_offset, job.start]))
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:  # written over: its first bytes
            size, count = _spool_lines(f, self._rows_of(results()))
        findings += self.findings[kept_findings:]
        tally[0] += self.damaged - kept_damaged
        del self.findings[kept_findings:]
        self.damaged = kept_damaged
        end = job.segment.size if job.end is None else job.end
        return path, size, count, findings, tally[0], max(end - job.start, 0)
