"""Findings as a table for people (verify, info): errors first, info last; a flood of one
finding ID in one file whose messages differ only in their numbers (a missing commit log file gives a finding per consume queue unit and
index entry) grouped to one row with its count and offset range, an info ID's findings
to one row whatever their files; the path shown whole and
the message wrapped under its row, never cut. JSON Lines and JSON keep every finding, in
the order the scan found them: scripts and runbooks count those.

A row's first line holds the short columns; the path and the message follow, indented::

    severity  finding                   consequence    offset
    --------  ------------------------  -----------  --------
    error     consumeQueueUnitNoRecord  unreachable  720..980
        store/consumequeue/CrashTopic/0/00000000000000002000
        consume queue CrashTopic/0: unit 136 points at ... [14 findings like it; -f jsonl lists each]

``--wide`` prints every finding (no grouping) a line, every field, uncut. ``--columns``
names the fields shown, grouped and sorted the same: the short ones on the row's first line
in the order given, ``path`` and ``message`` wrapped under it (a flood's count under it too
when the message is not asked for).
"""
from __future__ import annotations

import os
import re
import sys
from typing import TextIO

from rmqtool.errors import UsageError
from rmqtool.findings import CONSEQUENCES, OPERATOR_ACTIONS, REGISTRY
from rmqtool.report.columns import GAP, VIEWS, cell_text, display_width, terminal_safe
from rmqtool.report.progress import erase_bars
from rmqtool.report.wrap import wrap

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
INDENT = "    "
# the short columns of a row's first line, in order; consequence and store_name only when they fit / exist
HEAD = ("store_name", "severity", "finding", "consequence", "offset")  # every header a JSON field
FINDING_KINDS = ("finding", "qmq_finding", "fleet_finding")  # columns.VIEWS' kinds of finding rows
RIGHT = frozenset(c.name for kind in FINDING_KINDS for c in VIEWS[kind] if c.right)
UNDER = ("path", "message")  # the long fields: wrapped under the row's first line, never cut
_DIGITS = re.compile(r"\d+")


class _Group:
    __slots__ = ("first", "count", "low", "high", "paths")

    def __init__(self, row: dict):
        self.first, self.count = row, 0
        self.low = self.high = None
        self.paths = [row.get("path")]

    def merge(self, other: "_Group") -> None:
        """Another file's findings of the same info ID: one line for them all, no offset range."""
        self.count += other.count
        self.paths += other.paths
        self.low = self.high = None

    def path_text(self) -> str | None:
        if len(self.paths) == 1:
            return self.paths[0]
        names = [p for p in self.paths if p]
        parent = os.path.commonpath(names) if names else ""
        return f"{parent} ({len(self.paths)} files)" if parent else f"{len(self.paths)} files"

    def add(self, row: dict) -> None:
        self.count += 1
        offset = row.get("offset")
        if isinstance(offset, int):
            self.low = offset if self.low is None else min(self.low, offset)
            self.high = offset if self.high is None else max(self.high, offset)

    def offset_text(self) -> str:
        if self.low is None:
            return ""
        return str(self.low) if self.low == self.high else f"{self.low}..{self.high}"


def shape(row: dict) -> str:
    """A finding's message with its numbers left out: findings that differ only in numbers
    (unit 136, unit 137, ...) are one flood; another topic or another timestamp's name is not."""
    return _DIGITS.sub("#", row.get("message") or "")


def severity_rank(row: dict) -> int:
    return SEVERITY_ORDER.get(row.get("severity"), len(SEVERITY_ORDER))


