"""pyflakes over the library: no unused import, no undefined name, no dead local.

Run in-process through ``pyflakes.api`` so ``make test`` enforces it with no other tool.
pyflakes ignores ``# noqa``: a name imported for its side effect is imported with
importlib, a name only annotated is imported under TYPE_CHECKING.
"""
from __future__ import annotations

import pathlib

import pytest
from pyflakes import api as pyflakes_api  # the dev extra installs it
from pyflakes import reporter as pyflakes_reporter

ROOT = pathlib.Path(__file__).resolve().parent.parent


class _Collect(pyflakes_reporter.Reporter):
    def __init__(self):
        self.messages: list[str] = []

    def unexpectedError(self, filename, msg):
        self.messages.append(f"{filename}: {msg}")

    def syntaxError(self, filename, msg, lineno, offset, text):
        self.messages.append(f"{filename}:{lineno}: {msg}")

    def flake(self, message):
        self.messages.append(str(message))


@pytest.mark.parametrize("folder", ["rmqtool", "formats"])
def test_pyflakes_finds_nothing(folder):
    out = _Collect()
    pyflakes_api.checkRecursive([str(ROOT / folder)], out)
    assert out.messages == []
