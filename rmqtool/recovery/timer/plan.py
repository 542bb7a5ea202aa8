"""recover's plan, its timer section: what the next start's TimerMessageStore does to the
timer store (recovery/timer's simulation), as a document."""
from __future__ import annotations

import collections

from rmqtool.recovery.timer.start import TimerStart


def timer_section(start: TimerStart) -> dict:
    """The timer store's load, recover and run at the plan's clock."""
    load, run = start.load, start.run
    out = {"loadable": load.loadable, "reason": load.reason, "now_ms": load.now_ms}
    if not load.loadable:
        out["refused_file"] = str(start.refused) if start.refused else None
        return out
    lo, hi = load.enqueue_again
    out |= {
        "rescan_from": load.rescan_from, "cut_at": load.cut_at, "cut_reason": load.cut_reason,
        "files_destroyed": load.files_destroyed, "recheck_from": load.recheck_from,
        "slots_revised": [{"index": r.index, "before": _slot(r.before), "after": _slot(r.after)}
                          for r in load.revised],
        "queue_offset": load.curr_queue_offset, "queue_offset_reason": load.queue_offset_reason,
        "enqueue_again": {"from": lo, "to": hi},
        "read_time_ms": load.curr_read_time_ms, "read_time_reason": load.read_time_reason,
        "state_after_load": load.state(),
    }
    if run is not None:
        actions = collections.Counter(e.action for e in run.enqueued)
        out["run"] = {
            "write_time_ms": run.write_time_ms,
            "enqueued": {"units": actions["unit"], "delivered_at_once": actions["deliverNow"],
                         "record_missing": actions["missing"], "timer_out_unparseable": actions["unparseable"]},
            "units_walked_again": run.walked_again,
            "first_loop": None if run.first_loop is None else {
                "slot_index": run.first_loop.index, "fire_time_ms": run.first_loop.time_ms,
                "loops_back_to": run.first_loop.chain.loops_back_to},
            "loops": [c.index for c in run.chains.loops()],
            "stranded": [u.position for u in run.stranded],
            "skipped_by_read_time": [u.position for u in run.skipped],
            "dropped": [u.position for u in run.dropped],
        }
        out["run"]["losses"] = timer_run_losses(out)
    return out


def timer_run_losses(section: dict) -> str | None:
    """What the next start's timer run (the section's ``run``) does that loses a delivery or
    makes one again, in words; None when it does neither. The files may need no change and
    still say this (a wheel slot zeroed, timercheck gone): then there is something to recover."""
    run = section.get("run")
    if not run:
        return None
    said = []
    if run["stranded"] or run["skipped_by_read_time"]:
        said.append(f"{len(run['stranded']) + len(run['skipped_by_read_time'])} timer unit(s) never delivered")
    if run["first_loop"]:
        said.append(f"dequeue loops at slot {run['first_loop']['slot_index']}: no timer message after it delivered")
    if run["units_walked_again"]:
        said.append(f"{run['units_walked_again']} unit(s) in slots already due walked again: their messages "
                    f"delivered again")
    return "; ".join(said) or None


def _slot(t: tuple) -> dict:
    time_value, first, last, num = t
    return {"storedTimeValue": time_value, "firstPos": first, "lastPos": last, "num": num}
