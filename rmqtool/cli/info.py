"""rmqtool info STORE (filled in once the consume queue and index readers land)."""
from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    pass
