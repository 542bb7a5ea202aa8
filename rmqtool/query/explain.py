"""The ``--explain`` trace: what a lookup read and why it kept or dropped each hit.

Lookups take an optional :class:`Trace`. Lines go to its writer as they happen (the CLI
passes stderr), so a slow fallback scan shows its reason before it starts. Formatting a
line costs time on a hot path, so callers test ``trace.enabled`` before building one.

Notes are different: they say something the user must know even without ``--explain``
(the index is missing, so the commit log was scanned) and are returned with every
result (see :class:`Notes`).
"""
from __future__ import annotations

from typing import Callable


class Trace:
    """Collects trace lines; with a writer, also passes each one on at once."""

    def __init__(self, writer: Callable[[str], None] | None = None, *, keep: bool = True):
        self.writer = writer
        self.keep = keep
        self.lines: list[str] = []
        self._depth = 0

    @property
    def enabled(self) -> bool:
        return True

    def __call__(self, text: str) -> None:
        line = "  " * self._depth + text
        if self.keep:
            self.lines.append(line)
        if self.writer is not None:
            self.writer(line)

    def section(self, text: str) -> "_Section":
        """A heading whose following lines are indented until the ``with`` block ends."""
        self(text)
        return _Section(self)


class _Section:
    def __init__(self, trace: Trace):
        self.trace = trace

    def __enter__(self):
        self.trace._depth += 1
        return self.trace

    def __exit__(self, *exc):
        self.trace._depth -= 1
        return False


class _NoTrace(Trace):
    """The trace of a lookup run without --explain: costs nothing."""

    def __init__(self):
        super().__init__(None, keep=False)

    @property
    def enabled(self) -> bool:
        return False

    def __call__(self, text: str) -> None:
        pass


NO_TRACE = _NoTrace()


def trace_or_none(trace: Trace | None) -> Trace:
    return NO_TRACE if trace is None else trace


class Notes(list):
    """Lines for stderr that a result carries whatever --explain says (fallbacks, damage)."""

    def add(self, text: str, trace: Trace | None = None) -> None:
        self.append(text)
        if trace is not None and trace.enabled:
            trace(f"note: {text}")
