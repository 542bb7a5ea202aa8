"""``verify``'s timer checks: the wheel against the timer log, the timer log against the commit
log, timercheck against the data, timermetrics against the units; each finding says what the
broker's next start does (recovery/timer simulates TimerMessageStore's load, recover and run).

The next start happens at the clock given (``now_ms``): the 7-day read-time floor, what is
due at once and the roll rule all depend on it.
"""
from __future__ import annotations

import collections
import datetime
import pathlib

import numpy as np

from rmqtool.findings import (TIMER_CHAIN_LOOPS, TIMER_LOG_CUT, TIMER_LOG_DAMAGED, TIMER_METRICS_DRIFT, TIMER_STATE,
                              TIMER_STORE_NOT_LOADABLE, TIMER_UNIT_PAST_COMMIT_LOG, TIMER_UNIT_RECORD_MISMATCH,
                              TIMER_UNIT_STRANDED, TIMERCHECK_MISSING, Consequence, Finding, finding)
from rmqtool.formats.timercheck import TIMERCHECK_FILE
from rmqtool.formats.timerlog import MAGIC_DELETE, need_delete, need_roll
from rmqtool.formats.timerwheel import SLOT_SIZE
from rmqtool.recovery.outcome import Outcome
from rmqtool.recovery.timer.load import TIMER_TOPIC, TimerSettings
from rmqtool.recovery.timer.next_run import REAL_TOPIC, topic_hash
from rmqtool.recovery.timer.start import ReadBeside, TimerStart, timer_start
from rmqtool.store.paths import CONFIG_DIR
from rmqtool.store.timer.files import TIMERWHEEL_FILE
from rmqtool.store.timer.timerlog import deliver_times, units_of


_FEW_TOPICS = 64  # timermetrics topics up to which _metrics counts each one's units by a comparison


def check_timer(root, outcome: Outcome | None, now_ms: int, settings: TimerSettings | None = None,
                plain: ReadBeside | None = None) -> list[Finding]:
    """Every timer finding of a store (none when it has no timer files). ``plain``: the units'
    records as a worker read them (recovery/timer/start.plain_units_beside)."""
    root = pathlib.Path(root)
    if outcome is None or not outcome.loadable:
        return []  # the message store's start not simulated (verify says why), or it does not load
    start = timer_start(root, outcome, now_ms, settings, plain=plain)
    if start is None:
        return []
    return TimerChecks(root, start).findings()


def _when(ms: int) -> str:
    """A time as ISO 8601 UTC; a value no date holds (damage) as its milliseconds."""
    try:
        return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).isoformat(timespec="milliseconds")
    except (OverflowError, ValueError, OSError):
        return f"{ms} ms"


