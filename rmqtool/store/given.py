"""What a command was given for its STORE (``--commitlog-path``, ``--broker-config``), seen by
every reader of that store while the command runs: each command reads with it without code of
its own. Keyed by the resolved root: a --to copy or a second store keeps its own."""
from __future__ import annotations

import contextlib
import contextvars
import os
from typing import Generic, TypeVar

T = TypeVar("T")


class PerStore(Generic[T]):
    """One kind of thing given for a store root (None: nothing given)."""

    def __init__(self, name: str):
        self._var: contextvars.ContextVar[dict] = contextvars.ContextVar(name, default={})

    @contextlib.contextmanager
    def given(self, root: str | os.PathLike, value: T | None):
        """While the block runs, readers of ``root`` see ``value`` (None: the block changes nothing)."""
        if value is None:
            yield
            return
        token = self._var.set({**self._var.get(), os.path.realpath(root): value})
        try:
            yield
        finally:
            self._var.reset(token)

    def get(self, root: str | os.PathLike) -> T | None:
        given = self._var.get()
        return given.get(os.path.realpath(root)) if given else None
