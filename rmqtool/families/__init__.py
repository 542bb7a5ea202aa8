"""Store families: what each brings to the commands, behind one small interface.

Detection (``store/family.py``) names a store's family from its directories; the family's
:class:`FamilyTools` are what verify, info, dump, recover and spark call for it: open a view,
run the checks and the probe, compute info, the dump kinds it has, plan its recovery, and (RocketMQ) which
broker version's rules it follows. A command gets them with :func:`tools_of` from the view it
opened, so a new family plugs in by adding its tools here and its code in each layer's
``<family>/`` subfolder (ARCHITECTURE.md, "Store families"), never by a branch in a command.
"""
from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any, Callable, Protocol

from rmqtool.store.family import ROCKETMQ, Family, UnsupportedFamily, detect_family, require_supported

if TYPE_CHECKING:
    from rmqtool.store.view import StoreView


class FamilyTools(Protocol):
    """What the commands need of a store family."""

    family: Family
    dump_kinds: tuple[str, ...]  # the `rmqtool dump` kinds that read this family's files
    finding_kind: str  # the kind of its finding rows (report/columns.VIEWS): the fields --columns takes

    def open_view(self, path, *, purpose: str = "store") -> StoreView:
        """The store at ``path`` opened once (``purpose``: "verify" and "info" check the root as they document)."""

    def verify(self, view: StoreView, options: Any = None, progress: Callable[[int], None] | None = None) -> Any:
        """One verify run over the view: iterate ``findings()``; then ``counts``, ``errors``, ``exit_code``."""

    def info(self, view: StoreView) -> tuple[dict, list]:
        """What ``rmqtool info`` shows: one JSON-ready document, and the findings."""

    def plan_recovery(self, view: StoreView, **options) -> Any:
        """What the broker's next start changes, as a plan ``apply_plan`` can carry out."""

    def recover(self, view: StoreView, request: Any) -> Any:
        """recover as the command asks it (``engine/recover_store.RecoverRequest``): the plan
        and, with ``apply``, the repair; a run with ``doc``, ``applied``, ``refusal``, ``exit_code``."""

    def show_recover(self, run: Any, fmt: str, *, wide: bool = False, live: Any = None) -> None:
        """Print a recover run's plan (table, jsonl or json); ``wide``: every row; ``live``: the
        view's live state, which a table's header says."""

    def report(self, view: StoreView, *, now: int | None, html: Any = None) -> Any:
        """``rmqtool report``'s model of the store (verify run once), and its page written at ``html``."""

    def offsets(self, path, *, group: str | None, topic: str | None, subject: str | None) -> Any:
        """``rmqtool offsets``' consumer progress: ``rows`` (each ``record()``), their ``kind``,
        ``notes()`` for stderr, ``findings``, and ``nothing``: what a lookup matching no row lacks."""

    def diff(self, path_a, path_b, *, flags: list[str], paths: Callable[[], tuple]) -> Any:
        """``rmqtool diff``'s rows (``rows``, then ``equal``; their ``kind``) of two stores of this
        family; ``flags``: the RocketMQ options given, ``paths()``: the commit log paths they say."""

    def check(self, path, *, now: int, tail_bytes: int, recovery_rate: float) -> Any:
        """``rmqtool check``'s measures of the store at ``path`` (inspect/check.StoreCheck)."""

    def semantics(self, view: StoreView) -> Any:
        """Which version's rules the store follows, and why (a family with one set of rules: None)."""


# each family's tools by family name: (module, name), imported only for a store of that family
# (a QMQ command loads none of RocketMQ's readers)
_TOOLS = {"rocketmq": ("rmqtool.families.rocketmq", "ROCKETMQ_TOOLS"), "qmq": ("rmqtool.families.qmq", "QMQ_TOOLS")}


def _tools(family: Family) -> FamilyTools:
    module, name = _TOOLS[family.name]
    return getattr(importlib.import_module(module), name)


def tools_at(path: str | os.PathLike) -> FamilyTools:
    """The tools of the family a store path holds, before it is opened (a path that holds none,
    or is missing: RocketMQ's, whose opening says what is wrong with it)."""
    family = detect_family(path) or ROCKETMQ
    require_supported(family, path)
    return _tools(family)


def tools_at_both(path_a: str | os.PathLike, path_b: str | os.PathLike) -> FamilyTools:
    """The tools of the family two store paths hold, for a command that compares them (diff):
    two stores of different families are refused in one line that names both (exit 4)."""
    family_a, family_b = detect_family(path_a), detect_family(path_b)
    if family_a is not None and family_b is not None and family_a is not family_b:
        raise UnsupportedFamily(f"a {family_b.title} store, and {os.fspath(path_a)} a {family_a.title} one: "
                                f"diff compares two stores of one family", path_b)
    return tools_at(path_a)


def tools_of(view: StoreView) -> FamilyTools:
    """The tools of the view's family (a family detected but not read: UnsupportedFamily, exit 4)."""
    require_supported(view.family, view.root)
    return _tools(view.family)
