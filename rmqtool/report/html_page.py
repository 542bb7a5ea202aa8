"""``rmqtool report --html``: one self-contained page drawn from the report's document
(inspect/report_model.py), for an operator to read and attach to an incident.

No script, no network: inline SVG and the one stylesheet (report/html_style.py). Every
datum goes through :func:`esc` (``html.escape``); a store's paths, topics and messages are
data, never markup. The drawings scale commit log offsets to the mapped file size (a strip a
file), queue offsets to each queue's largest, and index files to the time they cover; what
each mark means is in its legend and its SVG ``<title>`` (a tooltip on screen).
"""
from __future__ import annotations

import html
import os
import pathlib

from rmqtool.findings import CONSEQUENCE_MEANINGS, Consequence
from rmqtool.report.columns import human_size, terminal_safe
from rmqtool.report.finding_table import finding_groups
from rmqtool.report.html_style import CSS
from rmqtool.report.records import human_time
from rmqtool.report.text_file import write_text_atomically

STRIP = 1000  # SVG units across a strip: the largest commit log file
MIN_MARK = 3  # a damaged record (or any range) stays visible however small it is
ZOOM_BELOW = 0.1  # a file written less than this far, with marks in it, gets an enlarged strip of its written part


def esc(value) -> str:
    """Text for the page: markup escaped, and control characters and lone surrogates of the
    store's names shown as escapes (invisible ones would make two names look alike; a
    surrogate cannot be written as UTF-8)."""
    return html.escape("" if value is None else terminal_safe(str(value)), quote=True)


def render_page(doc: dict) -> str:
    """The page for a report document."""
    store = doc["store"]
    body = "\n".join([_header(doc), _commit_log(doc), _queues(doc), _consumer_logs(doc), _index(doc), _findings(doc),
                      f'<footer>rmqtool report of <span class="path">{esc(store["path"])}</span>, '
                      f'{esc(human_time(store["report_timestamp"]))}. Offsets are {_log_name(store)} offsets (bytes) '
                      'unless a column says queue offset (messages). <code>rmqtool report STORE -f json</code> '
                      'gives the same data.</footer>'])
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>rmqtool report: {esc(store['path'])}</title>\n<style>{CSS}</style>\n</head>\n"
            f"<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n")


def write_page(doc: dict, path: str | os.PathLike) -> pathlib.Path:
    """Write the page at ``path`` whole or not at all (a temp file beside it, then renamed)."""
    return write_text_atomically(path, render_page(doc), "the report page")


# --- the store at a glance ---------------------------------------------------------------------

def _qmq(store: dict) -> bool:
    return store.get("family") == "qmq"


def _next_start(store: dict) -> str:
    """How the page names the next start: RocketMQ's recovery mode, QMQ's replay."""
    return "The next start (its message log replay)" if _qmq(store) else f"The next start ({store['recovery']} recovery)"


def _verdict(store: dict) -> tuple[str, str]:
    """(css class, one sentence): what the next start does."""
    if store["loadable"] is False:
        return "bad", f"The broker will not start on this store: {store['reason']}. {store['advice'] or ''}"
    if store["live"]:
        return "warn", (f"A running broker (PID {store['locked_by_pid']}) holds this store: it is read up to commit "
                        f"log offset {store['written_end']}, its written end now; its next start is not predicted.")
    if store["recovery"] is None:
        return "warn", "The broker's next start could not be simulated here: no commit log, or one it cannot read."
    dropped = store["bytes_dropped"] or 0
    if dropped > 0:
        return "bad", (f"{_next_start(store)} cuts the {_log_name(store)} at offset "
                       f"{store['recovered_end']}: the {dropped} bytes written after it are dropped.")
    cls = "warn" if store["errors"] or store["warnings"] else ""
    errors = f" Verify found {store['errors']} errors: see the findings." if store["errors"] else ""
    return cls, f"{_next_start(store)} keeps every record written.{errors}"


NOWRAP = ("recovery starts at", "replay starts in", "dropped")  # a file name or a size: never broken


def _log_name(store: dict) -> str:
    return "message log" if _qmq(store) else "commit log"


