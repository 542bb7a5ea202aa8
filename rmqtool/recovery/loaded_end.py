"""Where the broker's next start leaves the commit log and its consume queues, as info,
report, offsets, `offsets reset` and the Spark export say it: the two ends every command
names (docs/vocabulary.md) and getMaxPhyOffset after the load, where truncateDirtyLogicFiles
cuts the queues, and the queues themselves (:func:`loaded_queues`). The view is opened with
:func:`simulate_for_info`; the start is simulated only when the store gives a reason
(:func:`next_start_ends`)."""
from __future__ import annotations

from rmqtool.store.view import StoreView


def simulate_for_info(view: StoreView):
    """The next start as info needs it: its ends, without listing the messages it loses."""
    from rmqtool.recovery.outcome import Settings, simulate  # numpy: not at the CLI's start

    return simulate(view, Settings(), list_lost=False)


def next_start_ends(view: StoreView) -> tuple[int, int | None]:
    """(written end, recovered end). The recovered end needs the broker's next start
    simulated, which is cheap after a crash (it walks from the checkpoint's file) but on a
    clean store walks its last three files: it is simulated when the store gives a reason
    (the abort file, a segment finding, damage in the last file, a last file ending with its
    blank record and none after it), else left null."""
    live, written = view.live, view.written_end
    if live is not None:  # a running broker's store: no next start to predict, the end read up to
        return min(written, live.commit_log_end), None
    outcome = simulated_outcome(view)
    if outcome is None:
        return written, None
    return outcome.written_end, outcome.recovered_end if outcome.loadable else None


def simulated_outcome(view: StoreView):
    """The next start :func:`next_start_ends` simulates: None for a running broker's store,
    one that gives no reason (:func:`start_simulated`), a view opened without the simulation,
    or a simulation that fails (the commands show the rest, never a traceback)."""
    if view.live is not None or not start_simulated(view):
        return None
    try:
        return view.outcome
    except Exception:  # noqa: BLE001 - the end then stays the written one (info: recovered_end null)
        return None


def start_simulated(view: StoreView) -> bool:
    """Whether :func:`next_start_ends` simulates the next start of a store at rest: the
    store gives a reason (read from its listing, its last file and the abort marker). A
    record of the last file whose body fails its CRC is one: recovery checks it (checkCRCOnRecover)
    and cuts the log there, after a clean stop too (a store left so by a recovery that cut it
    and wrote nothing after: the bytes stay on disk, and the next start cuts there again)."""
    end = view.commit_log_end
    full_last = end.segment_base is None and end.last_written >= 0
    return bool(view.has_abort or view.commit_log.findings or end.stopped_by is not None
                or end.damaged_at is not None or full_last or _last_file_fails_crc(view))


def _last_file_fails_crc(view: StoreView) -> bool:
    """Whether a record of the last written commit log file fails its CRC (the file is the one
    the written end was read from: its pages are in memory)."""
    from rmqtool.store.commitlog import Blank, crc_scan

    last = view.commit_log_end.last_written
    if last < 0:
        return False
    return any(type(r) is not Blank for r in crc_scan(view.segments[last], is_last=True))


def loaded_end(view: StoreView) -> int:
    """getMaxPhyOffset once the broker has started: the recovered end when the next start is
    simulated (:func:`next_start_ends` says when), else the written end."""
    written, recovered = next_start_ends(view)
    return recovered if recovered is not None else written


def queue_cut(view: StoreView) -> int | None:
    """Where the next start's load cuts the consume queues (info's max_commit_log_offset):
    :func:`loaded_end` once a commit log file holds a record; 0 when commitlog/ holds no
    file (recoverNormally's else branch destroys every queue); None, the queues uncut, when
    the files hold no record yet or there is no commitlog/ (a partial copy: the queues as
    their own files give them)."""
    if view.has_commit_log and view.segments:
        return loaded_end(view) if view.commit_log_end.last_written >= 0 else None
    return 0 if view.has_commit_log else None


_SIMULATED = object()


def loaded_queues(view: StoreView, outcome=_SIMULATED):
    """The consume queues once the broker has started: the simulated start's
    (``recovery/started_queues.py``: recover's ranges, what its dispatch puts back included)
    when ``outcome`` (the caller's, None for none; by default :func:`simulated_outcome`'s) is
    one the broker finishes, else the files cut at :func:`queue_cut` (a live store, a store
    at rest that gives no reason to simulate, one the broker would not load)."""
    from rmqtool.recovery.started_queues import started_queues

    if outcome is _SIMULATED:  # no commitlog/ (a partial copy): nothing to simulate, the files uncut
        outcome = simulated_outcome(view) if view.has_commit_log else None
    started = started_queues(view, outcome)
    return started if started is not None else view.consume_queues(queue_cut(view))
