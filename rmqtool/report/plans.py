"""The plans recover, redispatch and offsets reset print: JSON as the document is, for people
numbered lines (wrapped to the terminal, at most 100 columns, a path broken only after a
``/``); the sizes files are written with. A plan for people says what changes: the queues
it leaves as they are are one line with their count (``--wide`` and JSON list each)."""
from __future__ import annotations

import collections
import shutil
import sys
from typing import TextIO

from rmqtool.report.columns import iso_ms
from rmqtool.report.progress import erase_bars
from rmqtool.report.sink import Sink, render_document
from rmqtool.report.wrap import wrap
from rmqtool.store.unfinished import undo_command

MOST_WIDTH = 100  # a plan's lines are read, not scanned: no wider than this on a wide terminal


def _width() -> int:
    return min(shutil.get_terminal_size((80, 24)).columns, MOST_WIDTH)


def paths_in(doc) -> set[str]:
    """The paths a plan's document names (a ``*path``, ``*_dir`` or ``file`` field, at any
    depth): its text never breaks at a space of theirs."""
    found, todo = set(), [doc]
    while todo:
        d = todo.pop()
        items = d.items() if isinstance(d, dict) else enumerate(d) if isinstance(d, list) else ()
        for k, v in items:
            if isinstance(v, (dict, list)):
                todo.append(v)
            elif isinstance(v, str) and isinstance(k, str) and (k.endswith(("path", "_dir")) or k == "file"):
                found.add(v)
    return found


def numbered(lines: list[str], out: TextIO, header: list[str] = (), keep=()) -> None:
    """The plan's steps numbered under its ``header`` lines, each wrapped to the width;
    ``keep``: the paths they name (:func:`paths_in`)."""
    width = _width()
    erase_bars()
    for line in header:
        out.write("\n".join(wrap(line, width, "", "    ", keep)) + "\n")
    for n, line in enumerate(lines, 1):  # a path breaks after a "/", never inside a file's name
        out.write("\n".join(wrap(line, width, f"{n:>2}. ", "    ", keep)) + "\n")


def said(text: str, out: TextIO, keep=()) -> None:
    """One line of a plan's text after its steps (what was applied), wrapped as they are."""
    out.write("\n".join(wrap(text, _width(), "", "    ", keep)) + "\n")


def unchanged(count: int, what: str = "queue") -> str:
    """The one line that stands for the rows a plan leaves as they are."""
    return f"{count} {what}{'' if count == 1 else 's'} unchanged (--wide or -f json lists each)"


def live_header(live, abort: bool = False) -> list[str]:
    """A plan of a store a process holds (``StoreView.live``) starts by saying so; ``abort``:
    the abort file is there, which a running broker keeps until it shuts down."""
    if live is None:
        return []
    return [f"LIVE STORE: PID {live.pid} holds {live.root} (a running broker or writer). This plan is of its files "
            f"as they are this moment, while they change"
            + ("; the abort file is the running broker's, not a crash's" if abort else "")
            + ". --apply refuses a live store: stop the broker first."]


def size_lines(sizes, unknown: list[str]) -> list[str]:
    """The plan's table lines about sizes: those given or assumed, and where each comes from
    (sizes the store's files show go without saying), then why --apply refuses, if it does."""
    said = []
    for name, s in sizes.to_json().items():
        if s["taken_from"] in ("option", "broker-config"):
            said.append(f"{name} {s['value']} ({s['shown_by']})")
        elif name in unknown:
            said.append(f"{name} {s['value']}: the broker's default, {s['shown_by']}")
    lines = [f"files are written with {'; '.join(said)}"] if said else []
    why = sizes.refusal(unknown)
    if why:
        lines.append(f"--apply refuses: {why}")
    return lines