def _header(doc: dict) -> str:
    s = doc["store"]
    cls, sentence = _verdict(s)
    items = [
        ("store", "QMQ" if _qmq(s) else "RocketMQ"), ("broker rules", s["semantics"]),
        ("shut down", None if s["clean_shutdown"] is None else "cleanly" if s["clean_shutdown"] else "not cleanly"),
        ("live", "yes: a broker holds it" if s["live"] else "no"),
        ("next start", None if not s["recovery"] else "replay" if _qmq(s) else f"{s['recovery']} recovery"),
        ("replay starts in" if _qmq(s) else "recovery starts at", s["start_file"]), ("written end", s["written_end"]),
        ("recovered end", s["recovered_end"]), ("dropped", _bytes(s["bytes_dropped"])),
        ("unflushed", _unflushed(s)),
        ("mapped file size", _size(s["mapped_file_size"]) if s["mapped_file_size"] is not None else None),
        ("errors", s["errors"]), ("warnings", s["warnings"]),
    ]
    if _qmq(s):  # what a QMQ store has no answer for (no abort marker, one set of rules, no flush time)
        items = [(k, v) for k, v in items if v is not None]
    cells = "".join(f"<div><dt>{esc(k)}</dt><dd><span class=\"{'nowrap' if k in NOWRAP else ''}\">"
                    f"{esc(v if v is not None else '-')}</span></dd></div>" for k, v in items)
    reasons = "".join(f"<li>{esc(x)}</li>" for x in (s["mode_reason"], s["start_reason"]) if x)
    return (f'<header><h1>rmqtool report</h1><div class="path mono">{esc(s["path"])}</div>'
            f'<div class="muted">at {esc(human_time(s["report_timestamp"]))}</div>'
            f'<p class="verdict {cls}" id="verdict">{esc(sentence)}</p>'
            f'<dl class="summary">{cells}</dl>'
            + (f'<ul class="reasons">{reasons}</ul>' if reasons else "") + "</header>")


def _bytes(n) -> str | None:
    return None if n is None else f"{n} B" if n < 1024 else f"{human_size(n)} ({n} B)"


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _size(n: int) -> str:
    return human_size(n) if n >= 1024 else f"{n} B"


def _unflushed(s: dict) -> str | None:
    if s["unflushed_bytes"] is None:
        return None
    ms = s["unflushed_ms"]
    text = _size(s["unflushed_bytes"]) + (f", {ms} ms" if ms is not None else "")
    return text + "; flushed at the clean shutdown" if s["clean_shutdown"] else text


# --- the commit log ------------------------------------------------------------------------------

LEGEND_LOG = [("file", "file (mapped size)"), ("missing", "file missing"), ("written", "written"), ("unflushed", "after the checkpoint's flush time"),
              ("damaged", "damaged (verify)"), ("dropped", "dropped by the next start"),
              ("start", "recovery starts in this file"), ("cut", "the next start cuts the log here")]


def _log_legend(store: dict, segs: list[dict]) -> list:
    """The commit log's legend; a QMQ store's names its replay and has no flush time; "file
    missing" only where a file is."""
    missing = any(s.get("missing_files") for s in segs)
    out = [(k, text) for k, text in LEGEND_LOG if (k != "missing" or missing) and (k != "unflushed" or not _qmq(store))]
    return [(k, "the replay starts in this file" if k == "start" and _qmq(store) else text) for k, text in out]


def _legend(entries) -> str:
    return '<div class="legend">' + "".join(
        f'<span><i class="swatch sw-{k}"></i>{esc(text)}</span>' for k, text in entries) + "</div>"


def _rect(cls: str, x0: float, x1: float, title: str, extra: str = "", band: tuple = (0, 20)) -> str:
    """A range of a strip (at least MIN_MARK wide); ``band``: its top and bottom (the unflushed
    window is the strip's lower part, so what lies under it, written or dropped, still shows)."""
    width = max(x1 - x0, MIN_MARK)
    x = min(x0, STRIP - width)
    return (f'<rect class="{cls}" x="{x:.2f}" y="{band[0]}" width="{width:.2f}" height="{band[1] - band[0]}"{extra}>'
            f"<title>{esc(title)}</title></rect>")


def _line(cls: str, x: float, title: str) -> str:
    x = min(max(x, 1.5), STRIP - 1.5)
    return (f'<line class="{cls}" x1="{x:.2f}" y1="0" x2="{x:.2f}" y2="20" vector-effect="non-scaling-stroke">'
            f"<title>{esc(title)}</title></line>")


