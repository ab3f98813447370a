"""What a run reads before and around its harness: its sandbox (found, made, marked active),
its Secrets, prompt and policy, and its own sandbox's removal at the end. The decisions are
``sandbox.py``'s and ``decide.py``'s; this module makes the calls. Sandboxes, their pods,
Workspaces and policies are read from what the operator's watches show (``kube.cache``: the
API only on a miss); Secrets and a prompt's ConfigMap from the API."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from paddock.agentruns import activity, claims, decide, gating, in_pod, taking
from paddock.agentruns import sandbox as sandboxes
from paddock.agentruns.asking import Answered, Asking
from paddock.agentruns.credential_access import Routed
from paddock.agentruns.decide import Wait
from paddock.agentruns.model_access import Access
from paddock.agentruns.sandbox import ReadySandbox, Verdict
from paddock.api.agentrun import AgentRunSpec, Reuse
from paddock.api.approvals import ApprovalState
from paddock.api.errors import describe
from paddock.api.policy import SandboxPolicySpec
from paddock.api.workspace import WorkspaceSpec
from paddock.harness import HARNESSES, Invocation
from paddock.harness.base import WorkspaceContext
from paddock.kube import client as kube
from paddock.kube.cache import CACHE
from paddock.render.projections import agent_skills, mcp_servers, render_agents_md
from paddock.runs.scrubbing import Scrubber
from paddock.times import utcnow
from paddock.vocab.names import (
    LAST_RUN_ANNOTATION,
)
from paddock.vocab.ownership import controlled_by

Obj = dict[str, Any]


def find_sandbox(run: Obj, spec: AgentRunSpec) -> Verdict:
    """Read the run's sandbox (and a template's Workspace), judge it, and act on the verdict:
    create the sandbox from the template, or mark it active. A Ready sandbox is checked to own
    the pod the run will exec into."""
    namespace = run["metadata"]["namespace"]
    if spec.pool_ref is not None:
        return taking.from_pool(run, spec, spec.pool_ref.name)
    pool, workspace_hash = None, ""
    if spec.sandbox_template is not None:
        pool = claims.matching_pool(spec.sandbox_template, CACHE.listed("SandboxPool", namespace))
        if pool is not None and spec.effective_reuse == Reuse.NONE:
            return taking.from_pool(run, spec, pool)
        workspace_name = spec.sandbox_template.workspace_ref.name
        workspace_hash = sandboxes.workspace_hash_of(
            CACHE.get("Workspace", namespace, workspace_name)
        )
    name = sandboxes.sandbox_name(run, spec, workspace_hash)
    if isinstance(name, sandboxes.Waiting):
        return Verdict(name)
    found = CACHE.get("Sandbox", namespace, name)
    if found is None and spec.effective_reuse == Reuse.THREAD:
        taken = taking.for_thread(run, spec, workspace_hash, pool)
        if taken is not None:
            return taken
    before = None
    if found is None and spec.effective_reuse == Reuse.THREAD:
        before = sandboxes.moved_from(namespace, spec, name, CACHE.listed("Sandbox", namespace))
    verdict = sandboxes.judge(run, spec, name, found, workspace_hash, before)
    if verdict.create is not None:
        kube.create(verdict.create)
    if verdict.touch:
        activity.touch(namespace, name, utcnow())
    if isinstance(verdict.state, ReadySandbox):
        pod = CACHE.get("Pod", namespace, verdict.state.pod)
        ready = verdict.state
        if pool is not None and claims.made_by(run, found):  # a thread's, the pool empty
            ready = replace(ready, pool=pool, claimed=False)
        return Verdict(sandboxes.check_pod(ready, pod))
    return verdict


def seen(event_type: str, run: Obj) -> None:
    """A watch event of a run: what decides the line for a sandbox is kept, so that a run
    finds the others of its sandbox without a read."""
    CACHE.seen(event_type, sandboxes.queue_view(run))


def queued(run: Obj, spec: AgentRunSpec, sandbox: ReadySandbox) -> Wait | None:
    """Whether the run waits for another run of its sandbox or thread to finish first."""
    others = CACHE.listed("AgentRun", run["metadata"]["namespace"])
    busy = sandboxes.busy(run, spec, sandbox.name, others)
    return None if busy is None else decide.waiting_for_sandbox(busy)


def command_policy(namespace: str, sandbox: ReadySandbox) -> SandboxPolicySpec | str | None:
    """The policy a run's command is checked against: None when the sandbox has none, a
    message when it cannot be had (deleted or made invalid since the sandbox was Ready)."""
    return parsed_policy(sandbox, policy_object(namespace, sandbox))


def policy_object(namespace: str, sandbox: ReadySandbox) -> Obj | None:
    """The sandbox's SandboxPolicy as the watches show it (None: inline, none or not there)."""
    choice = sandbox.policy
    if choice.inline is not None or choice.name is None:
        return None
    return CACHE.get("SandboxPolicy", choice.namespace or namespace, choice.name)


def parsed_policy(sandbox: ReadySandbox, found: Obj | None) -> SandboxPolicySpec | str | None:
    """The sandbox's policy from its object ``found`` (see ``command_policy``)."""
    choice = sandbox.policy
    if choice.inline is not None or choice.name is None:
        return choice.inline
    if found is None:
        return f"SandboxPolicy {choice.label} of Sandbox {sandbox.name} is not found"
    try:
        return SandboxPolicySpec.model_validate(found.get("spec") or {})
    except ValidationError as exc:
        return f"SandboxPolicy {choice.label} is invalid: " + "; ".join(describe(exc))


