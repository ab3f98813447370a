"""A run's start, decided as a reconcile is: from a world read once per step (``StartWorld``,
which ``observe.gather`` reads), one pure function (``decide_start``) says what to do (wait,
end, ask a person, or launch) and ``conditions`` the conditions that say so; ``Execution``
applies it. Nothing here reads or writes the API."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from paddock.agentruns import decide
from paddock.agentruns.asking import Asking
from paddock.agentruns.decide import Asked, Ending, Wait
from paddock.agentruns.sandbox import ReadySandbox, Verdict
from paddock.api.agentrun import AgentRunSpec, RunPhase
from paddock.api.budget import Budget
from paddock.api.common import Condition, ConditionStatus, SecretRef, stored_status
from paddock.api.conditions import get_condition
from paddock.api.policy import (
    Decision,
    KeyInSandbox,
    SandboxPolicySpec,
    SandboxPolicyStatus,
    SecretsInSandbox,
)
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import RunReason as R
from paddock.api.workspace import WorkspaceSpec
from paddock.forge import repos
from paddock.forge.errors import DeliveryError
from paddock.policy import budgets, model_keys, secrets_in_sandbox
from paddock.policy.gate import judge_command
from paddock.vocab import secret_data

Obj = dict[str, Any]
Cond = tuple[C, bool, R, str]  # a condition to set: type, status, reason, message

UNENFORCEABLE = (
    "The run cannot start: {whose} budget could not be enforced, since {why}. A budget is "
    "counted by the egress gateway's model route: give the run a modelKey, with the gateway "
    "installed (docs/budgets.md)."
)


@dataclass(frozen=True)
class StartWorld:
    """What a run's start decides from, each part read once in a step. The sandbox's parts are
    there only once it is found Ready."""

    namespace: str
    # Every Secret the run names (its env, model key, prompt and delivery credentials), and
    # those its sandbox gets (its Workspace's, its pod's as it started): by name, None when
    # not there.
    secrets: Mapping[str, Obj | None] = field(default_factory=dict)
    configmap: Obj | None = None  # the prompt's, when it comes from one
    verdict: Verdict | None = None  # its sandbox, judged (None: not looked for yet)
    workspace: WorkspaceSpec = field(default_factory=WorkspaceSpec)  # the sandbox's
    # The sandbox's policy: None when it has none; why, when it cannot be had.
    policy: SandboxPolicySpec | str | None = None
    policy_object: Obj | None = None  # its SandboxPolicy (None: inline, none or not there)
    pod: Obj | None = None  # the sandbox's
    queued: Wait | None = None  # another run of its sandbox or thread goes first
    launched: bool = False  # its harness was launched before (an operator stopped mid-start)


@dataclass(frozen=True)
class Context:
    """What the operator brings to the decision: its gateway, its rule on model keys, the
    run's approvals and the clock."""

    asking: Asking
    now: datetime
    routed: bool = False  # the run's model key goes to a gateway's model route
    refuse_keys: bool = False  # the operator refuses model keys in sandboxes
    refuse_secrets: bool = False  # the operator refuses secret values in sandboxes
    held: bool = False  # a gateway holds the MCP servers' secret headers


@dataclass(frozen=True)
class Launch:
    """Launch the run's harness in its sandbox (or, ``launched``, follow the one launched
    before), after recording what a person decided on the way (``asked``)."""

    sandbox: ReadySandbox
    env: dict[str, str]  # the run's secret env, for its harness
    budget: Budget | None = None  # the run's ceilings
    daily: Budget | None = None  # its namespace's day's, under its policy
    asked: Asked | None = None
    judged: Decision | None = None  # its command's judgement, counted once
    launched: bool = False


@dataclass(frozen=True)
class Approving:
    """A person decides first: the command's approval is pending, or was refused
    (``asked.ending``: how the run ends)."""

    sandbox: ReadySandbox
    asked: Asked
    judged: Decision | None = None  # the command's judgement, counted once


@dataclass(frozen=True)
class Refused:
    """The policy refuses the command: the run ends so, in its sandbox (whose ``sandbox.ready``
    the log says first)."""

    sandbox: ReadySandbox
    ending: Ending
    judged: Decision | None = None  # counted


Start = Wait | Ending | Approving | Refused | Launch