def show_recovery_plan(doc: dict, plan, fmt: str, applied: bool = False, sizes=None, *, wide: bool = False,
                       live=None) -> None:
    """recover's plan (``doc`` is ``plan.to_json()`` with sizes and what was applied); ``wide``:
    a line for every queue; ``live``: the store's live state (``StoreView.live``), said first."""
    if fmt != "table":
        erase_bars()
        render_document(doc, fmt, title="recovery plan")
        return
    lines = _plan_lines(doc, plan, wide)
    if sizes is not None:
        lines += size_lines(sizes, doc["sizes_unknown"])
    out, keep = sys.stdout, paths_in(doc)
    numbered(lines, out, live_header(live, doc.get("recovery") == "abnormal"), keep)
    if applied:
        a = doc["applied"]
        if not a.get("backup_dir") and plan.changes_nothing:
            said(f"nothing to change: nothing written to {a['store_path']}" +
                 (" (a copy of the store as it is)" if a["store_path"] != doc["store_path"] else ""), out, keep)
            return
        said(f"applied to {a['store_path']}" + (f"; backup in {a['backup_dir']} ({undo_command(a['backup_dir'])} "
                                               f"puts it back)" if a.get("backup_dir") else "")
             + (f"; after the replacement the commit log ends at {a['recovered_end']}"
                if "recovered_end" in a else ""), out, keep)


def _keep_lines(k: dict | None) -> list[str]:
    """--keep-past-damage: each damaged record replaced (or refused), and what that keeps."""
    if k is None:
        return ["--keep-past-damage: the walk fails no record; nothing to replace"]
    lines = []
    for q in k["quarantined"]:
        where = f"record at offset {q['offset']} ({q['path']} position {q['position']}, {q['size']} bytes; " \
                f"{q['reason']})"
        if "refused" in q:
            lines.append(f"--keep-past-damage: not replacing the {where}: {q['refused']}; the log is cut there")
        else:
            lines.append(f"quarantine the {where}: a record of the same size takes its place, topic {q['topic']} "
                         f"queue {q['queue_id']} queue offset {q['queue_offset']} (fields from {q['fields_from']}); "
                         f"the original bytes go to the backup")
    if k["kept_messages"]:
        by_queue = ", ".join(f"{name} {n}" for name, n in k["kept_by_queue"].items())
        lines.append(f"--keep-past-damage keeps {k['kept_messages']} messages the broker would drop ({by_queue}); "
                     f"recovered end {k['recovered_end_before']} -> {k['recovered_end_after']}; the plan below is "
                     f"the broker's without it (--apply replans after the replacement)")
    return lines


def _index_line(ix: dict) -> str:
    """What dispatch puts into the index at the start, duplicates and losses said."""
    line = f"dispatch puts {ix['entries_put']} index entries" + (f" into {ix['appended_to']}" if ix["appended_to"]
                                                                else "")
    if ix["entries_repeated"]:
        line += (f"; {ix['entries_repeated']} of them repeat keys a kept index file holds for the last message it "
                 f"indexed (buildIndex skips only offsets below a file's endPhyOffset: the broker does the same)")
    if ix["entries_lost"]:
        line += f"; {ix['entries_lost']} entries of the destroyed files are not put back (their messages lie " \
                f"before where dispatch starts)"
    return line


def _queue_lines(doc: dict, plan, wide: bool) -> list[str]:
    """Each queue the start changes, with what its files hold now; the rest one line with their
    count (``wide``: a line each)."""
    before = plan.outcome.queues_before if plan.outcome is not None else {}
    lines, same = [], 0
    for name, q in doc["queues"].items():
        kind = "batch queue" if name.rsplit("/", 1)[0] in doc.get("batch_topics", ()) else "queue"
        was = before.get(name)
        if was is not None and (was.min_offset, was.max_offset) == (q["min_offset"], q["max_offset"]) and not wide:
            same += 1
            continue
        now = ("" if was is None else " (unchanged)" if (was.min_offset, was.max_offset) == (q["min_offset"],
               q["max_offset"]) else f" (its files hold [{was.min_offset}, {was.max_offset}))")
        lines.append(f"{kind} {name}: offsets [{q['min_offset']}, {q['max_offset']}) after recovery{now}"
                     + (" (it has no file now)" if was is None else ""))
    if same:
        lines.append(unchanged(same))
    return lines


