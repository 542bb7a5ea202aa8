"""The RocketMQ family (4.x and 5.x stores: commitlog/, consumequeue/, batchconsumequeue/,
index/, checkpoint, abort, lock, config/): its formats are ``formats/``, its reader ``store/``,
its checks ``verify/``, its recovery model ``recovery/``; this binds them to :class:`FamilyTools`.
Which broker version's rules a store follows (4.9 or 5.3) is a question inside this family
(``recovery/semantics.py:detect_semantics``)."""
from __future__ import annotations

import dataclasses
import os
import shlex

from rmqtool.store.family import ROCKETMQ, Family
from rmqtool.store.view import StoreView, open_store


@dataclasses.dataclass(frozen=True)
class RocketMQTools:
    family: Family = ROCKETMQ
    dump_kinds: tuple[str, ...] = ("commitlog", "consumequeue", "cqext", "dledger", "index", "checkpoint", "config",
                                   "epochfile")
    finding_kind: str = "finding"

    def open_view(self, path, *, purpose: str = "store") -> StoreView:
        if purpose == "verify":
            from rmqtool.verify.run import open_verifiable
            return open_verifiable(path)
        if purpose == "info":
            from rmqtool.inspect.inventory import open_for_info
            return open_for_info(path)
        if purpose == "report":
            from rmqtool.inspect.report_model import open_for_report
            return open_for_report(path)
        return open_store(path)

    def verify(self, view: StoreView, options=None, progress=None):
        from rmqtool.verify.run import verify_run  # numpy: only when verifying
        return verify_run(view, options, progress)

    def info(self, view: StoreView) -> tuple[dict, list]:
        from rmqtool.inspect.inventory import store_info
        return store_info(view)

    def plan_recovery(self, view: StoreView, **options):
        from rmqtool.recovery.plan import plan_recovery
        return plan_recovery(view, **options)

    def recover(self, view: StoreView, request):
        """recover: the plan, and with ``request.apply`` the engine's repair (engine/recover_store.py)."""
        if view.records_in_dledger:  # enableDLegerCommitLog: DLedger's and DLedgerCommitLog's recovery, planned
            return _dledger_recover(view, request)
        from rmqtool.engine.recover_store import recover_store
        return recover_store(view, request.settings, given=request.given, keep_index=request.keep_index,
                             apply=request.apply, to=request.to, force=request.force,
                             backup_dir=request.backup_dir, again=request.again,
                             keep_past_damage=request.keep_past_damage, on_written=request.on_written,
                             now_ms=request.now_ms)

    def show_recover(self, run, fmt: str, *, wide: bool = False, live=None) -> None:
        if isinstance(run.doc, dict) and run.doc.get("dledger") is not None:
            from rmqtool.report.dledger import show_dledger_plan
            show_dledger_plan(run.doc, run.plan.steps(), fmt, applied=run.applied)
            return
        from rmqtool.report.plans import show_recovery_plan
        show_recovery_plan(run.doc, run.plan, fmt, applied=run.applied, sizes=run.sizes, wide=wide, live=live)

    def report(self, view: StoreView, *, now=None, html=None):
        from rmqtool.inspect.report_model import build_report
        from rmqtool.verify.base import VerifyOptions
        return build_report(view, now=now, html=html,
                            verify=lambda v, at: list(self.verify(v, VerifyOptions(now_ms=at)).findings()))

    def offsets(self, path, *, group=None, topic=None, subject=None):
        from rmqtool.errors import UsageError
        from rmqtool.inspect.offsets import loaded_offsets
        if subject is not None:
            raise UsageError("--subject: a QMQ store's; a RocketMQ store has topics: give --topic", path)
        return loaded_offsets(path, group=group, topic=topic)

    def diff(self, path_a, path_b, *, flags=(), paths=None):
        from rmqtool.inspect.diff import diff_stores  # the scanner (numpy): not at the CLI's start
        paths_a, paths_b = paths() if paths is not None else (None, None)
        return diff_stores(path_a, path_b, paths_a=paths_a, paths_b=paths_b)

    def check(self, path, *, now: int, tail_bytes: int, recovery_rate: float):
        from rmqtool.inspect.check import check_store
        return check_store(path, now=now, tail_bytes=tail_bytes, recovery_rate=recovery_rate)

    def semantics(self, view: StoreView):
        from rmqtool.recovery.semantics import detect_semantics
        return detect_semantics(view.paths, view.segments if view.has_commit_log else [])


def _dledger_recover(view: StoreView, request):
    """recover on a DLedger store: the plan of both recoveries; with ``apply``, the consume queue
    units the broker's recovery drops only in memory zeroed in the files, with a backup
    (engine/dledger_repair.py). DLedger's own files are left as its recover leaves them."""
    from rmqtool.engine.recover_store import RecoverRun, ready_to_apply
    from rmqtool.errors import ExitCode, UsageError
    from rmqtool.recovery.dledger import plan_dledger_recovery
    settings = request.settings
    rolled_back = None
    if request.apply and request.to is None:  # an --apply cut short rolled back (an undo's refused) before the plan
        view, rolled_back = ready_to_apply(view, None)
    plan = plan_dledger_recovery(view, check_crc=getattr(settings, "check_crc", True))
    doc = plan.to_json()
    if request.apply and request.to is not None:
        return RecoverRun(doc, plan, refusal=UsageError("--to does not copy a DLedger store: apply in place "
                                                          "(the backup keeps what changes)", view.root))
    if request.apply and plan.refusal is not None:  # as a plain store the broker does not load: nothing written
        from rmqtool.errors import CorruptData
        return RecoverRun(doc, plan, refusal=CorruptData(f"not recovered: {plan.refusal}", view.root))
    if request.apply:
        from rmqtool.engine.dledger_repair import apply_dledger_plan
        again = shlex.join(["rmqtool", "recover", os.path.abspath(view.root), *request.again, "--apply"])
        doc["applied"] = apply_dledger_plan(view, plan, request.backup_dir or rolled_back, command=again)
        return RecoverRun(doc, plan, applied=True)
    # a marker of a repair cut short: the store is half changed, not clean (as a plain store's plan says)
    damaged = plan.changes or plan.refused or view.unfinished is not None
    return RecoverRun(doc, plan, exit_code=int(ExitCode.CORRUPT) if damaged else int(ExitCode.OK))


ROCKETMQ_TOOLS = RocketMQTools()
