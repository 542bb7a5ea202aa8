"""The plan ``recover`` prints for a QMQ store: JSON as the document is; for people, what
QMQ's next start does, then each change ``--apply`` makes, numbered."""
from __future__ import annotations

import sys

from rmqtool.report.plans import live_header, numbered, paths_in, said
from rmqtool.report.sink import render_document
from rmqtool.store.unfinished import undo_command


def _ranges(ranges) -> str:
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def _broker_lines(start: dict) -> list[str]:
    if not start["started"]:
        r = start["refusal"]
        what = "refuses to start" if r["kind"] == "refused" else "never finishes starting"
        return [f"QMQ's next start {what}: {r['exception'] or 'the replay stops'}: {r['message']}"
                + (f" ({r['file']})" if r["file"] else "")]
    lines = []
    log = start["message_log"]
    if log["cut_at"] is not None:
        lines.append(f"QMQ's next start ends the message log at {log['cut_at']}, before its written end "
                     f"{log['written_end']}: {len(log['records_lost'])} record(s) dropped")
    else:
        lines.append(f"QMQ's next start keeps the message log whole (to {log['max_offset']}) and replays it from "
                     f"{log['replay_from']}")
    for s in start["subjects"]:
        if s["served_success_without_message"]:
            fills = s.get("fills_without_record")
            lines.append(f"{s['subject']}: sequences {_ranges(s['served_success_without_message'])} served as "
                         f"SUCCESS with no message" + (f" ({_ranges(fills)}: fill units where no record is, their "
                                                       f"messages lost before)" if fills else ""))
        if s["not_served_kept"]:  # those past the cut are in its line
            lines.append(f"{s['subject']}: sequences {_ranges(s['not_served_kept'])} in the message log, not served")
    return lines


def _action_line(a: dict) -> str:
    if a["action"] == "move":
        return f"move {a['file']} into the backup: {a['reason']}"
    if a["action"] == "zero":
        return f"zero {a['file']} [{a['start']}, {a['end']}): {a['reason']}"
    if a["action"] == "rewrite consumer log":
        return (f"rewrite {a['subject']}'s consumer log from sequence {a['first_sequence']}: {a['units']} unit(s)"
                + (f", {a['fill_units']} of them fill" if a["fill_units"] else "") + f" ({a['reason']})")
    return f"write {a['file']}: the message checkpoint at {a['message_log_offset']}, {a['subjects']} subject(s)"


def show_qmq_plan(doc: dict, fmt: str, applied: bool = False, live=None) -> None:
    if fmt != "table":
        render_document(doc, fmt, title="recovery plan")
        return
    lines = _broker_lines(doc["broker_start"]) + [_action_line(a) for a in doc["actions"]]
    if not doc["actions"]:
        lines.append("--apply changes nothing")
    elif doc["records_dropped"]:
        lines.append(f"{len(doc['records_dropped'])} record(s) past the cut are lost: rmqtool salvage keeps them "
                     f"first")
    reasons: dict = {}
    for record in doc.get("records_unserved", ()):
        reasons[record["reason"]] = reasons.get(record["reason"], 0) + 1
    for reason, n in reasons.items():
        lines.append(f"{n} record(s) with no consumer log unit after the repair ({reason}): rmqtool salvage keeps "
                     f"them first")
    unit = doc.get("consumer_log_unit_bytes") or {}
    if any(a["kind"] == "rewrite consumer log" for a in doc["actions"]) and unit.get("taken_from") != "files":
        said_by = ("QMQ's default: no consumer log in the store shows consumerlog.v2.enable, so --apply refuses "
                   "until --broker-config or --assume-defaults" if unit.get("taken_from") == "default"
                   else unit.get("taken_from"))
        lines.append(f"consumer logs are written in {unit.get('value')}-byte units ({said_by})")
    out, keep = sys.stdout, paths_in(doc)
    numbered(lines, out, live_header(live), keep)
    if applied:
        a = doc["applied"]
        if not a.get("backup_dir"):
            said(f"nothing to change: nothing written to {a['store_path']}", out, keep)
        else:
            said(f"applied to {a['store_path']}; backup in {a['backup_dir']} ({undo_command(a['backup_dir'])} "
                 f"puts it back)", out, keep)
