"""A run's start decided from a world built in the test (``start.decide_start``, pure): what
it waits for and why, how it ends before its harness, when a person decides first, and what a
launch is given; and the conditions that say so, set in one place."""

from __future__ import annotations

import base64
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from paddock.agentruns import start
from paddock.agentruns.asking import Asking
from paddock.agentruns.decide import Ending, Wait
from paddock.agentruns.sandbox import ReadySandbox, Unusable, Verdict, Waiting
from paddock.api.agentrun import AgentRunSpec, RunPhase
from paddock.api.approvals import ApprovalChoice, ApprovalState
from paddock.api.common import Condition
from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import RunReason as R
from paddock.api.workspace import WorkspaceSpec
from paddock.policy.choice import PolicyChoice

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
RUN = {"metadata": {"name": "fix", "namespace": "team", "uid": "u-1"}}
BOX = ReadySandbox("box", "box-pod", "app", "s-1", PolicyChoice(name="team"))
ALLOW = SandboxPolicySpec.model_validate({"commands": {"default": "allow"}})
ASK = SandboxPolicySpec.model_validate({"commands": {"default": "ask"}})
DENY = SandboxPolicySpec.model_validate({"commands": {"default": "deny"}})


def _spec(**fields: Any) -> AgentRunSpec:
    return AgentRunSpec.model_validate({"sandboxRef": {"name": "box"}, "harness": "command",
                                        "command": "make test", **fields})  # fmt: skip


