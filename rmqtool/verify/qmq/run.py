"""``rmqtool verify`` on a QMQ store: its checks (``checks.py``) as one run, with the same
severity overrides, ``--max-errors`` and exit codes as RocketMQ's (``verify/run.py``)."""
from __future__ import annotations

import os
from typing import Callable, Iterator

from rmqtool.errors import UsageError
from rmqtool.findings import Finding
from rmqtool.store.qmq.view import QmqView
from rmqtool.store.tree import walk
from rmqtool.verify import AREAS
from rmqtool.verify.qmq.checks import check_store
from rmqtool.verify.base import VerifyOptions, VerifyRun

AREA = "qmq"  # --only names RocketMQ's areas; a QMQ store is checked whole


class QmqVerify(VerifyRun):
    def __init__(self, view: QmqView, options: VerifyOptions | None = None,
                 progress: Callable[[int], None] | None = None):
        super().__init__(options, progress)
        if set(self.options.only) != set(AREAS):
            raise UsageError("--only picks among a RocketMQ store's areas; a QMQ store is checked whole", view.root)
        self.options.only = (*self.options.only, AREA)
        self.view = view
        self.root = view.root
        self.live = view.live

    @property
    def total_bytes(self) -> int:
        total = 0
        for dirpath, _dirs, files in walk(self.root):
            for name in files:
                try:
                    total += os.stat(os.path.join(dirpath, name)).st_blocks * 512  # what is read, not the holes
                except OSError:
                    pass
        return total

    def _raw(self) -> Iterator[tuple[str, Finding]]:
        for f in check_store(self.root):
            yield AREA, f
