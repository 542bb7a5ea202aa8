"""Text wrapped for people: words kept whole, a path broken only after a ``/`` (never inside a
file's name, nor at a space in a name the caller says is one), a hard cut only for a name
longer than the line; nothing is ever left out, a run of spaces included. Plans, findings,
salvage's report and ``rmqtool findings ID`` wrap with it."""
from __future__ import annotations

import re
from typing import Iterable

from rmqtool.report.columns import display_width, terminal_safe

_SINGLE_SPACE = re.compile(r"(?<! ) (?! )")  # a line may break at one space; a run of them is text


def _fits(word: str, room: int) -> int:
    """How many characters of ``word`` fit in ``room`` cells (at least one)."""
    if word.isascii():
        return max(min(len(word), room), 1)
    used = 0
    for i, ch in enumerate(word):
        used += display_width(ch)
        if used > room:
            return max(i, 1)
    return len(word)


def _break(word: str, room: int) -> int:
    """Where a word wider than ``room`` breaks: after its last ``/`` that fits, else (a name
    longer than the line) where the room ends."""
    n = _fits(word, room)
    slash = word.rfind("/", 0, n)
    return slash + 1 if slash > 0 else n


def _words(text: str, keep: Iterable[str]) -> list[str]:
    """The pieces a line may break between: at single spaces, except inside ``keep``'s names
    (paths, whose spaces are part of a name; a name is still broken after a ``/``)."""
    spans = []
    for name in {terminal_safe(k) for k in keep if k and " " in k}:
        at = text.find(name)
        while at >= 0:
            spans.append((at, at + len(name)))
            at = text.find(name, at + len(name))
    words, start = [], 0
    for m in _SINGLE_SPACE.finditer(text):
        if not any(a <= m.start() < b for a, b in spans):
            words.append(text[start:m.start()])
            start = m.end()
    words.append(text[start:])
    return [w for w in words if w]


def wrap(text: str, width: int, first: str = "", rest: str = "", keep: Iterable[str] = ()) -> list[str]:
    """``text`` as lines of at most ``width`` cells, the first starting with ``first``, the
    others with ``rest`` (an indent); control characters escaped. A word too long for a line
    of its own goes on in pieces, each on a new line and each measured for the line it is on.
    ``keep``: names (paths) never broken at a space of theirs."""
    lines: list[str] = []
    line, used = first, display_width(first)
    bare = True  # nothing but the indent on the line yet
    for word in _words(terminal_safe(text).strip(" "), keep):
        if not bare and used + 1 + display_width(word) > width:
            lines.append(line)
            line, used, bare = rest, display_width(rest), True
        while True:
            room = max(width - used - (0 if bare else 1), 1)
            if display_width(word) <= room:
                break
            at = _break(word, room)
            lines.append(line + ("" if bare else " ") + word[:at])
            line, used, bare = rest, display_width(rest), True
            word = word[at:]
        line += ("" if bare else " ") + word
        used = display_width(line)
        bare = False
    lines.append(line)
    return [ln.rstrip() for ln in lines]
