"""A run's end, as one step makes it: its work delivered (``spec.deliver``), its last event
logged, its gate closed, what it held let go (its hold on the sandbox, its own sandbox, its
model route) and its final status written, the last act. Where its log cannot take the last
event, the status alone says how it ended."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import timedelta

from paddock.agentruns import (
    credential_access,
    decide,
    host_asks,
    in_pod,
    inputs,
    model_access,
    spending,
)
from paddock.agentruns.asking import end_all
from paddock.agentruns.decide import Ending
from paddock.agentruns.delivering import Outcome, deliver
from paddock.agentruns.holds import let_go
from paddock.agentruns.record import RunRecord
from paddock.agentruns.sandbox import ReadySandbox
from paddock.api.agentrun import AgentRunSpec, RunPhase, RunResult
from paddock.api.conditions import Notice, get_condition
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import RunReason as R
from paddock.api.reasons import Severity
from paddock.kube.errors import KubeError
from paddock.runs import events as ev
from paddock.runs.events import Draft
from paddock.times import parse_time, utcnow

# How long a delivery that failed for a reason that may pass (the forge out of reach) is tried
# again, from its first failure (the Delivered condition's transition, so an operator restart
# does not start the time again), before the run ends without it.
DELIVERY_RETRY = timedelta(minutes=10)


class DeliveryPendingError(Exception):
    """The run's delivery failed for now: its step is tried again."""


@dataclass
class RunEnding(RunRecord):
    """The run's record, with what its end needs: its sandbox (once found) and the gateway
    that may hold its model route."""

    sandbox: ReadySandbox | None = None
    gateway: model_access.ModelGateway | None = None

    def _end(self, spec: AgentRunSpec, ending: Ending) -> None:
        approvals, ended = end_all(self.status.approvals, utcnow())
        delivered = self._deliver(spec, ending)
        self._append([*ending.drafts, *ended, *delivered, decide.terminal_event(ending)])
        # Only once the end is durable: a run whose gate is gone would otherwise be GateLost.
        if self.sandbox is not None and self.status.completion_digest is not None:
            in_pod.close_gate(self.namespace, self.sandbox, self.run_id)
        if ended:
            self.status.approvals, self.status.pending_approvals = approvals, 0
            self._condition(C.AWAITING_APPROVAL, False, R.NO_APPROVAL_PENDING, "The run ended.")
        self._finish(spec)

    def _deliver(self, spec: AgentRunSpec, ending: Ending) -> list[Draft]:
        """Deliver the work of a run whose harness ran (spec.deliver), before its last event:
        the Delivered condition says how it went, and an event of the log."""
        if spec.deliver is None or self.sandbox is None or self.status.completion_digest is None:
            return []
        return self._delivered(deliver(self.run, spec, self.sandbox, ending.phase))

    def _end_without_log(self, spec: AgentRunSpec, ending: Ending, why: str) -> None:
        """End the run where its log cannot take the last event: the status alone says how
        (a harness launched before is killed)."""
        message = ending.message + (f" (the event log could not be written: {why})" if why else "")
        with contextlib.suppress(KubeError):
            if self.sandbox is not None and self.status.completion_digest is not None:
                in_pod.kill(self.namespace, self.run_id, self.sandbox.pod)
            model_access.revoke(self.run_id, self.gateway, spec.model_key is not None)
            credential_access.revoke(self.run_id, self.gateway, self._routed())
            let_go(self.run, self.status.sandbox_name)
            inputs.remove_own_sandbox(self.run, spec, self.status.sandbox_name)
        self._write_status(ending.phase, message, reason=ending.reason)
        self._condition(C.COMPLETE, True, ending.reason, message)
        self.status.completed_at = utcnow()
        self.status.result = RunResult(
            exit_code=ending.exit_code,
            is_error=ending.phase != RunPhase.SUCCEEDED,
            summary=ev.one_line(message, 1000),
        )
        self._flush(events=False)

    def _routed(self) -> bool:
        return any(
            c.type == C.CREDENTIAL_ROUTES and c.status == "True" for c in self.status.conditions
        )

    def _finish(self, spec: AgentRunSpec) -> None:
        """Remove the run's own sandbox, then write the final status: the last act, since a
        terminal phase is what ends the daemon."""
        terminal = self.summary.terminal
        assert terminal is not None
        data = terminal["data"]
        model_access.revoke(self.run_id, self.gateway, spec.model_key is not None)
        credential_access.revoke(self.run_id, self.gateway, self._routed())
        host_asks.ASKS.forget(self.run_id)
        spending.METERED.forget(self.run_id)
        let_go(self.run, self.status.sandbox_name)
        inputs.remove_own_sandbox(self.run, spec, self.status.sandbox_name)
        inputs.ended_in(self.run, self.status.sandbox_name)
        phase, reason = RunPhase(data["phase"]), R(data.get("reason") or data["phase"])
        self._write_status(phase, data["message"], reason=reason)
        self._condition(C.COMPLETE, True, reason, data["message"])
        self.status.completed_at = parse_time(terminal["time"])
        self.status.result = decide.final_result(self.summary)
        self._flush()

    def _delivered(self, outcome: Outcome) -> list[Draft]:
        """A delivery's outcome into the status (and an Event: for a delivery, or a Warning);
        its event for the log. A failure that may pass is said, and raised to be tried again
        until DELIVERY_RETRY after the first."""
        if outcome.reason == R.DELIVERY_FAILED:
            previous = get_condition(self.status.conditions, C.DELIVERED)
            since = previous.last_transition_time if previous is not None else None
            until = (since or utcnow()) + DELIVERY_RETRY
            if utcnow() < until:
                said = f"{outcome.message} Trying again until {until:%H:%M:%S} UTC."
                self._condition(C.DELIVERED, False, R.DELIVERY_FAILED, said)
                self._flush(events=False)
                raise DeliveryPendingError(said)
        self.status.delivery = outcome.delivery or self.status.delivery
        self._condition(C.DELIVERED, outcome.delivered, outcome.reason, outcome.message)
        if outcome.delivered or outcome.reason.severity == Severity.WARNING:
            self.notices.append(Notice(outcome.reason, outcome.message))
        return outcome.drafts