def workspace_scripts(namespace: str, sandbox: ReadySandbox) -> dict[str, str]:
    """The sandbox's Workspace's scripts: the aliases its policy may name."""
    return workspace_of(namespace, sandbox).scripts


def workspace_of(namespace: str, sandbox: ReadySandbox) -> WorkspaceSpec:
    """The sandbox's Workspace (empty when gone or invalid: the Sandbox reports that)."""
    found = CACHE.get("Workspace", namespace, sandbox.workspace)
    with contextlib.suppress(ValidationError):
        if found is not None:
            return WorkspaceSpec.model_validate(found.get("spec") or {})
    return WorkspaceSpec()


def scrubber_for(namespace: str, spec: AgentRunSpec, sandbox: ReadySandbox) -> Scrubber:
    """A scrubber of every secret value the run could see (for a run followed again after an
    operator restart): its own, its Secret prompt's, its Workspace's, both as they are now and
    as the sandbox's pod started with them (a rotated Secret reaches the pod's env at its next
    start, so its processes may still hold the old value)."""
    workspace_refs = workspace_of(namespace, sandbox).secret_refs()
    values = kube.secret_values(namespace, spec.secret_refs() + workspace_refs)
    started = (in_pod.started_secret_values(namespace, sandbox) or []) if workspace_refs else []
    return Scrubber([*values.values(), *started])


def remove_own_sandbox(run: Obj, spec: AgentRunSpec, name: str | None) -> None:
    """Delete the sandbox a ``reuse: none`` run made (or took from a pool), if it is still the
    one it controls."""
    if spec.sandbox_ref is not None or spec.effective_reuse != Reuse.NONE or not name:
        return
    meta = run["metadata"]
    found = CACHE.get("Sandbox", meta["namespace"], name)
    if found is not None and controlled_by(found, meta["uid"]):
        kube.delete("Sandbox", meta["namespace"], name, found["metadata"]["uid"])


def ended_in(run: Obj, name: str | None) -> None:
    """Mark the end of the run on its sandbox, when that is snapshotted after each run: the
    sandbox's reconcile takes the snapshot."""
    namespace = run["metadata"]["namespace"]
    found = CACHE.get("Sandbox", namespace, name) if name else None
    if found is None or found["metadata"].get("deletionTimestamp"):
        return
    if ((found.get("spec") or {}).get("lifecycle") or {}).get("snapshot") != "after-run":
        return
    annotations = {LAST_RUN_ANNOTATION: run["metadata"]["uid"][:8]}
    kube.patch("Sandbox", namespace, str(name), {"metadata": {"annotations": annotations}})


def invocation(
    spec: AgentRunSpec,
    policy: SandboxPolicySpec | str | None,
    workspace: WorkspaceSpec,
    access: Access | None = None,
    routes: Routed | None = None,
) -> Invocation:
    """How the run's harness starts: through Paddock's gate when the sandbox has a policy
    and the harness has a gate; ``access``: its model's (the gateway's model route, which
    holds its key); ``routes``: its credential routes (the gateway may hold the MCP servers'
    secret headers)."""
    harness = HARNESSES[spec.harness]
    held = routes is not None and routes.held
    context = workspace_context(workspace, str(spec.harness), held)
    context = replace(context, model_url=access.model_url if access else None)
    if harness.gate is not None and isinstance(policy, SandboxPolicySpec):
        return harness.gate.invocation(spec, policy, context)
    return harness.invocation(spec, context)


def is_gated(spec: AgentRunSpec, sandbox: ReadySandbox) -> bool:
    """Whether the run's harness goes through the gate (its sidecar runs a server for it)."""
    return HARNESSES[spec.harness].gate is not None and sandbox.policy.label is not None


def workspace_context(spec: WorkspaceSpec, harness: str, held: bool = False) -> WorkspaceContext:
    """What the Workspace gives the agent, for a harness that does not read it from the
    workspace's files (``held``: without the MCP servers' secret headers, a gateway's)."""
    return WorkspaceContext(
        instructions=render_agents_md(spec),
        skills=agent_skills(spec),
        mcp=mcp_servers(spec, held).get(harness, {}),
    )


def judge_gate(
    namespace: str,
    spec: AgentRunSpec,
    sandbox: ReadySandbox,
    requests: dict[str, bytes],
    asking: Asking,
    hosts: set[str] = frozenset(),  # type: ignore[assignment]
) -> Answered | None:
    """Judge the requests the harness's gate sent (through the sidecar), the hosts the egress
    gateway asked about that are not approvals yet, and the approvals pending; None when there
    is nothing to judge."""
    gate = HARNESSES[spec.harness].gate
    pending = any(a.state == ApprovalState.PENDING for a in asking.approvals)
    new_hosts = hosts - {a.target for a in asking.approvals if a.kind == "network"}
    if not ((requests and gate is not None) or pending or new_hosts):
        return None
    policy = command_policy(namespace, sandbox)
    if policy is None:
        return None
    if isinstance(policy, str):  # gone or invalid since the launch: nothing is allowed
        policy = SandboxPolicySpec.model_validate({"commands": {"default": "deny"}})
    scripts = workspace_scripts(namespace, sandbox) if requests else {}
    request_of = gate.request_of if gate is not None else _no_request
    return gating.answer(requests, policy, scripts, request_of, asking, hosts)


def _no_request(_: dict[str, Any]) -> None:
    return None
