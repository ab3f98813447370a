"""Health as GitOps tools read it: kstatus (what Flux's kustomize-controller waits on) and the
Argo CD health checks the chart ships. Every kind's status carries ``Reconciling`` (True: the
operator is still bringing the object about, or waits for something that may come) and
``Stalled`` (True: it cannot get there until a person changes something), and ``Ready`` (the
Workspace's, Sandbox's and SandboxPool's own; for a SandboxPolicy, whether it is valid; for an
AgentRun, whether it succeeded). Each is derived here, in one place, from the kind's own phase
and conditions, and carries the generation it describes.

kstatus reads, in order: ``status.observedGeneration`` behind ``metadata.generation`` is
InProgress; ``Reconciling=True`` is InProgress; ``Stalled=True`` is Failed; ``Ready=False``
is InProgress; anything else is Current. So a valid policy, a Ready sandbox or pool and a run
that succeeded are Current; an invalid policy, a sandbox refused for its spec, a run that
failed (or was cancelled, or timed out) and a run that cannot start (its sandbox, pool or
Secrets missing past ``STALL_AFTER``) are Failed, with the reason a person acts on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from paddock.api.common import Condition, ConditionStatus
from paddock.api.conditions import get_condition, set_condition
from paddock.api.reasons import ConditionType as C

# How long a run may wait for what it names (its sandbox, pool, Secrets, prompt) before it is
# said to be unable to start, unless the operator is told otherwise
# (PADDOCK_RUN_START_GRACE_SECONDS): what one GitOps apply creates together is there well before.
STALL_AFTER = timedelta(minutes=5)

# A Sandbox Pending for one of these cannot get further until its spec, its Workspace or its
# policy is changed. (A part the API server refused is tried again, a quota or a webhook
# may let it through: under way, unless the refusal failed the sandbox.)
SANDBOX_STALLS = frozenset(
    {
        "InvalidSpec", "WorkspaceInvalid", "PolicyInvalid", "PolicyRequired", "PolicyDenied",
        "ApprovalRequired", "WorkspaceTooLarge", "NameConflict",
    }
)  # fmt: skip
# What a run waits for that may never come; past STALL_AFTER it cannot start.
RUN_WAITS = frozenset(
    {
        "SandboxNotFound", "PoolNotFound", "SandboxInPool", "PoolInvalid", "SandboxInvalid",
        "SecretNotFound", "PromptNotFound", "PolicyNotFound",
    }
)  # fmt: skip
NEVER = datetime.min.replace(tzinfo=UTC)
RUN_SUCCEEDED = "Succeeded"
RUN_ENDED = frozenset({"Failed", "Cancelled", "TimedOut"})


@dataclass(frozen=True)
class Health:
    """Where the object is, for GitOps tools: Ready (None: the kind's own Ready stays),
    still being brought about, or stuck until a person acts; and why."""

    ready: bool | None
    reconciling: bool
    stalled: bool
    reason: str
    message: str


def _reason(conditions: list[Condition], type_: C, fallback: str) -> tuple[str, str]:
    found = get_condition(conditions, type_)
    if found is None:
        return fallback, ""
    return found.reason or fallback, found.message


def _own_ready(conditions: list[Condition], stalls: frozenset[str] = frozenset()) -> Health:
    """From the kind's own Ready condition: True is done; False is stuck for ``stalls``
    reasons, else still under way."""
    found = get_condition(conditions, C.READY)
    if found is None:
        return Health(None, True, False, "Reconciling", "The operator has not reported yet.")
    if found.status == ConditionStatus.TRUE:
        return Health(None, False, False, found.reason, found.message)
    stuck = found.reason in stalls
    return Health(None, not stuck, stuck, found.reason, found.message)


def of_workspace(conditions: list[Condition]) -> Health:
    return _own_ready(conditions, frozenset({"InvalidSpec"}))


def of_pool(conditions: list[Condition]) -> Health:
    return _own_ready(conditions, frozenset({"InvalidSpec"}))


def of_policy(conditions: list[Condition]) -> Health:
    found = get_condition(conditions, C.VALID)
    if found is None:
        return Health(False, True, False, "Reconciling", "The operator has not reported yet.")
    valid = found.status == ConditionStatus.TRUE
    return Health(valid, False, not valid, found.reason, found.message)


def of_sandbox(phase: str | None, conditions: list[Condition]) -> Health:
    """A paused sandbox is neither under way nor stuck (kstatus reads its Ready=False as
    InProgress; Argo CD's check says Suspended)."""
    health = _own_ready(conditions, SANDBOX_STALLS)
    if phase == "Failed":
        return Health(None, False, True, health.reason, health.message)
    if phase == "Paused":
        return Health(None, False, False, health.reason, health.message)
    return health


def of_run(
    phase: str | None,
    conditions: list[Condition],
    created: datetime | None,
    now: datetime,
    stall_after: timedelta = STALL_AFTER,
) -> Health:
    if phase == RUN_SUCCEEDED:
        reason, message = _reason(conditions, C.COMPLETE, RUN_SUCCEEDED)
        return Health(True, False, False, reason, message)
    if phase in RUN_ENDED:
        reason, message = _reason(conditions, C.COMPLETE, str(phase))
        return Health(False, False, True, reason, message)
    # What it waits for now: of the things it waits for in turn, the one that changed last (an
    # earlier one, once passed, stays as it was until the run starts).
    waits = [
        c
        for c in conditions
        if c.type in (C.SECRETS_FOUND, C.PROMPT_FOUND, C.SANDBOX_READY)
        and c.status != ConditionStatus.TRUE
    ]
    waiting = max(waits, key=lambda c: c.last_transition_time or NEVER, default=None)
    if waiting is None or phase in ("Running", "AwaitingApproval"):
        return Health(
            False, True, False, str(phase or "Pending"), f"The run is {phase or 'Pending'}."
        )
    late = created is not None and now - created >= stall_after
    stuck = late and waiting.reason in RUN_WAITS
    return Health(False, not stuck, stuck, waiting.reason, waiting.message)


def with_health(
    conditions: list[Condition], health: Health, generation: int | None, now: datetime
) -> list[Condition]:
    """The conditions with Reconciling, Stalled and (where the kind's Ready is derived here)
    Ready set from ``health``; each, written with this status, describes ``generation``."""
    conditions = [
        c
        if c.observed_generation == generation
        else c.model_copy(update={"observed_generation": generation})
        for c in conditions
    ]
    wanted = [(C.RECONCILING, health.reconciling), (C.STALLED, health.stalled)]
    if health.ready is not None:
        wanted.insert(0, (C.READY, health.ready))
    for type_, value in wanted:
        conditions = set_condition(
            conditions, type_, value, health.reason, health.message, generation=generation, now=now
        )
    return conditions
