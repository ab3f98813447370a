"""Deciding each step of a run. Pure: what the service observed (the spec, the clock, the
sandbox's verdict) in; what to do (wait, launch, end) out: the waits and endings every step
may come to, and how a run is summed up at its end. A running run's polls are decided in
``following.py``; the start as a whole in ``start.py``. The lifecycle these functions spell
out is in docs/runs.md."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from paddock.agentruns.asking import (
    COMMAND_REQUEST,
    Answered,
    Asking,
    ask_command,
    not_approved,
    request_of,
)
from paddock.agentruns.sandbox import ReadySandbox, Unusable, Verdict, Waiting
from paddock.api.agentrun import (
    AgentRunSpec,
    AgentRunStatus,
    EventSummary,
    RunPhase,
    RunResult,
)
from paddock.api.approvals import Approval, ApprovalState, visible
from paddock.api.budget import Usage, UsageSource
from paddock.api.fields import parse_duration
from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import RunReason as R
from paddock.policy.gate import Judged
from paddock.runs import events as ev
from paddock.runs.events import Draft, RunSummary


@dataclass(frozen=True)
class Wait:
    """Not started yet, for a reason the condition ``condition`` names."""

    phase: RunPhase
    condition: C
    reason: R
    message: str
    sandbox: str | None = None


@dataclass(frozen=True)
class Ending:
    """How the run ends: its phase, why, and what the last events say."""

    phase: RunPhase
    reason: R
    message: str
    exit_code: int | None = None
    stderr: str = ""
    drafts: tuple[Draft, ...] = ()


def digest(nonce: str) -> str:
    return hashlib.sha256(nonce.encode()).hexdigest()


def genuine(nonce: str, expected_digest: str | None) -> bool:
    """Whether a completion record's nonce is the run's own (its digest is in the status)."""
    return bool(expected_digest) and secrets.compare_digest(digest(nonce), expected_digest or "")


def abort_message(phase: RunPhase, spec: AgentRunSpec) -> str:
    if phase == RunPhase.CANCELLED:
        return "cancelled: spec.cancel is true"
    return f"timed out: the run took longer than its timeout of {spec.timeout}"


def abort(spec: AgentRunSpec, created: datetime | None, now: datetime) -> Ending | None:
    """Cancelled by the spec, or past its deadline (counted from the run's creation)."""
    if spec.cancel:
        phase, reason = RunPhase.CANCELLED, R.CANCELLED
    elif created is not None and now >= created + parse_duration(spec.timeout):
        phase, reason = RunPhase.TIMED_OUT, R.TIMED_OUT
    else:
        return None
    return Ending(phase, reason, abort_message(phase, spec))


def until_deadline(spec: AgentRunSpec, created: datetime | None, now: datetime) -> float | None:
    """Seconds until the run times out (at least a tenth); None when it cannot be known."""
    if created is None:
        return None
    left = (created + parse_duration(spec.timeout) - now).total_seconds()
    return max(left, 0.1)


def before_launch(
    namespace: str, missing_secrets: list[str], missing_prompt: str | None, verdict: Verdict | None
) -> Wait | Ending | ReadySandbox:
    """Whether the run can start: its Secrets and prompt exist and its sandbox is Ready."""
    if missing_secrets:
        message = (
            f"Secret keys not found in namespace {namespace}: {', '.join(missing_secrets)}; "
            "the run starts when they exist"
        )
        return Wait(RunPhase.PENDING, C.SECRETS_FOUND, R.SECRET_NOT_FOUND, message)
    if missing_prompt:
        message = (
            f"the prompt's ConfigMap key {missing_prompt} is not found in namespace "
            f"{namespace}; the run starts when it exists"
        )
        return Wait(RunPhase.PENDING, C.PROMPT_FOUND, R.PROMPT_NOT_FOUND, message)
    assert verdict is not None
    state = verdict.state
    if isinstance(state, Waiting):
        return waiting_for_sandbox(state)
    if isinstance(state, Unusable):
        return Ending(RunPhase.FAILED, state.reason, state.message)
    return state


def waiting_for_sandbox(state: Waiting) -> Wait:
    return Wait(
        RunPhase.WAITING_FOR_SANDBOX, C.SANDBOX_READY, state.reason, state.message, state.name
    )


@dataclass(frozen=True)
class Asked:
    """A ``command`` run's command that needs a person's approval: the approval as it
    stands, and how the run ends when it was refused (None: pending, or approved)."""

    answered: Answered
    ending: Ending | None

    @property
    def pending(self) -> bool:
        return bool(self.answered.pending)


def gated(
    policy: SandboxPolicySpec | str | None, judged: Judged | None, asking: Asking
) -> Wait | Ending | Asked | None:
    """Whether a ``command`` run may launch: its policy is had and allows the command, or a
    person approved it (a refused or expired approval ends the run)."""
    if isinstance(policy, str):
        return Wait(RunPhase.WAITING_FOR_SANDBOX, C.SANDBOX_READY, R.POLICY_NOT_FOUND, policy)
    if judged is None or judged.decision == Decision.ALLOW:
        return None
    if judged.decision == Decision.DENY:
        return Ending(RunPhase.FAILED, R.POLICY_DENIED, judged.message("The command"))
    answered = ask_command(judged, asking)
    answer = answered.answers.get(COMMAND_REQUEST)
    if answer is None or answer.startswith("allow"):
        return Asked(answered, None)
    approval = next(a for a in answered.approvals if request_of(a) == COMMAND_REQUEST)
    reason = R.APPROVAL_EXPIRED if approval.state == ApprovalState.EXPIRED else R.APPROVAL_DENIED
    message = not_approved(approval, judged.command)
    return Asked(answered, Ending(RunPhase.FAILED, reason, message[:1].upper() + message[1:]))


def awaiting(pending: list[Approval], run: str) -> str | None:
    """The run's message while approvals are pending (None: none is)."""
    if not pending:
        return None
    first = pending[0]
    more = f" and {len(pending) - 1} more" if len(pending) > 1 else ""
    target = ev.one_line(visible(first.target), 120)
    return (
        f"waiting for approval of request {first.id}, {first.kind} `{target}`{more}: "
        f"paddock approve {run} {first.id}, or paddock deny {run} {first.id}"
    )


def sandbox_ready(ready: ReadySandbox) -> Draft:
    """The run's sandbox.ready event: which sandbox, and how it started (restored from a
    snapshot, with no setup, or set up)."""
    data = {"sandbox": ready.name, "pod": ready.pod, "policy": ready.policy.label}
    data["outcome"] = "sandbox.restored" if ready.restored_from else "sandbox.prepared"
    if ready.restored_from:
        data["restoredFrom"] = ready.restored_from
    if ready.pool:
        data["pool"], data["taken"] = ready.pool, "claimed" if ready.claimed else "created"
    return Draft(ev.SANDBOX_READY, f"sandbox {ready.name} is ready", data)


def launch_failure(spec: AgentRunSpec, pod: str, exit_code: int, said: str) -> Ending:
    message = f"starting {spec.harness} in pod {pod} failed (exit {exit_code}): {said}"
    return Ending(RunPhase.FAILED, R.LAUNCH_FAILED, message)


def sandbox_lost(message: str) -> Ending:
    return Ending(RunPhase.FAILED, R.SANDBOX_LOST, message)


def gate_lost(pod: str, age: int | None) -> Ending:
    """The gate's server in the sandbox's sidecar stopped (killed, or its container
    restarted): the harness's commands cannot be judged, and are refused, so the run ends."""
    said = "is gone" if age is None else f"has not answered for {age}s"
    message = (
        f"the policy gate in the sidecar of pod {pod} {said}: the agent's commands could not "
        "be judged and were refused"
    )
    return Ending(RunPhase.FAILED, R.GATE_LOST, message)


def terminal_event(ending: Ending) -> Draft:
    """The last event of a run: ``run.completed``, ``run.failed`` or ``run.aborted``."""
    kind = {RunPhase.SUCCEEDED: ev.RUN_COMPLETED, RunPhase.FAILED: ev.RUN_FAILED}.get(
        ending.phase, ev.RUN_ABORTED
    )
    data: dict[str, object] = {
        "phase": str(ending.phase),
        "exitCode": ending.exit_code,
        "message": ending.message,
    }
    if ending.reason not in (R.SUCCEEDED, R.FAILED, R.CANCELLED, R.TIMED_OUT):
        data["reason"] = str(ending.reason)  # a reason more specific than the phase
    if ending.stderr:
        data["stderrTail"] = ending.stderr
    return Draft(kind, ending.message, data)


def summarise(status: AgentRunStatus, summary: RunSummary) -> None:
    """The status fields that come from the log's events: counts, the last events, session,
    usage, changed files."""
    status.event_count = summary.next_seq
    status.last_events = [
        EventSummary(seq=e["seq"], type=e["type"], time=e["time"], summary=e["summary"])
        for e in summary.last
    ]
    if summary.session_id:
        status.session_id = summary.session_id
    if summary.usage:
        usage = Usage.model_validate(summary.usage)
        usage.tokens = (usage.input_tokens or 0) + (usage.output_tokens or 0)
        gateway = summary.metered is not None
        usage.source = UsageSource.GATEWAY if gateway else UsageSource.HARNESS
        status.usage = usage
    if summary.changed_files:
        status.changed_files = list(summary.changed_files)


def final_result(summary: RunSummary) -> RunResult:
    """The run's result from its terminal event (the log is the record: a restarted operator
    writes the same)."""
    assert summary.terminal is not None
    data = summary.terminal["data"]
    text = (summary.result or {}).get("text") or data["message"]
    return RunResult(
        exit_code=data.get("exitCode"),
        is_error=data["phase"] != RunPhase.SUCCEEDED,
        summary=ev.one_line(str(text), 1000),
    )