class FindingTable:
    """Collects finding rows (memory: one entry per finding ID and file, or per finding with
    ``wide``) and prints them sorted at :meth:`close`."""

    def __init__(self, stream: TextIO, width: int, *, wide: bool = False, select: tuple[str, ...] | None = None,
                 kind: str = "finding"):
        self.stream, self.width, self.wide, self.kind = stream, width, wide, kind
        self.select = select  # --columns: exactly these fields (None: the default columns)
        self.count = 0
        self._groups: dict[tuple, _Group] = {}
        self._rows: list[dict] = []

    def row(self, row: dict) -> None:
        self.count += 1
        if self.wide:
            self._rows.append(row)
            return
        key = (row.get("store_name"), row.get("finding"), row.get("severity"), row.get("path"), shape(row))
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(row)
        group.add(row)

    def flush(self) -> None:
        """Nothing is printed before the last finding: the order needs them all."""

    def close(self) -> None:
        lines = self._wide_lines() if self.wide else self._lines()
        if lines:
            erase_bars()
            self.stream.write("\n".join(lines) + "\n")
        self.stream.flush()

    def _merged(self) -> list[_Group]:
        """The groups in scan order, an info ID's groups of several files as one (83
        ``storeTimestampBackwards`` on a clean store are one line)."""
        out, info = [], {}
        for g in self._groups.values():
            key = (g.first.get("store_name"), g.first.get("finding"), shape(g.first))
            if g.first.get("severity") != "info":
                out.append(g)
            elif key in info:
                info[key].merge(g)
            else:
                info[key] = g
                out.append(g)
        return out

    def _lines(self) -> list[str]:
        groups = sorted(self._merged(), key=lambda g: severity_rank(g.first))  # stable: scan order kept
        if not groups:
            return []
        asked = self.select or HEAD
        heads = [{n: _head_text(g, n) for n in asked if n not in UNDER} for g in groups]
        if self.select is None:
            names = [n for n in HEAD if any(h.get(n) for h in heads) or n in ("severity", "finding")]
        else:
            names = [n for n in self.select if n not in UNDER]
        widths = {n: max(len(n), *(display_width(h.get(n) or "") for h in heads)) for n in names}
        if self.select is None and "consequence" in names and \
                sum(widths.values()) + GAP * (len(names) - 1) > self.width:
            names.remove("consequence")  # the first to go at a narrow width: `rmqtool findings ID` says it
        under = UNDER if self.select is None else tuple(n for n in self.select if n in UNDER)
        lines = []
        if names:
            lines = [_join(names, widths, {n: n for n in names}),
                     _join(names, widths, {n: "-" * widths[n] for n in names})]
        for g, head in zip(groups, heads):
            indent = INDENT if names else ""
            if names:
                lines.append(_join(names, widths, {n: head.get(n) or "" for n in names}))
            counted = f"[{g.count} findings like it; -f jsonl lists each]" if g.count > 1 else ""
            for n in under:
                if n == "path" and g.path_text():
                    lines += wrap(g.path_text(), self.width, indent, indent + "  ", g.paths)
                elif n == "message":
                    lines += wrap(" ".join(t for t in (g.first.get("message") or "", counted) if t), self.width,
                                  indent, INDENT, g.paths)
                    counted = ""
                indent = indent or INDENT
            if counted:  # the message is not asked for: the count still says what a row stands for
                lines += wrap(counted, self.width, indent or INDENT, INDENT)
        return lines

    def _wide_lines(self) -> list[str]:
        rows = sorted(self._rows, key=severity_rank)
        if not rows:
            return []
        if self.select is not None:
            names = list(self.select)
        else:
            present = set().union(*rows)
            names = [c.name for c in VIEWS[self.kind] if c.name in present]
            names += [k for k in dict.fromkeys(k for r in rows for k in r) if k not in names]
        cells = [{n: terminal_safe(cell_text(n, r.get(n))) for n in names} for r in rows]
        widths = {n: max(len(n), *(display_width(c[n]) for c in cells)) for n in names}
        return ([_join(names, widths, {n: n for n in names}), _join(names, widths, {n: "-" * widths[n] for n in names})]
                + [_join(names, widths, c) for c in cells])


def _head_text(g: _Group, name: str) -> str:
    """A short field of a group's first line: the offset its range, any other the first finding's."""
    if name == "offset":
        return g.offset_text()
    return terminal_safe(cell_text(name, g.first.get(name)))


def finding_groups(rows) -> list[_Group]:
    """Finding rows grouped as the table groups them (a flood one group with its count and
    offset range, an info ID's files one group), errors first, info last (the HTML report)."""
    table = FindingTable(sys.stdout, 0)
    for row in rows:
        table.row(row)
    return sorted(table._merged(), key=lambda g: severity_rank(g.first))


def _join(names: list[str], widths: dict, cells: dict) -> str:
    parts = []
    for n in names:
        s = cells[n]
        pad = " " * (widths[n] - display_width(s))
        parts.append(pad + s if n in RIGHT else s + pad)
    return (" " * GAP).join(parts).rstrip()


def show_finding_id(row: dict, stream: TextIO | None = None, width: int | None = None) -> None:
    """``rmqtool findings ID`` for people: the ID, its severity and consequence, then what it
    means and what to do, wrapped to the width (never cut)."""
    from rmqtool.report.table import output_width

    stream = stream if stream is not None else sys.stdout
    width = min(output_width(stream) if width is None else width, 100)
    lines = [terminal_safe(f"{row['finding']}: {row['severity']}, consequence {row['consequence']}"), "",
             "what it means"] + wrap(row["meaning"], width, INDENT, INDENT) + ["", "what to do"]
    lines += wrap(row["action"], width, INDENT, INDENT)
    erase_bars()
    stream.write("\n".join(lines) + "\n")
    stream.flush()


def finding_rows(finding_id: str | None = None) -> list[dict]:
    """``rmqtool findings``' rows: every ID in the registry's order, or the one asked for
    (UsageError naming the nearest IDs when there is no such ID)."""
    ids = list(REGISTRY) if finding_id is None else [finding_id]
    if finding_id is not None and finding_id not in REGISTRY:
        import difflib

        near = difflib.get_close_matches(finding_id, REGISTRY, n=3, cutoff=0.5)
        raise UsageError(f"no finding ID {finding_id!r}" + (f"; did you mean {', '.join(near)}?" if near else
                                                             "; rmqtool findings lists them"))
    return [{"finding": i, "severity": REGISTRY[i][0].value, "consequence": CONSEQUENCES[i].value,
             "meaning": REGISTRY[i][1], "action": OPERATOR_ACTIONS[i]} for i in ids]