def _commit_log(doc: dict) -> str:
    segs, store = doc["segments"], doc["store"]
    title = _log_name(store).capitalize()
    if not segs:
        return f'<section id="commitlog"><h2>{title}</h2><p>No {_log_name(store)} files.</p></section>'
    scale = STRIP / max(max(s["size"] for s in segs), store["mapped_file_size"] or 1, 1)
    damaged = {}
    for d in doc["damaged_ranges"]:
        damaged.setdefault(d["file"], []).append(d)
    rows = []
    for s in segs:
        if s.get("missing_files"):
            rows.append(_missing(s, scale))
            continue
        base = s["base_offset"]
        flags = []
        if s["recovery_start"]:
            flags.append(f'<span class="flag-start">{"replay" if _qmq(store) else "recovery"} starts here</span>')
        if "cut_at" in s:
            flags.append(f'<span class="flag-cut">cut at {esc(s["cut_at"])}</span>')
        if s["damaged"]:
            flags.append(f'<span class="flag-damaged">{esc(s["damaged"])} damaged</span>')
        flags.append(f'{esc(_size(s["written_to"] - base))} written')
        marks = damaged.get(s["file"], [])
        strips = [_strip(_marks(s, store, marks, scale, zoom=False), f'{_log_name(store)} file {s["file"]}')]
        written_part = (s["written_to"] - base) * scale
        if 0 < written_part < ZOOM_BELOW * STRIP and (marks or "cut_at" in s or "unflushed_from" in s):
            extent = (s["written_to"] - base) * 1.1  # the written part and a little after it, across the strip
            strips.append(f'<span class="zoom-note">enlarged: the first {esc(_size(round(extent)))} of the file</span>'
                          + _strip(_marks(s, store, marks, STRIP / extent, zoom=True),
                                   f'the written part of {s["file"]}, enlarged', "strip zoom"))
        rows.append(f'<div class="segment" data-file="{esc(s["file"])}"'
                    f'{" data-recovery-start" if s["recovery_start"] else ""}>'
                    f'<div class="seg-label"><code>{esc(s["file"])}</code>'
                    f'<span class="flags">{" · ".join(flags)}</span></div>'
                    f'<div class="strip-wrap">{"".join(strips)}</div></div>')
    return (f'<section id="commitlog"><h2>{title}</h2>'
            f'<p class="muted">{_count(sum(not s.get("missing_files") for s in segs), "file")}, each strip one file '
            f'to scale (the full width is {esc(_bytes(round(STRIP / scale)))}).</p>'
            + _legend(_log_legend(store, segs)) + "".join(rows) + "</section>")


def _strip(parts: list[str], label: str, cls: str = "strip") -> str:
    return (f'<svg class="{cls}" viewBox="0 0 {STRIP} 20" preserveAspectRatio="none" role="img" '
            f'aria-label="{esc(label)}">{"".join(parts)}</svg>')


def _marks(s: dict, store: dict, damaged: list[dict], scale: float, *, zoom: bool) -> list[str]:
    """A file's strip: its size, what is written, dropped, unflushed and damaged, where the
    start's walk begins and where it cuts. ``zoom``: the enlarged copy (its marks carry no
    data attributes: each range is counted once, on the strip drawn to the file's scale)."""
    base, written, recovered = s["base_offset"], store["written_end"], store["recovered_end"]

    def x(offset):
        return (offset - base) * scale

    parts = [_rect("file", 0, min(s["size"] * scale, STRIP), f'{s["file"]}: {s["size"]} bytes on disk')]
    if s["written_to"] > base:
        parts.append(_rect("written", 0, x(s["written_to"]), f"written: {base} to {s['written_to']}"))
    if recovered is not None and written is not None and recovered < written and s["written_to"] > max(recovered, base):
        lo = max(recovered, base)
        parts.append(_rect("dropped", x(lo), x(s["written_to"]), f"dropped by the next start: {lo} to {s['written_to']}"))
    if "unflushed_from" in s:
        parts.append(_rect("unflushed", x(s["unflushed_from"]), x(s["written_to"]),
                           f"stored after the checkpoint's flush time: {s['unflushed_from']} to {s['written_to']}",
                           band=(12, 20)))
    for d in damaged:
        size = f'{d["bytes"]} bytes' if d["bytes"] is not None else "its length unknown"
        data = "" if zoom else f' data-finding="{esc(d["finding"])}" data-offset="{esc(d["commit_log_offset"])}"'
        parts.append(_rect("damaged", x(d["commit_log_offset"]), x(d["end_offset"] or d["commit_log_offset"]),
                           f'{d["finding"]} at file position {d["file_position"]} ({_log_name(store)} offset '
                           f'{d["commit_log_offset"]}, {size})', data))
    if s["recovery_start"]:
        parts.append(_line("start", 0, f"the next start begins in this file ({store['start_reason']})"))
    if "cut_at" in s:
        parts.append(_line("cut", x(s["cut_at"]), f"the next start cuts the log at {s['cut_at']}"))
    return parts