def _plan_lines(doc: dict, plan, wide: bool = False) -> list[str]:
    cl = doc.get("commit_log", {})
    rules = doc["semantics"] if doc.get("semantics_known", True) else f"{doc['semantics']} (not known)"
    lines = [f"{doc['mode']} recovery ({doc['mode_reason']}); broker rules {rules}: {doc['semantics_reason']}"]
    if doc.get("semantics_undecided"):
        lines.append(f"--apply waits for --semantics: {doc['semantics_undecided']}")
    if not doc["loadable"]:
        lines.append(f"the broker would not load this store: {doc['reason']}")
        if doc.get("advice"):
            lines.append(f"what to do: {doc['advice']}")
        return lines
    lines.append(f"recovery starts in {doc['start_file']}: {doc['start_reason']}" if doc["start_file"] is not None
                 else f"recovery starts in no file: {doc['start_reason']}")
    if doc.get("rocksdb_consume_queue"):
        lines.append(doc["rocksdb_consume_queue"]["what_the_broker_does"])
    if doc.get("apply_refused"):
        lines.append(f"--apply refuses this store: {doc['apply_refused']}")
    if cl["recovered_end"] < cl["written_end"]:
        lines.append(f"the commit log is cut at its recovered end {cl['recovered_end']} (its written end is "
                     f"{cl['written_end']}; the walk stopped: {cl['stopped_by']})")
    elif any(m["reason"] == "log cut" for m in doc["lost_messages"]):
        # a torn last record: the written end is before it, the loss is after
        lines.append(f"the commit log ends at {cl['recovered_end']} (recovered end = written end), where the walk "
                     f"stopped: {cl['stopped_by']}")
    else:
        lines.append(f"the commit log keeps every record written: its recovered end is its written end, "
                     f"{cl['recovered_end']}")
    if "keep_past_damage" in doc:
        lines += _keep_lines(doc["keep_past_damage"])
    for a in plan.actions:
        verb = "delete" if a.kind == "delete" else f"zero bytes [{a.start}, {a.end}) of"
        lines.append(f"{verb} {a.path} ({a.finding}: {a.message})")
    ix = doc.get("index_rebuild") or {}
    for path in doc["index_files_destroyed"]:
        if path not in doc["files_deleted"]:
            lines.append(f"keep {path} (" + ("dispatch builds it again as it is" if ix.get("rebuilt_as_is") else
                                             "--keep-index; the broker would destroy it") + ")")
    if ix.get("entries_put") and (doc["index_files_destroyed"] or ix.get("appended_to")):
        lines.append(_index_line(ix))
    if doc.get("batch_topics"):
        lines.append(f"batch consume queue topics: {', '.join(doc['batch_topics'])} ({doc['batch_topics_reason']})")
    lines += _queue_lines(doc, plan, wide)
    ext = doc.get("consume_queue_ext") or {}
    for name, n in ext.get("units_put", {}).items():  # enableConsumeQueueExt
        lines.append(f"queue {name}: dispatch puts {n} ext unit(s) (tags hash, store time) with its units")
    lost = doc["lost_messages"]
    if lost:
        counts = collections.Counter(m["reason"] for m in lost)
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
        lines.append(f"{len(lost)} message{'s' if len(lost) != 1 else ''} lost: the broker will no longer serve "
                     f"{'them' if len(lost) != 1 else 'it'} ({why}; rmqtool salvage "
                     f"keeps those still readable, rmqtool redispatch rebuilds lost units from the commit log):")
        for m in lost[:50]:
            lines.append(f"lost ({m['reason']}): offset {m['commit_log_offset']} {m['topic']}/{m['queue_id']} queue "
                         f"offset {m['queue_offset']} keys {' '.join(m['keys']) or '-'} stored "
                         f"{m['store_timestamp'] or 'unknown'}")
        if len(lost) > 50:
            lines.append(f"... and {len(lost) - 50} more (--format json lists them all)")
    else:
        # the plan reads only where the start's cuts can lose messages: a hole a queue already had is verify's
        lines.append("the start loses no message (of what it cuts and drops); messages a damaged queue already "
                     "hides are verify's to find: it checks every message against its queue")
    lines += [f"note: {n}" for n in doc.get("notes", ())]
    cut = doc.get("index_files_cut_short") or []
    lines += [_cut_index_line(f) for f in cut]
    lines.append(f"dispatch to consume queues and index starts again at {doc['redispatch_from']}: "
                 f"{doc['redispatch_reason']}")
    if doc.get("timer"):
        lines += _timer_lines(doc["timer"])
    lines += [f"left to the start ({f.id}): {f.message}" for f in plan.left]
    if plan.is_empty:
        lines.append(_nothing_to_recover(doc, lost, cut))
    return lines