def decide_start(world: StartWorld, run: Obj, spec: AgentRunSpec, context: Context) -> Start:
    """What the run's start does now: wait (and why), end (and how), wait for a person's
    approval, or launch."""
    missing = secret_data.missing_keys(world.secrets, spec.secret_refs())
    no_prompt = None if missing else missing_prompt(world, spec)
    ready = decide.before_launch(world.namespace, missing, no_prompt, world.verdict)
    if not isinstance(ready, ReadySandbox):
        return ready
    policy = world.policy if isinstance(world.policy, SandboxPolicySpec) else None
    budget, held = may_start(world, spec, ready, policy, context)
    if not world.launched and (held or world.queued):
        return held or world.queued  # type: ignore[return-value]
    if (why := undeliverable(run, spec, ready.workspace, world.workspace)) is not None:
        return Ending(RunPhase.FAILED, R.DELIVERY_UNDELIVERABLE, why)
    daily = policy.budget.per_namespace_daily if policy and policy.budget else None
    launch = Launch(ready, secret_env(world, spec), budget, daily, launched=world.launched)
    if world.launched:
        return launch
    judged = None
    if spec.command is not None and not isinstance(world.policy, str):  # (no policy: allowed)
        judged = judge_command(policy, spec.command, world.workspace.scripts)
    if spec.command is None and not isinstance(world.policy, str):
        gate = None  # an agent: its gate answers from the policy, once it runs
    else:
        gate = decide.gated(world.policy, judged, context.asking)
    counted = judged.decision if judged is not None and not context.asking.approvals else None
    if isinstance(gate, Asked) and (gate.pending or gate.ending is not None):
        return Approving(ready, gate, counted)
    if isinstance(gate, Ending):
        return Refused(ready, gate, counted)
    if isinstance(gate, Wait):
        return gate
    asked = gate if isinstance(gate, Asked) else None
    return replace(launch, asked=asked, judged=counted)


def missing_prompt(world: StartWorld, spec: AgentRunSpec) -> str | None:
    """``configmap/key`` when the prompt is to come from a ConfigMap key that is not there.
    (A Secret prompt is one of the run's Secret references.)"""
    ref = spec.prompt_from.config_map_key_ref if spec.prompt_from else None
    if ref is None:
        return None
    data = (world.configmap or {}).get("data") or {}
    return None if ref.key in data else f"{ref.name}/{ref.key}"


def prompt(world: StartWorld, spec: AgentRunSpec) -> str | None:
    """The run's prompt: its own, or its ConfigMap's or Secret's key."""
    if spec.prompt_from is None:
        return spec.prompt
    if spec.prompt_from.config_map_key_ref is not None:
        key = spec.prompt_from.config_map_key_ref.key
        return str(((world.configmap or {}).get("data") or {}).get(key, ""))
    assert spec.prompt_from.secret_key_ref is not None
    pair = spec.prompt_from.secret_key_ref.pair
    return secret_data.values(world.secrets, [pair]).get(pair, "")


def secret_env(world: StartWorld, spec: AgentRunSpec) -> dict[str, str]:
    values = secret_data.values(world.secrets, [s.secret_key_ref.pair for s in spec.secrets])
    wanted = {s.name: s.secret_key_ref.pair for s in spec.secrets}
    return {name: values[ref] for name, ref in wanted.items() if ref in values}


def model_key(world: StartWorld, spec: AgentRunSpec) -> str:
    """The value of the run's model key ('' when it has none)."""
    if spec.model_key is None:
        return ""
    pair = spec.model_key.secret_key_ref.pair
    return secret_data.values(world.secrets, [pair]).get(pair, "")


def route_values(world: StartWorld) -> dict[SecretRef, str]:
    """The values of the Secrets the Workspace's credential routes name, and its MCP servers'
    secret headers (a gateway's to hold)."""
    refs = world.workspace.route_refs() + world.workspace.mcp_refs()
    return secret_data.values(world.secrets, refs)


def scrubbed_values(world: StartWorld, spec: AgentRunSpec) -> list[str]:
    """Every secret value the run could see as the Secrets are now: its own and its
    Workspace's (what its pod started with is the sandbox's to say: an exec)."""
    refs = spec.secret_refs() + world.workspace.secret_refs()
    return list(secret_data.values(world.secrets, refs).values())


def exposures(world: StartWorld, spec: AgentRunSpec, sandbox: str) -> list[model_keys.Exposure]:
    return model_keys.exposures(spec, world.workspace, sandbox, world.pod)