class TimerChecks:
    def __init__(self, root: pathlib.Path, start: TimerStart):
        self.root, self.start, self.load, self.run = root, start, start.load, start.run

    def _log_place(self, position: int) -> tuple[pathlib.Path, int]:
        return self.start.log_place(position)

    def _wheel_place(self, index: int) -> tuple[pathlib.Path, int]:
        return self.root / TIMERWHEEL_FILE, index * SLOT_SIZE

    def findings(self) -> list[Finding]:
        load = self.load
        if not load.loadable:
            return [finding(TIMER_STORE_NOT_LOADABLE, self.start.refused, None,
                            f"the broker's TimerMessageStore does not load: {load.reason}")]
        out = []
        out += self._timercheck()
        out += self._cut()
        out += self._behind()
        out += self._loops()
        out += self._stranded()
        out += self._against_commit_log()
        out += self._metrics()
        out.append(self._state())
        return out

    # -- timercheck against the data ------------------------------------------------------------
    def _timercheck(self) -> list[Finding]:
        load, run = self.load, self.run
        cp = load.checkpoint
        if (cp.present and cp.last_read_time_ms) or not self.start.disk_log.files or not len(self.start.disk_log.columns):
            return []
        lo, hi = load.enqueue_again
        now = sum(1 for e in run.enqueued if e.action == "deliverNow")
        units = sum(1 for e in run.enqueued if e.action == "unit")
        state = "missing" if not cp.present else "zeroed"
        return [finding(TIMERCHECK_MISSING, self.root / CONFIG_DIR / TIMERCHECK_FILE, None if not cp.present else 0,
                        f"config/timercheck is {state}: the next start reads the wheel from "
                        f"{_when(load.curr_read_time_ms)} (now - 7 days + 60 s) and enqueues rmq_sys_wheel_timer "
                        f"queue offsets {lo}..{hi - 1} again ({hi - lo} records: {now} due, delivered at once; "
                        f"{units} put in the wheel again); the {run.walked_again} unit(s) in slots already due are "
                        f"dequeued again: their messages are delivered again",
                        enqueued_again=hi - lo, delivered_at_once=now, units_walked_again=run.walked_again)]

    # -- where recover cuts the log -------------------------------------------------------------
    def _cut(self) -> list[Finding]:
        load, run = self.load, self.run
        cp = load.checkpoint
        written = self.start.written_past_cut()
        if written is None:
            return []
        lo, hi = load.enqueue_again
        path, position = self._log_place(load.cut_at)
        loops = run.first_loop is not None
        # records enqueued again that fired before the checkpoint's read time were delivered already
        again = [e for e in run.enqueued if e.deliver_ms is not None and cp.present
                 and e.deliver_ms < cp.last_read_time_ms]
        consequence = Consequence.LOOPS if loops else Consequence.REDELIVERS if again else Consequence.NONE
        what = ("" if hi <= lo else
                "; their new units land where wheel slots still point: chains loop (timerChainLoops)" if loops else
                f"; {len(again)} of them fired before timercheck's read time: delivered again" if again else
                "; none had fired yet: each is delivered once")
        return [finding(TIMER_LOG_CUT, path, position,
                        f"the next start cuts the timer log at {load.cut_at} ({load.cut_reason}), before "
                        f"{written} that timercheck says was flushed; "
                        + (f"rmq_sys_wheel_timer queue offsets {lo}..{hi - 1} are enqueued again" if hi > lo else
                           "nothing is enqueued again") + f" ({load.queue_offset_reason})" + what,
                        consequence=consequence, cut_at=load.cut_at, flushed_position=written,
                        enqueued_again=hi - lo, redelivered=len(again))]

    def _behind(self) -> list[Finding]:
        """Damage in files before the one recovery walks from (the cut says what it meets itself)."""
        start = self.load.rescan_from
        out = []
        for f in self.start.disk_log.damaged_files():
            if f.base_offset >= start:
                continue
            path, position = self._log_place(f.end)
            out.append(finding(TIMER_LOG_DAMAGED, path, position,
                               f"the units of {f.path.name} end at {f.end} on bytes that are no unit ({f.end_reason})"
                               + (", non-zero bytes after them" if f.non_zero_after_end else "")
                               + f"; the next start's recovery walks from {start} and never reads them (a pending "
                               f"unit among them only as wheel chains reach it: timerUnitStranded says if one is lost)",
                               end_reason=f.end_reason, recovery_from=start))
        return out

    # -- the wheel against the timer log --------------------------------------------------------
    def _loops(self) -> list[Finding]:
        run = self.run
        out = []
        later = 0
        for c in run.chains.loops():
            path, position = self._wheel_place(c.index)
            first = c == run.first_loop
            if first:
                later = run.chains.units_after(c.time_ms)
            now = c.chain.loops_back_to < self.load.cut_at
            out.append(finding(
                TIMER_CHAIN_LOOPS, path, position,
                f"slot {c.index} ({_when(c.time_ms)}): its chain comes back to timer log position "
                f"{c.chain.loops_back_to} " + ("on disk" if now else "once the next start has enqueued again") +
                (f"; dequeue walks it forever at {_when(c.time_ms)}: the read time stops there and the "
                 f"{later} unit(s) of later slots are never delivered" if first else "; dequeue stops at an earlier loop"),
                slot_index=c.index, fire_time_ms=c.time_ms, loops_back_to=c.chain.loops_back_to,
                units_after=later if first else None))
        return out

    def _stranded(self) -> list[Finding]:
        run, out = self.run, []
        by_slot = collections.defaultdict(list)
        for u in run.stranded:
            by_slot[u.slot_index(self.load.settings.precision_ms)].append(u)
        for index, units in sorted(by_slot.items()):
            path, position = self._wheel_place(index)
            held = self.run.after.wheel.get_slot(units[0].deliver_time_ms) is not None
            why = "its chain misses them" if held else "the slot does not hold their time"
            if units[0].position < self.load.rescan_from:
                why += f", and recover's rescan from {self.load.rescan_from} does not revisit them"
            out.append(finding(
                TIMER_UNIT_STRANDED, path, position,
                f"slot {index} ({_when(units[0].deliver_time_ms)}): {len(units)} pending timer log unit(s) at "
                f"{', '.join(str(u.position) for u in units)} that dequeue never reaches ({why}): never delivered", slot_index=index, units=len(units), timer_log_offset=units[0].position,
                commit_log_offset=units[0].offset_py))
        if run.skipped:
            u = run.skipped[0]
            path, position = self._log_place(u.position)
            out.append(finding(
                TIMER_UNIT_STRANDED, path, position,
                f"{len(run.skipped)} pending unit(s) fire between timercheck's read time and "
                f"{_when(self.load.curr_read_time_ms)} (the next start's read time: now - 7 days + 60 s): "
                f"never read, never delivered", units=len(run.skipped), timer_log_offset=u.position))
        return out

    # -- the timer log against the commit log ---------------------------------------------------
    def _against_commit_log(self) -> list[Finding]:
        store, load = self.start.store, self.load
        past, out, named = [], [], set()
        dropped = self.run.dropped if self.run is not None else ()  # pending units the start's dequeue drops
        dropping = {u.position for u in dropped}
        read_from = load.curr_read_time_ms
        cols = self.start.disk_log.columns
        offset_py, size_py = cols["offset_py"], cols["size_py"].astype(np.int64)
        # cut by recover / deleted with its commit log file (delivered long ago): nothing to say
        kept = (cols["position"] < load.cut_at) & (offset_py >= store.commit_log_min)
        beyond = kept & (offset_py > store.commit_log_max - size_py)
        past = units_of(cols, np.flatnonzero(beyond))
        odd = kept & ~beyond & ~self.start.plain.disk()  # a plain unit has its own record (store/timer/records.py)
        for u in units_of(cols, np.flatnonzero(odd)):
            rec = store.record(u.offset_py, u.size_py)
            why = None
            if rec is None:
                why = "no record decodes there"
            elif rec.topic != TIMER_TOPIC:
                why = f"the record there is of topic {rec.topic}"
            elif topic_hash(rec.properties.get(REAL_TOPIC)) != u.hash_code_of_real_topic:
                why = (f"its REAL_TOPIC {rec.properties.get(REAL_TOPIC)!r} has hash "
                       f"{topic_hash(rec.properties.get(REAL_TOPIC))}, not the unit's {u.hash_code_of_real_topic}")
            if why:
                named.add(u.position)
                path, position = self._log_place(u.position)
                out.append(finding(TIMER_UNIT_RECORD_MISMATCH, path, position,
                                   f"unit at {u.position} points at commit log [{u.offset_py}, +{u.size_py}): {why}"
                                   + (": dropped when due" if u.position in dropping else ""),
                                   consequence=Consequence.DROPS_MESSAGES if u.position in dropping else None,
                                   commit_log_offset=u.offset_py, timer_log_offset=u.position))
        if past:
            due = [u for u in past if u.deliver_time_ms >= read_from
                   and not (need_delete(u.magic) and not need_roll(u.magic))]
            u = past[0]
            path, position = self._log_place(u.position)
            out.insert(0, finding(
                TIMER_UNIT_PAST_COMMIT_LOG, path, position,
                f"{len(past)} timer log unit(s) from {u.position} point at records past the commit log's recovered "
                f"end {store.commit_log_max} (from {u.offset_py}): {len(due)} still pending, each read fails "
                f"3 times when due and the unit is dropped silently; records written after the start reuse those "
                f"offsets", consequence=None if due else Consequence.NONE, units=len(past), pending=len(due),
                commit_log_offset=u.offset_py, timer_log_offset=u.position))
        # units the start's dequeue drops that the files alone do not show as units: the broker reads
        # a timer log file cut short as zeros past its end, and a unit across that end as one
        named |= {u.position for u in past}
        missed = [u for u in dropped if u.position not in named]
        if missed:
            u = missed[0]
            path, position = self._log_place(u.position)
            out.append(finding(
                TIMER_UNIT_RECORD_MISMATCH, path, position,
                f"{len(missed)} pending unit(s) from {u.position}, as the broker reads them (bytes a file does not "
                f"hold read as zeros), point at commit log [{u.offset_py}, +{u.size_py}) where no record reads: each "
                f"read fails 3 times when due and the unit is dropped silently", consequence=Consequence.DROPS_MESSAGES,
                units=len(missed), commit_log_offset=u.offset_py, timer_log_offset=u.position))
        return out

    # -- timermetrics against the units ---------------------------------------------------------
    def _metrics(self) -> list[Finding]:
        load = self.load
        cp = load.checkpoint
        if not load.timing_count or not (cp.present and cp.last_read_time_ms):
            return []  # without the read time the broker had, which units were pending is not known
        cols = self.start.disk_log.columns
        counted = (cols["position"] < load.cut_at) & np.asarray(deliver_times(cols) >= cp.last_read_time_ms, dtype=bool)
        magic = cols["magic"][counted]
        # a delete unit counts -1 rolled or not (TimerMetrics: -1 per delete unit; a recall whose delete
        # unit rolled nets out with the unit it recalls: the timer fixture's TimerPayTopic, 6 as the engine's)
        recalls = (magic & MAGIC_DELETE) != 0
        unit_hashes = cols["hash_code_of_real_topic"][counted]
        topics = sorted(load.timing_count["timingCount"].items())
        if len(topics) <= _FEW_TOPICS:  # each topic's units counted by a comparison: no sort of the hashes
            weight = np.where(recalls, -1, 1)
            counts = {h: int(weight[unit_hashes == h].sum()) for h in {topic_hash(t) for t, _ in topics}}
        else:
            hashes, which = np.unique(unit_hashes, return_inverse=True)
            counts = dict(zip(hashes.tolist(), np.bincount(which, np.where(recalls, -1, 1), len(hashes)).astype(np.int64).tolist()))
        differ = {}
        for topic, m in topics:
            have = counts.get(topic_hash(topic), 0)
            if have != m["count"]:
                differ[topic] = {"timing_count": m["count"], "pending_units": have}
        if not differ:
            return []
        said = ", ".join(f"{t} {d['timing_count']} (units: {d['pending_units']})" for t, d in differ.items())
        return [finding(TIMER_METRICS_DRIFT, self.root / CONFIG_DIR / "timermetrics", None,
                        f"timingCount differs from the pending units: {said}; the broker revises it "
                        f"itself (checkAndReviseMetrics)", topics=differ)]

    # -- the state ------------------------------------------------------------------------------
    def _state(self) -> Finding:
        load, run = self.load, self.run
        pending = load.wheel.all_num(load.curr_read_time_ms)
        nxt = run.chains.first_with_units()
        cols = self.start.disk_log.columns
        writes = cols["curr_write_time"][cols["position"] < load.cut_at]
        last_write = int(writes.max()) if len(writes) else 0
        lo, hi = load.enqueue_again
        return finding(
            TIMER_STATE, self.root / TIMERWHEEL_FILE, None,
            f"{pending} pending timer message(s)"
            + (f", next fire {_when(nxt.time_ms)} (slot {nxt.index})" if nxt else "")
            + f"; read time {_when(load.curr_read_time_ms)} ({load.read_time_reason})"
            + (f", last write {_when(last_write)}" if last_write else "")
            + f"; timer queue offset {load.curr_queue_offset} of {hi}; timer log ends at {load.cut_at}",
            pending=pending, next_fire_time_ms=nxt.time_ms if nxt else None,
            read_time_ms=load.curr_read_time_ms, write_time_ms=last_write or None,
            timer_queue_offset=load.curr_queue_offset)
