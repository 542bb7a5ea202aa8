"""How a table cell is shortened to its column's width, and what of it must stay whole.

A table may leave out whole columns to fit the width (the least important first) and may cut
free text, but never a number, an offset, an ID or a status, nor any value so far that two
different values print alike. Each column says how its values may be shortened (``Column.cut``
in report/columns.py: NEVER, TEXT, ITEMS, HEAD, NAME, PATH, VALUE); a number is whole in any
column. That names and files stay distinct is the table's to keep (report/table.py remembers
those it has shown cut): :func:`distinct_width` is the width at which a set of them all print
differently.
"""
from __future__ import annotations

import re

from rmqtool.report.columns import HEAD, ITEMS, NAME, NEVER, PATH, VALUE, cut, display_width

DISTINCT = frozenset({NAME, PATH})  # cut only while the values shown print differently

_HEAD_END = re.compile(r"[\s:,;]")  # where a HEAD value's identifier ends


def whole(how: str, value) -> bool:
    """``value`` is shown whole in a column of this kind, however wide it is."""
    if how == NEVER or type(value) is int or type(value) is float:
        return True
    return how == VALUE and not isinstance(value, (dict, list))


def least_width(how: str, text: str, value=None) -> int:
    """The fewest terminal cells ``text`` (``value``'s cell) can be shown in: all of it where
    nothing may be cut, a list's first item, a status's identifier, a path's file name (each
    with its ellipsis)."""
    width = display_width(text)
    if whole(how, value):
        return width
    if how == ITEMS:
        i = text.find(" ")
        return width if i < 0 else min(width, display_width(text[:i + 1]) + 1)
    if how == HEAD:
        m = _HEAD_END.search(text)
        return width if m is None else min(width, display_width(text[:m.start()]) + 1)
    if how == PATH:
        i = text.rfind("/")
        return width if i < 0 else min(width, display_width(text[i:]) + 1)
    return min(width, 1)


def shorten(how: str, text: str, width: int, value=None) -> str | None:
    """``text`` in at most ``width`` cells as its column may cut it; None when what must stay
    whole is wider (the column has to widen). Names are not checked for being distinct here."""
    if display_width(text) <= width:
        return text
    if least_width(how, text, value) > width:
        return None
    if how == PATH:
        return cut_front(text, width)
    if how == ITEMS:
        return _cut_items(text, width)
    return cut(text, width)


def distinct_width(how: str, texts, width: int) -> int:
    """The fewest cells, ``width`` or more, at which the different ``texts`` all print differently
    (and each keeps what it must: a path its file name)."""
    texts = set(texts)
    width = max([width, *(least_width(how, t) for t in texts)])
    most = max(map(display_width, texts), default=0)
    while width < most and len({shorten(how, t, width) for t in texts}) < len(texts):
        width += 1
    return width


def cut_front(s: str, width: int) -> str:
    """``s`` in at most ``width`` cells, its start replaced by an ellipsis when longer."""
    if display_width(s) <= width:
        return s
    return "…" + cut(s[::-1], width)[:-1][::-1] if width > 1 else "…"


def _cut_items(s: str, width: int) -> str:
    """The first items of a space-separated list that fit in ``width`` cells with an ellipsis after
    them (least_width has made sure the first one does)."""
    i = s.rfind(" ", 0, width)
    while display_width(s[:i + 1]) + 1 > width:  # wide characters: fewer items
        i = s.rfind(" ", 0, i)
    return s[:i + 1] + "…"
