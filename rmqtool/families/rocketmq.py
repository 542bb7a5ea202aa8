"""The RocketMQ family (4.x and 5.x stores: commitlog/, consumequeue/, batchconsumequeue/,
index/, checkpoint, abort, lock, config/): its formats are ``formats/``, its reader ``store/``,
its checks ``verify/``, its recovery model ``recovery/``; this binds them to :class:`FamilyTools`.
Which broker version's rules a store follows (4.9 or 5.3) is a question inside this family
(``recovery/semantics.py:detect_semantics``)."""
from __future__ import annotations

import dataclasses

from rmqtool.store.family import ROCKETMQ, Family
from rmqtool.store.view import StoreView, open_store


@dataclasses.dataclass(frozen=True)
class RocketMQTools:
    family: Family = ROCKETMQ
    dump_kinds: tuple[str, ...] = ("commitlog", "consumequeue", "cqext", "index", "checkpoint", "config",
                                          "epochfile")

    def open_view(self, path, *, purpose: str = "store") -> StoreView:
        if purpose == "verify":
            from rmqtool.verify.run import open_verifiable
            return open_verifiable(path)
        if purpose == "info":
            from rmqtool.inspect.inventory import open_for_info
            return open_for_info(path)
        return open_store(path)

    def verify(self, view: StoreView, options=None, progress=None):
        from rmqtool.verify.run import Verify  # numpy: only when verifying
        return Verify(view, options, progress)

    def info(self, view: StoreView) -> tuple[dict, list]:
        from rmqtool.inspect.inventory import store_info
        return store_info(view)

    def plan_recovery(self, view: StoreView, **options):
        from rmqtool.recovery.plan import plan_recovery
        return plan_recovery(view, **options)

    def recover(self, view: StoreView, request):
        """recover: the plan, and with ``request.apply`` the engine's repair (engine/recover_store.py)."""
        from rmqtool.engine.recover_store import recover_store
        return recover_store(view, request.settings, given=request.given, keep_index=request.keep_index,
                             apply=request.apply, to=request.to, force=request.force,
                             backup_dir=request.backup_dir, again=request.again,
                             keep_past_damage=request.keep_past_damage)

    def show_recover(self, run, fmt: str, *, wide: bool = False, live=None) -> None:
        from rmqtool.report.plans import show_recovery_plan
        show_recovery_plan(run.doc, run.plan, fmt, applied=run.applied, sizes=run.sizes, wide=wide, live=live)

    def semantics(self, view: StoreView):
        from rmqtool.recovery.semantics import detect_semantics
        return detect_semantics(view.paths, view.segments if view.has_commit_log else [])


ROCKETMQ_TOOLS = RocketMQTools()
