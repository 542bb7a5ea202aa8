"""The QMQ family (qunarcorp/qmq's DefaultStorage: messagelog/, consumerlog/, actionlog/,
pulllog/, pulllog_smt/, checkpoint/): its formats are ``formats/qmq/``, its reader
``store/qmq/``, its checks ``verify/qmq/``, its recovery model ``recovery/qmq/``, its dump
kinds ``inspect/qmq/``; this binds them to :class:`FamilyTools`."""
from __future__ import annotations

import dataclasses

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
        from rmqtool.engine.qmq.recover import recover_qmq
        from rmqtool.errors import UsageError
        if request.rocketmq_flags:
            raise UsageError(f"{', '.join(request.rocketmq_flags)}: RocketMQ options; a QMQ store takes none",
                             view.root)
        return recover_qmq(view, apply=request.apply, to=request.to, backup_dir=request.backup_dir)

    def show_recover(self, run, fmt: str, *, wide: bool = False, live=None) -> None:
        from rmqtool.report.qmq.plans import show_qmq_plan
        show_qmq_plan(run.doc, fmt, applied=run.applied, live=live)

    def report(self, view: QmqView, *, now=None, html=None):
        from rmqtool.inspect.qmq.report_model import build_qmq_report
        from rmqtool.verify.base import VerifyOptions
        return build_qmq_report(view, now=now, html=html,
                                verify=lambda v, at: list(self.verify(v, VerifyOptions(now_ms=at)).findings()))

    def semantics(self, view: QmqView):
        return None  # one set of rules


QMQ_TOOLS = QmqTools()