def _missing(s: dict, scale: float) -> str:
    """A run of commit log files gone from the middle of the log: one strip, outlined."""
    n = s["missing_files"]
    what = f"{n} file{'s' if n > 1 else ''} missing: commit log offsets {s['base_offset']} to {s['end_offset']}"
    mark = (f'<rect class="missing" x="1" y="1" width="{STRIP - 2}" height="18" vector-effect="non-scaling-stroke">'
            f"<title>{esc(what)}</title></rect>")
    return (f'<div class="segment missing-file" data-file="{esc(s["file"])}" data-missing="{esc(n)}">'
            f'<div class="seg-label"><code>{esc(s["file"])}</code><span class="flags">'
            f'<span class="flag-damaged">{esc(what.split(":")[0])}</span></span></div>'
            f'<div class="strip-wrap"><svg class="strip" viewBox="0 0 {STRIP} 20" preserveAspectRatio="none" '
            f'role="img" aria-label="{esc(what)}">{mark}</svg></div></div>')


# --- consume queues and their consumers ---------------------------------------------------------

LEGEND_QUEUES = [("gone", "deleted (before the min offset)"), ("written", "in the queue (min to max)"),
                 ("lag", "not consumed yet (lag)"), ("consumed", "a group's committed offset")]


def _queues(doc: dict) -> str:
    if "consume_queues" not in doc:  # a QMQ store: consumer logs, not consume queues (rmqtool info shows them)
        return ""
    queues = doc["consume_queues"]
    consumers: dict = {}
    for r in doc["consumer_offsets"]:
        consumers.setdefault((r["topic"], r["queue_id"]), []).append(r)
    if not queues:
        return '<section id="queues"><h2>Consume queues</h2><p>No consume queues.</p></section>'
    rows = []
    for q in queues:
        key = (q["topic"], q["queue_id"])
        groups = consumers.get(key, [])
        low, high = q["min_queue_offset"] or 0, q["max_queue_offset"] or 0
        top = max([high, 1] + [g["committed_offset"] for g in groups if g["committed_offset"] is not None])
        s = STRIP / top
        bar = []
        if low > 0:
            bar.append(_rect("gone", 0, low * s, f"queue offsets 0 to {low}: deleted"))
        if high > low:
            bar.append(_rect("present", low * s, high * s, f"queue offsets {low} to {high}"))
        for g in groups:
            c = g["committed_offset"]
            if c is None or c < 0:
                continue
            if g["lag_messages"]:
                bar.append(_rect("lag", max(c, low) * s, high * s, f"{g['group']}: {g['lag_messages']} not consumed"))
            bar.append(_line("consumed", c * s, f"{g['group']} committed {c}"))
        text = "<br>".join(
            f'<span class="mono">{esc(g["group"])}</span>: {esc(g["committed_offset"])}'
            f', lag {esc(g["lag_messages"] if g["lag_messages"] is not None else "-")}'
            + (f' ({esc(g["lag_ms"])} ms)' if g["lag_ms"] else "")
            + (f' <span class="muted">{esc(g["status"])}</span>' if g.get("pull_status") not in (None, "FOUND") else "")
            for g in groups) or '<span class="muted">no committed offset</span>'
        rows.append(f'<tr class="queue" data-queue="{esc(q["topic"])}/{esc(q["queue_id"])}">'
                    f'<td class="path">{esc(q["topic"])}</td><td class="num">{esc(q["queue_id"])}</td>'
                    f'<td class="num">{esc(low)}</td><td class="num">{esc(high)}</td>'
                    f'<td class="bar"><svg viewBox="0 0 {STRIP} 20" preserveAspectRatio="none" role="img" '
                    f'aria-label="queue {esc(q["topic"])}/{esc(q["queue_id"])}">{"".join(bar)}</svg></td>'
                    f'<td>{text}</td></tr>')
    return ('<section id="queues"><h2>Consume queues and consumers</h2>'
            f'<p class="muted">{len(queues)} queues as the next start leaves them; queue offsets count messages, '
            'each bar scaled to its queue.</p>' + _legend(LEGEND_QUEUES)
            + '<div class="table-wrap"><table><thead><tr><th>topic</th><th class="num">queue</th>'
              '<th class="num">min</th><th class="num">max</th><th>offsets</th><th>groups: committed, lag</th>'
              '</tr></thead><tbody>' + "".join(rows) + "</tbody></table></div></section>")


