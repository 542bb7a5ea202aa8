"""A store, opened once: what every command reads of it, each answer found once.

``open_store`` checks the path once and tells the family; the :class:`StoreView` it returns
is handed to verify, info and dump, query, offsets, recover and spark, so none of them opens
the store again by path or finds its ends again. Each answer is read on first use and kept
(``functools.cached_property``); the view itself never changes after it is built (its
attributes cannot be set), and it never writes.

The recovered end (where the broker's next start ends the log) needs recovery/'s simulation,
which store/ may not import: the caller hands a ``simulate(view) -> Outcome`` in, and the
simulation runs at most once, on the first question that needs it.
"""
from __future__ import annotations

import functools
import os
import pathlib
from typing import TYPE_CHECKING, Any, Callable

from rmqtool.errors import StoreNotFound
from rmqtool.store.commitlog_end import CommitLog, CommitLogEnd, last_file_end, written_end
from rmqtool.store.commitlog_paths import CommitLogPaths, commit_log_paths_of, list_commit_log
from rmqtool.store.detect import require_store
from rmqtool.store.family import ROCKETMQ, Family, detect_family, require_rocketmq
from rmqtool.store.live import LiveStore
from rmqtool.store.lock import is_locked
from rmqtool.store.paths import StorePaths, dledger_home
from rmqtool.store.segments import Segment, SegmentQueue, discover
from rmqtool.store.unfinished import Unfinished, read_unfinished

if TYPE_CHECKING:  # imported where asked for: a command that reads only the commit log loads none of them
    from rmqtool.store.checkpoint import StoreMarkers
    from rmqtool.store.consumequeue import ConsumeQueues
    from rmqtool.store.dledger import DLedgerLog
    from rmqtool.store.indexfile import IndexFiles


