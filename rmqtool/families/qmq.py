"""The QMQ family (qunarcorp/qmq's DefaultStorage: messagelog/, consumerlog/, actionlog/,
pulllog/, pulllog_smt/, checkpoint/): its formats are ``formats/qmq/``, its reader
``store/qmq/``, its checks ``verify/qmq/``, its recovery model ``recovery/qmq/``, its dump
kinds ``inspect/qmq/``; this binds them to :class:`FamilyTools`."""
from __future__ import annotations

import dataclasses
import os

from rmqtool.store.family import QMQ, Family
from rmqtool.store.qmq.view import QmqView, open_qmq_store


@dataclasses.dataclass(frozen=True)
class QmqTools:
    family: Family = QMQ
    dump_kinds: tuple[str, ...] = ("messagelog", "consumerlog", "actionlog", "pulllog", "checkpoint")
    finding_kind: str = "qmq_finding"

    def open_view(self, path, *, purpose: str = "store") -> QmqView:
        return open_qmq_store(path)

    def verify(self, view: QmqView, options=None, progress=None):
        from rmqtool.verify.qmq.run import QmqVerify
        return QmqVerify(view, options, progress)

    def info(self, view: QmqView) -> tuple[dict, list]:
        from rmqtool.inspect.qmq.inventory import qmq_info
        live = view.live
        return qmq_info(view.root, live.pid if live is not None else None)

    def plan_recovery(self, view: QmqView, **options):
        from rmqtool.recovery.qmq.plan import plan_recovery
        return plan_recovery(view.root)

    def recover(self, view: QmqView, request):
        """recover: QMQ's next start simulated, the plan, and with ``request.apply`` the repair."""
        from rmqtool.engine.qmq.recover import QmqGiven, recover_qmq
        from rmqtool.errors import UsageError
        from rmqtool.store.qmq.consumerlog import unit_bytes_configured
        taken = ("--broker-config", "--assume-defaults")  # consumerlog.v2.enable, or QMQ's default for it
        others = [f for f in request.rocketmq_flags if f not in taken]
        if others:
            raise UsageError(f"{', '.join(others)}: RocketMQ options; a QMQ store takes none of them", view.root)
        conf = getattr(request.given, "broker_config", None)
        assume = bool(getattr(request.given, "assume_defaults", False))
        again = (*(("--broker-config", os.path.abspath(conf.path)) if conf is not None else ()),
                 *(("--assume-defaults",) if assume else ()))
        return recover_qmq(view, apply=request.apply, to=request.to, backup_dir=request.backup_dir,
                           given=QmqGiven(unit_bytes_configured(conf), assume, again))

    def show_recover(self, run, fmt: str, *, wide: bool = False, live=None) -> None:
        from rmqtool.report.qmq.plans import show_qmq_plan
        show_qmq_plan(run.doc, fmt, applied=run.applied, live=live)

    def report(self, view: QmqView, *, now=None, html=None):
        from rmqtool.inspect.qmq.report_model import build_qmq_report
        from rmqtool.verify.base import VerifyOptions
        return build_qmq_report(view, now=now, html=html,
                                verify=lambda v, at: list(self.verify(v, VerifyOptions(now_ms=at)).findings()))

    def offsets(self, path, *, group=None, topic=None, subject=None):
        from rmqtool.errors import UsageError
        from rmqtool.inspect.qmq.offsets import group_progress
        if topic is not None:
            raise UsageError("--topic: a QMQ store has subjects: give --subject", path)
        return group_progress(self.open_view(path).root, group=group, subject=subject)

    def diff(self, path_a, path_b, *, flags=(), paths=None):
        from rmqtool.errors import UsageError
        from rmqtool.inspect.qmq.diff import diff_qmq_stores
        if flags:
            raise UsageError(f"{', '.join(flags)}: RocketMQ options; a QMQ store takes none of them", path_a)
        return diff_qmq_stores(self.open_view(path_a).root, self.open_view(path_b).root)

    def check(self, path, *, now: int, tail_bytes: int, recovery_rate: float):
        from rmqtool.inspect.qmq.check import check_qmq_store
        return check_qmq_store(self.open_view(path), now=now, tail_bytes=tail_bytes, recovery_rate=recovery_rate)

    def semantics(self, view: QmqView):
        return None  # one set of rules


QMQ_TOOLS = QmqTools()
