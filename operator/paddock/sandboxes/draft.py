"""The status a Sandbox's reconcile is deciding, and the plan it finishes as."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from paddock.api.conditions import Notice, get_condition, set_condition
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import SandboxReason as R
from paddock.api.reasons import Severity
from paddock.api.sandbox import SandboxPhase, SandboxStatus
from paddock.sandboxes.plan import Plan, Write

PROGRESS_PHASES = frozenset({SandboxPhase.PROVISIONING, SandboxPhase.SETTING_UP})


@dataclass
class StatusDraft:
    """The status being decided, starting from the conditions already stored."""

    old: SandboxStatus
    generation: int | None
    now: datetime
    status: SandboxStatus
    notices: list[Notice] = field(default_factory=list)  # besides the phase's own
    wake_after: float | None = None  # look again then, even if nothing changes (a deadline)

    def condition(self, type_: C, value: bool | None, reason: R, message: str) -> None:
        self.status.conditions = set_condition(
            self.status.conditions,
            type_,
            value,
            reason,
            message,
            generation=self.generation,
            now=self.now,
        )

    def noted(self, type_: C, value: bool | None, reason: R, message: str) -> None:
        """Set a condition, with an Event when its reason is new."""
        before = get_condition(self.old.conditions, type_)
        if before is None or before.reason != reason:
            self.notices.append(Notice(reason, message))
        self.condition(type_, value, reason, message)

    def finish(
        self,
        phase: SandboxPhase,
        reason: R,
        message: str,
        writes: list[Write] | None = None,
        retry_after: float | None = None,
    ) -> Plan:
        self.status.phase, self.status.message = phase, message
        # An Event where a person needs one: a new phase they act on or wait for (Ready,
        # Paused, Failed, ...), or a new problem within one; not the steps of progress on the
        # way to Ready (Provisioning, SettingUp), which the status shows.
        before = get_condition(self.old.conditions, C.READY)
        warned = reason.severity == Severity.WARNING and (before is None or before.reason != reason)
        changed = (self.old.phase != phase and phase not in PROGRESS_PHASES) or warned
        notices = [Notice(reason, message)] if changed else []
        waits = [t for t in (retry_after, self.wake_after) if t is not None]
        return Plan(self.status, writes or [], notices + self.notices, min(waits, default=None))
