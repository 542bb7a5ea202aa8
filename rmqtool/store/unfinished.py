"""Whether a repair of this store (recover, redispatch, append --recover) or an undo was cut
short, read from the marker the write side leaves in the store root while it works.

The marker (``.rmqtool-unfinished``, JSON) names the backup that holds the intent record and
every original byte, the operation, the command that finishes it and the one that undoes it.
The broker never reads the store root's other names, so the marker changes nothing it loads.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shlex

from rmqtool.store.lock import root_writer_pid
from rmqtool.store.paths import StorePaths


@dataclasses.dataclass(frozen=True)
class Unfinished:
    store: str
    operation: str  # recover | redispatch | undo
    backup_dir: str
    finish: str  # the command that finishes it (the same command again)
    undo: str  # the command that gives the store back as it was before
    running: int | None = None  # the process of an rmqtool writer holding the store root now (the repair is under way)

    @property
    def unchanged_copy(self) -> bool:
        """A recover --to copy whose repair has changed nothing yet (its marker names no backup)."""
        return self.operation == "recover" and not self.backup_dir

    def says(self) -> str:
        """Whether the repair was cut short or is still running: its marker is there from its
        first change to its last either way; with its backup (the intent record's place). A
        recover --to copy's own marker names none: the copy is whole, its repair not done."""
        if self.unchanged_copy:
            state = f"being repaired (process {self.running})" if self.running is not None else "not repaired yet"
            return f"a recover --to copy of another store, {state}"
        if self.running is not None:
            return f"a {self.operation} under way (process {self.running}) has this store half changed{self._record()}"
        return f"an interrupted {self.operation} left this store half changed{self._record()}"

    def _record(self) -> str:
        return f" (intent record in {self.backup_dir})"

    def ways_out(self) -> str:
        """The commands that end it: an undo cut short is finished by running it again, and
        then the repair it undid can be made again (nothing gives an undo's bytes back)."""
        cut = "if it is stopped, " if self.running is not None else ""
        if self.operation == "undo":
            return f"{cut}`{self.finish}` finishes it; `{self.undo}` then makes the repair again"
        return f"{cut}`{self.finish}` finishes it, `{self.undo}` undoes it"

    def notice(self) -> str:
        """One line for stderr."""
        return f"rmqtool: warning: {self.store}: {self.says()}: {self.ways_out()}"


def undo_command(backup: str | os.PathLike) -> str:
    """The command that undoes the repair backed up in ``backup``, quoted for a shell, its path
    absolute (the operator runs it from wherever the next command found the store)."""
    return f"rmqtool undo {shlex.quote(os.path.abspath(backup))}"


def read_unfinished(root: str | os.PathLike) -> Unfinished | None:
    """The unfinished repair of the store at ``root``, or None (also when the marker cannot be read:
    a reader never fails on it). ``running``: another process's rmqtool writer holds the root
    (this process's own hold is of a run that finds an earlier one's marker)."""
    path = StorePaths(root).unfinished
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        found = Unfinished(str(root), str(doc["operation"]), str(doc["backup_dir"]), str(doc["finish"]),
                           str(doc["undo"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        if not path.exists():
            return None
        found = Unfinished(str(root), "repair", "(unreadable marker)", "(unknown)", "(unknown)")
    holder = root_writer_pid(root)
    return dataclasses.replace(found, running=holder) if holder not in (None, os.getpid()) else found