def _nothing_to_recover(doc: dict, lost: list, cut: list) -> str:
    """The last line of a plan that changes no file: what is wrong all the same, if anything."""
    if lost:  # what the queues lost is lost already: the start changes nothing about it
        return (f"nothing to recover: the start changes no file, but the {len(lost)} messages above stay "
                f"lost until their queues are rebuilt (rmqtool redispatch)")
    losses = (doc.get("timer") or {}).get("run", {}).get("losses")
    if losses:
        return (f"nothing to recover in the files, but the start's timer run above: {losses} (rmqtool verify "
                f"says which; rmqtool redispatch --timer rebuilds the timer store from the commit log)")
    if cut:
        return (f"nothing to recover: the start changes no file, but the {len(cut)} index "
                f"file{'s' if len(cut) != 1 else ''} above stay{'' if len(cut) != 1 else 's'} cut short")
    return "nothing to recover: the store is as a clean shutdown leaves it"


def _cut_index_line(f: dict) -> str:
    return (f"index file {f['file']} is cut short: {f['size']} bytes of the {f['mapped_size']} the broker maps it "
            f"at; the start keeps it and grows it, and keys of the entries cut off are not found by key (rmqtool "
            f"redispatch --index --apply rebuilds the index)")


def _timer_plan_lines(t: dict) -> list[str]:
    """redispatch --timer: the units and slots written, the pending messages by fire time, what gets no unit."""
    anchors = sum(1 for u in t["units"] if u["anchor"])
    lines = [f"rebuild the timer store: {len(t['units'])} units ({anchors} anchoring the timer queue offset at "
             f"{t['timer_queue_offset']}), {len(t['blanks'])} blanks, {len(t['slots'])} wheel slots, timer log end "
             f"{t['timer_log_end']}, written at {t['write_timestamp']} (from {t['write_timestamp_from']})"]
    lines += [f"{name} {s['value']} ({s['shown_by']})" for name, s in t["settings"].items()
              if name != "mapped_file_size_timer_log"]
    for r in t["pending"]:
        lines.append(f"pending {r['real_topic']}/{r['real_queue_id']} {r['uniq_key']} keys {r['keys']} "
                     f"fires at {r['fire_timestamp']} (record {r['commit_log_offset']})")
    for why, records in t["dropped"].items():
        if records:
            lines.append(f"no unit, {why}: {len(records)} records "
                         f"({', '.join(str(r['keys'] or r['uniq_key']) for r in records[:10])}"
                         f"{', ...' if len(records) > 10 else ''})")
    return lines


def _timer_lines(t: dict) -> list[str]:
    """What the next start's TimerMessageStore does (recover's plan, its timer section)."""
    if not t["loadable"]:
        return [f"the timer store does not load: {t['reason']}"]
    lines = [f"timer log: rescanned from {t['rescan_from']}, ends at {t['cut_at']} ({t['cut_reason']})"
             + (f"; files destroyed: {', '.join(t['files_destroyed'])}" if t["files_destroyed"] else "")
             + (f"; slots past the end rescanned from {t['recheck_from']}" if t["recheck_from"] is not None else ""),
             f"timer wheel: {len(t['slots_revised'])} slot(s) revised; read time {iso_ms(t['read_time_ms'])} "
             f"({t['read_time_reason']})",
             f"timer queue: rmq_sys_wheel_timer offsets [{t['enqueue_again']['from']}, {t['enqueue_again']['to']}) "
             f"enqueued ({t['queue_offset_reason']})"]
    run = t.get("run")
    if run:
        e = run["enqueued"]
        lines.append(f"timer run at {iso_ms(run['write_time_ms'])}: {e['units']} new unit(s), {e['delivered_at_once']} "
                     f"delivered at once, {run['units_walked_again']} unit(s) in slots already due walked again")
        if run["first_loop"]:
            lines.append(f"timer dequeue loops at slot {run['first_loop']['slot_index']} (fire time "
                         f"{iso_ms(run['first_loop']['fire_time_ms'])}): no timer message after it is delivered")
        if run["stranded"] or run["skipped_by_read_time"]:
            lines.append(f"timer units never delivered: {len(run['stranded'])} no chain reaches, "
                         f"{len(run['skipped_by_read_time'])} behind the read time")
        if run["dropped"]:
            lines.append(f"timer units dropped when due (their records are past the commit log's end): "
                         f"{len(run['dropped'])}")
    return lines