# --- QMQ: consumer logs and their groups ---------------------------------------------------------

LEGEND_CONSUMER_LOGS = [("gone", "deleted (before the first sequence)"), ("written", "units written"),
                        ("lag", "not pulled yet (lag)"), ("consumed", "a group's max pulled sequence")]


def _consumer_logs(doc: dict) -> str:
    if "consumer_logs" not in doc:  # a RocketMQ store: consume queues (_queues)
        return ""
    logs = doc["consumer_logs"]
    groups: dict = {}
    for g in doc["group_progress"]:
        groups.setdefault(g["subject"], []).append(g)
    if not logs and not groups:
        return '<section id="consumer-logs"><h2>Consumer logs</h2><p>No consumer logs.</p></section>'
    rows = []
    for c in logs:
        mine = groups.get(c["subject"], [])
        low, high = c["first_sequence"], c["next_sequence"]
        s = STRIP / max([high, 1] + [g["pull"] + 1 for g in mine])
        bar = []
        if low > 0:
            bar.append(_rect("gone", 0, low * s, f"sequences 0 to {low - 1}: deleted"))
        if high > low:
            bar.append(_rect("present", low * s, high * s, f"sequences {low} to {high - 1}"))
        for g in mine:
            if g["broadcast"] or g["pull"] < 0:
                continue
            if g["lag_messages"]:
                bar.append(_rect("lag", (g["pull"] + 1) * s, high * s, f"{g['group']}: {g['lag_messages']} not pulled"))
            bar.append(_line("consumed", (g["pull"] + 1) * s, f"{g['group']} pulled up to {g['pull']}"))
        text = _groups_text(mine)
        rows.append(f'<tr class="consumer-log" data-subject="{esc(c["subject"])}">'
                    f'<td class="path">{esc(c["subject"])}</td>'
                    f'<td class="num">{esc(low)}</td><td class="num">{esc(high)}</td>'
                    f'<td class="bar"><svg viewBox="0 0 {STRIP} 20" preserveAspectRatio="none" role="img" '
                    f'aria-label="consumer log {esc(c["subject"])}">{"".join(bar)}</svg></td>'
                    f'<td>{text}</td></tr>')
    for subject in sorted(groups.keys() - {c["subject"] for c in logs}):  # progress kept, its log gone
        rows.append(f'<tr class="consumer-log" data-subject="{esc(subject)}"><td class="path">{esc(subject)}</td>'
                    '<td class="num"></td><td class="num"></td><td class="bar muted">no consumer log</td>'
                    f'<td>{_groups_text(groups[subject])}</td></tr>')
    return ('<section id="consumer-logs"><h2>Consumer logs and groups</h2>'
            f'<p class="muted">{len(logs)} subjects as their files end; each group\'s progress as the next start has '
            'it; sequences count messages, each bar scaled to its subject.</p>' + _legend(LEGEND_CONSUMER_LOGS)
            + '<div class="table-wrap"><table><thead><tr><th>subject</th><th class="num">first</th>'
              '<th class="num">next</th><th>sequences</th><th>groups: pulled, lag</th>'
              '</tr></thead><tbody>' + "".join(rows) + "</tbody></table></div></section>")


def _groups_text(mine: list) -> str:
    return "<br>".join(
        f'<span class="mono">{esc(g["group"])}</span>: '
        + (f'broadcast, pulled up to {esc(g["pull"])} <span class="muted">(each consumer its own)</span>'
           if g["broadcast"] else f'pulled up to {esc(g["pull"])}'
           # no lag without the subject's consumer log (nothing to count to): none shown, not "lag "
           + (f', lag {esc(g["lag_messages"])}' if g["lag_messages"] is not None else "")
           + (f' ({esc(g["lag_ms"])} ms)' if g["lag_ms"] else ""))
        for g in mine) or '<span class="muted">no group</span>'


# --- index files ---------------------------------------------------------------------------------