def may_start(
    world: StartWorld,
    spec: AgentRunSpec,
    sandbox: ReadySandbox,
    policy: SandboxPolicySpec | None,
    context: Context,
) -> tuple[Budget | None, Wait | Ending | None]:
    """The run's ceilings (None: it has none), and why it cannot start yet (its namespace's
    day is spent under its policy) or at all (its model key would be in the sandbox where that
    is refused, by its policy or the operator; a budget nothing would count)."""
    refusing = policy is not None and policy.secrets.in_sandbox == SecretsInSandbox.REFUSE
    if refusing or context.refuse_secrets:
        found = secrets_in_sandbox.of_run(
            spec, world.workspace, context.routed, world.pod, context.held
        )
        label = str(sandbox.policy.label) if refusing else None
        if (said := secrets_in_sandbox.refusal(found, label, context.refuse_secrets)) is not None:
            return None, Ending(RunPhase.FAILED, R.SECRETS_REFUSED, said)
    refusing = policy is not None and policy.model_key.in_sandbox == KeyInSandbox.REFUSE
    if refusing or context.refuse_keys:
        exposed = exposures(world, spec, sandbox.workspace)
        refs = [spec.model_key.secret_key_ref.pair, *(e.ref for e in exposed)] if (
            spec.model_key is not None) else []  # fmt: skip
        values = secret_data.values(world.secrets, refs)
        places = model_keys.placements(spec, exposed, context.routed, values)
        label = str(sandbox.policy.label) if refusing else None
        if (refused := model_keys.refusal(places, label, context.refuse_keys)) is not None:
            return None, Ending(RunPhase.FAILED, R.KEY_IN_SANDBOX_REFUSED, refused)
    limits = policy.budget if policy is not None else None
    budget = budgets.effective(spec.budget, limits)
    daily = limits.per_namespace_daily if limits is not None else None
    if (budget is not None or daily is not None) and not context.routed:
        whose = "its own" if spec.budget is not None else f"policy {sandbox.policy.label}'s"
        why = (
            "it names no modelKey"
            if spec.model_key is None
            else "the operator knows of no egress gateway's model route"
        )
        said = UNENFORCEABLE.format(whose=whose, why=why)
        return budget, Ending(RunPhase.FAILED, R.BUDGET_UNENFORCEABLE, said)
    if daily is not None and world.policy_object is not None:
        status = stored_status(SandboxPolicyStatus, world.policy_object)
        today = budgets.spent_on(status.daily_usage or [], world.namespace,
                                 budgets.day_of(context.now))  # fmt: skip
        waiting = budgets.exhausted(daily, today, world.namespace, str(sandbox.policy.label))
        if waiting:
            return budget, Wait(RunPhase.PENDING, C.WITHIN_BUDGET, R.BUDGET_EXHAUSTED, waiting)
    return budget, None


def undeliverable(
    run: Obj, spec: AgentRunSpec, workspace_name: str, workspace: WorkspaceSpec
) -> str | None:
    """Why the run's work could never be delivered, said before its harness starts."""
    if spec.deliver is None:
        return None
    source = workspace.source
    if source is None or source.git is None:
        return (f"The run's work cannot be delivered: spec.deliver needs a git repository, and "
                f"Workspace {workspace_name} has no git source.")  # fmt: skip
    meta = run["metadata"]
    try:
        repos.repository(source.git.url, spec.deliver.forge)
        repos.branch_name(spec.deliver.branch, meta["name"], spec.thread_id, meta["uid"])
    except DeliveryError as exc:
        return f"The run's work cannot be delivered: {exc.message}."
    return None


# -- the conditions that say where the start stands, in one place ----------------------------


def waiting(wait: Wait) -> list[Cond]:
    return [(wait.condition, False, wait.reason, wait.message)]


def started(sandbox: ReadySandbox, before: list[Condition]) -> list[Cond]:
    """A run whose harness starts: its sandbox Ready, and each condition it waited on (and
    only those) turned True."""
    found = [(C.SANDBOX_READY, True, R.SANDBOX_READY, f"Sandbox {sandbox.name} is Ready")]
    resolved = [
        (C.SECRETS_FOUND, True, R.SECRETS_FOUND, "Every Secret key the run names exists."),
        (C.PROMPT_FOUND, True, R.PROMPT_FOUND, "The prompt's ConfigMap key exists."),
        (C.WITHIN_BUDGET, True, R.WITHIN_BUDGET, "The namespace's day is not spent."),
    ]
    for cond in resolved:
        previous = get_condition(before, cond[0])
        if previous is not None and previous.status == ConditionStatus.FALSE:
            found.append(cond)
    return found
