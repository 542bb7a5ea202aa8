"""Text wrapped for people: words kept whole, a path broken only after a ``/`` (never inside
a file's name), a hard cut only for a name longer than the line. Plans, findings and
``rmqtool findings ID`` wrap with it."""
from __future__ import annotations

from rmqtool.report.columns import cut, display_width, terminal_safe


def _pieces(word: str, room: int) -> list[str]:
    """``word`` in pieces of at most ``room`` cells: after a ``/`` where it can, else cut."""
    out = []
    while display_width(word) > room:
        slash = word.rfind("/", 0, room)
        at = slash + 1 if slash > 0 else room
        out.append(word[:at])
        word = word[at:]
    out.append(word)
    return out


def wrap(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    """``text`` as lines of at most ``width`` cells, the first starting with ``first``, the
    others with ``rest`` (an indent); control characters escaped."""
    lines: list[str] = []
    line, used = first, display_width(first)
    bare = True  # nothing but the indent on the line yet
    for word in terminal_safe(text).split():
        w = display_width(word)
        if not bare and used + 1 + w > width:
            lines.append(line)
            line, used, bare = rest, display_width(rest), True
        room = max(width - used - (0 if bare else 1), 1)
        pieces = _pieces(word, room) if w > room else [word]
        for i, piece in enumerate(pieces):
            if i:  # a piece of a long name: on a line of its own
                lines.append(line)
                line, used = rest, display_width(rest)
                piece = cut(piece, max(width - used, 1)) if display_width(piece) > width - used else piece
            line += ("" if bare or i else " ") + piece
            used = display_width(line)
            bare = False
    lines.append(line)
    return [ln.rstrip() for ln in lines]