def _index(doc: dict) -> str:
    if "index_files" not in doc:  # a QMQ store keeps no index files
        return ""
    files = doc["index_files"]
    if not files:
        return '<section id="index"><h2>Index coverage</h2><p>No index files.</p></section>'
    timed = [f for f in files if f["begin_timestamp"] > 0 and f["end_timestamp"] >= f["begin_timestamp"]]
    lo = min((f["begin_timestamp"] for f in timed), default=0)
    hi = max((f["end_timestamp"] for f in timed), default=0)
    span = max(hi - lo, 1)
    rows = []
    for f in files:
        entries = max(f["index_count"] - 1, 0)  # the header counts from 1 (slot 0 unused)
        if f in timed:
            x0, x1 = (f["begin_timestamp"] - lo) * STRIP / span, (f["end_timestamp"] - lo) * STRIP / span
            mark = _rect("cover", x0, x1, f'{f["file"]}: {human_time(f["begin_timestamp"])} to '
                                          f'{human_time(f["end_timestamp"])}')
        else:
            mark = _rect("cover-empty", 0, STRIP, f'{f["file"]}: no entries (begin/end timestamp 0)')
        rows.append(f'<tr class="index-file" data-file="{esc(f["file"])}"><td><code>{esc(f["file"])}</code></td>'
                    f'<td class="time">{esc(human_time(f["begin_timestamp"]) if f["begin_timestamp"] else "-")}</td>'
                    f'<td class="time">{esc(human_time(f["end_timestamp"]) if f["end_timestamp"] else "-")}</td>'
                    f'<td class="num">{esc(entries)}</td>'
                    f'<td class="bar"><svg viewBox="0 0 {STRIP} 20" preserveAspectRatio="none" role="img" '
                    f'aria-label="index file {esc(f["file"])}">{mark}</svg></td></tr>')
    axis = (f'<p class="muted">The coverage axis runs from {esc(human_time(lo))} to {esc(human_time(hi))}.</p>'
            if timed else "")
    return ('<section id="index"><h2>Index coverage</h2>'
            '<p class="muted">Each index file\'s store times (its header\'s begin and end timestamps) on one time '
            'axis: a key lookup by time finds messages only where a file covers.</p>'
            '<div class="table-wrap"><table><thead><tr><th>file</th><th>begin</th>'
            '<th>end</th><th class="num">entries</th><th>coverage</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table></div>" + axis + "</section>")


# --- findings ------------------------------------------------------------------------------------

def _findings(doc: dict) -> str:
    rows = doc["findings"]
    if not rows:
        return '<section id="findings"><h2>Findings</h2><p id="no-findings">No findings: verify found nothing.</p></section>'
    by: dict = {}
    for r in rows:
        by.setdefault(r["consequence"], []).append(r)
    order = [c.value for c in CONSEQUENCE_MEANINGS] + sorted(set(by) - {c.value for c in Consequence})
    parts = []
    for c in order:
        if c not in by:
            continue
        meaning = CONSEQUENCE_MEANINGS.get(Consequence(c)) if c in {x.value for x in Consequence} else ""
        items = []
        for g in finding_groups(by[c]):
            r = g.first
            where = g.path_text() or ""
            offset = g.offset_text()
            more = f" [{g.count} findings like it; -f json lists each]" if g.count > 1 else ""
            items.append(
                f'<article class="finding" data-finding="{esc(r["finding"])}" data-severity="{esc(r["severity"])}">'
                f'<div class="head"><span class="sev sev-{esc(r["severity"])}">{esc(r["severity"])}</span>'
                f'<span class="id">{esc(r["finding"])}</span>'
                + (f'<span class="count">×{esc(g.count)}</span>' if g.count > 1 else "")
                + f'<span class="where path">{esc(where)}{" at offset " + esc(offset) if offset else ""}</span></div>'
                f'<p class="message">{esc(r["message"])}{esc(more)}</p>'
                f'<p class="todo"><b>What to do:</b> {esc(r["action"])} '
                f'<span class="muted">({esc(r["meaning"])})</span></p></article>')
        parts.append(f'<section class="consequence" data-consequence="{esc(c)}"><h3>{esc(c)} '
                     f'<span class="meaning">— {esc(meaning)} ({len(by[c])})</span></h3>{"".join(items)}</section>')
    return (f'<section id="findings"><h2>Findings</h2><p class="muted">{len(rows)} findings of verify, grouped by '
            'what the broker\'s next start does about them, most pressing first.</p>' + "".join(parts) + "</section>")
