"""What every store family's verify run shares (RocketMQ's ``run.py``, QMQ's ``qmq/run.py``):
the options, git-fsck-style severity overrides, and the loop that applies them, ``--only``
and ``--max-errors`` to a family's findings. Kept apart from the checks so that a family's
run loads only its own."""
from __future__ import annotations

import collections
import dataclasses
from typing import Callable, Iterable, Iterator

from rmqtool.errors import UsageError
from rmqtool.findings import REGISTRY, Finding, Severity
from rmqtool.verify import AREAS

IGNORE = "ignore"
LEVELS = ("error", "warning", "info", IGNORE)

def parse_overrides(skip: Iterable[str] = (), severity: Iterable[str] = ()) -> dict[str, str]:
    """``--skip ID`` and ``--severity ID=LEVEL`` as {ID: level}; unknown IDs or levels are usage errors."""
    out: dict[str, str] = {}
    for item in severity:
        finding_id, sep, level = item.partition("=")
        if not sep or level not in LEVELS:
            raise UsageError(f"--severity wants ID=error|warning|info|ignore, not {item!r}")
        out[finding_id] = level
    for finding_id in skip:
        out[finding_id] = IGNORE
    unknown = sorted(set(out) - set(REGISTRY))
    if unknown:
        raise UsageError(f"unknown finding id(s): {', '.join(unknown)} (rmqtool findings lists them)")
    return out


@dataclasses.dataclass
class VerifyOptions:
    only: tuple[str, ...] = AREAS
    overrides: dict = dataclasses.field(default_factory=dict)  # ID -> level (parse_overrides)
    max_errors: int | None = None
    jobs: int = 1
    delay_spec: str | None = None  # messageDelayLevel, if the broker's differs from the default
    now_ms: int | None = None  # when the broker's next start happens (the timer's read time): None, the clock

    def __post_init__(self):
        bad = sorted(set(self.only) - set(AREAS))
        if bad:
            raise UsageError(f"--only takes {', '.join(AREAS)}; not {', '.join(bad)}")
        if self.max_errors is not None and self.max_errors < 1:
            raise UsageError("--max-errors must be 1 or more")
        if self.jobs < 1:
            raise UsageError("--jobs must be 1 or more")


class VerifyRun:
    """One verify run of any store family: iterate :meth:`findings`; then :attr:`counts`,
    :attr:`errors`, :attr:`stopped` (max_errors reached) and :attr:`exit_code` say how it
    went. A family's run gives ``_raw()``, its (area, finding) pairs in order."""

    live = None  # a running broker's store: its moving tail is not damage
    next_start = None  # the broker's next start, once simulated (RocketMQ: a NextStart)

    def __init__(self, options: VerifyOptions | None = None, progress: Callable[[int], None] | None = None):
        self.options = options or VerifyOptions()
        self.progress = progress
        self.counts: collections.Counter = collections.Counter()
        self.errors = 0
        self.stopped = False

    @property
    def next_start_drops(self) -> int:
        """Messages the broker's next start drops (its recovery's cut); 0 when not simulated."""
        return 0

    @property
    def exit_code(self) -> int:
        return 3 if self.errors else 0

    def _raw(self) -> Iterator[tuple[str, Finding]]:
        raise NotImplementedError

    def findings(self) -> Iterator[Finding]:
        """The findings to report, severities overridden, ignored ones left out."""
        only = set(self.options.only)
        overrides = self.options.overrides
        limit = self.options.max_errors
        raw = self._raw()
        try:
            for area, f in raw:
                if area not in only or (self.live is not None and self.live.is_moving(f)):
                    continue
                level = overrides.get(f.id)
                if level == IGNORE:
                    continue
                if level is not None and level != f.severity.value:
                    f = with_severity(f, Severity(level))
                self.counts[f.id] += 1
                yield f
                if f.severity is Severity.ERROR:
                    self.errors += 1
                    if limit is not None and self.errors >= limit:
                        self.stopped = True
                        return
        finally:
            raw.close()  # stops the scan, and its worker processes, when the run ends early


def with_severity(f: Finding, severity: Severity) -> Finding:
    """A finding under an overridden severity (--severity ID=LEVEL)."""
    return dataclasses.replace(f, severity=severity)
