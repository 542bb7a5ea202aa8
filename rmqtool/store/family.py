"""Which store family a directory holds, told from the directories its broker makes.

A family is a kind of broker store with its own formats, reader, checks and recovery model:
RocketMQ (4.x and 5.x share one layout: commitlog/, consumequeue/, index/; which version's
rules a store follows is the RocketMQ family's own question, ``recovery/semantics.py``), and
QMQ (messagelog/, consumerlog/, actionlog/). Detection
reads directory names only, so it is safe on a store a broker holds.

Where a family's code lives: ARCHITECTURE.md, "Store families".
"""
from __future__ import annotations

import dataclasses
import pathlib

from rmqtool.errors import NotAStore
from rmqtool.store import paths


@dataclasses.dataclass(frozen=True)
class Family:
    """A store family as detection names it (its commands' parts: ``rmqtool/families/``)."""
    name: str  # stable id: "rocketmq", "qmq"
    title: str  # how a message names it
    marker_dirs: tuple[str, ...]  # any one of these directories in a root says the family
    supported: bool  # whether rmqtool reads it
    commands: tuple[str, ...] = ()  # the commands that read it (beyond RocketMQ's, which read all)

    def holds(self, root: pathlib.Path) -> bool:
        return self.marked_by({d for d in self.marker_dirs if (root / d).is_dir()})

    def marked_by(self, dirs: set[str]) -> bool:
        """Whether a root whose directories are named ``dirs`` holds this family's store."""
        return any(d in dirs for d in self.marker_dirs)


ROCKETMQ = Family("rocketmq", "RocketMQ 4.x/5.x",
                  (paths.COMMITLOG_DIR, paths.CONSUMEQUEUE_DIR, paths.BATCH_CONSUMEQUEUE_DIR, paths.INDEX_DIR), True)
# QMQ's StorageConfig: messagelog/ (the message log), consumerlog/ (a subject's queue),
# actionlog/ (pulls and acks)
QMQ = Family("qmq", "QMQ", ("messagelog", "consumerlog", "actionlog"), True,
             ("info", "verify", "query", "recover", "undo", "salvage --out", "report", "check", "offsets (not reset)", "diff",
              "dump messagelog|consumerlog|actionlog|pulllog|checkpoint", "spark export|verify|query|stats"))

FAMILIES = (ROCKETMQ, QMQ)


class UnsupportedFamily(NotAStore):
    """A store of a family rmqtool tells apart but does not read yet (exit 4, BAD_INPUT)."""


def detect_family(root: str | pathlib.Path) -> Family | None:
    """The family whose directories a store root holds (the first, in FAMILIES' order), or None."""
    root = pathlib.Path(root)
    return family_of({d for f in FAMILIES for d in f.marker_dirs if (root / d).is_dir()})


def family_of(dirs: set[str]) -> Family | None:
    """The family a root whose directories are named ``dirs`` holds (a root behind a URI is
    listed, not probed): the first in FAMILIES' order, or None."""
    return next((f for f in FAMILIES if f.marked_by(dirs)), None)


def marker_list() -> str:
    """Every family's marker directories, for a line saying a root holds none of them."""
    return ", ".join(f"{d}/" for f in FAMILIES for d in f.marker_dirs)


def require_supported(family: Family, root: str | pathlib.Path) -> Family:
    """The family, or UnsupportedFamily: one line naming the store, the family and what it has."""
    if not family.supported:
        raise UnsupportedFamily(f"a {family.title} store ({', '.join(d + '/' for d in family.marker_dirs)}): "
                                f"{family.title} stores are not supported yet", root)
    return family


def require_rocketmq(family: Family | None, root: str | pathlib.Path) -> None:
    """For a command that reads RocketMQ stores only: another family's store is refused in one
    line that names the commands that read it (exit 4)."""
    if family is None or family is ROCKETMQ:
        return
    require_supported(family, root)
    raise UnsupportedFamily(f"a {family.title} store: this command reads RocketMQ stores (on a {family.title} "
                            f"store: {', '.join(family.commands)})", root)