def show_redispatch_plan(doc: dict, fmt: str, sizes, *, wide: bool = False) -> None:
    """redispatch's plan: the files rebuilt, how each differs from the store's (``wide``: those
    already as built too), the sizes."""
    if fmt != "table":
        erase_bars()
        render_document(doc, fmt, title="redispatch plan")
        return
    if "timer" in doc:
        lines = _timer_plan_lines(doc["timer"])
    else:
        what = " and ".join(w for w, on in (("consume queues", doc["consume_queues"]), ("index", doc["index"])) if on)
        lines = [f"rebuild {what} from commit log offsets [{doc['from_offset']}, {doc['to_offset']}): "
                 f"{doc['records_dispatched']} records dispatched"]
        for key, said in (("multi_dispatch_queues_built", "rebuild too the queues of {n} topic(s) the records "
                                                         "multi-dispatch to ({names}), as the broker's dispatch "
                                                         "(enableMultiDispatch) writes them"),
                          ("multi_dispatch_queues_kept", "keep as they are the queues of {n} topic(s) the records "
                                                        "multi-dispatch to ({names}): rmqtool rebuilds them only "
                                                        "with every queue and without the ext")):
            names = doc.get(key) or []
            if names:
                lines.append(said.format(n=len(names), names=", ".join(names[:3]) + (" and more" if len(names) > 3
                                                                                      else "")))
    for c in doc["changes"]:
        if c["kind"] != "same" or wide:
            units = f" ({c['units']} units)" if c["units"] is not None else ""
            lines.append(f"{c['kind']} {c['file']}{units}")
    n = doc["counts"]
    lines.append(f"{n['create']} files created, {n['replace']} replaced, {n['delete']} deleted, "
                 f"{n['same']} already as built")
    if sizes is not None:
        lines += size_lines(sizes, doc["sizes_unknown"])
        ext = doc.get("consume_queue_ext_file_size")
        if ext is not None and ext["taken_from"] == "default":
            lines.append(f"ext files are written with mappedFileSizeConsumeQueueExt {ext['value']}, the broker's "
                         f"default: nothing in the store shows it (--broker-config gives it)")
    else:  # the timer log's file size
        lines += [f"{name} {s['value']}: the broker's default, {s['shown_by']}"
                  for name, s in doc["sizes"].items() if name in doc["sizes_unknown"]]
    if "applied" in doc:
        lines.append(f"applied; backup in {doc['applied']['backup_dir']} (rmqtool undo puts it back)")
    numbered(lines, sys.stdout, keep=paths_in(doc))


def show_reset_plan(run, fmt: str, *, wide: bool = False, columns: str | None = None) -> list[str]:
    """offsets reset's plan: a row for each queue whose offset changes, and one line for those
    it leaves (``wide`` and JSON: a row each); returns the lines for stderr after it."""
    summed = fmt == "table" and not wide
    shown = [r for r in run.plan.rows if r.changed or not summed]
    sink = Sink(fmt, kind="offset_reset", wide=wide, select=columns)
    if shown or not summed:
        for row in shown:
            sink.row(row.record())
        sink.close()
    if len(shown) < len(run.plan.rows):
        said(unchanged(len(run.plan.rows) - len(shown)), sink.stream)
    return run.notices()
