"""How QMQ's Java code reads numbers out of text (file names, checkpoint lines)."""
from __future__ import annotations

_BITS = {"long": 64, "int": 32, "short": 16}


class NumberFormatError(ValueError):
    """Where ``Long.parseLong`` (``Integer.parseInt``, ``Short.parseShort``) throws."""


def java_parse(text: str | None, kind: str = "long") -> int:
    """An optional sign and decimal digits, nothing else (no spaces, no ``_``), within the
    type's range; Java's ``Character.digit`` takes any Unicode decimal digit, as ``int`` does."""
    if text is None:
        raise NumberFormatError("null")
    body = text[1:] if text[:1] in "+-" else text
    if not body or not all(c.isdecimal() for c in body):
        raise NumberFormatError(_for_input_string(text))
    value = int(text)
    bits = _BITS[kind]
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):  # out of the type's range: the same words
        raise NumberFormatError(_for_input_string(text))
    return value


def _for_input_string(text: str) -> str:
    """NumberFormatException.forInputString's message, as the engine logs and reports it."""
    return f'For input string: "{text}"'