class StoreView:
    """One store root, read once. Build it with :func:`open_store` (the path checked) or, when
    the caller checked the root already, ``StoreView(root)``."""

    def __init__(self, root: str | os.PathLike, *, family: Family | None = None,
                 simulate: Callable[["StoreView"], Any] | None = None,
                 commit_log_paths: CommitLogPaths | None = None):
        root = pathlib.Path(root)
        family = family or detect_family(root) or ROCKETMQ
        require_rocketmq(family, root)  # a view of a RocketMQ store (QMQ's: store/qmq/view.py)
        # where the commit log is when not ROOT/commitlog: given, what the command was given for this root,
        # or what the store's config/broker.properties says
        commit_log_paths = commit_log_paths or commit_log_paths_of(root)
        self.__dict__.update(root=root, paths=StorePaths(root), family=family, _simulate=simulate, _queues={},
                             commit_log_paths=commit_log_paths)

    def __setattr__(self, name, value):
        raise AttributeError(f"a StoreView does not change once built ({name})")

    def __repr__(self) -> str:
        return f"StoreView({str(self.root)!r}, family={self.family.name!r})"

    # --- the commit log --------------------------------------------------------------------------
    @functools.cached_property
    def commit_log(self) -> CommitLog:
        """commitlog/ discovered (segments, the mapped file size, segment findings); a store
        without one raises as discovery does (StoreNotFound). A commit log in other directories
        (:attr:`commit_log_paths`): every file of every path, one log by base offset."""
        if self.commit_log_paths is not None:
            return CommitLog.of_queue(list_commit_log(self.commit_log_paths, self.root))
        if self.records_in_dledger:
            return self.dledger.commit_log()  # enableDLegerCommitLog: the records lie in the entry log
        self.require_commit_log_directory()
        return CommitLog(self.paths.commitlog)

    def require_commit_log_directory(self, options: str = "") -> None:
        """StoreNotFound, saying how to point at it, when ROOT/commitlog is not there (nor given
        elsewhere): a broker whose storePathCommitLog is on other disks, or a commitlog link to a
        disk not mounted, is far likelier than a store that lost its whole log, and a plan of it
        would drop every consume queue. ``options``: the suffix of the options that point there
        (diff's ``-a``, ``-b``)."""
        if self.commit_log_paths is None and not self.records_in_dledger and not self.paths.commitlog.exists() \
                and self.root.is_dir():
            raise StoreNotFound(f"no such directory (a broker whose storePathCommitLog is elsewhere: give "
                                f"--commitlog-path{options} DIR[,DIR...] or --broker-config{options} FILE)",
                                self.paths.commitlog)

    @property
    def commit_log_directories(self) -> list[pathlib.Path]:
        """The directories the broker loads commit log files from (ROOT/commitlog, or the paths given)."""
        if self.commit_log_paths is None:
            return [self.paths.commitlog]
        return [pathlib.Path(d) for d in self.commit_log_paths.directories]

    @property
    def has_commit_log(self) -> bool:
        return any(d.is_dir() for d in self.commit_log_directories)

    @functools.cached_property
    def dledger(self) -> DLedgerLog | None:
        """The DLedger commit log (``dledger-<selfId>/``) the root holds, or None."""
        home = dledger_home(self.root)
        if home is None:  # the reader not loaded for a store without one
            return None
        from rmqtool.store.dledger import DLedgerLog
        return DLedgerLog(home)

    @property
    def records_in_dledger(self) -> bool:
        """The records live only in DLedger's entry log (enableDLegerCommitLog, no commitlog/)."""
        return self.dledger is not None and not self.has_commit_log

    def commit_log_listing(self, mapped_file_size: int | None = None) -> SegmentQueue:
        """commitlog/ listed as a reader that tolerates its absence takes it (none: no segments):
        the view's own listing, unless a mapped file size is given that it was not listed with."""
        if self.has_commit_log and not mapped_file_size:
            return self.commit_log.queue
        if self.commit_log_paths is not None:
            return list_commit_log(self.commit_log_paths, self.root, mapped_file_size)
        return discover(self.paths.commitlog, required=False, mapped_file_size=mapped_file_size)

    @property
    def segments(self) -> list[Segment]:
        return self.commit_log.segments

    @property
    def mapped_file_size(self) -> int | None:
        return self.commit_log.mapped_file_size

    @functools.cached_property
    def commit_log_end(self) -> CommitLogEnd:
        """Where the last written file's good records end (store/commitlog_end.last_file_end)."""
        return last_file_end(self.segments, self.mapped_file_size)

    @functools.cached_property
    def written_end(self) -> int:
        """One past the last record written (store/commitlog_end.written_end); the last file's
        records :attr:`commit_log_end` read already are not read again. A DLedger store's: one
        past the last entry its data files hold (store/dledger.survey's walk)."""
        if self.records_in_dledger:
            from rmqtool.store.dledger import survey
            walked = survey(self.dledger).walked_end
            return walked if walked is not None else (self.segments[0].base_offset if self.segments else 0)
        end = self.commit_log_end
        tail = end.last_message
        resume = tail.position + tail.store_size if tail is not None and end.stopped_by is None else None
        return written_end(self.segments, self.mapped_file_size, resume_at=resume)

    def found_written_end(self, end: int) -> None:
        """The written end a check of the whole log found (verify's, which reads the last files
        anyway; store/commitlog_end.written_end's answer): kept as :attr:`written_end`, so the
        last file is not read again for it (the one answer this view takes from a caller)."""
        self.__dict__.setdefault("written_end", end)

    @functools.cached_property
    def outcome(self):
        """recovery/'s simulation of the broker's next start (the callable handed in), run once;
        None when no simulation was handed in."""
        return self._simulate(self) if self._simulate is not None else None

    @property
    def recovered_end(self) -> int | None:
        """Where the broker's next start ends the log (None: not simulated, or not loadable)."""
        o = self.outcome
        return o.recovered_end if o is not None and o.loadable else None

    # --- consume queues and index ----------------------------------------------------------------
    def consume_queues(self, commit_log_max_offset: int | None = None) -> ConsumeQueues:
        """Every (batch) consume queue, each cut where the broker's load cuts it at this commit log
        offset; opened once a cut (the same object to every caller asking for that cut)."""
        if commit_log_max_offset not in self._queues:
            from rmqtool.store.consumequeue import open_consume_queues
            self._queues[commit_log_max_offset] = open_consume_queues(self.root, commit_log_max_offset)
        return self._queues[commit_log_max_offset]

    @functools.cached_property
    def index_files(self) -> IndexFiles:
        from rmqtool.store.indexfile import list_index_files
        return list_index_files(self.root)

    # --- checkpoint, markers, the live store ----------------------------------------------------
    @functools.cached_property
    def markers(self) -> StoreMarkers:
        """abort, abort.bak and lock, and who holds the lock."""
        from rmqtool.store.checkpoint import read_markers
        return read_markers(self.root)

    @property
    def has_abort(self) -> bool:
        return self.paths.abort.exists()

    @functools.cached_property
    def unfinished(self) -> Unfinished | None:
        """The repair (or undo) an interruption left half done, from rmqtool's marker."""
        return read_unfinished(self.root)

    @functools.cached_property
    def lock_holder(self) -> int | None:
        """The PID holding the lock (0: held, the OS does not say who); None: free or no lock file."""
        return is_locked(self.paths.lock) if self.paths.lock.exists() else None

    @functools.cached_property
    def live(self) -> LiveStore | None:
        """A running broker's store, read up to its written end as it is now; None when free
        (``store/live.py:live_store``'s answer, from the lock holder and end this view has read)."""
        if self.lock_holder is None:
            return None
        if self.records_in_dledger:  # one past the last entry DLedger's log holds now
            from rmqtool.store.dledger import survey
            end = survey(self.dledger, recover_files=True).walked_end or 0
        else:
            end = self.commit_log_end.end if self.has_commit_log and self.segments else 0
        return LiveStore(self.root, self.lock_holder, end)


def open_store(path: str | os.PathLike, *, simulate: Callable[[StoreView], Any] | None = None,
               commit_log_paths: CommitLogPaths | None = None) -> StoreView:
    """The view of the store at ``path``, the path checked once (detect.require_store: a missing
    path exit 8, a file or no store exit 4, another family's store exit 4)."""
    return StoreView(require_store(path), simulate=simulate, commit_log_paths=commit_log_paths)


def as_view(store: "str | os.PathLike | StoreView") -> StoreView:
    """A view given, or the store at a path opened (library callers may pass either)."""
    return store if isinstance(store, StoreView) else open_store(store)


def view_of_root(store: "str | os.PathLike | StoreView") -> StoreView:
    """A view given, or a view of a store root a library caller passed, the path not checked
    (a reader that tolerates what is missing, as those that listed the root themselves did)."""
    return store if isinstance(store, StoreView) else StoreView(store)
