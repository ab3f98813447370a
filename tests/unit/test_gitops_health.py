"""Health as GitOps tools read it (api/health.py), decided: for each kind in each state, whether
it is Ready, still being brought about (Reconciling) or stuck until a person acts (Stalled),
with the reason a person acts on, and the generation each condition describes. kstatus (Flux's
library, built from its module) and the Argo CD check the chart ships read these objects in
tests/unit/test_gitops_checks.py and on the local control plane in
tests/integration/test_gitops.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from paddock.api import health
from paddock.api.common import Condition, ConditionStatus
from paddock.api.conditions import get_condition

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def _c(type_: str, status: bool, reason: str, message: str = "") -> Condition:
    text = ConditionStatus.TRUE if status else ConditionStatus.FALSE
    return Condition(type=type_, status=text, reason=reason, message=message)


def _flags(found: health.Health) -> tuple[bool | None, bool, bool, str]:
    return found.ready, found.reconciling, found.stalled, found.reason


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([_c("Ready", True, "Valid")], (None, False, False, "Valid")),
        ([_c("Ready", False, "InvalidSpec", "bad")], (None, False, True, "InvalidSpec")),
        ([_c("Ready", False, "SecretNotFound")], (None, True, False, "SecretNotFound")),
        ([], (None, True, False, "Reconciling")),
    ],
)
def test_a_workspace(conditions: list[Condition], expected: tuple[object, ...]) -> None:
    assert _flags(health.of_workspace(conditions)) == expected


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([_c("Valid", True, "Valid")], (True, False, False, "Valid")),
        ([_c("Valid", True, "RunsWritableFiles")], (True, False, False, "RunsWritableFiles")),
        ([_c("Valid", False, "RulesIneffective")], (False, False, True, "RulesIneffective")),
        ([_c("Valid", False, "InvalidSpec")], (False, False, True, "InvalidSpec")),
        ([], (False, True, False, "Reconciling")),
    ],
)
def test_a_policy(conditions: list[Condition], expected: tuple[object, ...]) -> None:
    assert _flags(health.of_policy(conditions)) == expected


@pytest.mark.parametrize(
    ("phase", "reason", "expected"),
    [
        ("Ready", "Ready", (None, False, False, "Ready")),
        ("SettingUp", "SettingUp", (None, True, False, "SettingUp")),
        ("Pending", "WorkspaceNotFound", (None, True, False, "WorkspaceNotFound")),
        ("Pending", "PolicyInvalid", (None, False, True, "PolicyInvalid")),
        ("Pending", "ApprovalRequired", (None, False, True, "ApprovalRequired")),
        ("Failed", "SetupFailed", (None, False, True, "SetupFailed")),
        ("Paused", "Paused", (None, False, False, "Paused")),
    ],
)
def test_a_sandbox(phase: str, reason: str, expected: tuple[object, ...]) -> None:
    conditions = [_c("Ready", phase == "Ready", reason)]
    assert _flags(health.of_sandbox(phase, conditions)) == expected


def test_a_pool() -> None:
    assert _flags(health.of_pool([_c("Ready", True, "Ready")])) == (None, False, False, "Ready")
    assert health.of_pool([_c("Ready", False, "Filling")]).reconciling
    assert health.of_pool([_c("Ready", False, "InvalidSpec")]).stalled


YOUNG, OLD = NOW - timedelta(seconds=30), NOW - health.STALL_AFTER


@pytest.mark.parametrize(
    ("phase", "conditions", "created", "expected"),
    [
        ("Succeeded", [_c("Complete", True, "Succeeded")], OLD, (True, False, False, "Succeeded")),
        ("Failed", [_c("Complete", True, "PolicyDenied", "no")], OLD,
         (False, False, True, "PolicyDenied")),
        ("TimedOut", [_c("Complete", True, "TimedOut")], OLD, (False, False, True, "TimedOut")),
        ("Cancelled", [_c("Complete", True, "Cancelled")], OLD, (False, False, True, "Cancelled")),
        ("Running", [], OLD, (False, True, False, "Running")),
        ("AwaitingApproval", [], OLD, (False, True, False, "AwaitingApproval")),
        # Waiting for what may never come: under way for a while, then stuck.
        ("WaitingForSandbox", [_c("SandboxReady", False, "SandboxNotFound")], YOUNG,
         (False, True, False, "SandboxNotFound")),
        ("WaitingForSandbox", [_c("SandboxReady", False, "SandboxNotFound")], OLD,
         (False, False, True, "SandboxNotFound")),
        ("Pending", [_c("SecretsFound", False, "SecretNotFound")], OLD,
         (False, False, True, "SecretNotFound")),
        # Waiting for what will come: never stuck.
        ("WaitingForSandbox", [_c("SandboxReady", False, "SandboxNotReady")], OLD,
         (False, True, False, "SandboxNotReady")),
    ],
)  # fmt: skip
def test_a_run(
    phase: str, conditions: list[Condition], created: datetime, expected: tuple[object, ...]
) -> None:
    assert _flags(health.of_run(phase, conditions, created, NOW)) == expected


def test_a_run_that_got_what_it_waited_for_is_no_longer_stuck() -> None:
    """Its Secret came, late: it waits now for its sandbox, which is being made (the Secret's
    condition stays as it was until the run starts)."""
    secret = _c("SecretsFound", False, "SecretNotFound").model_copy(
        update={"last_transition_time": OLD}
    )
    sandbox = _c("SandboxReady", False, "SandboxCreated").model_copy(
        update={"last_transition_time": NOW - timedelta(seconds=1)}
    )
    found = health.of_run("WaitingForSandbox", [secret, sandbox], OLD, NOW)
    assert _flags(found) == (False, True, False, "SandboxCreated")


def test_the_conditions_carry_the_generation_and_keep_the_kinds_own_ready() -> None:
    own = [_c("Ready", False, "PolicyInvalid", "fix the policy")]
    found = health.of_sandbox("Pending", own)
    conditions = health.with_health(own, found, 7, NOW)
    ready, stalled, reconciling = (get_condition(conditions, t) for t in
                                   ("Ready", "Stalled", "Reconciling"))  # fmt: skip
    # The Sandbox's own Ready, untouched but for the generation the whole status describes.
    assert ready == own[0].model_copy(update={"observed_generation": 7})
    assert stalled is not None
    assert reconciling is not None
    assert (stalled.status, stalled.reason, stalled.message) == ("True", "PolicyInvalid",
                                                                 "fix the policy")  # fmt: skip
    assert reconciling.status == "False"
    assert stalled.observed_generation == reconciling.observed_generation == 7
    # Nothing changed, nothing moves: the same list again (so no status write).
    assert health.with_health(conditions, found, 7, NOW + timedelta(hours=1)) == conditions
