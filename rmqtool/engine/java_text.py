"""Java's view of a String where a record's bytes depend on it: String.length() (UTF-16
code units, which decide V1 or V2 topic lengths) and getBytes(UTF_8)."""
from __future__ import annotations


def utf16_length(text: str) -> int:
    """Java's String.length(): UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def java_utf8(text: str) -> bytes:
    """String.getBytes(UTF_8): unpaired surrogates become '?', as Java's encoder does."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")