def _secret(**data: str) -> dict[str, Any]:
    return {"data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def _world(**parts: Any) -> start.StartWorld:
    return start.StartWorld("team", **{"verdict": Verdict(BOX), "policy": ALLOW, **parts})


def _context(approvals: Any = (), choices: Any = None) -> start.Context:
    asking = Asking(list(approvals), choices or {}, NOW, timedelta(minutes=5), "5m",
                    token=lambda: "abc")  # fmt: skip
    return start.Context(asking, NOW)


def _decide(world: start.StartWorld, spec: AgentRunSpec | None = None, **context: Any) -> Any:
    return start.decide_start(world, RUN, spec or _spec(), _context(**context))


def test_a_missing_secret_key_or_prompt_waits_before_the_sandbox_is_looked_for() -> None:
    spec = _spec(secrets=[{"name": "TOKEN", "secretKeyRef": {"name": "api", "key": "token"}}])
    waited = _decide(_world(verdict=None), spec)
    assert isinstance(waited, Wait)
    assert (waited.condition, waited.reason) == (C.SECRETS_FOUND, R.SECRET_NOT_FOUND)
    assert "api/token" in waited.message
    prompted = _spec(harness="claude-code", command=None,
                     promptFrom={"configMapKeyRef": {"name": "prompts", "key": "fix"}})  # fmt: skip
    waited = _decide(_world(verdict=None, configmap={"data": {"other": "x"}}), prompted)
    assert isinstance(waited, Wait)
    assert (waited.condition, waited.reason) == (C.PROMPT_FOUND, R.PROMPT_NOT_FOUND)


def test_a_sandbox_not_ready_waits_and_an_unusable_one_ends_the_run() -> None:
    waiting = Verdict(Waiting("box", R.SANDBOX_NOT_READY, "Sandbox box is SettingUp"))
    waited = _decide(_world(verdict=waiting))
    assert isinstance(waited, Wait)
    assert (waited.phase, waited.sandbox) == (RunPhase.WAITING_FOR_SANDBOX, "box")
    ended = _decide(_world(verdict=Verdict(Unusable("box", R.SANDBOX_FAILED, "it failed"))))
    assert isinstance(ended, Ending)
    assert ended.phase == RunPhase.FAILED


def test_a_run_queued_behind_another_waits_unless_its_harness_was_launched_before() -> None:
    queued = Wait(RunPhase.WAITING_FOR_SANDBOX, C.SANDBOX_READY, R.SANDBOX_BUSY, "behind x")
    assert _decide(_world(queued=queued)) == queued
    launched = _decide(_world(queued=queued, policy=DENY, launched=True))
    assert isinstance(launched, start.Launch)
    assert launched.launched  # followed as it is: not judged, queued or launched again


@pytest.mark.parametrize(
    ("policy", "expected", "counted"),
    [
        (ALLOW, start.Launch, Decision.ALLOW),
        (DENY, start.Refused, Decision.DENY),
        (ASK, start.Approving, Decision.ASK),
        ("SandboxPolicy team of Sandbox box is not found", Wait, None),
        (None, start.Launch, Decision.ALLOW),  # an unrestricted sandbox's: allowed, and counted
    ],
    ids=["allowed", "denied", "asked", "policy-gone", "no-policy"],
)
def test_a_command_runs_as_its_sandboxs_policy_says_and_is_counted_once(
    policy: Any, expected: type, counted: Decision | None
) -> None:
    decided = _decide(_world(policy=policy))
    assert isinstance(decided, expected)
    assert getattr(decided, "judged", None) == counted
    if isinstance(decided, start.Refused):
        assert decided.ending.reason == R.POLICY_DENIED
        assert decided.sandbox == BOX
    if isinstance(decided, Wait):
        assert decided.reason == R.POLICY_NOT_FOUND
    if isinstance(decided, start.Approving):
        assert decided.asked.pending


def test_an_agent_goes_on_to_its_gate_unless_its_policy_cannot_be_had() -> None:
    agent = _spec(harness="claude-code", command=None, prompt="fix it")
    assert isinstance(_decide(_world(policy=DENY), agent), start.Launch)
    waited = _decide(_world(policy="SandboxPolicy team is invalid: x"), agent)
    assert isinstance(waited, Wait)
    assert waited.reason == R.POLICY_NOT_FOUND


def test_a_persons_decision_launches_the_command_or_ends_the_run() -> None:
    asked = _decide(_world(policy=ASK))
    assert isinstance(asked, start.Approving)
    (approval,) = asked.asked.answered.approvals
    approve = {approval.id: (ApprovalChoice.APPROVE, approval.digest)}  # the text shown
    approved = _decide(_world(policy=ASK), approvals=[approval], choices=approve)
    assert isinstance(approved, start.Launch)
    assert approved.asked is not None
    assert approved.judged is None  # (counted when it was asked)
    assert [a.state for a in approved.asked.answered.approvals] == [ApprovalState.APPROVED]
    deny = {approval.id: (ApprovalChoice.DENY, approval.digest)}
    refused = _decide(_world(policy=ASK), approvals=[approval], choices=deny)
    assert isinstance(refused, start.Approving)
    assert refused.asked.ending is not None
    assert refused.asked.ending.reason == R.APPROVAL_DENIED


def test_a_launch_is_given_the_runs_secret_env_its_prompt_and_its_days_ceilings() -> None:
    spec = _spec(
        harness="claude-code", command=None,
        secrets=[{"name": "TOKEN", "secretKeyRef": {"name": "api", "key": "token"}}],
        promptFrom={"secretKeyRef": {"name": "api", "key": "prompt"}},
    )  # fmt: skip
    daily = {"budget": {"perNamespaceDaily": {"tokens": 500}}}
    policy = SandboxPolicySpec.model_validate({"commands": {"default": "allow"}, **daily})
    world = _world(secrets={"api": _secret(token="t0k", prompt="fix the tests")}, policy=policy)
    launch = start.decide_start(world, RUN, spec, replace(_context(), routed=True))
    assert isinstance(launch, start.Launch)
    assert launch.env == {"TOKEN": "t0k"}
    assert start.prompt(world, spec) == "fix the tests"
    assert launch.daily is not None
    assert launch.daily.tokens == 500
    assert set(start.scrubbed_values(world, spec)) == {"t0k", "fix the tests"}


def test_work_that_could_never_be_delivered_ends_the_run_before_its_harness() -> None:
    spec = _spec(deliver={"forge": "github", "credentialsSecret": {"name": "gh", "key": "t"}})
    world = _world(secrets={"gh": _secret(t="x")}, workspace=WorkspaceSpec())
    ended = _decide(world, spec)
    assert isinstance(ended, Ending)
    assert ended.reason == R.DELIVERY_UNDELIVERABLE
    assert "Workspace app has no git source" in ended.message


def test_the_conditions_of_a_start_are_said_in_one_place() -> None:
    wait = Wait(RunPhase.PENDING, C.WITHIN_BUDGET, R.BUDGET_EXHAUSTED, "spent")
    assert start.waiting(wait) == [(C.WITHIN_BUDGET, False, R.BUDGET_EXHAUSTED, "spent")]
    before = [Condition(type=C.WITHIN_BUDGET, status="False", reason=R.BUDGET_EXHAUSTED,
                        message="spent", lastTransitionTime=NOW)]  # fmt: skip
    said = start.started(BOX, before)
    assert [(c[0], c[1]) for c in said] == [(C.SANDBOX_READY, True), (C.WITHIN_BUDGET, True)]
    # A condition it never waited on is not set at all.
    assert [c[0] for c in start.started(BOX, [])] == [C.SANDBOX_READY]
